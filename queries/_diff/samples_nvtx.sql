-- NVTX scope samples: one row per NVTX range instance of either run, keyed by its path
-- (texts from the outermost range down). The range's wall time, and its GPU projection
-- (NULL when it launched no GPU work: such instances count, but not in the projection).
-- @param base  INTEGER  base run id
-- @param new   INTEGER  new run id
-- @column side   0 = base run, 1 = new run
-- @column key    NVTX path
-- @column value  range duration, ns
-- @column proj   projected GPU time (first op start to last op end), ns; NULL without GPU work
SELECT s.side, r.path AS key, r.dur_ns AS value, r.proj_dur_ns AS proj
FROM (VALUES (0, $base), (1, $new)) s(side, run_id)
JOIN nvtx_ranges r ON r.run_id = s.run_id
WHERE r.run_id IN ($base, $new) AND r.path IS NOT NULL
