-- Occupancy per kernel launch: theoretical and achieved occupancy, the per-SM block limits
-- and the one that binds, as ncu's Occupancy and Launch Statistics sections print them.
-- limiter: the smallest block limit (ties joined by ', ' in ncu's order blocks, registers,
-- shared_mem, warps; then barriers); 'none' at 100 % theoretical occupancy, where no limit
-- holds the SM below its maximum warps (the smallest only ties at it; ncu's
-- TheoreticalOccupancy rule names no limiter there either). Block Limit SM is block_limit_blocks. A limit the
-- report lacks does not bind: the limiter is the smallest of those it has (NULL when it has
-- none), as in reports made before ncu had launch__occupancy_limit_barriers (2022.4 and
-- older give the other four) or with a limit ncu could not compute (NaN, stored as missing:
-- shared memory on a Jetson Xavier). missing_metrics names the metrics the report lacks
-- (their columns are NULL): a limiter named without one of them shows there. Ranges
-- (ncu --replay-mode range/app-range) and whole graphs (--graph-profiling graph) run several
-- kernels and have no launch configuration of their own: they are left out (ncu-kernels
-- lists them), and a run of those alone, or of launches without any of these metrics, is an error.
-- @param run     TEXT     run id or name, or 'all' (default: latest run)
-- @param kernel  TEXT     only launches whose kernel name contains this text, case-insensitive (default: null)
-- @param limit   INTEGER  rows to return; 0 = all (default: 0)
-- @column run_id                     run the launch belongs to
-- @column kernel_id                  ncu's ID of the launch in its report
-- @column name                       kernel name (demangled)
-- @column nvtx_range                 innermost NVTX push/pop range
-- @column block_size                 threads per block
-- @column grid_size                  blocks in the grid
-- @column registers_per_thread       registers per thread
-- @column shared_mem_static_bytes    static shared memory per block, bytes
-- @column shared_mem_dynamic_bytes   dynamic shared memory per block, bytes
-- @column shared_mem_driver_bytes    driver-reserved shared memory per block, bytes
-- @column shared_mem_config_bytes    shared memory configuration size per SM, bytes
-- @column block_limit_registers      blocks per SM allowed by registers
-- @column block_limit_shared_mem     blocks per SM allowed by shared memory
-- @column block_limit_warps          blocks per SM allowed by warps
-- @column block_limit_blocks         blocks per SM allowed by the SM's block slots (Block Limit SM)
-- @column block_limit_barriers       blocks per SM allowed by barriers
-- @column limiter                    the binding limit(s): blocks, registers, shared_mem, warps, barriers; none at 100 % theoretical occupancy
-- @column theoretical_warps_per_sm   theoretical active warps per SM
-- @column theoretical_occupancy_pct  theoretical occupancy, % of max warps per SM
-- @column achieved_warps_per_sm      achieved active warps per SM
-- @column achieved_occupancy_pct     achieved occupancy, % of max warps per SM
-- @column waves_per_sm               waves per SM
-- @column missing_metrics            metrics not in the report, comma-separated (NULL = complete)
-- @display kernel_id, block_size, registers_per_thread, theoretical_occupancy_pct, achieved_occupancy_pct, limiter, name
-- @requires ncu_kernels, ncu_metrics
WITH m AS MATERIALIZED (
    SELECT * FROM ncu_kernel_metrics
    WHERE ($run IS NULL OR run_id = $run) AND ($kernel IS NULL OR contains(lower(name), lower($kernel)))
      AND ncu_kernel_asked('occupancy', $run, $kernel)
), checked AS (  -- read first: the error is raised before any row
    SELECT CASE
        WHEN count(*) = 0 THEN true
        WHEN count(*) FILTER (WHERE workload = 'kernel') = 0 THEN error(
            ncu_lacks('occupancy', $run, 'kernel launches') || ': its results are '
            || string_agg(DISTINCT CASE workload WHEN 'range' THEN 'ranges (ncu --replay-mode range or app-range)'
                                                 WHEN 'graph' THEN 'whole graphs (ncu --graph-profiling graph)'
                                                 ELSE workload || 's' END, ' and ')
            || ', which run several kernels and have no launch configuration of their own; occupancy is per '
            || 'kernel launch (`tracekit query ncu-kernels` lists the results)')
        WHEN count(*) FILTER (WHERE workload = 'kernel' AND coalesce(registers_per_thread, block_limit_registers,
                 block_limit_shared_mem, block_limit_warps, block_limit_blocks, block_limit_barriers,
                 theoretical_occupancy_pct, achieved_occupancy_pct, waves_per_sm) IS NOT NULL) = 0 THEN error(
            ncu_lacks('occupancy', $run, 'occupancy metrics') || ' (profiled without them); profile with ncu '
            || '--section Occupancy --section LaunchStats (or --set basic or full)')
        ELSE true END AS ok
    FROM m
)
SELECT run_id, kernel_id, name, nvtx_range,
       block_size::BIGINT AS block_size, grid_size::BIGINT AS grid_size,
       registers_per_thread::BIGINT AS registers_per_thread,
       shared_mem_static_bytes::BIGINT AS shared_mem_static_bytes,
       shared_mem_dynamic_bytes::BIGINT AS shared_mem_dynamic_bytes,
       shared_mem_driver_bytes::BIGINT AS shared_mem_driver_bytes,
       shared_mem_config_bytes::BIGINT AS shared_mem_config_bytes,
       block_limit_registers::BIGINT AS block_limit_registers,
       block_limit_shared_mem::BIGINT AS block_limit_shared_mem,
       block_limit_warps::BIGINT AS block_limit_warps,
       block_limit_blocks::BIGINT AS block_limit_blocks,
       block_limit_barriers::BIGINT AS block_limit_barriers,
       ncu_occupancy_limiter(block_limit_blocks, block_limit_registers, block_limit_shared_mem, block_limit_warps,
                             block_limit_barriers, theoretical_occupancy_pct) AS limiter,
       theoretical_warps_per_sm, theoretical_occupancy_pct, achieved_warps_per_sm, achieved_occupancy_pct,
       waves_per_sm,
       nullif(concat_ws(', ',
           CASE WHEN registers_per_thread IS NULL THEN 'launch__registers_per_thread' END,
           CASE WHEN shared_mem_static_bytes IS NULL THEN 'launch__shared_mem_per_block_static' END,
           CASE WHEN shared_mem_dynamic_bytes IS NULL THEN 'launch__shared_mem_per_block_dynamic' END,
           CASE WHEN shared_mem_driver_bytes IS NULL THEN 'launch__shared_mem_per_block_driver' END,
           CASE WHEN block_limit_registers IS NULL THEN 'launch__occupancy_limit_registers' END,
           CASE WHEN block_limit_shared_mem IS NULL THEN 'launch__occupancy_limit_shared_mem' END,
           CASE WHEN block_limit_warps IS NULL THEN 'launch__occupancy_limit_warps' END,
           CASE WHEN block_limit_blocks IS NULL THEN 'launch__occupancy_limit_blocks' END,
           CASE WHEN block_limit_barriers IS NULL THEN 'launch__occupancy_limit_barriers' END,
           CASE WHEN theoretical_occupancy_pct IS NULL THEN 'sm__maximum_warps_per_active_cycle_pct' END,
           CASE WHEN achieved_occupancy_pct IS NULL THEN 'sm__warps_active.avg.pct_of_peak_sustained_active' END,
           CASE WHEN waves_per_sm IS NULL THEN 'launch__waves_per_multiprocessor' END
       ), '') AS missing_metrics
FROM checked JOIN m ON checked.ok
WHERE workload = 'kernel'
ORDER BY run_id, kernel_id
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
