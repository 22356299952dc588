-- GPU scope samples: one row per GPU operation (kernel, memcpy, memset, whole graph
-- launch) of either run, keyed by device and kind of operation: busy time (gpu_busy.sql) is
-- the union of these intervals; diff tests the change of the ops' time kind by kind. A
-- kernel of the new run matched to one of the base run (_diff_keymap(side, name_id, key), as
-- in samples_kernel.sql: a namesake under another id, or a match by place) is that
-- kernel's kind.
-- @param base  INTEGER  base run id
-- @param new   INTEGER  new run id
-- @column side   0 = base run, 1 = new run
-- @column key    (CUDA device id + 1, 0 for none) << 44 | 1 << 43 for a memory operation (copy, memset), whose
--                time moves between identical captures beyond a kernel's | 43 bits of a hash of the kind
--                (kernel: its name id or its match's; copy kind; memset; graph id): two kinds that meet in
--                those bits would be tested as one, which only widens the spread their change is held against
-- @column value  operation duration, ns
SELECT s.side,
       ((coalesce(o.device_id, -1) + 1) << 44) | (CASE WHEN o.kind IN (1, 2) THEN 1 ELSE 0 END::BIGINT << 43)
       | (hash(o.kind, coalesce(m.key, o.id)) & 8796093022207)::BIGINT AS key,
       o.end_ns - o.start_ns AS value
FROM (VALUES (0, $base), (1, $new)) s(side, run_id)
JOIN (SELECT run_id, device_id, start_ns, end_ns, 0 AS kind, name_id AS id FROM _kernels WHERE run_id IN ($base, $new)
      UNION ALL SELECT run_id, device_id, start_ns, end_ns, 1, copy_kind FROM memcpy WHERE run_id IN ($base, $new)
      UNION ALL SELECT run_id, device_id, start_ns, end_ns, 2, 0 FROM memset WHERE run_id IN ($base, $new)
      UNION ALL SELECT run_id, device_id, start_ns, end_ns, 3, graph_id FROM graph_execs WHERE run_id IN ($base, $new)
     ) o ON o.run_id = s.run_id
LEFT JOIN _diff_keymap m ON o.kind = 0 AND m.side = s.side AND m.name_id = o.id
