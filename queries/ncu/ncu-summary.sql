-- One row per kernel name and NVTX range of a run (with group=shape, per kernel name, NVTX
-- range and launch shape, the grid's and the block's dimensions: a kernel at each problem
-- size, as nsys's kernel-grids has it), with the numbers its launches are tuned by, from the per-launch queries' own definitions (the views speed-of-light, occupancy and
-- roofline read, occupancy's limiter and what-if, memory-workload's hit rates). Rates, percentages,
-- clocks, cycles and the arithmetic intensity are medians over the launches (of those that
-- have the value); launches, total_ns, dram_bytes and flop are sums; registers, block and
-- grid size, the limiter, the precision and the bound are the value most launches have
-- (ties: the first launch's), and varies names those that differ between the launches,
-- with their values. next_needs is most launches' too, a launch that needs nothing (at 100 %)
-- counted as one (not in varies: it follows from the settings that are); best_block_size is
-- most launches' (of those that have one), not in varies either; next_occupancy_pct is the
-- median where every launch has one, else NULL, and best_block_occupancy_pct where every
-- launch has one at the same best_block_size. dram_roof_pct is the DRAM bandwidth against the roofline's DRAM
-- ceiling: how close to a roof a kernel with no floating-point work (bound no_fp_work,
-- roof_pct NULL) is; for a memory-bound launch it is roof_pct (to rounding). roof_limiter is
-- the level whose roof bounds the launch in query hierarchical-roofline (in its dominant
-- precision): where bound says memory (left of the DRAM ridge), it says which level's
-- bandwidth, e.g. L2 for a kernel whose data stays in L2. Columns whose
-- inputs the report lacks are NULL (the per-launch queries' missing_metrics name them), not
-- an error; occupancy is a kernel launch's only (NULL for a range or a whole graph).
-- @param run     TEXT     run id or name, or 'all' (default: latest run)
-- @param kernel  TEXT     only launches whose kernel name contains this text, case-insensitive (default: null)
-- @param group   TEXT     one row per kernel name and NVTX range, or per kernel name, NVTX range and launch shape (grid and block) (one of: kernel, shape) (default: kernel)
-- @param limit   INTEGER  rows to return; 0 = all (default: 0)
-- @column run_id                     run the launches belong to
-- @column kernel_id                  ncu's ID of the kernel's first launch in its report
-- @column name                       kernel name (demangled); range or graph for those results
-- @column nvtx_range                 innermost NVTX push/pop range
-- @column launches                   launches (results) of the kernel in the range (group=shape: at the shape)
-- @column grid                       grid dimensions (x, y, z), blocks (most launches'; group=shape: the row's; NULL for a range or a graph)
-- @column block                      block dimensions (x, y, z), threads (most launches'; group=shape: the row's; NULL for a range or a graph)
-- @column total_ns                   summed duration (gpu__time_duration.sum), ns
-- @column duration_ns                median duration, ns
-- @column elapsed_cycles             median Elapsed Cycles (gpc__cycles_elapsed.max), cycles
-- @column sm_active_cycles           median SM Active Cycles (sm__cycles_active.avg), cycles
-- @column sm_frequency_hz            median SM Frequency (gpc__cycles_elapsed.avg.per_second), Hz
-- @column registers_per_thread       registers per thread (most launches')
-- @column block_size                 threads per block (most launches')
-- @column grid_size                  blocks in the grid (most launches')
-- @column theoretical_occupancy_pct  median theoretical occupancy, % of max warps per SM
-- @column achieved_occupancy_pct     median achieved occupancy, % of max warps per SM
-- @column limiter                    the binding occupancy limit(s), as occupancy names them (most launches')
-- @column next_occupancy_pct         median theoretical occupancy with one block more per SM, as occupancy says, % (NULL unless every launch has it)
-- @column next_needs                 what one block more per SM needs, or why none fits, as occupancy says (most launches'; NULL: most need nothing)
-- @column best_block_size            threads per block at which the SM holds the most warps, registers and shared memory per block held, as occupancy says (most launches')
-- @column best_block_occupancy_pct   median theoretical occupancy at best_block_size, as occupancy says, % (NULL unless every launch has it at that size)
-- @column sm_throughput_pct          median Compute (SM) Throughput (sm__throughput), % of peak
-- @column memory_throughput_pct      median Memory Throughput (gpu__compute_memory_throughput), % of peak
-- @column dram_throughput_pct        median DRAM Throughput (gpu__dram_throughput), % of peak
-- @column l1_hit_rate_pct            median L1/TEX Hit Rate (l1tex__t_sector_hit_rate.pct), %
-- @column l2_hit_rate_pct            median L2 Hit Rate (lts__t_sector_hit_rate.pct), %
-- @column dram_bytes                 summed DRAM bytes (roofline's dram_bytes), bytes
-- @column dram_bytes_per_s           median DRAM bandwidth (dram__bytes.sum.per_second), byte/s
-- @column flop                       summed floating-point work (roofline's flop), FLOP
-- @column flops_per_s                median FLOP/s, all floating-point work, FLOP/s
-- @column ai_dram                    median arithmetic intensity at DRAM, FLOP/byte
-- @column precision                  precision with the most FLOP/s, as roofline names it (most launches')
-- @column roof_pct                   median FLOP/s as % of the roofline's attainable
-- @column bound                      memory | compute | no_fp_work, as roofline says (most launches')
-- @column roof_limiter               L1 | L2 | DRAM | compute | no_fp_work: the level whose roof bounds the launch, as hierarchical-roofline says (most launches')
-- @column dram_roof_pct              median DRAM bandwidth as % of the roofline's DRAM ceiling (peak_dram_bytes_per_s), %
-- @column varies                     the settings that differ between the launches, with their values (NULL: none)
-- @display launches, grid, block, total_ns, duration_ns, registers_per_thread, achieved_occupancy_pct, limiter, sm_throughput_pct, memory_throughput_pct, roof_pct, dram_roof_pct, bound, roof_limiter, varies, nvtx_range, name
-- @requires ncu_kernels, ncu_metrics
WITH hit AS (  -- memory-workload's L1/TEX and L2 hit rates
    SELECT run_id, kernel_id,
           max(value) FILTER (WHERE metric = 'l1tex__t_sector_hit_rate.pct') AS l1_hit_rate_pct,
           max(value) FILTER (WHERE metric = 'lts__t_sector_hit_rate.pct') AS l2_hit_rate_pct
    FROM ncu_metrics
    WHERE metric IN ('l1tex__t_sector_hit_rate.pct', 'lts__t_sector_hit_rate.pct') AND ($run IS NULL OR run_id = $run)
    GROUP BY run_id, kernel_id
), launch AS MATERIALIZED (  -- each launch's values, as the per-launch queries give them
    SELECT r.run_id, r.kernel_id, r.name, r.nvtx_range,
           CASE WHEN k.grid_x IS NOT NULL THEN format('({}, {}, {})', k.grid_x, k.grid_y, k.grid_z) END AS grid,
           CASE WHEN k.block_x IS NOT NULL THEN format('({}, {}, {})', k.block_x, k.block_y, k.block_z) END AS block,
           r.duration_ns, r.elapsed_cycles, r.sm_active_cycles,
           r.sm_frequency_hz, r.registers_per_thread::BIGINT AS registers_per_thread,
           r.block_size::BIGINT AS block_size, r.grid_size::BIGINT AS grid_size,
           -- (occupancy is a kernel launch's: the query leaves ranges and graphs out)
           CASE WHEN r.workload = 'kernel' THEN r.theoretical_occupancy_pct END AS theoretical_occupancy_pct,
           CASE WHEN r.workload = 'kernel' THEN r.achieved_occupancy_pct END AS achieved_occupancy_pct,
           o.limiter, o.next_occupancy_pct, o.next_needs, o.best_block_size, o.best_block_occupancy_pct,
           r.sm_throughput_pct, r.memory_throughput_pct, r.dram_throughput_pct, h.l1_hit_rate_pct, h.l2_hit_rate_pct,
           r.dram_bytes, r.dram_bytes_per_s, r.flop, r.flops_per_s, r.ai_dram, r.precision, r.roof_pct, r.bound,
           r.level_limiter AS roof_limiter,
           100 * r.dram_bytes_per_s / nullif(r.peak_dram_bytes_per_s, 0) AS dram_roof_pct
    FROM ncu_hierarchical($run, NULL) r  -- (ncu_roofline's rows, with the hierarchical limiter)
    JOIN ncu_kernels k USING (run_id, kernel_id)
    LEFT JOIN ncu_occupancy($run) o USING (run_id, kernel_id)  -- (kernel launches only)
    LEFT JOIN hit h USING (run_id, kernel_id)
    WHERE ($kernel IS NULL OR contains(lower(r.name), lower($kernel)))
      AND ncu_kernel_asked('ncu-summary', $run, $kernel)
)
SELECT run_id, min(kernel_id) AS kernel_id, name, nvtx_range, count(*) AS launches,
       mode(grid ORDER BY kernel_id) AS grid, mode(block ORDER BY kernel_id) AS block,
       -- sums in launch order (the same sum however the rows arrive), only where every launch
       -- has the value (a partial sum would read as the total)
       CASE WHEN count(duration_ns) = count(*) THEN list_sum(list(duration_ns ORDER BY kernel_id)) END AS total_ns,
       median(duration_ns) AS duration_ns, median(elapsed_cycles) AS elapsed_cycles,
       median(sm_active_cycles) AS sm_active_cycles, median(sm_frequency_hz) AS sm_frequency_hz,
       mode(registers_per_thread ORDER BY kernel_id) AS registers_per_thread,
       mode(block_size ORDER BY kernel_id) AS block_size,
       mode(grid_size ORDER BY kernel_id) AS grid_size,
       median(theoretical_occupancy_pct) AS theoretical_occupancy_pct,
       median(achieved_occupancy_pct) AS achieved_occupancy_pct,
       mode(limiter ORDER BY kernel_id) AS limiter,
       CASE WHEN count(next_occupancy_pct) = count(theoretical_occupancy_pct) THEN median(next_occupancy_pct)
            END AS next_occupancy_pct,  -- (a launch at 100 % has none: no median of the others)
       nullif(mode(coalesce(next_needs, '') ORDER BY kernel_id), '') AS next_needs,
       mode(best_block_size ORDER BY kernel_id) AS best_block_size,
       CASE WHEN count(best_block_occupancy_pct) = count(*) AND count(DISTINCT best_block_size) = 1
            THEN median(best_block_occupancy_pct) END AS best_block_occupancy_pct,
       median(sm_throughput_pct) AS sm_throughput_pct, median(memory_throughput_pct) AS memory_throughput_pct,
       median(dram_throughput_pct) AS dram_throughput_pct,
       median(l1_hit_rate_pct) AS l1_hit_rate_pct, median(l2_hit_rate_pct) AS l2_hit_rate_pct,
       CASE WHEN count(dram_bytes) = count(*) THEN list_sum(list(dram_bytes ORDER BY kernel_id)) END AS dram_bytes,
       median(dram_bytes_per_s) AS dram_bytes_per_s,
       CASE WHEN count(flop) = count(*) THEN list_sum(list(flop ORDER BY kernel_id)) END AS flop,
       median(flops_per_s) AS flops_per_s, median(ai_dram) AS ai_dram,
       mode(precision ORDER BY kernel_id) AS precision,
       median(roof_pct) AS roof_pct,
       mode(bound ORDER BY kernel_id) AS bound,
       mode(roof_limiter ORDER BY kernel_id) AS roof_limiter,
       median(dram_roof_pct) AS dram_roof_pct,
       nullif(concat_ws('; ',
           values_differ('registers_per_thread', list(registers_per_thread)),
           values_differ('block_size', list(block_size)),
           values_differ('grid_size', list(grid_size)),
           values_differ('limiter', list(limiter)),
           values_differ('precision', list(precision)),
           values_differ('bound', list(bound)),
           values_differ('roof_limiter', list(roof_limiter))
       ), '') AS varies
FROM launch
GROUP BY run_id, name, nvtx_range, CASE WHEN lower($group) = 'shape' THEN grid END,
         CASE WHEN lower($group) = 'shape' THEN block END
ORDER BY run_id, total_ns DESC NULLS LAST, kernel_id
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
