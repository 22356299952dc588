#!/usr/bin/env bash
# The HSTU inference captures on the GPU machine, for docs/performance.md ("HSTU inference sweep").
# Usage: benchmarks/capture_gpu.sh OUTDIR        (run from the repository root)
# Needs: tracekit installed (pip install -e . --no-deps plus its analysis deps), torch+triton,
# ncu on PATH; nsys found on PATH, $TRACEKIT_NSYS or a known folder such as
# /opt/nvidia/nsight-compute/<ver>/host/target-linux-x64/nsys (LD_LIBRARY_PATH must reach
# libdw/libelf for its importer: the caller sets it). Clocks are never changed.
# Env knobs: ITERS (50), WARMUP_MS (2000), SWEEP_ITERS (30), PRESET (large), SKIP (space-separated
# steps to skip: none nsys ncu sweep export).
set -u
out=${1:?OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
runs="$out/runs"
export TRACEKIT_DB="$out/tracekit.duckdb"
ITERS=${ITERS:-50}; WARMUP_MS=${WARMUP_MS:-2000}; SWEEP_ITERS=${SWEEP_ITERS:-30}; PRESET=${PRESET:-large}
SKIP=" ${SKIP:-} "
status=0
step() { case "$SKIP" in *" $1 "*) return 1;; esac; echo "== $1 $(date -u +%FT%TZ)"; }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv > "$out/gpu.csv" 2>&1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee "$out/versions.txt"

for tool in none nsys ncu; do
  if step "$tool"; then
    tracekit capture --bs 8 --nc 1024 --tool "$tool" --preset "$PRESET" --iters "$ITERS" \
      --warmup-ms "$WARMUP_MS" --out "$runs" > "$out/capture_$tool.log" 2>&1 || { echo "capture $tool rc=$?"; status=1; }
    tail -25 "$out/capture_$tool.log"
  fi
done
rm -f /tmp/*.qdstrm /tmp/nvidia/nsight_systems/*.qdstrm 2>/dev/null

if step sweep; then
  tracekit sweep --bs 1,2,4,8 --nc 128,256,512,1024 --tool none --preset "$PRESET" \
    --iters "$SWEEP_ITERS" --warmup-ms "$WARMUP_MS" --out "$runs" > "$out/sweep.log" 2>&1 || { echo "sweep rc=$?"; status=1; }
  tail -30 "$out/sweep.log"
fi

if step export; then
  tracekit export sweep -o "$out/sweep.xlsx" || status=1
  tracekit export sweep -o "$out/sweep.csv" || status=1
  for q in sweep-latency sweep-kernels; do
    tracekit query "$q" --limit 0 --format csv -o "$out/$q.csv" || status=1
  done
fi

# Small outputs travel back: everything but the big profiler reports; the nsys SQLite
# export and the ncu report are compressed when they are under 200 MB.
small="$out/small"
mkdir -p "$small"
for d in "$runs"/*/; do
  [ -d "$d" ] || continue
  n=$(basename "$d"); mkdir -p "$small/$n"
  for f in "$d"*; do
    case "$f" in
      *.nsys-rep|*.qdstrm) ;;
      *.sqlite|*.ncu-rep)
        if [ "$(stat -c %s "$f")" -lt 209715200 ]; then xz -T0 -6 -c "$f" > "$small/$n/$(basename "$f").xz"; fi ;;
      *) cp "$f" "$small/$n/" ;;
    esac
  done
done
cp "$runs"/sweep-*.json "$small/" 2>/dev/null
du -sh "$small" "$out/tracekit.duckdb" 2>/dev/null
exit $status
