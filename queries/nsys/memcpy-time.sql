-- GPU memory operations (memcpy by direction, memset) by time. Same numbers as
-- `nsys stats -r cuda_gpu_mem_time_sum`; time_pct is the share of all memory-op time.
-- @param run    TEXT     run id or name (default: latest run)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @column operation  '[CUDA memcpy Host-to-Device]', '[CUDA memset]', ...
-- @column count      operations
-- @column total_ns   summed duration, ns
-- @column avg_ns     mean duration, ns (rounded to 0.1)
-- @column med_ns     median duration, ns (rounded to 0.1)
-- @column min_ns     shortest, ns
-- @column max_ns     longest, ns
-- @column stddev_ns  sample standard deviation, ns (rounded to 0.1)
-- @column time_pct   share of total memory-op time, % (rounded to 0.1)
-- @display time_pct, total_ns, count, avg_ns, med_ns, min_ns, max_ns, stddev_ns, operation
-- @alias cuda_gpu_mem_time_sum
-- @requires memcpy, memset
-- @traced memcpy, memset
WITH ops AS (
    SELECT operation, dur_ns FROM memcpy WHERE run_id = $run AND operation IS NOT NULL
    UNION ALL
    SELECT operation, dur_ns FROM memset WHERE run_id = $run
), s AS (
    SELECT operation, count(*) AS count, sum(dur_ns) AS total_ns, avg(dur_ns) AS avg_ns,
           median(dur_ns) AS med_ns, min(dur_ns) AS min_ns, max(dur_ns) AS max_ns,
           coalesce(stddev_samp(dur_ns), 0) AS stddev_ns
    FROM ops GROUP BY operation
)
SELECT operation, count, total_ns::BIGINT AS total_ns, round1(avg_ns) AS avg_ns,
       round1(med_ns) AS med_ns, min_ns, max_ns, round1(stddev_ns) AS stddev_ns,
       round1(total_ns * 100.0 / sum(total_ns) OVER ()) AS time_pct
FROM s
ORDER BY total_ns DESC, operation
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
