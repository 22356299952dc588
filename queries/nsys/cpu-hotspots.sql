-- Where the CPU's time goes, by function, from nsys's CPU samples (nsys profile
-- --sample=process-tree, its default on Linux; tracekit capture --cpu-samples): nsys's
-- bottom-up view as a table. A function's self samples hit an instruction of its own; its
-- total samples have it anywhere on their stack (itself, or a function it called), each
-- sample once however deep it recurses. nsys unwinds the stack of one sample in
-- --samples-per-backtrace (default 4): self_pct is a share of all the samples asked,
-- total_pct of those with a stack. The times are CPU time estimated as samples times the
-- run's sampling interval (the median time between two samples of a thread: about 2 ms with
-- nsys's default timer); nsys does not sample every moment on a CPU, so they can fall short of
-- the scheduler's time (cpu-threads has both). A function nsys could not resolve is its
-- address in its module; the markers nsys puts at the bottom of a stack ('[Broken
-- backtraces]', '[Max depth]') are not callers and are left out. A run captured without CPU
-- sampling is an error.
-- @param run     TEXT     run id or name (default: latest run)
-- @param thread  TEXT     only this thread's samples: its tid or its name (default: null)
-- @param range   TEXT     only samples taken inside NVTX ranges of this name on their own thread: :step, or step in the default domain (default: null)
-- @param order   TEXT     self: the bottom-up view; total: the callers first (one of: self, total) (default: self)
-- @param limit   INTEGER  rows to return; 0 = all (default: 20)
-- @column self_pct       the function's own samples, % of the samples asked (rounded to 0.1)
-- @column self_samples   samples that hit the function itself
-- @column self_ns        CPU time in the function itself, ns (estimated: self samples x the sampling interval)
-- @column total_pct      samples with the function on their stack, % of the asked samples with a stack (rounded to 0.1)
-- @column total_samples  samples with a stack that have the function on it
-- @column total_ns       CPU time in the function and what it called, ns (estimated: total_pct of the asked samples' time)
-- @column threads        threads whose samples hit the function itself
-- @column function       the function as nsys resolved it (an address where it could not)
-- @column module         the executable or library it is in
-- @display self_pct, self_ns, total_pct, total_ns, threads, function, module
-- @requires cpu_samples, cpu_sample_frames
-- @traced cpu_samples
WITH asked AS (SELECT * FROM cpu_samples_asked('cpu-hotspots', $run, $thread, $range)),
ordered AS (SELECT lower($order) AS by),
frames AS (
    SELECT f.sample_id, f.depth, f.function, f.module, a.tid, a.stacked
    FROM cpu_sample_frames f JOIN asked a USING (sample_id)
    WHERE f.run_id = $run AND NOT stack_marker(f.depth, f.function)
),
own AS (
    SELECT function, module, count(*) AS self_samples, count(DISTINCT tid) AS threads
    FROM frames WHERE depth = 0 GROUP BY function, module
),
stacks AS (
    SELECT function, module, count(DISTINCT sample_id) AS total_samples
    FROM frames WHERE stacked GROUP BY function, module
),
n AS (
    SELECT count(*) AS samples, count(*) FILTER (WHERE stacked) AS stacked, (SELECT interval_ns FROM cpu_sample_interval($run)) AS interval_ns
    FROM asked
)
SELECT round1(coalesce(o.self_samples, 0) * 100.0 / n.samples) AS self_pct,
       coalesce(o.self_samples, 0) AS self_samples,
       round(coalesce(o.self_samples, 0) * n.interval_ns)::BIGINT AS self_ns,
       round1(coalesce(s.total_samples, 0) * 100.0 / nullif(n.stacked, 0)) AS total_pct,
       coalesce(s.total_samples, 0) AS total_samples,
       round(coalesce(s.total_samples, 0) * n.samples * n.interval_ns / nullif(n.stacked, 0))::BIGINT AS total_ns,
       coalesce(o.threads, 0) AS threads, function, module
FROM own o FULL JOIN stacks s USING (function, module), n, ordered
ORDER BY CASE WHEN ordered.by = 'self' THEN self_samples ELSE total_samples END DESC,
         CASE WHEN ordered.by = 'self' THEN total_samples ELSE self_samples END DESC, function, module
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
