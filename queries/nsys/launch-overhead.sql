-- Launch latency per kernel: from the start of the launching API call to the kernel's
-- start on the GPU (graph-launched kernels: from the cudaGraphLaunch call), with its
-- distribution, the API call's own duration, and the queue time after the call returns.
-- @param run    TEXT     run id or name (default: latest run)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @column name             kernel name (demangled)
-- @column launches         launches matched to their API call
-- @column api_name         launching API (most common)
-- @column api_med_ns       median duration of the launch call, ns
-- @column latency_min_ns   shortest call-start to kernel-start, ns
-- @column latency_med_ns   median call-start to kernel-start, ns
-- @column latency_p90_ns   90th percentile, ns
-- @column latency_p99_ns   99th percentile, ns
-- @column latency_max_ns   longest, ns
-- @column queue_med_ns     median call-end to kernel-start where positive, ns
-- @column total_latency_ns summed call-start to kernel-start, ns
-- @requires kernels
WITH l AS (
    SELECT name_id, api_name_id, api_end_ns - api_start_ns AS api_ns, start_ns - api_start_ns AS latency_ns,
           CASE WHEN start_ns > api_end_ns THEN start_ns - api_end_ns END AS queue_ns
    FROM _kernels
    WHERE run_id = $run AND api_start_ns IS NOT NULL
), s AS (
    -- one quantile state gives the median, p90 and p99 of the latency
    SELECT name_id, count(*) AS launches, mode(api_name_id) AS api_name_id, median(api_ns) AS api_med_ns,
           min(latency_ns) AS latency_min_ns, quantile_cont(latency_ns, [0.5, 0.9, 0.99]) AS q,
           max(latency_ns) AS latency_max_ns, median(queue_ns) AS queue_med_ns,
           sum(latency_ns)::BIGINT AS total_latency_ns
    FROM l
    GROUP BY name_id
)
SELECT n.value AS name, s.launches, a.value AS api_name, s.api_med_ns, s.latency_min_ns, s.q[1] AS latency_med_ns,
       s.q[2] AS latency_p90_ns, s.q[3] AS latency_p99_ns, s.latency_max_ns, s.queue_med_ns, s.total_latency_ns
FROM s LEFT JOIN _strings n ON n.string_id = s.name_id LEFT JOIN _strings a ON a.string_id = s.api_name_id
ORDER BY total_latency_ns DESC, name
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
