-- Kernel time attributed to NVTX range paths (e.g. hstu.request/hstu.layer3/hstu_attention).
-- A kernel belongs to the innermost push/pop range enclosing the API call that launched
-- it, on the launching thread (graph replays: the cudaGraphLaunch call). Kernels
-- launched outside every push/pop range are under '(no range)', those inside start/end
-- ranges alone included (nvtx-kernels counts them in those ranges). `depth` cuts paths to
-- their first N levels of nesting, so hstu.layer0 and its children can be summed as one row.
-- @param run    TEXT     run id or name (default: latest run)
-- @param depth  INTEGER  path levels to keep; 0 = the full path (min: 0) (default: 0)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @column path              NVTX range path, '/'-separated (a named domain's range as domain:text)
-- @column launches          kernel launches under it
-- @column distinct_kernels  different kernel names
-- @column total_ns          summed kernel time, ns
-- @column avg_ns            mean kernel time, ns (rounded to 0.1)
-- @column time_pct          share of all kernel time in the run, % (rounded to 0.01)
-- @column top_kernel        the kernel with the most time under this path
-- @column top_kernel_ns     that kernel's time under this path, ns
-- @display time_pct, total_ns, launches, distinct_kernels, avg_ns, path, top_kernel
-- @requires nvtx_path_kernel_sum, nvtx_ranges
-- @traced nvtx_ranges, kernels
-- @needs  kernels
WITH RECURSIVE per_path AS (
    -- kernel time per full path and kernel (summed at ingest)
    SELECT coalesce(path, '(no range)') AS path, name, sum(launches) AS launches, sum(total_ns) AS ns
    FROM nvtx_path_kernel_sum
    WHERE run_id = $run
    GROUP BY 1, 2
), ranges AS (  -- (none read without a cut)
    SELECT range_id, parent_id, path FROM nvtx_ranges WHERE $depth > 0 AND run_id = $run
), up(path, range_id, depth) AS (
    -- paths below the cut: one range of each (ranges of a path share its ancestry) walks
    -- up by parent to its ancestor at level $depth, whose path is the cut one (not split
    -- at '/': a range name may contain one)
    SELECT path, min(range_id), arg_min(depth, range_id) FROM nvtx_ranges
    WHERE $depth > 0 AND run_id = $run AND depth >= $depth
    GROUP BY path
    UNION ALL
    SELECT up.path, r.parent_id, up.depth - 1
    FROM up JOIN ranges r USING (range_id)
    WHERE up.depth >= $depth
), cut AS (
    SELECT up.path, r.path AS cut_path
    FROM up JOIN ranges r USING (range_id)
    WHERE up.depth = $depth - 1
), per_kernel AS (
    SELECT coalesce(c.cut_path, p.path) AS path, p.name, sum(p.launches) AS launches, sum(p.ns) AS ns
    FROM per_path p LEFT JOIN cut c USING (path)
    GROUP BY 1, 2
)
SELECT path, sum(launches)::BIGINT AS launches, count(*) AS distinct_kernels,
       sum(ns)::BIGINT AS total_ns, round(sum(ns) / sum(launches), 1) AS avg_ns,
       round(100.0 * sum(ns) / sum(sum(ns)) OVER (), 2) AS time_pct,
       arg_max(name, ns) AS top_kernel, max(ns)::BIGINT AS top_kernel_ns
FROM per_kernel
GROUP BY path
ORDER BY total_ns DESC, path
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
