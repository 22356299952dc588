-- Kernel launch and execution phases per (process, thread, device, launch API, kernel).
-- Same numbers as `nsys stats -r cuda_kern_exec_sum`: API time is the launch call on the
-- CPU; queue time runs from the call's end to the kernel's start and counts only when
-- positive; total time runs from the call's start to the later of call end and kernel end.
-- @param run    TEXT     run id or name (default: latest run)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @column pid              process id of the launching thread
-- @column tid              thread id of the launching thread
-- @column device_id        CUDA device that ran the kernel
-- @column count            launches
-- @column queue_count      launches with a positive queue time
-- @column total_avg_ns     mean total time, ns (rounded to 0.1)
-- @column total_med_ns     median total time, ns (rounded to 0.1)
-- @column total_min_ns     min total time, ns
-- @column total_max_ns     max total time, ns
-- @column total_stddev_ns  stddev of total time, ns (rounded to 0.1)
-- @column api_avg_ns       mean API time, ns (rounded to 0.1)
-- @column api_med_ns       median API time, ns (rounded to 0.1)
-- @column api_min_ns       min API time, ns
-- @column api_max_ns       max API time, ns
-- @column api_stddev_ns    stddev of API time, ns (rounded to 0.1)
-- @column queue_avg_ns     mean queue time, ns (rounded to 0.1)
-- @column queue_med_ns     median queue time, ns (rounded to 0.1)
-- @column queue_min_ns     min queue time, ns
-- @column queue_max_ns     max queue time, ns
-- @column queue_stddev_ns  stddev of queue time, ns (rounded to 0.1)
-- @column kernel_avg_ns    mean kernel time, ns (rounded to 0.1)
-- @column kernel_med_ns    median kernel time, ns (rounded to 0.1)
-- @column kernel_min_ns    min kernel time, ns
-- @column kernel_max_ns    max kernel time, ns
-- @column kernel_stddev_ns stddev of kernel time, ns (rounded to 0.1)
-- @column api_name         launch API (suffix stripped)
-- @column kernel_name      kernel name (demangled)
-- @requires kernels
WITH k AS (
    SELECT pid, launch_tid AS tid, device_id, api_end_ns - api_start_ns AS api_ns,
           CASE WHEN start_ns - api_end_ns >= 0 THEN start_ns - api_end_ns END AS queue_ns,
           dur_ns AS kernel_ns, greatest(api_end_ns, end_ns) - api_start_ns AS total_ns,
           api_name_id, name_id
    FROM _kernels
    WHERE run_id = $run AND api_start_ns IS NOT NULL
), s AS (
SELECT pid, tid, device_id, count(*) AS count, count(queue_ns) AS queue_count,
       round1(avg(total_ns)) AS total_avg_ns, round1(median(total_ns)) AS total_med_ns,
       min(total_ns) AS total_min_ns, max(total_ns) AS total_max_ns,
       round1(coalesce(stddev_samp(total_ns), 0)) AS total_stddev_ns,
       round1(avg(api_ns)) AS api_avg_ns, round1(median(api_ns)) AS api_med_ns,
       min(api_ns) AS api_min_ns, max(api_ns) AS api_max_ns,
       round1(coalesce(stddev_samp(api_ns), 0)) AS api_stddev_ns,
       round1(avg(queue_ns)) AS queue_avg_ns, round1(median(queue_ns)) AS queue_med_ns,
       min(queue_ns) AS queue_min_ns, max(queue_ns) AS queue_max_ns,
       round1(coalesce(stddev_samp(queue_ns), 0)) AS queue_stddev_ns,
       round1(avg(kernel_ns)) AS kernel_avg_ns, round1(median(kernel_ns)) AS kernel_med_ns,
       min(kernel_ns) AS kernel_min_ns, max(kernel_ns) AS kernel_max_ns,
       round1(coalesce(stddev_samp(kernel_ns), 0)) AS kernel_stddev_ns,
       api_name_id, name_id
FROM k
GROUP BY pid, tid, device_id, api_name_id, name_id
)
SELECT s.* EXCLUDE (api_name_id, name_id), a.value AS api_name, n.value AS kernel_name
FROM s LEFT JOIN _strings a ON a.string_id = s.api_name_id LEFT JOIN _strings n ON n.string_id = s.name_id
ORDER BY total_avg_ns DESC, kernel_name
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
