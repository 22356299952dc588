#!/usr/bin/env bash
# Recreates the real fixture captures under tests/data/ on a GPU machine.
# Usage: [NSYS_SCENARIOS="..."] [NCU_VARIANTS="full sections", empty for none] capture_fixtures.sh OUTDIR
# (needs nsys and ncu on PATH, python3 with torch+triton)
# Each nsys scenario gets export.sqlite plus NVIDIA's own `nsys stats` CSVs (the goldens);
# each ncu scenario gets report.ncu-rep plus raw and details CSV exports.
set -u
out=${1:?OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
reports=cuda_gpu_kern_sum,cuda_api_sum,cuda_gpu_mem_time_sum,cuda_gpu_mem_size_sum,nvtx_sum,nvtx_gpu_proj_sum,cuda_kern_exec_sum,nvtx_kern_sum,nvtx_gpu_proj_trace,cuda_gpu_trace

# scenario -> the program it runs and the nsys options that differ from the default ones
program() { case $1 in graphs_*) echo graphs ;; odd_nvtx_cuda_only) echo odd_nvtx ;; *) echo "$1" ;; esac; }
options() {
  case $1 in
    graphs_graph) echo "-t cuda,nvtx,osrt --cuda-graph-trace=graph" ;;
    odd_nvtx_cuda_only) echo "-t cuda --cuda-graph-trace=node" ;;
    capture_range) echo "-t cuda,nvtx,osrt --cuda-graph-trace=node --capture-range=cudaProfilerApi --capture-range-end=stop" ;;
    *) echo "-t cuda,nvtx,osrt --cuda-graph-trace=node" ;;
  esac
}

for scen in ${NSYS_SCENARIOS:-hstu_mixed many_kernels multithread}; do
  d="$out/nsys_$scen"; mkdir -p "$d/stats"
  echo "== nsys $scen"
  # shellcheck disable=SC2046
  nsys profile $(options "$scen") --sample=none --cpuctxsw=none \
    --force-overwrite=true --export=sqlite -o "$d/export" \
    python3 "$here/programs/nsys_$(program "$scen").py" > "$d/profile.log" 2>&1 || echo "profile $scen failed rc=$?"
  tail -3 "$d/profile.log"
  nsys stats -r "$reports" -f csv --force-export=false --force-overwrite=true -o "$d/stats/nsys" "$d/export.sqlite" \
    > "$d/stats.log" 2>&1 || echo "stats $scen rc=$?"
  ls "$d/stats" | head -20
  rm -f "$d/export.nsys-rep"
done
rm -f /tmp/*.qdstrm /tmp/nvidia/nsight_systems/*.qdstrm 2>/dev/null

for variant in ${NCU_VARIANTS-full sections}; do
  d="$out/ncu_$variant"; mkdir -p "$d"
  if [ $variant = full ]; then sets=(--set full); else
    sets=(--section SpeedOfLight_RooflineChart --section Occupancy --section LaunchStats); fi
  echo "== ncu $variant"
  ncu --clock-control none --nvtx --nvtx-include "ncu/" "${sets[@]}" -f -o "$d/report" \
    python3 "$here/programs/ncu_kernels.py" > "$d/profile.log" 2>&1 || echo "ncu $variant rc=$?"
  tail -3 "$d/profile.log"
  ncu -i "$d/report.ncu-rep" --csv --page raw --print-units base > "$d/raw.csv"
  ncu -i "$d/report.ncu-rep" --csv --page raw > "$d/raw_default_units.csv"
  ncu -i "$d/report.ncu-rep" --csv --page details --print-metric-name name --print-units base > "$d/details.csv"
  ncu -i "$d/report.ncu-rep" --csv --page details > "$d/details_labels.csv"
  wc -c "$d"/*
done
