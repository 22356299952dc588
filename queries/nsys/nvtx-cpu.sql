-- The CPU time inside each NVTX range, from nsys's CPU samples: per NVTX path, the samples
-- its thread took while a range of that path was open, nested ranges included (as nsys stats
-- nvtx_kern_sum counts a kernel in every enclosing range), and the function most of them hit.
-- Host work that wall time hides: a range's wall time also holds the waits for the GPU and the
-- host's pace, its samples only the CPU it used. CPU time is the samples times the run's
-- sampling interval (the median time between two samples of a thread). Push/pop ranges only
-- (a start/end range has no path). A run captured without CPU sampling is an error; one
-- without NVTX ranges, an empty answer.
-- @param run    TEXT     run id or name (default: latest run)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @column path              NVTX path: texts from the outermost range down, '/'-separated (a named domain's range as domain:text)
-- @column samples           samples taken inside the path's ranges
-- @column cpu_ns            CPU time inside them, ns (estimated: samples x the sampling interval)
-- @column cpu_pct           the samples, % of all the run's samples (rounded to 0.1)
-- @column top_function      the function most of the samples hit
-- @column top_function_pct  its samples, % of the path's (rounded to 0.1)
-- @display path, cpu_ns, cpu_pct, top_function, top_function_pct
-- @requires cpu_samples, cpu_sample_frames, nvtx_ranges
-- @traced cpu_samples, nvtx_ranges
WITH p AS (SELECT * FROM cpu_sample_paths($run)),
hits AS (
    SELECT p.path, f.function, count(*) AS n
    FROM p JOIN cpu_sample_frames f ON f.run_id = $run AND f.sample_id = p.sample_id AND f.depth = 0
    GROUP BY ALL
),
top AS (SELECT path, arg_max(function, (n, function)) AS function, max(n) AS n FROM hits GROUP BY path),
per AS (SELECT path, count(*) AS samples FROM p GROUP BY path)
SELECT per.path, per.samples,
       round(per.samples * (SELECT interval_ns FROM cpu_sample_interval($run)))::BIGINT AS cpu_ns,
       round1(per.samples * 100.0 / (SELECT count(*) FROM cpu_samples WHERE run_id = $run)) AS cpu_pct,
       top.function AS top_function, round1(top.n * 100.0 / per.samples) AS top_function_pct
FROM per LEFT JOIN top USING (path)
ORDER BY per.samples DESC, per.path
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
