-- Why warps did not issue, per launch and stall reason: ncu's Warp State Statistics
-- (cycles a warp spends in each state per issued instruction; measured in passes of their
-- own, they add up to about the section's Warp Cycles Per Issued Instruction) beside the
-- Source Counters' warp stall sampling (program-counter samples per reason, which add up
-- to the launch's sample count). Reasons as ncu's metrics name them
-- (long_scoreboard, barrier, gmma, ...; the sampling's no_instructions is no_instruction
-- here). A run profiled without the WarpStateStats section (or --set full) is an error, and
-- so is one read from ncu's details CSV page, which prints the section's summary but not
-- its stall reasons (the .ncu-rep and the raw page have them). A range or a whole graph
-- gets its states over all the kernels it ran.
-- @param run     TEXT     run id or name, or 'all' (default: latest run)
-- @param kernel  TEXT     only launches whose kernel name contains this text, case-insensitive (default: null)
-- @param limit   INTEGER  rows to return; 0 = all (default: 0)
-- @column run_id              run the launch belongs to
-- @column kernel_id           ncu's ID of the launch in its report
-- @column name                kernel name (demangled)
-- @column nvtx_range          innermost NVTX push/pop range
-- @column reason              stall reason (the metric's name between issue_stalled_ and its suffix)
-- @column cycles_per_issue    cycles per issued instruction in this state (smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio)
-- @column cycles_pct          share of the launch's cycles per issued instruction over all reasons, %
-- @column samples             warp stall samples of this reason (smsp__pcsamp_warps_issue_stalled_<reason>; NULL without sampling)
-- @column samples_not_issued  of those, samples whose warp did not issue (..._not_issued)
-- @column samples_pct         share of the launch's samples (smsp__pcsamp_sample_count), %; NULL where the launch took no sample
-- @display kernel_id, reason, cycles_per_issue, cycles_pct, samples, samples_pct, name
-- @requires ncu_kernels, ncu_metrics, ncu_warp_states
WITH launches AS (
    SELECT run_id, kernel_id, name, nvtx_range
    FROM ncu_kernels
    WHERE ($run IS NULL OR run_id = $run) AND ($kernel IS NULL OR contains(lower(name), lower($kernel)))
      AND ncu_kernel_asked('warp-stalls', $run, $kernel)
), m AS (  -- the stall sampling (Source Counters) of those launches
    SELECT m.run_id, m.kernel_id, m.metric, m.value
    FROM ncu_metrics m SEMI JOIN launches l USING (run_id, kernel_id)
    WHERE m.metric LIKE 'smsp\_\_pcsamp\_warps\_issue\_stalled\_%' ESCAPE '\'
       OR m.metric = 'smsp__pcsamp_sample_count'
), state AS (
    SELECT w.run_id, w.kernel_id, w.reason, w.cycles_per_issue
    FROM ncu_warp_states w SEMI JOIN launches l USING (run_id, kernel_id)
), sampled AS (
    SELECT run_id, kernel_id,
           replace(regexp_extract(metric, '^smsp__pcsamp_warps_issue_stalled_(.+?)(_not_issued)?$', 1),
                   'no_instructions', 'no_instruction') AS reason,
           sum(value) FILTER (WHERE NOT suffix(metric, '_not_issued')) AS samples,
           sum(value) FILTER (WHERE suffix(metric, '_not_issued')) AS samples_not_issued
    FROM m WHERE metric LIKE 'smsp\_\_pcsamp\_warps\_issue\_stalled\_%' ESCAPE '\'
    GROUP BY ALL
), checked AS (  -- read first: the error is raised even where the kernel filter leaves nothing
    SELECT CASE WHEN count(*) > 0 OR NOT EXISTS (FROM launches) THEN true
                WHEN (SELECT bool_and(coalesce(json_extract_string(meta, '$.ncu_export') = 'csv-details', false))
                      FROM runs WHERE ($run IS NULL OR run_id = $run) AND list_contains(string_split(kind, ','), 'ncu'))
                THEN error(ncu_lacks('warp-stalls', $run, 'warp state metrics') || '; ncu''s details CSV page prints '
                           || 'the section''s summary, not its stall reasons: ingest the .ncu-rep (or ncu -i REPORT '
                           || '--csv --page raw)')
                ELSE error(ncu_lacks('warp-stalls', $run, 'warp state metrics') || '; profile with ncu --section '
                           || 'WarpStateStats (and --section SourceCounters for the sampling), or --set full') END AS ok
    FROM state
)
SELECT l.run_id, l.kernel_id, l.name, l.nvtx_range, coalesce(s.reason, p.reason) AS reason,
       s.cycles_per_issue,
       s.cycles_per_issue * 100.0  -- (an exact sum: the same in any order, store or dataset)
           / nullif(sum(s.cycles_per_issue::DECIMAL(38, 12)) OVER (PARTITION BY l.run_id, l.kernel_id), 0)::DOUBLE
           AS cycles_pct,
       p.samples, p.samples_not_issued,
       p.samples * 100.0 / nullif(c.value, 0) AS samples_pct
FROM checked
JOIN state s ON checked.ok
FULL JOIN sampled p USING (run_id, kernel_id, reason)
JOIN launches l ON l.run_id = coalesce(s.run_id, p.run_id) AND l.kernel_id = coalesce(s.kernel_id, p.kernel_id)
LEFT JOIN m c ON c.run_id = l.run_id AND c.kernel_id = l.kernel_id AND c.metric = 'smsp__pcsamp_sample_count'
ORDER BY l.run_id, l.kernel_id, s.cycles_per_issue DESC NULLS LAST, p.samples DESC NULLS LAST, reason
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
