-- GPU memory operations (memcpy by direction, memset) by bytes moved. Same numbers as
-- `nsys stats -r cuda_gpu_mem_size_sum` (which prints them in MB = 1e6 bytes).
-- @param run    TEXT     run id or name (default: latest run)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @column operation     '[CUDA memcpy Host-to-Device]', '[CUDA memset]', ...
-- @column count         operations
-- @column total_bytes   summed size, bytes
-- @column avg_bytes     mean size, bytes
-- @column med_bytes     median size, bytes
-- @column min_bytes     smallest, bytes
-- @column max_bytes     largest, bytes
-- @column stddev_bytes  sample standard deviation, bytes
-- @display total_bytes, count, avg_bytes, med_bytes, min_bytes, max_bytes, stddev_bytes, operation
-- @alias cuda_gpu_mem_size_sum
-- @requires memcpy, memset
-- @traced memcpy, memset
WITH ops AS (
    SELECT operation, bytes FROM memcpy WHERE run_id = $run AND operation IS NOT NULL
    UNION ALL
    SELECT operation, bytes FROM memset WHERE run_id = $run
)
SELECT operation, count(*) AS count, sum(bytes)::BIGINT AS total_bytes, avg(bytes) AS avg_bytes,
       median(bytes) AS med_bytes, min(bytes) AS min_bytes, max(bytes) AS max_bytes,
       coalesce(stddev_samp(bytes), 0) AS stddev_bytes
FROM ops
GROUP BY operation
ORDER BY total_bytes DESC, operation
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
