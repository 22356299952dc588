-- GPU memory by the NVTX range that allocated it: per NVTX path (the innermost range around the API
-- call, with its enclosing ones) and kind of memory, what its calls allocated and freed, and what of
-- it was never freed: the step that leaks, the phase that allocates the most. The calls' memory is
-- counted in their innermost range alone (a parent's row does not include its children's).
-- Allocations made outside every range, and a module's static memory, are the path NULL. A run
-- captured without CUDA memory usage tracing is an error.
-- @param run    TEXT     run id or name (default: latest run)
-- @param kind   TEXT     only this kind of memory: Device, Pinned, Managed, ... (default: null)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @column nvtx_path        the NVTX path of the innermost range around the calls, a named domain's range as domain:text (NULL: none)
-- @column memory_kind      Device, Pinned, Managed, Device Static, ...
-- @column allocations      allocations its calls made
-- @column allocated_bytes  bytes they allocated, B
-- @column largest_bytes    the largest of them, B (NULL: none allocated)
-- @column frees            frees its calls made
-- @column freed_bytes      bytes they freed, B
-- @column unfreed          its allocations never freed (by the end of the capture)
-- @column unfreed_bytes    their bytes, B
-- @column held_ns          the median time its freed allocations lived, ns (NULL: none freed)
-- @display nvtx_path, memory_kind, allocations, allocated_bytes, largest_bytes, frees, freed_bytes, unfreed, unfreed_bytes, held_ns
-- @requires gpu_memory, nvtx_ranges
-- @traced gpu_memory
SELECT nvtx_path, memory_kind,
       count(*) FILTER (WHERE operation = 'allocation') AS allocations,
       coalesce(sum(bytes) FILTER (WHERE operation = 'allocation'), 0)::BIGINT AS allocated_bytes,
       max(bytes) FILTER (WHERE operation = 'allocation') AS largest_bytes,
       count(*) FILTER (WHERE operation = 'free' AND matched) AS frees,
       coalesce(sum(bytes) FILTER (WHERE operation = 'free' AND matched), 0)::BIGINT AS freed_bytes,
       count(*) FILTER (WHERE operation = 'allocation' AND freed_seq IS NULL) AS unfreed,
       coalesce(sum(bytes) FILTER (WHERE operation = 'allocation' AND freed_seq IS NULL), 0)::BIGINT AS unfreed_bytes,
       median(freed_ns - ts_ns) FILTER (WHERE operation = 'allocation') AS held_ns
FROM gpu_memory_events($run)
WHERE $kind IS NULL OR memory_kind = memory_kind_asked('nvtx-memory', $kind)
GROUP BY nvtx_path, memory_kind
ORDER BY unfreed_bytes DESC, allocated_bytes DESC, nvtx_path NULLS LAST, memory_kind
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
