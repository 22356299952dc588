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
