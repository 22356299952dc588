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

-- The runs that are ranks of a multi-rank job (params rank and job, set at ingest:
-- tracekit/ranks.py): one row per (job, rank), the rank's latest run where a job was
-- ingested twice. Shared by rank-summary, rank-ranges and stragglers.
CREATE OR REPLACE VIEW rank_runs AS
SELECT run_id, name,
       json_extract_string(params, '$.job') AS job,        -- runs of one job share it
       json_extract(params, '$.rank')::INTEGER AS rank,     -- global rank
       json_extract_string(params, '$.host') AS host        -- host it ran on, when known
FROM runs
WHERE json_extract(params, '$.rank') IS NOT NULL
QUALIFY row_number() OVER (PARTITION BY job, rank ORDER BY run_id DESC) = 1;

-- The job of a run and that job's ranks: job_ranks(run) lists rank_runs of the job run
-- `run` belongs to; a run without a rank raises an error saying how to give it one, and so
-- does a job with one rank in the store (a question across ranks needs two to compare).
CREATE OR REPLACE MACRO job_ranks(run) AS TABLE
WITH j AS (
    SELECT CASE WHEN json_extract(params, '$.rank') IS NULL
                THEN error('run ' || run || ' has no rank: ingest each rank''s export with its rank '
                           || '(a file or folder named rank3 or _r3_, or --param rank=3)')
                ELSE json_extract_string(params, '$.job') END AS job
    FROM runs WHERE run_id = run
), n AS (
    SELECT CASE WHEN count(*) > 1 THEN count(*)
                ELSE error('run ' || run || ' is the only rank of its job (' || coalesce(any_value(j.job), '?')
                           || ') in the store: a question across ranks compares two or more; ingest the other '
                           || 'ranks'' exports (`tracekit query jobs` lists the ranks each job has)') END AS ranks
    FROM rank_runs r JOIN j ON r.job = j.job
)
SELECT r.* FROM rank_runs r, j, n WHERE r.job = j.job AND n.ranks > 1;
