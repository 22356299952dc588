-- GPU busy time per device of both runs, as the gpu-utilization query computes it: the
-- span from the first op's start to the last op's end, less the idle gaps before each
-- op (computed at ingest); overlapping work on several streams counts once.
-- @param base  INTEGER  base run id
-- @param new   INTEGER  new run id
-- @column side     0 = base run, 1 = new run
-- @column key      CUDA device id
-- @column busy_ns  time with at least one op running, ns
WITH o AS (
    SELECT run_id, device_id, start_ns, end_ns, device_gap_ns FROM _kernels WHERE run_id IN ($base, $new)
    UNION ALL SELECT run_id, device_id, start_ns, end_ns, device_gap_ns FROM memcpy WHERE run_id IN ($base, $new)
    UNION ALL SELECT run_id, device_id, start_ns, end_ns, device_gap_ns FROM memset WHERE run_id IN ($base, $new)
    UNION ALL SELECT run_id, device_id, start_ns, end_ns, device_gap_ns FROM graph_execs WHERE run_id IN ($base, $new)
), d AS (
    SELECT run_id, device_id, max(end_ns) - min(start_ns) - coalesce(sum(device_gap_ns), 0) AS busy_ns
    FROM o GROUP BY run_id, device_id
)
SELECT s.side, d.device_id AS key, d.busy_ns::BIGINT AS busy_ns
FROM (VALUES (0, $base), (1, $new)) s(side, run_id)
JOIN d ON d.run_id = s.run_id
