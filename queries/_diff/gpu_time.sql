-- The GPU time of each of the two runs: its kernels' summed durations (from
-- nvtx_kernel_sum, summed at ingest, kernels outside every range included) plus its
-- memory copies and memsets, ns. Diff holds back a change of a key whose total moved by
-- less than MATERIAL_PCT of the larger of the two.
-- @param base  INTEGER  base run id
-- @param new   INTEGER  new run id
-- @column run_id       the run
-- @column gpu_time_ns  summed durations of its GPU operations, ns
SELECT run_id, sum(ns)::DOUBLE AS gpu_time_ns
FROM (SELECT run_id, total_ns AS ns FROM nvtx_kernel_sum WHERE run_id IN ($base, $new)
      UNION ALL SELECT run_id, end_ns - start_ns FROM memcpy WHERE run_id IN ($base, $new)
      UNION ALL SELECT run_id, end_ns - start_ns FROM memset WHERE run_id IN ($base, $new))
GROUP BY run_id
