-- GPU scope samples: one row per GPU operation (kernel, memcpy, memset, whole graph
-- launch) of either run, keyed by device. Busy time (gpu_busy.sql) is the union of
-- these intervals; their durations are the per-instance distribution it is tested on.
-- @param base  INTEGER  base run id
-- @param new   INTEGER  new run id
-- @column side   0 = base run, 1 = new run
-- @column key    CUDA device id
-- @column value  operation duration, ns
SELECT s.side, o.device_id AS key, o.end_ns - o.start_ns AS value
FROM (VALUES (0, $base), (1, $new)) s(side, run_id)
JOIN (SELECT run_id, device_id, start_ns, end_ns FROM _kernels WHERE run_id IN ($base, $new)
      UNION ALL SELECT run_id, device_id, start_ns, end_ns FROM memcpy WHERE run_id IN ($base, $new)
      UNION ALL SELECT run_id, device_id, start_ns, end_ns FROM memset WHERE run_id IN ($base, $new)
      UNION ALL SELECT run_id, device_id, start_ns, end_ns FROM graph_execs WHERE run_id IN ($base, $new)
     ) o ON o.run_id = s.run_id
