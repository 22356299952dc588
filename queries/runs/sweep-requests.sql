-- Every timed request of the sweep grid: the rows of the seed benchmark's spreadsheet.
-- Spans all runs, with the same point selection as sweep-latency (latest ok run per
-- preset, tool, bs, nc); one row per timed request, in request order.
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
-- @display run, bs, nc, request_idx, latency_ms
-- @requires requests, sweep_points
SELECT p.name AS run, p.preset, p.tool, q.bs, q.nc,
       q.request_idx, q.kv_caches, q.candidate_embeddings, q.latency_ms
FROM sweep_points p
JOIN requests q ON q.run_id = p.run_id AND q.phase = 'timed'
ORDER BY p.preset, p.tool, q.bs, q.nc, q.request_idx
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
