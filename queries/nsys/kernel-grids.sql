-- GPU kernels by launch configuration: one row per kernel name, grid and block, ranked by
-- total time. Same numbers as `nsys stats -r cuda_gpu_kern_gb_sum`: the same kernel run
-- at several problem sizes (an attention kernel over other sequence lengths, a GEMM
-- over other shapes) shows as several rows, each with its own durations, where
-- top-kernels sums them. time_pct is the row's share of all kernel time, rounded to 0.1
-- as nsys prints it.
-- @param run    TEXT     run id or name (default: latest run)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @column name       kernel name (demangled)
-- @column grid       grid dimensions (x, y, z), blocks
-- @column block      block dimensions (x, y, z), threads
-- @column instances  launches
-- @column total_ns   summed duration, ns
-- @column avg_ns     mean duration, ns (rounded to 0.1)
-- @column med_ns     median duration, ns (rounded to 0.1)
-- @column min_ns     shortest launch, ns
-- @column max_ns     longest launch, ns
-- @column stddev_ns  sample standard deviation, ns (rounded to 0.1)
-- @column time_pct   share of total kernel time, % (rounded to 0.1)
-- @column grid_x     grid size in blocks, x
-- @column grid_y     grid size, y
-- @column grid_z     grid size, z
-- @column block_x    block size in threads, x
-- @column block_y    block size, y
-- @column block_z    block size, z
-- @display time_pct, total_ns, instances, avg_ns, med_ns, grid, block, name
-- @alias cuda_gpu_kern_gb_sum
-- @requires kernels
-- @traced kernels
WITH s AS (
    SELECT name_id, grid_x, grid_y, grid_z, block_x, block_y, block_z, count(*) AS instances,
           sum(end_ns - start_ns) AS total_ns, avg(end_ns - start_ns) AS avg_ns,
           quantile_cont(end_ns - start_ns, 0.5) AS med_ns, min(end_ns - start_ns) AS min_ns,
           max(end_ns - start_ns) AS max_ns, coalesce(stddev_samp(end_ns - start_ns), 0) AS stddev_ns
    FROM _kernels WHERE run_id = $run
    GROUP BY name_id, grid_x, grid_y, grid_z, block_x, block_y, block_z
)
SELECT n.value AS name, format('({}, {}, {})', grid_x, grid_y, grid_z) AS grid,
       format('({}, {}, {})', block_x, block_y, block_z) AS block, instances, total_ns::BIGINT AS total_ns,
       round1(avg_ns) AS avg_ns, round1(med_ns) AS med_ns, min_ns, max_ns, round1(stddev_ns) AS stddev_ns,
       round1(total_ns * 100.0 / sum(total_ns) OVER ()) AS time_pct,
       grid_x, grid_y, grid_z, block_x, block_y, block_z
FROM s LEFT JOIN _strings n ON n.string_id = s.name_id
ORDER BY total_ns DESC, instances, name, grid_x, grid_y, grid_z, block_x, block_y, block_z
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
