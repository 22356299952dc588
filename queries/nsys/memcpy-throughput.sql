-- GPU memory copies and sets by direction and by the memory on each side (pageable, pinned,
-- device, managed, ...): how many bytes moved, in how long, and at what throughput.
-- A host-to-device copy from pageable memory goes through a staging buffer of the driver
-- (and a cudaMemcpyAsync from it does not overlap the host): the same bytes from pinned
-- memory move several times faster, which the op's name alone ('[CUDA memcpy
-- Host-to-Device]', as memcpy-time and memcpy-size group them) does not say.
-- throughput_bytes_per_s is the bytes over the summed time (what the copies achieved
-- together); med_throughput_bytes_per_s the median of each op's own bytes over its
-- time (an op of 0 ns is left out of it). time_pct is the share of all memory-op time.
-- @param run    TEXT     run id or name (default: latest run)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @column operation                   '[CUDA memcpy Host-to-Device]', '[CUDA memset]', ...
-- @column src_kind                    memory copied from (Pageable, Pinned, Device, Managed, ...); a memset: NULL
-- @column dst_kind                    memory copied to; a memset: the memory set
-- @column count                       operations
-- @column total_bytes                 bytes moved (copied or set)
-- @column total_ns                    summed duration, ns
-- @column throughput_bytes_per_s      total_bytes over total_ns, byte/s
-- @column med_throughput_bytes_per_s  median of the operations' own throughput, byte/s
-- @column min_throughput_bytes_per_s  slowest operation's throughput, byte/s
-- @column max_throughput_bytes_per_s  fastest operation's throughput, byte/s
-- @column time_pct                    share of total memory-op time, % (rounded to 0.1)
-- @display time_pct, total_ns, count, total_bytes, throughput_bytes_per_s, med_throughput_bytes_per_s, src_kind, dst_kind, operation
-- @requires memcpy, memset
-- @traced memcpy, memset
WITH ops AS (
    SELECT operation, src_kind, dst_kind, bytes, dur_ns FROM memcpy WHERE run_id = $run AND operation IS NOT NULL
    UNION ALL
    SELECT operation, NULL, mem_kind, bytes, dur_ns FROM memset WHERE run_id = $run
), s AS (
    SELECT operation, src_kind, dst_kind, count(*) AS count, sum(bytes) AS total_bytes, sum(dur_ns) AS total_ns,
           quantile_cont(bytes * 1e9 / dur_ns, [0.5]) FILTER (WHERE dur_ns > 0) AS q,
           min(bytes * 1e9 / dur_ns) FILTER (WHERE dur_ns > 0) AS min_tp,
           max(bytes * 1e9 / dur_ns) FILTER (WHERE dur_ns > 0) AS max_tp
    FROM ops GROUP BY ALL
)
SELECT operation, src_kind, dst_kind, count, total_bytes::BIGINT AS total_bytes, total_ns::BIGINT AS total_ns,
       CASE WHEN total_ns > 0 THEN total_bytes * 1e9 / total_ns END AS throughput_bytes_per_s,
       q[1] AS med_throughput_bytes_per_s, min_tp AS min_throughput_bytes_per_s,
       max_tp AS max_throughput_bytes_per_s,
       round1(total_ns * 100.0 / nullif(sum(total_ns) OVER (), 0)) AS time_pct
FROM s
ORDER BY total_ns DESC, operation, src_kind NULLS FIRST, dst_kind
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
