-- CUDA API calls (runtime and driver) ranked by total time. Same numbers as
-- `nsys stats -r cuda_api_sum`: grouped by the recorded API name, shown with its
-- _vNNNN suffix stripped; time_pct is the share of all API time, rounded to 0.1.
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
-- @requires api_calls
WITH s AS (
    SELECT raw_name_id, any_value(name_id) AS name_id, count(*) AS calls, sum(dur_ns) AS total_ns,
           avg(dur_ns) AS avg_ns, median(dur_ns) AS med_ns, min(dur_ns) AS min_ns,
           max(dur_ns) AS max_ns, coalesce(stddev_samp(dur_ns), 0) AS stddev_ns
    FROM _api_calls
    WHERE run_id = $run
    GROUP BY raw_name_id
)
SELECT n.value AS name, calls, total_ns::BIGINT AS total_ns, round1(avg_ns) AS avg_ns,
       round1(med_ns) AS med_ns, min_ns, max_ns, round1(stddev_ns) AS stddev_ns,
       round1(total_ns * 100.0 / sum(total_ns) OVER ()) AS time_pct
FROM s LEFT JOIN _strings n ON n.string_id = s.name_id
ORDER BY total_ns DESC, calls, name
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
