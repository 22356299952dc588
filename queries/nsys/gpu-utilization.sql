-- GPU busy and idle time per device and per stream, with the idle gaps above a threshold.
-- Busy time is the union of kernel, memcpy, memset and whole-graph-launch intervals
-- (overlapping work on several streams, or of several processes, counts once per
-- device); the span runs from the first op's start to the last op's end in that scope.
-- A stream is a process's stream of a CUDA context (stream ids of two processes are
-- unrelated). Rows with pid NULL are whole-device totals; a row with a pid but no
-- stream holds that process's ops that run on no stream (Unified Memory migrations).
-- Each op carries the idle time before it on its stream and on its device (computed at
-- ingest: a running max over the time-sorted ops), so idle = the sum of those gaps.
-- @param run         TEXT     run id or name (default: latest run)
-- @param min_gap_ns  BIGINT   idle gaps at least this long are counted (min: 0) (default: 10000)
-- @param limit       INTEGER  rows to return; 0 = all (default: 0)
-- @column device_id        CUDA device
-- @column pid              process owning the stream (NULL on device rows)
-- @column context_id       CUDA context of the stream (NULL on device rows and for ops on no stream)
-- @column stream_id        CUDA stream (NULL on device rows and for ops on no stream)
-- @column ops              GPU operations (kernels, memcpy, memset, graph launches traced whole)
-- @column span_ns          first op start to last op end, ns
-- @column busy_ns          time with at least one op running, ns
-- @column idle_ns          span_ns - busy_ns, ns
-- @column utilization_pct  busy_ns / span_ns, % (rounded to 0.01)
-- @column gaps             idle gaps of at least min_gap_ns
-- @column gap_total_ns     summed length of those gaps, ns
-- @column max_gap_ns       longest idle gap, ns
-- @display device_id, pid, stream_id, ops, span_ns, busy_ns, utilization_pct, gaps, gap_total_ns, max_gap_ns
-- @requires kernels, memcpy, memset, graph_execs
-- @traced kernels, memcpy, memset, graph_execs
WITH ops AS (
    SELECT device_id, global_pid, context_id, stream_id, start_ns, end_ns, stream_gap_ns, device_gap_ns
    FROM gpu_ops WHERE run_id = $run
), scoped AS (
    SELECT device_id, global_pid, context_id, stream_id, count(*) AS ops, min(start_ns) AS s, max(end_ns) AS e,
           coalesce(sum(stream_gap_ns), 0) AS idle,
           count(*) FILTER (WHERE stream_gap_ns >= $min_gap_ns) AS gaps,
           coalesce(sum(stream_gap_ns) FILTER (WHERE stream_gap_ns >= $min_gap_ns), 0) AS gap_total,
           coalesce(max(stream_gap_ns), 0) AS max_gap
    FROM ops GROUP BY device_id, global_pid, context_id, stream_id
    UNION ALL
    SELECT device_id, NULL, NULL, NULL, count(*), min(start_ns), max(end_ns),
           coalesce(sum(device_gap_ns), 0),
           count(*) FILTER (WHERE device_gap_ns >= $min_gap_ns),
           coalesce(sum(device_gap_ns) FILTER (WHERE device_gap_ns >= $min_gap_ns), 0),
           coalesce(max(device_gap_ns), 0)
    FROM ops GROUP BY device_id
)
SELECT device_id, ((global_pid >> 24) & 16777215)::INTEGER AS pid, context_id, stream_id, ops::BIGINT AS ops, (e - s)::BIGINT AS span_ns,
       (e - s - idle)::BIGINT AS busy_ns, idle::BIGINT AS idle_ns,
       round(100.0 * (e - s - idle) / nullif(e - s, 0), 2) AS utilization_pct,
       gaps, gap_total::BIGINT AS gap_total_ns, max_gap::BIGINT AS max_gap_ns
FROM scoped
ORDER BY device_id, pid IS NOT NULL, pid, context_id, stream_id
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
