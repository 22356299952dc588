-- What the GPU's counters (nsys profile --gpu-metrics-devices=all) read inside each NVTX range
-- name, per device: the SM clock, SMs active, SM issue, tensor pipes and DRAM bandwidth, as
-- means of the samples inside the ranges of that name (each range's GPU projection, from its
-- first GPU op's start to its last one's end, or its own span where it launched none; ranges
-- of one name that overlap count their samples once). Which phase of a program ran at what
-- clock, and which kept the tensor pipes or the memory busy. A metric the GPU's metric set
-- lacks is NULL. A run captured without GPU metrics is an error.
-- @param run    TEXT     run id or name (default: latest run)
-- @param limit  INTEGER  rows to return; 0 = all (default: 50)
-- @column range              'domain:text' as nsys names it (':name' in the default domain)
-- @column device_id          CUDA device
-- @column instances          ranges of that name
-- @column window_ns          time the samples were taken over: the ranges' windows merged, ns
-- @column samples            samples of the SM clock inside them
-- @column sm_clock_mhz       mean GPC (SM) clock, MHz (rounded to 0.1)
-- @column sms_active_pct     mean of SMs Active, % (rounded to 0.1)
-- @column sm_issue_pct       mean of SM Issue, % (rounded to 0.1)
-- @column tensor_active_pct  mean of Tensor Active, % (rounded to 0.1)
-- @column dram_read_pct      mean of DRAM Read Bandwidth, % of the peak (rounded to 0.1)
-- @column dram_write_pct     mean of DRAM Write Bandwidth, % of the peak (rounded to 0.1)
-- @display range, device_id, instances, window_ns, sm_clock_mhz, sms_active_pct, sm_issue_pct, tensor_active_pct, dram_read_pct, dram_write_pct
-- @requires gpu_metrics, gpu_metric_names, nvtx_ranges, nvtx_gpu_windows
-- @traced gpu_metrics, nvtx_ranges
WITH windows AS (
    SELECT name, start_ns AS s, end_ns AS e FROM nvtx_gpu_windows WHERE run_id = $run
), names AS (
    SELECT name, count(*) AS instances FROM nvtx_ranges WHERE run_id = $run GROUP BY name
), m AS (  -- the metrics of the columns
    SELECT DISTINCT device_id, metric_id, gpu_metric_column(metric) AS col
    FROM gpu_metric_names WHERE run_id = $run
), per AS (
    SELECT w.name, g.device_id, m.col, count(g.value) AS samples, avg(g.value) AS mean
    FROM windows w
    JOIN gpu_metrics g ON g.run_id = $run AND g.timestamp_ns BETWEEN w.s AND w.e
    JOIN m ON m.device_id = g.device_id AND m.metric_id = g.metric_id AND m.col IS NOT NULL
    GROUP BY w.name, g.device_id, m.col
)
SELECT per.name AS range, per.device_id, any_value(n.instances) AS instances,
       (SELECT sum(e - s)::BIGINT FROM windows WHERE windows.name = per.name) AS window_ns,
       max(samples) FILTER (WHERE col = 'clock') AS samples,
       round1(max(mean) FILTER (WHERE col = 'clock')) AS sm_clock_mhz,
       round1(max(mean) FILTER (WHERE col = 'active')) AS sms_active_pct,
       round1(max(mean) FILTER (WHERE col = 'issue')) AS sm_issue_pct,
       round1(max(mean) FILTER (WHERE col = 'tensor')) AS tensor_active_pct,
       round1(max(mean) FILTER (WHERE col = 'read')) AS dram_read_pct,
       round1(max(mean) FILTER (WHERE col = 'write')) AS dram_write_pct
FROM per JOIN names n ON n.name = per.name
GROUP BY per.name, per.device_id
ORDER BY window_ns DESC, range, per.device_id
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
