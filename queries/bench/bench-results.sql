-- A `tracekit bench` run's results, per configuration and variant: the per-call time's median
-- and spread, TFLOP/s, the speedup against the benchmark's baseline with its 95 % bootstrap
-- interval (the same process, both sets of per-call times), and the output's check against
-- the reference. As `tracekit bench attention` printed them, from the JSON it wrote (--json).
-- A variant that failed has its error and no times; name= keeps the variants or
-- configurations whose name contains the text.
-- @param run     TEXT     run id or name, or 'all' (default: latest run)
-- @param name    TEXT     only the rows whose configuration or variant contains this text, case-insensitive (default: null)
-- @param limit   INTEGER  rows to return; 0 = all (default: 0)
-- @column run_id               the bench run
-- @column config               configuration (hstu_T4096, seed1, ...)
-- @column variant              implementation timed (triton_dense, sdpa, ...)
-- @column calls                timed calls
-- @column median_ms            median time of a call (CUDA events around it, GPU time only), ms
-- @column p95_ms               95th percentile, ms
-- @column std_ms               standard deviation of a call's time, ms
-- @column mean_ms              mean time of a call, ms
-- @column min_ms               fastest call, ms
-- @column max_ms               slowest call, ms
-- @column p99_ms               99th percentile, ms
-- @column tflops               floating-point work of a call over its median time, TFLOP/s
-- @column speedup_vs_baseline  the baseline's median over this variant's (same configuration, same process)
-- @column speedup_low          lower end of its 95 % bootstrap interval
-- @column speedup_high         upper end
-- @column baseline             the variant the speedup is against
-- @column matches_reference    the output equals the reference's within err_tol (NULL: not checked)
-- @column rel_err              ||out - ref|| / ||ref||
-- @column host_ms              the host's median time to enqueue one call, ms (above median_ms: calls back to back are bound by the host)
-- @column late_calls           timed calls the GPU reached before the host had enqueued them: their times may hold host time (0 expected; a kernel that waits for the GPU, reading a tensor on the host, has every call late)
-- @column peak_alloc_mb        GPU memory one call allocates beyond what was allocated before it (its outputs and workspace), MiB (2^20 bytes)
-- @column peak_reserved_mb     GPU memory PyTorch's allocator held at its peak during that call (its cache, the process's), MiB
-- @column source               where a variant of yours came from (FILE.py:FUNCTION or MODULE:FUNCTION, as given to --variants); NULL for ours
-- @column error                why the variant could not be timed, or why its output could not be checked
-- @display config, variant, calls, median_ms, p95_ms, tflops, speedup_vs_baseline, speedup_low, speedup_high, matches_reference, error
-- @requires bench_results
WITH named AS (
    SELECT * FROM bench_results
    WHERE ($run IS NULL OR run_id = $run)
      AND ($name IS NULL OR contains(lower(config), lower($name)) OR contains(lower(variant), lower($name)))
), checked AS (  -- read first: a name nothing has is most likely a typo
    SELECT CASE WHEN $name IS NULL OR count(*) > 0 THEN true
                ELSE error('bench-results: no configuration or variant '
                           || CASE WHEN $run IS NULL THEN 'of a bench run' ELSE 'of run ' || $run END
                           || ' has a name containing ''' || $name || ''' (`tracekit query bench-results` lists them)') END AS ok
    FROM named
), yours AS (  -- the variants of the user's: their sources, in the file's variant_sources (the run's meta)
    SELECT r.run_id, e.key AS variant, e.value ->> '$' AS source
    FROM runs r, json_each(r.meta -> '$.bench.variant_sources') e
    WHERE r.run_id IN (SELECT run_id FROM named)
)
SELECT run_id, config, variant, calls, median_ms, p95_ms, std_ms, mean_ms, min_ms, max_ms, p99_ms, tflops,
       speedup_vs_baseline, speedup_low, speedup_high, baseline, matches_reference, rel_err, host_ms,
       late_calls, peak_alloc_mb, peak_reserved_mb, yours.source,
       coalesce(error, check_error) AS error
FROM checked JOIN named ON checked.ok LEFT JOIN yours USING (run_id, variant)
ORDER BY run_id, config, (variant <> baseline), variant
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
