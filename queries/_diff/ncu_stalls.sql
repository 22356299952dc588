-- ncu scope: the warp states of both reports' launches (ncu's Warp State Statistics,
-- as warp-stalls reads them): cycles per issued instruction per stall reason.
-- @param base  INTEGER  base run id
-- @param new   INTEGER  new run id
-- @column side              0 = base run, 1 = new run
-- @column kernel_id         ncu's ID of the launch in its report
-- @column reason            stall reason (long_scoreboard, barrier, ...)
-- @column cycles_per_issue  cycles per issued instruction in this state
SELECT s.side, m.kernel_id,
       regexp_extract(m.metric, '^smsp__average_warps_issue_stalled_(.+)_per_issue_active\.ratio$', 1) AS reason,
       m.value AS cycles_per_issue
FROM (VALUES (0, $base), (1, $new)) s(side, run_id)
JOIN ncu_metrics m ON m.run_id = s.run_id
WHERE m.run_id IN ($base, $new)
  AND m.metric LIKE 'smsp\_\_average\_warps\_issue\_stalled\_%\_per\_issue\_active.ratio' ESCAPE '\'
  AND m.value IS NOT NULL
ORDER BY s.side, m.kernel_id, reason
