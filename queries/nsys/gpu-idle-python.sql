-- What the Python threads were doing while a GPU sat idle: the Python samples taken inside the
-- device's idle gaps (idle-gaps: no kernel, copy, memset or whole graph launch running, between
-- its first op and its last), by function, as python-hotspots counts them. A launch-bound loop
-- starves the GPU in the host code it runs between launches: that code is here, with the share
-- of its own time (its samples between the device's first op and last) the GPU spent idle
-- (idle_share_pct: ~100 for code that never overlaps GPU work, the preparation of a batch between
-- a synchronisation and the next launch). The times are wall time, samples times the run's
-- sampling interval. A run captured without Python samples, or without CUDA, is an error.
-- @param run     TEXT     run id or name (default: latest run)
-- @param thread  TEXT     only this thread's samples: its tid or its name (default: null)
-- @param range   TEXT     only samples taken inside NVTX ranges of this name on their own thread: :step, or step in the default domain (default: null)
-- @param order   TEXT     self: the functions running first; total: the callers first (one of: self, total) (default: self)
-- @param limit   INTEGER  rows to return; 0 = all (default: 20)
-- @column device_id       CUDA device
-- @column self_pct        the function's own samples in the device's idle gaps, % of all the samples asked in them (rounded to 0.1)
-- @column self_ns         wall time in the function itself while the device was idle, ns (estimated: samples x the interval)
-- @column total_pct       samples in the idle gaps with the function on their stack, % of those asked in them (rounded to 0.1)
-- @column total_ns        wall time in the function and what it called while the device was idle, ns (estimated)
-- @column idle_share_pct  of the function's samples (on the stack) between the device's first op and last, % taken in its idle gaps (rounded to 0.1)
-- @column function        the function (nsys names a module's top level <module>)
-- @column file            its file, as on any machine
-- @display device_id, self_pct, self_ns, total_pct, total_ns, idle_share_pct, function, file
-- @requires python_samples, python_frames, kernels, memcpy, memset, graph_execs
-- @traced python_samples, kernels
WITH asked AS (
    SELECT sample_id, stack_id, ts_ns FROM python_samples_asked('gpu-idle-python', $run, $thread, $range)
),
ordered AS (SELECT lower($order) AS by),
ops AS (SELECT device_id, start_ns, coalesce(device_gap_ns, 0) AS gap_ns FROM gpu_ops WHERE run_id = $run),
spans AS (SELECT device_id, min(start_ns) AS first_ns, max(start_ns) AS last_ns FROM ops GROUP BY device_id),
placed AS (  -- (each sample in each device's span, and whether it fell in the gap before the device's next op)
    SELECT x.device_id, x.sample_id, x.stack_id, x.ts_ns >= o.start_ns - o.gap_ns AS idle
    FROM (SELECT d.device_id, a.* FROM asked a JOIN spans d ON a.ts_ns > d.first_ns AND a.ts_ns < d.last_ns) x
    ASOF JOIN ops o ON o.device_id = x.device_id AND x.ts_ns < o.start_ns
),
per_stack AS (
    SELECT device_id, stack_id, count(*) FILTER (WHERE idle) AS idle, count(*) AS n
    FROM placed GROUP BY device_id, stack_id
),
frames AS (SELECT * FROM python_stack_functions($run) WHERE stack_id IN (SELECT stack_id FROM per_stack)),
counted AS (
    SELECT p.device_id, f.function, f.file, coalesce(sum(p.idle) FILTER (WHERE f.innermost), 0)::BIGINT AS self_idle,
           sum(p.idle)::BIGINT AS total_idle, sum(p.n)::BIGINT AS total_n
    FROM per_stack p JOIN frames f USING (stack_id)
    GROUP BY ALL
),
n AS (SELECT device_id, sum(idle) AS idle FROM per_stack GROUP BY device_id),
iv AS (SELECT interval_ns FROM python_sample_interval($run))
SELECT c.device_id, round1(c.self_idle * 100.0 / n.idle) AS self_pct, round(c.self_idle * iv.interval_ns)::BIGINT AS self_ns,
       round1(c.total_idle * 100.0 / n.idle) AS total_pct, round(c.total_idle * iv.interval_ns)::BIGINT AS total_ns,
       round1(c.total_idle * 100.0 / c.total_n) AS idle_share_pct, c.function, c.file
FROM counted c JOIN n USING (device_id), iv, ordered
WHERE c.total_idle > 0
ORDER BY CASE WHEN ordered.by = 'self' THEN c.self_idle ELSE c.total_idle END DESC,
         CASE WHEN ordered.by = 'self' THEN c.total_idle ELSE c.self_idle END DESC, c.device_id, c.function, c.file
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
