-- Job scope samples: one row per NVTX range instance of either job, its duration the
-- job's: the slowest rank's. A range's n-th instance on one rank is matched with the n-th
-- instance of its path on every other rank of its job (its place in start order, as
-- `stragglers` matches them: the same step where the ranks run in lock-step), and the
-- instance lasts, for the job, as long as its slowest rank took. Instances are numbered per
-- side (a job compared with itself has each run on both sides). Keys as the nvtx scope's:
-- the NVTX path (a range ended on another thread: its name, domain:text in a named domain).
-- Reads `_job_sides` (side 0 = base job, 1 = new job; run_id: one run per rank), which
-- job_diff registers before it.
-- @column side          0 = base job, 1 = new job
-- @column key           NVTX path
-- @column instance      place of the range among those of its path on each rank, 1 = the first
-- @column value         the slowest rank's duration of this instance, ns
-- @column slowest_rank  the rank that took it (the lowest such rank on a tie)
-- @column ranks         ranks that have this instance
WITH sides AS (
    SELECT side, run_id FROM _job_sides
), inst AS (
    SELECT s.side, k.rank,
           coalesce(r.path, CASE WHEN coalesce(r.domain, '') = '' THEN r.text ELSE r.domain || ':' || r.text END) AS key,
           r.dur_ns,
           row_number() OVER (PARTITION BY s.side, r.run_id, key ORDER BY r.start_ns, r.range_id) AS instance
    FROM sides s
    JOIN rank_runs k ON k.run_id = s.run_id
    JOIN nvtx_ranges r ON r.run_id = s.run_id
    WHERE r.path IS NOT NULL OR r.text IS NOT NULL
)
SELECT side, key, instance::BIGINT AS instance, max(dur_ns) AS value,
       first(rank ORDER BY dur_ns DESC, rank) AS slowest_rank, count(*) AS ranks
FROM inst
GROUP BY side, key, instance
