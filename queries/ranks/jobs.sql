-- The multi-rank jobs in the store: one row per job (the runs ingested with a rank that
-- share `job`: tracekit/ranks.py), oldest first, with how many of its ranks are here. A
-- job ingested twice counts each rank's latest run (rank_runs), as the job's queries do.
-- The launcher's world size (WORLD_SIZE, SLURM_NTASKS, ... as nsys recorded them, or
-- --param world_size=N) says which ranks were not ingested: profiling a subset of the
-- ranks is common, so they are listed, not refused. `run` names a run of the job for
-- rank-summary, stragglers, rank-ranges and the report (--run).
-- @param limit  INTEGER  rows to return; 0 = all (default: 0)
-- @column job              the job's id: the launcher's job id, else the ranks' path with the rank masked
-- @column ranks            ranks ingested
-- @column first_rank       lowest rank ingested
-- @column last_rank        highest rank ingested
-- @column world_size       ranks the launcher started (the largest recorded; NULL: not recorded)
-- @column missing          ranks below world_size not ingested (NULL: world size not recorded)
-- @column missing_ranks    those ranks, e.g. 2, 5-7 (NULL: none, or more than a million ranks)
-- @column hosts            distinct hosts the ranks ran on (0: not recorded)
-- @column run              the lowest rank's run (its name): --run for the job's queries
-- @column runs             runs ingested with this job, a rank ingested twice counted twice
-- @column last_ingested_at when its latest run was ingested (UTC)
-- @display job, ranks, first_rank, last_rank, world_size, missing, missing_ranks, hosts, run
-- @requires runs, rank_runs
WITH r AS (
    SELECT job, count(*) AS ranks, min(rank) AS first_rank, max(rank) AS last_rank,
           count(DISTINCT host) AS hosts, first(name ORDER BY rank) AS run
    FROM rank_runs
    GROUP BY job
), every AS (  -- every run ingested with a rank, superseded ones too
    SELECT json_extract_string(params, '$.job') AS job, run_id, ingested_at,
           TRY_CAST(json_extract_string(params, '$.world_size') AS BIGINT) AS world_size
    FROM runs
    WHERE json_extract(params, '$.rank') IS NOT NULL
), e AS (
    SELECT job, max(world_size) AS world_size, count(*) AS runs, min(run_id) AS first_run_id,
           max(ingested_at) AS last_ingested_at
    FROM every
    GROUP BY job
), absent AS (  -- ranks below the world size that no run of the job holds
    SELECT e.job, m.rank
    FROM e, generate_series(0, least(e.world_size, 1048576) - 1) AS m(rank)
    WHERE e.world_size IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM rank_runs x WHERE x.job = e.job AND x.rank = m.rank)
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
SELECT r.job, r.ranks, r.first_rank, r.last_rank, e.world_size,
       CASE WHEN e.world_size IS NOT NULL
            THEN e.world_size - (SELECT count(*) FROM rank_runs x WHERE x.job = r.job AND x.rank < e.world_size)
       END AS missing,
       CASE WHEN e.world_size <= 1048576 THEN l.missing_ranks END AS missing_ranks,
       r.hosts, r.run, e.runs, e.last_ingested_at
FROM r JOIN e USING (job)
LEFT JOIN listed l USING (job)
ORDER BY e.first_run_id
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
