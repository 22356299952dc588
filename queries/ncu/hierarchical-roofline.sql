-- Hierarchical roofline per launch, as Nsight Compute's SpeedOfLight_Hierarchical{Single,Half,
-- Double,Tensor}RooflineChart sections draw it: the launch's FLOP/s in one precision at its
-- arithmetic intensity against the bytes moved at each level of the memory hierarchy (L1, L2, DRAM;
-- the byte rates of query roofline), under that level's bandwidth ceiling and the precision's
-- compute ceiling. The precision is the one asked (ncu's chart of one precision: the launches that
-- do work in it, and those without its counters, blank), else each launch's dominant one (query
-- roofline's precision, or where the report lacks some precision's counters, the one of most FLOP/s
-- of those it has; its other FP work is not counted here, where roofline's flops_per_s sums it). A
-- range or a whole graph gets one point, its work over its elapsed time, as in query roofline. Each
-- level's roof at the launch's intensity there is min(peak FLOP/s, AI x the level's peak
-- bandwidth), the ceiling where the level moved no byte; the lowest of the three bounds the launch:
-- limiter names its level, or compute where the launch is right of every level's ridge, and
-- roof_pct is FLOP/s against it. Data that stays in a cache gives a high intensity at the levels
-- beyond it: a kernel at the L2 roof but far below the DRAM roof is bound by L2 bandwidth, not
-- DRAM. Ceilings are at the launch's own measured clocks. limiter needs all three levels and the
-- ceiling: NULL where the report lacks one (missing_metrics names the counters), no_fp_work where
-- the launch does no floating-point work. A run with no FLOP rate or no byte rate at all, no launch
-- with work in the precision asked, or no counter of it, is an error.
-- @param run        TEXT     run id or name, or 'all' (default: latest run)
-- @param kernel     TEXT     only launches whose kernel name contains this text, case-insensitive (default: null)
-- @param precision  TEXT     the FLOP of this precision against its ceiling, else each launch's dominant precision's (one of: fp64, fp32, fp16, tensor_bf16, tensor_fp16, tensor_tf32, tensor_fp8, tensor_fp64) (default: null)
-- @param limit      INTEGER  rows to return; 0 = all (default: 0)
-- @column run_id                 run the launch belongs to
-- @column kernel_id              ncu's ID of the launch in its report
-- @column name                   kernel name (demangled)
-- @column nvtx_range             innermost NVTX push/pop range
-- @column duration_ns            gpu__time_duration.sum, ns
-- @column precision              the precision asked, else the launch's with the most FLOP/s (query roofline's)
-- @column flops_per_s            FLOP/s in that precision
-- @column peak_flops_per_s       that precision's ceiling at the launch's SM clock, FLOP/s
-- @column l1_bytes_per_s         L1 bandwidth (128 x l1tex__lsu_writeback_active_mem_lgds/lg .sum.per_second), byte/s
-- @column l2_bytes_per_s         L2 bandwidth (32 x lts__lts2xbar_cycles_active.sum.per_second), byte/s
-- @column dram_bytes_per_s       DRAM bandwidth (dram__bytes.sum.per_second), byte/s
-- @column peak_l1_bytes_per_s    L1 ceiling at the launch's L1 clock, byte/s
-- @column peak_l2_bytes_per_s    L2 ceiling at the launch's L2 clock, byte/s
-- @column peak_dram_bytes_per_s  DRAM ceiling at the launch's DRAM clock, byte/s
-- @column ai_l1                  arithmetic intensity at L1, FLOP/byte
-- @column ai_l2                  arithmetic intensity at L2, FLOP/byte
-- @column ai_dram                arithmetic intensity at DRAM, FLOP/byte
-- @column l1_roof_pct            flops_per_s as % of the L1 roof at ai_l1: min(peak_flops_per_s, ai_l1 x peak_l1_bytes_per_s)
-- @column l2_roof_pct            flops_per_s as % of the L2 roof at ai_l2
-- @column dram_roof_pct          flops_per_s as % of the DRAM roof at ai_dram
-- @column limiter                the lowest roof: L1, L2, DRAM, or compute (right of every level's ridge); no_fp_work; NULL when an input is missing
-- @column roof_pct               flops_per_s as % of the lowest roof (the largest of the three)
-- @column missing_metrics        inputs of these columns not in the report, comma-separated (NULL = complete)
-- @display kernel_id, duration_ns, precision, flops_per_s, ai_l1, ai_l2, ai_dram, limiter, roof_pct, name
-- @requires ncu_kernels, ncu_metrics
WITH r AS MATERIALIZED (  -- the launch in the precision asked, else its dominant one (the store's ncu_hierarchical)
    SELECT * EXCLUDE (precision, flops_per_s, peak_flops_per_s, ai_l1, ai_l2, ai_dram, roof_pct, level_precision,
                      level_flops_per_s, level_peak_flops_per_s, level_ai_l1, level_ai_l2, level_ai_dram,
                      level_l1_roof_pct, level_l2_roof_pct, level_dram_roof_pct, level_limiter, level_roof_pct),
           level_precision AS precision, level_flops_per_s AS flops_per_s, level_peak_flops_per_s AS peak_flops_per_s,
           level_ai_l1 AS ai_l1, level_ai_l2 AS ai_l2, level_ai_dram AS ai_dram, level_l1_roof_pct AS l1_roof_pct,
           level_l2_roof_pct AS l2_roof_pct, level_dram_roof_pct AS dram_roof_pct, level_limiter AS limiter,
           level_roof_pct AS roof_pct
    FROM ncu_hierarchical($run, $precision)
    WHERE ($kernel IS NULL OR contains(lower(name), lower($kernel)))
      AND ncu_kernel_asked('hierarchical-roofline', $run, $kernel)
), checked AS (  -- read first: the error is raised before any row
    SELECT ncu_roofline_inputs('hierarchical-roofline', $run, count(*),
               count(*) FILTER (WHERE coalesce(fp64_flops_per_s, fp32_flops_per_s, fp16_flops_per_s, tensor_srcs) IS NOT NULL),
               count(*) FILTER (WHERE coalesce(dram_bytes_per_s, l2_bytes_per_s, l1_bytes_per_s) IS NOT NULL),
               bool_and(coalesce(json_extract_string(u.meta, '$.ncu_export') = 'csv-details', false)),
               '--section SpeedOfLight_HierarchicalSingleRooflineChart --section SpeedOfLight_HierarchicalHalf'
               || 'RooflineChart --section SpeedOfLight_HierarchicalDoubleRooflineChart --section SpeedOfLight_'
               || 'HierarchicalTensorRooflineChart')
           -- the precision asked: an error where no launch does work in it, or where the report has
           -- no counter of it at all (not rows of blanks); launches without them, beside others, are rows
           AND CASE WHEN $precision IS NULL OR count(*) = 0 OR count(*) FILTER (WHERE flops_per_s > 0) > 0
                         OR (count(flops_per_s) > 0 AND count(flops_per_s) < count(*)) THEN true
                    WHEN count(flops_per_s) = 0
                    THEN error(ncu_lacks('hierarchical-roofline', $run, lower($precision) || ' FLOP counters (')
                               || CASE WHEN starts_with(lower($precision), 'tensor') THEN 'sm__ops_path_tensor_*'
                                       ELSE 'smsp__sass_thread_inst_executed_op_' || CASE lower($precision)
                                           WHEN 'fp64' THEN '{dadd,dmul,dfma}' WHEN 'fp32' THEN '{fadd,fmul,ffma}'
                                           ELSE '{hadd,hmul,hfma}' END || '_pred_on.sum.per_cycle_elapsed' END
                               || '); profile with ncu --section SpeedOfLight_Hierarchical'
                               || CASE lower($precision) WHEN 'fp64' THEN 'Double' WHEN 'fp32' THEN 'Single'
                                       WHEN 'fp16' THEN 'Half' ELSE 'Tensor' END || 'RooflineChart (or --set full)')
                    ELSE error('hierarchical-roofline: no launch of '
                               || CASE WHEN $run IS NULL THEN 'any run' ELSE run_label($run) END
                               || CASE WHEN $kernel IS NULL THEN '' ELSE ' named like ''' || $kernel || '''' END
                               || ' does ' || lower($precision) || ' work'
                               || coalesce(' (the precisions they do work in: ' || nullif(concat_ws(', ',
                                      CASE WHEN max(fp64_flops_per_s) > 0 THEN 'fp64' END,
                                      CASE WHEN max(fp32_flops_per_s) > 0 THEN 'fp32' END,
                                      CASE WHEN max(fp16_flops_per_s) > 0 THEN 'fp16' END,
                                      CASE WHEN max(tensor_bf16_flops_per_s) > 0 THEN 'tensor_bf16' END,
                                      CASE WHEN max(tensor_fp16_flops_per_s) > 0 THEN 'tensor_fp16' END,
                                      CASE WHEN max(tensor_tf32_flops_per_s) > 0 THEN 'tensor_tf32' END,
                                      CASE WHEN max(tensor_fp8_flops_per_s) > 0 THEN 'tensor_fp8' END,
                                      CASE WHEN max(tensor_fp64_flops_per_s) > 0 THEN 'tensor_fp64' END), '') || ')',
                                      ' (none does floating-point work the report has counters of)')
                               || '; leave precision out for each launch''s own') END AS ok
    FROM r LEFT JOIN runs u ON u.run_id = r.run_id
)
SELECT run_id, kernel_id, name, nvtx_range, duration_ns, precision, flops_per_s, peak_flops_per_s,
       l1_bytes_per_s, l2_bytes_per_s, dram_bytes_per_s, peak_l1_bytes_per_s, peak_l2_bytes_per_s,
       peak_dram_bytes_per_s, ai_l1, ai_l2, ai_dram, l1_roof_pct, l2_roof_pct, dram_roof_pct, limiter, roof_pct,
       -- (the counters of the other precisions do not bear on one precision's columns)
       nullif(array_to_string(list_filter(string_split(coalesce(missing_metrics, ''), ', '), lambda m: m <> ''
           AND ($precision IS NULL
                OR NOT ((contains(m, 'ffma') AND precision <> 'fp32') OR (contains(m, 'dfma') AND precision <> 'fp64')
                        OR (contains(m, 'hfma') AND precision <> 'fp16')
                        OR (starts_with(m, 'sm__ops_path_tensor') AND NOT starts_with(precision, 'tensor'))))), ', '),
              '') AS missing_metrics
FROM checked JOIN r ON checked.ok
WHERE $precision IS NULL OR flops_per_s > 0 OR flops_per_s IS NULL  -- (a launch without its counters: a row saying so)
ORDER BY run_id, kernel_id
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
