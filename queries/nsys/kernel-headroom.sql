-- Where the GPU time of a run could go down, and by how much at most: each kernel of an nsys
-- run with its share of the kernel time, beside what an ncu run of the same workload measured
-- for the launches of that kernel (ncu=, default the latest ncu run). A kernel is found by its
-- demangled name as nsys and ncu's report print it and as ncu's CSV pages do, which drop
-- template casts and namespaces (macro kernel_match_key).
-- sol_pct is the kernel's speed of light, its busiest unit's throughput: the larger of
-- ncu's Compute (SM) and Memory Throughput, weighted by the profiled launches' durations.
-- At the same work, the kernel cannot run faster than that unit at its peak, so headroom_ns,
-- its time beyond what the unit at 100 % would take (total_ns x (1 - sol_pct/100)), bounds
-- what tuning it can save; the rows are in that order. bottleneck reads the two throughputs as
-- ncu's SOLBottleneck rule does: both under 60 % is latency (the kernel waits: occupancy,
-- dependencies, too small a grid), else the busier of compute and memory. ncu_rule and
-- ncu_estimate_ns are ncu's own guided analysis: its rule with the largest estimated speedup of
-- the whole launch (global), weighted by the durations, applied to the kernel's time; it can
-- pass headroom_ns where the rule cuts the work itself (fewer bytes moved: MemoryL2Compression,
-- an access pattern), which headroom_ns, at the same work, does not count. A
-- kernel ncu did not profile (its --kernel-name or --launch-count left it out) has profiled 0,
-- NULL in the ncu columns, and comes after those it did. The ncu run's launches are timed under
-- ncu (serialised, with its cache control); ncu_over_nsys compares its median to the traced one.
-- @param run    TEXT     nsys run id or name (default: latest run)
-- @param ncu    TEXT     ncu run id or name, of the same workload (default: latest ncu run)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @column name                    kernel name (demangled)
-- @column time_pct                share of the nsys run's kernel time, % (rounded to 0.1)
-- @column total_ns                summed duration in the nsys run, ns
-- @column instances               launches in the nsys run
-- @column med_ns                  median duration in the nsys run, ns (rounded to 0.1)
-- @column profiled                launches of the kernel in the ncu run (0: not profiled)
-- @column ncu_med_ns              median duration under ncu (gpu__time_duration.sum), ns; NULL: not profiled
-- @column ncu_over_nsys           ncu_med_ns over med_ns (rounded to 0.01); NULL: not profiled
-- @column sm_throughput_pct       Compute (SM) Throughput (sm__throughput), % of peak, duration-weighted; NULL: not profiled or not measured
-- @column memory_throughput_pct   Memory Throughput (gpu__compute_memory_throughput), % of peak, duration-weighted; NULL: not profiled or not measured
-- @column sol_pct                 the larger of the two, % of peak (rounded to 0.1); NULL: not profiled or not measured
-- @column bottleneck              latency (both under 60 %), compute or memory, as ncu's SOLBottleneck rule reads them; NULL: not profiled or not measured
-- @column achieved_occupancy_pct  achieved occupancy, % of max warps per SM, duration-weighted (rounded to 0.1); NULL: not profiled or not measured
-- @column headroom_ns             total_ns x (1 - sol_pct / 100), ns: the most tuning can save at the same work; NULL: not profiled or not measured
-- @column headroom_pct            headroom_ns as % of the nsys run's kernel time (rounded to 0.1); NULL: not profiled or not measured
-- @column ncu_rule                ncu's rule with the largest global speedup estimate (NULL: no rule estimated one, or not profiled)
-- @column ncu_estimate_ns         total_ns x ncu's largest global speedup estimate (duration-weighted), ns; NULL: not profiled or the ncu run has no rule results
-- @display time_pct, total_ns, profiled, sol_pct, bottleneck, achieved_occupancy_pct, headroom_ns, headroom_pct, ncu_estimate_ns, ncu_rule, name
-- @requires kernels, ncu_kernels, ncu_metrics
-- @traced kernels
WITH nsys AS (
    SELECT name_id, count(*) AS instances, sum(end_ns - start_ns) AS total_ns,
           median(end_ns - start_ns) AS med_ns
    FROM _kernels WHERE run_id = $run
    GROUP BY name_id
), nsys_named AS (
    SELECT n.value AS name, kernel_match_key(n.value) AS key, s.*, sum(s.total_ns) OVER () AS run_ns
    FROM nsys s JOIN _strings n ON n.string_id = s.name_id
), launch AS (  -- the ncu run's kernel launches (not ranges or graphs) of a kernel the nsys run ran
    SELECT * FROM (
        SELECT kernel_id, kernel_match_key(name) AS key, duration_ns, sm_throughput_pct, memory_throughput_pct,
               achieved_occupancy_pct
        FROM ncu_kernel_metrics WHERE run_id = $ncu AND workload = 'kernel'
    ) WHERE key IN (SELECT key FROM nsys_named)
), checked AS (  -- read first: a run without the speed-of-light metrics is an error, not blank columns
    SELECT CASE WHEN (SELECT count(*) FROM ncu_kernels WHERE run_id = $ncu AND workload = 'kernel') = 0
                THEN error(ncu_lacks('kernel-headroom', $ncu, 'kernel launch (its results are ranges or graphs)'))
                WHEN count(*) = 0
                THEN error(ncu_lacks('kernel-headroom', $ncu, 'kernel of a name run ' || $run || ' ran')
                           || '; give the ncu run of the same workload: -p ncu=RUN (tracekit runs)')
                WHEN count(sm_throughput_pct) + count(memory_throughput_pct) = 0
                THEN error(ncu_lacks('kernel-headroom', $ncu, 'metric of the GPU Speed Of Light Throughput section')
                           || '; profile with ncu --section SpeedOfLight (or --set basic or full)')
                ELSE true END AS ok
    FROM launch
), rule AS (  -- each launch's largest global estimate (ncu_rules holds the rules that gave one)
    SELECT kernel_id, first(rule ORDER BY speedup_pct DESC, rule) AS rule, max(speedup_pct) AS speedup_pct
    FROM ncu_rules WHERE run_id = $ncu AND speedup_type = 'global' AND speedup_pct IS NOT NULL
    GROUP BY kernel_id
), has_rules AS (
    SELECT count(*) > 0 AS any FROM ncu_rules WHERE run_id = $ncu
), ncu AS (  -- duration-weighted means, summed in launch order (the same sum however the rows arrive)
    SELECT l.key, count(*) AS profiled, median(l.duration_ns) AS ncu_med_ns,
           list_sum(list(l.duration_ns * l.sm_throughput_pct ORDER BY l.kernel_id))
               / list_sum(list(l.duration_ns ORDER BY l.kernel_id) FILTER (WHERE l.sm_throughput_pct IS NOT NULL))
               AS sm_throughput_pct,
           list_sum(list(l.duration_ns * l.memory_throughput_pct ORDER BY l.kernel_id))
               / list_sum(list(l.duration_ns ORDER BY l.kernel_id) FILTER (WHERE l.memory_throughput_pct IS NOT NULL))
               AS memory_throughput_pct,
           list_sum(list(l.duration_ns * l.achieved_occupancy_pct ORDER BY l.kernel_id))
               / list_sum(list(l.duration_ns ORDER BY l.kernel_id) FILTER (WHERE l.achieved_occupancy_pct IS NOT NULL))
               AS achieved_occupancy_pct,
           CASE WHEN any_value(h.any) THEN list_sum(list(l.duration_ns * coalesce(r.speedup_pct, 0) ORDER BY l.kernel_id))
                                           / list_sum(list(l.duration_ns ORDER BY l.kernel_id)) END AS estimate_pct,
           first(r.rule ORDER BY l.duration_ns * r.speedup_pct DESC NULLS LAST, r.rule) AS ncu_rule
    FROM checked JOIN launch l ON checked.ok
    LEFT JOIN rule r USING (kernel_id)
    CROSS JOIN has_rules h
    GROUP BY l.key
), joined AS (
    SELECT s.name, round1(s.total_ns * 100.0 / s.run_ns) AS time_pct, s.total_ns::BIGINT AS total_ns, s.instances,
           round1(s.med_ns) AS med_ns, coalesce(c.profiled, 0) AS profiled, c.ncu_med_ns,
           round(c.ncu_med_ns / nullif(s.med_ns, 0), 2) AS ncu_over_nsys,
           c.sm_throughput_pct, c.memory_throughput_pct,
           greatest(c.sm_throughput_pct, c.memory_throughput_pct) AS sol,
           c.achieved_occupancy_pct, c.estimate_pct, c.ncu_rule, s.run_ns
    FROM nsys_named s LEFT JOIN ncu c USING (key)
)
SELECT name, time_pct, total_ns, instances, med_ns, profiled, ncu_med_ns, ncu_over_nsys,
       sm_throughput_pct, memory_throughput_pct, round1(sol) AS sol_pct,
       CASE WHEN sol IS NULL THEN NULL WHEN sol < 60 THEN 'latency'
            WHEN sm_throughput_pct >= coalesce(memory_throughput_pct, 0) THEN 'compute' ELSE 'memory' END AS bottleneck,
       round1(achieved_occupancy_pct) AS achieved_occupancy_pct,
       -- (least and greatest skip a NULL: a kernel not profiled has no headroom, not all its time)
       CASE WHEN sol IS NOT NULL THEN (total_ns * (100 - least(sol, 100)) / 100)::BIGINT END AS headroom_ns,
       CASE WHEN sol IS NOT NULL THEN round1(total_ns * (100 - least(sol, 100)) / run_ns) END AS headroom_pct,
       ncu_rule,
       (total_ns * estimate_pct / 100)::BIGINT AS ncu_estimate_ns
FROM joined
ORDER BY headroom_ns DESC NULLS LAST, total_ns DESC, name
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
