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
-- @column nvtx_path  the innermost push/pop NVTX range open on the call's thread at its start, as a path, a named domain's range as domain:text (NULL: none)
-- @display dur_ns, start_ns, pid, tid, api_name, nvtx_path
-- @alias cuda_api_sync
-- @rows page
-- @requires api_calls
-- @traced api_calls
WITH page AS (
    SELECT * FROM nsys_sync_apis($run)
    ORDER BY dur_ns DESC, start_ns, tid
    LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
), paths AS (  -- the NVTX paths of those rows only
    SELECT range_id, path FROM nvtx_ranges
    WHERE run_id = $run AND range_id IN (SELECT nvtx_range_id FROM page)
)
SELECT p.dur_ns, p.start_ns, p.pid, p.tid, p.api_name, n.path AS nvtx_path
FROM page p LEFT JOIN paths n ON n.range_id = p.nvtx_range_id
ORDER BY p.dur_ns DESC, p.start_ns, p.tid
