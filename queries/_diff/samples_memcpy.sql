-- Memory-operation scope samples: one row per memcpy or memset of either run, keyed by
-- the operation as `nsys stats -r cuda_gpu_mem_time_sum` names it.
-- @param base  INTEGER  base run id
-- @param new   INTEGER  new run id
-- @column side   0 = base run, 1 = new run
-- @column key    '[CUDA memcpy Host-to-Device]', '[CUDA memset]', ...
-- @column value  duration, ns
SELECT s.side, o.operation AS key, o.dur_ns AS value
FROM (VALUES (0, $base), (1, $new)) s(side, run_id)
JOIN (SELECT run_id, operation, dur_ns FROM memcpy WHERE operation IS NOT NULL AND run_id IN ($base, $new)
      UNION ALL
      SELECT run_id, operation, dur_ns FROM memset WHERE run_id IN ($base, $new)) o ON o.run_id = s.run_id
