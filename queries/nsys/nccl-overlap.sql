-- How much of each kernel's time its GPU spent also running NCCL's kernels or compute
-- kernels, per kernel name: the numbers of `nsys recipe nccl_gpu_overlap_trace`'s
-- grouped_trace (its rank_trace summed by name). NCCL kernels are those whose short name
-- starts with "nccl", every other kernel is compute. A kernel's communication overlap is
-- the time another NCCL kernel of its process ran on its device during it, its compute
-- overlap the time a compute kernel did (each counted once however many ran: the union;
-- computed at ingest, tracekit/ingest/nsys/overlap.py); the percentages are of the name's
-- summed duration. A compute kernel with a high communication overlap hides communication;
-- an NCCL kernel with a low compute overlap is exposed (comm-overlap: per process and
-- device). A run without NCCL kernels is an error.
-- @param run    TEXT     run id or name (default: latest run)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @column name                 kernel short name (as nsys's recipe names it; NULL: the export names none)
-- @column kind                 nccl or compute
-- @column instances            launches
-- @column total_ns             summed duration, ns
-- @column comm_overlap_ns      time NCCL kernels (others than itself) ran during its launches, summed, ns
-- @column compute_overlap_ns   time compute kernels (others than itself) ran during its launches, summed, ns
-- @column comm_overlap_pct     comm_overlap_ns in % of total_ns (rounded to 0.1)
-- @column compute_overlap_pct  compute_overlap_ns in % of total_ns (rounded to 0.1)
-- @display kind, comm_overlap_pct, compute_overlap_pct, total_ns, instances, name
-- @alias nccl_gpu_overlap_trace
-- @requires nccl_overlap_sum
-- @traced kernels
WITH asked AS (  -- a run with no NCCL kernel has no communication to overlap: an error, not an empty table
    SELECT CASE WHEN EXISTS (SELECT 1 FROM nccl_overlap_sum WHERE run_id = $run) THEN true
                ELSE error('nccl-overlap: the run has no NCCL kernels (short names nccl...); it is a question '
                           || 'for a capture of a job that communicates through NCCL') END AS ok
), g AS (
    SELECT short_name_id, bool_or(nccl) AS nccl, sum(instances) AS instances, sum(total_ns) AS total_ns,
           sum(comm_overlap_ns) AS comm_ns, sum(compute_overlap_ns) AS compute_ns
    FROM nccl_overlap_sum
    WHERE run_id = $run AND (SELECT ok FROM asked)
    GROUP BY short_name_id
)
SELECT s.value AS name, CASE WHEN nccl THEN 'nccl' ELSE 'compute' END AS kind, instances::BIGINT AS instances,
       total_ns::BIGINT AS total_ns, comm_ns::BIGINT AS comm_overlap_ns, compute_ns::BIGINT AS compute_overlap_ns,
       round1(100.0 * comm_ns / nullif(total_ns, 0)) AS comm_overlap_pct,
       round1(100.0 * compute_ns / nullif(total_ns, 0)) AS compute_overlap_pct
FROM g LEFT JOIN _strings s ON s.string_id = g.short_name_id
ORDER BY nccl DESC, total_ns DESC, name
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
