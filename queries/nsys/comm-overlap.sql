-- Communication against computation per process and GPU: the time NCCL's kernels ran, the
-- time compute kernels (every other kernel) ran, the time both did, and the NCCL time no
-- compute kernel ran beside: the exposed communication a data- or tensor-parallel step
-- waits for. Times are unions (kernels that overlap counted once). overlap_pct is the
-- share of NCCL time hidden behind compute (nccl-overlap: the same per kernel name, as
-- `nsys recipe nccl_gpu_overlap_trace` gives it). A run without NCCL kernels is an error.
-- @param run    TEXT     run id or name (default: latest run)
-- @column pid               process
-- @column device_id         CUDA device
-- @column nccl_kernels      NCCL kernel launches
-- @column nccl_ns           time at least one NCCL kernel ran, ns
-- @column compute_ns        time at least one compute kernel ran, ns
-- @column overlap_ns        time both ran, ns
-- @column exposed_nccl_ns   time NCCL kernels ran and no compute kernel did, ns
-- @column overlap_pct       overlap_ns in % of nccl_ns: communication hidden behind compute (rounded to 0.1)
-- @column busy_ns           time any kernel ran, ns
-- @display pid, device_id, overlap_pct, exposed_nccl_ns, nccl_ns, compute_ns, overlap_ns, busy_ns, nccl_kernels
-- @requires kernels
-- @traced kernels
WITH launches AS (
    SELECT k.global_pid, k.device_id, count(*) FILTER (WHERE starts_with(s.value, 'nccl')) AS nccl_kernels
    FROM _kernels k JOIN _strings s ON s.string_id = k.short_name_id
    WHERE k.run_id = $run
    GROUP BY k.global_pid, k.device_id
), asked AS (  -- a run with no NCCL kernel has no communication to overlap: an error, not a table of zeros
    SELECT CASE WHEN sum(nccl_kernels) > 0 THEN true
                ELSE error('comm-overlap: the run has no NCCL kernels (short names nccl...); it is a question '
                           || 'for a capture of a job that communicates through NCCL') END AS ok
    FROM launches
), t AS (
    SELECT global_pid, device_id,
           sum(len_ns) FILTER (WHERE nccl_running >= 1) AS nccl_ns,
           sum(len_ns) FILTER (WHERE compute_running >= 1) AS compute_ns,
           sum(len_ns) FILTER (WHERE nccl_running >= 1 AND compute_running >= 1) AS overlap_ns,
           sum(len_ns) FILTER (WHERE nccl_running >= 1 AND compute_running = 0) AS exposed_ns,
           sum(len_ns) FILTER (WHERE nccl_running + compute_running >= 1) AS busy_ns
    FROM nccl_cuts($run)
    WHERE (SELECT ok FROM asked)
    GROUP BY global_pid, device_id
)
SELECT ((t.global_pid >> 24) & 16777215)::INTEGER AS pid, t.device_id, l.nccl_kernels,
       coalesce(nccl_ns, 0)::BIGINT AS nccl_ns, coalesce(compute_ns, 0)::BIGINT AS compute_ns,
       coalesce(overlap_ns, 0)::BIGINT AS overlap_ns, coalesce(exposed_ns, 0)::BIGINT AS exposed_nccl_ns,
       round1(100.0 * coalesce(overlap_ns, 0) / nullif(nccl_ns, 0)) AS overlap_pct,
       coalesce(busy_ns, 0)::BIGINT AS busy_ns
FROM t JOIN launches l USING (global_pid, device_id)
ORDER BY pid, device_id
