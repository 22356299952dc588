-- The run that stands for each point of a sweep in the run scopes (kernel, nvtx, api, memcpy,
-- gpu, um, cpu, python, memory, ncu) of a comparison of two sweeps: per point (macro grid_point,
-- 'm=1024,dtype=fp16'), the sweep's latest captured run (macro run_captured_us) with an nsys
-- or ncu export whose meta status is ok.
-- @param sweep   TEXT  the sweep id
-- @column point   the point, as grid_point gives it
-- @column run_id  its run
SELECT grid_point(params) AS point, run_id
FROM runs
WHERE json_extract_string(params, '$.sweep') = $sweep
  AND grid_point(params) IS NOT NULL
  AND coalesce(json_extract_string(meta, '$.status'), 'ok') = 'ok'
  AND list_has_any(string_split(kind, ','), ['nsys', 'ncu'])
QUALIFY row_number() OVER (PARTITION BY point ORDER BY run_captured_us(meta) DESC NULLS LAST, run_id DESC) = 1
ORDER BY min(json_extract(params, '$.sweep_point')::INTEGER) OVER (PARTITION BY point), point
