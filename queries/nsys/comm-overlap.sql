-- Communication against computation per process and GPU: the time NCCL's kernels ran, the
-- time compute kernels (every other kernel) ran, the time both did, and the NCCL time no
-- compute kernel ran beside: the exposed communication a data- or tensor-parallel step
-- waits for. Times are unions (kernels that overlap counted once; computed at ingest,
-- tracekit/ingest/nsys/overlap.py). overlap_pct is the share of NCCL time hidden behind
-- compute (nccl-overlap: the same per kernel name, as `nsys recipe nccl_gpu_overlap_trace`
-- gives it). A run without NCCL kernels is an error.
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
-- @requires comm_overlap_sum
-- @traced kernels
WITH asked AS (  -- a run with no NCCL kernel has no communication to overlap: an error, not an empty table
    SELECT CASE WHEN EXISTS (SELECT 1 FROM comm_overlap_sum WHERE run_id = $run) THEN true
                ELSE error('comm-overlap: the run has no NCCL kernels (short names nccl...); it is a question '
                           || 'for a capture of a job that communicates through NCCL') END AS ok
)
SELECT ((global_pid >> 24) & 16777215)::INTEGER AS pid, device_id, nccl_kernels, nccl_ns, compute_ns, overlap_ns,
       exposed_nccl_ns, round1(100.0 * overlap_ns / nullif(nccl_ns, 0)) AS overlap_pct, busy_ns
FROM comm_overlap_sum
WHERE run_id = $run AND (SELECT ok FROM asked)
ORDER BY pid, device_id
