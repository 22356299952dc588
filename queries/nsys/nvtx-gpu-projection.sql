-- NVTX ranges projected onto the GPU. Same numbers as `nsys stats -r nvtx_gpu_proj_sum`.
-- A GPU op (kernel, memcpy, memset) belongs to a range when the API call that launched
-- it (same correlation id, same process) lies inside the range on the range's own
-- thread; a CUDA-graph launch counts once however many kernels it runs. The projected
-- time of a range is last op end - first op start; children are not subtracted. Only
-- ranges that start and end on the same thread and launched GPU work are listed.
-- @param run    TEXT     run id or name (default: latest run)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @column range           range name, 'domain:text'
-- @column style           PushPop or StartEnd
-- @column instances       ranges of that name and style that launched GPU work
-- @column proj_total_ns   summed projected GPU time, ns
-- @column range_total_ns  summed wall time of those ranges, ns
-- @column proj_avg_ns     mean projected time, ns (rounded to 0.1)
-- @column proj_med_ns     median projected time, ns (rounded to 0.1)
-- @column proj_min_ns     shortest projected time, ns
-- @column proj_max_ns     longest projected time, ns
-- @column proj_stddev_ns  sample standard deviation of projected time, ns (rounded to 0.1)
-- @column gpu_ops         GPU ops launched inside (distinct correlation ids), summed
-- @column avg_gpu_ops     GPU ops per instance (rounded to 0.1)
-- @column avg_depth       mean nesting level (rounded to 0.1)
-- @column avg_children    mean number of child ranges that launched GPU work (rounded to 0.1)
-- @display proj_total_ns, range_total_ns, instances, proj_avg_ns, proj_med_ns, gpu_ops, style, range
-- @alias nvtx_gpu_proj_sum
-- @requires nvtx_ranges
-- @traced nvtx_ranges, kernels, memcpy, memset
SELECT name AS range, style, count(*) AS instances,
       sum(proj_dur_ns)::BIGINT AS proj_total_ns, sum(dur_ns)::BIGINT AS range_total_ns,
       round1(avg(proj_dur_ns)) AS proj_avg_ns, round1(median(proj_dur_ns)) AS proj_med_ns,
       min(proj_dur_ns) AS proj_min_ns, max(proj_dur_ns) AS proj_max_ns,
       round1(coalesce(stddev_samp(proj_dur_ns), 0)) AS proj_stddev_ns,
       sum(gpu_ops)::BIGINT AS gpu_ops, round1(avg(gpu_ops)) AS avg_gpu_ops,
       round1(avg(depth)) AS avg_depth, round1(avg(children)) AS avg_children
FROM nvtx_ranges
WHERE run_id = $run AND gpu_ops > 0 AND end_global_tid IS NULL
GROUP BY name, style
ORDER BY proj_total_ns DESC, range, style
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
