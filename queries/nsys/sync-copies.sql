-- Copies that block the host: every cudaMemcpy* call without Async, longest first, less
-- host-to-device copies of 64,000 bytes or less (the call returns once the driver has
-- staged them) and copies within one device recorded with both its devices. The rows of
-- NVIDIA's expert rule "CUDA Synchronous Memcpy" (`nsys analyze -r cuda_memcpy_sync`), with
-- the API name's _vNNNN suffix stripped and the NVTX range the copy was issued in.
-- cudaMemcpyAsync on a stream, from pinned host memory, lets the host go on.
-- In a capture of several processes nsys can list a copy twice (it joins each op's call on
-- the correlation id alone, which every process numbers from 1); here each is listed once.
-- @param run    TEXT     run id or name (default: latest run)
-- @param limit  INTEGER  rows to return; 0 = all (default: 50)
-- @column dur_ns            copy duration on the GPU, ns
-- @column start_ns          copy start on the GPU, ns
-- @column src_kind          memory copied from (Pageable, Pinned, Device, Managed, ...)
-- @column dst_kind          memory copied to
-- @column bytes             bytes copied
-- @column pid               process
-- @column device_id         CUDA device
-- @column context_id        CUDA context
-- @column green_context_id  green context (SM partition) it ran in; NULL outside any
-- @column stream_id         CUDA stream
-- @column api_name          the call that issued it (suffix _vNNNN stripped: cudaMemcpy, cudaMemcpy2D, ...)
-- @column nvtx_path         the innermost push/pop NVTX range around that call on its thread, as a path, a named domain's range as domain:text (NULL: none)
-- @display dur_ns, start_ns, src_kind, dst_kind, bytes, stream_id, api_name, nvtx_path
-- @alias cuda_memcpy_sync
-- @rows page
-- @requires memcpy
-- @traced memcpy
WITH page AS (
    SELECT * FROM nsys_memory_findings($run) WHERE rule = 'cuda_memcpy_sync'
    ORDER BY dur_ns DESC, start_ns, device_id, stream_id
    LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
)
SELECT p.dur_ns, p.start_ns, p.src_kind, p.dst_kind, p.bytes, p.pid, p.device_id, p.context_id,
       p.green_context_id, p.stream_id, p.api_name, r.path AS nvtx_path
FROM page p LEFT JOIN nvtx_ranges r ON r.run_id = $run AND r.range_id = p.nvtx_range_id
ORDER BY p.dur_ns DESC, p.start_ns, p.device_id, p.stream_id
