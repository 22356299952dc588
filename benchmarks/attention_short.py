# ruff: noqa: B023  (lambdas are timed at once, inside the loop that defines them)
"""Dense HSTU kernel variants for short sequences (issue 16, point 2), one device call.

    python benchmarks/attention_short.py OUTDIR --warm [--jobs 14] [--dtype bf16 fp16]
    python benchmarks/attention_short.py OUTDIR --sweep [--T 512 1024 2048 4096 8192] [--dtype bf16 fp16]

--warm:  compiles every candidate of CANDIDATES in parallel processes (Triton's on-disk cache),
         so the sweep only times;
--sweep: per T (B = 32768 / T full sequences, H=4, d=128, 256 candidates each), times
         every candidate with ``tracekit.kernels.tiles.tune`` (do_bench median, L2 cleared),
         records the fastest per T in the tuning file ($TRACEKIT_TILES) and prints the compile
         report (registers, spills) of every specialisation.

Candidates: the tile shapes that won earlier sweeps, with the diagonal blocks in their own loop
(the kernel's default) or inside the one pipelined loop (ONE_LOOP), and register caps
(``maxnreg=128``: two CTAs of 8 warps per SM).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attention_gpu import K  # noqa: E402,F401  (loads kernels/ as tracekit.kernels)


def _c(bm, bn, w, st, **kw):
    return dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=w, num_stages=st, **kw)


# round 1 (docs/performance.md) swept the tile shapes of earlier sweeps with and without a one-loop
# variant (predicated loads), register caps and Triton's warp specialisation (tl.range(...,
# warp_specialize=True): no gain at 8 warps, 2x slower at 4); round 2 found the clamped one loop
# (ONE_LOOP now) and 128x32 tiles capped at 128 registers (two CTAs of 8 warps per SM)
CANDIDATES = [
    _c(128, 64, 8, 3), _c(128, 64, 8, 4),
    _c(128, 32, 8, 3, maxnreg=128), _c(128, 32, 8, 4, maxnreg=128), _c(128, 32, 8, 2, maxnreg=128),
    _c(128, 32, 8, 3, ONE_LOOP=True, maxnreg=128), _c(128, 32, 8, 4, ONE_LOOP=True, maxnreg=128),
    _c(128, 64, 8, 3, ONE_LOOP=True), _c(128, 64, 8, 2, ONE_LOOP=True, maxnreg=128),
]
CANDIDATES_FP16 = [CANDIDATES[i] for i in (0, 2, 3, 5, 6)]
DTYPES = {"bf16": CANDIDATES, "fp16": CANDIDATES_FP16}


def _compile_one(dtype: str, i: int) -> None:
    from tracekit.kernels.tiles import tune

    rows = tune(1024, tokens=2048, rep_ms=1, dtype=dtype, candidates=[DTYPES[dtype][i]], save_result=False)
    print(json.dumps(rows[0]), flush=True)


def _compile_report(fn) -> list[str]:
    """Registers / spills / shared memory of every compiled specialisation, with its constexprs."""
    rows = []
    for cache in fn.device_caches.values():
        for ck in cache[0].values():
            md = ck.metadata
            names = ("BLOCK_M", "BLOCK_N", "ONE_LOOP", "HAS_TARGETS", "GENERAL")
            consts = {n: v for n, v in ((n, _const(ck, n)) for n in names) if v is not None}
            rows.append(f"regs {ck.n_regs} spills {ck.n_spills} shared {md.shared} warps {md.num_warps} "
                        f"stages {md.num_stages} maxnreg {getattr(md, 'maxnreg', None)} {consts}")
    return rows


def _const(ck, name):
    try:
        return ck.src.constants.get((ck.src.fn.arg_names.index(name),))
    except Exception:  # noqa: BLE001 - report only
        return None


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("outdir")
    p.add_argument("--warm", action="store_true")
    p.add_argument("--sweep", action="store_true")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)
    p.add_argument("--dtype", nargs="+", default=["bf16"], choices=list(DTYPES))
    p.add_argument("--jobs", type=int, default=14)
    p.add_argument("--T", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    p.add_argument("--rep-ms", type=int, default=150)
    a = p.parse_args()
    if a.one is not None:
        dt, i = a.one.split(":")
        _compile_one(dt, int(i))
        return
    out = Path(a.outdir)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    if a.warm:
        procs, todo = [], [(dt, i) for dt in a.dtype for i in range(len(DTYPES[dt]))]
        while todo or procs:
            while todo and len(procs) < a.jobs:
                i = todo.pop(0)
                procs.append((i, subprocess.Popen([sys.executable, __file__, str(out), "--one", f"{i[0]}:{i[1]}"],
                                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
            i, pr = procs.pop(0)
            txt = pr.communicate()[0]
            print(f"warm {i} {DTYPES[i[0]][i[1]]}: rc {pr.returncode} {txt.strip().splitlines()[-1][:160] if txt else ''}",
                  flush=True)
        print(f"[warm {time.time() - t0:.0f} s]", flush=True)
    if a.sweep:
        import torch
        from tracekit.kernels import _dense, tiles

        rows = []
        for dt in a.dtype:
            for T in a.T:
                res = tiles.tune(T, rep_ms=a.rep_ms, dtype=dt, candidates=[dict(c) for c in DTYPES[dt]])
                for r in sorted(res, key=lambda r: r["ms"] or 1e9):
                    print(f"{dt} T={T} {r['config']}: " + (f"{r['ms'] * 1e3:.1f} us {r['tflops']:.0f} TFLOP/s" if r["ms"]
                                                        else r.get("error", "")), flush=True)
                rows.append(dict(dtype=dt, T=T, rows=res))
        for line in _compile_report(_dense._hstu_fwd_kernel):
            print(line, flush=True)
        (out / "sweep.json").write_text(json.dumps(dict(device=torch.cuda.get_device_name(), rows=rows), indent=1))
        print(f"[sweep {time.time() - t0:.0f} s]", flush=True)


if __name__ == "__main__":
    main()
