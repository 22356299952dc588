-- GPU kernels ranked by total time. Same numbers as `nsys stats -r cuda_gpu_kern_sum`.
-- Grouped by demangled name across devices, streams and processes; time_pct is the
-- kernel's share of all kernel time listed, rounded to 0.1 as nsys prints it.
-- group=family sums kernels by their family instead (kernel_family macro, macros.sql:
-- template arguments, tile/shape suffixes and hashes stripped), e.g. every nvjet GEMM
-- of one layout whatever its tile shape, in one row.
-- p95_ns and p99_ns are the 95th and 99th percentiles of the durations, interpolated
-- between the two nearest launches as med_ns is (DuckDB's quantile_cont). skip=N leaves
-- out each kernel name's first N launches in start order (warm-up, compilation,
-- autotuning): the numbers of the steady state; nsys stats has no such option, so with
-- skip > 0 they are no longer its numbers.
-- @param run    TEXT     run id or name (default: latest run)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @param group  TEXT     name (one row per kernel) or family (one of: name, family) (default: name)
-- @param skip   INTEGER  each kernel name's first launches left out (warm-up) (min: 0) (max: 999999) (default: 0)
-- @column name       kernel name (demangled), or its family with group=family
-- @column instances  launches
-- @column total_ns   summed duration, ns
-- @column avg_ns     mean duration, ns (rounded to 0.1)
-- @column med_ns     median duration, ns (rounded to 0.1)
-- @column min_ns     shortest launch, ns
-- @column max_ns     longest launch, ns
-- @column stddev_ns  sample standard deviation, ns (rounded to 0.1)
-- @column time_pct   share of total kernel time, % (rounded to 0.1)
-- @column p95_ns     95th percentile of the durations, ns (rounded to 0.1)
-- @column p99_ns     99th percentile of the durations, ns (rounded to 0.1)
-- @display time_pct, total_ns, instances, avg_ns, med_ns, min_ns, max_ns, stddev_ns, name
-- @alias cuda_gpu_kern_sum
-- @requires kernels
-- @traced kernels
WITH g AS (  -- group=family: each name's group is the first name of its family
    SELECT string_id, min(string_id) OVER (PARTITION BY kernel_family(value)) AS group_id
    FROM _strings WHERE lower($group) <> 'name'
), cut AS (  -- skip > 0: each name's start time of its $skip-th launch (a top-N, no sort of the run)
    SELECT name_id, list_max(min(start_ns, $skip)) AS cut_ns
    FROM _kernels WHERE run_id = $run AND $skip > 0 GROUP BY name_id
), k AS (  -- the run's launches, less each name's first $skip in start order
    SELECT name_id, end_ns - start_ns AS dur_ns FROM _kernels WHERE run_id = $run AND $skip = 0
    UNION ALL  -- after the cut: all kept
    SELECT name_id, end_ns - start_ns FROM _kernels JOIN cut USING (name_id)
    WHERE run_id = $run AND start_ns > cut_ns
    UNION ALL  -- up to the cut (the first $skip, and any launch that starts with the last of them)
    SELECT name_id, dur_ns FROM (
        SELECT name_id, end_ns - start_ns AS dur_ns,
               row_number() OVER (PARTITION BY name_id ORDER BY start_ns, end_ns, device_id, stream_id) AS i
        FROM _kernels JOIN cut USING (name_id) WHERE run_id = $run AND start_ns <= cut_ns
    ) WHERE i > $skip
), d AS (  -- each launch's group: the name itself needs no join
    SELECT name_id, dur_ns FROM k WHERE lower($group) = 'name'
    UNION ALL
    SELECT g.group_id, k.dur_ns FROM k JOIN g ON g.string_id = k.name_id WHERE lower($group) = 'family'
), s AS (
    SELECT name_id, count(*) AS instances, sum(dur_ns) AS total_ns, avg(dur_ns) AS avg_ns,
           quantile_cont(dur_ns, [0.5, 0.95, 0.99]) AS q, min(dur_ns) AS min_ns, max(dur_ns) AS max_ns,
           coalesce(stddev_samp(dur_ns), 0) AS stddev_ns
    FROM d
    GROUP BY name_id
)
SELECT CASE WHEN lower($group) = 'name' THEN n.value ELSE kernel_family(n.value) END AS name, instances, total_ns::BIGINT AS total_ns, round1(avg_ns) AS avg_ns,
       round1(q[1]) AS med_ns, min_ns, max_ns, round1(stddev_ns) AS stddev_ns,
       round1(total_ns * 100.0 / sum(total_ns) OVER ()) AS time_pct,
       round1(q[2]) AS p95_ns, round1(q[3]) AS p99_ns
FROM s LEFT JOIN _strings n ON n.string_id = s.name_id
ORDER BY total_ns DESC, instances, name
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
