-- Sweep scope samples: the timed requests of two sweeps, keyed by grid point. A sweep is
-- the runs whose params.sweep names it; each point (bs, nc) is its latest run whose meta
-- status is ok and that has timed requests (as sweep_points picks them over all runs).
-- A run outside a sweep (`tracekit capture`) is a side of its own one point, whatever its
-- status (the comparison warns of a failed capture).
-- @param base      TEXT    base sweep id (NULL: base_run)
-- @param new       TEXT    new sweep id (NULL: new_run)
-- @param base_run  BIGINT  base run outside a sweep (NULL: base)
-- @param new_run   BIGINT  new run outside a sweep (NULL: new)
-- @column side   0 = base, 1 = new
-- @column key    'bs=8,nc=1024' ('requests': a run whose params lack bs or nc)
-- @column value  end-to-end request latency, ms
WITH p AS (
    SELECT s.side, r.run_id,
           json_extract(r.params, '$.bs')::INTEGER AS bs, json_extract(r.params, '$.nc')::INTEGER AS nc
    FROM (VALUES (0, $base, $base_run::BIGINT), (1, $new, $new_run::BIGINT)) s(side, sweep, run)
    JOIN runs r ON json_extract_string(r.params, '$.sweep') = s.sweep OR r.run_id = s.run
    WHERE (s.run IS NOT NULL OR coalesce(json_extract_string(r.meta, '$.status'), 'ok') = 'ok')
      AND r.run_id IN (SELECT run_id FROM requests WHERE phase = 'timed')
    QUALIFY row_number() OVER (PARTITION BY s.side, bs, nc ORDER BY r.run_id DESC) = 1
)
SELECT p.side, CASE WHEN p.bs IS NULL OR p.nc IS NULL THEN 'requests' ELSE format('bs={},nc={}', p.bs, p.nc) END AS key,
       q.latency_ms AS value
FROM p JOIN requests q ON q.run_id = p.run_id AND q.phase = 'timed'
