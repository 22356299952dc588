-- `tracekit bench` results, read from the JSON file it writes (--json): one row per
-- (configuration, variant) measured, times in ms as the benchmark reports them.
CREATE TABLE IF NOT EXISTS bench_results (
    run_id INTEGER NOT NULL,
    config VARCHAR NOT NULL,      -- the configuration's name (hstu_T4096, seed1, ...)
    variant VARCHAR NOT NULL,     -- the implementation timed (triton_dense, sdpa, ...)
    kind VARCHAR,                 -- the configuration's kind (dense, bsa, cached, jagged)
    baseline VARCHAR,             -- the variant the speedups are against
    dtype VARCHAR,
    device VARCHAR,
    batch INTEGER,                -- B
    max_seq_len INTEGER,          -- N
    heads INTEGER,                -- H
    d_qk INTEGER,
    d_v INTEGER,
    tokens BIGINT,
    calls INTEGER,                -- timed calls (n_rep)
    median_ms DOUBLE,
    mean_ms DOUBLE,
    std_ms DOUBLE,
    min_ms DOUBLE,
    max_ms DOUBLE,
    p95_ms DOUBLE,
    p99_ms DOUBLE,
    host_ms DOUBLE,               -- the host's median time to enqueue one call
    late_calls INTEGER,           -- timed calls the GPU-side delay did not cover (0 expected)
    flops DOUBLE,                 -- floating-point operations of one call
    tflops DOUBLE,                -- flops / median, TFLOP/s
    speedup_vs_baseline DOUBLE,
    speedup_low DOUBLE,           -- its 95 % bootstrap interval
    speedup_high DOUBLE,
    rel_err DOUBLE,
    max_abs_err DOUBLE,
    err_tol DOUBLE,
    matches_reference BOOLEAN,
    peak_alloc_mb DOUBLE,         -- GPU memory a call allocates beyond what was allocated before it, MiB
    peak_reserved_mb DOUBLE,      -- GPU memory PyTorch's allocator held at its peak during a call, MiB
    error VARCHAR,                -- why the variant could not be timed (no times then)
    check_error VARCHAR           -- why its output could not be checked
);

-- Each timed call's time of each (configuration, variant), in call order.
CREATE TABLE IF NOT EXISTS bench_samples (
    run_id INTEGER NOT NULL,
    config VARCHAR NOT NULL,
    variant VARCHAR NOT NULL,
    call_idx INTEGER NOT NULL,
    ms DOUBLE NOT NULL
);
