"""GPU check of the cached kernel's Gluon path (``kernels/_cached_gluon.py``) against the reference.

    python benchmarks/attention_cached_gluon_check.py [CONFIG]

Shuffled pages, caches of 0 and of lengths not a multiple of the page size, new-token runs not a
multiple of the block, with and without targets, bf16 and fp16, d = 256 and 128, the default grid
and small grids (many cut pieces: partial sums), DP on and off; each call twice (the second reuses
the counters the first left), outputs NaN-poisoned, against the float32 reference; every cache
slot that holds no token (past a sequence's length, pages no sequence uses) is NaN too, so a
kernel that reads a stale slot and masks it by a multiply rather than a select fails. Prints one line
per case and which kernel ran (``LAST_KERNEL``'s name, registers, spills). CONFIG: a dict literal
added to every case's config (e.g. "{'GL_TMA': 1}").
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attention_gpu import K, _rel  # noqa: E402
from attention_tune import _workload  # noqa: E402


def _poison_stale(c) -> None:
    """NaN into every cache slot that holds no token."""
    import torch

    page = c.k_cache.shape[1]
    valid = torch.zeros(c.k_cache.shape[:2], dtype=torch.bool, device=c.k_cache.device)
    for b, n in enumerate(c.cache_lens.tolist()):
        for t in range(-(-n // page)):
            valid[int(c.page_table[b, t]), : min(page, n - t * page)] = True
    c.k_cache[~valid] = float("nan")
    c.v_cache[~valid] = float("nan")


def main() -> None:
    import torch
    from tracekit.kernels import _cached

    extra = ast.literal_eval(sys.argv[1]) if len(sys.argv) > 1 else {}
    fails = 0
    cases = [
        dict(C=[0, 45, 300, 1000], n=200, nt=100, H=2, d=256),
        dict(C=[33, 0, 517], n=129, nt=0, H=3, d=128),
        dict(C=[2048, 1999, 0, 2100], n=1040, nt=1024, H=4, d=256),
    ]
    configs = [{"GLUON": True}, {"GLUON": True, "PROGRAMS": 7}, {"GLUON": True, "PROGRAMS": 5, "DP": False},
               {"GLUON": True, "PROGRAMS": 13, "MIN_CHUNK": 1}]
    configs = [{**c, **extra} for c in configs]
    for ci, cs in enumerate(cases):
        for dtype, tol in ((torch.bfloat16, 2e-2), (torch.float16, 4e-3)):
            w = _workload(len(cs["C"]), cs["C"], cs["n"], cs["nt"], cs["H"], cs["d"], dtype, 100 + ci)
            nt = w["nt"] if cs["nt"] else None
            c = w["cache"]
            msl = max(cs["C"]) + cs["n"]
            c32 = K.PagedKVCache(c.k_cache.float(), c.v_cache.float(), c.page_table, c.cache_lens)
            ref = K.hstu_attention_cached_reference(w["q"].float(), w["k"].float(), w["v"].float(), w["off"], c32,
                                                    max_seq_len=msl, alpha=cs["d"] ** -0.5, num_targets=nt)
            _poison_stale(c)
            for cfg in configs:
                for call in range(2):
                    o = torch.full_like(w["q"], float("nan"))
                    _cached.hstu_cached_fwd(w["q"], w["k"], w["v"], w["off"], c, max_seq_len=msl,
                                            alpha=cs["d"] ** -0.5, num_targets=nt, contextual_seq_len=0,
                                            max_attn_len=0, config=cfg, out=o)
                    torch.cuda.synchronize()
                    e = _rel(o, ref)
                    ok = e == e and e < tol
                    fails += not ok
                    lk = _cached.LAST_KERNEL
                    print(f"{'PASS' if ok else 'FAIL'} case{ci} {str(dtype)[6:]} {cfg} call{call}: rel_err={e:.2e} "
                          f"{getattr(lk, 'name', '?')} regs {lk.n_regs} spills {lk.n_spills}", flush=True)
    print("failures:", fails)


if __name__ == "__main__":
    main()
