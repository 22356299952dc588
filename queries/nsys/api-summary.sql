-- CUDA API calls (runtime and driver) ranked by total time. Same numbers as
-- `nsys stats -r cuda_api_sum`: grouped by the recorded API name, shown with its
-- _vNNNN suffix stripped; time_pct is the share of all API time, rounded to 0.1
-- (statistics computed at ingest into api_sum).
-- @param run    TEXT     run id or name (default: latest run)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @column name       API name (suffix _vNNNN stripped)
-- @column calls      number of calls
-- @column total_ns   summed duration, ns
-- @column avg_ns     mean duration, ns (rounded to 0.1)
-- @column med_ns     median duration, ns (rounded to 0.1)
-- @column min_ns     shortest call, ns
-- @column max_ns     longest call, ns
-- @column stddev_ns  sample standard deviation, ns (rounded to 0.1)
-- @column time_pct   share of total API time, % (rounded to 0.1)
-- @display time_pct, total_ns, calls, avg_ns, med_ns, min_ns, max_ns, stddev_ns, name
-- @alias cuda_api_sum
-- @requires api_sum
-- @traced api_calls
SELECT n.value AS name, s.calls, s.total_ns::BIGINT AS total_ns, round1(s.avg_ns) AS avg_ns,
       round1(s.med_ns) AS med_ns, s.min_ns, s.max_ns, round1(s.stddev_ns) AS stddev_ns,
       round1(s.total_ns * 100.0 / sum(s.total_ns) OVER ()) AS time_pct
FROM api_sum s LEFT JOIN _strings n ON n.string_id = s.name_id
WHERE s.run_id = $run
ORDER BY total_ns DESC, calls, name
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
