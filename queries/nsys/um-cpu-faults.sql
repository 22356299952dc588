-- Unified Memory page faults on the CPU by the instruction that faulted: where host code
-- touches managed memory that was on the GPU (each fault migrates the page back). Same
-- numbers as `nsys stats -r um_cpu_page_faults_sum`, whose "CPU Instruction Address" is the
-- function nsys resolved the instruction to; the source file and line are there only when
-- nsys resolved them. A run captured without `--cuda-um-cpu-page-faults=true` is an error.
-- @param run    TEXT     run id or name (default: latest run)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @column faults        CPU page faults
-- @column instruction   function of the faulting instruction (or its address, unresolved)
-- @column source_file   its source file ('' or NULL: not resolved)
-- @column source_line   its source line (0: not resolved)
-- @column pages         distinct pages that faulted
-- @column module        module of the instruction (executable or library)
-- @column first_ns      first fault, ns
-- @column last_ns       last fault, ns
-- @display faults, pages, instruction, source_file, source_line, module
-- @alias um_cpu_page_faults_sum
-- @requires um_cpu_faults
-- @traced um_cpu_faults
SELECT count(*) AS faults, instruction, source_file, source_line, count(DISTINCT address) AS pages,
       string_agg(DISTINCT module, ', ' ORDER BY module) AS module, min(ts_ns) AS first_ns, max(ts_ns) AS last_ns
FROM um_cpu_faults
WHERE run_id = $run
GROUP BY instruction, source_file, source_line
ORDER BY faults DESC, instruction, source_file, source_line
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
