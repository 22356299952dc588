-- One row per rank of a multi-rank job: GPU busy time, kernel time, time in the outermost
-- NVTX ranges and the top kernel, each rank beside the median rank. The job is that of
-- --run (any rank's run; default: the latest run that is a rank), its ranks the runs ingested with
-- a rank (tracekit/ranks.py: the export's launcher environment, a file name such as
-- rank3, or --param rank=3). Busy time is the union of the rank's GPU ops per device
-- (kernels, copies, memsets, whole graph launches), as gpu-utilization counts it. Where the
-- ranks recorded their GPU memory (nsys --cuda-memory-usage=true), the most device memory each
-- had allocated at once (gpu-memory's peak): the rank that runs out of memory first.
-- Time per NVTX range and rank: rank-ranges (and `tracekit chart rank-heatmap`). Every rank
-- must have traced CUDA (nsys -t cuda): a job captured without it (nsys -t nvtx,osrt) is an
-- error, not a table of zero GPU time; rank-ranges and stragglers compare its NVTX ranges.
-- Where the ranks communicate through NCCL, nccl_ns and exposed_nccl_ns say how long NCCL's
-- kernels ran and how much of it with no compute kernel beside (comm-overlap): a rank that
-- waits for a straggler inside the all-reduce has the most, the straggler the least, and its
-- kernel time counts that wait.
-- @param run    TEXT     any run of the job: id or name (default: the latest run that is a rank)
-- @param limit  INTEGER  rows to return; 0 = all (default: 0)
-- @column job                   the job (as `tracekit query jobs` names it): the ranks of the run's job are its rows
-- @column rank                  global rank
-- @column host                  host it ran on (NULL when the export does not say)
-- @column gpus                  the devices its GPU ops ran on (CUDA device ids, e.g. 0 or 0,1)
-- @column run_id                the rank's run
-- @column run                   the run's name
-- @column kernels               kernel launches
-- @column kernel_ns             summed kernel time, ns
-- @column gpu_busy_ns           time with at least one GPU op of the rank running, summed over devices, ns
-- @column gpu_span_ns           first GPU op start to last GPU op end, ns
-- @column gpu_busy_pct          gpu_busy_ns / gpu_span_ns, % (rounded to 0.01)
-- @column nvtx_ns               summed time of the outermost NVTX ranges (depth 0), ns (NULL: none, or NVTX not traced)
-- @column top_kernel            the kernel with the most time on this rank (demangled)
-- @column top_kernel_ns         its summed time, ns
-- @column top_kernel_pct        its share of the rank's kernel time, % (rounded to 0.1)
-- @column kernel_vs_median_pct  kernel_ns against the median rank's (of the ranks with GPU ops; a rank with none: -100), % (+ = more time; rounded to 0.1)
-- @column busy_vs_median_pct    gpu_busy_ns against the median rank's, % (rounded to 0.1)
-- @column nccl_ns               time NCCL kernels ran (union per device, summed), ns (NULL: no NCCL kernel)
-- @column exposed_nccl_ns       of it, with no compute kernel of the rank running beside, ns
-- @column gpu_memory_peak_bytes the most device memory the rank had allocated at once, summed over its processes and devices, B (NULL: none recorded: a capture without nsys --cuda-memory-usage=true)
-- @column memory_vs_median_pct  gpu_memory_peak_bytes against the median rank's, % (rounded to 0.1)
-- @display job, rank, host, gpus, kernel_ns, gpu_busy_ns, gpu_busy_pct, nvtx_ns, exposed_nccl_ns, gpu_memory_peak_bytes, kernel_vs_median_pct, top_kernel_pct, top_kernel
-- @requires kernels, gpu_ops, nvtx_ranges, rank_runs, comm_overlap_sum, gpu_memory
-- @traced kernels
WITH jr AS (
    SELECT * FROM job_ranks($run)
), dev AS (
    SELECT o.run_id, o.device_id, min(o.start_ns) AS first_ns, max(o.end_ns) AS last_ns,
           max(o.end_ns) - min(o.start_ns) - coalesce(sum(o.device_gap_ns), 0) AS busy_ns
    FROM gpu_ops o JOIN jr USING (run_id)
    GROUP BY o.run_id, o.device_id
), busy AS (
    SELECT run_id, sum(busy_ns) AS gpu_busy_ns, max(last_ns) - min(first_ns) AS gpu_span_ns,
           string_agg(device_id::VARCHAR, ',' ORDER BY device_id) AS gpus
    FROM dev GROUP BY run_id
), k AS (
    SELECT k.run_id, k.name_id, count(*) AS launches, sum(k.end_ns - k.start_ns) AS ns
    FROM _kernels k JOIN jr USING (run_id)
    GROUP BY k.run_id, k.name_id
), per_run AS (
    SELECT k.run_id, sum(k.launches) AS kernels, sum(k.ns) AS kernel_ns,
           first(s.value ORDER BY k.ns DESC, s.value) AS top_kernel, max(k.ns) AS top_kernel_ns
    FROM k LEFT JOIN _strings s ON s.string_id = k.name_id
    GROUP BY k.run_id
), nv AS (
    SELECT n.run_id, sum(n.dur_ns) AS nvtx_ns
    FROM nvtx_ranges n JOIN jr USING (run_id)
    WHERE n.depth = 0
    GROUP BY n.run_id
), comm AS (
    SELECT c.run_id, sum(c.nccl_ns) AS nccl_ns, sum(c.exposed_nccl_ns) AS exposed_nccl_ns
    FROM comm_overlap_sum c JOIN jr USING (run_id)
    GROUP BY c.run_id
), mem AS (  -- each process's device memory peak per device, summed
    SELECT run_id, sum(peak)::BIGINT AS gpu_memory_peak_bytes
    FROM (SELECT run_id, max(live_bytes) AS peak
          FROM gpu_memory_events_in((SELECT list(run_id) FROM jr)) WHERE memory_kind = 'Device'
          GROUP BY run_id, global_pid, device_id)
    GROUP BY run_id
), rows AS (
    SELECT jr.job, jr.rank, jr.host, b.gpus, jr.run_id, jr.name AS run,
           coalesce(p.kernels, 0)::BIGINT AS kernels, coalesce(p.kernel_ns, 0)::BIGINT AS kernel_ns,
           b.gpu_busy_ns::BIGINT AS gpu_busy_ns, b.gpu_span_ns::BIGINT AS gpu_span_ns,
           round(100.0 * b.gpu_busy_ns / nullif(b.gpu_span_ns, 0), 2) AS gpu_busy_pct,
           nv.nvtx_ns::BIGINT AS nvtx_ns,
           p.top_kernel, p.top_kernel_ns::BIGINT AS top_kernel_ns,
           round(100.0 * p.top_kernel_ns / nullif(p.kernel_ns, 0), 1) AS top_kernel_pct
    FROM jr
    LEFT JOIN busy b USING (run_id)
    LEFT JOIN per_run p USING (run_id)
    LEFT JOIN nv USING (run_id)
)
SELECT rows.*,
       -- (the median of the ranks with GPU ops: a rank whose capture held none, 0 here, would pull it down)
       round(100.0 * (kernel_ns - median(kernel_ns) FILTER (WHERE gpu_busy_ns IS NOT NULL) OVER ())
             / nullif(median(kernel_ns) FILTER (WHERE gpu_busy_ns IS NOT NULL) OVER (), 0), 1) AS kernel_vs_median_pct,
       round(100.0 * (gpu_busy_ns - median(gpu_busy_ns) OVER ()) / nullif(median(gpu_busy_ns) OVER (), 0), 1)
           AS busy_vs_median_pct,
       cm.nccl_ns::BIGINT AS nccl_ns, cm.exposed_nccl_ns::BIGINT AS exposed_nccl_ns, m.gpu_memory_peak_bytes,
       round(100.0 * (m.gpu_memory_peak_bytes - median(m.gpu_memory_peak_bytes) OVER ())
             / nullif(median(m.gpu_memory_peak_bytes) OVER (), 0), 1) AS memory_vs_median_pct
FROM rows LEFT JOIN comm cm USING (run_id) LEFT JOIN mem m USING (run_id)
ORDER BY rank
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
