-- Stretches where a process kept a GPU busy less than threshold_pct (default 50) of the
-- time, least busy first. The rows of NVIDIA's expert rule "GPU Time Utilization" (`nsys
-- analyze -r gpu_time_util`): the span from the process's first GPU op on a device to its
-- last is cut into `chunks` (default 30) chunks of equal length; a chunk's use is the time
-- its kernels, copies and memsets ran in it over its length (by time, not by how much of
-- the GPU they used; ops that overlap count twice, so it can pass 100 %), nsys's CUDA
-- profiling overheads counted as busy; chunks below the threshold that follow one another
-- are one row, their use averaged by length. As in nsys, CUDA graphs traced whole (nsys
-- --cuda-graph-trace=graph) are not counted. The limit keeps the least used stretches;
-- nsys analyze's rows= keeps the first ones it finds, in time order, before it sorts them.
-- @param run            TEXT     run id or name (default: latest run)
-- @param limit          INTEGER  rows to return; 0 = all (default: 50)
-- @param threshold_pct  INTEGER  stretches used less than this share of the time, % (min: 0) (max: 100) (default: 50)
-- @param chunks         INTEGER  chunks each process's span on a device is cut into (min: 1) (max: 1000) (default: 30)
-- @column in_use_pct  time the GPU ran the process's ops in the stretch, % of its length (rounded to 0.1)
-- @column dur_ns      stretch length, ns
-- @column start_ns    stretch start, ns
-- @column end_ns      stretch end, ns
-- @column pid         process
-- @column device_id   CUDA device
-- @column context_id  CUDA context of the process's ops on the device (the lowest; nsys prints that of any one op)
-- @display in_use_pct, dur_ns, start_ns, end_ns, pid, device_id
-- @alias gpu_time_util
-- @requires kernels, memcpy, memset, profiler_overhead
-- @traced kernels, memcpy, memset
SELECT in_use_pct, dur_ns, start_ns, end_ns, pid, device_id, context_id
FROM nsys_low_utilization($run, $threshold_pct, $chunks)
ORDER BY in_use_pct, dur_ns, start_ns, pid, device_id
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
