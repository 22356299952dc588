-- Sweep scope peak memory: per grid point (`point_runs`, point_runs.sql, which diff puts before
-- this query), the largest peak of GPU memory in one of its timed requests (requests.csv's
-- columns; NULL where the run recorded none: on CPU, or a benchmark log).
-- @column side                   0 = base, 1 = new
-- @column key                    'bs=8,nc=1024' ('requests': a run whose params lack bs or nc)
-- @column peak_mem_allocated_mb  largest peak of memory allocated by PyTorch in a timed request, MiB
-- @column peak_mem_reserved_mb   largest peak of memory reserved by its caching allocator, MiB
SELECT p.side, p.key, max(q.peak_mem_allocated_mb) AS peak_mem_allocated_mb,
       max(q.peak_mem_reserved_mb) AS peak_mem_reserved_mb
FROM point_runs p JOIN requests q ON q.run_id = p.run_id AND q.phase = 'timed'
GROUP BY p.side, p.key
