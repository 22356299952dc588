-- Bench scope samples: every timed call of either bench run (`tracekit bench`'s per-call
-- times), keyed by configuration and variant.
-- @param base  INTEGER  base run id
-- @param new   INTEGER  new run id
-- @column side   0 = base run, 1 = new run
-- @column key    'hstu_T4096/triton_dense' (configuration/variant)
-- @column value  the call's time, ns
SELECT s.side, b.config || '/' || b.variant AS key, b.ms * 1e6 AS value
FROM (VALUES (0, $base), (1, $new)) s(side, run_id)
JOIN bench_samples b ON b.run_id = s.run_id
