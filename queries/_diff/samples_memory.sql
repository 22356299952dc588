-- GPU memory scope values (nsys --cuda-memory-usage): one row per side, key and metric. Keys are
-- a device's kind of memory, 'GPU 0 Device memory' (metrics peak_bytes, live_at_end_bytes,
-- allocations, allocated_bytes: gpu-memory's, summed over the run's processes), and an NVTX path's
-- allocations of a kind, 'Device memory in step/forward' ('Device memory outside NVTX ranges';
-- metrics allocations, allocated_bytes, unfreed_bytes: nvtx-memory's).
-- @param base  INTEGER  base run id
-- @param new   INTEGER  new run id
-- @param paths BOOLEAN  the NVTX paths' rows too (false where a capture did not trace NVTX: its
--                       allocations are outside ranges for want of ranges)
-- @column side    0 = base run, 1 = new run
-- @column key     the key
-- @column metric  the metric
-- @column value   its value (bytes, or a count)
WITH ev AS (
    SELECT 0 AS side, * FROM gpu_memory_events($base)
    UNION ALL
    SELECT 1 AS side, * FROM gpu_memory_events($new)
),
procs AS (  -- gpu-memory's numbers, per process
    SELECT side, device_id, memory_kind, max(live_bytes) AS peak_bytes, arg_max(live_bytes, seq) AS live_at_end_bytes,
           count(*) FILTER (WHERE operation = 'allocation') AS allocations,
           coalesce(sum(bytes) FILTER (WHERE operation = 'allocation'), 0) AS allocated_bytes
    FROM ev GROUP BY side, global_pid, device_id, memory_kind
),
kinds AS (
    SELECT side, 'GPU ' || device_id || ' ' || memory_kind || ' memory' AS key,
           sum(peak_bytes) AS peak_bytes, sum(live_at_end_bytes) AS live_at_end_bytes,
           sum(allocations) AS allocations, sum(allocated_bytes) AS allocated_bytes
    FROM procs GROUP BY ALL
),
paths AS (
    SELECT side, memory_kind || ' memory ' || coalesce('in ' || nvtx_path, 'outside NVTX ranges') AS key,
           count(*) AS allocations, sum(bytes) AS allocated_bytes,
           coalesce(sum(bytes) FILTER (WHERE freed_seq IS NULL), 0) AS unfreed_bytes
    FROM ev WHERE operation = 'allocation' AND $paths GROUP BY ALL
)
SELECT side, key, metric, value::DOUBLE AS value
FROM kinds UNPIVOT (value FOR metric IN (peak_bytes, live_at_end_bytes, allocations, allocated_bytes))
UNION ALL
SELECT side, key, metric, value::DOUBLE
FROM paths UNPIVOT (value FOR metric IN (allocations, allocated_bytes, unfreed_bytes))
