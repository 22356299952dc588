-- CPU time by thread, from nsys's CPU samples (nsys profile --sample=process-tree, its
-- default on Linux; tracekit capture --cpu-samples) and, where nsys traced the threads'
-- scheduling (--cpuctxsw=process-tree, which comes with it), their time on the CPUs: which
-- threads burn the CPU (the loop that launches the GPU's work, a data loader, a library's
-- busy-polling worker), how busy each kept its CPU (a thread near 100 % is CPU-bound: it goes
-- no faster without less host work) and the function each spends it in most. The sampled CPU
-- time is the samples times the run's sampling interval (the median time between two samples
-- of a thread); the scheduler's is exact. nsys does not sample every moment a thread is on a
-- CPU: on the fixtures' threads that call CUDA the samples' time ran 11 % below the scheduler's
-- (nsys took no sample of them for stretches of their first 250 ms, while CUDA and nsys's
-- injection started up; within 1 % on the other threads), and on ten public exports' busiest
-- threads 25 % to 107 % of it.
-- A thread scheduled but never sampled has a row with no samples. A run captured without CPU
-- sampling is an error.
-- @param run    TEXT     run id or name (default: latest run)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @column cpu_pct           the thread's samples, % of the run's (rounded to 0.1)
-- @column samples           samples of the thread
-- @column cpu_ns            its CPU time from the samples, ns (estimated: samples x the sampling interval)
-- @column on_cpu_ns         its time on the CPUs from the scheduler, ns (NULL: scheduling not traced)
-- @column busy_pct          on_cpu_ns, % of the thread's span from its first scheduling to its last (rounded to 0.1)
-- @column switches          times the scheduler took it off a CPU
-- @column pid               process id
-- @column tid               thread id
-- @column thread            the thread's name as nsys recorded it
-- @column top_function      the function the most of its samples hit (NULL: a thread never sampled)
-- @column top_function_pct  that function's samples, % of the thread's (rounded to 0.1; NULL: never sampled)
-- @column first_ns          its first sample or scheduling, ns
-- @column last_ns           its last sample or scheduling, ns
-- @display cpu_pct, cpu_ns, on_cpu_ns, busy_pct, switches, pid, tid, thread, top_function, top_function_pct
-- @requires cpu_samples, cpu_sample_frames, thread_sched, threads
-- @traced cpu_samples
WITH sampled AS (
    SELECT global_tid, count(*) AS samples, min(ts_ns) AS first_ns, max(ts_ns) AS last_ns
    FROM cpu_samples WHERE run_id = $run GROUP BY global_tid
),
spans AS (  -- each time on a CPU: a sched-in to the thread's next row, its sched-out
    SELECT global_tid, ts_ns, sched_in,
           lead(ts_ns) OVER w AS next_ns, lead(sched_in) OVER w AS next_in
    FROM thread_sched WHERE run_id = $run
    WINDOW w AS (PARTITION BY global_tid ORDER BY ts_ns, sched_in)
),
scheduled AS (
    SELECT global_tid, sum(next_ns - ts_ns) FILTER (WHERE sched_in AND NOT next_in) AS on_cpu_ns,
           count(*) FILTER (WHERE NOT sched_in) AS switches, min(ts_ns) AS first_ns, max(ts_ns) AS last_ns
    FROM spans GROUP BY global_tid
),
hits AS (
    SELECT s.global_tid, f.function, count(*) AS n
    FROM cpu_samples s JOIN cpu_sample_frames f ON f.run_id = s.run_id AND f.sample_id = s.sample_id AND f.depth = 0
    WHERE s.run_id = $run GROUP BY ALL
),
top AS (SELECT global_tid, arg_max(function, (n, function)) AS function, max(n) AS n FROM hits GROUP BY global_tid),
names AS (
    SELECT global_tid, string_agg(DISTINCT name, ', ' ORDER BY name) AS thread
    FROM threads WHERE run_id = $run GROUP BY global_tid
),
t AS (
    SELECT global_tid, coalesce(p.samples, 0) AS samples, c.on_cpu_ns, c.switches,
           100.0 * c.on_cpu_ns / nullif(c.last_ns - c.first_ns, 0) AS busy_pct,
           least(p.first_ns, c.first_ns) AS first_ns, greatest(p.last_ns, c.last_ns) AS last_ns
    FROM sampled p FULL JOIN scheduled c USING (global_tid)
)
SELECT round1(t.samples * 100.0 / sum(t.samples) OVER ()) AS cpu_pct, t.samples,
       round(t.samples * (SELECT interval_ns FROM cpu_sample_interval($run)))::BIGINT AS cpu_ns,
       t.on_cpu_ns::BIGINT AS on_cpu_ns, round1(t.busy_pct) AS busy_pct, t.switches,
       ((t.global_tid >> 24) & 16777215)::INTEGER AS pid, (t.global_tid & 16777215)::INTEGER AS tid, names.thread,
       top.function AS top_function, round1(top.n * 100.0 / nullif(t.samples, 0)) AS top_function_pct,
       t.first_ns, t.last_ns
FROM t LEFT JOIN top USING (global_tid) LEFT JOIN names USING (global_tid)
ORDER BY t.samples DESC, t.on_cpu_ns DESC NULLS LAST, pid, tid
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
