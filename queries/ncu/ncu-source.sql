-- Where in its source a kernel spends its time: ncu's Source page (Source Counters) summed
-- per kernel and source line, or per instruction (by=instruction), over the kernel's
-- launches (or one, launch=ID). Ranked by warp stall samples, which fall on an instruction
-- in proportion to the time warps spend at it; each row says why they waited (top_stalls:
-- the three largest reasons, % of the row's samples), what ran there (instructions,
-- predicated-on threads per instruction: 32 = no divergence or predication), and what its
-- memory accesses cost beyond the ideal: L2 sectors of uncoalesced global accesses and
-- shared-memory wavefronts of bank conflicts. Lines come from the kernel's line
-- information (Triton always has it; CUDA with -lineinfo); a library kernel's rows have
-- none (file and line NULL). source holds the line's text where the report carries the
-- source (ncu --import-source yes; tracekit capture does). A range (ncu --replay-mode
-- range/app-range) or a whole graph (--graph-profiling graph) runs several kernels: its
-- instructions count under the function they belong to (name: the name of a kernel launch of
-- it in the report, else its symbol without parameters; a graph has warp stall samples only). A run
-- profiled without the SourceCounters section (in --set full), or read from ncu's CSV pages
-- alone, is an error.
-- @param run     TEXT     run id or name, or 'all' (default: latest run)
-- @param kernel  TEXT     only launches (and functions of a range or a graph) whose name contains this text, case-insensitive (default: null)
-- @param launch  INTEGER  only the launch with this ncu ID (ncu-kernels' kernel_id; one the run lacks is an error) (min: 0) (default: null)
-- @param by      TEXT     one row per kernel and source line, or per kernel and instruction (one of: line, instruction) (default: line)
-- @param limit   INTEGER  rows to return; 0 = all (default: 0)
-- @column run_id                 run the launches belong to
-- @column name                   kernel name (demangled; in a range or a graph the function's name)
-- @column launches               launches (results) summed in the row
-- @column file                   source file (NULL: no line information)
-- @column line                   source line (NULL: no line information)
-- @column location               the file's name and the line, e.g. _cached.py:434 (NULL: no line information)
-- @column pc_offset              by=instruction: the instruction's offset in its function, bytes (NULL by line)
-- @column sass                   by=instruction: the SASS instruction (NULL by line)
-- @column source                 the line's text, where the report carries the source file (NULL otherwise)
-- @column samples                warp stall samples on the row's instructions
-- @column samples_pct            share of the kernel's samples (same launches), %
-- @column top_stalls             the largest stall reasons and their share of the row's samples
-- @column top_stall              the largest stall reason
-- @column instructions           distinct instructions (addresses) in the row
-- @column inst_executed          warp-level instructions executed
-- @column threads_per_inst       predicated-on threads per executed instruction (of 32)
-- @column l2_sectors             theoretical L2 sectors of global accesses
-- @column l2_excess_sectors      of those, beyond the ideal of coalesced accesses
-- @column l2_excess_pct          l2_excess_sectors / l2_sectors, %
-- @column shared_excess_wavefronts  shared-memory wavefronts beyond the ideal (bank conflicts)
-- @column divergent_branches     divergent branch targets
-- @display samples, samples_pct, top_stalls, location, source, pc_offset, sass, inst_executed, threads_per_inst, l2_excess_sectors, shared_excess_wavefronts, name
-- @requires ncu_kernels, ncu_source, ncu_source_stalls, ncu_source_lines
WITH launches AS (
    SELECT run_id, kernel_id, name
    FROM ncu_kernels
    WHERE ($run IS NULL OR run_id = $run) AND ($launch IS NULL OR kernel_id = $launch)
), asked AS (  -- read first: a launch filter must name a launch of the run, a kernel filter a launch's
               -- kernel or a function of a range or a graph
    SELECT CASE WHEN $launch IS NOT NULL
                     AND NOT EXISTS (FROM ncu_kernels WHERE ($run IS NULL OR run_id = $run) AND kernel_id = $launch)
                THEN error('ncu-source: no launch of ' || CASE WHEN $run IS NULL THEN 'any run' ELSE 'the run' END
                           || ' has ID ' || $launch || ' (`tracekit query ncu-kernels` lists them: kernel_id)')
                WHEN $kernel IS NULL OR count(*) > 0 THEN true
                ELSE error('ncu-source: no kernel of ' || CASE WHEN $run IS NULL THEN 'any run' ELSE 'the run' END
                           || ' has a name containing ''' || $kernel || ''' (`tracekit query ncu-kernels` lists them)')
                END AS ok
    FROM (SELECT name FROM ncu_kernels WHERE $run IS NULL OR run_id = $run
          UNION ALL
          SELECT DISTINCT function FROM ncu_source WHERE ($run IS NULL OR run_id = $run) AND function IS NOT NULL) n(name)
    WHERE $kernel IS NULL OR contains(lower(name), lower($kernel))
), checked AS (  -- read first, after asked (one error, the same each time, where both apply): the
                 -- error is raised even where the filters leave nothing
    SELECT CASE WHEN (SELECT ok FROM asked)
                     AND (count(*) > 0 OR NOT EXISTS (FROM ncu_kernels WHERE $run IS NULL OR run_id = $run)) THEN true
                ELSE error(ncu_lacks('ncu-source', $run, 'instruction-level data') || '; profile with ncu --section '
                           || 'SourceCounters (or --set full) and ingest the .ncu-rep (ncu''s CSV pages do not carry it)')
                END AS ok
    FROM (SELECT 1 FROM ncu_source WHERE $run IS NULL OR run_id = $run LIMIT 1)
), ins AS (  -- the instructions of the chosen launches, with their row's key
    SELECT s.* EXCLUDE (function), coalesce(s.function, l.name) AS name,
           CASE WHEN lower($by) = 'instruction' THEN s.pc_offset END AS key_pc
    FROM checked JOIN asked ON checked.ok AND asked.ok JOIN ncu_source s ON true
    JOIN launches l ON l.run_id = s.run_id AND l.kernel_id = s.kernel_id
    WHERE $kernel IS NULL OR contains(lower(l.name), lower($kernel)) OR contains(lower(s.function), lower($kernel))
), stalls AS (
    SELECT i.run_id, i.name, i.file, i.line, i.key_pc, st.reason, sum(st.samples) AS samples
    FROM ins i
    JOIN ncu_source_stalls st ON st.run_id = i.run_id AND st.kernel_id = i.kernel_id AND st.address = i.address
    GROUP BY ALL
), rows AS (
    SELECT run_id, name, count(DISTINCT kernel_id) AS launches, file, line, key_pc AS pc_offset,
           CASE WHEN key_pc IS NOT NULL THEN min(sass) END AS sass,
           sum(samples) AS samples,
           count(DISTINCT pc_offset) AS instructions,
           sum(inst_executed) AS inst_executed,
           sum(thread_inst_executed_pred_on) / nullif(sum(inst_executed), 0) AS threads_per_inst,
           sum(l2_sectors_global) AS l2_sectors,
           sum(l2_sectors_global_excess) AS l2_excess_sectors,
           sum(shared_wavefronts_excess) AS shared_excess_wavefronts,
           sum(divergent_branches) AS divergent_branches
    FROM ins
    GROUP BY run_id, name, file, line, key_pc
), named AS (  -- the largest reasons of each row, ties by name
    SELECT run_id, name, file, line, key_pc,
           arg_max(reason, (samples, reason)) AS top_stall,
           string_agg(reason || ' ' || CAST(round(100 * samples / total) AS INTEGER) || '%', ', ' ORDER BY samples DESC, reason)
               FILTER (WHERE rk <= 3) AS top_stalls
    FROM (SELECT *, sum(samples) OVER w AS total, row_number() OVER (w ORDER BY samples DESC, reason) AS rk
          FROM stalls WINDOW w AS (PARTITION BY run_id, name, file, line, key_pc))
    GROUP BY ALL
)
SELECT r.run_id, r.name, r.launches, r.file, r.line,
       regexp_extract(r.file, '[^/\\]+$') || ':' || r.line AS location, r.pc_offset, r.sass, trim(t.text) AS source,
       r.samples,
       100 * r.samples / nullif(sum(r.samples) OVER (PARTITION BY r.run_id, r.name), 0) AS samples_pct,
       n.top_stalls, n.top_stall, r.instructions, r.inst_executed, r.threads_per_inst,
       r.l2_sectors, r.l2_excess_sectors, 100 * r.l2_excess_sectors / nullif(r.l2_sectors, 0) AS l2_excess_pct,
       r.shared_excess_wavefronts, r.divergent_branches
FROM rows r
LEFT JOIN named n ON n.run_id = r.run_id AND n.name = r.name AND n.file IS NOT DISTINCT FROM r.file
                 AND n.line IS NOT DISTINCT FROM r.line AND n.key_pc IS NOT DISTINCT FROM r.pc_offset
LEFT JOIN ncu_source_lines t ON t.run_id = r.run_id AND t.file = r.file AND t.line = r.line
ORDER BY r.samples DESC NULLS LAST, r.inst_executed DESC NULLS LAST, r.run_id, r.name, r.file, r.line, r.pc_offset
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
