-- Where the CUDA API calls come from: per function (cudaLaunchKernel, cudaMemcpyAsync,
-- cudaStreamSynchronize, ...) and the call stack that made it, folded from the outermost caller
-- to the call (';'-joined, as cpu-stacks folds the CPU's samples), how many calls and how long they
-- took: which code synchronizes (a PyTorch .item() is at::native::_local_scalar_dense), copies or
-- launches. nsys unwinds the calls only with --cudabacktrace, where it samples the CPU, only the
-- kinds it unwinds (cudaLaunchKernel but not cuBLAS's cudaLaunchKernelExC, copies, memsets,
-- allocations, synchronizations) and only those longer than a threshold given (--cudabacktrace=
-- all:NS; nsys 2025.3 unwinds every call where given none): the others are not here (api-summary
-- counts every call). Where nsys took the calls' Python stacks too (--python-backtrace=cuda, exported
-- with nsys export --include-blobs=true; tracekit capture --cuda-backtrace does both), a stack is
-- by default mixed, as py-spy --native shows one: the Python frames (function (file:line), the
-- file as python-stacks names it), then the native frames below the innermost frame of the Python
-- interpreter (the C++ that the Python line called: THPVariable_item, at::native::..., the call);
-- all the native frames where the interpreter's are not found (a python executable or libpython).
-- The frames inside CUPTI and the driver (libcupti, libcuda: below the call), and nsys's markers
-- at the bottom of a stack, are left out; a ';' in a name becomes ':'. A run captured without CUDA
-- API backtraces is an error, and so is frames=python of one without Python stacks.
-- @param run    TEXT     run id or name (default: latest run)
-- @param name   TEXT     only functions whose name contains this text (case-insensitive) (default: null)
-- @param frames TEXT     mixed: Python frames, then the native ones below the interpreter; python: the Python frames alone; native: the native frames alone (default: mixed)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @column name      the CUDA API function (its _vNNNN suffix stripped, as api-summary names it)
-- @column calls     its calls with this stack
-- @column total_ns  their summed duration, ns
-- @column med_ns    their median duration, ns (rounded to 0.1)
-- @column max_ns    the longest, ns
-- @column threads   threads that made them
-- @column stack     outermost caller;...;the innermost frame above the driver
-- @display name, calls, total_ns, med_ns, max_ns, threads, stack
-- @requires api_calls, api_frames, python_frames
-- @traced api_calls, api_frames
WITH asked AS (
    SELECT CASE
        WHEN $frames NOT IN ('mixed', 'python', 'native')
        THEN error('api-stacks: frames ''' || $frames || ''': one of mixed, python, native')
        WHEN $frames = 'python' AND NOT EXISTS (SELECT 1 FROM api_calls WHERE run_id = $run AND python_stack_id IS NOT NULL)
        THEN error('api-stacks: frames=python, but the run has no Python stack of a CUDA API call (nsys profile '
                   || '--cudabacktrace=all --python-backtrace=cuda --sample=process-tree, exported with `nsys export '
                   || '--type sqlite --include-blobs=true`; tracekit capture --cuda-backtrace does both)')
        WHEN $name IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM api_calls WHERE run_id = $run AND (callchain_id IS NOT NULL OR python_stack_id IS NOT NULL)
              AND contains(lower(name), lower($name)))
        THEN error('api-stacks: no CUDA API call of the run with a call stack has a name containing '''
                   || $name || ''' (`tracekit query api-summary` lists the calls)')
        ELSE true END AS ok
),
native AS (
    SELECT callchain_id, depth, function, module
    FROM api_frames
    WHERE run_id = $run AND NOT stack_marker(depth, function)
      AND NOT regexp_matches(coalesce(module, ''), '(^|/)lib(cupti|cuda)\.so')
),
interpreter AS (  -- each stack's innermost frame of the Python interpreter
    SELECT callchain_id, min(depth) AS depth FROM native WHERE python_module(module) GROUP BY callchain_id
),
native_stacks AS (
    SELECT n.callchain_id, folded_stack(n.function, n.depth) AS stack,
           folded_stack(CASE WHEN n.depth < i.depth THEN n.function END, n.depth) AS below
    FROM native n LEFT JOIN interpreter i USING (callchain_id)
    GROUP BY n.callchain_id
),
python_stacks AS (
    SELECT stack_id, folded_stack(python_frame(function, file, line), depth) AS stack
    FROM python_frames WHERE run_id = $run GROUP BY stack_id
),
calls AS (
    SELECT c.name, c.dur_ns, c.global_tid,
           CASE $frames WHEN 'native' THEN n.stack WHEN 'python' THEN p.stack
                ELSE concat_ws(';', p.stack, CASE WHEN p.stack IS NULL THEN n.stack ELSE coalesce(n.below, n.stack) END)
                END AS stack
    FROM asked, api_calls c
    LEFT JOIN native_stacks n USING (callchain_id)
    LEFT JOIN python_stacks p ON p.stack_id = c.python_stack_id
    WHERE asked.ok AND c.run_id = $run AND (c.callchain_id IS NOT NULL OR c.python_stack_id IS NOT NULL)
      AND ($name IS NULL OR contains(lower(c.name), lower($name)))
)
SELECT name, count(*) AS calls, sum(dur_ns)::BIGINT AS total_ns, round1(median(dur_ns)) AS med_ns,
       max(dur_ns) AS max_ns, count(DISTINCT global_tid) AS threads, stack
FROM calls
WHERE nullif(stack, '') IS NOT NULL
GROUP BY name, stack
ORDER BY total_ns DESC, name, stack
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
