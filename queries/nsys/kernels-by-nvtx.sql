-- Kernel time attributed to NVTX range paths (e.g. hstu.request/hstu.layer3/hstu_attention).
-- A kernel belongs to the innermost push/pop range enclosing the API call that launched
-- it, on the launching thread (graph replays: the cudaGraphLaunch call). Kernels
-- launched outside every range are under '(no range)'. `depth` cuts paths to their
-- first N levels, so hstu.layer0 and its children can be summed as one row.
-- @param run    TEXT     run id or name (default: latest run)
-- @param depth  INTEGER  path levels to keep; 0 = the full path (default: 0)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @column path              NVTX range path, '/'-separated
-- @column launches          kernel launches under it
-- @column distinct_kernels  different kernel names
-- @column total_ns          summed kernel time, ns
-- @column avg_ns            mean kernel time, ns
-- @column time_pct          share of all kernel time in the run, %
-- @column top_kernel        the kernel with the most time under this path
-- @column top_kernel_ns     that kernel's time under this path, ns
-- @requires nvtx_kernel_sum, nvtx_ranges
WITH k AS (
    SELECT s.name, s.launches, s.total_ns,
           CASE WHEN r.path IS NULL THEN '(no range)'
                WHEN $depth > 0 THEN array_to_string(list_slice(string_split(r.path, '/'), 1, $depth), '/')
                ELSE r.path END AS path
    FROM nvtx_kernel_sum s
    LEFT JOIN nvtx_ranges r ON r.run_id = s.run_id AND r.range_id = s.nvtx_range_id
    WHERE s.run_id = $run
), per_kernel AS (
    SELECT path, name, sum(launches) AS launches, sum(total_ns) AS ns FROM k GROUP BY path, name
)
SELECT path, sum(launches)::BIGINT AS launches, count(*) AS distinct_kernels,
       sum(ns)::BIGINT AS total_ns, round(sum(ns) / sum(launches), 1) AS avg_ns,
       round(100.0 * sum(ns) / sum(sum(ns)) OVER (), 2) AS time_pct,
       arg_max(name, ns) AS top_kernel, max(ns)::BIGINT AS top_kernel_ns
FROM per_kernel
GROUP BY path
ORDER BY total_ns DESC, path
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
