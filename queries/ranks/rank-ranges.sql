-- Time per NVTX range and rank across the ranks of a multi-rank job (the rank x range
-- heatmap: `tracekit chart rank-heatmap`): one row per (NVTX path, rank), with the rank
-- against the median rank for that path. The job is that of --run (see rank-summary).
-- @param run    TEXT     any run of the job: id or name (default: the latest run that is a rank)
-- @param limit  INTEGER  rows to return; 0 = all (default: 0)
-- @column job            the job (as `tracekit query jobs` names it): the ranks of the run's job are its rows
-- @column path           NVTX path of the ranges: texts from the outermost range down, '/'-separated (a named domain's range as domain:text; its text alone for ranges ended on another thread)
-- @column rank           global rank
-- @column instances      ranges of that path on the rank
-- @column total_ns       summed duration, ns
-- @column avg_ns         mean duration, ns (rounded to 0.1)
-- @column max_ns         longest, ns
-- @column vs_median_pct  total_ns against the median rank's total for this path, % (+ = slower; rounded to 0.1)
-- @display job, path, rank, instances, total_ns, avg_ns, max_ns, vs_median_pct
-- @requires nvtx_ranges, rank_runs
-- @traced nvtx_ranges
WITH jr AS (
    SELECT * FROM job_ranks($run)
), s AS (
    SELECT jr.job, coalesce(n.path, n.text) AS path, jr.rank, count(*) AS instances, sum(n.dur_ns) AS total_ns,
           avg(n.dur_ns) AS avg_ns, max(n.dur_ns) AS max_ns
    FROM nvtx_ranges n JOIN jr USING (run_id)
    GROUP BY jr.job, 2, jr.rank
)
SELECT job, path, rank, instances, total_ns::BIGINT AS total_ns, round(avg_ns, 1) AS avg_ns, max_ns,
       round(100.0 * (total_ns - median(total_ns) OVER (PARTITION BY path))
             / nullif(median(total_ns) OVER (PARTITION BY path), 0), 1) AS vs_median_pct
FROM s
ORDER BY path, rank
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
