-- Unified Memory scope samples: one row per page fault event of either run, keyed by where it
-- faulted: 'CPU page faults', or by the GPU's access type 'GPU read page faults', 'GPU write
-- page faults', 'GPU atomic page faults', ... A CPU fault event is one fault; a GPU one is a
-- group of faults on a page that the GPU's fault handler serviced together (its value: how
-- many, as nsys's um_sum sums them).
-- @param base  INTEGER  base run id
-- @param new   INTEGER  new run id
-- @column side   0 = base run, 1 = new run
-- @column key    'CPU page faults', 'GPU read page faults', ...
-- @column value  page faults
SELECT s.side, f.key, f.value
FROM (VALUES (0, $base), (1, $new)) s(side, run_id)
JOIN (SELECT run_id, 'CPU page faults' AS key, 1 AS value FROM um_cpu_faults WHERE run_id IN ($base, $new)
      UNION ALL
      SELECT run_id, 'GPU ' || lower(coalesce(access_type, 'Unknown')) || ' page faults', faults
      FROM um_gpu_faults WHERE run_id IN ($base, $new)) f ON f.run_id = s.run_id
