-- OS runtime calls (libc and system calls: poll, read, ioctl, pthread_cond_wait, ...)
-- ranked by total time: where the program's CPU threads wait outside CUDA. Same numbers as
-- `nsys stats -r osrt_sum`; time_pct is the share of all OS runtime time (threads that wait
-- at once both count, so it is not a share of the wall time). A run captured without
-- `nsys -t osrt` (tracekit capture uses it) is an error; one with no calls, an empty answer.
-- @param run    TEXT     run id or name (default: latest run)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @column name       function name
-- @column calls      number of calls
-- @column total_ns   summed duration, ns
-- @column avg_ns     mean duration, ns (rounded to 0.1)
-- @column med_ns     median duration, ns (rounded to 0.1)
-- @column min_ns     shortest call, ns
-- @column max_ns     longest call, ns
-- @column stddev_ns  sample standard deviation, ns (rounded to 0.1)
-- @column time_pct   share of total OS runtime time, % (rounded to 0.1)
-- @column threads    threads that made the call
-- @display time_pct, total_ns, calls, avg_ns, med_ns, min_ns, max_ns, stddev_ns, threads, name
-- @alias osrt_sum
-- @requires osrt_calls
-- @traced osrt_calls
WITH s AS (
    SELECT name, count(*) AS calls, sum(dur_ns) AS total_ns, avg(dur_ns) AS avg_ns, median(dur_ns) AS med_ns,
           min(dur_ns) AS min_ns, max(dur_ns) AS max_ns, coalesce(stddev_samp(dur_ns), 0) AS stddev_ns,
           count(DISTINCT global_tid) AS threads
    FROM osrt_calls
    WHERE run_id = $run
    GROUP BY name
)
SELECT s.name, s.calls, s.total_ns::BIGINT AS total_ns, round1(s.avg_ns) AS avg_ns, round1(s.med_ns) AS med_ns,
       s.min_ns, s.max_ns, round1(s.stddev_ns) AS stddev_ns,
       round1(s.total_ns * 100.0 / sum(s.total_ns) OVER ()) AS time_pct, s.threads
FROM s
ORDER BY total_ns DESC, calls, name
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
