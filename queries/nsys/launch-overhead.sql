-- Launch latency per kernel: from the start of the launching API call to the kernel's
-- start on the GPU (graph-launched kernels: from the cudaGraphLaunch call), with its
-- distribution, the API call's own duration, and the queue time after the call returns
-- (computed at ingest into launch_latency_sum: exact quantiles over every launch).
-- @param run    TEXT     run id or name (default: latest run)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @column name             kernel name (demangled)
-- @column launches         launches matched to their API call
-- @column api_name         launching API (most common)
-- @column api_med_ns       median duration of the launch call, ns (rounded to 0.1)
-- @column latency_min_ns   shortest call-start to kernel-start, ns
-- @column latency_med_ns   median call-start to kernel-start, ns (rounded to 0.1)
-- @column latency_p90_ns   90th percentile (interpolated), ns (rounded to 0.1)
-- @column latency_p99_ns   99th percentile (interpolated), ns (rounded to 0.1)
-- @column latency_max_ns   longest, ns
-- @column queue_med_ns     median call-end to kernel-start where positive, ns (rounded to 0.1; NULL: none positive)
-- @column total_latency_ns summed call-start to kernel-start, ns
-- @display launches, api_med_ns, latency_min_ns, latency_med_ns, latency_p99_ns, latency_max_ns, queue_med_ns, name
-- @requires launch_latency_sum
-- @traced kernels, api_calls
-- @needs  kernels, api_calls
SELECT n.value AS name, s.launches, a.value AS api_name, round1(s.api_med_ns) AS api_med_ns, s.latency_min_ns,
       round1(s.latency_med_ns) AS latency_med_ns, round1(s.latency_p90_ns) AS latency_p90_ns,
       round1(s.latency_p99_ns) AS latency_p99_ns, s.latency_max_ns, round1(s.queue_med_ns) AS queue_med_ns,
       s.total_latency_ns
FROM launch_latency_sum s
LEFT JOIN _strings n ON n.string_id = s.name_id
LEFT JOIN _strings a ON a.string_id = s.api_name_id
WHERE s.run_id = $run
ORDER BY total_latency_ns DESC, name
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
