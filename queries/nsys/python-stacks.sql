-- The Python threads' sampled stacks, folded: one row per distinct stack, its frames from the
-- outermost caller to the line the samples found running, each as function (file:line) with the
-- file below the installed packages' or the standard library's folder (torch/__init__.py; a program's
-- own file by its name), joined by ';', with how many samples had it: where a Python program's
-- time goes, line by line (nsys profile --python-sampling=true samples each Python thread 1,000 times
-- a second by default, --python-sampling-frequency; exported with nsys export --include-blobs=true;
-- tracekit capture --python-samples does both). The format flame-graph tools read (`tracekit export
-- stacks --python` writes it as their file). nsys records each sample's thread state (state=: Running,
-- Blocking Wait, Uninterruptible). A ';' in a name becomes ':'. A run captured without Python samples
-- is an error.
-- @param run       TEXT     run id or name (default: latest run)
-- @param thread    TEXT     only this thread's samples: its tid or its name (default: null)
-- @param range     TEXT     only samples taken inside NVTX ranges of this name on their own thread: :step, or step in the default domain (default: null)
-- @param function  TEXT     only stacks with a function whose name contains this (case-insensitive) (default: null)
-- @param state     TEXT     only samples of threads in this state, as nsys names it (default: null)
-- @param limit     INTEGER  rows to return; 0 = all (default: 20)
-- @column samples  samples with this stack
-- @column pct      % of the samples asked (rounded to 0.1)
-- @column frames   frames on the stack
-- @column stack    outermost caller;...;the function running, each function (file:line)
-- @column modules  each frame's file (as in the stack), in the same order
-- @display samples, pct, frames, stack
-- @requires python_samples, python_frames
-- @traced python_samples
WITH checked AS (
    SELECT CASE WHEN $state IS NULL OR EXISTS (SELECT 1 FROM python_samples WHERE run_id = $run AND thread_state = $state)
                THEN true
                ELSE error('python-stacks: no Python sample of the run is of a thread in state ''' || $state || ''' ('
                           || (SELECT string_agg(DISTINCT thread_state, ', ' ORDER BY thread_state) FROM python_samples
                               WHERE run_id = $run) || ')') END AS ok
),
asked AS (
    SELECT s.sample_id, s.stack_id
    FROM checked, python_samples_asked('python-stacks', $run, $thread, $range) s
    WHERE checked.ok AND ($state IS NULL OR s.thread_state = $state)
),
stacks AS (
    SELECT stack_id, folded_stack(python_frame(function, file, line), depth) AS stack,
           folded_stack(python_module_path(file), depth) AS modules, count(*) AS frames,
           bool_or(contains(lower(function), lower($function))) AS through
    FROM python_frames WHERE run_id = $run AND stack_id IN (SELECT stack_id FROM asked)
    GROUP BY stack_id
),
found AS (
    SELECT CASE WHEN $function IS NULL OR EXISTS (SELECT 1 FROM stacks WHERE through) THEN true
                ELSE error('python-stacks: no stack asked has a function whose name contains ''' || $function
                           || ''' (`tracekit query python-stacks` lists them)') END AS ok
)
SELECT count(*) AS samples, round1(count(*) * 100.0 / (SELECT count(*) FROM asked)) AS pct,
       any_value(s.frames) AS frames, s.stack, any_value(s.modules) AS modules
FROM found, asked a JOIN stacks s USING (stack_id)
WHERE found.ok AND ($function IS NULL OR s.through)
GROUP BY s.stack
ORDER BY samples DESC, s.stack
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
