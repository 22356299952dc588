-- Unified Memory in all, one row: the bytes migrated each way, the CPU and GPU page faults,
-- and the range of virtual addresses they touched. Same numbers as `nsys stats -r
-- um_total_sum`, except that a kind with none counts 0 and the address range spans the kinds
-- there are (nsys prints blanks there). A run captured without `--cuda-um-cpu-page-faults=true
-- --cuda-um-gpu-page-faults=true` is an error (nsys refuses the report too).
-- @param run  TEXT  run id or name (default: latest run)
-- @column htod_bytes   bytes migrated host to device (Unified Host-to-Device)
-- @column dtoh_bytes   bytes migrated device to host (Unified Device-to-Host)
-- @column cpu_faults   CPU page faults
-- @column gpu_faults   GPU page faults
-- @column min_address  lowest address of a migration or fault, hex; NULL: none
-- @column max_address  highest, hex
-- @column htod_migrations  host-to-device migrations
-- @column dtoh_migrations  device-to-host migrations
-- @column migration_ns     summed time of the migrations, ns
-- @display htod_bytes, dtoh_bytes, cpu_faults, gpu_faults, min_address, max_address, htod_migrations, dtoh_migrations, migration_ns
-- @alias um_total_sum
-- @requires memcpy, um_cpu_faults, um_gpu_faults
-- @traced memcpy, um_cpu_faults, um_gpu_faults
WITH m AS (
    SELECT coalesce(sum(bytes) FILTER (WHERE copy_kind = 11), 0)::BIGINT AS htod_bytes,
           coalesce(sum(bytes) FILTER (WHERE copy_kind = 12), 0)::BIGINT AS dtoh_bytes,
           count(*) FILTER (WHERE copy_kind = 11) AS htod_migrations,
           count(*) FILTER (WHERE copy_kind = 12) AS dtoh_migrations,
           coalesce(sum(dur_ns), 0)::BIGINT AS migration_ns,
           min(virtual_address) AS lo, max(virtual_address) AS hi
    FROM memcpy WHERE run_id = $run AND copy_kind IN (11, 12)
), c AS (
    SELECT count(*) AS cpu_faults, min(address) AS lo, max(address) AS hi FROM um_cpu_faults WHERE run_id = $run
), g AS (
    SELECT coalesce(sum(faults), 0)::BIGINT AS gpu_faults, min(address) AS lo, max(address) AS hi
    FROM um_gpu_faults WHERE run_id = $run
)
SELECT m.htod_bytes, m.dtoh_bytes, c.cpu_faults, g.gpu_faults,
       hex_address(least(m.lo, c.lo, g.lo)) AS min_address, hex_address(greatest(m.hi, c.hi, g.hi)) AS max_address,
       m.htod_migrations, m.dtoh_migrations, m.migration_ns
FROM m, c, g
