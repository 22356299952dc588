-- Timed requests recorded by `tracekit capture` (requests.csv in a run folder).
CREATE TABLE IF NOT EXISTS requests (
    run_id INTEGER,                 -- runs.run_id
    request_idx INTEGER,            -- request number within the run
    phase VARCHAR,                  -- 'warmup' or 'timed'
    bs INTEGER,                     -- batch size (users per request)
    nc INTEGER,                     -- candidates per user
    kv_caches INTEGER,              -- KV caches in use (the seed's "KV Caches: N")
    candidate_embeddings INTEGER,   -- candidates scored (the seed's "Candidate Embeddings: M")
    latency_ms DOUBLE,              -- end-to-end request time, ms (CUDA events on a GPU)
    peak_mem_allocated_mb DOUBLE,   -- peak memory allocated during the request, MB
    peak_mem_reserved_mb DOUBLE     -- peak memory reserved during the request, MB
);

-- The runs that can stand for a sweep point: those whose meta status is ok and that have timed
-- requests, with the point they are at. sweep-latency and sweep-requests take, per (preset,
-- tool, bs, nc), the latest of one sweep's (their sweep parameter; macros.sql in_sweep).
CREATE OR REPLACE VIEW sweep_runs AS
SELECT run_id, name, params,
       json_extract_string(params, '$.preset') AS preset,
       json_extract_string(params, '$.tool') AS tool,
       json_extract(params, '$.bs')::INTEGER AS bs,
       json_extract(params, '$.nc')::INTEGER AS nc
FROM runs
WHERE coalesce(json_extract_string(meta, '$.status'), 'ok') = 'ok'
  AND run_id IN (SELECT run_id FROM requests WHERE phase = 'timed');

-- The sweep's points over every run (sweeps mixed): per (preset, tool, bs, nc), the latest of
-- sweep_runs.
CREATE OR REPLACE VIEW sweep_points AS
SELECT run_id, name, preset, tool, bs, nc FROM sweep_runs
QUALIFY row_number() OVER (PARTITION BY preset, tool, bs, nc ORDER BY run_id DESC) = 1;

-- Every run ingested with a rank (params rank and job, set at ingest: tracekit/ranks.py), with
-- the job it is a rank of. Runs that share `job` and rank but were captured at different times
-- (nsys's session start; a run that does not record one is a capture of its own) are captures
-- of that job made one after another, such as one path captured again, or two launches of one
-- SLURM job: each rank's n-th capture, in the order they were captured, is a rank of job
-- `JOB#n` (the first keeps `JOB`). A capture ingested twice (exported again, or given a
-- corrected parameter) is one capture; its latest run is the one its job's views read.
CREATE OR REPLACE VIEW rank_captures AS
WITH r AS (
    SELECT run_id, name,
           json_extract_string(params, '$.job') AS given_job,
           json_extract(params, '$.rank')::INTEGER AS rank,
           json_extract_string(params, '$.host') AS host,
           coalesce(TRY_CAST(json_extract_string(meta, '$.session_start_utc_ns') AS HUGEINT), -run_id) AS capture
    FROM runs
    WHERE json_extract(params, '$.rank') IS NOT NULL
), c AS (
    SELECT *,
           min(run_id) OVER (PARTITION BY given_job, rank, capture) AS first_run,
           run_id = max(run_id) OVER (PARTITION BY given_job, rank, capture) AS latest,
           -- captures are ordered by when they began where every run of the job says, else as ingested
           bool_and(capture >= 0) OVER (PARTITION BY given_job) AS timed
    FROM r
)
SELECT run_id, name,
       CASE WHEN nth = 1 THEN given_job ELSE given_job || '#' || nth END AS job,  -- runs of one job share it
       given_job,  -- params job: the launcher's job id, else the ranks' path with the rank masked
       rank,     -- global rank
       host,     -- host it ran on, when known
       nth,      -- which capture of `given_job` this rank's run is, 1 = the first
       latest    -- the latest run of its capture (the one the job's views read)
FROM (SELECT *, dense_rank() OVER (PARTITION BY given_job, rank
                                   ORDER BY CASE WHEN timed THEN capture END, first_run) AS nth
      FROM c);

-- The ranks of the multi-rank jobs: one row per (job, rank), its capture's latest run
-- (rank_captures). Shared by rank-summary, rank-ranges and stragglers.
CREATE OR REPLACE VIEW rank_runs AS
SELECT run_id, name, job, rank, host
FROM rank_captures
WHERE latest
QUALIFY row_number() OVER (PARTITION BY job, rank ORDER BY run_id DESC) = 1;  -- (a given job named like JOB#2)

-- The job of a run and that job's ranks: job_ranks(run) lists rank_runs of the job run
-- `run` belongs to; a run without a rank raises an error saying how to give it one, and so
-- does a job with one rank in the store (a question across ranks needs two to compare).
CREATE OR REPLACE MACRO job_ranks(run) AS TABLE
WITH j AS (
    SELECT CASE WHEN json_extract(params, '$.rank') IS NULL
                THEN error('run ' || run || ' has no rank: ingest each rank''s export with its rank '
                           || '(a file or folder named rank3 or _r3_, or --param rank=3)')
                ELSE (SELECT c.job FROM rank_captures c WHERE c.run_id = run) END AS job
    FROM runs WHERE run_id = run
), n AS (
    SELECT CASE WHEN count(*) > 1 THEN count(*)
                ELSE error('run ' || run || ' is the only rank of its job (' || coalesce(any_value(j.job), '?')
                           || ') in the store: a question across ranks compares two or more; ingest the other '
                           || 'ranks'' exports (`tracekit query jobs` lists the ranks each job has)') END AS ranks
    FROM rank_runs r JOIN j ON r.job = j.job
)
SELECT r.* FROM rank_runs r, j, n WHERE r.job = j.job AND n.ranks > 1;
