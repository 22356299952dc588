-- Request latency over the bs x nc sweep grid, one row per (preset, tool, bs, nc) point.
-- One sweep's points (sweep=, default the latest sweep): each point is its latest run of that
-- sweep whose meta status is ok and that has timed requests (warm-up requests excluded);
-- never another sweep's run. Quantiles interpolate linearly, as numpy.
-- Runs under nsys or ncu are listed under their tool: their latencies include profiler overhead.
-- With few requests the tail quantiles lean on the slowest few (20 requests: p99 lies between
-- the two slowest): the requests column says how many there were.
-- A sweep (or the runs outside any) without such a run is an error, not an empty answer, that
-- says why (a program's sweep, --grid, times no request; its points failed).
-- @param sweep  TEXT     the sweep: its id (sweep-20261124T195459.720Z), a run of it (id or name; a run outside any sweep names the runs outside any sweep), latest (the sweep of the latest run ingested from one; where no run is, the runs outside any sweep) or all (per point, the run captured last over every run of the store, sweeps mixed: macro run_captured_us) (default: latest)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @column preset                 workload preset (small, medium, large)
-- @column tool                   profiler the run ran under (none, nsys, ncu)
-- @column bs                     batch size, users per request
-- @column nc                     candidates per user
-- @column run                    name of the point's run
-- @column requests               timed requests
-- @column median_ms              median end-to-end request latency, ms
-- @column p95_ms                 95th percentile latency, ms
-- @column p99_ms                 99th percentile latency, ms
-- @column mean_ms                mean latency, ms
-- @column min_ms                 fastest request, ms
-- @column max_ms                 slowest request, ms
-- @column peak_mem_allocated_mb  largest peak of allocated GPU memory in a timed request, MiB (2^20 bytes, as the seed's MB) (NULL on CPU)
-- @column std_ms                 sample standard deviation of the latency, ms (NULL for a point of one request)
-- @column peak_mem_reserved_mb   largest peak of GPU memory reserved by PyTorch's allocator in a timed request, MiB (2^20 bytes, as the seed's MB) (NULL on CPU)
-- @column users_per_s            users served per second by requests back to back: bs / mean latency
-- @column candidates_per_s       candidates ranked per second: bs x nc / mean latency
-- @column sm_clock_mhz           median SM clock of the GPU as the timed requests ran (read through NVML after each), MHz; NULL where the run did not record it (on CPU; captures before tracekit read it)
-- @column sm_clock_min_mhz       lowest SM clock read after a timed request, MHz
-- @column temp_max_c             highest GPU temperature read after a timed request, degrees C
-- @column slowdown               the clock slowdown reasons active in the reads, with the share of them each was in ('sw_power_cap 40%, sw_thermal 5%': the power cap, temperature or the hardware held the SM clock down); '' where none was; NULL where not recorded
-- @column model_gflop            median floating-point work of a timed request, its matrix products (capture/model.py request_flop), GFLOP; NULL where the capture did not count it (before tracekit did; a benchmark log)
-- @column model_tflops_per_s     the timed requests' work over their time back to back (summed FLOP / summed latency), TFLOP/s; NULL where not counted
-- @column attention_flop_pct     the attention's share of that work, %; NULL where not counted
-- @column attention_tflops_per_s  the timed requests' attention work over the GPU time of the kernels launched inside its hstu_attention NVTX ranges, TFLOP/s: the attention kernels' own throughput; NULL where the point did not run under nsys (tool none or ncu: no kernel traced) or did not count its work
-- @display preset, tool, bs, nc, requests, median_ms, p95_ms, p99_ms, mean_ms, peak_mem_allocated_mb
-- @requires requests, runs, sweep_runs
WITH points AS (  -- the sweep's points: per (preset, tool, bs, nc), its latest captured run (sweep_runs)
    SELECT run_id, name, preset, tool, bs, nc FROM sweep_runs
    WHERE in_sweep(params, $sweep)
    QUALIFY row_number() OVER (PARTITION BY preset, tool, bs, nc
                               ORDER BY captured_us DESC NULLS LAST, run_id DESC) = 1
), attention AS (  -- an nsys point's attention kernels: those launched inside hstu_attention ranges (the
                   -- capture range holds the timed requests alone: capture/worker.py)
    SELECT run_id, sum(total_ns) AS attention_ns FROM nvtx_path_kernel_sum
    WHERE run_id IN (SELECT run_id FROM points) AND regexp_matches(path, '(^|/)hstu_attention$')
    GROUP BY run_id
)
-- (the sums in request order: the same answer to the last bit however the rows are read,
-- a store's table or a dataset's files)
SELECT p.preset, p.tool, p.bs, p.nc, p.name AS run,
       count(*) AS requests,
       quantile_cont(q.latency_ms, 0.5) AS median_ms,
       quantile_cont(q.latency_ms, 0.95) AS p95_ms,
       quantile_cont(q.latency_ms, 0.99) AS p99_ms,
       avg(q.latency_ms ORDER BY q.request_idx) AS mean_ms,
       min(q.latency_ms) AS min_ms,
       max(q.latency_ms) AS max_ms,
       max(q.peak_mem_allocated_mb) AS peak_mem_allocated_mb,
       stddev_samp(q.latency_ms ORDER BY q.request_idx) AS std_ms,
       max(q.peak_mem_reserved_mb) AS peak_mem_reserved_mb,
       p.bs * 1000.0 / nullif(avg(q.latency_ms ORDER BY q.request_idx), 0) AS users_per_s,
       p.bs * p.nc * 1000.0 / nullif(avg(q.latency_ms ORDER BY q.request_idx), 0) AS candidates_per_s,
       any_value(g.sm_clock_mhz) AS sm_clock_mhz,
       any_value(g.sm_clock_min_mhz) AS sm_clock_min_mhz,
       any_value(g.temp_max_c) AS temp_max_c,
       any_value(g.slowdown) AS slowdown,
       quantile_cont(q.model_flop, 0.5) * 1e-9 AS model_gflop,
       sum(q.model_flop) / nullif(sum(q.latency_ms ORDER BY q.request_idx), 0) * 1e-9 AS model_tflops_per_s,
       100.0 * sum(q.attention_flop) / nullif(sum(q.model_flop), 0) AS attention_flop_pct,
       sum(q.attention_flop) / nullif(any_value(a.attention_ns), 0) * 1e-3 AS attention_tflops_per_s
FROM points p
JOIN requests q ON q.run_id = p.run_id AND q.phase = 'timed'
LEFT JOIN gpu_timed g ON g.run_id = p.run_id
LEFT JOIN attention a ON a.run_id = p.run_id
GROUP BY p.preset, p.tool, p.bs, p.nc, p.name
ORDER BY p.preset, p.tool, p.bs, p.nc
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
