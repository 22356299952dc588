-- The multi-rank jobs in the store: one row per job (the runs ingested with a rank that
-- share `job`: tracekit/ranks.py), oldest first, with which of its ranks are here. A job
-- captured again (one path captured and ingested again) is a job of its own, `JOB#2`; a
-- capture ingested twice counts each rank's latest run (rank_runs), as the job's queries do. A
-- rank is missing when no run holds it below the launcher's world size (WORLD_SIZE,
-- SLURM_NTASKS, ... as nsys recorded them, or --param world_size=N) or below the highest
-- rank ingested, whichever is larger: profiling a subset of the ranks is common, so they
-- are listed, not refused. `run` names a run of the job for rank-summary, stragglers,
-- rank-ranges and the report (--run).
-- @param limit  INTEGER  rows to return; 0 = all (default: 0)
-- @column job              the job's id: the launcher's job id, else the ranks' path with the rank masked and the export's suffix dropped; #2 for its second capture
-- @column ranks            ranks ingested
-- @column first_rank       lowest rank ingested
-- @column last_rank        highest rank ingested
-- @column world_size       ranks the launcher started, as the ranks' latest runs recorded it (the largest; NULL: not recorded)
-- @column missing          ranks not ingested below the larger of world_size and last_rank + 1
-- @column missing_ranks    those ranks, e.g. 1-2, 4 (NULL: none, or more than 1,048,576 ranks to look through)
-- @column hosts            distinct host names recorded by the ranks (0: none recorded)
-- @column run              the lowest rank's run (its name): --run for the job's queries
-- @column runs             runs ingested with this job, a capture ingested twice counted twice
-- @column last_ingested_at when its latest run was ingested (UTC)
-- @display job, ranks, first_rank, last_rank, world_size, missing, missing_ranks, hosts, run
-- @requires runs, rank_captures
WITH c AS MATERIALIZED (  -- every run ingested with a rank, its job and whether the job's views read it
    SELECT c.*, u.ingested_at, TRY_CAST(json_extract_string(u.params, '$.world_size') AS BIGINT) AS world_size
    FROM rank_captures c JOIN runs u USING (run_id)
), latest AS (  -- each rank's latest run, with the world size it recorded
    SELECT job, rank, host, name, world_size FROM c WHERE read
), j AS (
    SELECT job, count(*) AS ranks, min(rank) AS first_rank, max(rank) AS last_rank, max(world_size) AS world_size,
           greatest(max(world_size), max(rank) + 1) AS upto, count(DISTINCT host) AS hosts,
           first(name ORDER BY rank) AS run
    FROM latest
    GROUP BY job
), every AS (  -- every run ingested with a rank, superseded ones too
    SELECT job, count(*) AS runs, min(run_id) AS first_run_id, max(ingested_at) AS last_ingested_at
    FROM c
    GROUP BY 1
), absent AS (  -- ranks below `upto` that no latest run holds
    SELECT j.job, m.rank
    FROM j, generate_series(0, j.upto - 1) AS m(rank)
    WHERE j.upto <= 1048576
      AND NOT EXISTS (SELECT 1 FROM latest x WHERE x.job = j.job AND x.rank = m.rank)
), spans AS (  -- consecutive absent ranks as one span
    SELECT job, min(rank) AS lo, max(rank) AS hi
    FROM (SELECT job, rank, rank - row_number() OVER (PARTITION BY job ORDER BY rank) AS grp FROM absent)
    GROUP BY job, grp
), listed AS (
    SELECT job, string_agg(CASE WHEN lo = hi THEN lo::VARCHAR ELSE lo || '-' || hi END, ', ' ORDER BY lo)
               AS missing_ranks
    FROM spans
    GROUP BY job
)
SELECT j.job, j.ranks, j.first_rank, j.last_rank, j.world_size, j.upto - j.ranks AS missing, l.missing_ranks,
       j.hosts, j.run, e.runs, e.last_ingested_at
FROM j JOIN every e USING (job)
LEFT JOIN listed l USING (job)
ORDER BY e.first_run_id
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
