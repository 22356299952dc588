-- The CUDA calls that block the host until the GPU is done: every cudaDeviceSynchronize and
-- cudaStreamSynchronize call, longest first. The rows of NVIDIA's expert rule "CUDA
-- Synchronization APIs" (`nsys analyze -r cuda_api_sync`; tracekit query nsys-rules sums
-- up every rule), with the API name's _vNNNN suffix stripped as api-summary shows it, and
-- the NVTX range the call was made in. A thread blocked here queues no work; where it only
-- orders work between streams, events (cudaEventRecord + cudaStreamWaitEvent) do it without
-- blocking. Driver-API waits (cuStreamSynchronize, cuCtxSynchronize) are not listed, as in nsys.
-- @param run    TEXT     run id or name (default: latest run)
-- @param limit  INTEGER  rows to return; 0 = all (default: 50)
-- @column dur_ns     time the call blocked its thread, ns
-- @column start_ns   call start, ns
-- @column pid        process
-- @column tid        thread
-- @column api_name   the call (suffix _vNNNN stripped: cudaStreamSynchronize, cudaDeviceSynchronize, ...)
-- @column nvtx_path  the innermost push/pop NVTX range around the call on its thread, as a path (NULL: none)
-- @display dur_ns, start_ns, pid, tid, api_name, nvtx_path
-- @alias cuda_api_sync
-- @rows page
-- @requires api_calls
-- @traced api_calls
WITH page AS (
    SELECT * FROM nsys_sync_apis($run)
    ORDER BY dur_ns DESC, start_ns, tid
    LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
), paths AS (  -- the innermost push/pop range around each listed call, on its thread
    SELECT p.start_ns, p.global_tid, arg_max(r.path, r.depth) AS path
    FROM page p JOIN nvtx_ranges r ON r.run_id = $run AND r.global_tid = p.global_tid AND r.style = 'PushPop'
         AND r.start_ns <= p.start_ns AND r.end_ns >= p.end_ns
    GROUP BY p.start_ns, p.global_tid
)
SELECT p.dur_ns, p.start_ns, p.pid, p.tid, p.api_name, n.path AS nvtx_path
FROM page p LEFT JOIN paths n ON n.start_ns = p.start_ns AND n.global_tid = p.global_tid
ORDER BY p.dur_ns DESC, p.start_ns, p.tid
