-- How busy the SMs' instruction pipelines and warp schedulers were, per launch: the numbers of
-- ncu's "Compute Workload Analysis", "Scheduler Statistics" and "Instruction Statistics"
-- sections (ncu --page details), in base units, and the busiest instruction pipeline (the
-- section's Pipe Utilization chart, % of active cycles). Low issue with few eligible warps is latency-bound (warp-stalls says on what); a
-- pipeline near its peak is what a faster kernel must use less of.
-- missing_metrics names the sections' metrics the report lacks (their columns are NULL); a run
-- with none of them (profiled without --section ComputeWorkloadAnalysis, SchedulerStats or
-- InstructionStats, nor --set full) is an error. A range or a whole graph gets one row.
-- @param run     TEXT     run id or name, or 'all' (default: latest run)
-- @param kernel  TEXT     only launches whose kernel name contains this text, case-insensitive (default: null)
-- @param limit   INTEGER  rows to return; 0 = all (default: 0)
-- @column run_id                        run the launch belongs to
-- @column kernel_id                     ncu's ID of the launch in its report
-- @column name                          kernel name (demangled)
-- @column nvtx_range                    innermost NVTX push/pop range
-- @column executed_ipc_active           Executed Ipc Active (sm__inst_executed.avg.per_cycle_active), instructions per SM active cycle
-- @column executed_ipc_elapsed          Executed Ipc Elapsed (sm__inst_executed.avg.per_cycle_elapsed), instructions per elapsed cycle
-- @column issued_ipc_active             Issued Ipc Active (sm__inst_issued.avg.per_cycle_active), instructions per SM active cycle
-- @column issue_slots_busy_pct          Issue Slots Busy (sm__inst_issued.avg.pct_of_peak_sustained_elapsed), % of peak
-- @column sm_busy_pct                   SM Busy (sm__instruction_throughput.avg.pct_of_peak_sustained_elapsed), % of peak
-- @column top_pipe                      the busiest pipeline, as the section's Pipe Utilization chart reads them: by its active cycles where ncu counts them (sm__pipe_<pipe>_cycles_active: tensor, fma, alu, shared, ...), else by its share of its peak instruction rate (sm__inst_executed_pipe_<pipe>: lsu, adu, xu, uniform, ...), each .avg.pct_of_peak_sustained_active; NULL without the chart's metrics
-- @column top_pipe_pct                  its utilization, % of peak over the SM's active cycles
-- @column tensor_pipe_pct               tensor pipeline busy (sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active), % of active cycles; NULL where the report lacks it
-- @column one_or_more_eligible_pct      One or More Eligible (smsp__issue_active.avg.pct_of_peak_sustained_active): cycles a scheduler issued, %
-- @column no_eligible_pct               No Eligible (smsp__issue_inst0.avg.pct_of_peak_sustained_active): cycles a scheduler had no warp to issue, %
-- @column issued_warps_per_scheduler    Issued Warp Per Scheduler (smsp__issue_active.avg.per_cycle_active), per cycle
-- @column active_warps_per_scheduler    Active Warps Per Scheduler (smsp__warps_active.avg.per_cycle_active), warps
-- @column eligible_warps_per_scheduler  Eligible Warps Per Scheduler (smsp__warps_eligible.avg.per_cycle_active), warps
-- @column executed_instructions         Executed Instructions (smsp__inst_executed.sum), warp instructions
-- @column issued_instructions           Issued Instructions (smsp__inst_issued.sum), warp instructions
-- @column missing_metrics               section metrics not in the report, comma-separated (NULL = complete)
-- @display kernel_id, executed_ipc_active, issue_slots_busy_pct, top_pipe, top_pipe_pct, no_eligible_pct, eligible_warps_per_scheduler, active_warps_per_scheduler, name
-- @requires ncu_kernels, ncu_metrics
WITH launches AS (
    SELECT run_id, kernel_id, name, nvtx_range
    FROM ncu_kernels
    WHERE ($run IS NULL OR run_id = $run) AND ($kernel IS NULL OR contains(lower(name), lower($kernel)))
      AND ncu_kernel_asked('compute-workload', $run, $kernel)
), m AS MATERIALIZED (
    SELECT m.run_id, m.kernel_id, m.metric, m.value
    FROM ncu_metrics m SEMI JOIN launches l USING (run_id, kernel_id)
    WHERE m.metric IN ('sm__inst_executed.avg.per_cycle_active', 'sm__inst_executed.avg.per_cycle_elapsed',
                       'sm__inst_issued.avg.per_cycle_active', 'sm__inst_issued.avg.pct_of_peak_sustained_elapsed',
                       'sm__instruction_throughput.avg.pct_of_peak_sustained_elapsed',
                       'sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active',
                       'smsp__issue_active.avg.pct_of_peak_sustained_active', 'smsp__issue_inst0.avg.pct_of_peak_sustained_active',
                       'smsp__issue_active.avg.per_cycle_active', 'smsp__warps_active.avg.per_cycle_active',
                       'smsp__warps_eligible.avg.per_cycle_active', 'smsp__inst_executed.sum', 'smsp__inst_issued.sum')
       OR regexp_full_match(m.metric, 'sm__(inst_executed_pipe_[a-z0-9_]+|pipe_[a-z0-9_]+_cycles_active)'
                                      '\.avg\.pct_of_peak_sustained_active')
), per_launch AS (
    SELECT run_id, kernel_id,
           max(value) FILTER (WHERE metric = 'sm__inst_executed.avg.per_cycle_active') AS executed_ipc_active,
           max(value) FILTER (WHERE metric = 'sm__inst_executed.avg.per_cycle_elapsed') AS executed_ipc_elapsed,
           max(value) FILTER (WHERE metric = 'sm__inst_issued.avg.per_cycle_active') AS issued_ipc_active,
           max(value) FILTER (WHERE metric = 'sm__inst_issued.avg.pct_of_peak_sustained_elapsed') AS issue_slots_busy_pct,
           max(value) FILTER (WHERE metric = 'sm__instruction_throughput.avg.pct_of_peak_sustained_elapsed') AS sm_busy_pct,
           max(value) FILTER (WHERE metric = 'sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active') AS tensor_pipe_pct,
           max(value) FILTER (WHERE metric = 'smsp__issue_active.avg.pct_of_peak_sustained_active') AS one_or_more_eligible_pct,
           max(value) FILTER (WHERE metric = 'smsp__issue_inst0.avg.pct_of_peak_sustained_active') AS no_eligible_pct,
           max(value) FILTER (WHERE metric = 'smsp__issue_active.avg.per_cycle_active') AS issued_warps_per_scheduler,
           max(value) FILTER (WHERE metric = 'smsp__warps_active.avg.per_cycle_active') AS active_warps_per_scheduler,
           max(value) FILTER (WHERE metric = 'smsp__warps_eligible.avg.per_cycle_active') AS eligible_warps_per_scheduler,
           max(value) FILTER (WHERE metric = 'smsp__inst_executed.sum') AS executed_instructions,
           max(value) FILTER (WHERE metric = 'smsp__inst_issued.sum') AS issued_instructions
    FROM m GROUP BY run_id, kernel_id
), pipes AS (  -- the pipe at the largest share; of equals the most specific (tensor_op_hmma within tensor
              -- within shared), then the first by name: one answer in any row order
    SELECT run_id, kernel_id,
           coalesce(nullif(regexp_extract(metric, '^sm__inst_executed_pipe_(.+)\.avg\.', 1), ''),
                    regexp_extract(metric, '^sm__pipe_(.+)_cycles_active\.avg\.', 1)) AS pipe, value
    FROM m WHERE metric LIKE 'sm\_\_inst\_executed\_pipe\_%' ESCAPE '\' OR metric LIKE 'sm\_\_pipe\_%' ESCAPE '\'
    QUALIFY row_number() OVER (PARTITION BY run_id, kernel_id ORDER BY value DESC, length(pipe) DESC, pipe, metric) = 1
), checked AS (  -- read first: the error is raised even where the kernel filter leaves nothing
    SELECT CASE WHEN count(*) > 0 OR NOT EXISTS (FROM launches) THEN true
                ELSE error(ncu_lacks('compute-workload', $run, 'metric of the Compute Workload Analysis, Scheduler '
                                     || 'Statistics or Instruction Statistics sections')
                           || '; profile with ncu --section ComputeWorkloadAnalysis --section SchedulerStats '
                           || '--section InstructionStats (or --set full)') END AS ok
    FROM per_launch
)
SELECT l.run_id, l.kernel_id, l.name, l.nvtx_range, p.executed_ipc_active, p.executed_ipc_elapsed,
       p.issued_ipc_active, p.issue_slots_busy_pct, p.sm_busy_pct,
       t.pipe AS top_pipe, t.value AS top_pipe_pct, p.tensor_pipe_pct,
       p.one_or_more_eligible_pct, p.no_eligible_pct, p.issued_warps_per_scheduler,
       p.active_warps_per_scheduler, p.eligible_warps_per_scheduler,
       p.executed_instructions::BIGINT AS executed_instructions, p.issued_instructions::BIGINT AS issued_instructions,
       nullif(concat_ws(', ',
           CASE WHEN p.executed_ipc_active IS NULL THEN 'sm__inst_executed.avg.per_cycle_active' END,
           CASE WHEN p.executed_ipc_elapsed IS NULL THEN 'sm__inst_executed.avg.per_cycle_elapsed' END,
           CASE WHEN p.issued_ipc_active IS NULL THEN 'sm__inst_issued.avg.per_cycle_active' END,
           CASE WHEN p.issue_slots_busy_pct IS NULL THEN 'sm__inst_issued.avg.pct_of_peak_sustained_elapsed' END,
           CASE WHEN p.sm_busy_pct IS NULL THEN 'sm__instruction_throughput.avg.pct_of_peak_sustained_elapsed' END,
           CASE WHEN p.one_or_more_eligible_pct IS NULL THEN 'smsp__issue_active.avg.pct_of_peak_sustained_active' END,
           CASE WHEN p.no_eligible_pct IS NULL THEN 'smsp__issue_inst0.avg.pct_of_peak_sustained_active' END,
           CASE WHEN p.issued_warps_per_scheduler IS NULL THEN 'smsp__issue_active.avg.per_cycle_active' END,
           CASE WHEN p.active_warps_per_scheduler IS NULL THEN 'smsp__warps_active.avg.per_cycle_active' END,
           CASE WHEN p.eligible_warps_per_scheduler IS NULL THEN 'smsp__warps_eligible.avg.per_cycle_active' END,
           CASE WHEN p.executed_instructions IS NULL THEN 'smsp__inst_executed.sum' END,
           CASE WHEN p.issued_instructions IS NULL THEN 'smsp__inst_issued.sum' END
       ), '') AS missing_metrics
FROM checked
JOIN per_launch p ON checked.ok
JOIN launches l USING (run_id, kernel_id)
LEFT JOIN pipes t USING (run_id, kernel_id)
ORDER BY l.run_id, l.kernel_id
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
