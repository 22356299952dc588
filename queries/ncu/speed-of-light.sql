-- GPU Speed Of Light per launch: the numbers of ncu's "GPU Speed Of Light Throughput"
-- section (ncu --page details), in base units. Throughputs are % of peak sustained.
-- missing_metrics names the section metrics the report lacks (their columns are NULL); a
-- run with none of them (profiled without --section SpeedOfLight or --set basic/full: its
-- launches' durations alone, or with the roofline section's DRAM frequency) is an error.
-- A range or a whole graph gets one row, over all the kernels it ran.
-- @param run     TEXT     run id or name, or 'all' (default: latest run)
-- @param kernel  TEXT     only launches whose kernel name contains this text, case-insensitive (default: null)
-- @param limit   INTEGER  rows to return; 0 = all (default: 0)
-- @column run_id                 run the launch belongs to
-- @column kernel_id              ncu's ID of the launch in its report
-- @column name                   kernel name (demangled)
-- @column nvtx_range             innermost NVTX push/pop range
-- @column duration_ns            Duration (gpu__time_duration.sum), ns
-- @column elapsed_cycles         Elapsed Cycles (gpc__cycles_elapsed.max), cycles
-- @column sm_active_cycles       SM Active Cycles (sm__cycles_active.avg), cycles
-- @column sm_frequency_hz        SM Frequency (gpc__cycles_elapsed.avg.per_second), Hz
-- @column dram_frequency_hz      DRAM Frequency (dram__cycles_elapsed.avg.per_second), Hz
-- @column sm_throughput_pct      Compute (SM) Throughput (sm__throughput), % of peak
-- @column memory_throughput_pct  Memory Throughput (gpu__compute_memory_throughput), % of peak
-- @column dram_throughput_pct    DRAM Throughput (gpu__dram_throughput), % of peak
-- @column l1_throughput_pct      L1/TEX Cache Throughput (l1tex__throughput, active), % of peak
-- @column l2_throughput_pct      L2 Cache Throughput (lts__throughput), % of peak
-- @column missing_metrics        section metrics not in the report, comma-separated (NULL = complete)
-- @display kernel_id, duration_ns, sm_throughput_pct, memory_throughput_pct, dram_throughput_pct, l1_throughput_pct, l2_throughput_pct, name
-- @requires ncu_kernels, ncu_metrics
WITH m AS MATERIALIZED (
    SELECT * FROM ncu_kernel_metrics
    WHERE ($run IS NULL OR run_id = $run) AND ($kernel IS NULL OR contains(lower(name), lower($kernel)))
      AND ncu_kernel_asked('speed-of-light', $run, $kernel)
), checked AS (  -- read first: the error is raised before any row
    -- (the duration and the DRAM frequency do not count: every report has the one, the roofline's section the other)
    SELECT CASE WHEN count(*) = 0 OR count(*) FILTER (WHERE coalesce(elapsed_cycles, sm_active_cycles, sm_frequency_hz,
                     sm_throughput_pct, memory_throughput_pct, dram_throughput_pct, l1_throughput_pct,
                     l2_throughput_pct) IS NOT NULL) > 0 THEN true
                ELSE error(ncu_lacks('speed-of-light', $run, 'metric of the GPU Speed Of Light Throughput section')
                           || '; profile with ncu --section SpeedOfLight (or --set basic or full)') END AS ok
    FROM m
)
SELECT run_id, kernel_id, name, nvtx_range, duration_ns, elapsed_cycles, sm_active_cycles,
       sm_frequency_hz, dram_frequency_hz, sm_throughput_pct, memory_throughput_pct,
       dram_throughput_pct, l1_throughput_pct, l2_throughput_pct,
       nullif(concat_ws(', ',
           CASE WHEN duration_ns IS NULL THEN 'gpu__time_duration.sum' END,
           CASE WHEN elapsed_cycles IS NULL THEN 'gpc__cycles_elapsed.max' END,
           CASE WHEN sm_active_cycles IS NULL THEN 'sm__cycles_active.avg' END,
           CASE WHEN sm_frequency_hz IS NULL THEN 'gpc__cycles_elapsed.avg.per_second' END,
           CASE WHEN dram_frequency_hz IS NULL THEN 'dram__cycles_elapsed.avg.per_second' END,
           CASE WHEN sm_throughput_pct IS NULL THEN 'sm__throughput.avg.pct_of_peak_sustained_elapsed' END,
           CASE WHEN memory_throughput_pct IS NULL THEN 'gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed' END,
           CASE WHEN dram_throughput_pct IS NULL THEN 'gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed' END,
           CASE WHEN l1_throughput_pct IS NULL THEN 'l1tex__throughput.avg.pct_of_peak_sustained_active' END,
           CASE WHEN l2_throughput_pct IS NULL THEN 'lts__throughput.avg.pct_of_peak_sustained_elapsed' END
       ), '') AS missing_metrics
FROM checked JOIN m ON checked.ok
ORDER BY run_id, kernel_id
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
