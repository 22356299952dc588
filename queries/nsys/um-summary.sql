-- Unified Memory per page address: the bytes migrated to and from the GPU, the CPU and GPU
-- page faults, and the migration throughput, fastest first. Same numbers as `nsys stats -r
-- um_sum` (its default rows=10 is limit 10 here): an address is a migration's base virtual
-- address or a faulting page's, joined where they are equal; throughput_bytes_per_s is nsys's
-- figure, the bytes times 10^9 over the summed migration time rounded down to an integer (its
-- SQLite integer division: a little below the bytes over the time, which migration_ns gives).
-- Many faults on few addresses, or migrations both ways on one address, are pages that
-- bounce between CPU and GPU: cudaMemPrefetchAsync or cudaMemAdvise keeps them where they
-- are used. A run captured without `--cuda-um-cpu-page-faults=true
-- --cuda-um-gpu-page-faults=true` is an error (nsys refuses the report too).
-- @param run    TEXT     run id or name (default: latest run)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @column address                 virtual address, hex ('0x7F6D3A101000')
-- @column htod_bytes              bytes migrated host to device (Unified Host-to-Device); NULL: none
-- @column dtoh_bytes              bytes migrated device to host (Unified Device-to-Host); NULL: none
-- @column cpu_faults              CPU page faults on the address; NULL: none
-- @column gpu_faults              GPU page faults on the address; NULL: none
-- @column throughput_bytes_per_s  migrated bytes per second, as nsys computes it; NULL: no migration
-- @column migration_ns            summed time of the address's migrations, ns; NULL: none
-- @display address, htod_bytes, dtoh_bytes, cpu_faults, gpu_faults, throughput_bytes_per_s, migration_ns
-- @alias um_sum
-- @requires memcpy, um_cpu_faults, um_gpu_faults
-- @traced memcpy, um_cpu_faults, um_gpu_faults
WITH faults AS (
    SELECT coalesce(c.address, g.address) AS address, c.faults AS cpu_faults, g.faults AS gpu_faults
    FROM (SELECT address, count(*) AS faults FROM um_cpu_faults WHERE run_id = $run GROUP BY address) c
    FULL JOIN (SELECT address, sum(faults)::BIGINT AS faults FROM um_gpu_faults WHERE run_id = $run GROUP BY address) g
        ON g.address = c.address
), migrations AS (
    SELECT virtual_address AS address,
           sum(bytes) FILTER (WHERE copy_kind = 11)::BIGINT AS htod_bytes,
           sum(bytes) FILTER (WHERE copy_kind = 12)::BIGINT AS dtoh_bytes,
           sum(dur_ns)::BIGINT AS migration_ns
    FROM memcpy
    WHERE run_id = $run AND copy_kind IN (11, 12)
    GROUP BY virtual_address
), joined AS (
    SELECT coalesce(f.address, m.address) AS addr, m.htod_bytes, m.dtoh_bytes, f.cpu_faults, f.gpu_faults,
           (coalesce(m.htod_bytes, 0) + coalesce(m.dtoh_bytes, 0)) * (1000000000 // nullif(m.migration_ns, 0))
               AS throughput_bytes_per_s,
           m.migration_ns
    FROM faults f
    FULL JOIN migrations m ON m.address = f.address
)
SELECT hex_address(addr) AS address, htod_bytes, dtoh_bytes, cpu_faults, gpu_faults, throughput_bytes_per_s, migration_ns
FROM joined
ORDER BY throughput_bytes_per_s DESC NULLS LAST, addr
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
