-- Every timed request of the sweep grid: the rows of the seed benchmark's spreadsheet.
-- One sweep's points (sweep=, default the latest sweep), picked as sweep-latency picks them
-- (latest captured ok run of the sweep per preset, tool, bs, nc); one row per timed request, in request order.
-- A sweep (or the runs outside any) without such a run is an error, not an empty answer, that
-- says why (a program's sweep, --grid, times no request; its points failed).
-- @param sweep  TEXT     the sweep: its id (sweep-20261124T195459.720Z), a run of it (id or name; a run outside any sweep names the runs outside any sweep), latest (the sweep of the latest run ingested from one; where no run is, the runs outside any sweep) or all (per point, the run captured last over every run of the store, sweeps mixed: macro run_captured_us) (default: latest)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @column run                   name of the run the request belongs to
-- @column preset                workload preset
-- @column tool                  profiler the run ran under (none, nsys, ncu)
-- @column bs                    batch size, users per request (the seed's batch_size)
-- @column nc                    candidates per user (the seed's num_candidate)
-- @column request_idx           request number within the run
-- @column kv_caches             users served from the KV cache (the seed's "KV Caches")
-- @column candidate_embeddings  candidates scored per user (the seed's "Candidate Embeddings")
-- @column latency_ms            end-to-end request latency, ms (the seed's "Total time(ms)")
-- @column model_flop            the request's floating-point work, its matrix products (capture/model.py request_flop), FLOP; NULL where the capture did not count it (before tracekit did; a benchmark log)
-- @column attention_flop        the attention's part of it (its visible query-key pairs), FLOP; NULL where not counted
-- @column model_tflops_per_s    model_flop over latency_ms, TFLOP/s; NULL where not counted
-- @display run, bs, nc, request_idx, latency_ms
-- @requires requests, runs, sweep_runs
WITH points AS (  -- the sweep's points: per (preset, tool, bs, nc), its latest captured run (sweep_runs)
    SELECT run_id, name, preset, tool, bs, nc FROM sweep_runs
    WHERE in_sweep(params, $sweep)
    QUALIFY row_number() OVER (PARTITION BY preset, tool, bs, nc
                               ORDER BY captured_us DESC NULLS LAST, run_id DESC) = 1
)
SELECT p.name AS run, p.preset, p.tool, q.bs, q.nc,
       q.request_idx, q.kv_caches, q.candidate_embeddings, q.latency_ms, q.model_flop, q.attention_flop,
       q.model_flop / nullif(q.latency_ms, 0) * 1e-9 AS model_tflops_per_s
FROM points p
JOIN requests q ON q.run_id = p.run_id AND q.phase = 'timed'
ORDER BY p.preset, p.tool, q.bs, q.nc, q.request_idx
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
