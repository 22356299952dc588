-- Kernels and memory operations (copies, memsets) ranked together by total GPU time: where
-- the GPU's time goes, copies included. Same numbers as `nsys stats -r cuda_gpu_sum` (what
-- top-kernels and memcpy-time give apart); time_pct is the share of the summed time of
-- all of them, not of the wall time (ops on different streams can overlap).
-- @param run    TEXT     run id or name (default: latest run)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @column name       kernel name (demangled), or the operation: [CUDA memcpy Host-to-Device], [CUDA memset], ...
-- @column category   CUDA_KERNEL or MEMORY_OPER, as nsys names them
-- @column instances  executions
-- @column total_ns   summed duration, ns
-- @column avg_ns     mean duration, ns (rounded to 0.1)
-- @column med_ns     median duration, ns (rounded to 0.1)
-- @column min_ns     shortest, ns
-- @column max_ns     longest, ns
-- @column stddev_ns  sample standard deviation, ns (rounded to 0.1)
-- @column time_pct   share of the summed time of kernels and memory operations, % (rounded to 0.1)
-- @display time_pct, total_ns, instances, avg_ns, med_ns, min_ns, max_ns, stddev_ns, category, name
-- @alias cuda_gpu_sum
-- @requires kernels, memcpy, memset
-- @traced kernels, memcpy, memset
WITH d AS (  -- kernels by name id (cheaper than by name), memory operations by name
    SELECT name_id, NULL::VARCHAR AS operation, end_ns - start_ns AS dur_ns FROM _kernels WHERE run_id = $run
    UNION ALL
    SELECT NULL, operation, dur_ns FROM memcpy WHERE run_id = $run
    UNION ALL
    SELECT NULL, operation, dur_ns FROM memset WHERE run_id = $run
), s AS (
    SELECT name_id, operation, count(*) AS instances, sum(dur_ns) AS total_ns, avg(dur_ns) AS avg_ns,
           median(dur_ns) AS med_ns, min(dur_ns) AS min_ns, max(dur_ns) AS max_ns,
           coalesce(stddev_samp(dur_ns), 0) AS stddev_ns
    FROM d
    GROUP BY name_id, operation
)
SELECT coalesce(s.operation, n.value) AS name,
       CASE WHEN s.operation IS NULL THEN 'CUDA_KERNEL' ELSE 'MEMORY_OPER' END AS category,
       instances, total_ns::BIGINT AS total_ns, round1(avg_ns) AS avg_ns, round1(med_ns) AS med_ns,
       min_ns, max_ns, round1(stddev_ns) AS stddev_ns,
       round1(total_ns * 100.0 / sum(total_ns) OVER ()) AS time_pct
FROM s LEFT JOIN _strings n ON n.string_id = s.name_id
ORDER BY total_ns DESC, instances, name
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
