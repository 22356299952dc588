#!/usr/bin/env bash
# End to end, before and after a kernels/ change: `tracekit capture --bs 8 --nc 1024 --tool nsys`
# of the large preset with the kernels/ folder BEFORE (e.g. main's at a branch point) and with
# this checkout's, in one call on the GPU machine, then each run folder packed without its
# .nsys-rep (the SQLite export xz-compressed). Compare them with `tracekit diff` (docs/performance.md).
# Usage (repository root, on the GPU machine; nsys reachable as /work/shared/device/README.md says):
#   benchmarks/attention_e2e.sh OUTDIR BEFORE_KERNELS_DIR
# Env: ITERS (30), WARMUP_MS (2000), ORDER ("before after": the order of the two captures).
# No install needed: the package is assembled as symlinks
# to this checkout's folders (tracekit/, capture/, kernels/, queries/) under a temporary
# PYTHONPATH entry, so swapping kernels/' contents swaps the kernels; the `tracekit` CLI runs
# as `python3 -m tracekit.cli` (or, without typer, through tracekit.capture.run.capture).
# Clocks are never changed.
set -u
root=$(pwd)
pkg=$(mktemp -d)
mkdir "$pkg/tracekit"
for f in tracekit/*; do ln -s "$root/$f" "$pkg/tracekit/$(basename "$f")"; done
ln -s "$root/capture" "$pkg/tracekit/capture"; ln -s "$root/kernels" "$pkg/tracekit/kernels"
ln -s "$root/queries" "$pkg/tracekit/queries"
export PYTHONPATH="$pkg${PYTHONPATH:+:$PYTHONPATH}"
(cd /tmp && python3 -c "import tracekit.kernels, tracekit.capture.run; print('kernels from', tracekit.kernels.__file__)") \
  || { echo "tracekit.kernels not importable"; exit 1; }
cap() {  # side
  if (cd /tmp && python3 -c "import typer" 2>/dev/null); then
    (cd /tmp && python3 -m tracekit.cli capture --bs 8 --nc 1024 --tool nsys --preset large --iters "$ITERS" \
      --warmup-ms "$WARMUP_MS" --no-ingest --out "$out/runs" --name "$1")
  else
    (cd /tmp && python3 -c "from tracekit.capture.run import capture
print(capture(8, 1024, 'nsys', 'large', $WARMUP_MS, $ITERS, '$out/runs', name='$1', ingest=False, echo=True))")
  fi
}
out=${1:?OUTDIR}; before=${2:?BEFORE_KERNELS_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
before=$(cd "$before" && pwd)
ITERS=${ITERS:-30}; WARMUP_MS=${WARMUP_MS:-2000}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv > "$out/gpu.csv"
after=$(mktemp -d)
cp -r kernels/. "$after/"
status=0
for side in ${ORDER:-before after}; do
  src=$before; [ "$side" = after ] && src=$after
  rm -rf kernels && mkdir kernels && cp -r "$src/." kernels/
  echo "== $side $(date -u +%FT%TZ)"
  cap "$side" > "$out/capture_$side.log" 2>&1 || { echo "capture $side rc=$?"; status=1; }
  tail -6 "$out/capture_$side.log"
  rm -f /tmp/*.qdstrm 2>/dev/null
done
rm -rf kernels && mkdir kernels && cp -r "$after/." kernels/ && rm -rf "$after" "$pkg"
for side in before after; do
  d="$out/runs/$side"
  [ -d "$d" ] || continue
  rm -f "$d"/*.nsys-rep
  for f in "$d"/*.sqlite; do [ -f "$f" ] && xz -T0 -6 "$f"; done
  ls -la "$d"
done
exit $status
