-- Nsight Compute's guided analysis: what its rules found on each launch and how much
-- faster the launch could be, the rule rows of ncu's details page (ncu --page details).
-- Ranked by est_saved_ns (a global estimate is a share of the launch's duration, so
-- findings compare across kernels), then by estimated speedup. A run read from ncu's raw
-- CSV page, which carries no rule results, is an error: ingest the .ncu-rep or the
-- details page (a tracekit run folder takes them from its details page or report).
-- With group=kernel, one row per kernel, NVTX range and finding over its launches: the
-- median speedup, the summed durations and time saved, the message of the launch that
-- would save most (a capture profiles each kernel several times).
-- @param run     TEXT     run id or name, or 'all' (default: latest run)
-- @param type    TEXT     rule types, comma-separated: OPT, WRN, ERR, INF, or all (default: all)
-- @param kernel  TEXT     only launches whose kernel name contains this text, case-insensitive (default: null)
-- @param group   TEXT     launch (one row per launch and finding) or kernel (per kernel, NVTX range and finding) (default: launch)
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
-- @column speedup_pct   estimated speedup, % (group=kernel: the median over the launches)
-- @column duration_ns   the launch's duration (gpu__time_duration.sum), ns (group=kernel: summed)
-- @column est_saved_ns  duration_ns x speedup_pct / 100 for a global estimate, ns (NULL otherwise; group=kernel: summed)
-- @column title         the finding's title (from a report; NULL from a details CSV)
-- @column message       the finding, as the details page prints it (group=kernel: of the launch that saves most)
-- @display kernel_id, launches, rule_type, speedup_pct, speedup_type, est_saved_ns, rule, name, message
-- @requires ncu_kernels, ncu_metrics, ncu_rules
WITH src AS (  -- read first: the error is raised even where no rule matched
    SELECT CASE WHEN count(*) FILTER (WHERE json_extract(meta, '$.rule_results') IS NOT NULL) > 0
                     OR (count(*) = 0 AND $run IS NULL) THEN true
                ELSE error('ncu-rules: ' || CASE WHEN $run IS NULL THEN 'no run holds' ELSE 'the run holds no' END
                           || ' rule results: ncu''s raw CSV page has none; ingest the .ncu-rep '
                           || '(or ncu -i REPORT --csv --page details)') END AS ok,
           CASE WHEN lower($type) = 'all' THEN NULL
                WHEN list_has_all(['OPT', 'WRN', 'ERR', 'INF'], string_split(replace(upper($type), ' ', ''), ','))
                    THEN string_split(replace(upper($type), ' ', ''), ',')
                ELSE error('ncu-rules: type=' || $type || ': choose from OPT, WRN, ERR, INF (comma-separated) or all')
           END AS types
    FROM runs WHERE ($run IS NULL OR run_id = $run) AND list_contains(string_split(kind, ','), 'ncu')
), launch AS (
    SELECT r.run_id, r.kernel_id, k.name, k.nvtx_range, r.section, r.rule, r.rule_type, r.speedup_type,
           r.speedup_pct, m.value AS duration_ns,
           CASE WHEN r.speedup_type = 'global' THEN m.value * r.speedup_pct / 100 END AS est_saved_ns,
           r.title, r.message
    FROM src
    JOIN ncu_rules r ON src.ok AND ($run IS NULL OR r.run_id = $run)
    JOIN ncu_kernels k USING (run_id, kernel_id)
    LEFT JOIN ncu_metrics m ON m.run_id = r.run_id AND m.kernel_id = r.kernel_id
                           AND m.metric = 'gpu__time_duration.sum'
    WHERE (src.types IS NULL OR list_contains(src.types, r.rule_type))
      AND ($kernel IS NULL OR contains(lower(k.name), lower($kernel)))
), rows AS (
    SELECT run_id, kernel_id, 1 AS launches, name, nvtx_range, section, rule, rule_type, speedup_type, speedup_pct,
           duration_ns, est_saved_ns, title, message
    FROM launch
    WHERE lower($group) = 'launch'
    UNION ALL
    SELECT run_id, min(kernel_id), count(*), name, nvtx_range, section, rule, rule_type, speedup_type,
           median(speedup_pct), sum(duration_ns), sum(est_saved_ns),
           arg_max(title, (coalesce(est_saved_ns, -1), coalesce(speedup_pct, -1), -kernel_id)),
           arg_max(message, (coalesce(est_saved_ns, -1), coalesce(speedup_pct, -1), -kernel_id))
    FROM launch
    WHERE lower($group) = 'kernel'
       OR (lower($group) <> 'launch' AND error('ncu-rules: group=' || $group || ': choose launch or kernel'))
    GROUP BY run_id, name, nvtx_range, section, rule, rule_type, speedup_type
)
SELECT run_id, kernel_id, launches, name, nvtx_range, section, rule, rule_type, speedup_type, speedup_pct, duration_ns,
       est_saved_ns, title, message
FROM rows
ORDER BY est_saved_ns DESC NULLS LAST, speedup_pct DESC NULLS LAST, run_id, kernel_id, section, rule, message
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
