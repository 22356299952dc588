-- Where the CUDA API calls come from: per function (cudaLaunchKernel, cudaMemcpyAsync,
-- cudaStreamSynchronize, ...) and the call stack that made it, folded from the outermost caller
-- to the call (';'-joined, as cpu-stacks folds the CPU's samples), how many calls and how long they
-- took: which code synchronizes (a PyTorch .item() is at::native::_local_scalar_dense), copies or
-- launches. nsys unwinds the calls only with --cudabacktrace, where it samples the CPU, only the
-- kinds it unwinds (cudaLaunchKernel but not cuBLAS's cudaLaunchKernelExC, copies, memsets,
-- allocations, synchronizations) and only those longer than a threshold given (--cudabacktrace=
-- all:NS; nsys 2025.3 unwinds every call where given none): the others are not here (api-summary
-- counts every call). The frames inside CUPTI and the driver
-- (libcupti, libcuda: below the call), and nsys's markers at the bottom of a stack, are left out;
-- a ';' in a name becomes ':'. A run captured without CUDA API backtraces is an error.
-- @param run    TEXT     run id or name (default: latest run)
-- @param name   TEXT     only functions whose name contains this text (case-insensitive) (default: null)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @column name      the CUDA API function (its _vNNNN suffix stripped, as api-summary names it)
-- @column calls     its calls with this stack
-- @column total_ns  their summed duration, ns
-- @column med_ns    their median duration, ns (rounded to 0.1)
-- @column max_ns    the longest, ns
-- @column threads   threads that made them
-- @column stack     outermost caller;...;the innermost frame above the driver
-- @display name, calls, total_ns, med_ns, max_ns, threads, stack
-- @requires api_calls, api_frames
-- @traced api_calls, api_frames
WITH asked AS (
    SELECT CASE WHEN $name IS NULL OR EXISTS (SELECT 1 FROM api_calls WHERE run_id = $run AND callchain_id IS NOT NULL
                                                AND contains(lower(name), lower($name))) THEN true
                ELSE error('api-stacks: no CUDA API call of the run with a call stack has a name containing '''
                           || $name || ''' (`tracekit query api-summary` lists the calls)') END AS ok
),
stacks AS (
    SELECT callchain_id, folded_stack(function, depth) AS stack
    FROM api_frames
    WHERE run_id = $run AND NOT stack_marker(depth, function)
      AND NOT regexp_matches(coalesce(module, ''), '(^|/)lib(cupti|cuda)\.so')
    GROUP BY callchain_id
)
SELECT c.name, count(*) AS calls, sum(c.dur_ns)::BIGINT AS total_ns, round1(median(c.dur_ns)) AS med_ns,
       max(c.dur_ns) AS max_ns, count(DISTINCT c.global_tid) AS threads, s.stack
FROM asked, api_calls c JOIN stacks s USING (callchain_id)
WHERE asked.ok AND c.run_id = $run AND ($name IS NULL OR contains(lower(c.name), lower($name)))
GROUP BY c.name, s.stack
ORDER BY total_ns DESC, c.name, s.stack
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
