-- Sweep scope samples: the timed requests of each point's run (`point_runs`,
-- point_runs.sql, which diff puts before this query), keyed by grid point.
-- @column side   0 = base, 1 = new
-- @column key    'bs=8,nc=1024' ('requests': a run whose params lack bs or nc)
-- @column value  end-to-end request latency, ms
SELECT p.side, p.key, q.latency_ms AS value
FROM point_runs p JOIN requests q ON q.run_id = p.run_id AND q.phase = 'timed'
