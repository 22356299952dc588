-- Tables ingested from Nsight Systems SQLite exports. Times are in ns on the capture's
-- clock (they can be negative when a capture range is used); names are resolved.

-- Every kernel and CUDA API name in the store, once. The two big tables (kernels and API
-- calls, millions of rows) keep ids: writing an int is ~10x cheaper than a string, and the
-- ids are shared by all runs, so grouping by id is grouping by name across runs too.
CREATE TABLE IF NOT EXISTS _strings (
    string_id BIGINT PRIMARY KEY,  -- id used by _kernels and _api_calls
    value VARCHAR NOT NULL UNIQUE  -- the name
);

-- Storage of the kernels view (names as _strings ids). dur_ns, pid and launch_tid are
-- computed by the view from the columns they derive from: not written at ingest.
CREATE TABLE IF NOT EXISTS _kernels (
    run_id INTEGER, start_ns BIGINT, end_ns BIGINT, device_id BIGINT, context_id BIGINT,
    green_context_id BIGINT, stream_id BIGINT, correlation_id BIGINT, global_pid BIGINT, graph_node_id BIGINT,
    name_id BIGINT, short_name_id BIGINT,
    grid_x INTEGER, grid_y INTEGER, grid_z INTEGER, block_x INTEGER, block_y INTEGER, block_z INTEGER,
    registers_per_thread INTEGER, static_smem_bytes INTEGER, dynamic_smem_bytes INTEGER,
    launch_global_tid BIGINT, api_start_ns BIGINT, api_end_ns BIGINT, api_name_id BIGINT,
    nvtx_range_id BIGINT, stream_gap_ns BIGINT, device_gap_ns BIGINT
);

-- GPU kernels, one row per launch.
CREATE OR REPLACE VIEW kernels AS
SELECT k.run_id,
       k.start_ns,             -- kernel start on the GPU, ns
       k.end_ns,               -- kernel end, ns
       k.end_ns - k.start_ns AS dur_ns,  -- duration, ns
       k.device_id,            -- CUDA device id
       k.context_id,           -- CUDA context id (NULL for an op on none)
       k.green_context_id,     -- green context (SM partition) it ran in; NULL outside any
       k.stream_id,            -- CUDA stream id (NULL for an op on none)
       k.correlation_id,       -- links to api_calls.correlation_id (same process)
       k.global_pid,           -- nsys globalPid (process key)
       ((k.global_pid >> 24) & 16777215)::INTEGER AS pid,  -- OS process id
       k.graph_node_id,        -- CUDA graph node id when launched by a graph, else NULL
       n.value AS name,        -- demangled kernel name (as nsys stats prints it)
       s.value AS short_name,  -- base name without templates/arguments
       k.grid_x, k.grid_y, k.grid_z,      -- grid dimensions, blocks
       k.block_x, k.block_y, k.block_z,   -- block dimensions, threads
       k.registers_per_thread, -- registers per thread
       k.static_smem_bytes,    -- static shared memory per block, bytes
       k.dynamic_smem_bytes,   -- dynamic shared memory per block, bytes
       k.launch_global_tid,    -- thread of the API call that launched it (nsys globalTid)
       (k.launch_global_tid & 16777215)::INTEGER AS launch_tid,  -- its OS thread id
       k.api_start_ns,         -- launch call start, ns (cudaGraphLaunch for graph kernels)
       k.api_end_ns,           -- launch call end, ns
       a.value AS api_name,    -- launch API, _vNNNN stripped (cudaLaunchKernel, cuLaunchKernelEx, ...)
       k.nvtx_range_id,        -- nvtx_ranges.range_id of the innermost push/pop range around the launch
                               -- call on its thread; NULL when launched outside every range
       k.stream_gap_ns,        -- idle time of its stream right before it, ns (NULL: the stream was busy)
       k.device_gap_ns,        -- idle time of its device (all streams, copies too) right before it, ns
       k.name_id               -- _strings id of name (group by it: cheaper than by name)
FROM _kernels k
LEFT JOIN _strings n ON n.string_id = k.name_id
LEFT JOIN _strings s ON s.string_id = k.short_name_id
LEFT JOIN _strings a ON a.string_id = k.api_name_id;

-- Storage of the api_calls view (names as _strings ids). dur_ns, global_pid, pid and tid
-- are computed by the view.
CREATE TABLE IF NOT EXISTS _api_calls (
    run_id INTEGER, start_ns BIGINT, end_ns BIGINT, global_tid BIGINT,
    correlation_id BIGINT, name_id BIGINT, raw_name_id BIGINT, return_value BIGINT, nvtx_range_id BIGINT,
    callchain_id BIGINT, python_stack_id BIGINT
);

-- CUDA runtime/driver API calls.
CREATE OR REPLACE VIEW api_calls AS
SELECT c.run_id,
       c.start_ns,          -- call start on the CPU, ns
       c.end_ns,            -- call end, ns
       c.end_ns - c.start_ns AS dur_ns,                    -- duration, ns
       c.global_tid,                                       -- nsys globalTid (thread key)
       c.global_tid & -16777216 AS global_pid,             -- globalTid & 0xFFFFFFFFFF000000 (process key)
       ((c.global_tid >> 24) & 16777215)::INTEGER AS pid,  -- OS process id
       (c.global_tid & 16777215)::INTEGER AS tid,          -- OS thread id
       c.correlation_id,    -- links to the GPU work it launched
       n.value AS name,     -- API name with the _vNNNN suffix stripped (as nsys stats prints it)
       r.value AS raw_name, -- API name as recorded
       c.return_value,      -- CUDA result code
       c.nvtx_range_id,     -- for a call that waits for the GPU ('Synchronize' in its name): nvtx_ranges.range_id
                            -- of the innermost push/pop range open on its thread at its start (NULL: none);
                            -- NULL for the others
       c.name_id,           -- _strings id of name
       c.callchain_id,      -- its call stack in api_frames, where nsys unwound one (--cudabacktrace, the CPU
                            -- sampled: the calls past a threshold given); else NULL
       c.python_stack_id    -- its Python stack in python_frames, where nsys took one (--python-backtrace=cuda
                            -- beside --cudabacktrace, exported with --include-blobs=true); else NULL
FROM _api_calls c
LEFT JOIN _strings n ON n.string_id = c.name_id
LEFT JOIN _strings r ON r.string_id = c.raw_name_id;

CREATE TABLE IF NOT EXISTS memcpy (
    run_id INTEGER, start_ns BIGINT, end_ns BIGINT, dur_ns BIGINT,  -- ns
    device_id BIGINT, context_id BIGINT, green_context_id BIGINT, stream_id BIGINT,
    correlation_id BIGINT, global_pid BIGINT, pid INTEGER, graph_node_id BIGINT,
    bytes BIGINT,            -- bytes copied
    copy_kind INTEGER,       -- CUPTI copy kind id
    operation VARCHAR,       -- '[CUDA memcpy Host-to-Device]' etc., as nsys stats names it
    src_kind VARCHAR,        -- source memory kind (Pageable, Pinned, Device, ...)
    dst_kind VARCHAR,        -- destination memory kind
    src_device_id BIGINT,    -- device copied from, where nsys records it (peer copies); else NULL
    dst_device_id BIGINT,    -- device copied to, likewise
    virtual_address BIGINT,  -- a Unified Memory migration's base virtual address of the pages moved; else NULL
    migration_cause VARCHAR, -- why it migrated ('Page fault', 'User prefetch', 'Eviction', ...); else NULL
    launch_global_tid BIGINT, launch_tid INTEGER,   -- thread of the launching API call
    api_start_ns BIGINT, api_end_ns BIGINT,         -- the launching call, ns
    api_name VARCHAR,                               -- the launching API (cudaMemcpyAsync, ...)
    nvtx_range_id BIGINT,                           -- innermost push/pop NVTX range around the launch call
    stream_gap_ns BIGINT,                           -- idle time of its stream right before it, ns
    device_gap_ns BIGINT                            -- idle time of its device right before it, ns
);

CREATE TABLE IF NOT EXISTS memset (
    run_id INTEGER, start_ns BIGINT, end_ns BIGINT, dur_ns BIGINT,  -- ns
    device_id BIGINT, context_id BIGINT, green_context_id BIGINT, stream_id BIGINT,
    correlation_id BIGINT, global_pid BIGINT, pid INTEGER, graph_node_id BIGINT,
    bytes BIGINT,            -- bytes set
    value INTEGER,           -- value written
    operation VARCHAR,       -- '[CUDA memset]'
    mem_kind VARCHAR,        -- memory kind
    launch_global_tid BIGINT, launch_tid INTEGER,   -- thread of the launching API call
    api_start_ns BIGINT, api_end_ns BIGINT,         -- the launching call, ns
    api_name VARCHAR,                               -- the launching API (cudaMemsetAsync, ...)
    nvtx_range_id BIGINT,                           -- innermost push/pop NVTX range around the launch call
    stream_gap_ns BIGINT,                           -- idle time of its stream right before it, ns
    device_gap_ns BIGINT                            -- idle time of its device right before it, ns
);

-- CUDA graph launches recorded whole (nsys --cuda-graph-trace=graph, the default): one
-- row per launch; the graph's kernels, copies and memsets are then not in their tables.
-- With --cuda-graph-trace=node this table is empty and the graph's work is in them.
CREATE TABLE IF NOT EXISTS graph_execs (
    run_id INTEGER, start_ns BIGINT, end_ns BIGINT, dur_ns BIGINT,  -- ns
    device_id BIGINT, context_id BIGINT, green_context_id BIGINT, stream_id BIGINT,
    correlation_id BIGINT, global_pid BIGINT, pid INTEGER,
    graph_id BIGINT,         -- the graph (CUDA_GRAPH_EVENTS.graphId)
    graph_exec_id BIGINT,    -- its instantiation (cudaGraphExec_t)
    launch_global_tid BIGINT, launch_tid INTEGER,   -- thread of the launching API call
    api_start_ns BIGINT, api_end_ns BIGINT,         -- the launching call, ns
    api_name VARCHAR,                               -- the launching API (cudaGraphLaunch)
    nvtx_range_id BIGINT,                           -- innermost push/pop NVTX range around the launch call
    stream_gap_ns BIGINT,                           -- idle time of its stream right before it, ns
    device_gap_ns BIGINT                            -- idle time of its device right before it, ns
);

CREATE TABLE IF NOT EXISTS syncs (
    run_id INTEGER, start_ns BIGINT, end_ns BIGINT, dur_ns BIGINT,  -- ns
    device_id BIGINT, context_id BIGINT, green_context_id BIGINT, stream_id BIGINT,
    correlation_id BIGINT, global_pid BIGINT, pid INTEGER,
    sync_type VARCHAR,       -- Event sync, Stream sync, Context sync, ...
    event_id BIGINT          -- CUDA event id for event syncs
);

-- Time nsys itself spent on a thread (PROFILER_OVERHEAD: CUPTI buffer flushes, its
-- initialization, ...): nsys's expert rules on GPU idle time (gpu-gaps,
-- low-gpu-utilization) count the CUDA profiling overheads as time the GPU was busy.
CREATE TABLE IF NOT EXISTS profiler_overhead (
    run_id INTEGER, start_ns BIGINT, end_ns BIGINT, dur_ns BIGINT,  -- ns
    global_tid BIGINT,       -- nsys globalTid of the thread it stopped
    pid INTEGER, tid INTEGER,
    name VARCHAR             -- what nsys did ('CUPTI Buffer flush', 'CUDA profiling overhead', ...)
);

-- OS runtime library calls on the CPU (nsys -t osrt, which tracekit capture uses): the
-- libc and system calls that can block (poll, read, ioctl, pthread_cond_wait, sem_wait, ...).
CREATE TABLE IF NOT EXISTS osrt_calls (
    run_id INTEGER, start_ns BIGINT, end_ns BIGINT, dur_ns BIGINT,  -- ns
    global_tid BIGINT,       -- nsys globalTid (thread key)
    pid INTEGER, tid INTEGER,
    name VARCHAR,            -- function name as nsys prints it
    return_value BIGINT,     -- its return value
    nesting_level INTEGER,   -- 0: called by the program; > 0: inside another traced call
    callchain_id BIGINT      -- its call stack in osrt_frames, where nsys unwound one (calls past its
                             -- backtrace threshold, 80 us by default); else NULL
);

-- The call stacks of OS runtime calls (nsys -t osrt unwinds a call past its backtrace threshold):
-- one row per frame, depth 0 the runtime function itself, each caller one deeper.
CREATE TABLE IF NOT EXISTS osrt_frames (
    run_id INTEGER,
    callchain_id BIGINT,     -- osrt_calls.callchain_id
    depth INTEGER,           -- 0: the called function; n: the n-th caller
    function VARCHAR,        -- the function as nsys resolved it (or its address)
    module VARCHAR,          -- the executable or library it is in
    unresolved BOOLEAN,      -- nsys could not resolve the address to a symbol
    kernel_mode BOOLEAN      -- the frame is in the kernel
);

-- The call stacks of CUDA API calls (nsys --cudabacktrace, with the CPU sampled, unwinds the calls
-- past a threshold given): one row per frame, depth 0 the innermost (in CUPTI, nsys's), each caller
-- one deeper.
CREATE TABLE IF NOT EXISTS api_frames (
    run_id INTEGER,
    callchain_id BIGINT,     -- api_calls.callchain_id
    depth INTEGER,           -- 0: the innermost frame; n: the n-th caller
    function VARCHAR,        -- the function as nsys resolved it (or its address)
    module VARCHAR,          -- the executable or library it is in
    unresolved BOOLEAN,      -- nsys could not resolve the address to a symbol
    kernel_mode BOOLEAN      -- the frame is in the kernel
);

-- Python call stacks (nsys --python-backtrace=cuda: a CUDA API call's; --python-sampling=true: a
-- sample's; exported with --include-blobs=true): one row per frame of each distinct stack of the
-- run, depth 0 the innermost (the line running), each caller one deeper.
CREATE TABLE IF NOT EXISTS python_frames (
    run_id INTEGER,
    stack_id BIGINT,         -- api_calls.python_stack_id, python_samples.stack_id
    depth INTEGER,           -- 0: the innermost frame; n: the n-th caller
    function VARCHAR,        -- the function ('<module>': a module's top level)
    file VARCHAR,            -- its source file, as Python names it
    line INTEGER             -- the line running in it
);

-- nsys's samples of the Python threads' stacks (nsys profile --python-sampling=true, 1,000 a second
-- by default: --python-sampling-frequency; exported with --include-blobs=true): one row per sample.
CREATE TABLE IF NOT EXISTS python_samples (
    run_id INTEGER,
    sample_id BIGINT,        -- the sample's place among the run's (the export's order)
    ts_ns BIGINT,            -- when it was taken, ns
    global_tid BIGINT,       -- nsys globalTid of the sampled thread
    pid INTEGER, tid INTEGER,
    thread_state VARCHAR,    -- the thread's state as nsys says it (Running, Blocking Wait, Uninterruptible)
    stack_id BIGINT          -- its stack in python_frames (NULL: no frame)
);

-- Unified Memory page faults on the CPU (nsys profile --cuda-um-cpu-page-faults=true): one
-- row per fault, a host thread touching a managed page that was on the GPU.
CREATE TABLE IF NOT EXISTS um_cpu_faults (
    run_id INTEGER,
    ts_ns BIGINT,            -- when it faulted, ns
    global_pid BIGINT,       -- nsys globalPid (process key)
    pid INTEGER,             -- OS process id
    address BIGINT,          -- virtual address of the page
    instruction VARCHAR,     -- function of the faulting instruction as nsys resolved it (or its address)
    module VARCHAR,          -- the module (executable or library) the instruction is in
    pc BIGINT,               -- the faulting instruction's program counter, where recorded
    source_file VARCHAR,     -- its source file, where nsys resolved it (else NULL or '')
    source_line INTEGER      -- its source line, likewise (0: unresolved)
);

-- Unified Memory page faults on the GPU (nsys profile --cuda-um-gpu-page-faults=true): one
-- row per group of faults on a page that the GPU's fault handler serviced together.
CREATE TABLE IF NOT EXISTS um_gpu_faults (
    run_id INTEGER,
    start_ns BIGINT, end_ns BIGINT, dur_ns BIGINT,  -- the group's servicing, ns
    global_pid BIGINT, pid INTEGER,
    device_id BIGINT,        -- CUDA device that faulted
    address BIGINT,          -- virtual address of the page
    faults BIGINT,           -- page faults in the group
    access_type VARCHAR      -- Read, Write, Atomic, Prefetch or Unknown
);

-- The GPU memory the CUDA runtime allocated and freed (nsys profile --cuda-memory-usage=true): one
-- row per allocation or free of device memory (cudaMalloc, and cudaMallocAsync from a stream-ordered
-- pool), pinned host memory, managed memory or a module's static device memory (recorded when the
-- module loads, with no API call), with the API call that made it. bytes are the bytes asked for.
CREATE TABLE IF NOT EXISTS gpu_memory (
    run_id INTEGER,
    ts_ns BIGINT,            -- when, ns (the API call's time; 0: before the capture range opened)
    event_index BIGINT,      -- its place in the export: nsys writes the events in the order they
                             -- happened, those before a capture range opened all at time 0
    global_pid BIGINT, pid INTEGER,
    device_id BIGINT,        -- CUDA device
    context_id BIGINT,       -- CUDA context (NULL: none recorded, static memory)
    operation VARCHAR,       -- allocation or free
    memory_kind VARCHAR,     -- Device, Pinned, Managed, Device Static, Managed Static, Pageable, Array, Unknown
    address BIGINT,          -- virtual address of the allocation (a free names the one it frees)
    bytes BIGINT,            -- its size, bytes
    name VARCHAR,            -- the variable's name (static memory), else NULL
    correlation_id BIGINT,   -- the API call's correlation id (NULL: none)
    stream_id BIGINT,        -- the stream of a stream-ordered allocation or free (NULL: none)
    pool_address BIGINT,     -- base address of the stream-ordered pool it is in (NULL: none)
    pool_reserved_bytes BIGINT,  -- that pool's size (memory it holds from the device) then, bytes
    pool_used_bytes BIGINT,  -- the pool's bytes in use then
    launch_global_tid BIGINT, launch_tid INTEGER,  -- the thread of the API call that made it
    api_start_ns BIGINT, api_end_ns BIGINT,
    api_name VARCHAR,        -- the call: cudaMalloc, cudaMallocAsync, cudaFree, cudaMallocHost, ...
    nvtx_range_id BIGINT     -- innermost push/pop NVTX range around that call (nvtx_ranges.range_id)
);

-- The stream-ordered memory pools (cudaMallocAsync): each creation, trim and destruction, with the
-- pool's size after it.
CREATE TABLE IF NOT EXISTS gpu_memory_pools (
    run_id INTEGER,
    ts_ns BIGINT,            -- when, ns
    global_pid BIGINT, pid INTEGER,
    device_id BIGINT,
    pool_address BIGINT,     -- the pool's base address (gpu_memory.pool_address)
    operation VARCHAR,       -- Created, Trimmed, Destroyed
    pool_type VARCHAR,       -- Local (this process's) or Imported (another's)
    correlation_id BIGINT,   -- the API call's correlation id (NULL: none)
    pool_reserved_bytes BIGINT,  -- the pool's size after, bytes
    pool_used_bytes BIGINT,  -- its bytes in use after
    release_threshold_bytes BIGINT  -- what it keeps when trimmed at a synchronization
);

-- The CPU's samples (nsys profile --sample=process-tree, nsys's default on Linux): one row per
-- sample of a running thread, taken each sampling period of its CPU time (a timer or, with a
-- hardware trigger, a count of cycles: 2 ms, or 0.7 to 1.4 ms, in the exports seen).
CREATE TABLE IF NOT EXISTS cpu_samples (
    run_id INTEGER,
    sample_id BIGINT,        -- the sample's id in the export (cpu_sample_frames.sample_id)
    ts_ns BIGINT,            -- when it was taken, ns
    global_tid BIGINT,       -- nsys globalTid (thread key)
    pid INTEGER, tid INTEGER,
    cpu INTEGER,             -- the CPU core it ran on
    thread_state VARCHAR     -- Running, or the state nsys recorded
);

-- When each thread was put on a CPU and taken off it (nsys profile --cpuctxsw=process-tree, which
-- comes with --sample=process-tree by default): a thread's time on the CPUs is the sum of its
-- spans from one sched_in to the next row (its sched-out).
CREATE TABLE IF NOT EXISTS thread_sched (
    run_id INTEGER,
    ts_ns BIGINT,            -- when, ns
    global_tid BIGINT, pid INTEGER, tid INTEGER,
    cpu INTEGER,             -- the CPU core
    sched_in BOOLEAN,        -- true: put on the CPU; false: taken off it
    thread_state VARCHAR     -- the thread's state as nsys recorded it
);

-- Each sample's call stack, one row per frame: depth 0 is the instruction the sample hit, the
-- caller one deeper. nsys unwinds the stack of one sample in --samples-per-backtrace (default 4):
-- the others have their depth-0 frame alone. The outermost frame can be nsys's own ('[Broken
-- backtraces]', '[Max depth]'); a function nsys could not resolve is its address ('0x7f20697a1efa').
CREATE TABLE IF NOT EXISTS cpu_sample_frames (
    run_id INTEGER,
    sample_id BIGINT,        -- cpu_samples.sample_id
    depth INTEGER,           -- 0: where the sample hit; n: the n-th caller
    function VARCHAR,        -- the function as nsys resolved it (or its address)
    module VARCHAR,          -- the executable or library it is in
    unresolved BOOLEAN,      -- nsys could not resolve the address to a symbol
    kernel_mode BOOLEAN      -- the frame is in the kernel
);

-- The GPU's counters as nsys samples them (nsys profile --gpu-metrics-devices=...: by default
-- 10,000 times a second): clocks, SMs active, SM issue, tensor pipes, warps in flight, DRAM and
-- PCIe bandwidth. One row per sample and metric; the metric's name and unit in gpu_metric_names.
-- A GPU that no profiled process used as a CUDA device is left out (its samples would take the
-- id of another GPU's CUDA device).
CREATE TABLE IF NOT EXISTS gpu_metrics (
    run_id INTEGER,
    device_id BIGINT,        -- CUDA device id
    metric_id BIGINT,        -- gpu_metric_names.metric_id (of this run and device)
    timestamp_ns BIGINT,     -- sample time, ns
    value DOUBLE             -- as the export records it, clocks in MHz (the export's Hz / 1e6)
);

-- The metrics a run's GPUs were sampled for, one row per device and metric.
CREATE TABLE IF NOT EXISTS gpu_metric_names (
    run_id INTEGER,
    device_id BIGINT,        -- CUDA device id
    metric_id BIGINT,        -- the metric's id in gpu_metrics
    metric VARCHAR,          -- its name as nsys shows it, unit left out ('GPC Clock Frequency', 'SMs Active';
                             -- one name can come in several units: 'Compute Warps in Flight')
    unit VARCHAR,            -- the unit nsys gives it: 'MHz', 'Throughput %' (of the peak), 'Avg',
                             -- 'Avg Warps per Cycle' (NULL: none given)
    nsys_name VARCHAR        -- the name as the export records it ('GPC Clock Frequency [MHz]')
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
    parent_id BIGINT,        -- range_id of the tightest enclosing range on the same thread (nsys's rule):
                             -- the shortest that starts no later and ends no earlier; of equal ones the last opened
    path VARCHAR,            -- texts from the outermost range down, '/'-separated (named domains as domain:text)
    children INTEGER,        -- direct children that launched GPU work (nsys "Num Child")
    proj_start_ns BIGINT,    -- start of the first GPU op launched inside the range on its thread, ns
    proj_end_ns BIGINT,      -- end of the last such GPU op, ns
    proj_dur_ns BIGINT,      -- projected GPU time, ns (NULL if it launched no GPU work)
    gpu_ops INTEGER,         -- GPU ops launched inside it (distinct correlation ids)
    category BIGINT,         -- NVTX category
    color BIGINT             -- NVTX color (ARGB)
);

-- Each NVTX name's GPU windows in a run: its ranges' GPU projections (the first GPU op's start
-- to the last one's end; a range that launched none: its own span), merged where they overlap:
-- the time the GPU's sampled counters are read over for that name (gpu-metrics range=,
-- nvtx-gpu-metrics), each sample once.
CREATE OR REPLACE VIEW nvtx_gpu_windows AS
SELECT run_id, name, min(s) AS start_ns, max(e) AS end_ns
FROM (SELECT *, sum(new) OVER (PARTITION BY run_id, name ORDER BY s, e ROWS UNBOUNDED PRECEDING) AS window_id
      FROM (SELECT run_id, name, s, e,
                   CASE WHEN s <= max(e) OVER (PARTITION BY run_id, name ORDER BY s, e
                                               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                        THEN 0 ELSE 1 END AS new  -- a window starts where every earlier range has ended
            FROM (SELECT run_id, name, coalesce(proj_start_ns, start_ns) AS s, coalesce(proj_end_ns, end_ns) AS e
                  FROM nvtx_ranges)))
GROUP BY run_id, name, window_id;

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

-- nsys's NVTX range kernel summary (nsys stats -r nvtx_kern_sum), computed at ingest: per
-- (range name, style, launching thread, kernel), the kernels launched inside every range of
-- that name on the thread (a kernel counts in every range around its launch call: nested
-- ranges each count it). Kernels in no range have a row without a range.
CREATE TABLE IF NOT EXISTS nvtx_range_kernel_sum (
    run_id INTEGER,
    range VARCHAR,             -- 'domain:text' as nsys names it; NULL: kernels in no range
    style VARCHAR,             -- PushPop or StartEnd
    pid INTEGER, tid INTEGER,  -- the launching thread (NULL: no launching call found)
    range_instances BIGINT,    -- ranges of that name that contain one of the kernels
    kernel_instances BIGINT,   -- kernel launches
    total_ns BIGINT,           -- summed kernel time over (range, kernel) pairs, ns
    avg_ns DOUBLE, med_ns DOUBLE, min_ns BIGINT, max_ns BIGINT, stddev_ns DOUBLE,  -- over the pairs, ns
    name VARCHAR               -- kernel name (demangled)
);

-- Kernel time per NVTX range path and kernel name (nvtx_kernel_sum by its ranges' paths),
-- summed at ingest: kernels-by-nvtx reads it instead of joining millions of ranges.
CREATE TABLE IF NOT EXISTS nvtx_path_kernel_sum (
    run_id INTEGER,
    path VARCHAR,            -- nvtx_ranges.path of the innermost range; NULL = launched outside every range
    name VARCHAR,            -- kernel name (demangled)
    launches BIGINT,         -- kernel launches
    total_ns BIGINT          -- summed kernel time, ns
);

-- Launch and execution phases of kernels per (process, launching thread, device, launch
-- API, kernel): the statistics of `nsys stats -r cuda_kern_exec_sum`, unrounded, computed
-- at ingest (four exact medians over millions of launches take longer than a query may).
-- API time: the launch call; queue time: call end to kernel start, only when positive;
-- kernel time: the kernel; total time: call start to the later of call end and kernel end.
CREATE TABLE IF NOT EXISTS kernel_exec_sum (
    run_id INTEGER,
    pid INTEGER,             -- process of the launching thread
    tid INTEGER,             -- launching thread
    device_id BIGINT,        -- CUDA device that ran the kernel
    api_name_id BIGINT,      -- launch API (_strings id, suffix stripped)
    name_id BIGINT,          -- kernel (_strings id, demangled)
    launches BIGINT,         -- launches
    queued BIGINT,           -- launches with a positive queue time
    total_avg_ns DOUBLE, total_med_ns DOUBLE, total_min_ns BIGINT, total_max_ns BIGINT, total_stddev_ns DOUBLE,
    api_avg_ns DOUBLE, api_med_ns DOUBLE, api_min_ns BIGINT, api_max_ns BIGINT, api_stddev_ns DOUBLE,
    queue_avg_ns DOUBLE, queue_med_ns DOUBLE, queue_min_ns BIGINT, queue_max_ns BIGINT, queue_stddev_ns DOUBLE,
    kernel_avg_ns DOUBLE, kernel_med_ns DOUBLE, kernel_min_ns BIGINT, kernel_max_ns BIGINT, kernel_stddev_ns DOUBLE
);

-- api-summary's statistics per recorded API name (nsys stats -r cuda_api_sum), unrounded,
-- computed at ingest: an exact median and a sample stddev over millions of calls took
-- 65-108 ms as a query on the 2-core benchmark machine.
CREATE TABLE IF NOT EXISTS api_sum (
    run_id INTEGER,
    raw_name_id BIGINT,      -- API name as recorded (_strings id, with its _vNNNN suffix)
    name_id BIGINT,          -- the same name, suffix stripped (_strings id)
    calls BIGINT,            -- number of calls
    total_ns HUGEINT,        -- summed duration, ns
    avg_ns DOUBLE,           -- mean duration, ns
    med_ns DOUBLE,           -- median duration, ns
    min_ns BIGINT,           -- shortest call, ns
    max_ns BIGINT,           -- longest call, ns
    stddev_ns DOUBLE         -- sample standard deviation, ns (0 for one call)
);

-- Launch latency per kernel (demangled name): the statistics of the launch-overhead query,
-- computed at ingest (three exact quantiles over millions of launches take longer than a
-- query may). Latency: launch call start to kernel start (graph kernels: cudaGraphLaunch).
CREATE TABLE IF NOT EXISTS launch_latency_sum (
    run_id INTEGER,
    name_id BIGINT,          -- kernel (_strings id, demangled)
    launches BIGINT,         -- launches matched to their API call
    api_name_id BIGINT,      -- most common launch API (_strings id, suffix stripped)
    api_med_ns DOUBLE,       -- median duration of the launch call, ns
    latency_min_ns BIGINT,   -- shortest call-start to kernel-start, ns
    latency_med_ns DOUBLE,   -- median call-start to kernel-start, ns
    latency_p90_ns DOUBLE,   -- 90th percentile, ns
    latency_p99_ns DOUBLE,   -- 99th percentile, ns
    latency_max_ns BIGINT,   -- longest, ns
    queue_med_ns DOUBLE,     -- median call-end to kernel-start where positive, ns
    total_latency_ns BIGINT  -- summed call-start to kernel-start, ns
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

-- The name of a CUDA graph launch traced whole, as a GPU op ('[CUDA graph 3]': the graph's id).
CREATE OR REPLACE MACRO graph_op_name(graph_id) AS '[CUDA graph ' || graph_id || ']';

-- A virtual address as nsys prints one ('0x7F6D3A101000': hex, upper case).
CREATE OR REPLACE MACRO hex_address(address) AS '0x' || hex(address);

-- All GPU activity in one place (kernels, memcpy, memset, whole graph launches) for
-- timeline/utilization queries. A stream is (global_pid, context_id, stream_id): stream
-- ids of different processes are unrelated; context and stream are NULL for the ops that
-- run on none (Unified Memory migrations), one lane per process. Kernels come from _kernels with one name
-- lookup (the kernels view would make three).
CREATE OR REPLACE VIEW gpu_ops AS
    SELECT k.run_id, 'kernel' AS op_kind, n.value AS name, k.start_ns, k.end_ns, k.end_ns - k.start_ns AS dur_ns, k.device_id,
           k.context_id, k.stream_id, k.correlation_id, k.global_pid, k.stream_gap_ns, k.device_gap_ns
    FROM _kernels k LEFT JOIN _strings n ON n.string_id = k.name_id
    UNION ALL
    SELECT run_id, 'memcpy', operation, start_ns, end_ns, dur_ns, device_id, context_id, stream_id,
           correlation_id, global_pid, stream_gap_ns, device_gap_ns FROM memcpy
    UNION ALL
    SELECT run_id, 'memset', operation, start_ns, end_ns, dur_ns, device_id, context_id, stream_id,
           correlation_id, global_pid, stream_gap_ns, device_gap_ns FROM memset
    UNION ALL
    SELECT run_id, 'graph', graph_op_name(graph_id), start_ns, end_ns, dur_ns, device_id, context_id,
           stream_id, correlation_id, global_pid, stream_gap_ns, device_gap_ns FROM graph_execs;

-- Communication against computation (tracekit/ingest/nsys/overlap.py, at ingest, for a run
-- with NCCL kernels: short name nccl...; no rows otherwise). Per kernel short name and
-- process/device: launches, summed duration, and the time other NCCL kernels (comm) and
-- other compute kernels (compute) of that process ran on that device during them, each
-- counted once however many ran. nccl-overlap reads it.
CREATE TABLE IF NOT EXISTS nccl_overlap_sum (
    run_id INTEGER, global_pid BIGINT, device_id BIGINT, short_name_id BIGINT, nccl BOOLEAN,
    instances BIGINT, total_ns BIGINT, comm_overlap_ns BIGINT, compute_overlap_ns BIGINT
);

-- Per process/device of such a run: NCCL kernels launched, and the time at least one NCCL
-- kernel ran, at least one compute kernel, both, NCCL kernels and no compute kernel (the
-- exposed communication), any kernel. comm-overlap reads it.
CREATE TABLE IF NOT EXISTS comm_overlap_sum (
    run_id INTEGER, global_pid BIGINT, device_id BIGINT, nccl_kernels BIGINT, nccl_ns BIGINT, compute_ns BIGINT,
    overlap_ns BIGINT, exposed_nccl_ns BIGINT, busy_ns BIGINT
);

-- NVIDIA's expert rules (`nsys analyze`, its rules/*.py), one table macro each, read by
-- their named queries (sync-apis, async-pageable-copies, sync-copies, sync-memsets,
-- gpu-gaps, low-gpu-utilization) and by nsys-rules, which sums them up.

-- The CUDA synchronization calls that block the host thread (rule cuda_api_sync):
-- cudaDeviceSynchronize and cudaStreamSynchronize (any suffix: _ptsz, ...). nsys matches
-- the names with SQLite's LIKE, which ignores case: ILIKE here.
CREATE OR REPLACE MACRO nsys_sync_apis(run) AS TABLE
SELECT c.end_ns - c.start_ns AS dur_ns, c.start_ns, c.end_ns, c.global_tid,
       ((c.global_tid >> 24) & 16777215)::INTEGER AS pid, (c.global_tid & 16777215)::INTEGER AS tid,
       n.value AS api_name, c.nvtx_range_id
FROM _api_calls c JOIN _strings n ON n.string_id = c.name_id
WHERE c.run_id = run AND (n.value ILIKE 'cudaDeviceSynchronize%' OR n.value ILIKE 'cudaStreamSynchronize%');

-- The copies and memsets that block the host, each with the rule that finds it:
-- cuda_memcpy_async, a cudaMemcpy*Async* from or to pageable memory (staged by the driver:
-- synchronous after all); cuda_memcpy_sync, a cudaMemcpy* without Async, less host-to-device
-- copies of 64,000 bytes or less (they return once staged) and copies within one device
-- recorded with both devices; cuda_memset_sync, a cudaMemset* without async on pinned or
-- managed memory. The launching call is the op's own (same process and correlation id),
-- its name with the _vNNNN suffix stripped: nsys joins on the correlation id alone, so in a
-- capture of several processes it can list an op again under another process's call.
CREATE OR REPLACE MACRO nsys_memory_findings(run) AS TABLE
SELECT CASE WHEN api_name ILIKE 'cudaMemcpy%Async%' THEN 'cuda_memcpy_async' ELSE 'cuda_memcpy_sync' END AS rule,
       dur_ns, start_ns, end_ns, src_kind, dst_kind, NULL::VARCHAR AS mem_kind, bytes, pid, device_id,
       context_id, green_context_id, stream_id, api_name, nvtx_range_id
FROM memcpy
WHERE run_id = run AND api_name ILIKE 'cudaMemcpy%'
  AND CASE WHEN api_name ILIKE '%Async%' THEN src_kind = 'Pageable' OR dst_kind = 'Pageable'
           ELSE NOT (bytes <= 64000 AND copy_kind = 1) AND NOT (src_device_id IS NOT NULL AND src_device_id = dst_device_id) END
UNION ALL
SELECT 'cuda_memset_sync', dur_ns, start_ns, end_ns, NULL, NULL, mem_kind, bytes, pid, device_id,
       context_id, green_context_id, stream_id, api_name, nvtx_range_id
FROM memset
WHERE run_id = run AND api_name ILIKE 'cudaMemset%' AND api_name NOT ILIKE '%async%'
  AND mem_kind IN ('Pinned', 'Managed');

-- What nsys's rules on GPU idle time (gpustats.GPUOperation) count as the GPU busy, per
-- process and device: each kernel, copy and memset that starts after 0 (not a CUDA graph
-- launch traced whole: those rules read only the kernel, memcpy and memset tables), and
-- each of the process's CUDA profiling overheads (three names) that lies inside the span of
-- its ops on a device, on that device.
CREATE OR REPLACE MACRO nsys_rule_ops(run) AS TABLE
WITH ops AS (
    SELECT start_ns, end_ns, ((global_pid >> 24) & 16777215)::INTEGER AS pid, device_id, context_id
    FROM gpu_ops WHERE run_id = run AND op_kind <> 'graph' AND start_ns > 0
), span AS (
    SELECT pid, device_id, min(start_ns) AS lo, max(end_ns) AS hi, min(context_id) AS context_id
    FROM ops GROUP BY pid, device_id
)
SELECT * FROM ops
UNION ALL
SELECT o.start_ns, o.end_ns, o.pid, s.device_id, s.context_id
FROM profiler_overhead o JOIN span s ON s.pid = o.pid AND o.start_ns > s.lo AND o.end_ns < s.hi
WHERE o.run_id = run
  AND o.name IN ('CUDA profiling data flush overhead', 'CUDA profiling stop overhead', 'CUDA profiling overhead');

-- The GPU's idle stretches longer than gap_ms, per process and device, between the
-- process's first and last op there (rule gpu_gaps): the i-th op end in end order and the
-- (i+1)-th start in start order bound a gap where the end comes first.
CREATE OR REPLACE MACRO nsys_gpu_gaps(run, gap_ms) AS TABLE
WITH ops AS MATERIALIZED (
    SELECT * FROM nsys_rule_ops(run)
), starts AS (
    SELECT row_number() OVER (ORDER BY pid, device_id, start_ns) AS i, start_ns, pid, device_id FROM ops
), ends AS (
    SELECT row_number() OVER (ORDER BY pid, device_id, end_ns, context_id) AS i, end_ns, pid, device_id, context_id
    FROM ops
)
SELECT s.start_ns - e.end_ns AS gap_ns, e.end_ns AS start_ns, s.start_ns AS end_ns, e.pid, e.device_id, e.context_id
FROM starts s JOIN ends e ON e.i = s.i - 1 AND e.pid = s.pid AND e.device_id = s.device_id
WHERE s.start_ns - e.end_ns > gap_ms::BIGINT * 1000000 AND e.end_ns < s.start_ns;

-- The stretches where a process kept a GPU busy less than threshold_pct of the time
-- (rule gpu_time_util): the span of its ops on the device cut into `chunks` chunks of equal
-- length (rounded up to whole ns: the last may be shorter), each chunk's busy share summed
-- over the ops in it (ops that overlap count twice: it can pass 100), and the chunks below
-- the threshold that follow one another joined, their shares averaged by length and
-- rounded to 0.1 as nsys prints them.
CREATE OR REPLACE MACRO nsys_low_utilization(run, threshold_pct, chunks) AS TABLE
WITH ops AS MATERIALIZED (
    SELECT * FROM nsys_rule_ops(run)
), bounds AS (
    SELECT pid, device_id, min(context_id) AS context_id, min(start_ns) AS lo, max(end_ns) AS hi
    FROM ops GROUP BY pid, device_id
), span AS (
    SELECT *, ceil((hi - lo)::DOUBLE / chunks)::BIGINT AS size FROM bounds
), chunk AS (
    SELECT s.pid, s.device_id, s.context_id, c.i, s.lo + c.i * s.size AS cs, least(s.lo + (c.i + 1) * s.size, s.hi) AS ce
    FROM span s CROSS JOIN (SELECT range AS i FROM range(chunks)) c
    WHERE s.lo + c.i * s.size < least(s.lo + (c.i + 1) * s.size, s.hi)
), pieces AS (  -- each op in each chunk it overlaps: the chunks from its start's to its last ns's
    SELECT o.pid, o.device_id, o.start_ns, o.end_ns, s.lo, s.hi, s.size,
           unnest(range((o.start_ns - s.lo) // s.size, least((o.end_ns - 1 - s.lo) // s.size, chunks - 1) + 1)) AS i
    FROM ops o JOIN span s ON s.pid = o.pid AND s.device_id = o.device_id
    WHERE s.size > 0
), used AS (
    SELECT pid, device_id, i,
           sum(least(end_ns, lo + (i + 1) * size, hi) - greatest(start_ns, lo + i * size))::DOUBLE AS busy_ns
    FROM pieces GROUP BY pid, device_id, i
), busy AS (
    SELECT c.pid, c.device_id, c.context_id, c.i, c.cs, c.ce, coalesce(u.busy_ns, 0) / (c.ce - c.cs) * 100 AS pct
    FROM chunk c LEFT JOIN used u ON u.pid = c.pid AND u.device_id = c.device_id AND u.i = c.i
    WHERE coalesce(u.busy_ns, 0) / (c.ce - c.cs) * 100 < threshold_pct
), runs_of AS (  -- chunks that follow one another share i - (their row number)
    SELECT *, i - row_number() OVER (PARTITION BY pid, device_id ORDER BY i) AS grp FROM busy
)
SELECT round(sum((ce - cs) * pct) / sum(ce - cs), 1) AS in_use_pct, max(ce) - min(cs) AS dur_ns,
       min(cs) AS start_ns, max(ce) AS end_ns, pid, device_id, min(context_id) AS context_id
FROM runs_of GROUP BY pid, device_id, grp;

-- A frame of an unwound call stack (cpu_sample_frames, osrt_frames) that is one of nsys's markers
-- at the bottom of a stack ('[Broken backtraces]', '[Max depth]'), not a caller: the queries
-- that read callers leave it out.
CREATE OR REPLACE MACRO stack_marker(depth, function) AS depth > 0 AND function LIKE '[%]';

-- A frame of a module of the Python interpreter (the python executable, libpython): the frames of a
-- native stack between the Python code and the C code it called.
CREATE OR REPLACE MACRO python_module(module) AS
    regexp_matches(coalesce(module, ''), '(^|/)(lib)?python[0-9.]*[dmt]?(\.so[0-9.]*)?$');

-- A Python file as it names the same code on any machine: the path below the installed packages'
-- folder (site-packages, dist-packages: torch/cuda/__init__.py) or the standard library's
-- (pythonX.Y, Windows' Lib: json/decoder.py), else the file's name (a program's own files,
-- '<frozen runpy>'); '/' between folders, also where Windows wrote '\'.
CREATE OR REPLACE MACRO python_path_below(path) AS
    CASE WHEN regexp_matches(path, '/(site|dist)-packages/') THEN regexp_extract(path, '/(site|dist)-packages/(.*)$', 2)
         WHEN regexp_matches(path, '/(python[0-9.]+|Lib)/') THEN regexp_extract(path, '/(python[0-9.]+|Lib)/(.*)$', 2)
         ELSE regexp_extract(path, '[^/]*$') END;
CREATE OR REPLACE MACRO python_module_path(file) AS python_path_below(replace(coalesce(file, '?'), '\', '/'));

-- A Python frame (python_frames) as a folded stack names it: function (file:line), the file as
-- python_module_path names it (torch/__init__.py and zipfile/__init__.py are two files).
CREATE OR REPLACE MACRO python_frame(function, file, line) AS
    coalesce(function, '?') || ' (' || python_module_path(file) || ':' || coalesce(line::VARCHAR, '?') || ')';

-- A call stack's frames (an aggregate over them) folded as flame-graph tools read them: from the
-- outermost caller (the deepest frame) to depth 0, ';'-joined, a ';' in a name made ':'.
CREATE OR REPLACE MACRO folded_stack(name, depth) AS string_agg(replace(name, ';', ':'), ';' ORDER BY depth DESC);

-- The samples a question is about (of the table `samples`: cpu_samples for cpu-hotspots and
-- cpu-stacks, python_samples for python-stacks; `what` names them in errors, `listing` says which
-- query lists their threads): the run's, of one thread where `thread` is given (its tid, or its name
-- as nsys recorded it), inside NVTX ranges of the name `range_name` on the sample's own thread where
-- given (:text or text in the default domain, domain:text; the thread that pushed or started the
-- range), each sample once however the ranges nest. A thread or range the run does not have is an
-- error naming it, not an empty answer.
CREATE OR REPLACE MACRO samples_asked(query, run, thread, range_name, samples, what, listing) AS TABLE
    WITH ok AS (
        SELECT CASE
            WHEN thread IS NOT NULL AND NOT EXISTS (
                SELECT 1 FROM query_table(samples) s WHERE s.run_id = run AND (s.tid::VARCHAR = thread OR s.global_tid IN (
                    SELECT global_tid FROM threads WHERE run_id = run AND name = thread)))
            THEN error(query || ': no ' || what || ' sample of the run is of a thread ''' || thread || ''' (give a tid '
                       || 'or a thread''s name: ' || listing || ')')
            WHEN range_name IS NOT NULL AND NOT EXISTS (
                SELECT 1 FROM nvtx_ranges WHERE run_id = run AND (name = range_name OR name = ':' || range_name))
            THEN error(query || ': the run has no NVTX range named ''' || range_name || ''' (`tracekit query '
                       || 'nvtx-summary` lists them; a named domain''s are domain:name)')
            ELSE true END AS ok
    ),
    ranges AS (  -- the asked ranges of each thread merged where they overlap (a name nested in itself)
        SELECT global_tid, start_ns, end_ns,
               sum(new) OVER (PARTITION BY global_tid ORDER BY start_ns, end_ns ROWS UNBOUNDED PRECEDING) AS window_id
        FROM (SELECT global_tid, start_ns, end_ns,
                     CASE WHEN start_ns <= max(end_ns) OVER (PARTITION BY global_tid ORDER BY start_ns, end_ns
                                                              ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                          THEN 0 ELSE 1 END AS new
              FROM nvtx_ranges WHERE run_id = run AND (name = range_name OR name = ':' || range_name))
    ),
    windows AS (SELECT global_tid, min(start_ns) AS start_ns, max(end_ns) AS end_ns FROM ranges GROUP BY global_tid, window_id),
    picked AS (
        SELECT s.sample_id, s.global_tid, s.pid, s.tid, s.ts_ns
        FROM ok, query_table(samples) s
        WHERE ok.ok AND s.run_id = run
          AND (thread IS NULL OR s.tid::VARCHAR = thread
               OR s.global_tid IN (SELECT global_tid FROM threads WHERE run_id = run AND name = thread))
    ),
    inside AS (
        SELECT p.* FROM picked p ASOF JOIN windows w ON w.global_tid = p.global_tid AND p.ts_ns >= w.start_ns
        WHERE p.ts_ns < w.end_ns
    )
    SELECT * FROM picked WHERE range_name IS NULL UNION ALL SELECT * FROM inside WHERE range_name IS NOT NULL
    -- (ok read whatever picked holds: DuckDB skips a side of a join whose other side is empty)
    UNION ALL SELECT NULL, NULL, NULL, NULL, NULL FROM ok WHERE NOT ok.ok;

-- The CPU samples a question is about (cpu-hotspots, cpu-stacks: samples_asked), each with
-- stacked: nsys unwound its stack (one sample in --samples-per-backtrace has callers; the others
-- their hit instruction alone).
CREATE OR REPLACE MACRO cpu_samples_asked(query, run, thread, range_name) AS TABLE
    WITH stacked AS (
        SELECT sample_id FROM cpu_sample_frames WHERE run_id = run AND depth > 0 GROUP BY sample_id
    )
    SELECT c.*, c.sample_id IN (SELECT sample_id FROM stacked) AS stacked
    FROM samples_asked(query, run, thread, range_name, 'cpu_samples', 'CPU',
                       '`tracekit query cpu-threads` lists those sampled') c;

-- The Python samples a question is about (samples_asked over python_samples), with their stacks
-- and thread states; an error names the run's sampled tids. python-stacks, python-hotspots and
-- gpu-idle-python ask through it.
CREATE OR REPLACE MACRO python_samples_asked(query, run, thread, range_name) AS TABLE
    SELECT s.*
    FROM samples_asked(query, run, thread, range_name, 'python_samples', 'Python',
                       'the run''s are of tids ' || (SELECT string_agg(DISTINCT tid::VARCHAR, ', ' ORDER BY tid::VARCHAR)
                                                    FROM python_samples WHERE run_id = run)) a
    JOIN python_samples s ON s.run_id = run AND s.sample_id = a.sample_id;

-- The run's CPU sampling interval, ns (interval_ns): the median time between two consecutive
-- samples of one thread (a running thread is sampled once per period of its CPU time, so a
-- sample stands for about this much CPU time; NULL for a run with fewer than two samples a thread).
CREATE OR REPLACE MACRO cpu_sample_interval(run) AS TABLE
    SELECT median(gap) AS interval_ns
    FROM (SELECT ts_ns - lag(ts_ns) OVER (PARTITION BY global_tid ORDER BY ts_ns) AS gap
          FROM cpu_samples WHERE run_id = run);

-- Each distinct Python stack's functions (python_frames), once per stack however often one recurs:
-- the function, its file as on any machine (python_module_path) and whether it is the innermost
-- frame (the line the sample found running). python-hotspots, gpu-idle-python and diff's python
-- scope count by it.
CREATE OR REPLACE MACRO python_stack_functions(run) AS TABLE
    SELECT stack_id, coalesce(function, '?') AS function, python_module_path(file) AS file,
           bool_or(depth = 0) AS innermost
    FROM python_frames WHERE run_id = run
    GROUP BY ALL;

-- The run's Python sampling interval: the median gap between a thread's consecutive Python samples
-- (nsys --python-sampling-frequency, 1 kHz by default, as it was kept).
CREATE OR REPLACE MACRO python_sample_interval(run) AS TABLE
    SELECT median(gap) AS interval_ns
    FROM (SELECT ts_ns - lag(ts_ns) OVER (PARTITION BY global_tid ORDER BY ts_ns) AS gap
          FROM python_samples WHERE run_id = run);

-- Each CPU sample of the run (nsys's CPU sampling) under each push/pop NVTX range open on its
-- thread when it was taken: a row per sample and enclosing range, with the range's path (the
-- nesting of ranges on a thread puts one range of each depth around a sample at most: one as-of
-- lookup per depth finds them). nvtx-cpu and diff's NVTX scope read the CPU time of each path
-- from it, nested ranges included, as nvtx_kern_sum counts a kernel in every enclosing range.
CREATE OR REPLACE MACRO cpu_sample_paths(run) AS TABLE
    WITH r AS (SELECT global_tid, depth, start_ns, end_ns, path FROM nvtx_ranges
               WHERE run_id = run AND depth IS NOT NULL AND path IS NOT NULL),
    s AS (SELECT c.sample_id, c.global_tid, c.ts_ns, l.depth
          FROM cpu_samples c JOIN (SELECT DISTINCT global_tid, depth FROM r) l USING (global_tid)
          WHERE c.run_id = run)
    SELECT s.sample_id, s.global_tid, r.path
    FROM s ASOF JOIN r ON r.global_tid = s.global_tid AND r.depth = s.depth AND s.ts_ns >= r.start_ns
    WHERE s.ts_ns < r.end_ns;

-- The GPU memory events of runs (gpu_memory; ``runs``: a list of run ids) in order: seq numbers a
-- run's by time, then by their place in the export (nsys reports what a process allocated and
-- freed before a capture range opened at time 0, in the order it happened). Each has live_bytes,
-- the bytes of its kind of memory live after it in its process on its device (allocated and not
-- yet freed), and nvtx_path, the path of the innermost NVTX range around the API call that made it. A free is
-- paired with the last allocation of its address in its process before it (alloc_seq). nsys
-- records a CUDA graph's memory (the graph pool's physical chunks, allocated at a launch, freed at
-- cudaDeviceGraphMemTrim) with address 0: such a free is paired with the earliest allocation of its
-- size, kind and device in the process not yet freed. A free the capture saw no allocation for
-- (memory allocated before the capture began), or a second free of one allocation, is not counted
-- (matched false). An allocation has its free's seq and time (freed_seq, freed_ns; NULL: not freed
-- by the end of the capture). gpu_memory_events(run): one run's.
CREATE OR REPLACE MACRO gpu_memory_events_in(runs) AS TABLE
    WITH e AS (
        SELECT m.*, r.path AS nvtx_path,
               row_number() OVER (PARTITION BY m.run_id
                                  ORDER BY m.ts_ns, m.event_index) AS seq
        FROM gpu_memory m LEFT JOIN nvtx_ranges r ON r.run_id = m.run_id AND r.range_id = m.nvtx_range_id
        WHERE list_contains(runs, m.run_id)
    ),
    a AS (SELECT run_id, seq, global_pid, address FROM e WHERE operation = 'allocation' AND address <> 0),
    -- address 0, per size, kind and device: excess is the frees so far less the allocations, and
    -- the frees with no allocation to pair are the most it has been (0 at least); the n-th paired
    -- free is the n-th allocation's
    z AS (
        SELECT run_id, seq, operation, global_pid, device_id, memory_kind, bytes,
               sum(CASE WHEN operation = 'free' THEN 1 ELSE -1 END) OVER w AS excess,
               sum(CASE WHEN operation = 'free' THEN 1 ELSE 0 END) OVER w AS nth_free,
               sum(CASE WHEN operation = 'allocation' THEN 1 ELSE 0 END) OVER w AS nth_alloc
        FROM e WHERE address = 0
        WINDOW w AS (PARTITION BY run_id, global_pid, device_id, memory_kind, bytes ORDER BY seq)
    ),
    zf AS (
        SELECT *, greatest(0, coalesce(max(excess) OVER (
                   PARTITION BY run_id, global_pid, device_id, memory_kind, bytes ORDER BY seq
                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)) AS unpaired_before
        FROM z
    ),
    paired AS (
        SELECT f.run_id, f.seq, a.seq AS alloc_seq,
               row_number() OVER (PARTITION BY f.run_id, a.seq ORDER BY f.seq) = 1 AS first
        FROM (SELECT run_id, seq, global_pid, address FROM e WHERE operation = 'free' AND address <> 0) f
        ASOF JOIN a ON a.run_id = f.run_id AND a.global_pid = f.global_pid AND a.address = f.address AND f.seq >= a.seq
        UNION ALL
        SELECT f.run_id, f.seq, za.seq, true
        FROM zf f JOIN z za ON za.run_id = f.run_id AND za.global_pid = f.global_pid AND za.device_id = f.device_id
                               AND za.memory_kind = f.memory_kind AND za.bytes = f.bytes AND za.operation = 'allocation'
                               AND za.nth_alloc = f.nth_free - f.unpaired_before
        WHERE f.operation = 'free' AND f.excess <= f.unpaired_before
    ),
    freed AS (
        SELECT p.run_id, p.alloc_seq, p.seq AS freed_seq, e.ts_ns AS freed_ns
        FROM paired p JOIN e USING (run_id, seq) WHERE p.first
    )
    SELECT e.*, p.alloc_seq, fr.freed_seq, fr.freed_ns,
           e.operation = 'allocation' OR coalesce(p.first, false) AS matched,
           CAST(sum(CASE WHEN e.operation = 'allocation' THEN e.bytes WHEN p.first THEN -e.bytes ELSE 0 END)
                OVER (PARTITION BY e.run_id, e.global_pid, e.device_id, e.memory_kind ORDER BY e.seq) AS BIGINT)
               AS live_bytes
    FROM e LEFT JOIN paired p ON p.run_id = e.run_id AND p.seq = e.seq
    LEFT JOIN freed fr ON fr.run_id = e.run_id AND fr.alloc_seq = e.seq;

CREATE OR REPLACE MACRO gpu_memory_events(run) AS TABLE SELECT * FROM gpu_memory_events_in([run]);

-- The kind of GPU memory a question asks about (gpu_memory.memory_kind, any case; NULL: every kind),
-- as the store spells it; one nsys does not record is an error naming those it does.
CREATE OR REPLACE MACRO memory_kind_asked(query, kind) AS
    CASE WHEN kind IS NULL THEN NULL
         ELSE coalesce(['Device', 'Pinned', 'Managed', 'Device Static', 'Managed Static', 'Pageable', 'Array', 'Unknown'][
                           list_position(['device', 'pinned', 'managed', 'device static', 'managed static', 'pageable',
                                          'array', 'unknown'], lower(trim(kind)))],
                       error(query || ': kind ''' || kind || ''': not a kind of memory nsys records (Device, Pinned, '
                             || 'Managed, Device Static, Managed Static, Pageable, Array, Unknown)')) END;
