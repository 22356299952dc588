-- GPU memory by process, device and kind of memory, from nsys's record of every allocation and free
-- (nsys profile --cuda-memory-usage=true; tracekit capture --cuda-memory-usage): how much was
-- allocated, the most that was live at once (what an out-of-memory error is about) and where it
-- peaked, and what was still allocated when the capture ended (a leak, or memory a program keeps
-- until exit). Device memory is cudaMalloc's and the stream-ordered pools' allocations
-- (cudaMallocAsync) as asked for; a pool holds more from the device than is allocated from it
-- (pool_reserved_max_bytes). Pinned is cudaMallocHost's host memory, Managed cudaMallocManaged's,
-- Device Static a module's __device__ variables. Under a capture range, nsys reports what was
-- allocated and freed before the range opened at time 0, in the order it happened: a peak_ns of 0
-- is a peak reached before the range (a warm-up). A free of memory the capture saw no allocation
-- for is counted apart (unmatched_frees), not taken off what is live. A run captured without CUDA
-- memory usage tracing is an error.
-- @param run    TEXT     run id or name (default: latest run)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @column pid                      process id
-- @column device_id                CUDA device
-- @column memory_kind              Device, Pinned, Managed, Device Static, ...
-- @column allocations              allocations
-- @column frees                    frees of allocations the capture saw
-- @column allocated_bytes          bytes allocated in all, B
-- @column largest_bytes            the largest allocation, B
-- @column peak_bytes               the most bytes live at once, B
-- @column peak_ns                  when live bytes first reached peak_bytes, ns
-- @column peak_nvtx_path           the NVTX path of the allocation that reached the peak, a named domain's range as domain:text (NULL: outside every range)
-- @column live_at_end_bytes        bytes still allocated when the capture ended, B
-- @column unfreed                  allocations not freed by then
-- @column unmatched_frees          frees of memory the capture saw no allocation for
-- @column pool_reserved_max_bytes  the stream-ordered pools' largest size, summed over pools, B (NULL: no pool)
-- @column first_ns                 first event, ns
-- @column last_ns                  last event, ns
-- @display device_id, memory_kind, allocations, allocated_bytes, largest_bytes, peak_bytes, peak_nvtx_path, live_at_end_bytes, unfreed, pool_reserved_max_bytes
-- @requires gpu_memory, nvtx_ranges
-- @traced gpu_memory
WITH ev AS (
    SELECT *, max(live_bytes) OVER (PARTITION BY global_pid, device_id, memory_kind) AS peak
    FROM gpu_memory_events($run)
),
pools AS (
    SELECT global_pid, device_id, sum(reserved)::BIGINT AS reserved
    FROM (SELECT global_pid, device_id, pool_address, max(pool_reserved_bytes) AS reserved
          FROM gpu_memory WHERE run_id = $run AND pool_address IS NOT NULL GROUP BY ALL)
    GROUP BY ALL
)
SELECT any_value(ev.pid) AS pid, ev.device_id, ev.memory_kind,
       count(*) FILTER (WHERE operation = 'allocation') AS allocations,
       count(*) FILTER (WHERE operation = 'free' AND matched) AS frees,
       coalesce(sum(bytes) FILTER (WHERE operation = 'allocation'), 0)::BIGINT AS allocated_bytes,
       max(bytes) FILTER (WHERE operation = 'allocation') AS largest_bytes,
       max(peak) AS peak_bytes,
       min(ts_ns) FILTER (WHERE live_bytes = peak AND operation = 'allocation') AS peak_ns,
       arg_min(nvtx_path, seq) FILTER (WHERE live_bytes = peak AND operation = 'allocation') AS peak_nvtx_path,
       arg_max(live_bytes, seq) AS live_at_end_bytes,
       count(*) FILTER (WHERE operation = 'allocation' AND freed_seq IS NULL) AS unfreed,
       count(*) FILTER (WHERE NOT matched) AS unmatched_frees,
       CASE WHEN ev.memory_kind = 'Device' THEN any_value(p.reserved) END AS pool_reserved_max_bytes,
       min(ts_ns) AS first_ns, max(ts_ns) AS last_ns
FROM ev LEFT JOIN pools p ON p.global_pid = ev.global_pid AND p.device_id = ev.device_id
GROUP BY ev.global_pid, ev.device_id, ev.memory_kind
ORDER BY peak_bytes DESC, allocated_bytes DESC, pid, device_id, memory_kind
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
