-- Profiled launches of Nsight Compute runs, with the NVTX push/pop ranges around each.
-- One row per launch, in ncu's ID order; spans every run with --run all.
-- @param run    TEXT     run id or name, or 'all' (default: latest run)
-- @param limit  INTEGER  rows to return; 0 = all (default: 0)
-- @column run_id       run the launch belongs to
-- @column kernel_id    ncu's ID of the launch in its report
-- @column name         kernel name (demangled)
-- @column nvtx_path    NVTX push/pop ranges around the launch, outermost first, joined by '/'
-- @column nvtx_range   innermost NVTX push/pop range
-- @column grid         grid dimensions (x, y, z), blocks
-- @column block        block dimensions (x, y, z), threads
-- @column device_id    CUDA device ordinal
-- @column cc           compute capability
-- @column stream_id    CUDA stream id
-- @column duration_ns  gpu__time_duration.sum, ns (NULL when not in the report)
-- @display kernel_id, duration_ns, grid, block, stream_id, nvtx_range, name
-- @requires ncu_kernels, ncu_metrics
SELECT k.run_id, k.kernel_id, k.name, k.nvtx_path, k.nvtx_range,
       format('({}, {}, {})', k.grid_x, k.grid_y, k.grid_z) AS grid,
       format('({}, {}, {})', k.block_x, k.block_y, k.block_z) AS block,
       k.device_id, k.cc, k.stream_id, m.value AS duration_ns
FROM ncu_kernels k
LEFT JOIN ncu_metrics m ON m.run_id = k.run_id AND m.kernel_id = k.kernel_id AND m.metric = 'gpu__time_duration.sum'
WHERE ($run IS NULL OR k.run_id = $run)
ORDER BY k.run_id, k.kernel_id
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
