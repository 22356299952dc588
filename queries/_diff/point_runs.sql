-- The run that stands for each grid point of the two sides of a sweep comparison. A sweep
-- is the runs whose params.sweep names it; each point (bs, nc) is its latest captured run
-- (macro run_captured_us) whose meta status is ok and that has timed requests (a run of
-- sweep_runs).
-- A run outside a sweep (`tracekit capture`) is a side of its own one point, whatever its
-- status (the comparison warns of a failed capture); two such runs are compared whatever
-- their points, under one key ('bs=1,nc=128 -> bs=2,nc=128' where they differ). The
-- sweep scope's other queries read it as `point_runs`, which diff puts before them.
-- @param base      TEXT    base sweep id (NULL: base_run)
-- @param new       TEXT    new sweep id (NULL: new_run)
-- @param base_run  BIGINT  base run outside a sweep (NULL: base)
-- @param new_run   BIGINT  new run outside a sweep (NULL: new)
-- @column side    0 = base, 1 = new
-- @column key     'bs=8,nc=1024' (macro grid_point; 'requests': a run whose params give no point)
-- @column run_id  the point's run
WITH p AS (
    SELECT s.side, r.run_id,
           coalesce(grid_point(r.params), 'requests') AS point
    FROM (VALUES (0, $base, $base_run::BIGINT), (1, $new, $new_run::BIGINT)) s(side, sweep, run)
    JOIN runs r ON json_extract_string(r.params, '$.sweep') = s.sweep OR r.run_id = s.run
    WHERE (s.run IS NOT NULL OR coalesce(json_extract_string(r.meta, '$.status'), 'ok') = 'ok')
      AND r.run_id IN (SELECT run_id FROM requests WHERE phase = 'timed')
    QUALIFY row_number() OVER (PARTITION BY s.side, point
                               ORDER BY run_captured_us(r.meta) DESC NULLS LAST, r.run_id DESC) = 1
), two_runs AS (  -- two runs outside a sweep at different points: one key
    SELECT max(point) FILTER (WHERE side = 0) || ' -> ' || max(point) FILTER (WHERE side = 1) AS key
    FROM p
    WHERE $base_run::BIGINT IS NOT NULL AND $new_run::BIGINT IS NOT NULL
    HAVING count(DISTINCT point) > 1
)
SELECT p.side, coalesce((SELECT key FROM two_runs), p.point) AS key, p.run_id
FROM p
