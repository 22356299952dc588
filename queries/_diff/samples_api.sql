-- CUDA API scope samples: one row per runtime/driver API call of either run.
-- @param base  INTEGER  base run id
-- @param new   INTEGER  new run id
-- @column side   0 = base run, 1 = new run
-- @column key    API name id (_strings; the name with its _vNNNN suffix stripped), or the
--                base run's id of the same name (registered as _diff_keymap: diff's namesakes)
-- @column value  call duration, ns
SELECT s.side, coalesce(m.key, c.name_id) AS key, c.end_ns - c.start_ns AS value
FROM (VALUES (0, $base), (1, $new)) s(side, run_id)
JOIN _api_calls c ON c.run_id = s.run_id
LEFT JOIN _diff_keymap m ON m.side = s.side AND m.name_id = c.name_id
WHERE c.run_id IN ($base, $new)
