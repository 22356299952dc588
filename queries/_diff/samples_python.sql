-- Python scope samples: each run's Python samples (nsys --python-sampling) counted per function,
-- keyed as function (file) with the file named as on any machine (python_stack_functions; not the
-- line: an edit moves lines), with the run's sampling interval: the samples times the interval are the
-- wall time the sampled threads spent in the function itself (self_ns: its frame the innermost) or
-- inside it (total_ns: on the stack at all, once per sample however often it recurs). A sampled
-- thread counts in every state (running, or waiting in the kernel), as python-stacks shows it.
-- @param base    INTEGER  base run id
-- @param new     INTEGER  new run id
-- @param metric  TEXT     self_ns or total_ns
-- @column side         0 = base run, 1 = new run
-- @column key          function (file)
-- @column samples      samples with the function innermost (self_ns) or on the stack (total_ns)
-- @column interval_ns  the run's sampling interval, ns (python_sample_interval)
WITH sides AS (
    SELECT 0 AS side, $base AS run_id, (SELECT interval_ns FROM python_sample_interval($base)) AS interval_ns
    UNION ALL
    SELECT 1, $new, (SELECT interval_ns FROM python_sample_interval($new))
),
frames AS (
    SELECT 0 AS side, * FROM python_stack_functions($base)
    UNION ALL
    SELECT 1, * FROM python_stack_functions($new)
),
per_stack AS (  -- (each stack's samples first: far fewer rows than samples x frames)
    SELECT d.side, s.stack_id, count(*) AS n, any_value(d.interval_ns) AS interval_ns
    FROM sides d JOIN python_samples s ON s.run_id = d.run_id
    GROUP BY ALL
)
SELECT p.side, f.function || ' (' || f.file || ')' AS key, sum(p.n)::BIGINT AS samples, any_value(p.interval_ns) AS interval_ns
FROM per_stack p JOIN frames f ON f.side = p.side AND f.stack_id = p.stack_id
WHERE $metric = 'total_ns' OR f.innermost
GROUP BY ALL
ORDER BY 1, 2
