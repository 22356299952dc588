-- GPU busy and idle time per device and per stream, with the idle gaps above a threshold.
-- Busy time is the union of kernel, memcpy and memset intervals (overlapping work on
-- several streams counts once per device); the span runs from the first op's start to
-- the last op's end in that scope. Rows with stream_id NULL are whole-device totals.
-- @param run         TEXT     run id or name (default: latest run)
-- @param min_gap_ns  BIGINT   idle gaps at least this long are counted (default: 10000)
-- @param limit       INTEGER  rows to return; 0 = all (default: 0)
-- @column device_id        CUDA device
-- @column stream_id        CUDA stream (NULL = all streams of the device)
-- @column ops              GPU operations (kernels, memcpy, memset)
-- @column span_ns          first op start to last op end, ns
-- @column busy_ns          time with at least one op running, ns
-- @column idle_ns          span_ns - busy_ns, ns
-- @column utilization_pct  busy_ns / span_ns, %
-- @column gaps             idle gaps of at least min_gap_ns
-- @column gap_total_ns     summed length of those gaps, ns
-- @column max_gap_ns       longest idle gap, ns
-- @requires kernels, memcpy, memset
WITH ops AS (
    SELECT device_id, stream_id, start_ns, end_ns FROM gpu_ops WHERE run_id = $run
), scoped AS (
    SELECT device_id, stream_id, start_ns, end_ns FROM ops
    UNION ALL
    SELECT device_id, NULL, start_ns, end_ns FROM ops
), marked AS (
    SELECT *, max(end_ns) OVER (PARTITION BY device_id, stream_id ORDER BY start_ns, end_ns
                                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM scoped
), numbered AS (
    SELECT *, sum(CASE WHEN prev_end IS NULL OR start_ns > prev_end THEN 1 ELSE 0 END)
              OVER (PARTITION BY device_id, stream_id ORDER BY start_ns, end_ns ROWS UNBOUNDED PRECEDING) AS island
    FROM marked
), islands AS (
    SELECT device_id, stream_id, island, count(*) AS ops, min(start_ns) AS s, max(end_ns) AS e
    FROM numbered GROUP BY device_id, stream_id, island
), gaps AS (
    SELECT *, s - lag(e) OVER (PARTITION BY device_id, stream_id ORDER BY s) AS gap_ns FROM islands
)
SELECT device_id, stream_id, sum(ops)::BIGINT AS ops, (max(e) - min(s))::BIGINT AS span_ns,
       sum(e - s)::BIGINT AS busy_ns, ((max(e) - min(s)) - sum(e - s))::BIGINT AS idle_ns,
       round(100.0 * sum(e - s) / nullif(max(e) - min(s), 0), 2) AS utilization_pct,
       count(*) FILTER (WHERE gap_ns >= $min_gap_ns) AS gaps,
       coalesce(sum(gap_ns) FILTER (WHERE gap_ns >= $min_gap_ns), 0)::BIGINT AS gap_total_ns,
       coalesce(max(gap_ns), 0)::BIGINT AS max_gap_ns
FROM gaps
GROUP BY device_id, stream_id
ORDER BY device_id, stream_id NULLS FIRST
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
