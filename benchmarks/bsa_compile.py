"""Compile the block-sparse kernels offline for sm_90a, as the GPU launch would: no GPU needed.

    python benchmarks/bsa_compile.py [--configs bsa_T4096,bsa_T8192] [--variant NAME | --config JSON]
                                     [--dump DIR]

``hstu_bsa_fwd`` runs on meta tensors with its launches recorded; each recorded launch is
compiled with ``triton.compile`` for ``GPUTarget("cuda", int(__import__("os").environ.get("BSA_CC", "90")), 32)`` with the runtime's
specialisation of the arguments (ints equal to 1 become constants, ints divisible by 16 and
every pointer carry the 16-divisibility hint). Prints shared memory, registers and spills of
each kernel; ``--dump DIR`` writes its ttgir, ptx and SASS (``cuobjdump`` from Triton's package).
Use the Triton version of the GPU machine (3.6) for figures that hold there.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _record(configs, config, dtype="bf16", gates=False):
    import torch
    from tracekit.kernels import _bsa
    from tracekit.kernels.bench import CONFIGS

    launches = []

    class _Rec:
        def __init__(self, fn):
            self.fn = fn
            self.params = fn.params

        def __getitem__(self, grid):
            def launch(*args, **kw):
                launches.append((cname, self.fn, grid, args, kw))
            return launch

    orig = (_bsa._bsa_fused_kernel, _bsa._bsa_pool_kernel, _bsa._fast, _bsa._capability, _bsa._cfg)
    _bsa._bsa_fused_kernel, _bsa._bsa_pool_kernel = _Rec(orig[0]), _Rec(orig[1])
    _bsa._fast = lambda device: True
    _bsa._capability = lambda device: (9, 0)
    _bsa._cfg = lambda device_type, d, bs: orig[4]("cuda", d, bs)
    try:
        for cname in configs:
            c = CONFIGS[cname]
            B, T, H = c["B"], c["N"], c["H"]
            dev = "meta"
            dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
            q, k, v = (torch.empty(B * T, H, d, dtype=dt, device=dev) for d in (c["d_qk"], c["d_qk"], c["d_v"]))
            g = torch.empty(B * T, H, dtype=dt, device=dev) if gates else None
            off = torch.empty(B + 1, dtype=torch.int32, device=dev)
            nt = torch.empty(B, dtype=torch.int32, device=dev) if c["targets"] else None
            _bsa.hstu_bsa_fwd(q, k, v, off, max_seq_len=T, alpha=1.0 / c["d_qk"] ** 0.5, block_size=c["bs"],
                              block_counts=c["counts"], num_targets=nt, gate_cmp=g, gate_slc=g, config=dict(config))
    finally:
        _bsa._bsa_fused_kernel, _bsa._bsa_pool_kernel, _bsa._fast, _bsa._capability, _bsa._cfg = orig
    return launches


_OPTS = {"num_warps", "num_stages", "maxnreg", "num_ctas", "launch_pdl"}


def _compile(fn, args, kw):
    import torch
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    names = fn.arg_names
    vals = dict(zip(names[:len(args)], args, strict=True))
    opts = {k: v for k, v in kw.items() if k in _OPTS}
    vals.update({k: v for k, v in kw.items() if k not in _OPTS})
    sig, const, attrs = {}, {}, {}
    for i, p in enumerate(fn.params):
        n = p.name
        if n not in vals:
            vals[n] = p.default
        x = vals[n]
        if p.is_constexpr:
            sig[n], const[(i,)] = "constexpr", x
        elif isinstance(x, torch.Tensor):
            sig[n] = "*" + {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32",
                            torch.int32: "i32", torch.int64: "i64"}[x.dtype]
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif isinstance(x, bool):
            sig[n] = "i1"
        elif isinstance(x, int):
            if x == 1:
                sig[n], const[(i,)] = "constexpr", 1
            else:
                sig[n] = "i32" if -2**31 <= x < 2**31 else "i64"
                if x % 16 == 0:
                    attrs[(i,)] = [["tt.divisibility", 16]]
        elif isinstance(x, float):
            sig[n] = "fp32"
        elif x is None:
            sig[n], const[(i,)] = "constexpr", None
        else:
            raise TypeError(f"{n}: {type(x)}")
    if __import__("os").environ.get("BSA_NOHINTS"):
        attrs = {}
    src = ASTSource(fn, sig, const, attrs)
    return triton.compile(src, target=GPUTarget("cuda", int(__import__("os").environ.get("BSA_CC", "90")), 32), options=opts)


def _tool(cubin: bytes, d: Path, stem: str, flag: str) -> str:
    import triton

    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    (d / f"{stem}.cubin").write_bytes(cubin)
    return subprocess.run([str(tool), flag, str(d / f"{stem}.cubin")], capture_output=True, text=True).stdout


def _sass(cubin: bytes, d: Path, stem: str) -> str:
    return _tool(cubin, d, stem, "-sass")


def _usage(cubin: bytes, d: Path, stem: str) -> str:
    """Registers, stack frame and spills from cuobjdump's resource usage."""
    import re

    u = _tool(cubin, d, stem, "-res-usage")
    m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", u)
    return f"regs {m.group(1)} stack {m.group(2)} local {m.group(4)}" if m else u.strip()[-200:]


def main():
    import triton

    p = argparse.ArgumentParser()
    p.add_argument("--configs", default="bsa_T4096,bsa_T8192")
    p.add_argument("--variant", default=None, help="a BSA_VARIANTS name of attention_tune.py")
    p.add_argument("--config", default="{}", help="config dict as JSON")
    p.add_argument("--dump", default=None)
    p.add_argument("--pool", action="store_true", help="the pool kernel too")
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    p.add_argument("--gates", action="store_true", help="with gate_cmp and gate_slc")
    a = p.parse_args()
    cfg = json.loads(a.config)
    if a.variant:
        from attention_tune import BSA_VARIANTS
        cfg = dict(BSA_VARIANTS[a.variant], **cfg)
    print(f"triton {triton.__version__} config {cfg}")
    for cname, fn, _grid, args, kw in _record(a.configs.split(","), cfg, a.dtype, a.gates):
        if fn.__name__ == "_bsa_pool_kernel" and not a.pool:
            continue
        ck = _compile(fn, args, kw)
        md = ck.metadata
        d = Path(a.dump or "/tmp/bsa_compile")
        d.mkdir(parents=True, exist_ok=True)
        stem = f"{cname}_{fn.__name__}"
        print(f"{cname} {fn.__name__}: shared {md.shared} {_usage(ck.asm['cubin'], d, stem)} "
              f"warps {md.num_warps} stages {md.num_stages}", flush=True)
        if a.dump:
            for ext in ("ttgir", "ptx", "ttir", "llir"):
                if ext in ck.asm:
                    (d / f"{stem}.{ext}").write_text(ck.asm[ext])
            (d / f"{stem}.sass").write_text(_sass(ck.asm["cubin"], d, stem))


if __name__ == "__main__":
    main()
