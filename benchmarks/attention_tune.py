# ruff: noqa: B023  (lambdas are timed at once, inside the loop that defines them)
"""One device call: correctness + timing of kernel variants for the two open HSTU targets.

    python benchmarks/attention_tune.py OUTDIR [--cached] [--bsa] [--curve]

--cached: the inference workload's cached attention (large preset: B=8 users, ~2048 cached
          tokens each (jagged 1900..2200, shuffled pages), 1040 new tokens = 16 history + 1024
          candidates, H=4, d=256, bf16, max_seq_len 5120): the frozen baseline kernel
          (attention_cached_v0.py) and tile variants of the current one, checked (bf16 and fp16
          vs float32 reference, NaN-poisoned outputs) and timed in one process (do_bench
          median, no L2 flush: compute-bound, 70 GFLOP per call);
--curve:  current cached kernel, time vs cache length (n=1040) and vs new tokens (C=2048);
--bsa:    block-sparse (frozen v0 = attention_bsa_v0.py, current, tile variants, block_counts=0)
          vs dense at bsa_T4096 / bsa_T8192 / bsa_T8192_sparse, a profile of one call, and the
          compile report (registers, spills);
--bsa-checks: block-sparse vs float32 reference (bf16, fp16, d 128/256, bs 16..128, jagged).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attention_gpu import K, _offsets, _rel  # noqa: E402  (loads kernels/ as tracekit.kernels)
from attention_host import _host_us  # noqa: E402  (host time per call: the launch path alone)


def _pairs(C, n, nt):
    nh = n - nt
    return n * C + nh * (nh + 1) // 2 + nt * nh + nt


def _workload(B, C_list, n, nt, H, d, dtype, seed, shuffle=True, max_len=None):
    import torch

    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(seed)
    cg = torch.Generator().manual_seed(seed)

    def rnd(*s):
        return torch.randn(*s, generator=g, device=dev).to(dtype)

    ho, no = _offsets(C_list, dev), _offsets([n] * B, dev)
    kh, vh = rnd(sum(C_list), H, d), rnd(sum(C_list), H, d)
    q, k, v = (rnd(B * n, H, d) for _ in range(3))
    cache = K.build_paged_kv_cache(kh, vh, ho, max_len=max_len or max(C_list) + n + 64,
                                   generator=cg if shuffle else None)
    ntt = torch.full((B,), nt, device=dev)
    pairs = sum(_pairs(C, n, nt) for C in C_list)
    return dict(q=q, k=k, v=v, off=no, cache=cache, nt=ntt, pairs=pairs, H=H, d=d)


def _bench(fn, rep=200):
    import triton

    return triton.testing.do_bench(fn, warmup=25, rep=rep, return_mode="median")


def cached(out_rows, variants, B=8, n=1040, nt=1024, H=4, d=256, msl=5120, clo=1900, chi=2200, tag="workload_large",
           warm=False):
    import torch
    from attention_cached_v0 import hstu_cached_fwd as v0
    from tracekit.kernels import _cached
    from tracekit.kernels._cached import hstu_cached_fwd as v1

    g = torch.Generator().manual_seed(int(time.time()))
    C_list = [int(x) for x in torch.randint(clo, chi, (B,), generator=g)]
    fns = {"v0_64x64w8s2": (v0, {})}
    for name, cfg in variants.items():
        fns[name] = (v1, cfg)
    # correctness, bf16 and fp16, fresh inputs, poisoned outputs (warm: compile only)
    for dtype, tol in ((torch.bfloat16, 2e-2), (torch.float16, 4e-3)):
        if warm:
            w = _workload(B, C_list, n, nt, H, d, dtype, 1)
            for f, cfg in fns.values():
                f(w["q"], w["k"], w["v"], w["off"], w["cache"], max_seq_len=msl, alpha=d**-0.5, num_targets=w["nt"],
                  contextual_seq_len=0, max_attn_len=0, config=dict(cfg) or None)
            continue
        w = _workload(B, C_list, n, nt, H, d, dtype, int(time.time()) % 10000)
        c = w["cache"]
        c32 = K.PagedKVCache(c.k_cache.float(), c.v_cache.float(), c.page_table, c.cache_lens)
        kw = dict(max_seq_len=msl, alpha=d**-0.5, num_targets=w["nt"])
        ref = K.hstu_attention_cached_reference(w["q"].float(), w["k"].float(), w["v"].float(), w["off"], c32, **kw)
        for name, (f, cfg) in fns.items():
            o = torch.full_like(w["q"], float("nan"))
            f(w["q"], w["k"], w["v"], w["off"], c, contextual_seq_len=0, max_attn_len=0, config=dict(cfg) or None,
              out=o, **kw)
            e = _rel(o, ref)
            ok = e == e and e < tol
            print(f"{'PASS' if ok else 'FAIL'} cached {str(dtype)[6:]} {name}: rel_err={e:.2e}", flush=True)
            out_rows.append(dict(kind="check", name=name, dtype=str(dtype), err=e, ok=ok))
        del ref, c32
    if warm:
        return
    # timing, bf16, same process
    w = _workload(B, C_list, n, nt, H, d, torch.bfloat16, 7)
    flops = 2 * H * 2 * d * w["pairs"]
    kw = dict(max_seq_len=msl, alpha=d**-0.5, num_targets=w["nt"], contextual_seq_len=0, max_attn_len=0)
    base = None
    for rnd in range(2):
        for name, (f, cfg) in fns.items():
            try:
                ms = _bench(lambda f=f, cfg=cfg: f(w["q"], w["k"], w["v"], w["off"], w["cache"],
                                                    config=dict(cfg) or None, **kw))
            except Exception as exc:  # noqa: BLE001
                print(f"cached {name}: {type(exc).__name__} {str(exc)[:100]}", flush=True)
                continue
            if name.startswith("v0") and base is None:
                base = ms
            tf = flops / ms / 1e9
            lk = _cached.LAST_KERNEL if name != "v0_64x64w8s2" else None
            regs = f"regs {lk.n_regs} spills {lk.n_spills}" if lk is not None else ""
            print(f"time r{rnd} cached_{tag} {name}: {ms * 1e3:.1f} us  {tf:.0f} TFLOP/s  "
                  f"x{base / ms:.2f} vs v0  {regs}", flush=True)
            out_rows.append(dict(kind="time", round=rnd, name=name, us=ms * 1e3, tflops=tf, ratio=base / ms))
    if tag != "workload_large":
        return
    # dense reference point at the same d: full recompute of one user-sequence batch
    from tracekit.kernels._dense import hstu_fwd

    T = 4096
    qd, kd, vd = (torch.randn(8 * T, H, d, device="cuda").bfloat16() for _ in range(3))
    offd = torch.arange(9, device="cuda") * T
    ntd = torch.full((8,), 256, device="cuda")
    ms = _bench(lambda: hstu_fwd(qd, kd, vd, offd, max_seq_len=T, alpha=d**-0.5, num_targets=ntd,
                                 contextual_seq_len=0, max_attn_len=0))
    pairs = 8 * _pairs(0, T, 256)
    print(f"time dense hstu_T4096_d256: {ms * 1e3:.1f} us {2 * H * 2 * d * pairs / ms / 1e9:.0f} TFLOP/s", flush=True)


def curve(out_rows, cfg1):
    import torch
    from attention_cached_v0 import hstu_cached_fwd as v0
    from tracekit.kernels._cached import hstu_cached_fwd as v1

    H, d, B = 4, 256, 8
    pts = [(C, 1040, 1024) for C in (0, 512, 1024, 2048, 4096)] + [(2048, 16 + m, m) for m in (0, 128, 256, 512)]
    for C, n, nt in pts:
        w = _workload(B, [C] * B, n, nt, H, d, torch.bfloat16, 3)
        kw = dict(max_seq_len=5120, alpha=d**-0.5, num_targets=w["nt"], contextual_seq_len=0, max_attn_len=0)
        res = {}
        for name, f in (("v0", v0), ("v1", v1)):
            c = dict(cfg1) if name == "v1" else None
            res[name] = _bench(lambda f=f, c=c: f(w["q"], w["k"], w["v"], w["off"], w["cache"], config=c, **kw),
                               rep=100)
        # kernel-only time through a CUDA graph (the per-call host overhead removed)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            v1(w["q"], w["k"], w["v"], w["off"], w["cache"], config=dict(cfg1), **kw)
        torch.cuda.current_stream().wait_stream(s)
        gr = torch.cuda.CUDAGraph()
        with torch.cuda.graph(gr):
            v1(w["q"], w["k"], w["v"], w["off"], w["cache"], config=dict(cfg1), **kw)
        res["v1_graph"] = _bench(gr.replay, rep=100)
        tf = 2 * H * 2 * d * w["pairs"] / res["v1"] / 1e9
        print(f"curve C={C} n={n} nt={nt}: v0 {res['v0'] * 1e3:.1f} us  v1 {res['v1'] * 1e3:.1f} us "
              f"(graph {res['v1_graph'] * 1e3:.1f})  {tf:.0f} TFLOP/s", flush=True)
        out_rows.append(dict(kind="curve", C=C, n=n, nt=nt, **{k: v * 1e3 for k, v in res.items()}))


def _compile_report(fn):
    """Registers / spills / shared memory of every compiled specialisation of a Triton kernel."""
    rows = []
    try:
        for cache in fn.device_caches.values():
            for ck in cache[0].values():
                md = ck.metadata
                rows.append(f"{fn.__name__}: regs {ck.n_regs} spills {ck.n_spills} shared {md.shared} "
                            f"warps {md.num_warps} stages {md.num_stages}")
    except Exception as exc:  # noqa: BLE001 - report only
        rows.append(f"{fn.__name__}: no compile report ({type(exc).__name__}: {exc})")
    return rows


def _f32(x):
    return None if x is None else x.float()


def bsa_checks(configs=None, dtypes=("bf16", "fp16")):
    """Block-sparse vs its float32 reference on the kernel's own selection, fresh random inputs,
    NaN-poisoned outputs; selection agreement with the reference's own top-k."""
    import torch

    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(int(time.time()))
    tol = {torch.bfloat16: 2e-2, torch.float16: 4e-3}
    ok_all = True
    cases = (([8192], [256], 64, 16, 128), ([4096, 4096], [256, 0], 64, 8, 128),
             ([4096, 1, 2500, 0, 700], [256, 1, 0, 0, 64], 32, 8, 128), ([4096, 3000], [256, 5], 128, 4, 128),
             ([2048, 999], [128, 0], 16, 8, 64), ([4096], [256], 64, 8, 256))
    for dtype in [{"bf16": torch.bfloat16, "fp16": torch.float16}[x] for x in dtypes]:
        for lens_b, nts_b, bs, cnt, d in cases:
            H = 4
            offb = _offsets(lens_b, dev)
            Lb = sum(lens_b)
            qb, kb, vb = (torch.randn(Lb, H, d, generator=g, device=dev).to(dtype) for _ in range(3))
            gated = bs == 32
            gc = torch.rand(Lb, H, generator=g, device=dev).to(dtype) if gated else None
            gs = torch.rand(Lb, H, generator=g, device=dev).to(dtype) if gated else None
            kwb = dict(max_seq_len=max(lens_b), alpha=1.0 / d**0.5, num_targets=torch.tensor(nts_b, device=dev),
                       block_size=bs, block_counts=cnt)
            ob = torch.full((Lb, H, d), float("nan"), dtype=dtype, device=dev)
            _, sel = K.hstu_attention_block_sparse(qb, kb, vb, offb, gate_cmp=gc, gate_slc=gs, out=ob,
                                                   return_block_indices=True, **kwb)
            rb = K.hstu_attention_block_sparse_reference(qb.float(), kb.float(), vb.float(), offb,
                                                         gate_cmp=_f32(gc), gate_slc=_f32(gs), block_indices=sel, **kwb)
            _, sel_ref = K.hstu_attention_block_sparse_reference(qb.float(), kb.float(), vb.float(), offb,
                                                                 return_block_indices=True, **kwb)
            agree = float((sel == sel_ref).float().mean())
            # the given-selection path of the kernel (masked loop) on the reference's selection
            og = torch.full((Lb, H, d), float("nan"), dtype=dtype, device=dev)
            from tracekit.kernels._bsa import hstu_bsa_fwd

            hstu_bsa_fwd(qb, kb, vb, offb, gate_cmp=gc, gate_slc=gs, out=og, block_indices=sel_ref, **kwb)
            rg = K.hstu_attention_block_sparse_reference(qb.float(), kb.float(), vb.float(), offb,
                                                         gate_cmp=_f32(gc), gate_slc=_f32(gs), block_indices=sel_ref,
                                                         **kwb)
            e1, e2 = _rel(ob, rb), _rel(og, rg)
            # the LOCAL_FIRST variant on its own selection
            ol = torch.full((Lb, H, d), float("nan"), dtype=dtype, device=dev)
            _, sl = hstu_bsa_fwd(qb, kb, vb, offb, gate_cmp=gc, gate_slc=gs, out=ol, return_block_indices=True,
                                 config=dict(LOCAL_FIRST=True), **kwb)
            rl = K.hstu_attention_block_sparse_reference(qb.float(), kb.float(), vb.float(), offb,
                                                         gate_cmp=_f32(gc), gate_slc=_f32(gs), block_indices=sl, **kwb)
            e3 = _rel(ol, rl)
            ok = e1 < tol[dtype] and e2 < tol[dtype] and e3 < tol[dtype] and agree > 0.95
            # kernel variants (BSA_VARIANTS names) on their own selections, twice each (a fresh K
            # the second time: nothing of the first call may carry over)
            for cn, cc in (configs or {}).items():
                for rep in range(2):
                    if rep:
                        kb.copy_(torch.randn(kb.shape, generator=g, device=dev).to(dtype))
                    ov = torch.full((Lb, H, d), float("nan"), dtype=dtype, device=dev)
                    _, sv = hstu_bsa_fwd(qb, kb, vb, offb, gate_cmp=gc, gate_slc=gs, out=ov, return_block_indices=True,
                                         config=dict(cc), **kwb)
                    rv = K.hstu_attention_block_sparse_reference(qb.float(), kb.float(), vb.float(), offb,
                                                                 gate_cmp=_f32(gc), gate_slc=_f32(gs), block_indices=sv,
                                                                 **kwb)
                    _, sr = K.hstu_attention_block_sparse_reference(qb.float(), kb.float(), vb.float(), offb,
                                                                    return_block_indices=True, **kwb)
                    ev, av = _rel(ov, rv), float((sv == sr).float().mean())
                    okv = ev < tol[dtype] and av > 0.95
                    ok &= okv
                    print(f"{'PASS' if okv else 'FAIL'} bsa {str(dtype)[6:]} d={d} T={lens_b} bs={bs}x{cnt} {cn} #{rep}: "
                          f"rel_err {ev:.2e} sel agree {av:.4f}", flush=True)
            ok_all &= ok
            print(f"{'PASS' if ok else 'FAIL'} bsa {str(dtype)[6:]} d={d} T={lens_b} bs={bs}x{cnt}: rel_err {e1:.2e} "
                  f"(given sel {e2:.2e}, local-first {e3:.2e}) sel agree {agree:.4f}", flush=True)
            del rb, rg, rl
    return ok_all


_MAIN_BSA = None  # --bsa-main: main's hstu_bsa_fwd (a copy of its kernels/), variant "main_code"


def _fwd(name):
    """The block-sparse entry point a variant runs: main's copy for "main_code", else ours."""
    from tracekit.kernels import _bsa

    return _MAIN_BSA if name == "main_code" else _bsa.hstu_bsa_fwd


def bsa(out_rows, variants, rounds=2, warm=False, cnt0=(), configs=("bsa_T4096", "bsa_T8192", "bsa_T8192_sparse"),
        with_v0=True):
    import torch
    from attention_bsa_v0 import hstu_bsa_fwd as v0
    from tracekit.kernels import _bsa
    from tracekit.kernels.bench import _make_inputs, parse_config

    for cname in configs:
        _, cfg = parse_config(cname)
        inp = _make_inputs(cfg, torch.bfloat16, "cuda")
        kw = dict(max_seq_len=cfg["N"], alpha=inp["alpha"], num_targets=inp["num_targets"])
        q, k, v, off = inp["q"], inp["k"], inp["v"], inp["seq_offsets"]
        bkw = dict(block_size=cfg["bs"], block_counts=cfg["counts"], **kw)
        if warm:
            for name, vc in variants.items():
                try:
                    _fwd(name)(q, k, v, off, config=dict(vc), **bkw)
                except Exception as exc:  # noqa: BLE001 - report and go on
                    print(f"bsa warm {cname} {vc}: {type(exc).__name__} {str(exc)[:1500]}", flush=True)
            continue
        res = {"dense": _bench(lambda: K.hstu_attention(q, k, v, off, validate=False, **kw))}
        if with_v0:
            res["v0"] = _bench(lambda: v0(q, k, v, off, **bkw))
        o_ref, s_ref = _bsa.hstu_bsa_fwd(q, k, v, off, return_block_indices=True, **bkw)
        for name, vc in variants.items():
            # each variant against the library default on this input: same selection (same
            # compressed pass), outputs within bf16 rounding
            try:
                o_v, s_v = _fwd(name)(q, k, v, off, config=dict(vc), return_block_indices=True, **bkw)
                print(f"bsa {cname} {name}: vs default rel_err {_rel(o_v, o_ref):.2e} "
                      f"sel agree {float((s_v == s_ref).float().mean()):.4f}", flush=True)
            except Exception as exc:  # noqa: BLE001 - report and go on
                print(f"bsa {cname} {name}: check {type(exc).__name__} {str(exc)[:300]}", flush=True)
        for rnd in range(rounds):
            for name, vc in variants.items():
                try:
                    t = _bench(lambda: _fwd(name)(q, k, v, off, config=dict(vc), **bkw))
                except Exception as exc:  # noqa: BLE001 - report and go on with the other variants
                    print(f"bsa {cname} {name}: {type(exc).__name__} {str(exc)[:300]}", flush=True)
                    t = float("nan")
                res[name] = t if rnd == 0 else min(res[name], t)
                if rnd == 0 and t == t:
                    lk = (sys.modules["_bsa_main_kernels._bsa"] if name == "main_code" else _bsa).LAST_KERNEL
                    print(f"bsa {cname} {name}: regs {lk.n_regs} spills {lk.n_spills} shared {lk.metadata.shared}",
                          flush=True)
                else:
                    print(f"bsa {cname} {name} round {rnd}: {t * 1e3:.1f} us", flush=True)
        # host time per call (150 calls queued behind a GPU sleep: the launch path alone) and
        # GPU time per call (a CUDA graph of one call replayed: no host in the way)
        for name, vc in variants.items():
            try:
                fn = lambda: _fwd(name)(q, k, v, off, config=dict(vc), **bkw)  # noqa: E731
                res[f"host_{name}"] = min(_host_us(fn) for _ in range(3)) / 1e3
                g = torch.cuda.CUDAGraph()
                st = torch.cuda.Stream()
                st.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(st):
                    fn()
                torch.cuda.current_stream().wait_stream(st)
                with torch.cuda.graph(g):
                    fn()
                res[f"graph_{name}"] = min(_bench(g.replay) for _ in range(2))
                del g
            except Exception as exc:  # noqa: BLE001 - report and go on
                print(f"bsa {cname} {name}: host/graph {type(exc).__name__} {str(exc)[:300]}", flush=True)
        # the pooling kernel alone
        kbar = torch.empty(cfg["B"], cfg["N"] // cfg["bs"], cfg["H"], cfg["d_qk"], dtype=q.dtype, device=q.device)
        vbar = torch.empty_like(kbar)
        res["pool"] = _bench(lambda: _bsa._pool(k, v, kbar, vbar, off, cfg["bs"], inp["num_targets"], hist=True))
        # stage costs: no selected blocks (pool + compressed + local block), pooling alone
        res["cnt0"] = _bench(lambda: _bsa.hstu_bsa_fwd(q, k, v, off, **dict(bkw, block_counts=0)))
        for name in cnt0:  # the same for named variants
            res[f"cnt0_{name}"] = _bench(lambda: _bsa.hstu_bsa_fwd(q, k, v, off, config=dict(variants[name]),
                                                                   **dict(bkw, block_counts=0)))
        res["dense2"] = _bench(lambda: K.hstu_attention(q, k, v, off, validate=False, **kw))
        line = "  ".join(f"{n} {t * 1e3:.1f}" for n, t in res.items())
        td = (res["dense"] + res["dense2"]) / 2
        print(f"bsa {cname} (us): {line}", flush=True)
        print(f"bsa {cname}: speedup vs dense: "
              + "  ".join(f"{n} {td / res[n]:.2f}x" for n in variants), flush=True)
        out_rows.append(dict(kind="bsa", name=cname, **{n: t * 1e3 for n, t in res.items()}))
        # kernel times of one call: the default and the cnt0 variants
        for name in ("new", *cnt0) if cname != "bsa_T8192_sparse" else ():
            vc = dict(variants.get(name, {}))
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                for _ in range(10):
                    _bsa.hstu_bsa_fwd(q, k, v, off, config=dict(vc), **bkw)
                torch.cuda.synchronize()
            print(f"profile {cname} {name}:", flush=True)
            print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=4), flush=True)
    if not warm:
        for fn in (_bsa._bsa_fused_kernel, _bsa._bsa_pool_kernel):
            print("\n".join(_compile_report(fn)), flush=True)


BSA_VARIANTS = {
    "new": {},
    "fused1": dict(QB_FAST=False, FOLD=False, CMP_STAGES=3, LOCAL_FIRST=False),  # the first fused version
    "prev": dict(LOCAL_FIRST=False, CMP_STAGES=1),  # commit c562c15 default
    "qbfast": dict(FOLD=False, CMP_STAGES=3),
    "fold": dict(QB_FAST=False),
    "w4s2": dict(num_warps=4, num_stages=2),
    "cs2": dict(CMP_STAGES=2),
    "local1": dict(LOCAL_FIRST=True),
    "local1_cs2": dict(LOCAL_FIRST=True, CMP_STAGES=2),
    "local1_s2": dict(LOCAL_FIRST=True, num_stages=2),
    # issue 16: the selection as one rank compare (RANK_SEL, now the default up to 64 blocks)
    # against the arg-max rounds; register caps for a third CTA per SM; one compressed iteration
    "rounds": dict(RANK_SEL=False),
    "mr168": dict(maxnreg=168),
    "mr168_s2": dict(maxnreg=168, num_stages=2),
    "bc128": dict(BLOCK_C=128),
    # less shared memory (compressed loop and selected loop less deep) for a third CTA per SM
    "cs1_s2": dict(CMP_STAGES=1, num_stages=2),
    "cs1_s2_mr168": dict(CMP_STAGES=1, num_stages=2, maxnreg=168),
    "cs1_s1_mr168": dict(CMP_STAGES=1, num_stages=1, maxnreg=168),
    "cs1_s2_bc32_mr168": dict(CMP_STAGES=1, num_stages=2, BLOCK_C=32, maxnreg=168),
    # twice the warps per SM: 8-warp CTAs capped at 128 registers, two per SM
    "w8_mr128": dict(num_warps=8, maxnreg=128),
    "w8_mr128_s2": dict(num_warps=8, maxnreg=128, num_stages=2),
    "w8_mr168": dict(num_warps=8, maxnreg=168),
    # issue 16, helper sparse: the importances kept in registers when the compressed pass is
    # one tile (ONE_CMP), the rank selection in [NB, 32] pieces of the scratch row (RANK_CHUNK),
    # the selected branch's 1/N once at the end (UNIFORM): all default now; the previous default
    # at T=4096 (64 blocks) and at T=8192 (128 blocks)
    "nouniform": dict(UNIFORM=False),
    "prev_t4096": dict(ONE_CMP=False, RANK_CHUNK=0, UNIFORM=False),
    "prev_t8192": dict(ONE_CMP=False, RANK_SEL=False, UNIFORM=False),
}
# the variants above run without the launch and pool options below (no PDL, pooled tiles
# loaded in the compressed pass, every block pooled, 4-warp pool programs)
_BSA_MAIN = dict(PDL=False, PRE=False, POOL_HIST=False, POOL_WARPS=4)
for _name, _cfg in BSA_VARIANTS.items():
    for _k, _v in _BSA_MAIN.items():
        if _name != "new":  # new: the library's default
            _cfg.setdefault(_k, _v)
BSA_VARIANTS.update({
    # the fused kernel as a programmatic dependent launch of the pool kernel (PDL), the
    # pooled tiles loaded with the local block (PRE), the pool kernel writing only the
    # history's blocks (POOL_HIST), the pool's warps: each alone on top of "main" (without
    # them), then together
    "main": dict(_BSA_MAIN),
    "pdl": dict(_BSA_MAIN, PDL=True),
    "pre": dict(_BSA_MAIN, PRE=True),
    "pdl_pre": dict(_BSA_MAIN, PDL=True, PRE=True),
    "hist": dict(_BSA_MAIN, POOL_HIST=True),
    "pw2": dict(_BSA_MAIN, POOL_WARPS=2),
    "pw8": dict(_BSA_MAIN, POOL_WARPS=8),
    "all": dict(PDL=True, PRE=True, POOL_HIST=True, POOL_WARPS=4),
    # all of them with 1-2 pool warps (all_pw2 = the library's default), the selected loop 2
    # stages deep (PRE's 168 registers would allow three CTAs per SM if shared memory did),
    # one compressed stage
    "all_pw2": dict(PDL=True, PRE=True, POOL_HIST=True, POOL_WARPS=2),
    "all_pw1": dict(PDL=True, PRE=True, POOL_HIST=True, POOL_WARPS=1),
    "all_s2": dict(PDL=True, PRE=True, POOL_HIST=True, POOL_WARPS=4, num_stages=2),
    "all_s2_pw2": dict(PDL=True, PRE=True, POOL_HIST=True, POOL_WARPS=2, num_stages=2),
    "all_pw2_cs1": dict(PDL=True, PRE=True, POOL_HIST=True, POOL_WARPS=2, CMP_STAGES=1),
    # k and v pooled by separate 1-warp programs (POOL_SPLIT); PRE off
    "all_pw1_split": dict(PDL=True, PRE=True, POOL_HIST=True, POOL_WARPS=1, POOL_SPLIT=True),
    "pdl_hist_pw1": dict(PDL=True, PRE=False, POOL_HIST=True, POOL_WARPS=1),
    "pdl_hist_pw1_split": dict(PDL=True, PRE=False, POOL_HIST=True, POOL_WARPS=1, POOL_SPLIT=True),
    # the local block as the first iterations of the selected loop (LOOP_LOCAL), in iterations
    # of SUB keys: the compressed pass needs only q and the pooled tiles (48 KB), the loop q and
    # its buffers (SUB=32: 3 x 16 KB, or 2 with SEL_STAGES=2), so 3-4 CTAs fit per SM where
    # registers allow (maxnreg); T8192: its pooled tiles not loaded early (PRE) and the
    # compressed loop not pipelined (CMP_STAGES=1) to fit 3 CTAs
    "ll64": dict(LOOP_LOCAL=True),
    "ll32": dict(LOOP_LOCAL=True, SUB=32),
    "ll32_s2": dict(LOOP_LOCAL=True, SUB=32, SEL_STAGES=2),
    "ll32_s2_r128": dict(LOOP_LOCAL=True, SUB=32, SEL_STAGES=2, maxnreg=128),
    "ll32_r168_cs1": dict(LOOP_LOCAL=True, SUB=32, maxnreg=168, CMP_STAGES=1),
    "ll32_r168_np_cs1": dict(LOOP_LOCAL=True, SUB=32, maxnreg=168, PRE=False, CMP_STAGES=1),
    "ll32_s2_r168_np_cs1": dict(LOOP_LOCAL=True, SUB=32, SEL_STAGES=2, maxnreg=168, PRE=False, CMP_STAGES=1),
    # LOOP_LOCAL's defaults (the library's own where it applies: block_size 64, d <= 128) forced
    # on every shape, and without the clamped rows (CLAMP); prev5: the default before
    # LOOP_LOCAL (main's)
    "prev5": dict(LOOP_LOCAL=False),
    "ll32_s2_r128_clamp": dict(LOOP_LOCAL=True, SUB=32, SEL_STAGES=2, maxnreg=128, CLAMP=True),
    "ll64_clamp": dict(LOOP_LOCAL=True, CLAMP=True),
})


VARIANTS = {
    "load_128x64w8s2": dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=2, PAGES=0),
    "load_128x32w8s3": dict(BLOCK_M=128, BLOCK_N=32, num_warps=8, num_stages=3, PAGES=0),
    "regs_128x32w8s3": dict(BLOCK_M=128, BLOCK_N=32, num_warps=8, num_stages=3, PAGES=1),
    "regs_128x32w8s2": dict(BLOCK_M=128, BLOCK_N=32, num_warps=8, num_stages=2, PAGES=1),
    "regs_128x64w8s2": dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=2, PAGES=1),
    "copy_128x32w8s3": dict(BLOCK_M=128, BLOCK_N=32, num_warps=8, num_stages=3, PAGES=2),
    "copy_128x32w8s2": dict(BLOCK_M=128, BLOCK_N=32, num_warps=8, num_stages=2, PAGES=2),
    "copy_128x64w8s2": dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=2, PAGES=2),
    "copy_128x32w8s3_diag": dict(BLOCK_M=128, BLOCK_N=32, num_warps=8, num_stages=3, PAGES=2, DIAG_TILE=True),
    "regs_128x32w8s3_diag": dict(BLOCK_M=128, BLOCK_N=32, num_warps=8, num_stages=3, PAGES=1, DIAG_TILE=True),
}
VARIANTS128 = {
    "load_64x64w4s3": dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=3, PAGES=0),
    "regs_64x64w4s3_diag": dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=3, PAGES=1, DIAG_TILE=True),
    "regs_128x64w8s3_diag": dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3, PAGES=1, DIAG_TILE=True),
    "regs_128x32w8s3_diag": dict(BLOCK_M=128, BLOCK_N=32, num_warps=8, num_stages=3, PAGES=1, DIAG_TILE=True),
    "copy_128x64w8s3_diag": dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3, PAGES=2, DIAG_TILE=True),
}
VARIANTS["regs_64x32w4s2_diag"] = dict(BLOCK_M=64, BLOCK_N=32, num_warps=4, num_stages=2, PAGES=1, DIAG_TILE=True)
VARIANTS["regs_64x32w4s3_diag"] = dict(BLOCK_M=64, BLOCK_N=32, num_warps=4, num_stages=3, PAGES=1, DIAG_TILE=True)
VARIANTS["default"] = {}
# key splits (partial sums over disjoint runs of cached keys, added by the last program):
# 288 equal programs (8 users x 4 heads x 9 query blocks) on 132 SMs at one CTA per SM take
# 3 waves for 2.2 waves of work; SPLIT=s makes 288*s shorter programs
_REGS = dict(BLOCK_M=128, BLOCK_N=32, num_warps=8, num_stages=3, PAGES=1, DIAG_TILE=True)
for _s in (2, 3, 4):
    VARIANTS[f"split{_s}"] = dict(_REGS, SPLIT=_s)
    VARIANTS[f"split{_s}_load"] = dict(_REGS, PAGES=0, SPLIT=_s)
VARIANTS["split2_128x64w8s2"] = dict(_REGS, BLOCK_N=64, num_stages=2, SPLIT=2)
VARIANTS["split4_64x64w4s2"] = dict(_REGS, BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=2, SPLIT=4)
VARIANTS["split2_64x32w4s3"] = dict(_REGS, BLOCK_M=64, num_warps=4, SPLIT=2)
# one program per existing query block (FLAT: found from the offsets on the device; GRID_M=0:
# per possible block, idle ones exit), balanced key runs, sequences' blocks side by side
VARIANTS["noloop"] = dict(_REGS, GRID_M=0)
for _s in (1, 2, 3, 4):
    VARIANTS[f"flat{_s}"] = dict(_REGS, FLAT=True, SPLIT=_s)
    VARIANTS[f"flat{_s}_tma"] = dict(_REGS, FLAT=True, SPLIT=_s, PAGES=3)
    VARIANTS[f"flat{_s}_load"] = dict(_REGS, FLAT=True, SPLIT=_s, PAGES=0)
VARIANTS["flat3_s2"] = dict(_REGS, FLAT=True, SPLIT=3, num_stages=2)
VARIANTS["flat2_copy"] = dict(_REGS, FLAT=True, SPLIT=2, PAGES=2)
VARIANTS["flat2_s4"] = dict(_REGS, FLAT=True, SPLIT=2, num_stages=4)
VARIANTS["flat2_bn64s2"] = dict(_REGS, FLAT=True, SPLIT=2, BLOCK_N=64, num_stages=2)
VARIANTS["flat2_nodiag"] = dict(_REGS, FLAT=True, SPLIT=2, DIAG_TILE=False)
VARIANTS128.update({
    "flat1_64x64w4s3": dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=3, PAGES=1, FLAT=True),
    "flat2_64x64w4s3": dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=3, PAGES=1, FLAT=True, SPLIT=2),
    "flat1_128x64w8s3_diag": dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3, PAGES=1, DIAG_TILE=True,
                                  FLAT=True),
    "flat2_128x64w8s3_diag": dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3, PAGES=1, DIAG_TILE=True,
                                  FLAT=True, SPLIT=2),
    "flat2_128x32w8s3_diag": dict(BLOCK_M=128, BLOCK_N=32, num_warps=8, num_stages=3, PAGES=1, DIAG_TILE=True,
                                  FLAT=True, SPLIT=2),
})
VARIANTS["flat3_bn64s2"] = dict(_REGS, FLAT=True, SPLIT=3, BLOCK_N=64, num_stages=2)
# persistent kernel (the default since issue 16's follow-up): the batch's key-tile iterations
# cut into #SM equal chunks (stream-K); flat2: the previous default (FLAT, 2 key runs)
VARIANTS["sk"] = dict(_REGS, PERSIST=True)
VARIANTS["sk_s2"] = dict(_REGS, PERSIST=True, num_stages=2)
VARIANTS["sk_s4"] = dict(_REGS, PERSIST=True, num_stages=4)
VARIANTS["sk_copy"] = dict(_REGS, PERSIST=True, PAGES=2)
# whole items in waves first, leaving one (two) waves' worth of items to stream-K
VARIANTS["sk_dp1"] = dict(_REGS, PERSIST=True, DP=True, DP_SPARE=1)
VARIANTS["sk_dp2"] = dict(_REGS, PERSIST=True, DP=True, DP_SPARE=2)
VARIANTS["flat2"] = dict(_REGS, FLAT=True, SPLIT=2, PERSIST=False)
VARIANTS["sk_load"] = dict(_REGS, PERSIST=True, PAGES=0)
# issue 16 (helper paged): the piece's loop bounds through redux.sync (warp-uniform, so the
# wgmma descriptors stay in uniform registers: UNIFORM, the default) against without
VARIANTS["sk_nouni"] = dict(_REGS, PERSIST=True, UNIFORM=False)
VARIANTS["sk_load_s4"] = dict(_REGS, PERSIST=True, PAGES=0, num_stages=4)
# the page index per tile through an inline-assembly load the pipeliner does not stage
# (PAGES=5): no gather round trip through shared memory, the K/V loads two stages ahead
VARIANTS["sk_p5"] = dict(_REGS, PERSIST=True, PAGES=5)
VARIANTS["sk_p5_nouni"] = dict(_REGS, PERSIST=True, PAGES=5, UNIFORM=False)
VARIANTS["sk_p5_s4"] = dict(_REGS, PERSIST=True, PAGES=5, num_stages=4)
VARIANTS["sk_p5_dp1"] = dict(_REGS, PERSIST=True, PAGES=5, DP=True, DP_SPARE=1)
VARIANTS["sk_dp1_nouni"] = dict(_REGS, PERSIST=True, DP=True, DP_SPARE=1, UNIFORM=False)
VARIANTS["flat2_p5"] = dict(_REGS, FLAT=True, SPLIT=2, PERSIST=False, PAGES=5)
# the piece's partial cached tile, history and candidate tiles in one loop (TWO_LOOPS, the
# default) against a loop each; main's default before this work (gathered pages, no DP)
VARIANTS["sk_p5_dp1_four"] = dict(_REGS, PERSIST=True, PAGES=5, DP=True, DP_SPARE=1, TWO_LOOPS=False)
VARIANTS["sk_main"] = dict(_REGS, PERSIST=True, PAGES=1, DP=False, UNIFORM=False, TWO_LOOPS=False)

# variants named for the non-persistent grid keep it (the default config is persistent now)
for _d in (VARIANTS, VARIANTS128):
    for _cfg in _d.values():
        if _cfg:
            _cfg.setdefault("PERSIST", False)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("outdir")
    p.add_argument("--cached", action="store_true")
    p.add_argument("--curve", action="store_true")
    p.add_argument("--bsa", action="store_true")
    p.add_argument("--bsa-checks", action="store_true")
    p.add_argument("--bsa-variants", default=None, help="comma-separated subset of BSA_VARIANTS")
    p.add_argument("--bsa-check-variants", default="", help="--bsa-checks: also these BSA_VARIANTS")
    p.add_argument("--bsa-warm", action="store_true", help="--bsa: compile the variants only")
    p.add_argument("--bsa-check-dtypes", default="bf16,fp16", help="--bsa-checks: these dtypes")
    p.add_argument("--bsa-rounds", type=int, default=2, help="--bsa: timing rounds (min per variant)")
    p.add_argument("--bsa-configs", default="bsa_T4096,bsa_T8192,bsa_T8192_sparse")
    p.add_argument("--bsa-main", default=None, help="--bsa: a copy of main's kernels/, timed as variant main_code")
    p.add_argument("--bsa-no-v0", action="store_true", help="--bsa: leave out the frozen first path")
    p.add_argument("--bsa-cnt0", default="", help="--bsa: also these variants with block_counts=0 (fixed part)")
    p.add_argument("--cached128", action="store_true")
    p.add_argument("--cached4096", action="store_true", help="--cached's variants at ~4096 cached tokens")
    p.add_argument("--curve-config", default="copy_128x32w8s3_diag")
    p.add_argument("--variants", default=None, help="comma-separated subset of VARIANTS")
    p.add_argument("--warm", action="store_true", help="--cached: compile the variants only (no checks, no timing)")
    a = p.parse_args()
    import subprocess

    import torch
    import triton

    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__)
    print(subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.max.sm,clocks.mem", "--format=csv"],
                         capture_output=True, text=True).stdout.strip(), flush=True)
    rows = []
    t0 = time.time()
    if a.cached:
        names = a.variants.split(",") if a.variants else list(VARIANTS)
        cached(rows, {k: VARIANTS[k] for k in names}, warm=a.warm)
    if a.cached4096:
        # the e2e capture's kind: caches of ~4096 tokens (K/V of the batch well beyond L2)
        names = a.variants.split(",") if a.variants else list(VARIANTS)
        cached(rows, {k: VARIANTS[k] for k in names}, msl=6144, clo=3900, chi=4200, tag="C4096_n1040")
    if a.cached128:
        cached(rows, VARIANTS128, n=256, nt=256, d=128, msl=4608, clo=3900, chi=4200, tag="C4096_n256_d128")
        print(f"[cached {time.time() - t0:.0f} s]", flush=True)
    if a.curve:
        curve(rows, VARIANTS[a.curve_config])
        print(f"[curve {time.time() - t0:.0f} s]", flush=True)
    if a.bsa_checks:
        ok = bsa_checks({k: BSA_VARIANTS[k] for k in a.bsa_check_variants.split(",") if k},
                        dtypes=a.bsa_check_dtypes.split(","))
        print(f"[bsa checks {'PASS' if ok else 'FAIL'} {time.time() - t0:.0f} s]", flush=True)
    if a.bsa:
        names = a.bsa_variants.split(",") if a.bsa_variants else list(BSA_VARIANTS)
        if a.bsa_main:
            import importlib

            from attention_gpu import load_package

            global _MAIN_BSA
            load_package("_bsa_main_kernels", a.bsa_main)
            _MAIN_BSA = importlib.import_module("_bsa_main_kernels._bsa").hstu_bsa_fwd
            BSA_VARIANTS["main_code"] = {}
            names = ["main_code", *names]
        bsa(rows, {k: BSA_VARIANTS[k] for k in names}, rounds=a.bsa_rounds, warm=a.bsa_warm,
            cnt0=[n for n in a.bsa_cnt0.split(",") if n], configs=a.bsa_configs.split(","), with_v0=not a.bsa_no_v0)
        print(f"[bsa {time.time() - t0:.0f} s]", flush=True)
    out = Path(a.outdir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "tune.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
