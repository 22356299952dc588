-- ncu scope: the profiled launches of both reports with the metrics diff compares, in
-- base units as stored (the stall reasons: ncu_stalls) (the values `ncu --page details` prints, converted to ns, %, ...).
-- @param base  INTEGER  base run id
-- @param new   INTEGER  new run id
-- @column side                       0 = base run, 1 = new run
-- @column kernel_id                  ncu's ID of the launch in its report
-- @column name                       kernel name (demangled)
-- @column nvtx_path                  NVTX push/pop ranges around the launch
-- @column duration_ns                gpu__time_duration.sum, ns
-- @column elapsed_cycles             Elapsed Cycles (gpc__cycles_elapsed.max), cycles
-- @column sm_frequency_hz            SM Frequency (gpc__cycles_elapsed.avg.per_second), Hz: the clock the launch ran at
-- @column sm_throughput_pct          Compute (SM) Throughput, %
-- @column memory_throughput_pct      Memory Throughput, %
-- @column dram_throughput_pct        DRAM Throughput, %
-- @column theoretical_occupancy_pct  Theoretical Occupancy, %
-- @column achieved_occupancy_pct     Achieved Occupancy, %
-- @column registers_per_thread       Registers Per Thread
-- @column shared_mem_per_block_bytes shared memory per block the kernel asks for (static + dynamic), bytes
-- @column occupancy_limiter          the block limit that binds the theoretical occupancy (query occupancy's limiter)
-- @column next_needs                 what one block more per SM needs (query occupancy's)
-- @column best_block_size            the block size of the most warps per SM, registers and shared memory held (query occupancy's)
-- @column best_block_occupancy_pct   theoretical occupancy at best_block_size, % (query occupancy's)
-- @column block_size                 Block Size, threads
-- @column grid_size                  Grid Size, blocks
-- @column waves_per_sm               Waves Per SM
-- @column ai_dram                    arithmetic intensity, FLOP per DRAM byte
-- @column flops_per_s                achieved FLOP/s (all floating-point work)
-- @column roof_pct                   achieved FLOP/s as % of the attainable roof
-- @column bound                      memory or compute (roofline)
-- @column limiter                    the memory level whose roof bounds the launch in its precision, or compute (hierarchical-roofline's)
-- @column warp_cycles_per_issue      Warp Cycles Per Issued Instruction (Warp State Statistics), cycles
SELECT s.side, r.kernel_id, r.name, r.nvtx_path, r.duration_ns, r.elapsed_cycles, r.sm_frequency_hz, r.sm_throughput_pct, r.memory_throughput_pct,
       r.dram_throughput_pct, r.theoretical_occupancy_pct, r.achieved_occupancy_pct, r.registers_per_thread,
       r.block_size, r.grid_size, r.waves_per_sm, r.ai_dram, r.flops_per_s, r.roof_pct, r.bound,
       r.level_limiter AS limiter,
       o.shared_mem_static_bytes + o.shared_mem_dynamic_bytes AS shared_mem_per_block_bytes,
       o.limiter AS occupancy_limiter, o.next_needs, o.best_block_size, o.best_block_occupancy_pct,
       w.value AS warp_cycles_per_issue
FROM (VALUES (0, $base), (1, $new)) s(side, run_id)
JOIN ncu_hierarchical(NULL, NULL) r ON r.run_id = s.run_id  -- (ncu_roofline's rows, with the hierarchical limiter)
LEFT JOIN (SELECT * FROM ncu_occupancy(NULL) WHERE run_id IN ($base, $new)) o  -- (the filter reaches its metrics)
       ON o.run_id = r.run_id AND o.kernel_id = r.kernel_id
LEFT JOIN ncu_metrics w ON w.run_id = r.run_id AND w.kernel_id = r.kernel_id
                       AND w.metric = 'smsp__average_warp_latency_per_inst_issued.ratio'
WHERE r.run_id IN ($base, $new)
ORDER BY s.side, r.kernel_id
