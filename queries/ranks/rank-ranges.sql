-- Time per NVTX range and rank across the ranks of a multi-rank job (the rank x range
-- heatmap: `tracekit chart rank-heatmap`): one row per (range name, rank), with the rank
-- against the median rank for that range. Ranges are named as nsys names them
-- ('domain:text', ':step' in the default domain). The job is that of --run (see
-- rank-summary).
-- @param run    TEXT     any run of the job: id or name (default: latest run)
-- @param limit  INTEGER  rows to return; 0 = all (default: 0)
-- @column range          range name, 'domain:text'
-- @column rank           global rank
-- @column instances      ranges of that name on the rank
-- @column total_ns       summed duration, ns
-- @column avg_ns         mean duration, ns
-- @column max_ns         longest, ns
-- @column vs_median_pct  total_ns against the median rank's total for this range, % (+ = slower)
-- @display range, rank, instances, total_ns, avg_ns, max_ns, vs_median_pct
-- @requires nvtx_ranges, rank_runs
WITH jr AS (
    SELECT * FROM job_ranks($run)
), s AS (
    SELECT n.name AS range, jr.rank, count(*) AS instances, sum(n.dur_ns) AS total_ns,
           avg(n.dur_ns) AS avg_ns, max(n.dur_ns) AS max_ns
    FROM nvtx_ranges n JOIN jr USING (run_id)
    GROUP BY n.name, jr.rank
)
SELECT range, rank, instances, total_ns::BIGINT AS total_ns, avg_ns, max_ns,
       round(100.0 * (total_ns - median(total_ns) OVER (PARTITION BY range))
             / nullif(median(total_ns) OVER (PARTITION BY range), 0), 1) AS vs_median_pct
FROM s
ORDER BY range, rank
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
