-- source scope: each profiled kernel launch of both reports per source line (ncu's Source
-- Counters, the rows ncu-source sums), with the launch's own warp stall samples in all, by
-- which a line's share of them weighs the launch's duration. Instructions of a range or a
-- whole graph (function set) and instructions without line information are left out.
-- @param base  INTEGER  base run id
-- @param new   INTEGER  new run id
-- @column side                      0 = base run, 1 = new run
-- @column kernel_id                 ncu's ID of the launch in its report
-- @column file                      source file of the line information
-- @column line                      source line
-- @column samples                   warp stall samples on the line's instructions in the launch
-- @column launch_samples            warp stall samples of the launch in all (its every instruction)
-- @column inst_executed             warp-level instructions executed on the line
-- @column l2_excess_sectors         L2 sectors of global accesses beyond the ideal (uncoalesced)
-- @column shared_excess_wavefronts  shared-memory wavefronts beyond the ideal (bank conflicts)
-- @column stalls                    the line's warp stall samples in the launch by reason: [{reason, samples}]
WITH src AS (
    SELECT s.side, n.run_id, n.kernel_id, n.address, n.file, n.line, n.samples, n.inst_executed,
           n.l2_sectors_global_excess, n.shared_wavefronts_excess
    FROM (VALUES (0, $base), (1, $new)) s(side, run_id)
    JOIN ncu_source n ON n.run_id = s.run_id
    WHERE n.run_id IN ($base, $new) AND n.function IS NULL
), totals AS (
    SELECT side, kernel_id, sum(samples) AS launch_samples FROM src GROUP BY ALL
), reasons AS (
    SELECT x.side, x.kernel_id, x.file, x.line, st.reason, sum(st.samples) AS samples
    FROM src x
    JOIN ncu_source_stalls st ON st.run_id = x.run_id AND st.kernel_id = x.kernel_id AND st.address = x.address
    WHERE x.line IS NOT NULL AND st.run_id IN ($base, $new)
    GROUP BY ALL
)
SELECT x.side, x.kernel_id, x.file, x.line, sum(x.samples) AS samples, any_value(t.launch_samples) AS launch_samples,
       sum(x.inst_executed) AS inst_executed, sum(x.l2_sectors_global_excess) AS l2_excess_sectors,
       sum(x.shared_wavefronts_excess) AS shared_excess_wavefronts, any_value(r.stalls) AS stalls
FROM src x
JOIN totals t USING (side, kernel_id)
LEFT JOIN (SELECT side, kernel_id, file, line, list({'reason': reason, 'samples': samples} ORDER BY reason) AS stalls
           FROM reasons GROUP BY ALL) r
       ON r.side = x.side AND r.kernel_id = x.kernel_id AND r.file = x.file AND r.line = x.line
WHERE x.line IS NOT NULL
GROUP BY x.side, x.kernel_id, x.file, x.line
ORDER BY x.side, x.kernel_id, x.file, x.line
