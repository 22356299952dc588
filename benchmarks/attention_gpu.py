"""HSTU attention on the GPU: correctness at realistic sizes, then the benchmark.

    python benchmarks/attention_gpu.py OUTDIR [--no-checks] [--no-bench] [--tune]
                                              [--configs a;b;c] [--rep-ms 300]

1. checks (bf16 and fp16; H=4; d 128 and 256; T up to 8192): dense, cached and block-sparse
   Triton kernels vs their references computed in float32 on the GPU from the same
   (rounded) inputs; outputs poisoned with NaN first; relative Frobenius error printed;
2. optional tile sweep of the dense kernel at the target shape (--tune);
3. the benchmark configurations (tracekit.kernels.bench), JSON and CSV into OUTDIR,
   and a short table printed last.

Works from a plain checkout (no install needed): the ``kernels`` folder is loaded as
``tracekit.kernels`` if that package is not importable.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_package(name: str, folder: str | Path):
    """``folder`` (a ``kernels/`` folder: this checkout's, or a copy of main's to time beside
    it) imported as package ``name``."""
    spec = importlib.util.spec_from_file_location(name, Path(folder) / "__init__.py",
                                                  submodule_search_locations=[str(folder)])
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _load_kernels():
    try:
        import tracekit.kernels as K

        return K
    except ImportError:
        pass
    pkg = sys.modules.get("tracekit") or types.ModuleType("tracekit")
    pkg.__path__ = [str(ROOT / "tracekit")]
    sys.modules["tracekit"] = pkg
    return load_package("tracekit.kernels", ROOT / "kernels")


K = _load_kernels()


def _rel(out, ref):
    import torch

    if not torch.isfinite(out).all():
        return float("nan")
    o, r = out.double(), ref.double()
    return float((o - r).norm() / r.norm())


def _offsets(lengths, dev):
    import torch

    off = torch.zeros(len(lengths) + 1, dtype=torch.int64)
    off[1:] = torch.tensor(lengths).cumsum(0)
    return off.to(dev)


def checks() -> list[tuple[str, float, float]]:
    import torch

    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(int(time.time()))
    rows = []
    tol = {torch.bfloat16: 2e-2, torch.float16: 4e-3}

    def rnd(*shape, dtype):
        return torch.randn(*shape, generator=g, device=dev).to(dtype)

    for dtype in (torch.bfloat16, torch.float16):
        for d in (128, 256):
            H = 4
            # dense: jagged, with empty / one-token / all-candidate sequences, T up to 8192
            lengths = [8192, 0, 1, 3001, 4113, 700]
            nts = [256, 0, 1, 3001, 0, 64]
            off = _offsets(lengths, dev)
            L = sum(lengths)
            q, k, v = (rnd(L, H, d, dtype=dtype) for _ in range(3))
            nt = torch.tensor(nts, device=dev)
            out = torch.full((L, H, d), float("nan"), dtype=dtype, device=dev)
            kw = dict(max_seq_len=8192, alpha=1.0 / d**0.5, num_targets=nt)
            K.hstu_attention(q, k, v, off, out=out, **kw)
            ref = K.hstu_attention_reference(q.float(), k.float(), v.float(), off, **kw)
            rows.append((f"dense {str(dtype)[6:]} d={d} T<=8192", _rel(out, ref), tol[dtype]))
            del ref
            # contextual + window (general mask path)
            lengths2 = [2048, 999]
            off2 = _offsets(lengths2, dev)
            q2, k2, v2 = (rnd(sum(lengths2), H, d, dtype=dtype) for _ in range(3))
            kw2 = dict(max_seq_len=2048, alpha=1.0 / d**0.5, num_targets=torch.tensor([128, 7], device=dev),
                       contextual_seq_len=6, max_attn_len=300)
            o2 = K.hstu_attention(q2, k2, v2, off2, **kw2)
            r2 = K.hstu_attention_reference(q2.float(), k2.float(), v2.float(), off2, **kw2)
            rows.append((f"dense ctx+window {str(dtype)[6:]} d={d}", _rel(o2, r2), tol[dtype]))
            # cached: 256 new candidates against caches up to 7936 tokens (shuffled pages)
            hist = [7936, 0, 1000, 4095]
            new = [256, 37, 1, 256]
            cg = torch.Generator().manual_seed(int(time.time()))
            ho, no = _offsets(hist, dev), _offsets(new, dev)
            kh, vh = rnd(sum(hist), H, d, dtype=dtype), rnd(sum(hist), H, d, dtype=dtype)
            qn, kn, vn = (rnd(sum(new), H, d, dtype=dtype) for _ in range(3))
            cache = K.build_paged_kv_cache(kh, vh, ho, max_len=8192, generator=cg)
            ntc = torch.tensor([256, 5, 1, 0], device=dev)
            kwc = dict(max_seq_len=8192, alpha=1.0 / d**0.5, num_targets=ntc)
            oc = torch.full((sum(new), H, d), float("nan"), dtype=dtype, device=dev)
            K.hstu_attention_cached(qn, kn, vn, no, cache, out=oc, **kwc)
            c32 = K.PagedKVCache(cache.k_cache.float(), cache.v_cache.float(), cache.page_table, cache.cache_lens)
            rc = K.hstu_attention_cached_reference(qn.float(), kn.float(), vn.float(), no, c32, **kwc)
            rows.append((f"cached {str(dtype)[6:]} d={d} C<=7936", _rel(oc, rc), tol[dtype]))
            del c32, cache
            # block-sparse at T=8192 (block 64 x 16 = T/8) and a jagged batch
            for lens_b, nts_b, bs, cnt in (([8192], [256], 64, 16), ([4096, 1, 2500, 0], [256, 1, 0, 0], 32, 8)):
                offb = _offsets(lens_b, dev)
                Lb = sum(lens_b)
                qb, kb, vb = (rnd(Lb, H, d, dtype=dtype) for _ in range(3))
                gc = torch.rand(Lb, H, generator=g, device=dev).to(dtype)
                gs = torch.rand(Lb, H, generator=g, device=dev).to(dtype)
                kwb = dict(max_seq_len=max(lens_b), alpha=1.0 / d**0.5, num_targets=torch.tensor(nts_b, device=dev),
                           block_size=bs, block_counts=cnt)
                ob = torch.full((Lb, H, d), float("nan"), dtype=dtype, device=dev)
                _, sel = K.hstu_attention_block_sparse(qb, kb, vb, offb, gate_cmp=gc, gate_slc=gs, out=ob,
                                                       return_block_indices=True, **kwb)
                rb = K.hstu_attention_block_sparse_reference(qb.float(), kb.float(), vb.float(), offb,
                                                             gate_cmp=gc.float(), gate_slc=gs.float(),
                                                             block_indices=sel, **kwb)
                _, sel_ref = K.hstu_attention_block_sparse_reference(qb.float(), kb.float(), vb.float(), offb,
                                                                     return_block_indices=True, **kwb)
                agree = float((sel == sel_ref).float().mean())
                rows.append((f"bsa {str(dtype)[6:]} d={d} T={max(lens_b)} bs={bs}x{cnt} (sel agree {agree:.3f})",
                             _rel(ob, rb), tol[dtype]))
            torch.cuda.empty_cache()
    return rows


def tune(d: int = 128, rep_ms: float = 200):
    import torch
    import triton
    from tracekit.kernels._dense import hstu_fwd

    dev = "cuda"
    B, T, H = 8, 4096, 4
    g = torch.Generator(device=dev).manual_seed(0)
    L = B * T
    q, k, v = (torch.randn(L, H, d, generator=g, device=dev).bfloat16() for _ in range(3))
    off = torch.arange(B + 1, device=dev) * T
    nt = torch.full((B,), 256, device=dev)
    pairs = B * ((T - 256) * (T - 255) // 2 + 256 * (T - 256) + 256)
    flops = 2 * H * (d + d) * pairs
    out = []
    cands = [
        dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=2),
        dict(BLOCK_M=64, BLOCK_N=64, num_warps=8, num_stages=2),
        dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=2),
        dict(BLOCK_M=64, BLOCK_N=32, num_warps=4, num_stages=3),
        dict(BLOCK_M=128, BLOCK_N=32, num_warps=8, num_stages=3),
    ] if d > 128 else [
        dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=2),
        dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3),
        dict(BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=2),
        dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=3),
        dict(BLOCK_M=128, BLOCK_N=64, num_warps=4, num_stages=3),
        dict(BLOCK_M=64, BLOCK_N=128, num_warps=4, num_stages=2),
        dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=2, FAST_SILU=False),
    ]
    for cfg in cands:
        try:
            fn = lambda cfg=cfg: hstu_fwd(q, k, v, off, max_seq_len=T, alpha=d**-0.5, num_targets=nt,  # noqa: E731
                                          contextual_seq_len=0, max_attn_len=0, config=dict(cfg))
            ms = triton.testing.do_bench(fn, warmup=50, rep=rep_ms, return_mode="median")
            out.append((str(cfg), ms, flops / ms / 1e9))
        except Exception as exc:  # noqa: BLE001
            out.append((str(cfg), float("nan"), f"{type(exc).__name__}: {str(exc)[:80]}"))
    return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("outdir")
    p.add_argument("--no-checks", action="store_true")
    p.add_argument("--no-bench", action="store_true")
    p.add_argument("--tune", action="store_true")
    p.add_argument("--profile-bsa", action="store_true", help="torch.profiler table of one BSA call (T=4096)")
    p.add_argument("--configs", default=None, help="';'-separated configuration names")
    p.add_argument("--variants", default="triton_dense,triton_block_sparse,triton_cached,reference,sdpa")
    p.add_argument("--warmup-ms", type=float, default=50)
    p.add_argument("--rep-ms", type=float, default=300)
    a = p.parse_args()
    import torch
    from tracekit.kernels.bench import bench_attention, format_table

    out = Path(a.outdir)
    out.mkdir(parents=True, exist_ok=True)
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,driver_version",
                          "--format=csv"], capture_output=True, text=True).stdout.strip()
    import triton

    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  triton {triton.__version__}")
    print(f"nvidia-smi (as found): {smi}", flush=True)
    lines = []
    failed = False
    if not a.no_checks:
        t0 = time.time()
        try:
            results = checks()
        except Exception:  # noqa: BLE001 - report and go on to the benchmark
            import traceback

            traceback.print_exc()
            results = [("checks raised (see traceback)", float("nan"), 0.0)]
        for name, err, tol in results:
            ok = err == err and err < tol
            failed |= not ok
            lines.append(f"{'PASS' if ok else 'FAIL'}  {name:60s} rel_err={err:.2e} (tol {tol:.0e})")
            print(lines[-1], flush=True)
        print(f"checks took {time.time() - t0:.0f} s", flush=True)
    if a.tune:
        from tracekit.kernels._dense import default_config

        print(f"default dense config (d=128): {default_config(128, 128, 'cuda')}")
        for d in (128, 256):
            for cfg, ms, tf in tune(d):
                tfs = tf if isinstance(tf, str) else f"{tf:.1f} TFLOP/s"
                print(f"tune d={d} {cfg}: {ms:.4f} ms  {tfs}", flush=True)
    if a.profile_bsa:
        from tracekit.kernels.bench import _make_inputs, parse_config

        _, cfg = parse_config("bsa_T4096")
        inp = _make_inputs(cfg, torch.bfloat16, "cuda")

        def call():
            return K.hstu_attention_block_sparse(inp["q"], inp["k"], inp["v"], inp["seq_offsets"],
                                                 max_seq_len=4096, alpha=inp["alpha"], num_targets=inp["num_targets"],
                                                 block_size=64, block_counts=8, validate=False)

        for _ in range(5):
            call()
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                call()
            torch.cuda.synchronize()
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12), flush=True)
    rows = []
    if not a.no_bench:
        configs = a.configs.split(";") if a.configs else None
        rows = bench_attention(configs, variants=tuple(a.variants.split(",")), baseline="reference", dtype="bf16",
                               warmup_ms=a.warmup_ms, rep_ms=a.rep_ms, json_path=out / "attention_bench.json",
                               csv_path=out / "attention_bench.csv",
                               progress=lambda r: print(f"  {r['config']} {r['variant']}: "
                                                        + (r['error'] or f"{r['median_ms']:.4f} ms "
                                                           f"{r['tflops']:.1f} TFLOP/s"), flush=True))
    (out / "checks.txt").write_text("\n".join(lines) + "\n")
    print()
    print("\n".join(lines))
    if rows:
        print(format_table(rows))
    return 1 if failed else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
