-- Where the OS runtime calls that block come from: per function (poll, ioctl, usleep,
-- pthread_cond_wait, ...) and the call stack that made it, folded from the outermost caller to
-- the call (';'-joined, as cpu-stacks folds the CPU's samples), how many calls and how long they
-- took. The off-CPU half of the host's time, where cpu-hotspots is the on-CPU half. nsys unwinds
-- only calls longer than its backtrace threshold (OS_RUNTIME_OPTIONS:BACKTRACES_THRESHOLD_NS,
-- 80 us by default): the shorter ones are not here (osrt-summary counts every call). nsys's
-- markers at the bottom of a stack are left out, a ';' in a name becomes ':'. A run captured
-- without `nsys -t osrt` is an error.
-- @param run    TEXT     run id or name (default: latest run)
-- @param name   TEXT     only functions whose name contains this text (case-insensitive) (default: null)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @column name      the OS runtime function
-- @column calls     its calls with this stack
-- @column total_ns  their summed duration, ns
-- @column med_ns    their median duration, ns (rounded to 0.1)
-- @column max_ns    the longest, ns
-- @column threads   threads that made them
-- @column stack     outermost caller;...;the function called
-- @display name, calls, total_ns, med_ns, max_ns, threads, stack
-- @requires osrt_calls, osrt_frames
-- @traced osrt_calls
WITH asked AS (
    SELECT CASE WHEN $name IS NULL OR EXISTS (SELECT 1 FROM osrt_calls WHERE run_id = $run
                                                AND contains(lower(name), lower($name))) THEN true
                ELSE error('osrt-stacks: no OS runtime call of the run has a name containing ''' || $name
                           || ''' (`tracekit query osrt-summary` lists them)') END AS ok
),
stacks AS (
    SELECT callchain_id, folded_stack(function, depth) AS stack
    FROM osrt_frames
    WHERE run_id = $run AND NOT stack_marker(depth, function)
    GROUP BY callchain_id
)
SELECT c.name, count(*) AS calls, sum(c.dur_ns)::BIGINT AS total_ns, round1(median(c.dur_ns)) AS med_ns,
       max(c.dur_ns) AS max_ns, count(DISTINCT c.global_tid) AS threads, s.stack
FROM asked, osrt_calls c JOIN stacks s USING (callchain_id)
WHERE asked.ok AND c.run_id = $run AND ($name IS NULL OR contains(lower(c.name), lower($name)))
GROUP BY c.name, s.stack
ORDER BY total_ns DESC, c.name, s.stack
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
