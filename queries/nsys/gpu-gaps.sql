-- Where a process left a GPU idle for long: each stretch longer than gap_ms (default 500)
-- between the process's first and last GPU op on that device with none of its kernels,
-- copies or memsets running, longest first. The rows of NVIDIA's expert rule "GPU Gaps"
-- (`nsys analyze -r gpu_gaps`), which counts nsys's own CUDA profiling overheads as busy
-- time and, reading only the kernel, copy and memset tables, not CUDA graphs traced whole
-- (nsys --cuda-graph-trace=graph: their time reads as idle here). idle-gaps is the
-- device-wide view (every process, graphs counted, any length). What the host did meanwhile:
-- `tracekit chart timeline -p from_ns=START -p to_ns=END`, osrt-summary. The limit keeps the
-- longest gaps; nsys analyze's rows= keeps the first ones it finds before it sorts them.
-- @param run     TEXT     run id or name (default: latest run)
-- @param limit   INTEGER  rows to return; 0 = all (default: 50)
-- @param gap_ms  INTEGER  shortest gap listed: longer than this, ms (min: 0) (max: 9223372036854) (default: 500)
-- @column gap_ns      idle time, ns
-- @column start_ns    gap start: the end of the process's last op on the device before it, ns
-- @column end_ns      gap end: the start of its next op there, ns
-- @column pid         process
-- @column device_id   CUDA device
-- @column context_id  CUDA context of the op before the gap (NULL: a Unified Memory migration's, nsys's 0)
-- @display gap_ns, start_ns, end_ns, pid, device_id, context_id
-- @alias gpu_gaps
-- @requires kernels, memcpy, memset, profiler_overhead
-- @traced kernels, memcpy, memset
SELECT gap_ns, start_ns, end_ns, pid, device_id, context_id
FROM nsys_gpu_gaps($run, $gap_ms)
ORDER BY gap_ns DESC, start_ns, pid, device_id
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
