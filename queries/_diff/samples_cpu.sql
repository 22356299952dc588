-- CPU scope samples: each run's CPU samples (nsys's CPU sampling) counted by the function
-- they hit (their depth-0 frame), with the run's sampling interval: the samples times the
-- interval are the CPU time spent in the function itself. A function is keyed by its name as
-- nsys resolved it; one nsys could not resolve, by its module's file name ('[unresolved in
-- libc.so.6]'): its address moves from run to run.
-- @param base  INTEGER  base run id
-- @param new   INTEGER  new run id
-- @column side         0 = base run, 1 = new run
-- @column key          the function (or '[unresolved in MODULE]')
-- @column samples      samples that hit it
-- @column interval_ns  the run's sampling interval, ns (cpu_sample_interval)
WITH sides AS (
    SELECT 0 AS side, $base AS run_id, (SELECT interval_ns FROM cpu_sample_interval($base)) AS interval_ns
    UNION ALL
    SELECT 1, $new, (SELECT interval_ns FROM cpu_sample_interval($new))
)
SELECT s.side,
       CASE WHEN coalesce(f.unresolved, f.function LIKE '0x%')
            THEN '[unresolved in ' || regexp_extract(coalesce(f.module, ''), '[^/]*$') || ']'
            ELSE f.function END AS key,
       count(*) AS samples, any_value(s.interval_ns) AS interval_ns
FROM sides s JOIN cpu_sample_frames f ON f.run_id = s.run_id AND f.depth = 0
GROUP BY ALL
ORDER BY s.side, key
