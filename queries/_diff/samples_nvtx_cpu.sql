-- NVTX scope CPU samples: each run's CPU samples (nsys's CPU sampling) counted under each NVTX
-- path open on their thread when taken (cpu_sample_paths: nested ranges included), with the
-- run's sampling interval: the samples times the interval are the CPU time spent inside the
-- path's ranges.
-- @param base  INTEGER  base run id
-- @param new   INTEGER  new run id
-- @column side         0 = base run, 1 = new run
-- @column key          NVTX path
-- @column samples      samples inside its ranges
-- @column interval_ns  the run's sampling interval, ns (cpu_sample_interval)
SELECT 0 AS side, path AS key, count(*) AS samples, any_value((SELECT interval_ns FROM cpu_sample_interval($base)))
FROM cpu_sample_paths($base) GROUP BY path
UNION ALL
SELECT 1, path, count(*), any_value((SELECT interval_ns FROM cpu_sample_interval($new)))
FROM cpu_sample_paths($new) GROUP BY path
ORDER BY 1, 2
