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
    peak_mem_allocated_mb DOUBLE,   -- peak memory allocated during the request, MiB (2^20 bytes: the seeds' "MB")
    peak_mem_reserved_mb DOUBLE,    -- peak memory reserved during the request, MiB
    model_flop BIGINT,              -- the request's floating-point work: its matrix products (capture/model.py request_flop); NULL where not counted
    attention_flop BIGINT           -- the attention's part of it
);

-- When a run's capture started, microseconds since the Unix epoch: tracekit's record
-- (meta.started_at, an ISO time; one without a UTC offset read as UTC, whatever the reading
-- machine's zone), else the nsys export's session start (meta.session_start_utc_ns); NULL where
-- neither is recorded (an ncu report or a benchmark file ingested alone) or can be read. A
-- sweep point's latest run is its latest captured (`ORDER BY captured_us DESC NULLS LAST,
-- run_id DESC`): an older sweep ingested after a newer one does not stand for the points both
-- have (sweep=all); a run with no capture time stands for a point only where no run of it has
-- one; the store's order (run_id) decides between runs of one capture (a point ingested twice).
CREATE OR REPLACE MACRO run_captured_us(meta) AS
    coalesce(TRY(epoch_us(TRY_CAST(
                 regexp_replace(json_extract_string(meta, '$.started_at'), '([T ]\d\d:\d\d(:\d\d(\.\d*)?)?)$', '\1+00:00')
                 AS TIMESTAMPTZ))),
             TRY_CAST(json_extract_string(meta, '$.session_start_utc_ns') AS BIGINT) // 1000);

-- The runs that can stand for a sweep point: those whose meta status is ok and that have timed
-- requests, with the point they are at. sweep-latency and sweep-requests take, per (preset,
-- tool, bs, nc), the latest captured of one sweep's (their sweep parameter; macros.sql in_sweep).
CREATE OR REPLACE VIEW sweep_runs AS
SELECT run_id, name, params, run_captured_us(meta) AS captured_us,
       json_extract_string(params, '$.preset') AS preset,
       json_extract_string(params, '$.tool') AS tool,
       json_extract(params, '$.bs')::INTEGER AS bs,
       json_extract(params, '$.nc')::INTEGER AS nc
FROM runs
WHERE coalesce(json_extract_string(meta, '$.status'), 'ok') = 'ok'
  AND run_id IN (SELECT run_id FROM requests WHERE phase = 'timed');

-- The GPU's state as a run's timed requests ran, where its capture read it (meta.gpu_timed: NVML,
-- after each timed request; capture/nvml.py): the SM clock's median and lowest, the highest
-- temperature, and the clock slowdown reasons seen, each with the share of the reads it was in
-- ('' none was).
CREATE OR REPLACE VIEW gpu_timed AS
SELECT run_id,
       TRY_CAST(json_extract(meta, '$.gpu_timed.sm_clock_mhz.median') AS DOUBLE) AS sm_clock_mhz,
       TRY_CAST(json_extract(meta, '$.gpu_timed.sm_clock_mhz.min') AS DOUBLE) AS sm_clock_min_mhz,
       TRY_CAST(json_extract(meta, '$.gpu_timed.temp_c.max') AS DOUBLE) AS temp_max_c,
       (SELECT coalesce(string_agg(k || ' ' || json_extract_string(meta, '$.gpu_timed.slowdown_pct."' || k || '"') || '%',
                                   ', ' ORDER BY k), '')
        FROM unnest(coalesce(json_keys(json_extract(meta, '$.gpu_timed.slowdown_pct')), [])) AS t(k)) AS slowdown
FROM runs
WHERE json_extract(meta, '$.gpu_timed.samples') IS NOT NULL;

-- The sweep's points over every run (sweeps mixed): per (preset, tool, bs, nc), the latest
-- captured of sweep_runs.
CREATE OR REPLACE VIEW sweep_points AS
SELECT run_id, name, preset, tool, bs, nc FROM sweep_runs
QUALIFY row_number() OVER (PARTITION BY preset, tool, bs, nc
                           ORDER BY captured_us DESC NULLS LAST, run_id DESC) = 1;

-- Every run ingested with a rank (params rank and job, set at ingest: tracekit/ranks.py), with
-- the job it is a rank of. Runs that share `job` may be several captures of it, made one after
-- another (one path captured again, two launches of one SLURM job): each is a job of its own,
-- `JOB#n` for the n-th capture ingested (the first keeps `JOB`). The ranks of one launch run at
-- the same time: runs whose spans of time overlap (from nsys's session start to when the
-- capture stopped, UTC) are one capture. Runs that ran at other times join the capture before
-- them unless they hold a rank it has (ranks profiled one launch at a time, or given a job by
-- --param, are one job); where they do, they begin the next capture. A run that does not
-- record when it stopped (ingested before tracekit read it) takes in every later run of its job;
-- runs that record no session start (ncu's) are one capture apart. A rank twice in a capture
-- (the capture ingested twice: exported again, or given another parameter) counts its latest
-- run (`latest`), the one the job's views read.
CREATE OR REPLACE VIEW rank_captures AS
WITH RECURSIVE r AS (
    SELECT run_id, name,
           json_extract_string(params, '$.job') AS given_job,
           json_extract(params, '$.rank')::INTEGER AS rank,
           json_extract_string(params, '$.host') AS host,
           TRY_CAST(json_extract_string(meta, '$.session_start_utc_ns') AS HUGEINT) AS lo,
           TRY_CAST(json_extract_string(meta, '$.session_start_utc_ns') AS HUGEINT)
               + coalesce(TRY_CAST(json_extract_string(meta, '$.session_stop_ns') AS HUGEINT),
                          170141183460469231731687303715884105727::HUGEINT / 2) AS hi
    FROM runs
    WHERE json_extract(params, '$.rank') IS NOT NULL
), g AS (  -- an island of time begins where a run starts after every earlier-starting run of its job stopped
    SELECT *, CASE WHEN lo IS NULL THEN 0
                   WHEN coalesce(lo > max(hi) OVER (PARTITION BY given_job ORDER BY lo, run_id
                                                    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), true) THEN 1
                   ELSE 0 END AS begins
    FROM r
), i AS (
    SELECT *, CASE WHEN lo IS NULL THEN 0
                   ELSE sum(begins) OVER (PARTITION BY given_job ORDER BY lo, run_id ROWS UNBOUNDED PRECEDING)
              END AS island
    FROM g
), islands AS (
    SELECT given_job, island, list(DISTINCT rank) AS ranks FROM i WHERE island > 0 GROUP BY given_job, island
), walk AS (  -- island by island: a new capture where it holds a rank of the capture before it
    SELECT given_job, island, 1 AS capture, ranks AS seen FROM islands WHERE island = 1
    UNION ALL
    SELECT s.given_job, s.island,
           w.capture + CASE WHEN len(list_intersect(w.seen, s.ranks)) > 0 THEN 1 ELSE 0 END,
           CASE WHEN len(list_intersect(w.seen, s.ranks)) > 0 THEN s.ranks ELSE list_concat(w.seen, s.ranks) END
    FROM walk w JOIN islands s ON s.given_job = w.given_job AND s.island = w.island + 1
), c AS (
    SELECT i.*, coalesce(w.capture, 0) AS capture
    FROM i LEFT JOIN walk w ON w.given_job = i.given_job AND w.island = i.island
), n AS (
    SELECT *, min(run_id) OVER (PARTITION BY given_job, capture) AS first_run,
           run_id = max(run_id) OVER (PARTITION BY given_job, capture, rank) AS latest
    FROM c
), named AS (
    SELECT *, CASE WHEN nth = 1 THEN given_job ELSE given_job || '#' || nth END AS job
    FROM (SELECT *, dense_rank() OVER (PARTITION BY given_job ORDER BY first_run) AS nth FROM n)
)
SELECT run_id, name,
       job,        -- runs of one job share it
       given_job,  -- params job: the launcher's job id, else the ranks' path with the rank masked
       rank,     -- global rank
       host,     -- host it ran on, when known
       nth,      -- which capture of `given_job` this run is, 1 = the first ingested
       latest,   -- the latest run of its rank in its capture
       -- the run the job's views read for its rank: the latest (one, where a given job is named like JOB#2)
       latest AND row_number() OVER (PARTITION BY job, rank ORDER BY latest DESC, run_id DESC) = 1 AS read
FROM named;

-- The ranks of the multi-rank jobs: one row per (job, rank), the run its views read
-- (rank_captures). Shared by rank-summary, rank-ranges and stragglers.
CREATE OR REPLACE VIEW rank_runs AS
SELECT run_id, name, job, rank, host FROM rank_captures WHERE read;

-- The job of a run and that job's ranks: job_ranks(run) lists rank_runs of the job run
-- `run` belongs to; a run without a rank raises an error saying how to give it one, and so
-- does a job with one rank in the store (a question across ranks needs two to compare).
CREATE OR REPLACE MACRO job_ranks(run) AS TABLE
WITH c AS MATERIALIZED (  -- (the captures once: the view is the costly part)
    SELECT * FROM rank_captures
), k AS (  -- rank_runs, of c
    SELECT run_id, name, job, rank, host FROM c WHERE read
), j AS (
    SELECT CASE WHEN json_extract(params, '$.rank') IS NULL
                THEN error('run ' || run || ' has no rank: ingest each rank''s export with its rank '
                           || '(a file or folder named rank3 or _r3_, or --param rank=3)')
                ELSE (SELECT c.job FROM c WHERE c.run_id = run) END AS job
    FROM runs WHERE run_id = run
), n AS (
    SELECT CASE WHEN count(*) > 1 THEN count(*)
                ELSE error('run ' || run || ' is the only rank of its job (' || coalesce(any_value(j.job), '?')
                           || ') in the store: a question across ranks compares two or more; ingest the other '
                           || 'ranks'' exports (`tracekit query jobs` lists the ranks each job has)') END AS ranks
    FROM k r JOIN j ON r.job = j.job
)
SELECT r.* FROM k r, j, n WHERE r.job = j.job AND n.ranks > 1;
