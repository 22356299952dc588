#!/usr/bin/env bash
# Recreates the real fixture captures under tests/data/ on a GPU machine.
# Usage: [NSYS_SCENARIOS="..."] [NCU_VARIANTS="..."] [RANKS=4] [SWEEPS="a b c"] capture_fixtures.sh OUTDIR
#   NSYS_SCENARIOS  default: hstu_mixed many_kernels multithread; also multiproc graphs_node
#                   graphs_graph odd_nvtx odd_nvtx_cuda_only capture_range registered_nvtx
#                   registered_nvtx_domains diff_base_a diff_base_b diff_base_c diff_regressed memops autograd cpu_only
#                   cpu_only_more cpu_only_again cpu_only_slow copies_pinned copies_pinned_again copies_pageable copies_only inductor
#                   streams nccl jax jax_whole jax_graph
#                   nccl_overlap (nsys_nccl.py again, without OS runtime calls, with NVIDIA's recipe
#                   nccl_gpu_overlap_trace run on its .nsys-rep: recipes/, the answers of nccl-overlap)
#                   gpu_metrics gpu_metrics_again gpu_metrics_zeros (--gpu-metrics-devices=all: GEMMs, DRAM-bound
#                   adds and an idle phase; _zeros the GEMMs on zeros, at a higher SM clock)
#                   um_faults um_faults_again um_gpu_only um_prefetch (programs/nsys_um.cu, managed memory:
#                   with both Unified Memory page-fault options, twice: noise; with the GPU's alone, on which
#                   nsys refuses its UM reports; with --prefetch, the buffers prefetched where used next)
#                   cpu_hot cpu_hot_again cpu_hot_slow (programs/nsys_cpu_hot.cu, CPU sampling on: host functions
#                   with planted shares of the samples, twice: noise; then with --slow-pack, a host regression)
#                   mem mem_again mem_grow (programs/nsys_mem.cu, --cuda-memory-usage=true: allocations of
#                   planted sizes and lifetimes, twice: noise; then with --leak --big-workspace, the regression)
#                   backtrace (programs/nsys_backtrace.py, --cudabacktrace=all:0 --python-backtrace=cuda: each CUDA
#                   API call's call stack, from known Python functions)
#                   python_hot python_hot_again python_hot_slow (programs/nsys_python_hot.py, --python-sampling=true:
#                   Python functions with planted shares of the time, their stacks sampled; twice: noise; then with
#                   --slow-parse, parse twice as long, the regression); python_hot_again2 python_hot_again3 (two
#                   more of the same, later: the noise of four identical captures)
#                   mem_odd (programs/nsys_mem_odd.cu: virtual memory management, a graph memory node, a pool of
#                   its own, cudaMallocPitch, cudaHostAlloc and cudaHostRegister)
#                   window_missed (programs/nsys_window_missed.py: the capture range set on a host-only NVTX
#                   range after the GPU work, so CUDA is traced and no CUDA event is in the window)
#   NCU_VARIANTS    default: full sections; also diff_a diff_b source, shapes_a shapes_a_again shapes_slow
#                   (--set full: one kernel at three sizes, profiled twice, then slower at every size;
#                   programs/ncu_shapes.py), shapes_a_again2 (the same a third time) and shapes_int (the kernel
#                   on int32 data: no floating-point instruction), clocks_random clocks_random_again clocks_zeros (--set full: two
#                   GEMMs and a DRAM-bound add, twice on random data, then the GEMMs on zeros: the same code
#                   at another SM clock; programs/ncu_clocks.py), and the report kinds other than kernel
#                   replay (ncu_options below; programs/ncu_variants.cu built with nvcc, ncu_multiproc.py):
#                   app_replay (--replay-mode application --set full: 3 kernels, each pass a run of the program),
#                   range (--replay-mode range --set full: 2 ranges marked by cudaProfilerStart/Stop),
#                   app_range (--replay-mode app-range, default set: 2 ranges marked by NVTX push/pop),
#                   metrics (--metrics with 7 metrics, no sections: no rules, no Source page),
#                   graph (--graph-profiling graph --set full: 1 kernel and 2 launches of a 3-kernel graph),
#                   multiproc (--target-processes all --set full: 4 kernels from a parent and 2 children),
#                   libs (--set full: cuBLASLt bf16 with bias, FP8 _scaled_mm, SDPA flash, an Inductor
#                   Triton kernel, index_add atomics; programs/ncu_libs.py),
#                   triton_detailed (--set detailed: a Triton matmul autotuned over 4 configs, then launched
#                   at 2 fixed ones, and PyTorch's own kernels; programs/ncu_triton_autotune.py; also its
#                   details page with every section's charts and tables, --print-details all: details_all.csv,
#                   and per kernel, --print-summary per-kernel: details_summary.csv)
#                   levels (--set full: four Triton kernels, each bound by another level of ncu's hierarchical
#                   roofline: L1, L2, DRAM, and FP64 compute; programs/ncu_levels.py)
#                   occupancy_a occupancy_b (--set full: a Triton GEMM and an elementwise kernel, then tuned
#                   so that another limit binds their occupancy: 4 pipeline stages instead of 2, 64 elements
#                   per thread instead of 8; programs/ncu_occupancy.py)
#                   (empty for none)
#   RANKS           processes of the nsys_ranks job (default: none; the fixture has 4);
#                   rank r runs on GPU r % (the machine's GPU count)
#   RANKS_NAME      its folder (default nsys_ranks; nsys_ranks_2gpu was taken on 2 GPUs)
#   RANKS_ARGS      the program's arguments, RANKS_KIND the nsys options' case (default ranks):
#                   nsys_ranks_nccl is RANKS=2 RANKS_NAME=nsys_ranks_nccl RANKS_KIND=ranks_nccl
#                   RANKS_ARGS="--backend nccl --straggler 1" on 2 GPUs; nsys_jobs is three 4-rank jobs,
#                   RANKS_NAME=nsys_jobs/base, nsys_jobs/base_again (the same again) and nsys_jobs/after
#                   (RANKS_ARGS="--straggler 1 --backward-layers 40"), then `programs/plant.py jobs OUTDIR`;
#                   nsys_ranks_mem is RANKS=4 RANKS_NAME=nsys_ranks_mem RANKS_KIND=ranks_mem
#                   RANKS_ARGS="--hold-rank 1 --hold-mb 512" (each rank's GPU memory recorded; rank 1 holds 512 MiB more)
#   RANKS_KINDS     RANK:KIND pairs, a rank's options' case in place of RANKS_KIND. nsys_jobs_mem is three 4-rank jobs
#                   of RANKS=4 RANKS_KIND=ranks_mem on one machine: RANKS_NAME=nsys_jobs_mem/base RANKS_ARGS="--hold-rank
#                   1 --hold-mb 512" (nsys_ranks_mem's job), nsys_jobs_mem/more (--hold-mb 1024: rank 1 holds 512 MiB
#                   more) and nsys_jobs_mem/mixed (base's job again, RANKS_KINDS="0:ranks_mem_no_nvtx 2:ranks": rank 0
#                   captured without NVTX, rank 2 without its GPU memory; its plant: `programs/plant.py mixed`)
#   RANKS_MISSED    a rank whose capture misses its GPU work (options ranks_missed): nsys_jobs/missed is RANKS=4
#                   RANKS_NAME=nsys_jobs/missed RANKS_MISSED=3 RANKS_ARGS="--teardown-rank 3" (base's program;
#                   its plant: `programs/plant.py missed`)
#   SWEEPS          sweep_pair sweeps to take (default: none; the fixture has a b c)
#   HSTU_NSYS_SWEEPS hstu_nsys_sweep sweeps to take (default: none; the fixture has base again reference): the
#                   HSTU workload's `tracekit sweep --bs 1,4 --nc 128,512 --tool nsys --preset small`, twice (noise),
#                   then with TRACEKIT_KERNELS_BACKEND=reference (PyTorch's attention in place of the Triton kernels)
#   COMMAND_SWEEPS  command_sweep sweeps to take (default: none; the fixture has base again slow ncu mem mem_again oom): `tracekit
#                   sweep --tool nsys --grid m=1024,4096 --grid dtype=fp16,fp32 -- python3 programs/sweep_matmul.py
#                   --m {m} --dtype {dtype}`, twice (noise), then with --slow (the softmax twice per step); ncu: the
#                   same grid under ncu, the first 6 launches inside the NVTX range step (3 steps: GEMM, softmax);
#                   mem, mem_again: base's sweep with --cuda-memory-usage (each point's GPU memory recorded), twice;
#                   oom: base's sweep with m=524288 as well, whose two points fail for real (CUDA out of memory
#                   at the first allocation, 512 GiB or 1 TiB: on any GPU), each failed point's folder as the
#                   sweep leaves it (its export of what ran before the failure)
#   SOURCE_SWEEPS   ncu_source_sweep sweeps to take (default: none; the fixture has base again slow): `tracekit
#                   sweep --tool ncu --nvtx-capture shapes --grid size=16,24 -- python3 programs/ncu_shapes.py a
#                   --sizes {size}` (the Triton kernel's two launches at 2**16 or 2**24 elements per point, its
#                   Source Counters and source text: diff --by source point by point), twice (noise), then the
#                   slow config (the loop reads 4x)
#   CAPTURE_PAIR    set: hstu_capture_pair, the inference capture twice and with a planted slowdown
#                   (CAPTURE_PAIR_RUNS: which of base base_again half_sms, default all three)
#   CAPTURE_HOST_PACE set: hstu_host_pace, the inference capture with the Triton cached kernel (before), the
#                   Gluon one (after), and the Triton one again (before2): a noise pair and issue 16.3's pair
#   CAPTURE_NCU_PAIR set: hstu_capture_ncu_pair, the same under ncu, with a noise pair (base, base_again)
# Needs nsys and ncu on PATH, python3 with torch+triton, nvcc for registered_nvtx, memops and copies_only, a C compiler
# and the CUDA toolkit's NVTX v3 headers for cpu_only ($CUDA_HOME or /usr/local/cuda*), and for
# SWEEPS the tracekit CLI ($TRACEKIT, default `tracekit`; `--no-ingest` needs no duckdb).
# Each nsys scenario gets export.sqlite.xz, NVIDIA's own `nsys stats` CSVs (the goldens;
# the trace reports compressed), profile.log and capture.txt (GPU, driver, clocks as
# found, tool versions); each ncu scenario gets report.ncu-rep.xz plus raw and details
# CSV exports and ncu's Source page where it has one (compressed); the diff and ranks fixtures get PLANT.md + plant.json
# (programs/plant.py, from the plant and NVIDIA's CSVs). Clocks are never changed.
# osrt_sum.csv and cuda_gpu_sum.csv of every nsys fixture, and cuda_gpu_trace.csv.xz of hstu_capture_nsys, were added
# later (2026-11-28) by the same `nsys stats` (2025.3.1, on the H200) over the committed exports, and the
# analyze_*.csv goldens of nsys's expert rules (nsys_rule_goldens), cuda_gpu_kern_gb_sum.csv, nvtx_pushpop_sum.csv and
# nvtx_startend_sum.csv (before, those two of the cpu_only captures alone), cuda_api_trace.csv.xz and
# cuda_kern_exec_trace.csv.xz on 2026-12-01.
# The hstu_capture_* run folders are `tracekit capture --bs 8 --nc 1024 --tool nsys|ncu --no-ingest`
# on the H200 (the run folder without spec.json and worker.json, its exports xz-compressed);
# hstu_headroom (2026-12-04) is capture(8, 1024, tool="nsys") then capture(8, 1024, tool="ncu", ncu_kernel_regex=".")
# one after the other, from a Python script as above (its README.md says what is in it and what is left out).
# hstu_capture_ncu was re-taken on 2026-11-28 with the memory-workload, WarpStateStats and SourceCounters sections;
# hstu_capture_cpu is the same capture with the CPU sampled (2026-12-01; no stats/): tracekit.capture.run.capture(8,
# 1024, tool="nsys", cpu_samples=True, ingest=False), what `tracekit capture --cpu-samples` runs, called from a Python
# script (meta.json's command "-") as the device's Typer is too old for tracekit's CLI.
# hstu_capture_mem likewise, with every allocation of GPU memory recorded (2026-12-01): capture(8, 1024, tool="nsys",
# cuda_memory_usage=True, ingest=False), what `tracekit capture --cuda-memory-usage` runs; hstu_capture_mem_vmm the
# same with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True in its environment (2026-12-01, which meta.json's settings
# record): PyTorch's allocator maps its memory in 20 MiB pieces (nsys_mem_odd has the driver calls that do it);
# hstu_capture_mem_async with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync (each tensor a cudaMallocAsync; what was
# allocated and freed before the capture range, nsys reports at its start, time 0, in the order it happened);
# hstu_capture_backtrace with capture(8, 1024, tool="nsys", cuda_backtrace=True, ingest=False) (taken again on
# 2026-12-01 with the Python stacks: nsys --python-backtrace=cuda, the report exported with --include-blobs=true), what
# `tracekit capture --cuda-backtrace` runs: every CUDA API call nsys unwinds has its call stack, native and Python;
# hstu_capture_python with capture(8, 1024, tool="nsys", python_samples=True, ingest=False) (2026-12-01), what
# `tracekit capture --python-samples` runs: the Python threads' stacks sampled 1,000 times a second in the range;
# hstu_capture_python_again and _again2 the same twice more (2026-12-01, one lease, minutes apart: the noise of the
# Python samples, diff's python scope; the first after the machine started, so its warm-up ran fewer requests).
# The Source pages of the earlier reports were exported later (2026-11-28, ncu 2025.3.1 on the H200, source_pages
# below): ncu_full/source_sass.csv, ncu_diff_a/source_cuda_sass.csv, and hstu_capture_ncu/ncu_source_cuda_sass.csv
# (`--kernel-name _hstu_cached_sk_kernel --launch-count 1`: the first launch of the attention kernel).
# The ncu variants app_replay range app_range metrics graph multiproc were taken on 2026-11-29 (ncu 2025.3.1, H200),
# and clocks_random, clocks_random_again, clocks_zeros later that day, as were nsys_gpu_metrics, _again and _zeros.
# ncu_triton_detailed was taken on 2026-12-03 (ncu 2025.3.1, H200): only its details pages are committed
# (details.csv.xz, details_all.csv.xz and details_summary.csv.xz; its report is 1.9 MB compressed).
# ncu_levels was taken on 2026-12-06 (ncu 2025.3.1, an H100 80GB HBM3): its report, raw and details pages are
# committed (not raw_default_units, details_labels or the Source pages).
# ncu_occupancy_a and _b were taken on 2026-12-06 (ncu 2025.3.1, an H100 80GB HBM3, one lease, b in a second call
# minutes after a): the same files are committed.
# nsys_cpu_only and nsys_cpu_only_more (programs/nsys_cpu_only.c, no CUDA, `-t nvtx,osrt`) were taken on 2026-11-29
# (nsys 2025.3.1, H200), nsys_cpu_only_again (the same program again: noise) and nsys_cpu_only_slow (host
# regressions planted) and nsys_diff_base_c (nsys_diff_base_a/_b again, unchanged) later that day.
# nsys_inductor (torch.compile reduce-overhead, an NVTX-started capture range), nsys_streams (a CUDA
# program built --default-stream per-thread: priority streams, launch APIs, batch copies, a memory pool)
# and ncu_libs were taken later (each capture.txt says when), and nsys_nccl (DDP over NCCL, a process per
# GPU) and nsys_jax (XLA through the driver API, one process on every GPU) on a 2-GPU H200 machine.
set -u
out=${1:?OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
reports=cuda_gpu_kern_sum,cuda_gpu_kern_gb_sum,cuda_api_sum,cuda_gpu_mem_time_sum,cuda_gpu_mem_size_sum,nvtx_sum,nvtx_pushpop_sum,nvtx_startend_sum,nvtx_gpu_proj_sum,cuda_kern_exec_sum,nvtx_kern_sum,nvtx_gpu_proj_trace,cuda_gpu_trace,cuda_api_trace,cuda_kern_exec_trace,osrt_sum,cuda_gpu_sum
nsys_opts="--force-overwrite=true --export=sqlite"

# scenario -> the command it profiles and the nsys options that differ from the default ones
cmdline() {
  case $1 in
    graphs_*) echo "python3 $here/programs/nsys_graphs.py" ;;
    odd_nvtx_cuda_only) echo "python3 $here/programs/nsys_odd_nvtx.py" ;;
    registered_nvtx) echo "$out/bin/nsys_registered_nvtx --default-domain-only" ;;
    registered_nvtx_domains) echo "$out/bin/nsys_registered_nvtx" ;;
    memops|copies_only) echo "$out/bin/nsys_$1" ;;
    um_prefetch) echo "$out/bin/nsys_um --prefetch" ;;  # (the fix: prefetched where used next)
    um_*) echo "$out/bin/nsys_um" ;;
    cpu_hot_slow) echo "$out/bin/nsys_cpu_hot --slow-pack" ;;  # pack_inputs 3x the work (diff)
    cpu_hot*) echo "$out/bin/nsys_cpu_hot" ;;
    streams) echo "$out/bin/nsys_streams" ;;
    mem_odd) echo "$out/bin/nsys_mem_odd" ;;
    mem_grow) echo "$out/bin/nsys_mem --leak --big-workspace" ;;  # a 2 MiB leak a step, the workspace 2x (diff)
    mem*) echo "$out/bin/nsys_mem" ;;
    cpu_only|cpu_only_again) echo "$out/bin/nsys_cpu_only" ;;
    cpu_only_slow) echo "$out/bin/nsys_cpu_only 40 1500 1" ;;  # parse 1 ms longer, 4 KiB reads (diff)
    cpu_only_more) echo "$out/bin/nsys_cpu_only 60" ;;  # the same with 60 batches instead of 40 (diff)
    diff_base_a|diff_base_b|diff_base_c) echo "python3 $here/programs/nsys_diff.py" ;;
    jax_*) echo "python3 $here/programs/nsys_jax.py" ;;
    copies_pinned|copies_pinned_again) echo "python3 $here/programs/nsys_copies.py" ;;
    copies_pageable) echo "python3 $here/programs/nsys_copies.py --pageable" ;;  # the 4 MiB copies pageable (diff)
    gpu_metrics) echo "python3 $here/programs/nsys_gpu_metrics.py base" ;;
    gpu_metrics_*) echo "python3 $here/programs/nsys_gpu_metrics.py ${1#gpu_metrics_}" ;;
    diff_regressed) echo "python3 $here/programs/nsys_diff.py --more-launches --new-kernel --slower" ;;
    nccl_overlap) echo "python3 $here/programs/nsys_nccl.py" ;;
    python_hot_slow) echo "python3 $here/programs/nsys_python_hot.py --slow-parse" ;;  # parse 2x as long (diff)
    python_hot*) echo "python3 $here/programs/nsys_python_hot.py" ;;
    *) echo "python3 $here/programs/nsys_$1.py" ;;
  esac
}
options() {
  case $1 in
    graphs_graph) echo "-t cuda,nvtx,osrt --cuda-graph-trace=graph" ;;
    odd_nvtx_cuda_only) echo "-t cuda --cuda-graph-trace=node" ;;
    capture_range|diff_*) echo "-t cuda,nvtx,osrt --cuda-graph-trace=node --capture-range=cudaProfilerApi --capture-range-end=stop" ;;
    # the GPU's counters sampled (default 10 kHz) while the capture range is open
    gpu_metrics*) echo "-t cuda,nvtx,osrt --cuda-graph-trace=node --capture-range=cudaProfilerApi --capture-range-end=stop" \
      "--gpu-metrics-devices=all" ;;
    memops) echo "-t cuda,nvtx,osrt --cuda-um-cpu-page-faults=true --cuda-um-gpu-page-faults=true" \
      "--cuda-memory-usage=true" ;;
    um_faults|um_faults_again|um_prefetch) echo "-t cuda,nvtx,osrt --cuda-um-cpu-page-faults=true" \
      "--cuda-um-gpu-page-faults=true" ;;
    um_gpu_only) echo "-t cuda,nvtx,osrt --cuda-um-gpu-page-faults=true" ;;
    mem|mem_again|mem_grow) echo "-t cuda,nvtx,osrt --cuda-memory-usage=true" ;;  # (nsys's UM reports need both)
    mem_odd) echo "-t cuda,nvtx,osrt --cuda-graph-trace=node --cuda-memory-usage=true" ;;
    # every CUDA API call's native call stack (threshold 0: each call, not only those past 80 us)
    # and its Python one
    backtrace) echo "-t cuda,nvtx,osrt --cudabacktrace=all:0 --python-backtrace=cuda" ;;
    python_hot*) echo "-t cuda,nvtx,osrt --python-sampling=true" ;;  # each Python thread's stack, 1,000 a second
    autograd) echo "-t cuda,nvtx,osrt,cublas,cudnn --pytorch=autograd-nvtx" ;;
    # the capture starts at the NVTX range "profile" and stops at its end; the program's NVTX
    # texts are not registered strings, which nsys matches only with REGISTER_ONLY=0
    inductor) echo "-t cuda,nvtx,osrt --cuda-graph-trace=node --capture-range=nvtx --nvtx-capture=profile" \
      "--capture-range-end=stop -e NSYS_NVTX_PROFILER_REGISTER_ONLY=0" ;;
    jax) echo "-t cuda,nvtx,osrt --cuda-graph-trace=node --capture-range=nvtx --nvtx-capture=steps" \
      "--capture-range-end=stop -e NSYS_NVTX_PROFILER_REGISTER_ONLY=0" ;;
    window_missed) echo "-t cuda,nvtx,osrt --cuda-graph-trace=node --capture-range=nvtx --nvtx-capture=host" \
      "--capture-range-end=stop -e NSYS_NVTX_PROFILER_REGISTER_ONLY=0" ;;
    jax_whole) echo "-t cuda,nvtx,osrt --cuda-graph-trace=node" ;;  # the whole program (nsys_jax/README.md)
    nccl_overlap|ranks_nccl) echo "-t cuda,nvtx --cuda-graph-trace=node" ;;  # (NCCL's OS runtime calls: most of its size)
    # the capture range set on a host-only NVTX range after the rank's GPU work (nsys_jobs/missed's rank)
    ranks_missed) echo "-t cuda,nvtx,osrt --cuda-graph-trace=node --capture-range=nvtx --nvtx-capture=teardown" \
      "--capture-range-end=stop -e NSYS_NVTX_PROFILER_REGISTER_ONLY=0" ;;
    ranks_mem) echo "-t cuda,nvtx,osrt --cuda-graph-trace=node --cuda-memory-usage=true" ;;  # (each rank's GPU memory)
    ranks_mem_no_nvtx) echo "-t cuda,osrt --cuda-graph-trace=node --cuda-memory-usage=true" ;;  # (NVTX not traced)
    jax_graph) echo "-t cuda,nvtx,osrt --cuda-graph-trace=graph --capture-range=nvtx --nvtx-capture=steps" \
      "--capture-range-end=stop -e NSYS_NVTX_PROFILER_REGISTER_ONLY=0" ;;
    cpu_only*) echo "-t nvtx,osrt" ;;  # a host-side program traced without CUDA: no CUPTI table
    *) echo "-t cuda,nvtx,osrt --cuda-graph-trace=node" ;;
  esac
}
# CPU sampling and context switches: off, except where a scenario is about them
sampling() {
  case $1 in
    autograd|cpu_hot*|backtrace) echo "--sample=process-tree --cpuctxsw=process-tree" ;;  # (backtraces need it)
    *) echo "--sample=none --cpuctxsw=none" ;;
  esac
}
# Unified Memory reports for the scenario that migrates managed memory
extra_reports() {
  case $1 in
    memops) echo "um_sum,um_total_sum,um_cpu_page_faults_sum" ;;
    um_*) echo "um_sum,um_sum:rows=-1,um_total_sum,um_cpu_page_faults_sum" ;;  # (rows=-1: every address)
    cpu_only*) echo "nvtx_pushpop_trace" ;;
  esac
}
# the options to capture with where the sandbox refuses the scenario's own (none: no retry);
# capture.txt then says what failed and what was taken instead
fallback() {
  case $1 in
    memops) echo "-t cuda,nvtx,osrt --cuda-memory-usage=true --sample=none --cpuctxsw=none" ;;
    autograd) echo "$(options autograd) --sample=none --cpuctxsw=none" ;;
  esac
}

# capture.txt: when, where, with what (clocks as found: nothing here sets them)
record() {
  local d=$1; shift
  {
    echo "captured: $(date -u +%FT%TZ)"
    echo "command: $*"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.limit --format=csv
    echo "nsys: $(command -v nsys > /dev/null && nsys --version 2>&1 | head -1 || echo '(not on PATH)')"
    echo "ncu: $(ncu --version 2>&1 | tail -1)"
    python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda)" 2>&1
  } > "$d/capture.txt"
}

# ncu's Source page of every profiled launch: each instruction with its metrics
# (source_sass.csv) and, for kernels with line information, each source line with the
# metrics summed over its instructions, followed by them (source_cuda_sass.csv)
source_pages() {
  local rep=$1 d=$2
  ncu -i "$rep" --csv --page source --print-source sass > "$d/source_sass.csv" || echo "source sass rc=$?"
  ncu -i "$rep" --csv --page source --print-source cuda,sass > "$d/source_cuda_sass.csv" || echo "source cuda,sass rc=$?"
}

# nsys stats CSVs under their report names (BASE_REPORT.csv -> REPORT.csv), the
# per-event trace reports compressed; the export compressed, the .nsys-rep dropped
# (EXTRA: more reports, kept beside the goldens though no query twins them; NOTE: yes to
# add to capture.txt, for each report that wrote nothing, what nsys stats says of it alone)
nsys_goldens() {
  local d=$1 extra=${2:-} note=${3:-} r
  mkdir -p "$d/stats"
  nsys stats -r "$reports${extra:+,$extra}" -f csv --force-export=false --force-overwrite=true -o "$d/stats/nsys" \
    "$d/export.sqlite" > "$d/stats.log" 2>&1 || echo "stats $d rc=$?"
  grep -i "skipped\|error\|warning" "$d/stats.log" | head -20
  if [ -n "$note" ]; then
    echo "nsys stats, the reports that wrote nothing (each asked alone):" >> "$d/capture.txt"
    for r in ${reports//,/ } ${extra//,/ }; do
      [ -s "$d/stats/nsys_$r.csv" ] && continue
      echo "  $r: $(nsys stats -r "$r" -f csv --force-export=false "$d/export.sqlite" 2>&1 |
        grep -i "skipped\|error\|does not contain" | head -1 | sed "s|$d/||")" >> "$d/capture.txt"
    done
  fi
  find "$d/stats" -name 'nsys_*.csv' -size 0 -delete  # (a report with nothing to say: osrt_sum without OS runtime data)
  nsys_rule_goldens "$d"
  for f in "$d"/stats/nsys_*.csv; do [ -e "$f" ] && mv "$f" "$d/stats/$(basename "$f" | sed 's/^nsys_//')"; done
  xz -f -T0 -9 "$d/stats/cuda_gpu_trace.csv" "$d/stats/nvtx_gpu_proj_trace.csv" "$d/stats/nvtx_pushpop_trace.csv" \
    "$d/stats/cuda_api_trace.csv" "$d/stats/cuda_kern_exec_trace.csv" 2>/dev/null
  rm -f "$d/export.nsys-rep" "$d/stats.log"
  xz -f -T0 -9 "$d/export.sqlite"
  ls -la "$d" "$d/stats" | head -30
}

# NVIDIA's expert rules (nsys analyze) on the export, every row (rows=-1), as
# stats/analyze_RULE.csv (an empty file: the rule found nothing; none where nsys skipped
# them all, an export without CUDA), and the two rules with thresholds once more with other
# ones; files over 16 kB compressed
rules="cuda_api_sync cuda_memcpy_async cuda_memcpy_sync cuda_memset_sync gpu_gaps gpu_time_util"
nsys_rule_goldens() {  # folder [export, default export.sqlite]
  local d=$1 x=${2:-export.sqlite} r
  nsys analyze -r "$(for r in $rules; do printf '%s:rows=-1,' "$r"; done | sed 's/,$//')" -f csv \
    --force-export=false --force-overwrite=true -o "$d/stats/rule" "$d/$x" > "$d/analyze.log" 2>&1 ||
    echo "analyze $d rc=$?"
  nsys analyze -r gpu_gaps:rows=-1:gap=1,gpu_time_util:rows=-1:threshold=90:chunks=100 -f csv \
    --force-export=false --force-overwrite=true -o "$d/stats/opts" "$d/$x" >> "$d/analyze.log" 2>&1 ||
    echo "analyze $d (thresholds) rc=$?"
  if grep -q "Does the application use CUDA runtime APIs" "$d/analyze.log"; then  # (no CUDA traced)
    rm -f "$d"/stats/rule_*.csv "$d"/stats/opts_*.csv
  else
    for r in $rules; do mv "$d/stats/rule_${r}_rows=-1.csv" "$d/stats/analyze_$r.csv"; done
    mv "$d/stats/opts_gpu_gaps_rows=-1_gap=1.csv" "$d/stats/analyze_gpu_gaps_gap1.csv"
    mv "$d/stats/opts_gpu_time_util_rows=-1_threshold=90_chunks=100.csv" \
      "$d/stats/analyze_gpu_time_util_threshold90_chunks100.csv"
    find "$d/stats" -name 'analyze_*.csv' -size +16k -exec xz -f -T0 -9 {} +
  fi
  rm -f "$d/analyze.log"
}

for scen in ${NSYS_SCENARIOS-hstu_mixed many_kernels multithread}; do
  d="$out/nsys_$scen"; mkdir -p "$d"
  echo "== nsys $scen $(date -u +%T)"
  if [ "${scen#registered_nvtx}" != "$scen" ]; then
    mkdir -p "$out/bin"
    nvcc -O2 -arch=sm_90 -o "$out/bin/nsys_registered_nvtx" "$here/programs/nsys_registered_nvtx.cu" -ldl || echo "nvcc rc=$?"
  fi
  if [ "${scen#cpu_only}" != "$scen" ]; then  # no CUDA: a C program, the toolkit's header-only NVTX v3
    mkdir -p "$out/bin"
    inc=$(for c in ${CUDA_HOME:-} /usr/local/cuda /usr/local/cuda-*; do
            [ -e "$c/include/nvtx3/nvToolsExt.h" ] && { echo "$c/include"; break; }; done)
    ${CC:-cc} -O2 -Wall -I"${inc:-/usr/local/cuda/include}" -o "$out/bin/nsys_cpu_only" \
      "$here/programs/nsys_cpu_only.c" -lpthread -ldl || echo "cc rc=$?"
  fi
  if [ "$scen" = memops ] || [ "$scen" = copies_only ]; then
    mkdir -p "$out/bin"
    nvcc -O2 -arch=sm_90 -o "$out/bin/nsys_$scen" "$here/programs/nsys_$scen.cu" || echo "nvcc rc=$?"
  fi
  if [ "${scen#um_}" != "$scen" ] && [ ! -x "$out/bin/nsys_um" ]; then  # -g: the faults' source lines
    mkdir -p "$out/bin"
    nvcc -O2 -g -arch=sm_90 -o "$out/bin/nsys_um" "$here/programs/nsys_um.cu" || echo "nvcc rc=$?"
  fi
  if [ "${scen#cpu_hot}" != "$scen" ] && [ ! -x "$out/bin/nsys_cpu_hot" ]; then  # frame pointers: whole stacks
    mkdir -p "$out/bin"
    nvcc -O2 -g -arch=sm_90 -Xcompiler -fno-omit-frame-pointer -o "$out/bin/nsys_cpu_hot" \
      "$here/programs/nsys_cpu_hot.cu" -lpthread || echo "nvcc rc=$?"
  fi
  if [ "$scen" = mem_odd ]; then  # the driver API: virtual memory management
    mkdir -p "$out/bin"
    nvcc -O2 -arch=sm_90 -o "$out/bin/nsys_mem_odd" "$here/programs/nsys_mem_odd.cu" -lcuda || echo "nvcc rc=$?"
  fi
  if [ "${scen#mem}" != "$scen" ] && [ "${scen#memops}" = "$scen" ] && [ "$scen" != mem_odd ] && [ ! -x "$out/bin/nsys_mem" ]; then
    mkdir -p "$out/bin"
    nvcc -O2 -arch=sm_90 -o "$out/bin/nsys_mem" "$here/programs/nsys_mem.cu" || echo "nvcc rc=$?"
  fi
  if [ "$scen" = streams ]; then  # per-thread default streams: the runtime's _ptsz/_ptds entry points
    mkdir -p "$out/bin"
    nvcc -O2 -arch=sm_90 --default-stream per-thread -o "$out/bin/nsys_streams" "$here/programs/nsys_streams.cu" \
      -lcuda || echo "nvcc rc=$?"
  fi
  opts="$(options "$scen") $(sampling "$scen")"
  record "$d" nsys profile $opts $nsys_opts -o export $(cmdline "$scen")
  # shellcheck disable=SC2086
  nsys profile $opts $nsys_opts -o "$d/export" $(cmdline "$scen") > "$d/profile.log" 2>&1
  rc=$?
  if { [ $rc != 0 ] || [ ! -s "$d/export.sqlite" ]; } && [ -n "$(fallback "$scen")" ]; then
    echo "profile $scen rc=$rc with its own options: retrying with $(fallback "$scen")"
    written=$([ -s "$d/export.sqlite" ] && echo yes || echo no)
    record "$d" nsys profile $(fallback "$scen") $nsys_opts -o export $(cmdline "$scen")
    { echo "first try: nsys profile $opts (rc=$rc, export written: $written); its log ends:"
      tail -15 "$d/profile.log" | sed 's/^/  /'; } >> "$d/capture.txt"
    # shellcheck disable=SC2086,SC2046
    nsys profile $(fallback "$scen") $nsys_opts -o "$d/export" $(cmdline "$scen") > "$d/profile.log" 2>&1
    rc=$?
  fi
  [ $rc = 0 ] || echo "profile $scen failed rc=$rc"
  tail -3 "$d/profile.log"
  if [ "$scen" = backtrace ] || [ "${scen#python_hot}" != "$scen" ]; then  # (Python frames: NVTX payloads, --include-blobs)
    nsys export --type sqlite --include-blobs=true --force-overwrite=true -o "$d/export.sqlite" "$d/export.nsys-rep" \
      > "$d/export.log" 2>&1 || { echo "export with blobs rc=$?"; tail -3 "$d/export.log"; }
    rm -f "$d/export.log"
    echo "exported again: nsys export --type sqlite --include-blobs=true" >> "$d/capture.txt"
  fi
  if [ "${scen#registered_nvtx}" != "$scen" ]; then  # the point of this fixture: no inline NVTX text anywhere
    python3 - "$d/export.sqlite" >> "$d/capture.txt" <<'PY'
import sqlite3, sys
con = sqlite3.connect(sys.argv[1])
print("NVTX_EVENTS check (eventType, rows, text IS NULL, textId IS NOT NULL, domainId IS NOT NULL):")
for row in con.execute("SELECT eventType, count(*), sum(text IS NULL), sum(textId IS NOT NULL), "
                       "sum(domainId IS NOT NULL) FROM NVTX_EVENTS GROUP BY eventType ORDER BY eventType"):
    print("  ", row)
total, null_text = con.execute("SELECT count(*), sum(text IS NULL) FROM NVTX_EVENTS").fetchone()
print(f"NVTX_EVENTS: {total} rows, text NULL in {null_text}: {'every row' if total == null_text else 'NOT every row'}")
PY
    tail -12 "$d/capture.txt"
  fi
  if [ "${scen#cpu_only}" != "$scen" ] || [ "$scen" = window_missed ]; then  # the point of these: no CUDA table
    python3 - "$d/export.sqlite" >> "$d/capture.txt" <<'PY'
import sqlite3, sys
con = sqlite3.connect(sys.argv[1])
tables = sorted(r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
print("CUPTI tables:", [t for t in tables if t.startswith("CUPTI")] or "none")
print("CAPTURE_EVENT_TYPE:", [v for (v,) in con.execute(
    "SELECT value FROM META_DATA_CAPTURE WHERE name = 'CAPTURE_EVENT_TYPE'")])
print("NVTX_EVENTS (eventType, rows, text IS NULL, textId IS NOT NULL, domainId > 0, endGlobalTid <> globalTid):")
for row in con.execute("SELECT eventType, count(*), sum(text IS NULL), sum(textId IS NOT NULL), sum(domainId > 0), "
                       "sum(endGlobalTid IS NOT NULL AND endGlobalTid <> globalTid) FROM NVTX_EVENTS "
                       "GROUP BY eventType ORDER BY eventType"):
    print("  ", row)
print("OSRT_API (name, calls):", con.execute("SELECT s.value, count(*) FROM OSRT_API o JOIN StringIds s "
                                             "ON s.id = o.nameId GROUP BY 1 ORDER BY 2 DESC, 1").fetchall())
PY
    tail -12 "$d/capture.txt"
  fi
  if [ "$scen" = nccl_overlap ]; then  # NVIDIA's recipe reads the .nsys-rep (nsys_goldens removes it): its CSVs kept
    nsys recipe nccl_gpu_overlap_trace --input "$d/export.nsys-rep" --output "$d/.recipe" --force-overwrite --csv \
      > "$d/recipe.log" 2>&1 || { echo "recipe rc=$?"; tail -5 "$d/recipe.log"; }
    mkdir -p "$d/recipes/nccl_gpu_overlap_trace" && mv "$d"/.recipe/*.csv "$d/recipes/nccl_gpu_overlap_trace/"
    rm -rf "$d/.recipe" "$d/recipe.log" "$d"/export_pqtdir
  fi
  if [ "$scen" = backtrace ]; then
    # nsys stats counts the backtrace events nsys writes beside the calls it unwound
    # (CUPTI_ACTIVITY_KIND_RUNTIME rows of eventClass 67) as calls, and joins them to the
    # kernels: its reports of the export as captured are kept in stats_with_backtrace_events/,
    # and stats/ is its reports of a copy without those events (the calls as tracekit counts them)
    mkdir -p "$d/calls"
    cp "$d/export.sqlite" "$d/calls/export.sqlite"
    python3 -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); \
c.execute('DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass = 67'); c.commit()" "$d/calls/export.sqlite"
    nsys_goldens "$d/calls"
    nsys_goldens "$d"
    mv "$d/stats" "$d/stats_with_backtrace_events" && mv "$d/calls/stats" "$d/stats" && rm -rf "$d/calls"
    continue
  fi
  nsys_goldens "$d" "$(extra_reports "$scen")" \
    "$([ "${scen#cpu_only}" != "$scen" ] || [ "$scen" = um_gpu_only ] || [ "$scen" = window_missed ] ||
       [ "$scen" = copies_only ] && echo yes)"
done
rm -f /tmp/*.qdstrm /tmp/nvidia/nsight_systems/*.qdstrm 2>/dev/null

# nsys_ranks: RANKS processes started together, each under its own nsys, round-robin over the GPUs
rank_kind() {  # rank -> its nsys options' case
  local pair
  if [ "$1" = "${RANKS_MISSED:-}" ]; then echo ranks_missed; return; fi
  for pair in ${RANKS_KINDS:-}; do [ "${pair%%:*}" = "$1" ] && { echo "${pair#*:}"; return; }; done
  echo "${RANKS_KIND:-ranks}"
}
if [ -n "${RANKS:-}" ]; then
  d="$out/${RANKS_NAME:-nsys_ranks}"; mkdir -p "$d"
  echo "== nsys ranks x$RANKS $(date -u +%T)"
  export MASTER_ADDR=127.0.0.1 MASTER_PORT=${MASTER_PORT:-29517} WORLD_SIZE=$RANKS
  for ((r = 0; r < RANKS; r++)); do
    mkdir -p "$d/rank$r"
    record "$d/rank$r" RANK=$r WORLD_SIZE=$RANKS nsys profile $(options "$(rank_kind $r)") $(sampling ranks) $nsys_opts \
      -o export python3 "$here/programs/nsys_ranks.py" ${RANKS_ARGS:-}
  done
  pids=()
  for ((r = 0; r < RANKS; r++)); do
    # shellcheck disable=SC2086
    RANK=$r nsys profile $(options "$(rank_kind $r)") $(sampling ranks) $nsys_opts -o "$d/rank$r/export" \
      python3 "$here/programs/nsys_ranks.py" ${RANKS_ARGS:-} > "$d/rank$r/profile.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || echo "rank pid $p rc=$?"; done
  for ((r = 0; r < RANKS; r++)); do
    tail -2 "$d/rank$r/profile.log"
    nsys_goldens "$d/rank$r" "" "$([ "$r" = "${RANKS_MISSED:-}" ] && echo yes)"
  done
  rm -f /tmp/*.qdstrm /tmp/nvidia/nsight_systems/*.qdstrm 2>/dev/null
fi

# ncu variant -> its ncu options (after --clock-control none) and the command it profiles
# ($bin: the CUDA programs built below); ncu_fallback: options to try in turn where the
# first give no report (none: no retry); capture.txt then says what failed
ncu_options() {
  case $1 in
    full) echo "--nvtx --nvtx-include ncu/ --set full" ;;
    sections) echo "--nvtx --nvtx-include ncu/ --section SpeedOfLight_RooflineChart --section Occupancy --section LaunchStats" ;;
    diff_*) echo "--nvtx --nvtx-include diff/ --set full" ;;
    shapes_*) echo "--nvtx --nvtx-include shapes/ --set full" ;;
    clocks_*) echo "--nvtx --nvtx-include clocks/ --set full" ;;
    source) echo "--nvtx --nvtx-include src/ --set full --import-source yes" ;;
    app_replay) echo "--replay-mode application --nvtx --nvtx-include var/ --set full" ;;
    range) echo "--replay-mode range --nvtx --set full" ;;
    app_range) echo "--replay-mode app-range --nvtx --nvtx-include region_a/ --nvtx-include region_b/" ;;
    metrics) echo "--nvtx --nvtx-include var/ --metrics $ncu_metrics" ;;
    graph) echo "--graph-profiling graph --nvtx --nvtx-include graph/ --set full" ;;
    multiproc) echo "--target-processes all --nvtx --nvtx-include mp/ --set full" ;;
    libs) echo "--nvtx --nvtx-include lib/ --set full" ;;
    levels) echo "--nvtx --nvtx-include levels/ --set full" ;;
    occupancy_*) echo "--nvtx --nvtx-include occ/ --set full" ;;
    triton_detailed) echo "--set detailed" ;;
  esac
}
ncu_fallback() {
  case $1 in
    range) echo "--replay-mode range --nvtx|--replay-mode range --profile-from-start off --nvtx" ;;
    app_range) echo "--replay-mode app-range --nvtx --nvtx-include region_a --nvtx-include region_b" ;;
    graph) echo "--graph-profiling graph --nvtx --nvtx-include graph/|--graph-profiling graph --set full" ;;
  esac
}
ncu_cmdline() {
  case $1 in
    full|sections) echo "python3 $here/programs/ncu_kernels.py" ;;
    diff_*) echo "python3 $here/programs/ncu_diff.py ${1#diff_}" ;;
    shapes_*) echo "python3 $here/programs/ncu_shapes.py ${1#shapes_}" ;;
    clocks_*) echo "python3 $here/programs/ncu_clocks.py ${1#clocks_}" ;;
    source) echo "python3 $here/programs/ncu_source.py" ;;
    app_replay|metrics) echo "$out/bin/ncu_variants kernels" ;;
    range) echo "$out/bin/ncu_variants range" ;;
    app_range) echo "$out/bin/ncu_variants nvtx" ;;
    graph) echo "$out/bin/ncu_variants graph" ;;
    multiproc) echo "python3 $here/programs/ncu_multiproc.py" ;;
    libs) echo "python3 $here/programs/ncu_libs.py" ;;
    levels) echo "python3 $here/programs/ncu_levels.py" ;;
    occupancy_*) echo "python3 $here/programs/ncu_occupancy.py ${1#occupancy_}" ;;
    triton_detailed) echo "python3 $here/programs/ncu_triton_autotune.py" ;;
  esac
}
# the metrics variant: a few metrics by name, no sections (so no rules either)
ncu_metrics=gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,\
dram__bytes_write.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,\
smsp__sass_thread_inst_executed_op_ffma_pred_on.sum

for variant in ${NCU_VARIANTS-full sections}; do
  d="$out/ncu_$variant"; mkdir -p "$d"
  case $variant in app_replay|range|app_range|metrics|graph)
    if [ ! -x "$out/bin/ncu_variants" ]; then
      mkdir -p "$out/bin"
      nvcc -O2 -arch=sm_90 -lineinfo -o "$out/bin/ncu_variants" "$here/programs/ncu_variants.cu" || echo "nvcc rc=$?"
    fi ;;
  esac
  echo "== ncu $variant $(date -u +%T)"
  opts=$(ncu_options "$variant")
  cmd=$(ncu_cmdline "$variant")
  short=${cmd//$out\/bin\//}; short=${short//$here\/programs\//}  # (capture.txt: names, not paths)
  record "$d" ncu --clock-control none $opts -o report $short
  # shellcheck disable=SC2086
  timeout 300 ncu --clock-control none $opts -f -o "$d/report" $cmd > "$d/profile.log" 2>&1
  rc=$?
  IFS='|' read -r -a alts <<< "$(ncu_fallback "$variant")"
  for alt in "${alts[@]}"; do
    { [ $rc != 0 ] || [ ! -s "$d/report.ncu-rep" ]; } || break
    echo "ncu $variant rc=$rc with its own options: retrying with $alt"
    written=$([ -s "$d/report.ncu-rep" ] && echo yes || echo no)
    { echo "first try: ncu --clock-control none $opts (rc=$rc, report written: $written); its log ends:"
      tail -15 "$d/profile.log" | sed 's/^/  /'; } > "$d/tried.txt"
    record "$d" ncu --clock-control none $alt -o report $short
    cat "$d/tried.txt" >> "$d/capture.txt"; rm -f "$d/tried.txt"
    opts=$alt
    # shellcheck disable=SC2086
    timeout 300 ncu --clock-control none $opts -f -o "$d/report" $cmd > "$d/profile.log" 2>&1
    rc=$?
  done
  [ $rc = 0 ] || echo "ncu $variant rc=$rc"
  tail -3 "$d/profile.log"
  ncu -i "$d/report.ncu-rep" --csv --page raw --print-units base > "$d/raw.csv"
  ncu -i "$d/report.ncu-rep" --csv --page raw > "$d/raw_default_units.csv"
  ncu -i "$d/report.ncu-rep" --csv --page details --print-metric-name name --print-units base > "$d/details.csv"
  ncu -i "$d/report.ncu-rep" --csv --page details > "$d/details_labels.csv"
  if [ "$variant" = triton_detailed ]; then  # (the body items too: charts and tables repeat metrics)
    ncu -i "$d/report.ncu-rep" --csv --page details --print-metric-name name --print-units base \
      --print-details all > "$d/details_all.csv"
    ncu -i "$d/report.ncu-rep" --csv --page details --print-metric-name name --print-units base \
      --print-summary per-kernel > "$d/details_summary.csv"  # (launches aggregated: tracekit refuses it)
  fi
  source_pages "$d/report.ncu-rep" "$d"
  for f in "$d"/source_*.csv; do  # a page without Source Counters' columns (SASS alone, or ncu's warnings) is not kept
    grep -q 'Instructions Executed\|Warp Stall Sampling' "$f" 2> /dev/null || rm -f "$f"
  done
  xz -f -T0 -9 "$d/report.ncu-rep" "$d"/*.csv
  wc -c "$d"/*
done

# sweep_pair: identical tracekit sweeps (a, b: a noise pair) and c with the PyTorch
# reference HSTU attention instead of the Triton kernel (TRACEKIT_KERNELS_BACKEND; meta.json
# records it as attention_backend). `--no-ingest` needs no DuckDB; where the analysis deps
# (duckdb, polars) are missing, the CLI runs from a tracekit package tree whose __init__ does
# not import the store (capture needs only tracekit.errors): the workload code is the same.
tk_cli() {
  if [ -n "${TRACEKIT:-}" ]; then $TRACEKIT "$@"; return; fi
  if command -v tracekit > /dev/null && python3 -c "import duckdb, polars" 2> /dev/null; then tracekit "$@"; return; fi
  local repo; repo=$(cd "$here/../.." && pwd)
  local tk="$out/.tk/tracekit"
  if [ ! -e "$tk/__init__.py" ]; then
    mkdir -p "$tk"
    for f in "$repo"/tracekit/*; do [ "$(basename "$f")" = __init__.py ] || ln -sfn "$f" "$tk/"; done
    ln -sfn "$repo/capture" "$tk/capture"; ln -sfn "$repo/kernels" "$tk/kernels"
    sed '/^from .store import/d' "$repo/tracekit/__init__.py" > "$tk/__init__.py"
  fi
  (cd "$out" && PYTHONPATH="$out/.tk${PYTHONPATH:+:$PYTHONPATH}" \
    python3 -c 'import sys; sys.argv[0] = "tracekit"; from tracekit.cli import main; sys.exit(main())' "$@")  # cwd: no ./tracekit
}
# the HSTU workload's sweep over bs 1,4 x nc 128,512 into DIR/runs: hstu_sweep DIR BACKEND OPTIONS...
# (TRACEKIT_KERNELS_BACKEND=BACKEND; the command recorded in DIR/capture.txt, its output in DIR/sweep.log)
hstu_sweep() {
  local d=$1 backend=$2; shift 2
  local sweep_args=(sweep --bs 1,4 --nc 128,512 "$@" --no-ingest)
  record "$d" TRACEKIT_KERNELS_BACKEND=$backend tracekit "${sweep_args[@]}" --out runs
  TRACEKIT_KERNELS_BACKEND=$backend tk_cli "${sweep_args[@]}" --out "$d/runs" > "$d/sweep.log" 2>&1 \
    || echo "sweep ${d##*/} rc=$?"
  tail -3 "$d/sweep.log"
}
for s in ${SWEEPS:-}; do
  d="$out/sweep_pair/$s"; mkdir -p "$d"
  echo "== sweep $s $(date -u +%T)"
  backend=auto; [ "$s" = c ] && backend=reference
  hstu_sweep "$d" $backend --tool none --preset medium --iters 40 --warmup-ms 1000
  mv "$d"/runs/sweep-*.json "$d/" 2>/dev/null
  # the layout of tests/data/hstu_sweep/runs: meta.json + requests.csv per point
  rm -f "$d"/runs/*/spec.json "$d"/runs/*/worker.json "$d"/runs/*/capture.log
done

# a sweep's folder made a fixture: its manifest beside runs/, each point's exports compressed, an nsys
# export's with NVIDIA's nsys stats sums (stats/cuda_gpu_kern_sum.csv, nvtx_sum.csv)
sweep_points() {
  local d=$1 r f
  mv "$d"/runs/sweep-*.json "$d/" 2>/dev/null
  for r in "$d"/runs/*/; do
    r=${r%/}
    rm -f "$r/nsys.nsys-rep" "$r/ncu_raw.csv" "$r/spec.json" "$r/worker.json" /tmp/*.qdstrm
    for f in "$r/ncu.ncu-rep" "$r/ncu_details.csv"; do [ -f "$f" ] && xz -9 "$f"; done
    [ -f "$r/nsys.sqlite" ] || continue
    mkdir -p "$r/stats"
    nsys stats -r cuda_gpu_kern_sum,nvtx_sum -f csv --force-export=false --force-overwrite=true -o "$r/stats/nsys" \
      "$r/nsys.sqlite" > /dev/null 2>&1 || echo "stats $r rc=$?"
    for f in "$r"/stats/nsys_*.csv; do [ -e "$f" ] && mv "$f" "$r/stats/${f##*/nsys_}"; done
    xz -9 "$r/nsys.sqlite"
  done
}

# hstu_nsys_sweep: the HSTU workload's bs x nc sweep under nsys (each point a run folder with its export and
# NVIDIA's nsys stats sums): diff of two such sweeps compares each point's kernels and NVTX ranges and its requests
for s in ${HSTU_NSYS_SWEEPS:-}; do
  d="$out/hstu_nsys_sweep/$s"; mkdir -p "$d"
  echo "== hstu nsys sweep $s $(date -u +%T)"
  backend=auto; [ "$s" = reference ] && backend=reference
  hstu_sweep "$d" $backend --tool nsys --preset small --iters 20 --warmup-ms 500
  sweep_points "$d"
done

# command_sweep: a program of the user's kind swept over a grid of its own parameters under nsys (the
# run folders of `tracekit sweep --grid ... -- CMD`), each point with NVIDIA's nsys stats sums
for s in ${COMMAND_SWEEPS:-}; do
  d="$out/command_sweep/$s"; mkdir -p "$d"
  echo "== command sweep $s $(date -u +%T)"
  slow=(); [ "$s" = slow ] && slow=(--slow)
  tool=(--tool nsys); [ "$s" = ncu ] && tool=(--tool ncu --nvtx-capture step --launch-count 6)
  case $s in mem*) tool=(--tool nsys --cuda-memory-usage) ;; esac
  m=m=1024,4096; [ "$s" = oom ] && m=m=1024,4096,524288
  sweep_args=(sweep "${tool[@]}" --grid "$m" --grid dtype=fp16,fp32 --no-ingest --out "$d/runs" --
              python3 "$here/programs/sweep_matmul.py" --m "{m}" --dtype "{dtype}" "${slow[@]}")
  record "$d" tracekit "${sweep_args[@]}"
  tk_cli "${sweep_args[@]}" > "$d/sweep.log" 2>&1 || echo "sweep $s rc=$?"
  tail -3 "$d/sweep.log"
  sweep_points "$d"
done

# ncu_source_sweep: a Triton kernel's sweep under ncu, with its source lines (tracekit's ncu options: --set
# full, --import-source yes), twice and with the planted regression (ncu_shapes slow)
for s in ${SOURCE_SWEEPS:-}; do
  d="$out/ncu_source_sweep/$s"; mkdir -p "$d"
  echo "== source sweep $s $(date -u +%T)"
  config=a; [ "$s" = slow ] && config=slow
  sweep_args=(sweep --tool ncu --nvtx-capture shapes --grid size=16,24 --no-ingest --out "$d/runs" --
              python3 "$here/programs/ncu_shapes.py" $config --sizes "{size}")
  record "$d" tracekit "${sweep_args[@]}"
  tk_cli "${sweep_args[@]}" > "$d/sweep.log" 2>&1 || echo "sweep $s rc=$?"
  tail -3 "$d/sweep.log"
  sweep_points "$d"
done

# hstu_capture_pair (CAPTURE_PAIR=1) and hstu_capture_ncu_pair (CAPTURE_NCU_PAIR=1): `tracekit capture
# --bs 8 --nc 1024` of the large preset under nsys (base, half_sms) or ncu (base, base_again,
# half_sms), half_sms with the KV-cached attention kernel given half the SMs through a tiles file
# (PROGRAMS=66): one kernel ~1.7-1.8x slower under the same name and launch count (diff fixtures);
# hstu_host_pace (CAPTURE_HOST_PACE=1): before and before2 with the cached kernel's Gluon version off
# (GLUON: false, the Triton kernel), after with the default (the Gluon kernel on sm_90). The committed
# hstu_host_pace was taken with the kernels of a6f38df (before, before2) and 46e3e09 (after) swapped under
# one checkout (its README); this takes the same kernels' choice through the tiles file.
capture_pair() {  # tool folder runs... -- capture args...
  local tool=$1 d="$out/$2" r tiles; shift 2
  local runs=(); while [ "$1" != -- ]; do runs+=("$1"); shift; done; shift
  mkdir -p "$d"
  python3 - "$d" <<'PY'
import json, sys, torch
name = torch.cuda.get_device_name(0)
for file, cfg in (("half_sms.json", {"PROGRAMS": 66}), ("triton.json", {"GLUON": False})):
    json.dump({"tiles": {f"cached|{name}|{dt}|{k}|{k}|{b}": cfg for dt in ("bfloat16", "float16")
                         for k in (128, 256) for b in (256, 512, 1024, 2048, 4096, 8192, 16384)}},
              open(f"{sys.argv[1]}/{file}", "w"))
PY
  local cap_args=(capture --bs 8 --nc 1024 --tool "$tool" --preset large "$@" --no-ingest)
  for r in "${runs[@]}"; do
    case $r in half_sms) tiles="$d/half_sms.json";; before*) tiles="$d/triton.json";;
               *) tiles="$d/none.json";; esac  # (a missing file: the built-in tiles)
    mkdir -p "$d/.rec" && record "$d/.rec" TRACEKIT_TILES=$tiles tracekit "${cap_args[@]}" --name "$r"
    TRACEKIT_TILES=$tiles tk_cli "${cap_args[@]}" --out "$d" --name "$r" > "$d/$r.log" 2>&1 || echo "capture $r rc=$?"
    mv "$d/.rec/capture.txt" "$d/$r/capture.txt" && rmdir "$d/.rec"
    rm -f "$d/$r"/nsys.nsys-rep "$d/$r"/ncu_raw.csv "$d/$r"/spec.json "$d/$r"/worker.json "$d/$r.log" /tmp/*.qdstrm
    if [ -f "$d/$r/nsys.sqlite" ]; then  # NVIDIA's nsys stats of the export (the sums: no trace reports)
      mkdir -p "$d/$r/stats"
      nsys stats -r "$(echo "$reports" | tr , '\n' | grep -v _trace | paste -sd,)" -f csv --force-export=false \
        --force-overwrite=true -o "$d/$r/stats/nsys" "$d/$r/nsys.sqlite" > /dev/null 2>&1 || echo "stats $r rc=$?"
      for f in "$d/$r"/stats/nsys_*.csv; do [ -e "$f" ] && mv "$f" "$d/$r/stats/${f##*/nsys_}"; done
      nsys_rule_goldens "$d/$r" nsys.sqlite
    fi
    for f in "$d/$r"/nsys.sqlite "$d/$r"/ncu.ncu-rep "$d/$r"/ncu_details.csv; do [ -f "$f" ] && xz -9 "$f"; done
  done
}
[ -n "${CAPTURE_PAIR:-}" ] && capture_pair nsys hstu_capture_pair ${CAPTURE_PAIR_RUNS:-base base_again half_sms} -- \
  --iters 30 --warmup-ms 1000
[ -n "${CAPTURE_HOST_PACE:-}" ] && capture_pair nsys hstu_host_pace before after before2 -- --iters 30 --warmup-ms 1000
[ -n "${CAPTURE_NCU_PAIR:-}" ] && capture_pair ncu hstu_capture_ncu_pair base base_again half_sms -- --iters 5 --warmup-ms 500
rm -rf "$out/.tk"

# the plants, from the programs' constants and NVIDIA's own CSVs
[ -d "$out/nsys_diff_regressed" ] && python3 "$here/programs/plant.py" diff "$out"
[ -n "${RANKS:-}" ] && python3 "$here/programs/plant.py" \
  "$([ -n "${RANKS_MISSED:-}" ] && echo missed || { [ -n "${RANKS_KINDS:-}" ] && echo mixed; } || echo ranks)" \
  "$out" "${RANKS_NAME:-nsys_ranks}"
exit 0
