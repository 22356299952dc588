-- Where the Python threads' time goes, by function, from nsys's Python samples (nsys profile
-- --python-sampling=true, exported with --include-blobs=true; tracekit capture --python-samples):
-- py-spy's top as a table. A function's self samples found it running its own line (the
-- innermost frame); its total samples have it anywhere on the stack, each sample once however
-- deep it recurses. A function is keyed by its name and file, the file named as on any machine
-- (below site-packages, or the standard library's folder: torch/cuda/__init__.py; else the
-- file's name). The times are wall time estimated as samples times the run's sampling interval
-- (1 ms at nsys's default 1 kHz): nsys samples a thread in every state, so a function waiting in
-- the kernel (a lock, the disk, the GPU driver) has time too; running_pct says how much of its
-- self samples found the thread running (a CUDA synchronisation spins: running). A run captured
-- without Python samples is an error.
-- @param run     TEXT     run id or name (default: latest run)
-- @param thread  TEXT     only this thread's samples: its tid or its name (default: null)
-- @param range   TEXT     only samples taken inside NVTX ranges of this name on their own thread: :step, or step in the default domain (default: null)
-- @param order   TEXT     self: the functions running first; total: the callers first (one of: self, total) (default: self)
-- @param limit   INTEGER  rows to return; 0 = all (default: 20)
-- @column self_pct       the function's own samples, % of the samples asked (rounded to 0.1)
-- @column self_samples   samples that found the function itself running its code
-- @column self_ns        wall time in the function itself, ns (estimated: self samples x the sampling interval)
-- @column running_pct    its self samples that found the thread running (nsys's state Running), % (rounded to 0.1; NULL: no self samples)
-- @column total_pct      samples with the function on their stack, % of the samples asked (rounded to 0.1)
-- @column total_samples  samples with the function on their stack
-- @column total_ns       wall time in the function and what it called, ns (estimated: total samples x the interval)
-- @column threads        threads whose samples found it on their stack
-- @column function       the function (nsys names a module's top level <module>)
-- @column file           its file, as on any machine
-- @display self_pct, self_ns, running_pct, total_pct, total_ns, threads, function, file
-- @requires python_samples, python_frames
-- @traced python_samples
WITH asked AS (
    SELECT sample_id, stack_id, tid, thread_state FROM python_samples_asked('python-hotspots', $run, $thread, $range)
),
ordered AS (SELECT lower($order) AS by),
frames AS (SELECT * FROM python_stack_functions($run) WHERE stack_id IN (SELECT stack_id FROM asked)),
per_stack AS (  -- (the samples of each stack and thread first: far fewer rows than samples x frames)
    SELECT stack_id, tid, count(*) AS n, count(*) FILTER (WHERE thread_state = 'Running') AS running
    FROM asked GROUP BY stack_id, tid
),
counted AS (
    SELECT f.function, f.file, coalesce(sum(p.n) FILTER (WHERE f.innermost), 0)::BIGINT AS self_samples,
           coalesce(sum(p.running) FILTER (WHERE f.innermost), 0)::BIGINT AS running,
           sum(p.n)::BIGINT AS total_samples, count(DISTINCT p.tid) AS threads
    FROM per_stack p JOIN frames f USING (stack_id)
    GROUP BY ALL
),
n AS (SELECT count(*) AS samples, (SELECT interval_ns FROM python_sample_interval($run)) AS interval_ns FROM asked)
SELECT round1(self_samples * 100.0 / n.samples) AS self_pct, self_samples,
       round(self_samples * n.interval_ns)::BIGINT AS self_ns,
       round1(running * 100.0 / nullif(self_samples, 0)) AS running_pct,
       round1(total_samples * 100.0 / n.samples) AS total_pct, total_samples,
       round(total_samples * n.interval_ns)::BIGINT AS total_ns, threads, function, file
FROM counted, n, ordered
ORDER BY CASE WHEN ordered.by = 'self' THEN self_samples ELSE total_samples END DESC,
         CASE WHEN ordered.by = 'self' THEN total_samples ELSE self_samples END DESC, function, file
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
