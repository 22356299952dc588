-- Every CUDA API call of a run (runtime and driver), one per row in start order: the host's
-- side of the trace, beside gpu-trace. Same rows and numbers as `nsys stats -r
-- cuda_api_trace`, whose columns come first; then the call's end. A call's correlation_id
-- is the one its GPU work carries (gpu-trace), so the launch of a kernel, the copy behind a
-- cudaMemcpy or the wait of a cudaStreamSynchronize can be read across. name= keeps the
-- calls whose name contains a text (cudaStreamSynchronize, Launch); from_ns/to_ns a window
-- of time (a gap of gpu-gaps, a step of nvtx-ranges).
-- @param run      TEXT     run id or name (default: latest run)
-- @param name     TEXT     only calls whose name contains this text, case-insensitive (default: null)
-- @param from_ns  BIGINT   only calls that end after this time on the capture's clock, ns (default: null)
-- @param to_ns    BIGINT   only calls that start before this time, ns; after from_ns (default: null)
-- @param limit    INTEGER  rows to return; 0 = all (default: 1000)
-- @column start_ns         call start, ns
-- @column dur_ns           duration, ns
-- @column name             API name (suffix _vNNNN stripped, as nsys prints it)
-- @column result           the call's return value (0: success)
-- @column correlation_id   links to the GPU work it launched (gpu-trace's correlation_id)
-- @column pid              process
-- @column tid              thread
-- @column thread_priority  the thread's priority as nsys recorded it (its T-Pri; NULL: none recorded)
-- @column thread_name      the thread's name (NULL: none recorded)
-- @column end_ns           call end, ns
-- @display start_ns, dur_ns, name, result, correlation_id, tid, thread_name
-- @alias cuda_api_trace
-- @rows page
-- @requires api_calls, threads
-- @traced api_calls
WITH asked AS (  -- an empty window, or a name no call of the run has, is an error (macros.sql)
    SELECT trace_asked('api-trace', $from_ns, $to_ns, $name,
                       EXISTS (SELECT 1 FROM _strings s WHERE contains(lower(s.value), lower($name))
                               AND s.string_id IN (SELECT DISTINCT name_id FROM _api_calls WHERE run_id = $run)),
                       'CUDA API call', 'api-summary') AS ok
), page AS (  -- the rows asked for, before the look-ups
    SELECT c.start_ns, c.end_ns, c.global_tid, c.correlation_id, c.name_id, c.return_value
    FROM asked, _api_calls c
    WHERE asked.ok AND c.run_id = $run
      AND ($name IS NULL OR c.name_id IN (SELECT string_id FROM _strings WHERE contains(lower(value), lower($name))))
      AND ($from_ns IS NULL OR c.end_ns > $from_ns)
      AND ($to_ns IS NULL OR c.start_ns < $to_ns)
    ORDER BY c.start_ns, c.correlation_id, c.global_tid
    LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
)
SELECT p.start_ns, p.end_ns - p.start_ns AS dur_ns, n.value AS name, p.return_value AS result,
       p.correlation_id, ((p.global_tid >> 24) & 16777215)::INTEGER AS pid,
       (p.global_tid & 16777215)::INTEGER AS tid, t.priority AS thread_priority, t.name AS thread_name, p.end_ns
FROM page p
LEFT JOIN _strings n ON n.string_id = p.name_id
LEFT JOIN threads t ON t.run_id = $run AND t.global_tid = p.global_tid
ORDER BY p.start_ns, p.correlation_id, p.global_tid
