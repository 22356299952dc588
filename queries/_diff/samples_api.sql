-- CUDA API scope samples: one row per runtime/driver API call of either run.
-- @param base  INTEGER  base run id
-- @param new   INTEGER  new run id
-- @column side   0 = base run, 1 = new run
-- @column key    API name id (_strings; the name with its _vNNNN suffix stripped)
-- @column value  call duration, ns
SELECT s.side, c.name_id AS key, c.end_ns - c.start_ns AS value
FROM (VALUES (0, $base), (1, $new)) s(side, run_id)
JOIN _api_calls c ON c.run_id = s.run_id
WHERE c.run_id IN ($base, $new)
