-- Profiled launches of Nsight Compute runs, with the NVTX push/pop ranges around each.
-- One row per result, in ncu's ID order; spans every run with --run all. A result is a
-- kernel launch, or with ncu --replay-mode range/app-range a range (the work between two
-- markers: cudaProfilerStart/Stop or an NVTX range; named range) or with
-- --graph-profiling graph a whole CUDA graph launch (named graph): those run several
-- kernels and have no grid or block of their own (ncu prints the maxima over their kernels).
-- A launch's dimensions come from ncu's per-dimension launch metrics (the CSV pages' Grid
-- Size and Block Size); older reports (a V100's and a Jetson Xavier's .nsight-cuprof-report)
-- have only the totals launch__grid_size and launch__block_size, and no launch__device_id:
-- grid, block and device_id are NULL there (never guessed) and grid_size, block_size give
-- the totals.
-- @param run     TEXT     run id or name, or 'all' (default: latest run)
-- @param kernel  TEXT     only launches whose kernel name contains this text, case-insensitive (default: null)
-- @param limit   INTEGER  rows to return; 0 = all (default: 0)
-- @column run_id       run the launch belongs to
-- @column kernel_id    ncu's ID of the launch in its report
-- @column name         kernel name (demangled); range or graph for those results
-- @column workload     what the result profiled: kernel, range or graph
-- @column nvtx_path    NVTX push/pop ranges around the launch, outermost first, joined by '/'
-- @column nvtx_range   innermost NVTX push/pop range
-- @column grid         grid dimensions (x, y, z), blocks (NULL for a range or a graph)
-- @column block        block dimensions (x, y, z), threads (NULL for a range or a graph)
-- @column grid_size    blocks in the grid (launch__grid_size; NULL for a range or a graph)
-- @column block_size   threads per block (launch__block_size; NULL for a range or a graph)
-- @column device_id    CUDA device ordinal (NULL where the report does not say)
-- @column cc           compute capability
-- @column stream_id    CUDA stream id (NULL for a range)
-- @column process_id   id of the profiled process (ncu --target-processes all profiles its children too)
-- @column duration_ns  gpu__time_duration.sum, ns (NULL when not in the report)
-- @display kernel_id, duration_ns, grid, block, stream_id, nvtx_range, name
-- @requires ncu_kernels, ncu_metrics
WITH m AS (
    SELECT run_id, kernel_id,
           max(value) FILTER (WHERE metric = 'gpu__time_duration.sum') AS duration_ns,
           max(value) FILTER (WHERE metric = 'launch__grid_size') AS grid_size,
           max(value) FILTER (WHERE metric = 'launch__block_size') AS block_size
    FROM ncu_metrics
    WHERE metric IN ('gpu__time_duration.sum', 'launch__grid_size', 'launch__block_size')
      AND ($run IS NULL OR run_id = $run)
    GROUP BY run_id, kernel_id
)
SELECT k.run_id, k.kernel_id, k.name, k.workload, k.nvtx_path, k.nvtx_range,
       CASE WHEN k.grid_x IS NOT NULL THEN format('({}, {}, {})', k.grid_x, k.grid_y, k.grid_z) END AS grid,
       CASE WHEN k.block_x IS NOT NULL THEN format('({}, {}, {})', k.block_x, k.block_y, k.block_z) END AS block,
       -- (a range's or a graph's launch__ values are maxima over its kernels: not a launch's)
       CASE WHEN k.workload = 'kernel' THEN m.grid_size::BIGINT END AS grid_size,
       CASE WHEN k.workload = 'kernel' THEN m.block_size::BIGINT END AS block_size,
       k.device_id, k.cc, k.stream_id, k.process_id, m.duration_ns
FROM ncu_kernels k
LEFT JOIN m ON m.run_id = k.run_id AND m.kernel_id = k.kernel_id
WHERE ($run IS NULL OR k.run_id = $run) AND ($kernel IS NULL OR contains(lower(k.name), lower($kernel)))
  AND ncu_kernel_asked('ncu-kernels', $run, $kernel)
ORDER BY k.run_id, k.kernel_id
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
