-- The GPU's sampled counters (nsys profile --gpu-metrics-devices=all: clocks, SMs active, SM
-- issue, tensor pipes, warps in flight, DRAM and PCIe bandwidth, 10,000 samples a second by
-- default), per device and metric: the mean and the spread of its samples over the capture,
-- or only of those inside the ranges of one NVTX name (range=NAME: each range's GPU
-- projection, from its first GPU op's start to its last one's end, or its own span where it
-- launched none; ranges that overlap count their samples once). Clocks are in MHz (the export
-- records Hz under a name that says MHz), throughputs in % of the peak. A run captured without
-- GPU metrics is an error.
-- @param run    TEXT     run id or name (default: latest run)
-- @param range  TEXT     only samples inside the ranges of this name: :gemm, or gemm in the default domain (default: null)
-- @column device_id  CUDA device
-- @column metric     the metric, as nsys names it without its unit
-- @column unit       its unit as nsys gives it (MHz, Throughput %, Avg, Avg Warps per Cycle)
-- @column samples    samples (with a value)
-- @column mean       mean of the samples (rounded to 0.1)
-- @column min        smallest sample
-- @column median     median sample (rounded to 0.1)
-- @column p95        95th percentile (rounded to 0.1)
-- @column max        largest sample
-- @display device_id, metric, unit, samples, mean, min, median, p95, max
-- @requires gpu_metrics, gpu_metric_names, nvtx_ranges, nvtx_gpu_windows
-- @traced gpu_metrics
WITH asked AS (  -- a range name the run does not have is an error, not an empty table
    SELECT CASE WHEN $range IS NULL OR EXISTS (SELECT 1 FROM nvtx_ranges WHERE run_id = $run
                                                 AND (name = $range OR name = ':' || $range)) THEN true
                ELSE error('gpu-metrics: the run has no NVTX range named ''' || $range || ''' (`tracekit query '
                           || 'nvtx-summary` lists them; a named domain''s are domain:name)') END AS ok
), windows AS (
    SELECT start_ns AS s, end_ns AS e FROM nvtx_gpu_windows
    WHERE run_id = $run AND (name = $range OR name = ':' || $range)
), samples AS (
    SELECT g.device_id, g.metric_id, g.value
    FROM gpu_metrics g
    WHERE g.run_id = $run AND $range IS NULL
    UNION ALL
    SELECT g.device_id, g.metric_id, g.value
    FROM gpu_metrics g JOIN windows w ON g.timestamp_ns BETWEEN w.s AND w.e
    WHERE g.run_id = $run AND $range IS NOT NULL
)
SELECT device_id, metric, unit, samples, mean, min, round1(q[1]) AS median, round1(q[2]) AS p95, max
FROM (  -- (both quantiles from one sort of each metric's samples)
    SELECT s.device_id, s.metric_id, n.metric, n.unit, count(s.value) AS samples, round1(avg(s.value)) AS mean,
           min(s.value) AS min, quantile_cont(s.value, [0.5, 0.95]) AS q, max(s.value) AS max
    FROM asked, samples s
    JOIN (SELECT DISTINCT device_id, metric_id, metric, unit FROM gpu_metric_names WHERE run_id = $run) n
      ON n.device_id = s.device_id AND n.metric_id = s.metric_id
    WHERE asked.ok
    GROUP BY s.device_id, s.metric_id, n.metric, n.unit)
ORDER BY device_id, metric_id
