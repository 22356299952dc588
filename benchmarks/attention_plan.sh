#!/usr/bin/env bash
# One GPU-machine call for the HSTU kernels (docs/performance.md, "HSTU attention"): the GPU
# tests, the cached kernel's variants, the dense tile sweep, the table beside the peer.
# Usage (repository root, on the GPU machine): benchmarks/attention_plan.sh OUTDIR [STEP ...]
#   steps, run in the order given: warm tests cached tiles table dotable ncu checks bsa
#   (default: tests cached tiles table)
# The peer (meta-recsys/generative-recommenders' Triton kernel) is measured when importable:
# put a checkout holding generative_recommenders/ on PYTHONPATH. Tuned tiles go to
# $TRACEKIT_TILES (default OUTDIR/tiles.json) and the table step reads them. Clocks are read,
# never changed.
set -u
out=${1:?OUTDIR}; shift
mkdir -p "$out"
out=$(cd "$out" && pwd)
steps=" ${*:-tests cached tiles table} "
export TRACEKIT_TILES=${TRACEKIT_TILES:-$out/tiles.json}
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv | tee "$out/gpu.csv"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee "$out/versions.txt"
python3 -c "import generative_recommenders.ops.triton.triton_hstu_attention" 2>/dev/null \
  && echo "peer: importable" || echo "peer: not importable"
t0=$(date +%s)
# each step's time limit (s): STEP_LIMIT (default 300); $load makes kernels/ importable as
# tracekit.kernels without an install (benchmarks/attention_gpu.py's loader)
load="import sys; sys.path.insert(0, 'benchmarks'); import attention_gpu"
lim=${STEP_LIMIT:-300}
for step in $steps; do
  echo "== $step $(( $(date +%s) - t0 )) s"
  case $step in
    warm)
      # compile in parallel what the timed steps below use (Triton's on-disk cache), so they
      # only time: the peer's autotuning per T, the dense tile candidates, the cached variants
      for T in ${TILE_T:-1024 2048 4096 8192}; do
        timeout "$lim" python3 benchmarks/attention_gpu.py "$out/warm_$T" --no-checks --configs "hstu_T$T" \
          --variants "${TABLE_VARIANTS:-triton_dense,triton_dense_default,sdpa,peer}" --warmup-ms 1 --rep-ms 1 \
          > "$out/warm_peer_$T.log" 2>&1 &
        timeout "$lim" python3 -c "$load; from tracekit.kernels.tiles import tune; tune($T, rep_ms=1, save_result=False)" \
          > "$out/warm_tiles_$T.log" 2>&1 &
      done
      timeout "$lim" python3 benchmarks/attention_tune.py "$out/warm_cached" --cached --warm \
        --variants "${CACHED_VARIANTS:-default,split2,split3}" > "$out/warm_cached.log" 2>&1 &
      wait
      tail -n 3 "$out"/warm_*.log ;;
    tests)
      timeout "$lim" python3 -c "$load; import pytest; sys.exit(pytest.main(sys.argv[1:]))" -q -x -p no:cacheprovider \
        tests/test_kernels_hstu.py -m gpu 2>&1 | tail -8 ;;
    dotable)
      # issue 16's table: do_bench medians, peer / default call / validate=False / SDPA in one process
      timeout "$lim" python3 benchmarks/attention_table.py "$out/dotable" --T ${TILE_T:-1024 2048 4096 8192} 2>&1 \
        | tail -16 ;;
    ncu)
      # the cached kernel (its default configuration) and the dense one at d=256: one launch each
      timeout "$lim" ncu --clock-control none -k "regex:_hstu_cached_kernel|_hstu_fwd_kernel" -c 2 \
        --section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis --section Occupancy \
        --section LaunchStats --csv python3 -c "$load
import torch, attention_tune as t
from tracekit.kernels._dense import hstu_fwd
w = t._workload(8, [2048] * 8, 1040, 1024, 4, 256, torch.bfloat16, 1)
K = attention_gpu.K
K.hstu_attention_cached(w['q'], w['k'], w['v'], w['off'], w['cache'], max_seq_len=5120, alpha=0.0625, num_targets=w['nt'],
                        validate=False)
q = torch.randn(8 * 4096, 4, 256, device='cuda').bfloat16()
hstu_fwd(q, q, q, torch.arange(9, device='cuda') * 4096, max_seq_len=4096, alpha=0.0625,
         num_targets=torch.full((8,), 256, device='cuda'), contextual_seq_len=0, max_attn_len=0)
torch.cuda.synchronize()" > "$out/ncu.csv" 2> "$out/ncu.err"; tail -3 "$out/ncu.err"; wc -l "$out/ncu.csv" ;;
    cached)
      timeout "$lim" python3 benchmarks/attention_tune.py "$out/cached" --cached \
        --variants "${CACHED_VARIANTS:-default,split2,split3,split4,split2_load,split3_load,split2_128x64w8s2}" 2>&1 \
        | grep -v "^$" ;;
    tiles)
      timeout "$lim" python3 -c "$load; from tracekit.kernels.tiles import main; main()" tune \
        --max-seq-len ${TILE_T:-1024 2048 4096 8192} 2>&1 \
        | grep -v "^$" ;;
    table)
      timeout "$lim" python3 benchmarks/attention_gpu.py "$out/table" --no-checks \
        --configs "${TABLE_CONFIGS:-hstu_T1024;hstu_T2048;hstu_T4096;hstu_T8192}" \
        --variants "${TABLE_VARIANTS:-triton_dense,triton_dense_default,sdpa,peer}" 2>&1 | tail -40 ;;
    checks)
      timeout "$lim" python3 benchmarks/attention_gpu.py "$out/checks" --no-bench 2>&1 | tail -40 ;;
    bsa)
      timeout "$lim" python3 benchmarks/attention_tune.py "$out/bsa" --bsa --bsa-variants "${BSA_VARIANTS:-new}" 2>&1 \
        | grep -v "^$" ;;
    *) echo "unknown step $step" ;;
  esac
done
echo "== done $(( $(date +%s) - t0 )) s"
