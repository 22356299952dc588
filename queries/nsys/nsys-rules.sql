-- What NVIDIA's expert rules (`nsys analyze`) find in the run, one row per rule: how many
-- times it fired, the time involved and the longest case, with what to do about it. The
-- rules: CUDA calls that block the host to synchronize (sync-apis), asynchronous copies
-- from or to pageable memory (async-pageable-copies), synchronous copies (sync-copies)
-- and memsets (sync-memsets), a process leaving a GPU idle for longer than gap_ms
-- (gpu-gaps), and stretches where it kept a GPU busy less than threshold_pct of the time
-- (low-gpu-utilization); each row's query lists the cases. Rules that fired come first,
-- most time first. total_ns adds up the cases' durations: host time blocked for the
-- synchronizations, GPU time of the copies and memsets, idle time of the gaps, length of
-- the stretches.
-- @param run            TEXT     run id or name (default: latest run)
-- @param limit          INTEGER  rows to return; 0 = all (default: 0)
-- @param gap_ms         INTEGER  gpu-gaps: shortest gap counted, ms (min: 0) (max: 9223372036854) (default: 500)
-- @param threshold_pct  INTEGER  low-gpu-utilization: stretches used less than this, % (min: 0) (max: 100) (default: 50)
-- @param chunks         INTEGER  low-gpu-utilization: chunks per process and device (min: 1) (max: 1000) (default: 30)
-- @column rule              nsys's name of the rule (nsys analyze -r RULE)
-- @column query             the named query that lists its cases (tracekit query QUERY)
-- @column finding           what the rule looks for
-- @column cases             times it fired (0: nothing found)
-- @column total_ns          the cases' durations added up, ns
-- @column longest_ns        the longest case, ns (NULL: no case)
-- @column longest_start_ns  when the longest case started (the first of equal ones), ns (NULL: no case)
-- @column advice            what to do about it (or, with no case, that nothing was found)
-- @display cases, total_ns, longest_ns, finding, query
-- @requires api_calls, kernels, memcpy, memset, profiler_overhead
-- @traced api_calls, kernels, memcpy, memset
WITH cases AS (
    SELECT 'cuda_api_sync' AS rule, dur_ns, start_ns FROM nsys_sync_apis($run)
    UNION ALL SELECT rule, dur_ns, start_ns FROM nsys_memory_findings($run)
    UNION ALL SELECT 'gpu_gaps', gap_ns, start_ns FROM nsys_gpu_gaps($run, $gap_ms)
    UNION ALL SELECT 'gpu_time_util', dur_ns, start_ns FROM nsys_low_utilization($run, $threshold_pct, $chunks)
), rules(ord, rule, query, finding, advice) AS (VALUES
    (1, 'cuda_api_sync', 'sync-apis', 'CUDA calls that block the host to synchronize',
     'cudaDeviceSynchronize and cudaStreamSynchronize hold the calling thread until the GPU has finished '
     || 'the work queued before them, so it queues nothing meanwhile. Synchronize only where the host needs a '
     || 'result; to order work between streams, record an event and make the other stream wait on it '
     || '(cudaEventRecord, cudaStreamWaitEvent): the host goes on.'),
    (2, 'cuda_memcpy_async', 'async-pageable-copies', 'Asynchronous copies from or to pageable memory',
     'A cudaMemcpyAsync from or to pageable host memory is staged by the driver and blocks the host like a '
     || 'synchronous copy, overlapping nothing. Allocate the host buffers pinned (cudaMallocHost, '
     || 'torch.Tensor.pin_memory()); memcpy-throughput shows how much faster pinned copies run.'),
    (3, 'cuda_memcpy_sync', 'sync-copies', 'Synchronous copies',
     'cudaMemcpy returns only when the copy is done (small host-to-device copies excepted), stalling the host '
     || 'thread. Use cudaMemcpyAsync on a stream, from pinned memory, and synchronize where the data is needed.'),
    (4, 'cuda_memset_sync', 'sync-memsets', 'Synchronous memsets',
     'cudaMemset on pinned host or managed memory waits for the GPU. Use cudaMemsetAsync on a stream.'),
    (5, 'gpu_gaps', 'gpu-gaps', 'GPU idle for longer than ' || $gap_ms || ' ms',
     'A process left the GPU with nothing to run between two of its GPU ops. See what its threads did meanwhile '
     || '(tracekit chart timeline -p from_ns=START -p to_ns=END, osrt-summary, api-summary) and mark host code '
     || 'with NVTX ranges to name the time.'),
    (6, 'gpu_time_util', 'low-gpu-utilization', 'GPU busy less than ' || $threshold_pct || ' % of the time',
     'In these stretches the GPU ran the process''s kernels, copies and memsets for less than the threshold''s '
     || 'share of the time: the host is not feeding it. Look for launch-bound code (many short kernels: fuse '
     || 'them, or replay them as a CUDA graph), host work and synchronizations between launches (sync-apis, '
     || 'launch-overhead).')
)
SELECT r.rule, r.query, r.finding, count(c.rule) AS cases, coalesce(sum(c.dur_ns), 0)::BIGINT AS total_ns,
       max(c.dur_ns) AS longest_ns, arg_max(c.start_ns, [c.dur_ns, -c.start_ns]) AS longest_start_ns,
       CASE WHEN count(c.rule) > 0 THEN r.advice ELSE 'Nothing found.' END AS advice
FROM rules r LEFT JOIN cases c ON c.rule = r.rule
GROUP BY r.ord, r.rule, r.query, r.finding, r.advice
ORDER BY cases = 0, total_ns DESC, r.ord
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
