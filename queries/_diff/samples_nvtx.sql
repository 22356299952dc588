-- NVTX scope samples: one row per NVTX range instance of either run, keyed by its path
-- (texts from the outermost range down; a start/end range ended on another thread has no
-- path and is keyed by its name as a path would give it: its text, domain:text in a named
-- domain). The range's wall time; its GPU projection
-- (first GPU op start to last op end, NULL when it launched no GPU work: such instances
-- count, but not in the projection); and its kernel time: the summed durations of the
-- kernels launched inside it, its nested ranges included (each kernel counted under
-- the innermost push/pop range around its launch call, then added up the parent chain),
-- the sum `nsys stats -r nvtx_kern_sum` makes per range. Wall time and projection are
-- paced by the host (a projection spans the GPU's waits for launches too); kernel time
-- is not.
-- @param base  INTEGER  base run id
-- @param new   INTEGER  new run id
-- @column side   0 = base run, 1 = new run
-- @column key    NVTX path (a cross-thread range: its name)
-- @column value  range duration, ns
-- @column proj   projected GPU time (first op start to last op end), ns; NULL without GPU work
-- @column kern   kernel time launched inside the range and its nested ranges, ns; NULL without kernels
WITH RECURSIVE own AS (
    SELECT run_id, nvtx_range_id AS range_id, sum(total_ns) AS ns
    FROM nvtx_kernel_sum  -- kernel time per innermost range, summed at ingest
    WHERE run_id IN ($base, $new) AND nvtx_range_id IS NOT NULL
    GROUP BY ALL
), up(run_id, range_id, ns) AS (
    SELECT run_id, range_id, ns FROM own
    UNION ALL
    SELECT u.run_id, r.parent_id, u.ns
    FROM up u JOIN nvtx_ranges r ON r.run_id = u.run_id AND r.range_id = u.range_id
    WHERE r.parent_id IS NOT NULL
), kern AS (
    SELECT run_id, range_id, sum(ns) AS ns FROM up GROUP BY ALL
)
SELECT s.side, coalesce(r.path, CASE WHEN coalesce(r.domain, '') = '' THEN r.text ELSE r.domain || ':' || r.text END) AS key,
       r.dur_ns AS value, r.proj_dur_ns AS proj, g.ns AS kern
FROM (VALUES (0, $base), (1, $new)) s(side, run_id)
JOIN nvtx_ranges r ON r.run_id = s.run_id
LEFT JOIN kern g ON g.run_id = r.run_id AND g.range_id = r.range_id
WHERE r.run_id IN ($base, $new) AND (r.path IS NOT NULL OR r.text IS NOT NULL)
