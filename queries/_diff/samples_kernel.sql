-- Kernel scope samples: one row per launch of either run, its duration.
-- The key is the kernel's name id; a kernel of the new run whose name the base run holds
-- under another id (a Parquet dataset's runs number names apart), or matched across runs
-- by its place (diff's kernel matching; both registered as _diff_keymap(side, name_id,
-- key)), takes the id of its match in the base run. The same run twice is two sides of the same launches.
-- @param base  INTEGER  base run id
-- @param new   INTEGER  new run id
-- @column side   0 = base run, 1 = new run
-- @column key    kernel name id (_strings), or the id of its match in the base run
-- @column value  duration, ns
SELECT s.side, coalesce(m.key, k.name_id) AS key, k.end_ns - k.start_ns AS value
FROM (VALUES (0, $base), (1, $new)) s(side, run_id)
JOIN _kernels k ON k.run_id = s.run_id
LEFT JOIN _diff_keymap m ON m.side = s.side AND m.name_id = k.name_id
WHERE k.run_id IN ($base, $new)
