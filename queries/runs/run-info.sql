-- One run's facts, for a report's header: what was captured, where and with what. GPU,
-- driver and clocks are the ones the capture recorded (meta.json of a tracekit run
-- folder; NULL for a bare export), else those of the export's GPU table (nsys) or of the
-- report's device attributes (ncu: device__attribute_*, as ncu's raw page prints them).
-- @param run  TEXT  run id or name (default: latest run)
-- @column run_id                 run id
-- @column name                   run name
-- @column kind                   source kind(s): nsys, ncu, timing
-- @column gpu                    GPU seen in the capture (or recorded by it)
-- @column driver                 NVIDIA driver version, as recorded at capture
-- @column sm_clock_mhz           SM clock when the capture started, MHz (as recorded; clocks are never set)
-- @column max_sm_clock_mhz       maximum SM clock, MHz (as recorded, else the export's GPU clock or the ncu report's device clock rate)
-- @column mem_clock_mhz          memory clock, MHz (as recorded)
-- @column sm_count               SMs of the GPU (from the nsys export or the ncu report)
-- @column gpu_memory_bytes       device memory, bytes (from the nsys export or the ncu report)
-- @column tool_version           profiler version
-- @column export_schema_version  nsys export schema version
-- @column versions               software versions recorded at capture (JSON: python, torch, triton, nsys, ncu, tracekit)
-- @column params                 capture parameters (JSON: bs, nc, preset, tool, ...)
-- @column command                the capture's command line
-- @column status                 the capture's status (ok, failed; NULL for a bare export)
-- @column started_at             when the capture started (UTC, as recorded)
-- @column requests               timed requests recorded with the run (NULL: none)
-- @column median_ms              their median end-to-end latency, ms
-- @column p95_ms                 their 95th percentile latency, ms (interpolated, as numpy)
-- @column source_path            file or run folder ingested
-- @column ingested_at            when it was ingested (UTC)
-- @display run_id, name, kind, gpu, driver, sm_clock_mhz, requests, median_ms, p95_ms
-- @requires runs
WITH nsys AS (
    SELECT max(sm_count) AS sm_count, max(memory_bytes) AS memory_bytes, max(clock_hz) AS clock_hz
    FROM gpus WHERE run_id = $run
), ncu AS (  -- the profiled device's attributes (a kernel's metrics in an ncu report)
    SELECT max(value) FILTER (WHERE metric = 'device__attribute_multiprocessor_count') AS sm_count,
           max(value) FILTER (WHERE metric = 'device__attribute_total_memory') AS memory_bytes,
           max(value) FILTER (WHERE metric = 'device__attribute_clock_rate') * 1e3 AS clock_hz  -- kHz
    FROM ncu_metrics
    WHERE run_id = $run AND metric IN ('device__attribute_multiprocessor_count', 'device__attribute_total_memory',
                                       'device__attribute_clock_rate')
), g AS (
    SELECT coalesce(nsys.sm_count, ncu.sm_count::BIGINT) AS sm_count,
           coalesce(nsys.memory_bytes, ncu.memory_bytes::BIGINT) AS memory_bytes,
           coalesce(nsys.clock_hz, ncu.clock_hz) AS clock_hz
    FROM nsys, ncu
), t AS (
    SELECT nullif(count(*), 0) AS requests, median(latency_ms) AS median_ms,
           quantile_cont(latency_ms, 0.95) AS p95_ms
    FROM requests WHERE run_id = $run AND phase = 'timed'
)
SELECT r.run_id, r.name, r.kind, coalesce(r.gpu, json_extract_string(r.meta, '$.gpu.name')) AS gpu,
       json_extract_string(r.meta, '$.gpu.driver') AS driver,
       TRY_CAST(json_extract(r.meta, '$.gpu.clocks_sm_mhz') AS DOUBLE) AS sm_clock_mhz,
       coalesce(TRY_CAST(json_extract(r.meta, '$.gpu.clocks_max_sm_mhz') AS DOUBLE), g.clock_hz / 1e6) AS max_sm_clock_mhz,
       TRY_CAST(json_extract(r.meta, '$.gpu.clocks_mem_mhz') AS DOUBLE) AS mem_clock_mhz,
       g.sm_count, g.memory_bytes AS gpu_memory_bytes,
       r.tool_version, r.export_schema_version,
       CAST(json_extract(r.meta, '$.versions') AS VARCHAR) AS versions,
       CAST(r.params AS VARCHAR) AS params,
       array_to_string(CAST(json_extract(r.meta, '$.command') AS VARCHAR[]), ' ') AS command,
       json_extract_string(r.meta, '$.status') AS status,
       json_extract_string(r.meta, '$.started_at') AS started_at,
       t.requests, t.median_ms, t.p95_ms,
       r.source_path, r.ingested_at
FROM runs r, g, t
WHERE r.run_id = $run
