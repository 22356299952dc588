-- ncu scope: the warp states of both reports' launches (the ncu_warp_states view, as
-- warp-stalls reads them): cycles per issued instruction per stall reason.
-- @param base  INTEGER  base run id
-- @param new   INTEGER  new run id
-- @column side              0 = base run, 1 = new run
-- @column kernel_id         ncu's ID of the launch in its report
-- @column reason            stall reason (long_scoreboard, barrier, ...)
-- @column cycles_per_issue  cycles per issued instruction in this state
SELECT s.side, w.kernel_id, w.reason, w.cycles_per_issue
FROM (VALUES (0, $base), (1, $new)) s(side, run_id)
JOIN ncu_warp_states w ON w.run_id = s.run_id
WHERE w.run_id IN ($base, $new) AND w.cycles_per_issue IS NOT NULL
ORDER BY s.side, w.kernel_id, w.reason
