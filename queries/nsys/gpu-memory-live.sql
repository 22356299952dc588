-- The allocations that made up a kind of GPU memory at its peak, or that were never freed: what
-- to shrink when a program runs out of memory, and what leaks. With at=peak, per process and
-- device, the allocations live at the moment that kind of memory first reached its most (gpu-memory's
-- peak_bytes); with at=end, those still allocated when the capture ended. Each with the API call and
-- NVTX path that allocated it and how long it had lived. nsys records the bytes asked for (the
-- allocator rounds them up to its granularity). A run captured without CUDA memory usage tracing is
-- an error.
-- @param run    TEXT     run id or name (default: latest run)
-- @param at     TEXT     peak: the allocations live at the peak; end: those never freed (one of: peak, end) (default: peak)
-- @param kind   TEXT     the kind of memory: Device, Pinned, Managed, Device Static, ... (default: Device)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @column bytes          the allocation's size, B
-- @column share_pct      its share of the kind's live bytes at that moment, % (rounded to 0.1)
-- @column live_bytes     the kind's live bytes at that moment, B
-- @column api_name       the call that allocated it (NULL: none, static memory)
-- @column nvtx_path      the NVTX path of the innermost range around that call, a named domain's range as domain:text (NULL: outside every range)
-- @column allocated_ns   when it was allocated, ns
-- @column age_ns         how long it had been allocated at that moment (at the end: at the capture's last memory event), ns
-- @column pool           allocated from a stream-ordered pool (cudaMallocAsync)
-- @column name           the variable's name (static memory), else NULL
-- @column address        its virtual address
-- @column pid            process id
-- @column device_id      CUDA device
-- @column tid            thread of the allocating call
-- @column at_ns          the moment: the peak, or the capture's last memory event, ns
-- @display bytes, share_pct, api_name, nvtx_path, age_ns, pool, name, address, device_id
-- @requires gpu_memory, nvtx_ranges
-- @traced gpu_memory
WITH ev AS (
    SELECT *, max(live_bytes) OVER (PARTITION BY global_pid, device_id) AS peak
    FROM gpu_memory_events($run) WHERE memory_kind = memory_kind_asked('gpu-memory-live', $kind)
),
moment AS (  -- per process and device: the first event at the most bytes live, or the last event
    SELECT e.global_pid, e.device_id, e.seq AS at_seq, e.ts_ns AS at_ns, e.live_bytes
    FROM ev e JOIN (SELECT global_pid, device_id,
                           CASE WHEN lower($at) = 'end' THEN max(seq) ELSE min(seq) FILTER (WHERE live_bytes = peak) END AS seq
                    FROM ev GROUP BY global_pid, device_id) m USING (global_pid, device_id, seq)
)
SELECT a.bytes, round(100.0 * a.bytes / nullif(t.live_bytes, 0), 1) AS share_pct, t.live_bytes, a.api_name,
       a.nvtx_path, a.ts_ns AS allocated_ns, t.at_ns - a.ts_ns AS age_ns, a.pool_address IS NOT NULL AS pool,
       a.name, hex_address(a.address) AS address, a.pid, a.device_id, a.launch_tid AS tid, t.at_ns
FROM ev a JOIN moment t ON t.global_pid = a.global_pid AND t.device_id = a.device_id
WHERE a.operation = 'allocation' AND a.seq <= t.at_seq
  AND (CASE WHEN lower($at) = 'end' THEN a.freed_seq IS NULL ELSE a.freed_seq IS NULL OR a.freed_seq > t.at_seq END)
ORDER BY a.bytes DESC, a.ts_ns, a.address
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
