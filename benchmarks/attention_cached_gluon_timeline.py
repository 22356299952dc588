"""Where the Gluon cached kernel's time goes: per piece, %clock64 at its phases (GPU; a patched copy).

    python benchmarks/attention_cached_gluon_timeline.py [KERNELS_DIR[:CONFIG] ...] [--calls 20]

Each KERNELS_DIR (default: this checkout's ``kernels/``; CONFIG: a dict literal added to the call's
``config``, e.g. ``{'GL_TMA': 1}``) is copied to a temporary package whose
``_cached_gluon.py`` is patched: every consumer warpgroup records ``%clock64`` per piece (at most
16 a program) at its start (0), once its q is there (1), after the unmasked cached-key loop (2),
after the other loop (3), after the last P.V (4) and after the epilogue (5), and the piece's
position counts (6: nA, 7: all), into words past the fp32 partials of the workspace (which
``_cached.py``'s copy makes larger). For the first draw of ``attention_cached_cmp.py`` (C2048a,
bf16), after ``--calls`` timed calls, one more call is recorded and summed over programs: clock
cycles per unmasked and per other tile, the q waits, the final P.V, the epilogues, and each
program's recorded span against the kernel's time. The recording adds a few instructions per
piece; the figures are for comparing phases, the timings of attention_cached_cmp.py stand. The
edits match this checkout's ``_cached_gluon.py`` (an assertion names one that does not apply).
"""

from __future__ import annotations

import argparse
import ast
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attention_cached_cmp import DRAWS, N_NEW, N_TARGETS, B, D, H, _load  # noqa: E402
from attention_tune import _workload  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
REC = 16  # pieces recorded per program
WORDS = 12  # int64 words per (piece, consumer)


def patch(src: str) -> str:
    def sub(old, new):
        nonlocal src
        assert src.count(old) == 1, old[:80]
        src = src.replace(old, new)

    sub('''@gluon.jit
def _gl_fence(x):''', '''@gluon.jit
def _tl_clk(x):
    return gl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l,r", [x], dtype=gl.int64, is_pure=False, pack=1)


@gluon.jit
def _tl_rec(WS, pid, k, wg, idx, v, BLOCK_M: gl.constexpr, D: gl.constexpr):
    base = WS.to(gl.pointer_type(gl.int64), bitcast=True) + gl.num_programs(0).to(gl.int64) * BLOCK_M * D
    if k < 16:
        gl.store(base + ((pid.to(gl.int64) * 16 + k) * 2 + wg) * 12 + idx, v)


@gluon.jit
def _gl_fence(x):''')
    sub('''        rows = m0 + wg * HALF + offs_hs
        a1, nA, npos = _gl_positions(r0, r1, c_full)
        mbarrier.wait(q_full.index(k % QB), (k // QB) & 1)''', '''        _tl_rec(WS, pid, k, wg, 0, _tl_clk(pid), BLOCK_M, D)
        rows = m0 + wg * HALF + offs_hs
        a1, nA, npos = _gl_positions(r0, r1, c_full)
        mbarrier.wait(q_full.index(k % QB), (k // QB) & 1)
        _tl_rec(WS, pid, k, wg, 1, _tl_clk(pid), BLOCK_M, D)
        _tl_rec(WS, pid, k, wg, 6, nA.to(gl.int64), BLOCK_M, D)
        _tl_rec(WS, pid, k, wg, 7, npos.to(gl.int64), BLOCK_M, D)''')
    sub('''        for u in range(gl.maximum(nA - 1, 0), npos - 1, 2):  # scores of the other tiles: masked''',
        '''        _tl_rec(WS, pid, k, wg, 2, _tl_clk(pid), BLOCK_M, D)
        for u in range(gl.maximum(nA - 1, 0), npos - 1, 2):  # scores of the other tiles: masked''')
    sub('''        nt = npos
''', '''        nt = npos
        _tl_rec(WS, pid, k, wg, 3, _tl_clk(pid), BLOCK_M, D)
''')
    sub('''        g += nt
''', '''        g += nt
        _tl_rec(WS, pid, k, wg, 4, _tl_clk(pid), BLOCK_M, D)
''')
    sub('''                    gl.atomic_xchg(cnt, 0, sem="relaxed")
        if STAGE:''', '''                    gl.atomic_xchg(cnt, 0, sem="relaxed")
                    _tl_rec(WS, pid, k, wg, 10, 3, BLOCK_M, D)
        _tl_rec(WS, pid, k, wg, 5, _tl_clk(pid), BLOCK_M, D)
        if STAGE:''')
    sub('''                _gl_out(OUT, start, h, m0 + wg * HALF, n, stride_ot, stride_oh, acc * inv_n, offs_r, offs_c)
        else:''', '''                _gl_out(OUT, start, h, m0 + wg * HALF, n, stride_ot, stride_oh, acc * inv_n, offs_r, offs_c)
            _tl_rec(WS, pid, k, wg, 10, 1, BLOCK_M, D)
        else:''')
    sub('''                gl.atomic_xchg(cnt, 0, sem="relaxed")
            else:''', '''                gl.atomic_xchg(cnt, 0, sem="relaxed")
                _tl_rec(WS, pid, k, wg, 10, 4, BLOCK_M, D)
                _tl_rec(WS, pid, k, wg, 11, (c_last - c_first + 1).to(gl.int64), BLOCK_M, D)
            else:''')
    old = '''                gl.store(WS + (slot.to(gl.int64) * BLOCK_M + wrow)[:, None] * D + offs_c[None, :], acc)
'''
    new = old + '''                _tl_rec(WS, pid, k, wg, 8, _tl_clk(pid), BLOCK_M, D)
'''
    sub(old, new)
    old = '''                gl.thread_barrier()
                arrived = gl.atomic_add(cnt, 1, sem="acq_rel")
'''
    sub(old, old + '''                _tl_rec(WS, pid, k, wg, 9, _tl_clk(pid), BLOCK_M, D)
                _tl_rec(WS, pid, k, wg, 10, 2, BLOCK_M, D)
                _tl_rec(WS, pid, k, wg, 11, (c_last - c_first + 1).to(gl.int64), BLOCK_M, D)
''')
    return src


def main() -> None:
    import torch
    import triton

    p = argparse.ArgumentParser()
    p.add_argument("dirs", nargs="*", default=[str(ROOT / "kernels")], help="DIR[:CONFIG], CONFIG a dict literal")
    p.add_argument("--calls", type=int, default=20)
    a = p.parse_args()
    tag, seed, clo, chi, msl, _ = DRAWS[0]
    caches = [int(x) for x in torch.randint(clo, chi, (B,), generator=torch.Generator().manual_seed(seed))]
    w = _workload(B, caches, N_NEW, N_TARGETS, H, D, torch.bfloat16, 7)
    kw = dict(max_seq_len=msl, alpha=D**-0.5, contextual_seq_len=0, max_attn_len=0, num_targets=w["nt"])
    P = torch.cuda.get_device_properties(0).multi_processor_count
    tmp = Path(tempfile.mkdtemp())
    for i, spec in enumerate(a.dirs):
        d, _, extra = spec.partition(":")
        pkg = tmp / f"tl{i}"
        shutil.copytree(d, pkg, ignore=shutil.ignore_patterns("__pycache__"))
        f = pkg / "_cached_gluon.py"
        f.write_text(patch(f.read_text()))
        c = pkg / "_cached.py"
        s = c.read_text()
        old = "ws, cnt = _split_buffers(q.device, programs * 2 * BM * D_V, "
        assert s.count(old) == 1
        c.write_text(s.replace(old, f"ws, cnt = _split_buffers(q.device, programs * 2 * BM * D_V + programs * {REC * 2 * WORDS * 2}, "))
        m = _load(f"_tl_kernels{i}", str(pkg))
        cfg = {"GLUON": True, **(ast.literal_eval(extra) if extra else {})}

        def call(m=m, cfg=cfg):
            return m.hstu_cached_fwd(w["q"], w["k"], w["v"], w["off"], w["cache"], config=cfg, **kw)

        ms = triton.testing.do_bench(call, warmup=10, rep=100, return_mode="median")
        ws, _ = m._split_buffers(w["q"].device, P * 2 * 128 * D + P * REC * 2 * WORDS * 2, 1)
        ws.zero_()
        call()
        torch.cuda.synchronize()
        rec = ws.view(torch.int64)[P * 128 * D: P * 128 * D + P * REC * 2 * WORDS].view(P, REC, 2, WORDS).cpu()
        tot = dict(q=0, A=0, nA=0, Bt=0, nB=0, pv=0, ep=0, span=[], pieces=0, gaps=0)
        kinds = {1: [], 2: [], 3: [], 4: []}  # epilogue cycles: whole, cut, cut + sum, last by its check
        parts = {"store": [], "fence+atomic": [], "sum": []}
        for pid in range(P):
            starts = []
            for k in range(REC):
                for wg in range(2):
                    r = rec[pid, k, wg].tolist()
                    if r[0] == 0:
                        continue
                    tot["pieces"] += wg == 0
                    tot["q"] += r[1] - r[0]
                    tot["A"] += r[2] - r[1]
                    tot["nA"] += r[6]
                    tot["Bt"] += r[3] - r[2]
                    tot["nB"] += r[7] - r[6]
                    tot["pv"] += r[4] - r[3]
                    tot["ep"] += r[5] - r[4]
                    starts.append((r[0], r[5]))
                    if r[10] in kinds:
                        kinds[r[10]].append(r[5] - r[4])
                    if r[10] in (2, 3):
                        parts["store"].append(r[8] - r[4])
                        parts["fence+atomic"].append(r[9] - r[8])
                        if r[10] == 3:
                            parts["sum"].append((r[5] - r[9], r[11]))
            if starts:
                tot["span"].append(max(e for _, e in starts) - min(s for s, _ in starts))
        n2 = 2  # both consumers recorded: sums are over warpgroups
        print(f"{spec}: {ms * 1e3:.1f} us a call; {tot['pieces']} pieces over {P} programs; per program (mean of the two "
              f"consumers, cycles): q wait {tot['q'] / n2 / P:.0f}, unmasked loop {tot['A'] / n2 / P:.0f} for "
              f"{tot['nA'] / n2 / P:.1f} positions ({tot['A'] / max(tot['nA'], 1):.0f} a tile), other loop "
              f"{tot['Bt'] / n2 / P:.0f} for {tot['nB'] / n2 / P:.1f} ({tot['Bt'] / max(tot['nB'], 1):.0f} a tile), last PV "
              f"{tot['pv'] / n2 / P:.0f}, epilogue {tot['ep'] / n2 / P:.0f}; recorded span median "
              f"{statistics.median(tot['span']):.0f} max {max(tot['span']):.0f} cycles", flush=True)
        print("  epilogues (cycles, mean over consumers' pieces): " + ", ".join(
            f"{name} {len(v)} x {statistics.mean(v):.0f}" for name, v in zip(("whole", "cut", "cut+sum", "last by check"), kinds.values(), strict=True)
            if v) + "; cut pieces: partial store " + f"{statistics.mean(parts['store'] or [0]):.0f}, fence + barrier + "
              f"counter {statistics.mean(parts['fence+atomic'] or [0]):.0f}, sum of partials "
              f"{statistics.mean([x for x, _ in parts['sum']] or [0]):.0f} for "
              f"{statistics.mean([c for _, c in parts['sum']] or [0]):.1f} partials", flush=True)


if __name__ == "__main__":
    main()
