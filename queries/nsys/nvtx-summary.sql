-- NVTX ranges (push/pop and start/end) by total wall time. Same numbers as
-- `nsys stats -r nvtx_sum`. Ranges are named 'domain:text' (':step' in the default
-- domain); time_pct is the share of all range time, rounded to 0.1.
-- p95_ns and p99_ns are the 95th and 99th percentiles of the durations, interpolated
-- as med_ns is (DuckDB's quantile_cont). skip=N leaves out each range name's first N
-- instances in start order (warm-up: a first request that compiles and autotunes):
-- the steady state's numbers, no longer nsys stats' with skip > 0. style=PushPop (or
-- StartEnd) keeps the ranges of that style alone, time_pct their share of its time: the
-- numbers of `nsys stats -r nvtx_pushpop_sum` (nvtx_startend_sum).
-- @param run    TEXT     run id or name (default: latest run)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @param skip   INTEGER  each range name's first instances left out (warm-up) (min: 0) (max: 999999) (default: 0)
-- @param style  TEXT     the ranges of one style, or of both (one of: all, PushPop, StartEnd) (default: all)
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
-- @column p95_ns     95th percentile of the durations, ns (rounded to 0.1)
-- @column p99_ns     99th percentile of the durations, ns (rounded to 0.1)
-- @display time_pct, total_ns, instances, avg_ns, med_ns, min_ns, max_ns, stddev_ns, style, range
-- @alias nvtx_sum, nvtx_pushpop_sum(style=PushPop), nvtx_startend_sum(style=StartEnd)
-- @requires nvtx_ranges
-- @traced nvtx_ranges
WITH cut AS (  -- skip > 0: each name's range_id (start order) of its $skip-th instance
    SELECT name, style, list_max(min(range_id, $skip)) AS cut_id
    FROM nvtx_ranges WHERE run_id = $run AND $skip > 0 GROUP BY name, style
), r AS (
    SELECT name, style, dur_ns FROM nvtx_ranges WHERE run_id = $run AND $skip = 0
    UNION ALL
    SELECT name, style, dur_ns FROM nvtx_ranges JOIN cut USING (name, style)
    WHERE run_id = $run AND range_id > cut_id
), kept AS (
    SELECT * FROM r WHERE lower($style) = 'all' OR lower(style) = lower($style)
), s AS (
    SELECT name AS range, style, count(*) AS instances, sum(dur_ns) AS total_ns,
           avg(dur_ns) AS avg_ns, quantile_cont(dur_ns, [0.5, 0.95, 0.99]) AS q, min(dur_ns) AS min_ns,
           max(dur_ns) AS max_ns, coalesce(stddev_samp(dur_ns), 0) AS stddev_ns
    FROM kept
    GROUP BY name, style
)
SELECT range, style, instances, total_ns::BIGINT AS total_ns, round1(avg_ns) AS avg_ns,
       round1(q[1]) AS med_ns, min_ns, max_ns, round1(stddev_ns) AS stddev_ns,
       round1(total_ns * 100.0 / sum(total_ns) OVER ()) AS time_pct,
       round1(q[2]) AS p95_ns, round1(q[3]) AS p99_ns
FROM s
ORDER BY total_ns DESC, range, style
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
