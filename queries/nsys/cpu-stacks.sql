-- The CPU samples' call stacks, folded: one row per distinct stack, its functions from the
-- outermost caller to the one the samples hit joined by ';', with how many samples had it:
-- the format flame-graph tools read (`tracekit export stacks` writes it as their file:
-- flamegraph.pl, speedscope, inferno). Only the samples nsys unwound count (one in
-- --samples-per-backtrace, default 4; the others have no callers); nsys's markers at the
-- bottom of a stack ('[Broken backtraces]', '[Max depth]') are left out, and a ';' in a name
-- becomes ':'. A run captured without CPU sampling is an error.
-- @param run       TEXT     run id or name (default: latest run)
-- @param thread    TEXT     only this thread's samples: its tid or its name (default: null)
-- @param range     TEXT     only samples taken inside NVTX ranges of this name on their own thread: :step, or step in the default domain (default: null)
-- @param function  TEXT     only stacks with a function whose name contains this (case-insensitive) (default: null)
-- @param limit     INTEGER  rows to return; 0 = all (default: 20)
-- @column samples  samples with this stack
-- @column pct      % of the unwound samples asked (rounded to 0.1)
-- @column frames   functions on the stack
-- @column stack    outermost caller;...;the function the samples hit
-- @column modules  each function's module (its file name), in the same order
-- @display samples, pct, frames, stack
-- @requires cpu_samples, cpu_sample_frames
-- @traced cpu_samples
WITH asked AS (SELECT * FROM cpu_samples_asked('cpu-stacks', $run, $thread, $range) WHERE stacked),
stacks AS (
    SELECT f.sample_id, folded_stack(f.function, f.depth) AS stack,
           folded_stack(regexp_extract(coalesce(f.module, ''), '[^/]*$'), f.depth) AS modules,
           count(*) AS frames, bool_or(contains(lower(f.function), lower($function))) AS through
    FROM cpu_sample_frames f SEMI JOIN asked a ON a.sample_id = f.sample_id
    WHERE f.run_id = $run AND NOT stack_marker(f.depth, f.function)
    GROUP BY f.sample_id
),
found AS (
    SELECT CASE WHEN $function IS NULL OR EXISTS (SELECT 1 FROM stacks WHERE through) THEN true
                ELSE error('cpu-stacks: no unwound stack asked has a function whose name contains ''' || $function
                           || ''' (`tracekit query cpu-hotspots -p order=total` lists them)') END AS ok
)
SELECT count(*) AS samples, round1(count(*) * 100.0 / (SELECT count(*) FROM asked)) AS pct,
       any_value(frames) AS frames, stack, any_value(modules) AS modules
FROM stacks, found
WHERE found.ok AND ($function IS NULL OR through)
GROUP BY stack
ORDER BY samples DESC, stack
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
