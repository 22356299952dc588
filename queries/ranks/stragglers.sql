-- Stragglers: each NVTX range instance compared across the ranks of a multi-rank job.
-- Ranges are told apart by their NVTX path (step/forward is not warmup/forward); the
-- n-th range of a path on one rank is matched with the n-th range of that path on every
-- other rank (instance = its place in start order on its rank, 1 = the first), which is
-- the same step when the ranks run in lock-step. Rows are ordered by skew (slowest minus
-- fastest rank), largest first. The job is that of --run (see rank-summary).
-- @param run    TEXT     any run of the job: id or name (default: the latest run that is a rank)
-- @param range  TEXT     only ranges of this path or name: step/forward, :forward; a text that is no path, as forward, names the default domain's ranges (default: null)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @column job           the job (as `tracekit query jobs` names it): the ranks of the run's job are compared
-- @column path          NVTX path of the range: texts from the outermost range down, '/'-separated (a named domain's range as domain:text; its text alone for a range ended on another thread)
-- @column instance      place of the range among those of its path on each rank, 1 = the first
-- @column ranks         ranks that have this instance
-- @column min_ns        fastest rank's duration, ns
-- @column med_ns        median duration across the ranks, ns
-- @column max_ns        slowest rank's duration, ns
-- @column skew_ns       max_ns - min_ns, ns
-- @column slowest_lag_pct     (max_ns - med_ns) / med_ns, %: how far the slowest rank is behind the median one, rounded to 0.1
-- @column slowest_rank  rank with max_ns (the lowest such rank on a tie)
-- @column fastest_rank  rank with min_ns
-- @display job, path, instance, ranks, min_ns, med_ns, max_ns, skew_ns, slowest_lag_pct, slowest_rank
-- @requires nvtx_ranges, rank_runs
-- @traced nvtx_ranges
WITH jr AS (
    SELECT * FROM job_ranks($run)
), asked AS (  -- one pass over the ranges asked: a range the job does not have is an error, not an
              -- empty table; a text that is a path takes that path alone, not the ranges named so below others
    SELECT CASE WHEN $range IS NULL OR count(*) > 0 THEN true
                ELSE error('stragglers: no NVTX range of path or name ''' || $range || ''' in the job''s ranks '
                           || '(`tracekit query rank-ranges` lists them)') END AS ok,
           coalesce(bool_or(coalesce(n.path, n.text) = $range), false) AS a_path
    FROM nvtx_ranges n JOIN jr USING (run_id)
    WHERE $range IS NOT NULL AND (coalesce(n.path, n.text) = $range OR n.name = $range OR n.name = ':' || $range)
), inst AS (
    SELECT jr.job, coalesce(n.path, n.text) AS path, jr.rank, n.dur_ns,
           row_number() OVER (PARTITION BY n.run_id, coalesce(n.path, n.text) ORDER BY n.start_ns, n.range_id) AS instance
    FROM asked, nvtx_ranges n JOIN jr USING (run_id)
    WHERE asked.ok AND ($range IS NULL OR coalesce(n.path, n.text) = $range OR n.name = $range
                        OR (NOT asked.a_path AND n.name = ':' || $range))
)
SELECT any_value(job) AS job, path, instance::BIGINT AS instance, count(*) AS ranks, min(dur_ns) AS min_ns, median(dur_ns) AS med_ns,
       max(dur_ns) AS max_ns, max(dur_ns) - min(dur_ns) AS skew_ns,
       round(100.0 * (max(dur_ns) - median(dur_ns)) / nullif(median(dur_ns), 0), 1) AS slowest_lag_pct,
       first(rank ORDER BY dur_ns DESC, rank) AS slowest_rank,
       first(rank ORDER BY dur_ns, rank) AS fastest_rank
FROM inst
GROUP BY path, instance
ORDER BY skew_ns DESC, path, instance
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
