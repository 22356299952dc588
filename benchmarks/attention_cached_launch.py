"""Host time per call of several versions of the persistent cached kernel's launch path (GPU).

    python benchmarks/attention_cached_launch.py NAME=DIR[:CONFIG],...

The versions as ``attention_cached_cmp.py`` takes them, on its first draw (C2048a, bf16): per
version and round, the host time of 200 calls issued back to back without a sync (the launch
path: Python, the JIT's dispatch or the cached handles, descriptors, the launch), one call's
host time after a sync (median of 20), and the wall time per call of the 200 once the GPU is
done (the GPU time when the host keeps ahead, the host time when it does not). A call whose
host time comes near its GPU time is host-bound in ``do_bench`` and in back-to-back use.
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch  # noqa: E402
from attention_cached_cmp import DRAWS, N_NEW, N_TARGETS, B, D, H, versions  # noqa: E402
from attention_tune import _workload  # noqa: E402


def main() -> None:
    vs = versions(sys.argv[1])
    tag, seed, clo, chi, msl, _ = DRAWS[0]
    caches = [int(x) for x in torch.randint(clo, chi, (B,), generator=torch.Generator().manual_seed(seed))]
    w = _workload(B, caches, N_NEW, N_TARGETS, H, D, torch.bfloat16, 7)
    kw = dict(max_seq_len=msl, alpha=D**-0.5, contextual_seq_len=0, max_attn_len=0, num_targets=w["nt"])
    for rnd in range(3):
        for name, (m, cfg) in vs.items():

            def call(m=m, cfg=cfg):
                return m.hstu_cached_fwd(w["q"], w["k"], w["v"], w["off"], w["cache"], config=cfg, **kw)
            for _ in range(5):
                call()
            torch.cuda.synchronize()
            one = []
            for _ in range(20):
                torch.cuda.synchronize()
                t = time.perf_counter()
                call()
                one.append(time.perf_counter() - t)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(200):
                call()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            one.sort()
            print(f"round {rnd} {name}: host {1e6 * (t1 - t0) / 200:.1f} us a call issued back to back, one call "
                  f"{1e6 * one[10]:.1f} us (median of 20 after a sync); 200 calls took {1e6 * (t2 - t0) / 200:.1f} us "
                  f"each", flush=True)


if __name__ == "__main__":
    main()
