-- NVTX ranges (push/pop and start/end) by total wall time. Same numbers as
-- `nsys stats -r nvtx_sum`. Ranges are named 'domain:text' (':step' in the default
-- domain); time_pct is the share of all range time, rounded to 0.1.
-- @param run    TEXT     run id or name (default: latest run)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @column range      range name, 'domain:text'
-- @column style      PushPop or StartEnd
-- @column instances  ranges of that name and style
-- @column total_ns   summed duration, ns
-- @column avg_ns     mean duration, ns (rounded to 0.1)
-- @column med_ns     median duration, ns (rounded to 0.1)
-- @column min_ns     shortest, ns
-- @column max_ns     longest, ns
-- @column stddev_ns  sample standard deviation, ns (rounded to 0.1)
-- @column time_pct   share of total range time, % (rounded to 0.1)
-- @display time_pct, total_ns, instances, avg_ns, med_ns, min_ns, max_ns, stddev_ns, style, range
-- @alias nvtx_sum
-- @requires nvtx_ranges
-- @traced nvtx_ranges
WITH s AS (
    SELECT name AS range, style, count(*) AS instances, sum(dur_ns) AS total_ns,
           avg(dur_ns) AS avg_ns, median(dur_ns) AS med_ns, min(dur_ns) AS min_ns,
           max(dur_ns) AS max_ns, coalesce(stddev_samp(dur_ns), 0) AS stddev_ns
    FROM nvtx_ranges
    WHERE run_id = $run
    GROUP BY name, style
)
SELECT range, style, instances, total_ns::BIGINT AS total_ns, round1(avg_ns) AS avg_ns,
       round1(med_ns) AS med_ns, min_ns, max_ns, round1(stddev_ns) AS stddev_ns,
       round1(total_ns * 100.0 / sum(total_ns) OVER ()) AS time_pct
FROM s
ORDER BY total_ns DESC, range, style
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
