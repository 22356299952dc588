-- The longest idle gaps of each GPU: stretches with no kernel, copy, memset or whole
-- graph launch running on the device (any process, any stream), longest first, with the
-- GPU op that ended each gap. The gap before an op is its device_gap_ns (computed at
-- ingest), so the gaps add up to gpu-utilization's idle_ns of the device.
-- @param run    TEXT     run id or name (default: latest run)
-- @param limit  INTEGER  rows to return; 0 = all (default: 20)
-- @column device_id     CUDA device
-- @column gap_ns        idle time, ns
-- @column start_ns      gap start: the end of the device's last op before it, ns
-- @column end_ns        gap end: the start of the op after it, ns
-- @column next_op_kind  kind of that op: kernel, memcpy, memset or graph
-- @column next_op       that op's name (demangled kernel name, '[CUDA memcpy Host-to-Device]', ...)
-- @column pid           process that launched it
-- @column stream_id     its CUDA stream (NULL for an op on none: a Unified Memory migration)
-- @display device_id, gap_ns, start_ns, next_op_kind, next_op, stream_id
-- @requires kernels, memcpy, memset, graph_execs
-- @traced kernels, memcpy, memset, graph_execs
SELECT device_id, device_gap_ns AS gap_ns, start_ns - device_gap_ns AS start_ns, start_ns AS end_ns,
       op_kind AS next_op_kind, name AS next_op, ((global_pid >> 24) & 16777215)::INTEGER AS pid, stream_id
FROM gpu_ops
WHERE run_id = $run AND device_gap_ns > 0
ORDER BY gap_ns DESC, device_id, end_ns
LIMIT CASE WHEN $limit = 0 THEN NULL ELSE $limit END
