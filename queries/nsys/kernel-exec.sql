-- Kernel launch and execution phases per (process, thread, device, launch API, kernel).
-- Same numbers as `nsys stats -r cuda_kern_exec_sum` (statistics computed at ingest, in
-- kernel_exec_sum): API time is the launch call on the CPU; queue time runs from the
-- call's end to the kernel's start and counts only where the kernel started at or after
-- the call's end (a queue of 0 ns included, as nsys counts it); total time runs from the
-- call's start to the later of call end and kernel end.
-- @param run    TEXT     run id or name (default: latest run)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @column pid              process id of the launching thread
-- @column tid              thread id of the launching thread
-- @column device_id        CUDA device that ran the kernel
-- @column count            launches
-- @column queue_count      launches with a queue time: the kernel started at or after the call's end (0 ns included)
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
-- @column queue_avg_ns     mean queue time, ns (rounded to 0.1; NULL: no launch queued)
-- @column queue_med_ns     median queue time, ns (rounded to 0.1; NULL: no launch queued)
-- @column queue_min_ns     min queue time, ns (NULL: no launch queued)
-- @column queue_max_ns     max queue time, ns (NULL: no launch queued)
-- @column queue_stddev_ns  stddev of queue time, ns (rounded to 0.1)
-- @column kernel_avg_ns    mean kernel time, ns (rounded to 0.1)
-- @column kernel_med_ns    median kernel time, ns (rounded to 0.1)
-- @column kernel_min_ns    min kernel time, ns
-- @column kernel_max_ns    max kernel time, ns
-- @column kernel_stddev_ns stddev of kernel time, ns (rounded to 0.1)
-- @column api_name         launch API (suffix stripped)
-- @column kernel_name      kernel name (demangled)
-- @display pid, tid, device_id, count, total_med_ns, api_med_ns, queue_med_ns, kernel_med_ns, api_name, kernel_name
-- @alias cuda_kern_exec_sum
-- @requires kernel_exec_sum
-- @traced kernels, api_calls
-- @needs  kernels, api_calls
SELECT s.pid, s.tid, s.device_id, s.launches AS count, s.queued AS queue_count,
       round1(s.total_avg_ns) AS total_avg_ns, round1(s.total_med_ns) AS total_med_ns,
       s.total_min_ns, s.total_max_ns, round1(s.total_stddev_ns) AS total_stddev_ns,
       round1(s.api_avg_ns) AS api_avg_ns, round1(s.api_med_ns) AS api_med_ns,
       s.api_min_ns, s.api_max_ns, round1(s.api_stddev_ns) AS api_stddev_ns,
       round1(s.queue_avg_ns) AS queue_avg_ns, round1(s.queue_med_ns) AS queue_med_ns,
       s.queue_min_ns, s.queue_max_ns, round1(s.queue_stddev_ns) AS queue_stddev_ns,
       round1(s.kernel_avg_ns) AS kernel_avg_ns, round1(s.kernel_med_ns) AS kernel_med_ns,
       s.kernel_min_ns, s.kernel_max_ns, round1(s.kernel_stddev_ns) AS kernel_stddev_ns,
       a.value AS api_name, n.value AS kernel_name
FROM kernel_exec_sum s
LEFT JOIN _strings a ON a.string_id = s.api_name_id
LEFT JOIN _strings n ON n.string_id = s.name_id
WHERE s.run_id = $run
ORDER BY total_avg_ns DESC, kernel_name
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
