-- Roofline per launch with the formulas of Nsight Compute's roofline sections
-- (SpeedOfLight_RooflineChart, SpeedOfLight_Hierarchical{Single,Half,Double,Tensor}RooflineChart):
-- achieved FLOP/s per precision from the .per_cycle_elapsed rates times the launch's own
-- measured clock, bytes/s at DRAM, L2 (lts2xbar x 32) and L1 (lsu writeback x 128), ceilings
-- from .peak_sustained times the same clocks. Tensor ceilings are the dense op-specific
-- paths (on sm_90 the wgmma ..._op_hgmma_..._sparsity_off), or the paths the launch used.
-- flops_per_s sums all floating-point work; precision is the one with the most FLOP/s and
-- its ceiling gives peak_flops_per_s, attainable = min(peak, ai_dram x DRAM peak), bound =
-- memory left of the ridge. Columns whose inputs the report lacks are NULL and
-- missing_metrics names those inputs (e.g. a --section SpeedOfLight_RooflineChart report
-- has FP32/FP64 and DRAM only: no FP16, tensor, L2 or L1 counters); a run with no FLOP
-- rate or no byte rate at all is an error naming what it lacks, not rows of blanks: ncu
-- --metrics without them, or ncu's details CSV page, which prints no FLOP counter (its
-- roofline sections are charts; the .ncu-rep and the raw page have them). A range or a whole graph gets
-- one point, its work over its elapsed time (ncu's roofline of a range).
-- @param run     TEXT     run id or name, or 'all' (default: latest run)
-- @param kernel  TEXT     only launches whose kernel name contains this text, case-insensitive (default: null)
-- @param limit   INTEGER  rows to return; 0 = all (default: 0)
-- @column run_id                        run the launch belongs to
-- @column kernel_id                     ncu's ID of the launch in its report
-- @column name                          kernel name (demangled)
-- @column nvtx_range                    innermost NVTX push/pop range
-- @column kernel_class                  class from the name: gemm, attention, softmax, norm, reduction, elementwise, copy, other
-- @column duration_ns                   gpu__time_duration.sum, ns
-- @column sm_clock_hz                   measured SM clock (sm__cycles_elapsed.avg.per_second), Hz
-- @column dram_clock_hz                 measured DRAM clock (dram__cycles_elapsed.avg.per_second), Hz
-- @column fp64_flops_per_s              FP64 (DADD + DMUL + 2 DFMA), FLOP/s
-- @column fp32_flops_per_s              FP32 (FADD + FMUL + 2 FFMA), FLOP/s
-- @column fp16_flops_per_s              FP16 (2 HADD + 2 HMUL + 4 HFMA), FLOP/s
-- @column tensor_bf16_flops_per_s       tensor cores, bf16 sources, FLOP/s
-- @column tensor_fp16_flops_per_s       tensor cores, fp16 sources, FLOP/s
-- @column tensor_tf32_flops_per_s       tensor cores, tf32 sources, FLOP/s
-- @column tensor_fp8_flops_per_s        tensor cores, fp8 sources, FLOP/s
-- @column tensor_fp64_flops_per_s       tensor cores, fp64 sources (DMMA), FLOP/s
-- @column tensor_int8_ops_per_s         tensor cores, int8 sources, OP/s (not in flops_per_s)
-- @column tensor_flops_per_s            tensor cores, all floating-point sources, FLOP/s
-- @column flops_per_s                   all floating-point work, FLOP/s
-- @column flop                          all floating-point work, FLOP (flops_per_s x duration)
-- @column tensor_flop                   tensor floating-point operations (exact .sum counters when the report has them)
-- @column dram_bytes                    DRAM bytes (dram__bytes.sum, else rate x duration)
-- @column dram_bytes_per_s              DRAM bandwidth (dram__bytes.sum.per_second), byte/s
-- @column l2_bytes_per_s                L2 bandwidth (32 x lts__lts2xbar_cycles_active.sum.per_second), byte/s
-- @column l1_bytes_per_s                L1 bandwidth (128 x l1tex__lsu_writeback_active_mem_lgds/lg .sum.per_second), byte/s
-- @column ai_dram                       arithmetic intensity at DRAM, FLOP/byte
-- @column ai_l2                         arithmetic intensity at L2, FLOP/byte
-- @column ai_l1                         arithmetic intensity at L1, FLOP/byte
-- @column precision                     precision with the most FLOP/s: fp64, fp32, fp16, tensor_bf16, tensor_fp16, tensor_tf32, tensor_fp8, tensor_fp64
-- @column peak_flops_per_s              ceiling of that precision at this launch's SM clock, FLOP/s
-- @column peak_fp64_flops_per_s         FP64 ceiling (2 x DFMA peak x SM clock), FLOP/s
-- @column peak_fp32_flops_per_s         FP32 ceiling (2 x FFMA peak x SM clock), FLOP/s
-- @column peak_fp16_flops_per_s         FP16 ceiling (4 x HFMA peak x SM clock), FLOP/s
-- @column peak_tensor_bf16_flops_per_s  bf16 tensor ceiling (dense, or the used paths), FLOP/s
-- @column peak_tensor_fp16_flops_per_s  fp16 tensor ceiling, FLOP/s
-- @column peak_tensor_tf32_flops_per_s  tf32 tensor ceiling, FLOP/s
-- @column peak_tensor_fp8_flops_per_s   fp8 tensor ceiling, FLOP/s
-- @column peak_tensor_fp64_flops_per_s  fp64 tensor ceiling, FLOP/s
-- @column peak_tensor_int8_ops_per_s    int8 tensor ceiling, OP/s
-- @column peak_dram_bytes_per_s         DRAM ceiling (dram__bytes.sum.peak_sustained x DRAM clock), byte/s
-- @column peak_l2_bytes_per_s           L2 ceiling, byte/s
-- @column peak_l1_bytes_per_s           L1 ceiling, byte/s
-- @column ridge_ai_dram                 ridge point at DRAM for the precision's ceiling, FLOP/byte
-- @column attainable_flops_per_s        min(peak_flops_per_s, ai_dram x peak_dram_bytes_per_s), FLOP/s
-- @column roof_pct                      flops_per_s as % of attainable
-- @column bound                         memory | compute | no_fp_work (NULL when inputs are missing)
-- @column missing_metrics               roofline inputs not in the report, comma-separated (NULL = complete)
-- @display kernel_id, duration_ns, precision, flops_per_s, ai_dram, roof_pct, bound, name
-- @requires ncu_kernels, ncu_metrics
WITH r AS MATERIALIZED (
    SELECT * FROM ncu_roofline
    WHERE ($run IS NULL OR run_id = $run) AND ($kernel IS NULL OR contains(lower(name), lower($kernel)))
      AND ncu_kernel_asked('roofline', $run, $kernel)
), checked AS (  -- read first: the error is raised before any row
    SELECT ncu_roofline_inputs('roofline', $run, count(*),
               count(*) FILTER (WHERE coalesce(fp64_flops_per_s, fp32_flops_per_s, fp16_flops_per_s, tensor_srcs) IS NOT NULL),
               count(*) FILTER (WHERE coalesce(dram_bytes_per_s, l2_bytes_per_s, l1_bytes_per_s) IS NOT NULL),
               bool_and(coalesce(json_extract_string(u.meta, '$.ncu_export') = 'csv-details', false)),
               '--section SpeedOfLight_RooflineChart') AS ok
    FROM r LEFT JOIN runs u ON u.run_id = r.run_id
)
SELECT run_id, kernel_id, name, nvtx_range, _ncu_kernel_class(name) AS kernel_class, duration_ns,
       sm_hz AS sm_clock_hz, dram_frequency_hz AS dram_clock_hz,
       fp64_flops_per_s, fp32_flops_per_s, fp16_flops_per_s,
       CASE WHEN tensor_srcs IS NOT NULL THEN tensor_bf16_flops_per_s END AS tensor_bf16_flops_per_s,
       CASE WHEN tensor_srcs IS NOT NULL THEN tensor_fp16_flops_per_s END AS tensor_fp16_flops_per_s,
       CASE WHEN tensor_srcs IS NOT NULL THEN tensor_tf32_flops_per_s END AS tensor_tf32_flops_per_s,
       CASE WHEN tensor_srcs IS NOT NULL THEN tensor_fp8_flops_per_s END AS tensor_fp8_flops_per_s,
       CASE WHEN tensor_srcs IS NOT NULL THEN tensor_fp64_flops_per_s END AS tensor_fp64_flops_per_s,
       CASE WHEN tensor_srcs IS NOT NULL THEN tensor_int8_ops_per_s END AS tensor_int8_ops_per_s,
       tensor_flops_per_s, flops_per_s, flop, tensor_flop,
       dram_bytes, dram_bytes_per_s, l2_bytes_per_s, l1_bytes_per_s, ai_dram, ai_l2, ai_l1,
       precision, peak_flops_per_s, peak_fp64_flops_per_s, peak_fp32_flops_per_s, peak_fp16_flops_per_s,
       peak_tensor_bf16_flops_per_s, peak_tensor_fp16_flops_per_s, peak_tensor_tf32_flops_per_s,
       peak_tensor_fp8_flops_per_s, peak_tensor_fp64_flops_per_s, peak_tensor_int8_ops_per_s,
       peak_dram_bytes_per_s, peak_l2_bytes_per_s, peak_l1_bytes_per_s,
       ridge_ai_dram, attainable_flops_per_s, roof_pct, bound, missing_metrics
FROM checked JOIN r ON checked.ok
ORDER BY run_id, kernel_id
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
