-- Runs in the store, oldest first, with the parameters they were captured with.
-- @param limit  INTEGER  rows to return; 0 = all (default: 0)
-- @column run_id        run id
-- @column name          run name
-- @column kind          source kind(s): nsys, ncu, timing
-- @column gpu           GPU seen in the capture
-- @column tool_version  profiler version
-- @column params        capture parameters (JSON: bs, nc, preset, tool, ...)
-- @column status        the capture's status as its run folder recorded it (ok, failed; NULL for a bare export)
-- @column source_path   file or run folder ingested
-- @column ingested_at   when it was ingested (UTC)
-- @display run_id, name, kind, status, gpu, params
-- @requires runs
SELECT run_id, name, kind, gpu, tool_version, CAST(params AS VARCHAR) AS params,
       json_extract_string(meta, '$.status') AS status, source_path, ingested_at
FROM runs
ORDER BY run_id
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
