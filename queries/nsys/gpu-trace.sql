-- Every GPU kernel, memory copy and memset of a run, one per row in start order: the GPU
-- trace. Same rows and numbers as `nsys stats -r cuda_gpu_trace` (the `--report gputrace`
-- of older nsys), whose columns come first; then the op's kind, process, end, device id
-- and NVTX path, which nsys does not print. Throughput is computed as nsys computes it,
-- bytes x floor(1e9 / dur_ns), so it equals nsys's to the byte; it is NULL for kernels and
-- for ops of zero duration. CUDA graph launches traced whole (--cuda-graph-trace=graph)
-- are not GPU ops here, as in nsys (their kernels are, with --cuda-graph-trace=node).
-- @param run      TEXT     run id or name (default: latest run)
-- @param name     TEXT     only ops whose name contains this text, case-insensitive (default: null)
-- @param from_ns  BIGINT   only ops that end after this time on the capture's clock, ns (default: null)
-- @param to_ns    BIGINT   only ops that start before this time, ns; after from_ns (default: null)
-- @param limit    INTEGER  rows to return; 0 = all (default: 1000)
-- @column start_ns                op start on the GPU, ns
-- @column dur_ns                  duration, ns
-- @column correlation_id          links to the API call that launched it (api_calls.correlation_id)
-- @column grid_x                  grid size in blocks, x (kernels; NULL for copies and memsets)
-- @column grid_y                  grid size, y (NULL for copies and memsets)
-- @column grid_z                  grid size, z (NULL for copies and memsets)
-- @column block_x                 block size in threads, x (kernels; NULL for copies and memsets)
-- @column block_y                 block size, y (NULL for copies and memsets)
-- @column block_z                 block size, z (NULL for copies and memsets)
-- @column registers_per_thread    registers per thread (kernels; NULL for copies and memsets)
-- @column static_smem_bytes       static shared memory per block, bytes (kernels; NULL for copies and memsets)
-- @column dynamic_smem_bytes      dynamic shared memory per block, bytes (kernels; NULL for copies and memsets)
-- @column bytes                   bytes copied or set (copies, memsets; NULL for kernels)
-- @column throughput_bytes_per_s  bytes x floor(1e9 / dur_ns), bytes/s (copies, memsets; NULL for kernels and ops of zero duration)
-- @column src_kind                copy source memory kind, or the memset's memory kind (Pageable, Pinned, Device, ...; NULL for kernels)
-- @column dst_kind                copy destination memory kind (NULL for kernels and memsets)
-- @column device                  GPU name and device id, as nsys prints it: 'NVIDIA H200 (0)'
-- @column context_id              CUDA context id; NULL for an op on none (a Unified Memory migration)
-- @column green_context_id        green context id; NULL outside any
-- @column stream_id               CUDA stream id; NULL for an op on none (a Unified Memory migration)
-- @column name                    demangled kernel name, '[CUDA memcpy Host-to-Device]', '[CUDA memset]', ...
-- @column op_kind                 kernel, memcpy or memset
-- @column pid                     process id
-- @column end_ns                  op end, ns
-- @column device_id               CUDA device id
-- @column nvtx_path               NVTX path of the innermost push/pop range around the launch call on its thread ('/'-separated texts from the outermost, a named domain's range as domain:text); NULL outside every range
-- @display start_ns, dur_ns, stream_id, grid_x, block_x, registers_per_thread, bytes, throughput_bytes_per_s, name
-- @alias cuda_gpu_trace, gputrace
-- @rows page
-- @requires kernels, memcpy, memset
-- @traced kernels, memcpy, memset
WITH op_names AS (  -- the run's op names, each once (read only where a name is asked for)
    SELECT DISTINCT n.value AS name FROM _kernels k JOIN _strings n ON n.string_id = k.name_id
    WHERE $name IS NOT NULL AND k.run_id = $run
    UNION SELECT DISTINCT operation FROM memcpy WHERE $name IS NOT NULL AND run_id = $run
    UNION SELECT DISTINCT operation FROM memset WHERE $name IS NOT NULL AND run_id = $run
), asked AS (  -- an empty window, or a name no op of the run has, is an error (macros.sql)
    SELECT trace_asked('gpu-trace', $from_ns, $to_ns, $name,
                       EXISTS (SELECT 1 FROM op_names WHERE contains(lower(name), lower($name))),
                       'GPU op', 'gpu-summary') AS ok
), ops AS (
    SELECT 'kernel' AS op_kind, 0 AS kind_order, k.start_ns, k.end_ns, k.correlation_id,
           k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z, k.registers_per_thread,
           k.static_smem_bytes, k.dynamic_smem_bytes, NULL::BIGINT AS bytes,
           NULL::VARCHAR AS src_kind, NULL::VARCHAR AS dst_kind, k.device_id, k.context_id,
           k.green_context_id, k.stream_id, n.value AS name, k.global_pid, k.nvtx_range_id
    FROM _kernels k LEFT JOIN _strings n ON n.string_id = k.name_id
    WHERE k.run_id = $run
    UNION ALL
    SELECT 'memcpy', 1, start_ns, end_ns, correlation_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
           NULL, NULL, bytes, src_kind, dst_kind, device_id, context_id, green_context_id, stream_id,
           operation, global_pid, nvtx_range_id
    FROM memcpy WHERE run_id = $run
    UNION ALL
    SELECT 'memset', 2, start_ns, end_ns, correlation_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
           NULL, NULL, bytes, mem_kind, NULL, device_id, context_id, green_context_id, stream_id,
           operation, global_pid, nvtx_range_id
    FROM memset WHERE run_id = $run
), page AS (  -- the rows asked for, before the look-ups (nvtx_ranges can hold millions)
    SELECT ops.* FROM asked, ops
    WHERE asked.ok AND ($name IS NULL OR contains(lower(name), lower($name)))
      AND ($from_ns IS NULL OR end_ns > $from_ns)
      AND ($to_ns IS NULL OR start_ns < $to_ns)
    ORDER BY start_ns, kind_order, correlation_id
    LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
), paths AS (  -- the NVTX paths of those rows only
    SELECT range_id, path FROM nvtx_ranges
    WHERE run_id = $run AND range_id IN (SELECT nvtx_range_id FROM page)
), gpu_names AS (
    SELECT device_id, min(name) AS gpu_name FROM gpus WHERE run_id = $run GROUP BY device_id
)
SELECT o.start_ns, o.end_ns - o.start_ns AS dur_ns, o.correlation_id,
       o.grid_x, o.grid_y, o.grid_z, o.block_x, o.block_y, o.block_z, o.registers_per_thread,
       o.static_smem_bytes, o.dynamic_smem_bytes, o.bytes,
       CASE WHEN o.end_ns > o.start_ns THEN o.bytes * (1000000000 // (o.end_ns - o.start_ns)) END
           AS throughput_bytes_per_s,
       o.src_kind, o.dst_kind,
       coalesce(g.gpu_name, '') || ' (' || o.device_id || ')' AS device,
       o.context_id, o.green_context_id, o.stream_id, o.name, o.op_kind,
       ((o.global_pid >> 24) & 16777215)::INTEGER AS pid, o.end_ns, o.device_id,
       p.path AS nvtx_path
FROM page o
LEFT JOIN gpu_names g ON g.device_id = o.device_id
LEFT JOIN paths p ON p.range_id = o.nvtx_range_id
ORDER BY o.start_ns, o.kind_order, o.correlation_id
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
