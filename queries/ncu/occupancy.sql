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
-- What would raise it, by the rules of NVIDIA's occupancy calculator (cuda_occupancy.h), which
-- ncu's "Impact of Varying Register Count / Shared Memory Usage" charts draw: registers are
-- allocated per warp in units of 256 (8 per thread) from each of the SM's sub-partitions (max
-- warps per SM / max warps per scheduler), shared memory per block, its driver-reserved part
-- included, in units of 128 bytes (256 before compute capability 8.0). Shared memory is counted
-- against the largest carveout the SM offers (device__attribute_max_shared_memory_per_multiprocessor:
-- the driver picks the carveout a launch needs), where ncu's chart holds the launch's own.
-- registers_per_thread_max and shared_mem_max_bytes are the most the launch may use and keep its
-- blocks per SM; next_registers_per_thread_max and next_shared_mem_max_bytes the most for one
-- block more per SM, and next_occupancy_pct the occupancy once both are kept (one register step
-- down may fit several blocks more); NULL where one block more is out of reach (next_needs says
-- why: the SM's block slots, warps or barriers at this block size), or an input is missing.
-- best_block_size is the block size at which the SM holds the most warps with the launch's
-- registers per thread and shared memory per block, at the SM's largest carveout as above (ncu's
-- "Impact of Varying Block Size" chart, whose blocks are whole warps up to the device's largest
-- block, holds the launch's own carveout, so it can peak lower): the launch's own where it holds
-- as many, else the nearest in whole warps (of two as near, the larger, as
-- cudaOccupancyMaxPotentialBlockSize prefers larger blocks); NULL where a block limit is 0 (the
-- launch could not run as configured) or an input is missing. It says what the block size alone
-- can do: a kernel's tiling usually ties its shared memory and registers to its block size, a
-- kernel compiled for a block size (__launch_bounds__, warp specialisation, thread block
-- clusters) cannot take another, and a grid of less than one wave (waves_per_sm < 1) does not
-- fill the SMs whatever they could hold.
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
-- @column blocks_per_sm              blocks an SM holds at once (the smallest block limit; NULL where one is 0: the launch could not run so)
-- @column registers_per_thread_max       most registers per thread that keep blocks_per_sm
-- @column shared_mem_max_bytes           most shared memory per block (static + dynamic) that keeps blocks_per_sm, at the SM's largest carveout, bytes
-- @column next_occupancy_pct             theoretical occupancy once registers and shared memory are within next_*, % (NULL: out of reach at this block size, or at 100 % now)
-- @column next_registers_per_thread_max  most registers per thread for one block more per SM
-- @column next_shared_mem_max_bytes      most shared memory per block (static + dynamic) for one block more per SM, bytes
-- @column next_needs                     what one block more per SM needs (registers 40 -> 32; shared memory 163,840 -> 115,712 B; a larger carveout: the driver's pick where the kernel sets no carveout preference), or why none fits
-- @column best_block_size                threads per block at which the SM holds the most warps, registers and shared memory per block held, at its largest carveout (NULL: a block limit of 0, or an input missing)
-- @column best_block_occupancy_pct       theoretical occupancy at best_block_size, at the SM's largest carveout, %
-- @column missing_metrics            metrics not in the report, comma-separated (NULL = complete)
-- @display kernel_id, block_size, registers_per_thread, theoretical_occupancy_pct, achieved_occupancy_pct, limiter, next_occupancy_pct, next_needs, best_block_size, name
-- @requires ncu_kernels, ncu_metrics
WITH o AS MATERIALIZED (  -- (the columns and the what-if: the store's macro ncu_occupancy)
    SELECT * FROM ncu_occupancy($run) WHERE $kernel IS NULL OR contains(lower(name), lower($kernel))
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
        WHEN (SELECT count(*) FROM o WHERE coalesce(registers_per_thread, block_limit_registers, block_limit_shared_mem,
                  block_limit_warps, block_limit_blocks, block_limit_barriers, theoretical_occupancy_pct,
                  achieved_occupancy_pct, waves_per_sm) IS NOT NULL) = 0 THEN error(
            ncu_lacks('occupancy', $run, 'occupancy metrics') || ' (profiled without them); profile with ncu '
            || '--section Occupancy --section LaunchStats (or --set basic or full)')
        ELSE true END AS ok
    FROM ncu_kernels
    WHERE ($run IS NULL OR run_id = $run) AND ($kernel IS NULL OR contains(lower(name), lower($kernel)))
      AND ncu_kernel_asked('occupancy', $run, $kernel)
)
SELECT o.* EXCLUDE (nvtx_path)
FROM checked JOIN o ON checked.ok
ORDER BY run_id, kernel_id
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
