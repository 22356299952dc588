-- Stragglers: each NVTX range instance compared across the ranks of a multi-rank job.
-- The n-th range of a name on one rank is matched with the n-th range of that name on
-- every other rank (instance = its place in start order on its rank, 1 = the first, as
-- `tracekit export trace --nvtx NAME --instance N` counts), which is the same step when
-- the ranks run in lock-step. Rows are ordered by skew (slowest minus
-- fastest rank), largest first. The job is that of --run (see rank-summary).
-- @param run    TEXT     any run of the job: id or name (default: latest run)
-- @param range  TEXT     only ranges of this name, e.g. ':forward' (default: null)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @column range         range name, 'domain:text'
-- @column instance      place of the range among those of its name on each rank, 1 = the first
-- @column ranks         ranks that have this instance
-- @column min_ns        fastest rank's duration, ns
-- @column med_ns        median duration across the ranks, ns
-- @column max_ns        slowest rank's duration, ns
-- @column skew_ns       max_ns - min_ns, ns
-- @column skew_pct      (max_ns - med_ns) / med_ns, %: how far the slowest rank is behind the median one
-- @column slowest_rank  rank with max_ns (the lowest such rank on a tie)
-- @column fastest_rank  rank with min_ns
-- @display range, instance, ranks, min_ns, med_ns, max_ns, skew_pct, slowest_rank
-- @requires nvtx_ranges, rank_runs
WITH jr AS (
    SELECT * FROM job_ranks($run)
), inst AS (
    SELECT n.name AS range, jr.rank, n.dur_ns,
           row_number() OVER (PARTITION BY n.run_id, n.name ORDER BY n.start_ns, n.range_id) AS instance
    FROM nvtx_ranges n JOIN jr USING (run_id)
    WHERE $range IS NULL OR n.name = $range
)
SELECT range, instance::BIGINT AS instance, count(*) AS ranks, min(dur_ns) AS min_ns, median(dur_ns) AS med_ns,
       max(dur_ns) AS max_ns, max(dur_ns) - min(dur_ns) AS skew_ns,
       round(100.0 * (max(dur_ns) - median(dur_ns)) / nullif(median(dur_ns), 0), 1) AS skew_pct,
       first(rank ORDER BY dur_ns DESC, rank) AS slowest_rank,
       first(rank ORDER BY dur_ns, rank) AS fastest_rank
FROM inst
GROUP BY range, instance
ORDER BY skew_ns DESC, range, instance
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
