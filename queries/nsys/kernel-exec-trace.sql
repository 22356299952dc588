-- Each kernel launch from the call that made it to the kernel's end, one per row in the
-- order of the calls: the API call's time on the CPU, the time the kernel then waited in
-- the queue, its time on the GPU. Same rows and numbers as `nsys stats -r
-- cuda_kern_exec_trace` (kernel-exec sums them per kernel): the queue time runs from the
-- call's end to the kernel's start and is NULL where the kernel started before the call
-- returned; total_dur_ns runs from the call's start to the call's or the kernel's end,
-- whichever is later. A kernel of a CUDA graph traced node by node counts from its
-- cudaGraphLaunch. Kernels whose launching call the capture did not record are not listed,
-- as in nsys. name= keeps the kernels whose name contains a text; from_ns/to_ns the launches
-- whose span (call start to the later end) meets a window.
-- @param run      TEXT     run id or name (default: latest run)
-- @param name     TEXT     only kernels whose name contains this text, case-insensitive (default: null)
-- @param from_ns  BIGINT   only launches that end after this time on the capture's clock, ns (default: null)
-- @param to_ns    BIGINT   only launches whose call starts before this time, ns; after from_ns (default: null)
-- @param limit    INTEGER  rows to return; 0 = all (default: 1000)
-- @column api_start_ns     the launching call's start, ns
-- @column api_dur_ns       its duration on the CPU, ns
-- @column queue_start_ns   the queue wait's start (the call's end), ns; NULL where the kernel started first
-- @column queue_dur_ns     from the call's end to the kernel's start, ns; NULL where the kernel started first
-- @column kernel_start_ns  the kernel's start on the GPU, ns
-- @column kernel_dur_ns    its duration, ns
-- @column total_dur_ns     from the call's start to the later of the call's and the kernel's end, ns
-- @column pid              process
-- @column tid              the launching thread
-- @column device_id        CUDA device that ran the kernel
-- @column api_name         the launch API (suffix _vNNNN stripped: cudaLaunchKernel, cuLaunchKernelEx, cudaGraphLaunch, ...)
-- @column grid             grid dimensions (x, y, z), blocks
-- @column block            block dimensions (x, y, z), threads
-- @column name             kernel name (demangled)
-- @column correlation_id   the call's and the kernel's correlation id (api-trace, gpu-trace)
-- @display api_start_ns, api_dur_ns, queue_dur_ns, kernel_dur_ns, total_dur_ns, tid, api_name, name
-- @alias cuda_kern_exec_trace
-- @rows page
-- @requires kernels
-- @traced kernels, api_calls
-- @needs  kernels, api_calls
WITH asked AS (  -- an empty window, or a name no kernel of the run has, is an error (macros.sql)
    SELECT trace_asked('kernel-exec-trace', $from_ns, $to_ns, $name,
                       EXISTS (SELECT 1 FROM _strings s WHERE contains(lower(s.value), lower($name))
                               AND s.string_id IN (SELECT DISTINCT name_id FROM _kernels WHERE run_id = $run)),
                       'kernel', 'top-kernels') AS ok
), page AS (  -- the rows asked for, before the look-ups
    SELECT k.api_start_ns, k.api_end_ns, k.start_ns, k.end_ns, k.launch_global_tid, k.device_id, k.api_name_id,
           k.name_id, k.correlation_id, k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z
    FROM asked, _kernels k
    WHERE asked.ok AND k.run_id = $run AND k.api_start_ns IS NOT NULL
      AND ($name IS NULL OR k.name_id IN (SELECT string_id FROM _strings WHERE contains(lower(value), lower($name))))
      AND ($from_ns IS NULL OR greatest(k.api_end_ns, k.end_ns) > $from_ns)
      AND ($to_ns IS NULL OR k.api_start_ns < $to_ns)
    ORDER BY k.api_start_ns, k.start_ns, k.correlation_id
    LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
)
SELECT p.api_start_ns, p.api_end_ns - p.api_start_ns AS api_dur_ns,
       CASE WHEN p.start_ns >= p.api_end_ns THEN p.api_end_ns END AS queue_start_ns,
       CASE WHEN p.start_ns >= p.api_end_ns THEN p.start_ns - p.api_end_ns END AS queue_dur_ns,
       p.start_ns AS kernel_start_ns, p.end_ns - p.start_ns AS kernel_dur_ns,
       greatest(p.api_end_ns, p.end_ns) - p.api_start_ns AS total_dur_ns,
       ((p.launch_global_tid >> 24) & 16777215)::INTEGER AS pid, (p.launch_global_tid & 16777215)::INTEGER AS tid,
       p.device_id, a.value AS api_name, format('({}, {}, {})', p.grid_x, p.grid_y, p.grid_z) AS grid,
       format('({}, {}, {})', p.block_x, p.block_y, p.block_z) AS block, n.value AS name, p.correlation_id
FROM page p
LEFT JOIN _strings a ON a.string_id = p.api_name_id
LEFT JOIN _strings n ON n.string_id = p.name_id
ORDER BY p.api_start_ns, p.start_ns, p.correlation_id
