#!/usr/bin/env bash
# One GPU-machine call for the block-sparse kernel (docs/performance.md, "HSTU attention"):
#   benchmarks/bsa_call.sh OUTDIR STEP ...     (repository root, on the GPU machine)
# steps, in the order given:
#   warm    compile $VARIANTS (attention_tune.py's BSA_VARIANTS) at $CONFIGS, one process each
#   tune    attention_tune.py --bsa: each variant against the default on the same input (same
#           selection, rel. error), then do_bench medians beside the dense kernel, host time per
#           call, GPU time per call (CUDA-graph replay); $CNT0 also with block_counts=0; kernel
#           times of one call (torch.profiler)
#   ncu     one launch of the fused kernel for each of $NCU_VARIANTS at bsa_T4096 and bsa_T8192
#   checks  attention_tune.py --bsa-checks with $CHECK_VARIANTS (bf16/fp16 vs float32 reference)
#   tests   the GPU tests (-m gpu) selected by $TESTS_K
#   bench   attention_gpu.py --no-checks: bench.py's figures (L2 flushed) at $CONFIGS
# Clocks are read, never changed.
set -u
out=${1:?OUTDIR}; shift
mkdir -p "$out"
export PYTHONUNBUFFERED=1
V=${VARIANTS:-new}
C=${CONFIGS:-bsa_T4096,bsa_T8192}
# MAIN: a copy of main's kernels/ (timed beside ours as variant main_code)
main_arg=${MAIN:+--bsa-main $MAIN}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
t0=$(date +%s)
for step in "$@"; do
  echo "== $step $(( $(date +%s) - t0 )) s"
  case $step in
    warm)
      m=$main_arg
      for v in ${V//,/ }; do
        timeout 240 python3 benchmarks/attention_tune.py "/tmp/warm_$v" --bsa --bsa-warm --bsa-variants "$v" \
          --bsa-configs "$C" $m > "/tmp/warm_$v.log" 2>&1 &
        m=
      done
      wait
      cat /tmp/warm_*.log > "$out/warm.log"; grep -i "error\|warm" "$out/warm.log" | head -20 ;;
    tune)
      timeout 300 python3 benchmarks/attention_tune.py /tmp/tune --bsa --bsa-variants "$V" --bsa-configs "$C" \
        --bsa-no-v0 --bsa-cnt0 "${CNT0:-}" $main_arg 2>&1 | grep -v "^$" | tee "$out/tune.log" | grep -v "^ \|^-" ;;
    ncu)
      for v in ${NCU_VARIANTS:-new}; do
        timeout 120 ncu --clock-control none -k regex:_bsa_fused_kernel -c 2 --section SpeedOfLight \
          --section Occupancy --section LaunchStats --section WarpStateStats --csv python3 -c "
import sys; sys.path.insert(0, 'benchmarks')
import torch, attention_tune as t
from tracekit.kernels import _bsa
from tracekit.kernels.bench import _make_inputs, parse_config
for cname in ('bsa_T4096', 'bsa_T8192'):
    _, cfg = parse_config(cname)
    i = _make_inputs(cfg, torch.bfloat16, 'cuda')
    _bsa.hstu_bsa_fwd(i['q'], i['k'], i['v'], i['seq_offsets'], max_seq_len=cfg['N'], alpha=i['alpha'],
                      num_targets=i['num_targets'], block_size=cfg['bs'], block_counts=cfg['counts'],
                      config=dict(t.BSA_VARIANTS['$v']))
torch.cuda.synchronize()" > "/tmp/ncu_$v.csv" 2> "/tmp/ncu_$v.err"
        echo "ncu $v: $(tail -1 /tmp/ncu_$v.err)"
        sed "s/^/$v,/" "/tmp/ncu_$v.csv" >> "$out/ncu.csv"
      done
      grep -E "Duration|Achieved Occupancy|Theoretical Occupancy|Block Limit (Registers|Shared Mem)|Registers Per|Compute \(SM\) Throughput|Issued Warp|Warp Cycles Per Issued|Dynamic Shared|Static Shared" \
        "$out/ncu.csv" | awk -F'","' '{print $1, $(NF-3), $(NF-2), $NF}' | cut -c1-140 ;;
    checks)
      for dt in bf16 fp16; do
        timeout 400 python3 benchmarks/attention_tune.py "/tmp/checks_$dt" --bsa-checks --bsa-check-dtypes $dt \
          --bsa-check-variants "${CHECK_VARIANTS:-}" > "/tmp/checks_$dt.log" 2>&1 &
      done
      wait
      cat /tmp/checks_bf16.log /tmp/checks_fp16.log > "$out/checks.log"; grep -v "^PASS" "$out/checks.log" | tail -12
      echo "checks: $(grep -c '^PASS' "$out/checks.log") PASS, $(grep -c '^FAIL' "$out/checks.log") FAIL" ;;
    tests)
      timeout 400 python3 -c "import sys; sys.path.insert(0, 'benchmarks'); import attention_gpu, pytest
sys.exit(pytest.main(sys.argv[1:]))" -q -p no:cacheprovider tests/test_kernels_hstu.py \
        -m gpu -k "${TESTS_K:-block_sparse or never_sync}" 2>&1 | tee "$out/tests.log" | tail -6 ;;
    bench)
      timeout 300 python3 benchmarks/attention_gpu.py /tmp/bench --no-checks --configs "${C//,/;}" \
        --variants triton_dense,triton_block_sparse 2>&1 | tee "$out/bench.log" | tail -20 ;;
  esac
done
echo "== done $(( $(date +%s) - t0 )) s"
