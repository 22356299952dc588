-- NVTX ranges one per row, with nesting and GPU projection: the data of the NVTX timeline.
-- @param run         TEXT     run id or name (default: latest run)
-- @param min_dur_ns  BIGINT   only ranges at least this long (min: 0) (default: 0)
-- @param from_ns     BIGINT   only ranges that end after this time on the capture's clock, ns (default: null)
-- @param to_ns       BIGINT   only ranges that start before this time, ns (default: null)
-- @param limit       INTEGER  rows to return; 0 = all (default: 1000)
-- @column range_id       range id within the run
-- @column range          'domain:text' as nsys names it
-- @column style          PushPop or StartEnd
-- @column path           texts from the outermost range down, a named domain's range as domain:text (NULL: a start/end range ended on another thread, which nests in none)
-- @column depth          nesting level on its thread (0 = outermost; NULL: a start/end range ended on another thread)
-- @column pid            process id
-- @column tid            thread that started the range
-- @column start_ns       range start, ns
-- @column end_ns         range end, ns
-- @column dur_ns         duration, ns
-- @column proj_start_ns  first GPU op start of its work, ns (NULL: it launched none)
-- @column proj_end_ns    last GPU op end of its work, ns (NULL: it launched none)
-- @column gpu_ops        GPU ops launched inside it
-- @display range_id, tid, depth, start_ns, dur_ns, gpu_ops, range
-- @requires nvtx_ranges
-- @traced nvtx_ranges
WITH asked AS (  -- an empty window is an error, not an empty table (macros.sql)
    SELECT trace_asked('nvtx-ranges', $from_ns, $to_ns, NULL, true, NULL, NULL) AS ok
)
SELECT range_id, name AS range, style, path, depth, pid, tid, start_ns, end_ns, dur_ns,
       proj_start_ns, proj_end_ns, gpu_ops
FROM asked, nvtx_ranges
WHERE asked.ok AND run_id = $run AND dur_ns >= $min_dur_ns
  AND ($from_ns IS NULL OR end_ns > $from_ns) AND ($to_ns IS NULL OR start_ns < $to_ns)
ORDER BY start_ns, depth
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
