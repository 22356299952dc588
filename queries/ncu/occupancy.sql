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
-- @column missing_metrics            metrics not in the report, comma-separated (NULL = complete)
-- @display kernel_id, block_size, registers_per_thread, theoretical_occupancy_pct, achieved_occupancy_pct, limiter, next_occupancy_pct, next_needs, name
-- @requires ncu_kernels, ncu_metrics
WITH m AS MATERIALIZED (
    SELECT * FROM ncu_kernel_metrics
    WHERE ($run IS NULL OR run_id = $run) AND ($kernel IS NULL OR contains(lower(name), lower($kernel)))
      AND ncu_kernel_asked('occupancy', $run, $kernel)
), dev AS (  -- the SM's resources the calculator divides
    SELECT run_id, kernel_id,
           max(value) FILTER (WHERE metric = 'device__attribute_max_registers_per_multiprocessor') AS regs_per_sm,
           max(value) FILTER (WHERE metric = 'device__attribute_max_registers_per_thread') AS regs_per_thread_cap,
           max(value) FILTER (WHERE metric = 'device__attribute_max_warps_per_multiprocessor') AS warps_per_sm,
           max(value) FILTER (WHERE metric = 'device__attribute_max_warps_per_scheduler') AS warps_per_scheduler,
           max(value) FILTER (WHERE metric = 'device__attribute_max_shared_memory_per_multiprocessor') AS smem_per_sm
    FROM ncu_metrics
    WHERE metric IN ('device__attribute_max_registers_per_multiprocessor', 'device__attribute_max_registers_per_thread',
                     'device__attribute_max_warps_per_multiprocessor', 'device__attribute_max_warps_per_scheduler',
                     'device__attribute_max_shared_memory_per_multiprocessor')
      AND ($run IS NULL OR run_id = $run)
    GROUP BY run_id, kernel_id
), w AS (
    SELECT m.*, dev.regs_per_sm, dev.regs_per_thread_cap, dev.warps_per_sm, dev.warps_per_scheduler, dev.smem_per_sm,
           floor(dev.warps_per_sm / dev.warps_per_scheduler) AS parts,  -- (sub-partitions: registers come from each)
           ceil(m.block_size / 32) AS warps_per_block,
           CASE WHEN m.cc_num < 8 THEN 256 ELSE 128 END AS smem_unit,  -- (cuda_occupancy.h's granularity)
           nullif(least(block_limit_blocks, block_limit_registers, block_limit_shared_mem, block_limit_warps,
                        block_limit_barriers), 0) AS blocks,
           least(block_limit_blocks, block_limit_warps, block_limit_barriers) AS blocks_cap,
           shared_mem_static_bytes + shared_mem_dynamic_bytes AS smem
    FROM m LEFT JOIN dev USING (run_id, kernel_id)
), wf AS (  -- the most of each resource for blocks and for blocks + 1 per SM
    SELECT w.*,
           occupancy_registers_for(blocks, warps_per_block, regs_per_sm, parts, regs_per_thread_cap) AS regs_now,
           occupancy_registers_for(blocks + 1, warps_per_block, regs_per_sm, parts, regs_per_thread_cap) AS regs_next,
           occupancy_shared_mem_for(blocks, smem_per_sm, smem_unit, shared_mem_driver_bytes) AS smem_now,
           occupancy_shared_mem_for(blocks + 1, smem_per_sm, smem_unit, shared_mem_driver_bytes) AS smem_next,
           blocks + 1 <= blocks_cap AND theoretical_occupancy_pct < 100 AS reachable
    FROM w
), wn AS (  -- the blocks per SM once registers and shared memory are within their next_* (registers
            -- come in steps of 8 per thread: one step down may fit several blocks more), and the
            -- carveout those blocks' shared memory takes
    SELECT wf.*,
           least(registers_per_thread, regs_next) AS regs_then,
           smem_unit * ceil((least(smem, smem_next) + shared_mem_driver_bytes) / smem_unit) AS alloc_then
    FROM wf
), wb AS (
    SELECT wn.*,
           least(blocks_cap,
                 occupancy_blocks_at_registers(regs_then, warps_per_block, regs_per_sm, parts),
                 CASE WHEN alloc_then > 0 THEN floor(smem_per_sm / alloc_then) END) AS blocks_then,
           nullif(concat_ws('; ',
               CASE WHEN registers_per_thread > regs_next
                    THEN 'registers ' || registers_per_thread::BIGINT || ' -> ' || regs_next::BIGINT END,
               CASE WHEN smem > smem_next
                    THEN format('shared memory {:,} -> {:,} B', smem::BIGINT, smem_next::BIGINT) END), '') AS shrink
    FROM wn
), wt AS (  -- (the carveout one block more takes: the driver picks it, unless the kernel's preference keeps it lower)
    SELECT wb.*,
           (blocks + 1) * alloc_then AS carveout_then,
           coalesce(blocks IS NOT NULL AND theoretical_occupancy_pct IS NOT NULL AND registers_per_thread IS NOT NULL
                    AND smem IS NOT NULL AND shared_mem_driver_bytes IS NOT NULL AND shared_mem_config_bytes IS NOT NULL
                    AND regs_next IS NOT NULL AND smem_next IS NOT NULL, false) AS known
    FROM wb
), wk AS (
    SELECT wt.*, known AND coalesce(reachable, false) AND regs_next >= 1 AND smem_next >= 0 AS ok_next
    FROM wt
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
       blocks::BIGINT AS blocks_per_sm, regs_now::BIGINT AS registers_per_thread_max,
       CASE WHEN smem_now >= 0 THEN smem_now::BIGINT END AS shared_mem_max_bytes,
       CASE WHEN ok_next THEN 100 * blocks_then * warps_per_block / warps_per_sm END AS next_occupancy_pct,
       CASE WHEN ok_next THEN regs_next::BIGINT END AS next_registers_per_thread_max,
       CASE WHEN ok_next THEN smem_next::BIGINT END AS next_shared_mem_max_bytes,
       CASE WHEN NOT known THEN NULL  -- (an input missing: missing_metrics names it)
            WHEN theoretical_occupancy_pct >= 100 THEN NULL
            WHEN NOT reachable
            THEN 'none at ' || block_size::BIGINT || ' threads per block: the SM''s '
                 || CASE WHEN blocks_cap = block_limit_blocks THEN 'block slots allow '
                         WHEN blocks_cap = block_limit_warps THEN 'warps allow ' ELSE 'barriers allow ' END
                 || blocks_cap::BIGINT || CASE WHEN blocks_cap = 1 THEN ' block' ELSE ' blocks' END
                 || CASE WHEN blocks_cap = block_limit_blocks THEN ' (larger blocks would hold more warps)'
                         WHEN blocks_cap = block_limit_warps
                         THEN ' (a block size dividing ' || warps_per_sm::BIGINT * 32 || ' threads fills it)' ELSE '' END
            WHEN regs_next < 1 OR smem_next < 0
            THEN 'none: one block more exceeds the SM''s ' || CASE WHEN regs_next < 1 THEN 'registers' ELSE 'shared memory' END
                 || ' whatever the kernel uses'
            WHEN ok_next
            THEN nullif(concat_ws('; ', shrink,
                     CASE WHEN carveout_then > shared_mem_config_bytes
                          THEN format('a shared memory carveout of at least {:,} B (now {:,})', carveout_then::BIGINT,
                                      shared_mem_config_bytes::BIGINT) END), '')
            END AS next_needs,
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
           CASE WHEN waves_per_sm IS NULL THEN 'launch__waves_per_multiprocessor' END,
           CASE WHEN regs_per_sm IS NULL THEN 'device__attribute_max_registers_per_multiprocessor' END,
           CASE WHEN regs_per_thread_cap IS NULL THEN 'device__attribute_max_registers_per_thread' END,
           CASE WHEN warps_per_sm IS NULL THEN 'device__attribute_max_warps_per_multiprocessor' END,
           CASE WHEN warps_per_scheduler IS NULL THEN 'device__attribute_max_warps_per_scheduler' END,
           CASE WHEN smem_per_sm IS NULL THEN 'device__attribute_max_shared_memory_per_multiprocessor' END,
           CASE WHEN shared_mem_config_bytes IS NULL THEN 'launch__shared_mem_config_size' END
       ), '') AS missing_metrics
FROM checked JOIN wk ON checked.ok
WHERE workload = 'kernel'
ORDER BY run_id, kernel_id
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
