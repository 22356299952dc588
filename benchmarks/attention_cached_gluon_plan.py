"""GPU check of the Gluon cached kernel's in-kernel plan against the planner kernel's.

    python benchmarks/attention_cached_gluon_plan.py [CASES] [SEED] [CONFIG]

For random batches (3 x 129 or 13 x 100 new tokens, d = 64; caches of 0 and of lengths not a
multiple of the page size, 0 to n targets or none, DP on and off, grids of 1 to 132 programs,
MIN_CHUNK and DP_SPARE varied), runs the Gluon kernel with
``_cached_gluon.PLAN_CHECK`` set, so each call also runs the planner kernel into tables of its
own, and compares the two plans field by field (every program's piece count and rows), and the
output against the float32 reference (CONFIG: a dict literal added to each case's config, e.g.
"{'GL_STAGE': 0}"). Prints one line per failing case and a summary.
"""

from __future__ import annotations

import ast
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attention_gpu import K, _rel  # noqa: E402
from attention_tune import _workload  # noqa: E402


def main() -> None:
    import torch
    from tracekit.kernels import _cached, _cached_gluon

    cases = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    extra = ast.literal_eval(sys.argv[3]) if len(sys.argv) > 3 else {}
    bad_plan = bad_out = 0
    for ci in range(cases):
        # (two batch shapes, d = 64: few compiled variants; the plan depends on neither d nor the data)
        B, n = rng.choice([(3, 129), (13, 100)])
        H = rng.choice([1, 2, 4])
        C = [rng.choice([0, 1, 31, 32, 45, 517, rng.randint(0, 1200)]) for _ in range(B)]
        nt = rng.choice([0, 0, 1, n // 2, n])
        cfg = {"GLUON": True, "PROGRAMS": rng.choice([1, 3, 7, 13, 132]), "DP": rng.random() < 0.6,
               "MIN_CHUNK": rng.choice([1, 8, 24]), "DP_SPARE": rng.choice([0, 1, 2]), **extra}
        w = _workload(B, C, n, nt, H, 64, torch.bfloat16, 1000 + ci)
        tg = w["nt"] if nt or ci % 2 else None
        c = w["cache"]
        msl = max(C) + n
        _cached_gluon.PLAN_CHECK = []
        o = torch.full_like(w["q"], float("nan"))
        _cached.hstu_cached_fwd(w["q"], w["k"], w["v"], w["off"], c, max_seq_len=msl, alpha=64 ** -0.5,
                                num_targets=tg, contextual_seq_len=0, max_attn_len=0, config=cfg, out=o)
        torch.cuda.synchronize()
        chk, _cached_gluon.PLAN_CHECK = _cached_gluon.PLAN_CHECK, None
        if len(chk) != 1:
            print(f"case{ci}: the Gluon kernel with the in-kernel plan did not run ({len(chk)} plans)", cfg)
            bad_plan += 1
            continue
        plan, plan_n, tplan, tplan_n = (x.cpu() for x in chk[0])
        P = plan_n.numel()
        ok = torch.equal(plan_n, tplan_n)
        if ok:
            rows = plan.view(P, -1, 16)[:, :, :13]
            trows = tplan.view(P, -1, 16)[:, :, :13]
            for p in range(P):
                k = int(plan_n[p])
                if not torch.equal(rows[p, :k], trows[p, :k]):
                    ok = False
                    print(f"case{ci} program {p}: kernel {rows[p, :k].tolist()[:3]} planner {trows[p, :k].tolist()[:3]}")
                    break
        else:
            print(f"case{ci}: piece counts kernel {plan_n.tolist()[:8]} planner {tplan_n.tolist()[:8]}")
        bad_plan += not ok
        c32 = K.PagedKVCache(c.k_cache.float(), c.v_cache.float(), c.page_table, c.cache_lens)
        ref = K.hstu_attention_cached_reference(w["q"].float(), w["k"].float(), w["v"].float(), w["off"], c32,
                                                max_seq_len=msl, alpha=64 ** -0.5, num_targets=tg)
        e = _rel(o, ref)
        good = e == e and e < 2e-2
        bad_out += not good
        if not ok or not good:
            print(f"FAIL case{ci} B={B} H={H} n={n} nt={nt} C={C} {cfg}: plan {'ok' if ok else 'DIFFERS'} "
                  f"rel_err={e:.2e} pieces {int(plan_n.sum())}", flush=True)
    print(f"plan check: {cases} cases, plans differing {bad_plan}, outputs failing {bad_out}", flush=True)


if __name__ == "__main__":
    main()
