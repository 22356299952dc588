-- Tables ingested from Nsight Systems SQLite exports. Times are in ns on the capture's
-- clock (they can be negative when a capture range is used); names are resolved.

CREATE TABLE IF NOT EXISTS kernels (
    run_id INTEGER,               -- runs.run_id
    start_ns BIGINT,              -- kernel start on the GPU, ns
    end_ns BIGINT,                -- kernel end, ns
    dur_ns BIGINT,                -- end_ns - start_ns, ns
    device_id BIGINT,             -- CUDA device id
    context_id BIGINT,            -- CUDA context id
    stream_id BIGINT,             -- CUDA stream id
    correlation_id BIGINT,        -- links to api_calls.correlation_id (same process)
    global_pid BIGINT,            -- nsys globalPid (process key)
    pid INTEGER,                  -- OS process id
    graph_node_id BIGINT,         -- CUDA graph node id when launched by a graph, else NULL
    name VARCHAR,                 -- demangled kernel name (as nsys stats prints it)
    short_name VARCHAR,           -- base name without templates/arguments
    grid_x INTEGER, grid_y INTEGER, grid_z INTEGER,       -- grid dimensions, blocks
    block_x INTEGER, block_y INTEGER, block_z INTEGER,    -- block dimensions, threads
    registers_per_thread INTEGER, -- registers per thread
    static_smem_bytes INTEGER,    -- static shared memory per block, bytes
    dynamic_smem_bytes INTEGER,   -- dynamic shared memory per block, bytes
    launch_global_tid BIGINT,     -- thread of the API call that launched it (nsys globalTid)
    launch_tid INTEGER,           -- its OS thread id
    api_start_ns BIGINT,          -- launch call start, ns (cudaGraphLaunch for graph kernels)
    api_end_ns BIGINT,            -- launch call end, ns
    api_name VARCHAR,             -- launch API, _vNNNN stripped (cudaLaunchKernel, cuLaunchKernelEx, ...)
    nvtx_range_id BIGINT          -- nvtx_ranges.range_id of the innermost push/pop range around the launch call
                                  -- on its thread; NULL when launched outside every range
);

CREATE TABLE IF NOT EXISTS api_calls (
    run_id INTEGER,          -- runs.run_id
    start_ns BIGINT,         -- call start on the CPU, ns
    end_ns BIGINT,           -- call end, ns
    dur_ns BIGINT,           -- duration, ns
    global_tid BIGINT,       -- nsys globalTid (thread key)
    global_pid BIGINT,       -- globalTid & 0xFFFFFFFFFF000000 (process key)
    pid INTEGER,             -- OS process id
    tid INTEGER,             -- OS thread id
    correlation_id BIGINT,   -- links to the GPU work it launched
    name VARCHAR,            -- API name with the _vNNNN suffix stripped (as nsys stats prints it)
    raw_name VARCHAR,        -- API name as recorded
    return_value BIGINT      -- CUDA result code
);

CREATE TABLE IF NOT EXISTS memcpy (
    run_id INTEGER, start_ns BIGINT, end_ns BIGINT, dur_ns BIGINT,  -- ns
    device_id BIGINT, context_id BIGINT, stream_id BIGINT,
    correlation_id BIGINT, global_pid BIGINT, pid INTEGER, graph_node_id BIGINT,
    bytes BIGINT,            -- bytes copied
    copy_kind INTEGER,       -- CUPTI copy kind id
    operation VARCHAR,       -- '[CUDA memcpy Host-to-Device]' etc., as nsys stats names it
    src_kind VARCHAR,        -- source memory kind (Pageable, Pinned, Device, ...)
    dst_kind VARCHAR,        -- destination memory kind
    launch_global_tid BIGINT, launch_tid INTEGER,   -- thread of the launching API call
    api_start_ns BIGINT, api_end_ns BIGINT,         -- the launching call, ns
    api_name VARCHAR,                               -- the launching API (cudaMemcpyAsync, ...)
    nvtx_range_id BIGINT                            -- innermost push/pop NVTX range around the launch call
);

CREATE TABLE IF NOT EXISTS memset (
    run_id INTEGER, start_ns BIGINT, end_ns BIGINT, dur_ns BIGINT,  -- ns
    device_id BIGINT, context_id BIGINT, stream_id BIGINT,
    correlation_id BIGINT, global_pid BIGINT, pid INTEGER, graph_node_id BIGINT,
    bytes BIGINT,            -- bytes set
    value INTEGER,           -- value written
    operation VARCHAR,       -- '[CUDA memset]'
    mem_kind VARCHAR,        -- memory kind
    launch_global_tid BIGINT, launch_tid INTEGER,   -- thread of the launching API call
    api_start_ns BIGINT, api_end_ns BIGINT,         -- the launching call, ns
    api_name VARCHAR,                               -- the launching API (cudaMemsetAsync, ...)
    nvtx_range_id BIGINT                            -- innermost push/pop NVTX range around the launch call
);

CREATE TABLE IF NOT EXISTS syncs (
    run_id INTEGER, start_ns BIGINT, end_ns BIGINT, dur_ns BIGINT,  -- ns
    device_id BIGINT, context_id BIGINT, stream_id BIGINT,
    correlation_id BIGINT, global_pid BIGINT, pid INTEGER,
    sync_type VARCHAR,       -- Event sync, Stream sync, Context sync, ...
    event_id BIGINT          -- CUDA event id for event syncs
);

CREATE TABLE IF NOT EXISTS nvtx_ranges (
    run_id INTEGER,          -- runs.run_id
    range_id BIGINT,         -- id of the range within its run (start order)
    style VARCHAR,           -- PushPop or StartEnd
    domain_id BIGINT,        -- NVTX domain id (0 = default domain)
    domain VARCHAR,          -- domain name ('' for the default domain)
    text VARCHAR,            -- range text (inline or registered string)
    name VARCHAR,            -- 'domain:text' as nsys names it (':step' in the default domain)
    start_ns BIGINT,         -- range start, ns
    end_ns BIGINT,           -- range end, ns (the capture's last NVTX timestamp if never ended)
    dur_ns BIGINT,           -- end_ns - start_ns, ns
    ended BOOLEAN,           -- false if the range was still open when the capture ended
    global_tid BIGINT,       -- thread that started the range
    pid INTEGER, tid INTEGER,
    end_global_tid BIGINT,   -- thread that ended a StartEnd range on another thread, else NULL
    end_tid INTEGER,
    depth INTEGER,           -- nesting level on its thread (0 = outermost); NULL for cross-thread ranges
    parent_id BIGINT,        -- range_id of the tightest enclosing range on the same thread
    path VARCHAR,            -- texts from the outermost range down, '/'-separated (named domains as domain:text)
    children INTEGER,        -- direct children that launched GPU work (nsys "Num Child")
    proj_start_ns BIGINT,    -- start of the first GPU op launched inside the range on its thread, ns
    proj_end_ns BIGINT,      -- end of the last such GPU op, ns
    proj_dur_ns BIGINT,      -- projected GPU time, ns (NULL if it launched no GPU work)
    gpu_ops INTEGER,         -- GPU ops launched inside it (distinct correlation ids)
    category BIGINT,         -- NVTX category
    color BIGINT             -- NVTX color (ARGB)
);

CREATE TABLE IF NOT EXISTS nvtx_marks (
    run_id INTEGER, ts_ns BIGINT,   -- mark time, ns
    domain VARCHAR, text VARCHAR, name VARCHAR,
    global_tid BIGINT, pid INTEGER, tid INTEGER, category BIGINT, color BIGINT
);

-- Kernel time per innermost push/pop NVTX range (on the launching thread) and kernel name,
-- summed at ingest so that attributing 2 M kernels to range paths is a small aggregation.
CREATE TABLE IF NOT EXISTS nvtx_kernel_sum (
    run_id INTEGER,
    nvtx_range_id BIGINT,    -- nvtx_ranges.range_id of the innermost range; NULL = launched outside every range
    name VARCHAR,            -- kernel name (demangled)
    launches BIGINT,         -- kernel launches
    total_ns BIGINT,         -- summed kernel time, ns
    min_ns BIGINT,           -- shortest launch, ns
    max_ns BIGINT            -- longest launch, ns
);

CREATE TABLE IF NOT EXISTS gpus (
    run_id INTEGER, device_id INTEGER, name VARCHAR, chip_name VARCHAR, bus_location VARCHAR,
    uuid VARCHAR, sm_count INTEGER, cc_major INTEGER, cc_minor INTEGER,
    memory_bytes BIGINT,                   -- device memory, bytes
    memory_bandwidth_bytes_per_s BIGINT,   -- peak memory bandwidth, bytes/s
    l2_bytes BIGINT,                       -- L2 size, bytes
    clock_hz BIGINT,                       -- SM clock as reported, Hz
    max_warps_per_sm INTEGER
);

CREATE TABLE IF NOT EXISTS streams (
    run_id INTEGER, stream_id BIGINT, pid INTEGER, context_id BIGINT, priority BIGINT, flag BIGINT
);

CREATE TABLE IF NOT EXISTS threads (
    run_id INTEGER, global_tid BIGINT, pid INTEGER, tid INTEGER, name VARCHAR, priority BIGINT
);

-- All GPU activity in one place (kernels, memcpy, memset) for timeline/utilization queries.
CREATE OR REPLACE VIEW gpu_ops AS
    SELECT run_id, 'kernel' AS op_kind, name, start_ns, end_ns, dur_ns, device_id, stream_id,
           correlation_id, global_pid FROM kernels
    UNION ALL
    SELECT run_id, 'memcpy', operation, start_ns, end_ns, dur_ns, device_id, stream_id,
           correlation_id, global_pid FROM memcpy
    UNION ALL
    SELECT run_id, 'memset', operation, start_ns, end_ns, dur_ns, device_id, stream_id,
           correlation_id, global_pid FROM memset;
