-- Memory Workload Analysis per launch: the numbers of ncu's "Memory Workload Analysis"
-- section (ncu --page details) in base units, with the DRAM bytes read and written (its
-- memory chart): how much traffic a kernel makes and how much of it the caches catch
-- (L1/TEX and L2 hit rates), how busy the memory units are, and local-memory spills.
-- missing_metrics names the section metrics the report lacks (their columns are NULL); a
-- report made without --section MemoryWorkloadAnalysis (or --set full) has none of them but
-- the duration, and a run with none at all is an error. A range or a whole graph gets one
-- row, over all the kernels it ran.
-- @param run     TEXT     run id or name, or 'all' (default: latest run)
-- @param kernel  TEXT     only launches whose kernel name contains this text, case-insensitive (default: null)
-- @param limit   INTEGER  rows to return; 0 = all (default: 0)
-- @column run_id                        run the launch belongs to
-- @column kernel_id                     ncu's ID of the launch in its report
-- @column name                          kernel name (demangled)
-- @column nvtx_range                    innermost NVTX push/pop range
-- @column duration_ns                   Duration (gpu__time_duration.sum), ns
-- @column dram_bytes_per_s              Memory Throughput: DRAM bytes per second (dram__bytes.sum.per_second)
-- @column dram_read_bytes               DRAM bytes read (dram__bytes_read.sum)
-- @column dram_write_bytes              DRAM bytes written (dram__bytes_write.sum)
-- @column l1_hit_rate_pct               L1/TEX Hit Rate (l1tex__t_sector_hit_rate.pct), %
-- @column l2_hit_rate_pct               L2 Hit Rate (lts__t_sector_hit_rate.pct), %
-- @column mem_busy_pct                  Mem Busy (gpu__compute_memory_access_throughput), % of peak
-- @column max_bandwidth_pct             Max Bandwidth (gpu__compute_memory_request_throughput), % of peak
-- @column mem_pipes_busy_pct            Mem Pipes Busy (sm__memory_throughput), % of peak
-- @column l2_compression_success_pct    L2 Compression Success Rate (lrc__average_ilc_input_sector_success_rate.pct), %
-- @column l2_compression_ratio_pct      L2 Compression Ratio (lrc__average_ilc_output_sector_compression_achieved_rate.pct), %
-- @column l2_compression_input_sectors  L2 Compression Input Sectors (lrc__ilc_input_sectors.sum)
-- @column l2_persisting_bytes           L2 Persisting Size (launch__persisting_l2_cache_size), bytes
-- @column local_spilling_requests       Local Memory Spilling Requests (derived__local_spilling_requests)
-- @column local_spilling_overhead_pct   Local Memory Spilling Request Overhead (derived__local_spilling_requests_pct), %
-- @column missing_metrics               section metrics not in the report, comma-separated (NULL = complete)
-- @display kernel_id, duration_ns, dram_bytes_per_s, dram_read_bytes, dram_write_bytes, l1_hit_rate_pct, l2_hit_rate_pct, mem_busy_pct, max_bandwidth_pct, local_spilling_requests, name
-- @requires ncu_kernels, ncu_metrics
WITH launches AS (
    SELECT run_id, kernel_id, name, nvtx_range
    FROM ncu_kernels
    WHERE ($run IS NULL OR run_id = $run) AND ($kernel IS NULL OR contains(lower(name), lower($kernel)))
      AND ncu_kernel_asked('memory-workload', $run, $kernel)
), section(col, metric) AS (VALUES
    ('duration_ns', 'gpu__time_duration.sum'),
    ('dram_bytes_per_s', 'dram__bytes.sum.per_second'),
    ('dram_read_bytes', 'dram__bytes_read.sum'),
    ('dram_write_bytes', 'dram__bytes_write.sum'),
    ('l1_hit_rate_pct', 'l1tex__t_sector_hit_rate.pct'),
    ('l2_hit_rate_pct', 'lts__t_sector_hit_rate.pct'),
    ('mem_busy_pct', 'gpu__compute_memory_access_throughput.avg.pct_of_peak_sustained_elapsed'),
    ('max_bandwidth_pct', 'gpu__compute_memory_request_throughput.avg.pct_of_peak_sustained_elapsed'),
    ('mem_pipes_busy_pct', 'sm__memory_throughput.avg.pct_of_peak_sustained_elapsed'),
    ('l2_compression_success_pct', 'lrc__average_ilc_input_sector_success_rate.pct'),
    ('l2_compression_ratio_pct', 'lrc__average_ilc_output_sector_compression_achieved_rate.pct'),
    ('l2_compression_input_sectors', 'lrc__ilc_input_sectors.sum'),
    ('l2_persisting_bytes', 'launch__persisting_l2_cache_size'),
    ('local_spilling_requests', 'derived__local_spilling_requests'),
    ('local_spilling_overhead_pct', 'derived__local_spilling_requests_pct')
), v AS (
    SELECT l.run_id, l.kernel_id, s.col, s.metric, m.value
    FROM launches l CROSS JOIN section s
    LEFT JOIN ncu_metrics m ON m.run_id = l.run_id AND m.kernel_id = l.kernel_id AND m.metric = s.metric
), checked AS (  -- read first: the error is raised before any row
    SELECT CASE WHEN count(*) = 0 OR count(*) FILTER (WHERE value IS NOT NULL) > 0 THEN true
                ELSE error(ncu_lacks('memory-workload', $run, 'metric of the Memory Workload Analysis section')
                           || '; profile with ncu --section MemoryWorkloadAnalysis (or --set full)') END AS ok
    FROM v
), p AS (
    SELECT run_id, kernel_id,
           max(value) FILTER (WHERE col = 'duration_ns') AS duration_ns,
           max(value) FILTER (WHERE col = 'dram_bytes_per_s') AS dram_bytes_per_s,
           max(value) FILTER (WHERE col = 'dram_read_bytes') AS dram_read_bytes,
           max(value) FILTER (WHERE col = 'dram_write_bytes') AS dram_write_bytes,
           max(value) FILTER (WHERE col = 'l1_hit_rate_pct') AS l1_hit_rate_pct,
           max(value) FILTER (WHERE col = 'l2_hit_rate_pct') AS l2_hit_rate_pct,
           max(value) FILTER (WHERE col = 'mem_busy_pct') AS mem_busy_pct,
           max(value) FILTER (WHERE col = 'max_bandwidth_pct') AS max_bandwidth_pct,
           max(value) FILTER (WHERE col = 'mem_pipes_busy_pct') AS mem_pipes_busy_pct,
           max(value) FILTER (WHERE col = 'l2_compression_success_pct') AS l2_compression_success_pct,
           max(value) FILTER (WHERE col = 'l2_compression_ratio_pct') AS l2_compression_ratio_pct,
           max(value) FILTER (WHERE col = 'l2_compression_input_sectors') AS l2_compression_input_sectors,
           max(value) FILTER (WHERE col = 'l2_persisting_bytes') AS l2_persisting_bytes,
           max(value) FILTER (WHERE col = 'local_spilling_requests') AS local_spilling_requests,
           max(value) FILTER (WHERE col = 'local_spilling_overhead_pct') AS local_spilling_overhead_pct,
           nullif(string_agg(metric, ', ' ORDER BY metric) FILTER (WHERE value IS NULL), '') AS missing_metrics
    FROM checked JOIN v ON checked.ok
    GROUP BY run_id, kernel_id
)
SELECT l.run_id, l.kernel_id, l.name, l.nvtx_range, p.duration_ns, p.dram_bytes_per_s, p.dram_read_bytes,
       p.dram_write_bytes, p.l1_hit_rate_pct, p.l2_hit_rate_pct, p.mem_busy_pct, p.max_bandwidth_pct,
       p.mem_pipes_busy_pct, p.l2_compression_success_pct, p.l2_compression_ratio_pct,
       p.l2_compression_input_sectors, p.l2_persisting_bytes, p.local_spilling_requests,
       p.local_spilling_overhead_pct, p.missing_metrics
FROM launches l JOIN p USING (run_id, kernel_id)
ORDER BY l.run_id, l.kernel_id
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
