-- Nsight Compute tables and the shared views of the ncu named queries (queries/ncu).
-- Sources: .ncu-rep (ncu_report module), ncu --csv --page raw, ncu --csv --page details.
-- Every metric is stored once, long, in base units (byte, ns, hz, cycle, %); the views
-- pivot the metrics the queries use and name, per launch, the ones the report lacks
-- (missing_metrics) instead of computing numbers from absent inputs.

CREATE TABLE IF NOT EXISTS ncu_kernels (
    run_id          INTEGER,    -- run (runs.run_id)
    kernel_id       INTEGER,    -- ncu's ID of the launch in its report (0, 1, ...; the CSV "ID" column)
    name            VARCHAR,    -- kernel name, demangled, as the source prints it
    mangled_name    VARCHAR,    -- mangled name (.ncu-rep only; NULL from CSV)
    function_name   VARCHAR,    -- base function name without parameters (.ncu-rep only)
    workload        VARCHAR,    -- what the result profiled: kernel (a launch), range (--replay-mode range/app-range: the work between two markers), graph (--graph-profiling graph: a whole graph launch)
    nvtx_path       VARCHAR,    -- NVTX push/pop ranges around the launch, outermost first, joined by '/' (non-default domains as domain:text)
    nvtx_range      VARCHAR,    -- innermost NVTX push/pop range (NULL when none)
    nvtx_ranges     VARCHAR[],  -- the push/pop ranges as a list, outermost first
    nvtx_start_end  VARCHAR[],  -- NVTX start/end ranges open at the launch
    grid_x          BIGINT,     -- grid dimension x (blocks); NULL for a range or a graph (several kernels: ncu prints their maxima)
    grid_y          BIGINT,     -- grid dimension y (blocks)
    grid_z          BIGINT,     -- grid dimension z (blocks)
    block_x         BIGINT,     -- block dimension x (threads)
    block_y         BIGINT,     -- block dimension y (threads)
    block_z         BIGINT,     -- block dimension z (threads)
    device_id       INTEGER,    -- CUDA device ordinal
    cc              VARCHAR,    -- compute capability, e.g. '9.0'
    context_id      BIGINT,     -- CUDA context id
    stream_id       BIGINT,     -- CUDA stream id
    process_id      BIGINT,     -- profiled process id
    process_name    VARCHAR,    -- profiled process name (its executable's file name)
    host_name       VARCHAR     -- host name
);

CREATE TABLE IF NOT EXISTS ncu_metrics (
    run_id      INTEGER,  -- run (runs.run_id)
    kernel_id   INTEGER,  -- ncu_kernels.kernel_id
    metric      VARCHAR,  -- ncu metric name (e.g. dram__bytes.sum.per_second); unmapped details labels as 'label:<section>:<label>'
    unit        VARCHAR,  -- base unit (byte, byte/s, hz, ns, cycle, %, inst/cycle, ...; '' for counts)
    value       DOUBLE,   -- value in the base unit; NULL when the source says n/a / no data or the value is text
    text_value  VARCHAR   -- the source's text when value is NULL (n/a, no data, PolicySpread, NVIDIA H200, ...)
);

-- Nsight Compute's rule results (its guided analysis), one row per result per launch, as
-- the details page prints them after each section. From a report or a details page; a
-- run read from the raw page has none (runs.meta has no rule_results then).
CREATE TABLE IF NOT EXISTS ncu_rules (
    run_id        INTEGER,  -- run (runs.run_id)
    kernel_id     INTEGER,  -- ncu_kernels.kernel_id
    section       VARCHAR,  -- section identifier the rule belongs to (e.g. MemoryWorkloadAnalysis_Tables)
    rule          VARCHAR,  -- rule identifier (e.g. SharedMemoryConflicts); the details page's Rule Name
    rule_type     VARCHAR,  -- OPT (optimisation), WRN (warning), ERR (error), INF (information)
    title         VARCHAR,  -- the finding's title, e.g. 'Shared Store Bank Conflicts' (report only; NULL from CSV)
    message       VARCHAR,  -- the finding, as the details page prints it
    speedup_type  VARCHAR,  -- global (of the launch's duration) or local (of the part the rule looks at); NULL: no estimate
    speedup_pct   DOUBLE    -- estimated speedup, %
);

-- Nsight Compute's Source page: per instruction of a launch profiled with the SourceCounters
-- section (in --set full), from a report (ncu_report) only. One row per instruction that
-- executed or was sampled; a metric the report lacks for the launch is NULL (a whole graph
-- has the warp stall sampling only).
CREATE TABLE IF NOT EXISTS ncu_source (
    run_id                        INTEGER,  -- run (runs.run_id)
    kernel_id                     INTEGER,  -- ncu_kernels.kernel_id
    function                      VARCHAR,  -- the function of a range or a graph: a kernel launch's name where the report has one of it, else its symbol without parameters (e.g. block_sum); NULL for a kernel launch (ncu_kernels.name)
    address                       BIGINT,   -- the instruction's address (the Source page's Address)
    pc_offset                     BIGINT,   -- its offset from its function's first instruction, bytes
    sass                          VARCHAR,  -- the SASS instruction, e.g. 'LDG.E.128 R4, desc[UR4][R2.64]'
    file                          VARCHAR,  -- source file of the line information (NULL: none, e.g. a library kernel)
    line                          INTEGER,  -- source line (NULL: none)
    inst_executed                 DOUBLE,   -- warp-level instructions executed (Instructions Executed)
    thread_inst_executed          DOUBLE,   -- thread-level instructions executed
    thread_inst_executed_pred_on  DOUBLE,   -- thread-level instructions executed with the predicate on
    samples                       DOUBLE,   -- warp stall samples at this address (Warp Stall Sampling, All Samples)
    divergent_branches            DOUBLE,   -- divergent branch targets
    l1_tag_requests_global        DOUBLE,   -- L1 tag requests of global accesses
    shared_conflicts_nway         DOUBLE,   -- shared-memory bank conflicts, n-way (L1 Conflicts Shared N-Way)
    shared_wavefronts             DOUBLE,   -- shared-memory wavefronts
    shared_wavefronts_ideal       DOUBLE,   -- shared-memory wavefronts without bank conflicts
    shared_wavefronts_excess      DOUBLE,   -- shared_wavefronts beyond the ideal (bank conflicts)
    l2_sectors_global             DOUBLE,   -- theoretical L2 sectors of global accesses
    l2_sectors_global_ideal       DOUBLE,   -- the same for perfectly coalesced accesses
    l2_sectors_global_excess      DOUBLE,   -- l2_sectors_global beyond the ideal (uncoalesced accesses)
    l2_sectors_local              DOUBLE,   -- theoretical L2 sectors of local memory (register spills)
    samples_not_issued            DOUBLE    -- of the samples, those whose warp did not issue (Not-issued Samples)
);

-- The warp stall samples of each instruction by reason, named as ncu_warp_states names
-- them (long_scoreboard, math_pipe_throttle, no_instruction, ...); reasons with samples only.
CREATE TABLE IF NOT EXISTS ncu_source_stalls (
    run_id              INTEGER,  -- run (runs.run_id)
    kernel_id           INTEGER,  -- ncu_kernels.kernel_id
    address             BIGINT,   -- ncu_source.address
    reason              VARCHAR,  -- stall reason
    samples             DOUBLE,   -- samples of this reason at this address (smsp__pcsamp_warps_issue_stalled_<reason>)
    samples_not_issued  DOUBLE    -- of those, samples whose warp did not issue
);

-- The text of the source files a report carries (ncu --import-source yes), line by line.
CREATE TABLE IF NOT EXISTS ncu_source_lines (
    run_id  INTEGER,  -- run (runs.run_id)
    file    VARCHAR,  -- ncu_source.file
    line    INTEGER,  -- line number, from 1
    text    VARCHAR   -- the line's text
);

-- Each launch's warp states (ncu's Warp State Statistics): cycles per issued instruction
-- per stall reason, the reason named as its metric names it (long_scoreboard, barrier, ...).
CREATE OR REPLACE VIEW ncu_warp_states AS
SELECT run_id, kernel_id,
       regexp_extract(metric, '^smsp__average_warps_issue_stalled_(.+)_per_issue_active\.ratio$', 1) AS reason,
       value AS cycles_per_issue
FROM ncu_metrics
WHERE metric LIKE 'smsp\_\_average\_warps\_issue\_stalled\_%\_per\_issue\_active.ratio' ESCAPE '\';

-- Kernel class from the name: the colour of a roofline point when no NVTX range is known.
CREATE OR REPLACE MACRO _ncu_kernel_class(n) AS CASE
    WHEN regexp_matches(lower(n), 'attn|attention|fmha|flash') THEN 'attention'
    WHEN regexp_matches(lower(n), 'gemm|nvjet|cutlass|matmul|wgmma|hgmma|xmma|_mma|gemv|cublas') THEN 'gemm'
    WHEN regexp_matches(lower(n), 'softmax') THEN 'softmax'
    WHEN regexp_matches(lower(n), 'norm') THEN 'norm'
    WHEN regexp_matches(lower(n), 'reduce|reduction') THEN 'reduction'
    WHEN regexp_matches(lower(n), 'elementwise|vectorized|unrolled|pointwise') THEN 'elementwise'
    WHEN regexp_matches(lower(n), 'copy|memcpy|memset|fill|cat') THEN 'copy'
    ELSE 'other' END;

-- One row per result: the metrics the speed-of-light, occupancy and roofline queries use
-- (NULL where the report lacks them). Units in the column names. The launch configuration
-- and the occupancy limits are a kernel launch's only: a range or a whole graph runs
-- several kernels, and ncu gives it their maxima or averages (NULL here).
CREATE OR REPLACE VIEW ncu_kernel_metrics AS
SELECT
    k.run_id, k.kernel_id, k.name, k.workload, k.nvtx_path, k.nvtx_range, k.cc,
    TRY_CAST(k.cc AS DOUBLE) AS cc_num,
    -- speed of light (GPU Speed Of Light Throughput section)
    max(value) FILTER (WHERE metric = 'gpu__time_duration.sum') AS duration_ns,
    max(value) FILTER (WHERE metric = 'gpc__cycles_elapsed.max') AS elapsed_cycles,
    max(value) FILTER (WHERE metric = 'sm__cycles_active.avg') AS sm_active_cycles,
    max(value) FILTER (WHERE metric = 'gpc__cycles_elapsed.avg.per_second') AS sm_frequency_hz,
    max(value) FILTER (WHERE metric = 'dram__cycles_elapsed.avg.per_second') AS dram_frequency_hz,
    max(value) FILTER (WHERE metric = 'sm__throughput.avg.pct_of_peak_sustained_elapsed') AS sm_throughput_pct,
    max(value) FILTER (WHERE metric = 'gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed') AS memory_throughput_pct,
    max(value) FILTER (WHERE metric = 'gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed') AS dram_throughput_pct,
    max(value) FILTER (WHERE metric = 'l1tex__throughput.avg.pct_of_peak_sustained_active') AS l1_throughput_pct,
    max(value) FILTER (WHERE metric = 'lts__throughput.avg.pct_of_peak_sustained_elapsed') AS l2_throughput_pct,
    -- launch statistics and occupancy
    max(value) FILTER (WHERE metric = 'launch__block_size' AND k.workload = 'kernel') AS block_size,
    max(value) FILTER (WHERE metric = 'launch__grid_size' AND k.workload = 'kernel') AS grid_size,
    max(value) FILTER (WHERE metric = 'launch__registers_per_thread' AND k.workload = 'kernel') AS registers_per_thread,
    max(value) FILTER (WHERE metric = 'launch__shared_mem_per_block_static' AND k.workload = 'kernel') AS shared_mem_static_bytes,
    max(value) FILTER (WHERE metric = 'launch__shared_mem_per_block_dynamic' AND k.workload = 'kernel') AS shared_mem_dynamic_bytes,
    max(value) FILTER (WHERE metric = 'launch__shared_mem_per_block_driver' AND k.workload = 'kernel') AS shared_mem_driver_bytes,
    max(value) FILTER (WHERE metric = 'launch__shared_mem_config_size' AND k.workload = 'kernel') AS shared_mem_config_bytes,
    max(value) FILTER (WHERE metric = 'launch__waves_per_multiprocessor' AND k.workload = 'kernel') AS waves_per_sm,
    max(value) FILTER (WHERE metric = 'launch__occupancy_limit_registers' AND k.workload = 'kernel') AS block_limit_registers,
    max(value) FILTER (WHERE metric = 'launch__occupancy_limit_shared_mem' AND k.workload = 'kernel') AS block_limit_shared_mem,
    max(value) FILTER (WHERE metric = 'launch__occupancy_limit_warps' AND k.workload = 'kernel') AS block_limit_warps,
    max(value) FILTER (WHERE metric = 'launch__occupancy_limit_blocks' AND k.workload = 'kernel') AS block_limit_blocks,
    max(value) FILTER (WHERE metric = 'launch__occupancy_limit_barriers' AND k.workload = 'kernel') AS block_limit_barriers,
    max(value) FILTER (WHERE metric = 'sm__maximum_warps_avg_per_active_cycle' AND k.workload = 'kernel') AS theoretical_warps_per_sm,
    max(value) FILTER (WHERE metric = 'sm__maximum_warps_per_active_cycle_pct' AND k.workload = 'kernel') AS theoretical_occupancy_pct,
    max(value) FILTER (WHERE metric = 'sm__warps_active.avg.per_cycle_active') AS achieved_warps_per_sm,
    max(value) FILTER (WHERE metric = 'sm__warps_active.avg.pct_of_peak_sustained_active') AS achieved_occupancy_pct,
    -- roofline inputs (SpeedOfLight_RooflineChart, SpeedOfLight_Hierarchical*RooflineChart)
    max(value) FILTER (WHERE metric = 'sm__cycles_elapsed.avg.per_second') AS sm_hz,
    max(value) FILTER (WHERE metric = 'smsp__cycles_elapsed.avg.per_second') AS smsp_hz,
    max(value) FILTER (WHERE metric = 'lts__cycles_elapsed.avg.per_second') AS lts_hz,
    max(value) FILTER (WHERE metric = 'l1tex__cycles_elapsed.avg.per_second') AS l1tex_hz,
    max(value) FILTER (WHERE metric = 'smsp__sass_thread_inst_executed_op_fadd_pred_on.sum.per_cycle_elapsed') AS fadd_per_cycle,
    max(value) FILTER (WHERE metric = 'smsp__sass_thread_inst_executed_op_fmul_pred_on.sum.per_cycle_elapsed') AS fmul_per_cycle,
    max(value) FILTER (WHERE metric = 'smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed') AS ffma_per_cycle,
    max(value) FILTER (WHERE metric = 'smsp__sass_thread_inst_executed_op_dadd_pred_on.sum.per_cycle_elapsed') AS dadd_per_cycle,
    max(value) FILTER (WHERE metric = 'smsp__sass_thread_inst_executed_op_dmul_pred_on.sum.per_cycle_elapsed') AS dmul_per_cycle,
    max(value) FILTER (WHERE metric = 'smsp__sass_thread_inst_executed_op_dfma_pred_on.sum.per_cycle_elapsed') AS dfma_per_cycle,
    max(value) FILTER (WHERE metric = 'smsp__sass_thread_inst_executed_op_hadd_pred_on.sum.per_cycle_elapsed') AS hadd_per_cycle,
    max(value) FILTER (WHERE metric = 'smsp__sass_thread_inst_executed_op_hmul_pred_on.sum.per_cycle_elapsed') AS hmul_per_cycle,
    max(value) FILTER (WHERE metric = 'smsp__sass_thread_inst_executed_op_hfma_pred_on.sum.per_cycle_elapsed') AS hfma_per_cycle,
    max(value) FILTER (WHERE metric = 'sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained') AS ffma_peak_per_cycle,
    max(value) FILTER (WHERE metric = 'sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained') AS dfma_peak_per_cycle,
    max(value) FILTER (WHERE metric = 'sm__sass_thread_inst_executed_op_hfma_pred_on.sum.peak_sustained') AS hfma_peak_per_cycle,
    max(value) FILTER (WHERE metric = 'dram__bytes.sum.per_second') AS dram_bytes_per_s,
    max(value) FILTER (WHERE metric = 'dram__bytes.sum.peak_sustained') AS dram_peak_bytes_per_cycle,
    max(value) FILTER (WHERE metric = 'dram__bytes.sum') AS dram_bytes_sum,
    max(value) FILTER (WHERE metric = 'lts__lts2xbar_cycles_active.sum.per_second') AS l2_wb_cycles_per_s,
    max(value) FILTER (WHERE metric = 'lts__lts2xbar_cycles_active.sum.peak_sustained') AS l2_wb_peak_per_cycle,
    -- L1: the sections pick lgds on CC >= 9.0, lg on 7.5-8.9, all writeback before
    max(value) FILTER (WHERE metric = 'l1tex__lsu_writeback_active_mem_lgds.sum.per_second') AS l1_lgds_wb_per_s,
    max(value) FILTER (WHERE metric = 'l1tex__lsu_writeback_active_mem_lgds.sum.peak_sustained') AS l1_lgds_wb_peak_per_cycle,
    max(value) FILTER (WHERE metric = 'l1tex__lsu_writeback_active_mem_lg.sum.per_second') AS l1_lg_wb_per_s,
    max(value) FILTER (WHERE metric = 'l1tex__lsu_writeback_active_mem_lg.sum.peak_sustained') AS l1_lg_wb_peak_per_cycle,
    max(value) FILTER (WHERE metric = 'l1tex__lsu_writeback_active.sum.per_second') AS l1_all_wb_per_s,
    max(value) FILTER (WHERE metric = 'l1tex__lsu_writeback_active.sum.peak_sustained') AS l1_all_wb_peak_per_cycle
FROM ncu_kernels k
LEFT JOIN ncu_metrics m USING (run_id, kernel_id)
GROUP BY ALL;

-- Tensor-core op paths per launch: sm__ops_path_tensor_[op_<op>_]src_<src>[_dst_<dst>][_sparsity_<on|off>].
-- op NULL = the generic per-source path (counts every op kind and sparsity; on sm_90
-- its peak is the sparse peak, so ceilings come from the op-specific dense paths).
CREATE OR REPLACE VIEW ncu_tensor_paths AS
WITH p AS (
    SELECT run_id, kernel_id, value,
           regexp_extract(metric, '^sm__ops_path_tensor_([a-z0-9_]+)\.sum(\.per_cycle_elapsed|\.peak_sustained)?$', 1) AS path,
           regexp_extract(metric, '^sm__ops_path_tensor_[a-z0-9_]+\.sum(\.per_cycle_elapsed|\.peak_sustained)?$', 1) AS suffix
    FROM ncu_metrics
    WHERE starts_with(metric, 'sm__ops_path_tensor_')
)
SELECT run_id, kernel_id, path,
       nullif(regexp_extract(path, '^op_([a-z0-9]+)_', 1), '') AS op,         -- hmma, hgmma, imma, igmma, ...; NULL = generic
       regexp_extract(path, 'src_([a-z0-9]+)', 1) AS src,                     -- bf16, fp16, tf32, fp8, int8, fp64, int1
       nullif(regexp_extract(path, 'dst_([a-z0-9]+)', 1), '') AS dst,         -- accumulator type when the path names it
       nullif(regexp_extract(path, 'sparsity_(on|off)', 1), '') AS sparsity,  -- on/off, NULL when not split
       max(value) FILTER (WHERE suffix = '') AS ops,                          -- operations (count; .sum, full reports only)
       max(value) FILTER (WHERE suffix = '.per_cycle_elapsed') AS ops_per_cycle,      -- operations per SM-elapsed cycle, whole GPU
       max(value) FILTER (WHERE suffix = '.peak_sustained') AS peak_ops_per_cycle     -- peak operations per cycle, whole GPU
FROM p
WHERE path <> ''
GROUP BY ALL;

-- Per launch and tensor source type: achieved ops/cycle (generic paths; op-specific when
-- no generic one exists), exact op count, and the ceiling in ops/cycle: the peak of the
-- paths the launch used (non-zero), else the best dense (sparsity off / unsplit) path.
-- Op-specific paths are the ceiling candidates when the device has them.
CREATE OR REPLACE VIEW ncu_tensor_by_src AS
WITH s AS (
    SELECT run_id, kernel_id, src,
           bool_or(op IS NULL AND ops_per_cycle IS NOT NULL) AS has_generic,
           bool_or(op IS NOT NULL AND peak_ops_per_cycle IS NOT NULL) AS has_specific,
           sum(ops_per_cycle) FILTER (WHERE op IS NULL) AS generic_per_cycle,
           sum(ops_per_cycle) FILTER (WHERE op IS NOT NULL) AS specific_per_cycle,
           sum(ops) FILTER (WHERE op IS NULL) AS generic_ops,
           sum(ops) FILTER (WHERE op IS NOT NULL) AS specific_ops,
           max(peak_ops_per_cycle) FILTER (WHERE op IS NOT NULL AND ops_per_cycle > 0) AS specific_used_peak,
           max(peak_ops_per_cycle) FILTER (WHERE op IS NOT NULL AND coalesce(sparsity, 'off') = 'off') AS specific_dense_peak,
           max(peak_ops_per_cycle) FILTER (WHERE op IS NULL AND ops_per_cycle > 0) AS generic_used_peak,
           max(peak_ops_per_cycle) FILTER (WHERE op IS NULL AND coalesce(sparsity, 'off') = 'off') AS generic_dense_peak
    FROM ncu_tensor_paths
    GROUP BY ALL
)
SELECT run_id, kernel_id, src,
       CASE WHEN has_generic THEN generic_per_cycle ELSE specific_per_cycle END AS ops_per_cycle,
       CASE WHEN has_generic THEN generic_ops ELSE specific_ops END AS ops,
       CASE WHEN has_specific THEN coalesce(specific_used_peak, specific_dense_peak)
            ELSE coalesce(generic_used_peak, generic_dense_peak) END AS peak_ops_per_cycle
FROM s;

-- A launch's occupancy limiter, as the occupancy query and ncu-summary name it: the
-- smallest of its per-SM block limits (ties joined by ', ' in ncu's order blocks, registers,
-- shared_mem, warps; then barriers). A limit the report lacks (NULL) does not bind: the
-- smallest of those it has (least skips NULLs), NULL when it has none. At 100 % theoretical
-- occupancy no limit holds the SM below its maximum warps (the smallest limits only tie at
-- it): 'none', as ncu, whose TheoreticalOccupancy rule names limiters only below 100 %.
CREATE OR REPLACE MACRO ncu_occupancy_limiter(blocks, registers, shared_mem, warps, barriers, theoretical_pct) AS
    CASE WHEN theoretical_pct >= 100 THEN 'none' ELSE nullif(concat_ws(', ',
        CASE WHEN blocks = least(blocks, registers, shared_mem, warps, barriers) THEN 'blocks' END,
        CASE WHEN registers = least(blocks, registers, shared_mem, warps, barriers) THEN 'registers' END,
        CASE WHEN shared_mem = least(blocks, registers, shared_mem, warps, barriers) THEN 'shared_mem' END,
        CASE WHEN warps = least(blocks, registers, shared_mem, warps, barriers) THEN 'warps' END,
        CASE WHEN barriers = least(blocks, registers, shared_mem, warps, barriers) THEN 'barriers' END
    ), '') END;

-- The occupancy calculator's rules (cuda_occupancy.h), ncu_occupancy's what-if: the most
-- registers per thread at which an SM holds n blocks of w warps (registers come per warp in units
-- of 256, 8 per thread, from each of its `parts` sub-partitions; at most `cap`), NULL where an
-- input is (least() would skip it and give the cap); the blocks it holds at r registers per
-- thread; the most shared memory per block (its driver-reserved part taken off) at which it
-- holds n blocks of a carveout of smem bytes, allocated in units of `unit` bytes; and what a block
-- of s bytes takes, allocated so.
CREATE OR REPLACE MACRO occupancy_registers_for(n, w, regs_per_sm, parts, cap) AS
    CASE WHEN n IS NOT NULL AND regs_per_sm IS NOT NULL AND parts IS NOT NULL AND cap IS NOT NULL
         THEN least(cap, 8 * floor(floor(regs_per_sm / parts / ceil(n * w / parts)) / 256)) END;
CREATE OR REPLACE MACRO occupancy_blocks_at_registers(r, w, regs_per_sm, parts) AS
    CASE WHEN r > 0 THEN floor(floor(regs_per_sm / parts / (256 * ceil(r / 8))) * parts / w) END;
CREATE OR REPLACE MACRO occupancy_shared_mem_for(n, smem, unit, driver) AS
    unit * floor(smem / n / unit) - driver;
CREATE OR REPLACE MACRO occupancy_shared_mem_alloc(s, unit, driver) AS
    unit * ceil((s + driver) / unit);

-- A launch's FLOP/s, or its ceiling, in one precision as query roofline names them (fp64, fp32,
-- fp16, tensor_bf16, tensor_fp16, tensor_tf32, tensor_fp8, tensor_fp64), from ncu_roofline's
-- columns of each; NULL for another name, and for a tensor one where the report has no tensor
-- counters (tensor_srcs NULL: the rate unknown, not 0).
CREATE OR REPLACE MACRO ncu_in_precision(prec, tensor_srcs, fp64, fp32, fp16, bf16, tfp16, tf32, fp8, tfp64) AS
    CASE prec WHEN 'fp64' THEN fp64 WHEN 'fp32' THEN fp32 WHEN 'fp16' THEN fp16
         ELSE CASE WHEN tensor_srcs IS NOT NULL THEN CASE prec WHEN 'tensor_bf16' THEN bf16
              WHEN 'tensor_fp16' THEN tfp16 WHEN 'tensor_tf32' THEN tf32 WHEN 'tensor_fp8' THEN fp8
              WHEN 'tensor_fp64' THEN tfp64 END END END;

-- The precision of most achieved FLOP/s, from each one's FLOP/s in the order fp64, fp32, fp16,
-- tensor_bf16, tensor_fp16, tensor_tf32, tensor_fp8, tensor_fp64 (ties to the first; NULLs
-- skipped); NULL where none is above 0. (A list, not a subquery: a view with a correlated
-- subquery keeps DuckDB from pushing a run filter down to ncu_metrics.)
CREATE OR REPLACE MACRO ncu_top_precision(rates) AS
    CASE WHEN list_max(rates) > 0
         THEN ['fp64', 'fp32', 'fp16', 'tensor_bf16', 'tensor_fp16', 'tensor_tf32', 'tensor_fp8',
               'tensor_fp64'][list_position(rates, list_max(rates))] END;

-- A memory level's roof in a hierarchical roofline (ncu's Hierarchical*RooflineChart) at a
-- launch's arithmetic intensity there: min(peak FLOP/s, FLOP/s / bytes/s x the level's peak
-- bytes/s); the compute ceiling where the level moved no byte; NULL where an input is missing
-- (least() would skip it, and read as the ceiling).
CREATE OR REPLACE MACRO ncu_level_roof(flops, peak_flops, bytes, peak_bytes) AS
    CASE WHEN flops IS NULL OR peak_flops IS NULL OR bytes IS NULL OR peak_bytes IS NULL THEN NULL
         WHEN bytes = 0 THEN peak_flops ELSE least(peak_flops, flops / bytes * peak_bytes) END;

-- The level whose roof (ncu_level_roof) is lowest, which bounds the launch: L1, L2 or DRAM
-- (ties to the outer level), compute where each is the compute ceiling; no_fp_work; NULL where
-- a level's roof is unknown.
CREATE OR REPLACE MACRO ncu_level_limiter(flops, peak_flops, roof_l1, roof_l2, roof_dram) AS
    CASE WHEN flops = 0 THEN 'no_fp_work'
         WHEN roof_l1 IS NULL OR roof_l2 IS NULL OR roof_dram IS NULL THEN NULL
         WHEN least(roof_l1, roof_l2, roof_dram) >= peak_flops THEN 'compute'
         WHEN roof_dram <= least(roof_l1, roof_l2) THEN 'DRAM'
         WHEN roof_l2 <= roof_l1 THEN 'L2'
         ELSE 'L1' END;

-- Roofline per launch, with exactly the formulas of Nsight Compute's roofline sections:
--   achieved FP32 FLOP/s = (fadd + fmul + 2 ffma).sum.per_cycle_elapsed x smsp__cycles_elapsed.avg.per_second
--   achieved FP64 FLOP/s = (dadd + dmul + 2 dfma) x smsp clock;  FP16 = (2 hadd + 2 hmul + 4 hfma) x smsp clock
--   peak FP32/FP64 = 2 x {f,d}fma .sum.peak_sustained x sm__cycles_elapsed.avg.per_second; FP16 = 4 x hfma peak x sm clock
--   tensor ops/s = sm__ops_path_tensor_<path>.sum.per_cycle_elapsed x sm clock; peak = <path>.sum.peak_sustained x sm clock
--   DRAM bytes/s = dram__bytes.sum.per_second; peak = dram__bytes.sum.peak_sustained x dram__cycles_elapsed.avg.per_second
--   L2 bytes/s = 32 x lts__lts2xbar_cycles_active.sum.per_second; peak = 32 x .peak_sustained x lts__cycles_elapsed.avg.per_second
--   L1 bytes/s = 128 x l1tex__lsu_writeback_active_mem_lgds (CC >= 9.0; _mem_lg 7.5-8.9).sum.per_second;
--               peak = 128 x .peak_sustained x l1tex__cycles_elapsed.avg.per_second
-- Each at the launch's own measured clocks. One point per launch: FLOP/s is all FP work
-- (FP64 + FP32 + FP16 + tensor floating-point), the ceiling is that of the precision with
-- the most achieved FLOP/s; bound = memory when AI(DRAM) is left of that ceiling's ridge.
CREATE OR REPLACE VIEW ncu_roofline AS
WITH t AS (
    SELECT run_id, kernel_id,
           count(*) AS tensor_srcs,
           max(ops_per_cycle) FILTER (WHERE src = 'bf16') AS bf16_pc, max(peak_ops_per_cycle) FILTER (WHERE src = 'bf16') AS bf16_peak,
           max(ops_per_cycle) FILTER (WHERE src = 'fp16') AS fp16_pc, max(peak_ops_per_cycle) FILTER (WHERE src = 'fp16') AS fp16_peak,
           max(ops_per_cycle) FILTER (WHERE src = 'tf32') AS tf32_pc, max(peak_ops_per_cycle) FILTER (WHERE src = 'tf32') AS tf32_peak,
           max(ops_per_cycle) FILTER (WHERE src = 'fp8') AS fp8_pc, max(peak_ops_per_cycle) FILTER (WHERE src = 'fp8') AS fp8_peak,
           max(ops_per_cycle) FILTER (WHERE src = 'fp64') AS tfp64_pc, max(peak_ops_per_cycle) FILTER (WHERE src = 'fp64') AS tfp64_peak,
           max(ops_per_cycle) FILTER (WHERE src = 'int8') AS int8_pc, max(peak_ops_per_cycle) FILTER (WHERE src = 'int8') AS int8_peak,
           sum(ops) FILTER (WHERE src IN ('bf16', 'fp16', 'tf32', 'fp8', 'fp64')) AS tensor_ops
    FROM ncu_tensor_by_src GROUP BY ALL
), b AS (
    SELECT m.*,
           t.tensor_srcs, t.tensor_ops,
           (fadd_per_cycle + fmul_per_cycle + 2 * ffma_per_cycle) * smsp_hz AS fp32_flops_per_s,
           (dadd_per_cycle + dmul_per_cycle + 2 * dfma_per_cycle) * smsp_hz AS fp64_flops_per_s,
           (2 * hadd_per_cycle + 2 * hmul_per_cycle + 4 * hfma_per_cycle) * smsp_hz AS fp16_flops_per_s,
           coalesce(t.bf16_pc, 0) * sm_hz AS tensor_bf16_flops_per_s,
           coalesce(t.fp16_pc, 0) * sm_hz AS tensor_fp16_flops_per_s,
           coalesce(t.tf32_pc, 0) * sm_hz AS tensor_tf32_flops_per_s,
           coalesce(t.fp8_pc, 0) * sm_hz AS tensor_fp8_flops_per_s,
           coalesce(t.tfp64_pc, 0) * sm_hz AS tensor_fp64_flops_per_s,
           coalesce(t.int8_pc, 0) * sm_hz AS tensor_int8_ops_per_s,
           2 * ffma_peak_per_cycle * sm_hz AS peak_fp32_flops_per_s,
           2 * dfma_peak_per_cycle * sm_hz AS peak_fp64_flops_per_s,
           4 * hfma_peak_per_cycle * sm_hz AS peak_fp16_flops_per_s,
           t.bf16_peak * sm_hz AS peak_tensor_bf16_flops_per_s,
           t.fp16_peak * sm_hz AS peak_tensor_fp16_flops_per_s,
           t.tf32_peak * sm_hz AS peak_tensor_tf32_flops_per_s,
           t.fp8_peak * sm_hz AS peak_tensor_fp8_flops_per_s,
           t.tfp64_peak * sm_hz AS peak_tensor_fp64_flops_per_s,
           t.int8_peak * sm_hz AS peak_tensor_int8_ops_per_s,
           dram_peak_bytes_per_cycle * dram_frequency_hz AS peak_dram_bytes_per_s,
           32 * l2_wb_cycles_per_s AS l2_bytes_per_s,
           32 * l2_wb_peak_per_cycle * lts_hz AS peak_l2_bytes_per_s,
           128 * CASE WHEN cc_num >= 9.0 THEN l1_lgds_wb_per_s WHEN cc_num >= 7.5 THEN l1_lg_wb_per_s ELSE l1_all_wb_per_s END AS l1_bytes_per_s,
           128 * CASE WHEN cc_num >= 9.0 THEN l1_lgds_wb_peak_per_cycle WHEN cc_num >= 7.5 THEN l1_lg_wb_peak_per_cycle
                      ELSE l1_all_wb_peak_per_cycle END * l1tex_hz AS peak_l1_bytes_per_s,
           CASE WHEN cc_num >= 9.0 THEN 'l1tex__lsu_writeback_active_mem_lgds.sum' WHEN cc_num >= 7.5
                THEN 'l1tex__lsu_writeback_active_mem_lg.sum' ELSE 'l1tex__lsu_writeback_active.sum' END AS l1_metric
    FROM ncu_kernel_metrics m
    LEFT JOIN t USING (run_id, kernel_id)
), c AS (
    SELECT *,
           CASE WHEN tensor_srcs IS NOT NULL THEN tensor_bf16_flops_per_s + tensor_fp16_flops_per_s + tensor_tf32_flops_per_s
                + tensor_fp8_flops_per_s + tensor_fp64_flops_per_s END AS tensor_flops_per_s,
           -- the precision with the most achieved FLOP/s, only when every precision's counters are present
           CASE WHEN fp32_flops_per_s IS NULL OR fp64_flops_per_s IS NULL OR fp16_flops_per_s IS NULL OR tensor_srcs IS NULL THEN NULL
                ELSE ncu_top_precision([fp64_flops_per_s, fp32_flops_per_s, fp16_flops_per_s, tensor_bf16_flops_per_s,
                                        tensor_fp16_flops_per_s, tensor_tf32_flops_per_s, tensor_fp8_flops_per_s,
                                        tensor_fp64_flops_per_s]) END AS precision
    FROM b
), d AS (
    SELECT *,
           fp64_flops_per_s + fp32_flops_per_s + fp16_flops_per_s + tensor_flops_per_s AS flops_per_s,
           CASE precision WHEN 'fp64' THEN peak_fp64_flops_per_s WHEN 'fp32' THEN peak_fp32_flops_per_s
                WHEN 'fp16' THEN peak_fp16_flops_per_s WHEN 'tensor_bf16' THEN peak_tensor_bf16_flops_per_s
                WHEN 'tensor_fp16' THEN peak_tensor_fp16_flops_per_s WHEN 'tensor_tf32' THEN peak_tensor_tf32_flops_per_s
                WHEN 'tensor_fp8' THEN peak_tensor_fp8_flops_per_s WHEN 'tensor_fp64' THEN peak_tensor_fp64_flops_per_s
           END AS peak_flops_per_s
    FROM c
)
SELECT *,
       flops_per_s * duration_ns * 1e-9 AS flop,
       coalesce(tensor_ops, tensor_flops_per_s * duration_ns * 1e-9) AS tensor_flop,
       coalesce(dram_bytes_sum, dram_bytes_per_s * duration_ns * 1e-9) AS dram_bytes,
       flops_per_s / nullif(dram_bytes_per_s, 0) AS ai_dram,
       flops_per_s / nullif(l2_bytes_per_s, 0) AS ai_l2,
       flops_per_s / nullif(l1_bytes_per_s, 0) AS ai_l1,
       peak_flops_per_s / nullif(peak_dram_bytes_per_s, 0) AS ridge_ai_dram,
       least(peak_flops_per_s, flops_per_s / nullif(dram_bytes_per_s, 0) * peak_dram_bytes_per_s) AS attainable_flops_per_s,
       100 * flops_per_s / nullif(least(peak_flops_per_s, flops_per_s / nullif(dram_bytes_per_s, 0) * peak_dram_bytes_per_s), 0) AS roof_pct,
       CASE WHEN precision IS NULL AND flops_per_s = 0 THEN 'no_fp_work'
            WHEN peak_flops_per_s IS NULL OR peak_dram_bytes_per_s IS NULL OR dram_bytes_per_s IS NULL THEN NULL
            WHEN flops_per_s / nullif(dram_bytes_per_s, 0) < peak_flops_per_s / peak_dram_bytes_per_s THEN 'memory'
            ELSE 'compute' END AS bound,
       nullif(concat_ws(', ',
           CASE WHEN duration_ns IS NULL THEN 'gpu__time_duration.sum' END,
           CASE WHEN sm_hz IS NULL THEN 'sm__cycles_elapsed.avg.per_second' END,
           CASE WHEN smsp_hz IS NULL THEN 'smsp__cycles_elapsed.avg.per_second' END,
           CASE WHEN fadd_per_cycle IS NULL OR fmul_per_cycle IS NULL OR ffma_per_cycle IS NULL
                THEN 'smsp__sass_thread_inst_executed_op_{fadd,fmul,ffma}_pred_on.sum.per_cycle_elapsed' END,
           CASE WHEN dadd_per_cycle IS NULL OR dmul_per_cycle IS NULL OR dfma_per_cycle IS NULL
                THEN 'smsp__sass_thread_inst_executed_op_{dadd,dmul,dfma}_pred_on.sum.per_cycle_elapsed' END,
           CASE WHEN hadd_per_cycle IS NULL OR hmul_per_cycle IS NULL OR hfma_per_cycle IS NULL
                THEN 'smsp__sass_thread_inst_executed_op_{hadd,hmul,hfma}_pred_on.sum.per_cycle_elapsed' END,
           CASE WHEN ffma_peak_per_cycle IS NULL THEN 'sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained' END,
           CASE WHEN dfma_peak_per_cycle IS NULL THEN 'sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained' END,
           CASE WHEN hfma_peak_per_cycle IS NULL THEN 'sm__sass_thread_inst_executed_op_hfma_pred_on.sum.peak_sustained' END,
           CASE WHEN tensor_srcs IS NULL THEN 'sm__ops_path_tensor_*.sum.{per_cycle_elapsed,peak_sustained}' END,
           CASE WHEN dram_bytes_per_s IS NULL THEN 'dram__bytes.sum.per_second' END,
           CASE WHEN dram_peak_bytes_per_cycle IS NULL THEN 'dram__bytes.sum.peak_sustained' END,
           CASE WHEN dram_frequency_hz IS NULL THEN 'dram__cycles_elapsed.avg.per_second' END,
           CASE WHEN l2_wb_cycles_per_s IS NULL OR l2_wb_peak_per_cycle IS NULL
                THEN 'lts__lts2xbar_cycles_active.sum.{per_second,peak_sustained}' END,
           CASE WHEN lts_hz IS NULL THEN 'lts__cycles_elapsed.avg.per_second' END,
           CASE WHEN l1_bytes_per_s IS NULL OR peak_l1_bytes_per_s IS NULL THEN l1_metric || '.{per_second,peak_sustained}' END,
           CASE WHEN l1tex_hz IS NULL THEN 'l1tex__cycles_elapsed.avg.per_second' END
       ), '') AS missing_metrics
FROM d;

-- ncu_roofline's rows of a run (NULL: of every run), each with its hierarchical roofline (ncu's
-- SpeedOfLight_Hierarchical{Single,Half,Double,Tensor}RooflineChart) in one precision: the one
-- asked (a name ncu_in_precision knows, any case), else the launch's dominant one (ncu_roofline's
-- precision; where the report lacks some precision's counters, which leaves that NULL, the one
-- of most FLOP/s of those it has). level_precision, its FLOP/s and ceiling there, the arithmetic
-- intensity at L1, L2 and DRAM, each level's roof % (ncu_level_roof), the level that bounds it
-- (level_limiter: ncu_level_limiter) and level_roof_pct against that lowest roof. A launch without FP
-- work and without a precision has FLOP/s 0 (no_fp_work). The view is read once for both.
CREATE OR REPLACE MACRO ncu_hierarchical(run, asked) AS TABLE
WITH v AS (  -- each precision's FLOP/s, in ncu_top_precision's order (a tensor one unknown
            -- where the report has no tensor counters)
    SELECT r.*,
           [fp64_flops_per_s, fp32_flops_per_s, fp16_flops_per_s,
            CASE WHEN tensor_srcs IS NOT NULL THEN tensor_bf16_flops_per_s END,
            CASE WHEN tensor_srcs IS NOT NULL THEN tensor_fp16_flops_per_s END,
            CASE WHEN tensor_srcs IS NOT NULL THEN tensor_tf32_flops_per_s END,
            CASE WHEN tensor_srcs IS NOT NULL THEN tensor_fp8_flops_per_s END,
            CASE WHEN tensor_srcs IS NOT NULL THEN tensor_fp64_flops_per_s END] AS _rates
    FROM ncu_roofline r
    WHERE run IS NULL OR r.run_id = run
), p AS (
    SELECT v.* EXCLUDE (_rates),
           coalesce(lower(asked), precision, ncu_top_precision(_rates)) AS level_precision
    FROM v
), pf AS (
    SELECT p.*,
           coalesce(ncu_in_precision(level_precision, tensor_srcs, fp64_flops_per_s, fp32_flops_per_s,
                                     fp16_flops_per_s, tensor_bf16_flops_per_s, tensor_fp16_flops_per_s,
                                     tensor_tf32_flops_per_s, tensor_fp8_flops_per_s, tensor_fp64_flops_per_s),
                    CASE WHEN level_precision IS NULL AND flops_per_s = 0 THEN 0 END) AS level_flops_per_s,
           ncu_in_precision(level_precision, tensor_srcs, peak_fp64_flops_per_s, peak_fp32_flops_per_s,
                            peak_fp16_flops_per_s, peak_tensor_bf16_flops_per_s, peak_tensor_fp16_flops_per_s,
                            peak_tensor_tf32_flops_per_s, peak_tensor_fp8_flops_per_s, peak_tensor_fp64_flops_per_s)
               AS level_peak_flops_per_s
    FROM p
), roofs AS (
    SELECT pf.*,
           ncu_level_roof(level_flops_per_s, level_peak_flops_per_s, l1_bytes_per_s, peak_l1_bytes_per_s) AS roof1,
           ncu_level_roof(level_flops_per_s, level_peak_flops_per_s, l2_bytes_per_s, peak_l2_bytes_per_s) AS roof2,
           ncu_level_roof(level_flops_per_s, level_peak_flops_per_s, dram_bytes_per_s, peak_dram_bytes_per_s) AS roofd
    FROM pf
)
SELECT roofs.* EXCLUDE (roof1, roof2, roofd),
       level_flops_per_s / nullif(l1_bytes_per_s, 0) AS level_ai_l1,
       level_flops_per_s / nullif(l2_bytes_per_s, 0) AS level_ai_l2,
       level_flops_per_s / nullif(dram_bytes_per_s, 0) AS level_ai_dram,
       100 * level_flops_per_s / nullif(roof1, 0) AS level_l1_roof_pct,
       100 * level_flops_per_s / nullif(roof2, 0) AS level_l2_roof_pct,
       100 * level_flops_per_s / nullif(roofd, 0) AS level_dram_roof_pct,
       ncu_level_limiter(level_flops_per_s, level_peak_flops_per_s, roof1, roof2, roofd) AS level_limiter,
       CASE WHEN roof1 IS NOT NULL AND roof2 IS NOT NULL AND roofd IS NOT NULL
            THEN 100 * level_flops_per_s / nullif(least(roof1, roof2, roofd), 0) END AS level_roof_pct
FROM roofs;

-- Occupancy per kernel launch of a run (NULL: of every run), as ncu's Occupancy and Launch
-- Statistics sections print it, with the limit that binds and what would raise it: the columns
-- of query occupancy (whose header says what each holds), and nvtx_path. Ranges and whole graphs
-- run several kernels and have no launch configuration of their own: not here. The what-if
-- follows NVIDIA's occupancy calculator (cuda_occupancy.h; the occupancy_* macros above), for
-- one block more per SM than the launch's blocks_per_sm, and for each block size of whole warps
-- up to the device's largest (best_block_*).
CREATE OR REPLACE MACRO ncu_occupancy(run) AS TABLE
WITH m AS (
    SELECT * FROM ncu_kernel_metrics WHERE (run IS NULL OR run_id = run) AND workload = 'kernel'
), dev AS (  -- the SM's resources the calculator divides
    SELECT run_id, kernel_id,
           max(value) FILTER (WHERE metric = 'device__attribute_max_registers_per_multiprocessor') AS regs_per_sm,
           max(value) FILTER (WHERE metric = 'device__attribute_max_registers_per_thread') AS regs_per_thread_cap,
           max(value) FILTER (WHERE metric = 'device__attribute_max_warps_per_multiprocessor') AS warps_per_sm,
           max(value) FILTER (WHERE metric = 'device__attribute_max_warps_per_scheduler') AS warps_per_scheduler,
           max(value) FILTER (WHERE metric = 'device__attribute_max_shared_memory_per_multiprocessor') AS smem_per_sm,
           max(value) FILTER (WHERE metric = 'device__attribute_max_threads_per_block') AS threads_per_block_cap
    FROM ncu_metrics
    WHERE metric IN ('device__attribute_max_registers_per_multiprocessor', 'device__attribute_max_registers_per_thread',
                     'device__attribute_max_warps_per_multiprocessor', 'device__attribute_max_warps_per_scheduler',
                     'device__attribute_max_shared_memory_per_multiprocessor', 'device__attribute_max_threads_per_block')
      AND (run IS NULL OR run_id = run)
    GROUP BY run_id, kernel_id
), w AS (
    SELECT m.*, dev.regs_per_sm, dev.regs_per_thread_cap, dev.warps_per_sm, dev.warps_per_scheduler, dev.smem_per_sm,
           dev.threads_per_block_cap,
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
           blocks + 1 <= blocks_cap AND theoretical_occupancy_pct < 100 AS reachable,
           -- (the blocks the largest carveout holds of the launch's own shared memory: best_block_*)
           CASE WHEN smem + shared_mem_driver_bytes > 0
                THEN floor(smem_per_sm / occupancy_shared_mem_alloc(smem, smem_unit, shared_mem_driver_bytes))
           END AS smem_blocks
    FROM w
), wn AS (  -- the blocks per SM once registers and shared memory are within their next_* (registers
            -- come in steps of 8 per thread: one step down may fit several blocks more), and the
            -- carveout those blocks' shared memory takes
    SELECT wf.*,
           least(registers_per_thread, regs_next) AS regs_then,
           occupancy_shared_mem_alloc(least(smem, smem_next), smem_unit, shared_mem_driver_bytes) AS alloc_then
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
), ws AS (  -- the warps an SM holds at each block size of n = 1, 2, ... whole warps, registers per thread
            -- and shared memory per block as they are (ncu's "Impact of Varying Block Size" chart)
    SELECT wk.*,
           CASE WHEN coalesce(registers_per_thread IS NOT NULL AND warps_per_block IS NOT NULL AND warps_per_sm IS NOT NULL
                              AND regs_per_sm IS NOT NULL AND parts IS NOT NULL AND smem IS NOT NULL
                              AND shared_mem_driver_bytes IS NOT NULL AND smem_per_sm IS NOT NULL
                              AND block_limit_blocks IS NOT NULL AND blocks IS NOT NULL, false)
                THEN list_transform(range(1, CAST(floor(threads_per_block_cap / 32) AS BIGINT) + 1), lambda n:
                         n * least(block_limit_blocks, block_limit_barriers, floor(warps_per_sm / n),
                                   occupancy_blocks_at_registers(registers_per_thread, n, regs_per_sm, parts),
                                   smem_blocks))
           END AS warps_at
    FROM wk
), best AS (  -- the most warps, at the block size nearest the launch's own in whole warps (of two as
              -- near, the larger)
    SELECT ws.*, list_max(warps_at) AS best_warps,
           -list_min(list_transform(list_filter(range(1, len(warps_at) + 1), lambda n: warps_at[n] = list_max(warps_at)),
                                    lambda n: {'far': abs(n - warps_per_block), 'larger': -n})).larger
               AS best_warps_per_block
    FROM ws
)
SELECT run_id, kernel_id, name, nvtx_path, nvtx_range,
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
       CASE WHEN best_warps_per_block = warps_per_block THEN block_size::BIGINT
            ELSE 32 * best_warps_per_block END AS best_block_size,
       100 * best_warps / warps_per_sm AS best_block_occupancy_pct,
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
           CASE WHEN threads_per_block_cap IS NULL THEN 'device__attribute_max_threads_per_block' END,
           CASE WHEN shared_mem_config_bytes IS NULL THEN 'launch__shared_mem_config_size' END
       ), '') AS missing_metrics
FROM best;
