#!/usr/bin/env bash
# One GPU-machine call for the HSTU kernels (docs/performance.md, "HSTU attention"): the GPU
# tests, the cached kernel's variants, the dense tile sweep, the table beside the peer.
# Usage (repository root, on the GPU machine): benchmarks/attention_plan.sh OUTDIR [STEP ...]
#   steps, run in the order given: tests cached tiles table checks bsa (default: tests cached tiles table)
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
has() { case "$steps" in *" $1 "*) return 0;; esac; return 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv | tee "$out/gpu.csv"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee "$out/versions.txt"
python3 -c "import generative_recommenders.ops.triton.triton_hstu_attention" 2>/dev/null \
  && echo "peer: importable" || echo "peer: not importable"
t0=$(date +%s)
# each step's time limit (s): STEP_LIMIT (default 300)
lim=${STEP_LIMIT:-300}
for step in $steps; do
  echo "== $step $(( $(date +%s) - t0 )) s"
  case $step in
    tests)
      timeout "$lim" python3 -m pytest -q -x -p no:cacheprovider tests/test_kernels_hstu.py -m gpu 2>&1 | tail -8 ;;
    cached)
      timeout "$lim" python3 benchmarks/attention_tune.py "$out/cached" --cached \
        --variants "${CACHED_VARIANTS:-default,split2,split3,split4,split2_load,split3_load,split2_128x64w8s2}" 2>&1 \
        | grep -v "^$" ;;
    tiles)
      timeout "$lim" python3 -m tracekit.kernels.tiles tune --max-seq-len ${TILE_T:-1024 2048 4096 8192} 2>&1 \
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
