-- Nsight Compute's guided analysis: what its rules found on each launch and how much
-- faster the launch could be, the rule rows of ncu's details page (ncu --page details).
-- Ranked by est_saved_ns (a global estimate is a share of the launch's duration, so
-- findings compare across kernels), then by estimated speedup. A run read from ncu's raw
-- CSV page, which carries no rule results, is an error: ingest the .ncu-rep or the
-- details page (a tracekit run folder takes them from its details page or report); so is
-- one whose report holds no sections (profiled with ncu --metrics alone, or written by an
-- Nsight Compute older than section records), on which ncu ran no rules.
-- With group=kernel, one row per kernel, NVTX range and finding over its launches: the
-- median speedup, the summed durations and time saved, the message of the launch that
-- would save most (a capture profiles each kernel several times). A finding ncu writes
-- several rows of for one launch (WorkloadImbalance of the SMs, SMSPs, L1 and L2 slices)
-- counts once per launch, at its largest estimate.
-- @param run     TEXT     run id or name, or 'all' (default: latest run)
-- @param type    TEXT     rule types, comma-separated (any of: OPT, WRN, ERR, INF, all) (default: all)
-- @param kernel  TEXT     only launches whose kernel name contains this text, case-insensitive (default: null)
-- @param group   TEXT     one row per launch and finding, or per kernel, NVTX range and finding (one of: launch, kernel) (default: launch)
-- @param limit   INTEGER  rows to return; 0 = all (default: 0)
-- @column run_id        run the launch belongs to
-- @column kernel_id     ncu's ID of the launch in its report (group=kernel: of the first launch)
-- @column launches      launches the row stands for (1 with group=launch)
-- @column name          kernel name (demangled)
-- @column nvtx_range    innermost NVTX push/pop range
-- @column section       section identifier the rule belongs to (e.g. WarpStateStats)
-- @column rule          rule identifier (the details page's Rule Name)
-- @column rule_type     OPT (optimisation), WRN (warning), ERR (error), INF (information)
-- @column speedup_type  global (of the launch's duration) or local (of what the rule looks at); NULL: no estimate
-- @column speedup_pct   estimated speedup, % (group=kernel: the median over the launches of each one's largest)
-- @column duration_ns   the launch's duration (gpu__time_duration.sum), ns (group=kernel: summed)
-- @column est_saved_ns  duration_ns x speedup_pct / 100 for a global estimate, ns (NULL otherwise; group=kernel: summed)
-- @column title         the finding's title (from a report; NULL from a details CSV)
-- @column message       the finding, as the details page prints it (group=kernel: of the launch that saves most)
-- @display kernel_id, launches, rule_type, speedup_pct, speedup_type, est_saved_ns, rule, name, message
-- @requires ncu_kernels, ncu_metrics, ncu_rules
WITH src AS (  -- one row, read first: its check raises even where no rule matches
    SELECT CASE WHEN count(*) FILTER (WHERE json_extract(meta, '$.rule_results') IS NOT NULL) > 0
                     OR (count(*) = 0 AND $run IS NULL) THEN true
                WHEN bool_and(coalesce(json_extract(meta, '$.sections')::INTEGER = 0, false))
                THEN error(ncu_lacks('ncu-rules', $run, 'rule results') || ': its report holds no sections (ncu '
                           || '--metrics alone, or an Nsight Compute too old to record them), so ncu ran no rules on '
                           || 'it; profile with ncu --set full (or --section NAME)')
                ELSE error(ncu_lacks('ncu-rules', $run, 'rule results') || ': ncu''s raw CSV page has none; ingest the '
                           || '.ncu-rep (or ncu -i REPORT --csv --page details)') END AS ok
    FROM runs WHERE ($run IS NULL OR run_id = $run) AND list_contains(string_split(kind, ','), 'ncu')
), launch AS (
    SELECT r.run_id, r.kernel_id, k.name, k.nvtx_range, r.section, r.rule, r.rule_type, r.speedup_type,
           r.speedup_pct, m.value AS duration_ns,
           CASE WHEN r.speedup_type = 'global' THEN m.value * r.speedup_pct / 100 END AS est_saved_ns,
           r.title, r.message
    FROM ncu_rules r
    JOIN ncu_kernels k USING (run_id, kernel_id)
    LEFT JOIN ncu_metrics m ON m.run_id = r.run_id AND m.kernel_id = r.kernel_id
                           AND m.metric = 'gpu__time_duration.sum'
    WHERE ($run IS NULL OR r.run_id = $run)
      AND (list_contains(string_split(replace(lower($type), ' ', ''), ','), 'all')
           OR list_contains(string_split(replace(upper($type), ' ', ''), ','), r.rule_type))
      AND ($kernel IS NULL OR contains(lower(k.name), lower($kernel))) AND ncu_kernel_asked('ncu-rules', $run, $kernel)
), finding AS (  -- group=kernel: a launch's finding once, though ncu writes a row per view of it (WorkloadImbalance
                 -- of SMs, SMSPs, L1 and L2 slices): its largest estimate, the message that gives it
    SELECT run_id, kernel_id, name, nvtx_range, section, rule, rule_type, speedup_type,
           max(speedup_pct) AS speedup_pct, any_value(duration_ns) AS duration_ns, max(est_saved_ns) AS est_saved_ns,
           arg_max(title, (coalesce(est_saved_ns, -1), coalesce(speedup_pct, -1), message)) AS title,
           arg_max(message, (coalesce(est_saved_ns, -1), coalesce(speedup_pct, -1), message)) AS message
    FROM launch
    WHERE lower($group) = 'kernel'
    GROUP BY run_id, kernel_id, name, nvtx_range, section, rule, rule_type, speedup_type
), rows AS (
    SELECT run_id, kernel_id, 1 AS launches, name, nvtx_range, section, rule, rule_type, speedup_type, speedup_pct,
           duration_ns, est_saved_ns, title, message
    FROM launch
    WHERE lower($group) = 'launch'
    UNION ALL
    SELECT run_id, min(kernel_id), count(*), name, nvtx_range, section, rule, rule_type, speedup_type,
           median(speedup_pct), sum(duration_ns ORDER BY kernel_id), sum(est_saved_ns ORDER BY kernel_id),
           arg_max(title, (coalesce(est_saved_ns, -1), coalesce(speedup_pct, -1), -kernel_id)),
           arg_max(message, (coalesce(est_saved_ns, -1), coalesce(speedup_pct, -1), -kernel_id))
    FROM finding  -- (sums in launch order: the same digits every time, whatever threads summed them)
    GROUP BY run_id, name, nvtx_range, section, rule, rule_type, speedup_type
)
SELECT r.run_id, r.kernel_id, r.launches, r.name, r.nvtx_range, r.section, r.rule, r.rule_type, r.speedup_type,
       r.speedup_pct, r.duration_ns, r.est_saved_ns, r.title, r.message
FROM src LEFT JOIN rows r ON src.ok
WHERE r.run_id IS NOT NULL
ORDER BY r.est_saved_ns DESC NULLS LAST, r.speedup_pct DESC NULLS LAST, r.run_id, r.kernel_id, r.section, r.rule,
         r.message
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
