# ruff: noqa: B023  (lambdas are timed at once, inside the loop that defines them)
"""Where the persistent cached kernel's time goes: a cache-size sweep and per-program timelines.

    python benchmarks/attention_cached_timeline.py OUT BASE_DIR [NAME=DIAG_DIR[:CONFIG],...] [--means 2048,4096]
    python benchmarks/attention_cached_timeline.py OUT BASE_DIR [SPECS] --warm NAME
    python benchmarks/attention_cached_timeline.py --analyse OUT

BASE_DIR is a ``kernels/`` folder (e.g. main's); each DIAG_DIR a copy of one whose
``_hstu_cached_sk_kernel`` takes one more argument after ``dp_spare``, ``DBG`` (int64, 256 words
per program), and writes a timeline into it (``%globaltimer`` and ``%clock64`` at the program's
start and end, and per piece: its start, before the q load, the end of the unmasked cached-key
loop, the end of the other loop, the end of the epilogue; the piece's iterations, kind and item),
plus the optional constexprs ``DQ`` (every piece reads the same 128 query rows: L2-resident) and
``DNP`` (cut pieces write no partial and take no counter: outputs wrong, a bound on what the
partial sums cost). ``python benchmarks/attention_cached_timeline.py --make-diag KERNELS_DIR OUT_DIR`` makes
such a copy (source edits, checked to apply exactly; CONFIG is a dict literal as in
attention_cached_cmp.py, e.g. ``{'DNP': True}``).

For mean cache lengths 512 .. 8192 (B=8 users, each drawn within +-150 of the mean, shuffled pages;
1,040 new tokens = 16 history + 1,024 candidates; H=4, d=256, bf16) it times BASE (do_bench
median, no L2 flush), counts the kernel's iterations with its own formulas (the schedule: DP
waves, then equal stream-K chunks), and, with DIAG_DIR, records one timeline per size (after a
warm-up) and times the diagnostic variants. Raw figures go to OUT/timeline.npz and
OUT/sweep.json; ``--analyse OUT`` prints the fit of time against iterations per program, and
from the timelines: each piece's start cost (segment start to the q load), the loops' cost per
tile (a fit over the pieces), the epilogues by kind, per-SM busy time and the idle tail.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

B, N_NEW, N_TARGETS, H, D, PAGE, BM, BN = 8, 1040, 1024, 4, 256, 32, 128, 32
MEANS = (512, 1024, 2048, 3072, 4096, 8192)


def make_diag(src: str, dst: str) -> None:
    """A copy of the kernels/ folder ``src`` at ``dst`` whose persistent cached kernel records a timeline."""
    import shutil

    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
    from attention_cached_diag import diag_source

    f = Path(dst) / "_cached.py"
    f.write_text(diag_source(f.read_text()))


def caches_for(mean: int) -> list[int]:
    rng = np.random.default_rng(1000 + mean)
    return [int(x) for x in rng.integers(mean - 150, mean + 150, size=B)]


def schedule(caches, P=132, dp_spare=1, min_chunk=8, n=N_NEW, nt=N_TARGETS):
    """The persistent kernel's work list as it computes it (_sk_sequences, _sk_block_iters and
    the DP / stream-K split): per program its iterations, pieces, and rest-loop iterations."""
    R = BM // BN
    items = []  # (b, h, t, its, rest)
    for b, C in enumerate(caches):
        nh = n - nt
        nb = -(-n // BM)
        for h in range(H):
            for t in range(nb):
                it = -(-C // BN) + min((t + 1) * R, -(-nh // BN))
                c_lo, c_hi = max(t * BM, nh), min((t + 1) * BM, n)
                if c_hi > c_lo:
                    it += -(-c_hi // BN) - c_lo // BN
                items.append((b, h, t, it, it - C // BN))
    its = np.array([x[3] for x in items])
    rest = np.array([x[4] for x in items])  # iterations outside the unmasked cached-key loop
    starts = np.concatenate([[0], np.cumsum(its)])
    total = int(starts[-1])
    waves = max(len(items) // P - dp_spare, 0)
    s0 = int(starts[waves * P]) if waves else 0
    chunk = max(-(-(total - s0) // P), min_chunk)
    prog_its = np.zeros(P, int)
    prog_pieces = np.zeros(P, int)
    prog_rest = np.zeros(P, int)
    for p in range(P):
        for k in range(waves):
            j = k * P + p
            prog_its[p] += its[j]
            prog_rest[p] += rest[j]
            prog_pieces[p] += 1
        lo, hi = s0 + p * chunk, min(s0 + (p + 1) * chunk, total)
        i = lo
        while i < hi:
            j = int(np.searchsorted(starts, i, side="right") - 1)
            e = min(int(starts[j + 1]), hi)
            r0, r1 = i - starts[j], e - starts[j]
            full = caches[items[j][0]] // BN
            prog_rest[p] += r1 - max(r0, full) if r1 > full else 0
            prog_its[p] += e - i
            prog_pieces[p] += 1
            i = e
    return dict(total=total, items=len(items), waves=waves, s0=s0, chunk=chunk, its_max=int(prog_its.max()),
                its_mean=float(prog_its.mean()), pieces_mean=float(prog_pieces.mean()),
                pieces_max=int(prog_pieces.max()), rest_mean=float(prog_rest.mean()), rest_total=int(rest.sum()))


def workload(caches, seed):
    """The inference workload's bf16 inputs (attention_tune's), page-table rows a multiple of 16 pages."""
    import torch
    from attention_tune import _workload

    max_len = -(-(max(caches) + N_NEW + 64) // 512) * 512
    w = _workload(B, caches, N_NEW, N_TARGETS, H, D, torch.bfloat16, seed, max_len=max_len)
    return dict(w, msl=max(caches) + N_NEW)


def run(out: Path, base_dir: str, specs: str | None, warm: str | None, means) -> None:
    import torch
    import triton
    from attention_cached_cmp import versions
    from attention_gpu import _rel

    mods = versions("base=" + base_dir + ("," + specs if specs else ""))
    P = torch.cuda.get_device_properties(0).multi_processor_count
    dbg = torch.zeros(P * 256, dtype=torch.int64, device="cuda")

    def call(name, w, o=None):
        m, cfg = mods[name]
        c = dict(cfg or {}, DBG=dbg) if name != "base" else None
        return m.hstu_cached_fwd(w["q"], w["k"], w["v"], w["off"], w["cache"], max_seq_len=w["msl"], alpha=D**-0.5,
                                 num_targets=w["nt"], contextual_seq_len=0, max_attn_len=0, config=c, out=o)

    if warm:
        call(warm, workload(caches_for(2048), 1))
        torch.cuda.synchronize()
        return
    print(torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__, "SMs", P,
          flush=True)
    rows, tls = [], {}
    for mean in means:
        caches = caches_for(mean)
        w = workload(caches, mean)
        ref = call("base", w)
        for name in mods:  # each diagnostic copy first computes what BASE does (DQ / DNP: wrong on purpose)
            if name != "base":
                o = torch.full_like(w["q"], float("nan"))
                call(name, w, o)
                print(f"C{mean}: {name} vs base rel {_rel(o, ref):.2e}", flush=True)
        row = dict(mean=mean, caches=caches, pairs=w["pairs"], **schedule(caches, P))
        for name in mods:
            ms = triton.testing.do_bench(lambda: call(name, w), warmup=25, rep=200, return_mode="median")
            row[name] = ms * 1e3
        for name in mods:
            if name != "base":
                for rep in range(3):  # warm, then the recorded launches
                    dbg.zero_()
                    call(name, w)
                    torch.cuda.synchronize()
                    tls[f"C{mean}_{name}_{rep}"] = dbg.cpu().numpy().copy()
        lk = mods["base"][0].LAST_KERNEL
        row["regs"], row["spills"] = lk.n_regs, lk.n_spills
        rows.append(row)
        flops = 2 * H * 2 * D * row["pairs"]
        print(f"C{mean}: iterations {row['total']} (per program max {row['its_max']}, mean {row['its_mean']:.1f}, "
              f"rest {row['rest_mean']:.1f}, pieces {row['pieces_mean']:.2f}) "
              + " ".join(f"{k} {row[k]:.1f}us" for k in mods if k in row)
              + f"  base {flops / row['base'] / 1e6:.0f} TFLOP/s", flush=True)
    (out / "sweep.json").write_text(json.dumps(rows, indent=1))
    if tls:
        np.savez_compressed(out / "timeline.npz", **tls)
    analyse(out)


def _pieces(a, P):
    """Rows (program, smid, piece, t0..t4 ns, c0..c4 cycles, r0, r1, c_full, ct, flags, item)."""
    a = a.reshape(P, 256)
    out = []
    for p in range(P):
        np_ = int(a[p, 3])
        for k in range(min(np_, 15)):
            r = a[p, 16 + 16 * k: 32 + 16 * k]
            info = int(r[6])
            out.append([p, a[p, 1], k, *r[0:5], *r[8:13], info & 0xFFFF, (info >> 16) & 0xFFFF,
                        (info >> 32) & 0xFFFF, (info >> 48) & 0xFFFF, r[5], r[7]])
    return np.array(out, dtype=np.int64)


def analyse(out: Path) -> None:
    rows = json.loads((out / "sweep.json").read_text())
    print("\n== sweep: base time against the busiest program's iterations ==")
    x = np.array([r["its_max"] for r in rows], float)
    y = np.array([r["base"] for r in rows], float)
    for r in rows:
        print(f"C{r['mean']}: {r['base']:.1f} us, total {r['total']}, max/program {r['its_max']}, "
              f"mean {r['its_mean']:.1f}, rest/program {r['rest_mean']:.1f}, pieces {r['pieces_mean']:.2f}, "
              f"us/iteration {r['base'] / r['its_max']:.3f}" + "".join(
                  f", {k} {v:.1f}" for k, v in r.items() if isinstance(v, float) and k not in (
                      "base", "its_mean", "pieces_mean", "rest_mean")))
    if len(rows) < 2:
        x = y = np.zeros(0)
    A = np.vstack([x, np.ones_like(x)]).T
    (slope, icpt), *_ = np.linalg.lstsq(A, y, rcond=None) if len(x) else ((0.0, 0.0),)
    print(f"fit (all): {slope:.3f} us per iteration + {icpt:.1f} us")
    for lo, hi in ((0, 2), (1, 3), (2, 4), (3, 5), (4, 6), (2, 5)):
        if hi <= len(rows):
            s = (y[hi - 1] - y[lo]) / (x[hi - 1] - x[lo])
            print(f"  two-point C{rows[lo]['mean']}-C{rows[hi - 1]['mean']}: {s:.3f} us/it, fixed "
                  f"{y[lo] - s * x[lo]:.1f} us")
    npz = out / "timeline.npz"
    if not npz.exists():
        return
    tl = np.load(npz)
    for key in sorted(tl.files, key=lambda k: (int(k.split("_")[0][1:]), k)):
        if not key.endswith("_2"):  # (the third launch of each)
            continue
        a = tl[key]
        P = a.size // 256
        hdr = a.reshape(P, 256)
        t0 = hdr[:, 0].min()
        start, end = (hdr[:, 0] - t0) / 1e3, (hdr[:, 2] - t0) / 1e3
        pc = _pieces(a, P)
        print(f"\n== {key}: {P} programs, {len(pc)} pieces ==")
        print(f"program start: first 0, last {start.max():.2f} us (median {np.median(start):.2f}); "
              f"end: first {end.min():.1f}, median {np.median(end):.1f}, last {end.max():.1f} us; "
              f"busy mean {np.mean(end - start):.1f} us; idle to the last end: mean {np.mean(end.max() - end):.1f} us")
        cyc = (hdr[:, 10] - hdr[:, 8]).astype(float)
        print(f"cycles/ns per program (clock64 / globaltimer): median {np.median(cyc / ((end - start) * 1e3)):.3f}")
        T = pc[:, 3:8].astype(float)
        Cc = pc[:, 8:13].astype(float)
        r0, r1, cf, fl = pc[:, 13], pc[:, 14], pc[:, 15], pc[:, 17]
        n1 = np.maximum(np.minimum(r1, cf) - r0, 0)
        n2 = r1 - np.maximum(r0, cf)
        n2 = np.maximum(n2, 0)
        ghz = np.median(cyc / ((end - start) * 1e3))
        lookup = (Cc[:, 1] - Cc[:, 0]) / ghz / 1e3
        loop1 = (Cc[:, 2] - Cc[:, 1]) / ghz / 1e3
        loop2 = (Cc[:, 3] - Cc[:, 2]) / ghz / 1e3
        epi = (Cc[:, 4] - Cc[:, 3]) / ghz / 1e3
        print(f"per piece (us, median / mean): item look-up {np.median(lookup):.2f} / {lookup.mean():.2f}")
        m = n1 > 0
        A = np.vstack([n1[m], np.ones(m.sum())]).T
        (s1, c1), *_ = np.linalg.lstsq(A, loop1[m], rcond=None)
        print(f"  q load + unmasked loop: {s1:.3f} us per tile + {c1:.2f} us per piece (fit over {m.sum()} pieces, "
              f"n1 {n1[m].min()}..{n1[m].max()})")
        m2 = n2 > 0
        if m2.sum() > 2:
            A = np.vstack([n2[m2], np.ones(m2.sum())]).T
            (s2, c2), *_ = np.linalg.lstsq(A, loop2[m2], rcond=None)
            print(f"  rest loop: {s2:.3f} us per tile + {c2:.2f} us per piece (n2 {n2[m2].min()}..{n2[m2].max()}); "
                  f"pieces without it: {np.median(loop2[~m2]):.2f} us")
        kinds = {"whole": fl == 1, "cut, not last": (fl & 15) == 2, "cut, last": (fl & 15) == 6,
                 "cut, found last by its check": (fl & 15) == 8}
        for kname, km in kinds.items():
            if km.any():
                print(f"  epilogue {kname}: {km.sum()} pieces, median {np.median(epi[km]):.2f} us, "
                      f"mean {epi[km].mean():.2f}, max {epi[km].max():.2f}")
        gap_first = (T[:, 0] - t0) / 1e3
        first = pc[:, 2] == 0
        print(f"  first piece's loop starts (q + fill) at: median {np.median(gap_first[first] + lookup[first]):.2f} us")
        busy_loops = (loop1 + loop2).sum() / P
        print(f"  per program: loops {busy_loops:.1f} us, look-ups {lookup.sum() / P:.1f}, epilogues "
              f"{epi.sum() / P:.1f}, gaps between pieces "
              f"{(np.sum(end - start) - (lookup + loop1 + loop2 + epi).sum() / 1) / P:.2f} us")
        its = np.bincount(pc[:, 0], weights=r1 - r0, minlength=P)
        order = np.argsort(end)
        print("  programs finishing first / last (end us, iterations, pieces): "
              + ", ".join(f"{end[i]:.0f}/{its[i]:.0f}/{int(hdr[i, 3])}" for i in order[:3]) + " ... "
              + ", ".join(f"{end[i]:.0f}/{its[i]:.0f}/{int(hdr[i, 3])}" for i in order[-3:]))
        cc = np.corrcoef(its, end - start)[0, 1]
        print(f"  corr(iterations, busy) {cc:.2f}; us per iteration (busy / iterations): median "
              f"{np.median((end - start) / its):.3f}")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out", nargs="?")
    p.add_argument("base", nargs="?")
    p.add_argument("specs", nargs="?")
    p.add_argument("--warm")
    p.add_argument("--means", default=",".join(map(str, MEANS)))
    p.add_argument("--analyse")
    p.add_argument("--make-diag", nargs=2, metavar=("KERNELS_DIR", "OUT_DIR"))
    a = p.parse_args()
    if a.make_diag:
        make_diag(*a.make_diag)
        return
    if a.analyse:
        analyse(Path(a.analyse))
        return
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    t = time.time()
    run(out, a.base, a.specs, a.warm, [int(x) for x in a.means.split(",")])
    print(f"wall {time.time() - t:.0f} s", flush=True)


if __name__ == "__main__":
    main()
