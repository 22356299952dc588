-- GPU memory live over time: one row per allocation or free, with the bytes of its kind of memory
-- live after it in its process on its device (the step line of the gpu-memory chart), the call that
-- made it and its NVTX path. A free of memory allocated before the capture began leaves live_bytes
-- as it was. A run captured without CUDA memory usage tracing is an error.
-- @param run    TEXT     run id or name (default: latest run)
-- @param kind   TEXT     only this kind of memory: Device, Pinned, Managed, ... (default: null)
-- @param limit  INTEGER  rows to return; 0 = all (default: 0)
-- @column ts_ns        when, ns
-- @column live_bytes   the kind's bytes live after it, B
-- @column operation    allocation or free
-- @column bytes        the allocation's size, B
-- @column memory_kind  Device, Pinned, Managed, Device Static, ...
-- @column device_id    CUDA device
-- @column pid          process id
-- @column api_name     the call that made it (NULL: none)
-- @column nvtx_path    the NVTX path of the innermost range around that call, a named domain's range as domain:text (NULL: none)
-- @column pool         from a stream-ordered pool (cudaMallocAsync)
-- @column address      the allocation's virtual address
-- @display ts_ns, live_bytes, operation, bytes, memory_kind, device_id, api_name, nvtx_path
-- @requires gpu_memory, nvtx_ranges
-- @traced gpu_memory
SELECT ts_ns, live_bytes, operation, bytes, memory_kind, device_id, pid, api_name, nvtx_path,
       pool_address IS NOT NULL AS pool, hex_address(address) AS address
FROM gpu_memory_events($run)
WHERE $kind IS NULL OR memory_kind = memory_kind_asked('gpu-memory-timeline', $kind)
ORDER BY seq
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
