"""Offline sm_90a compile of the persistent cached kernel: registers, spills and its loops' SASS, no GPU.

    PYTHONPATH=DIR_WITH_TRITON_3_6 python benchmarks/attention_cached_sass.py [KERNELS_DIR] [CONFIG] [--dump FILE]
    PYTHONPATH=DIR_WITH_TRITON_3_6 python benchmarks/attention_cached_sass.py --gluon [KERNELS_DIR] [CONSTEXPRS]

Compiles ``_hstu_cached_sk_kernel`` of KERNELS_DIR (default: this checkout's ``kernels/``, loaded
as its own package, so a copy of main's can be compiled beside it) for the inference workload's
shape (bf16, B=8, 1,040 new tokens, H=4, d=256, pages of 32 tokens), with the default
configuration updated by CONFIG (a Python dict literal, e.g. ``"{'num_stages': 4}"``), the
arguments specialised as the GPU run specialises them (16-byte alignment, divisibility by 16,
``dp_spare == 1``). Prints ptxas's register and spill report and, for every loop of the SASS that
holds wgmma instructions (``HGMMA``), its size, wgmma, barrier and local-load counts: the figures
the docs/performance.md entries compare (the unmasked cached-key loop is 196 instructions on
main). Use the Triton the GPU machine has (3.6.0; ``pip install --target DIR triton==3.6.0``):
its ptxas and cuobjdump do the work, and another Triton version compiles other code. A fake
driver stands in for the GPU, so nothing is launched.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_LDL = re.compile(r"\bLDL\b")


def _fake_driver():
    import torch
    from triton.backends.compiler import GPUTarget
    from triton.backends.driver import DriverBase

    class FakeDriver(DriverBase):
        @classmethod
        def is_active(cls):
            return True

        def get_current_target(self):
            return GPUTarget("cuda", 90, 32)

        def get_active_torch_device(self):
            return torch.device("cpu")

        def get_current_device(self):
            return 0

        def get_current_stream(self, device=None):
            return 0

        def get_benchmarker(self):
            return None

        def map_python_to_cpp_type(self, ty):
            return ty

    return FakeDriver()


def compile_sk(m, over: dict | None = None, B=8, n=1040, H=4, D=256, num_pt=104, PAGE=32, programs=132):
    """The compiled persistent kernel of module ``m`` (CPU tensors stand in for the GPU's)."""
    import torch
    import triton

    cfg = dict(m.default_config(D, D, "cuda"))
    cfg.update(over or {})
    BM, BN = cfg.pop("BLOCK_M"), cfg.pop("BLOCK_N")
    warps, stages = cfg.pop("num_warps", 8), cfg.pop("num_stages", 3)
    L = B * n
    q = torch.empty(L, H, D, dtype=torch.bfloat16)
    kc = torch.empty(num_pt * B, PAGE, H, D, dtype=torch.bfloat16)
    pt = torch.empty(B, num_pt, dtype=torch.int32)
    ws = torch.empty(programs * 2 * BM * D, dtype=torch.float32)
    args = (q, q, q, kc, kc, pt, torch.empty(B, dtype=torch.int32), q, torch.empty(B + 1, dtype=torch.int64),
            torch.empty(B, dtype=torch.int64),
            q.stride(0), q.stride(1), q.stride(0), q.stride(1), q.stride(0), q.stride(1), q.stride(0), q.stride(1),
            kc.stride(0), kc.stride(1), kc.stride(2), kc.stride(0), kc.stride(1), kc.stride(2), pt.stride(0),
            ws, torch.empty(4096, dtype=torch.int32), 0.03, 1.0 / 5120, num_pt, B, 8, 1)
    known = dict(H=H, D_QK=D, D_V=D, PAGE=PAGE, BLOCK_M=BM, BLOCK_N=BN, HAS_TARGETS=True, FAST_SILU=True, MAXP=1,
                 FENCE=True, CHUNK=min(64, D), BPOW=triton.next_power_of_2(B + 1),
                 TPOW=triton.next_power_of_2(triton.cdiv(L, BM) + 1), UNIFORM=True, TWO_LOOPS=True,
                 WS_PERM=True)
    for key in ("GRID_M", "SPLIT", "G_FAST", "FLAT", "PERSIST", "DIAG_TILE", "PROGRAMS", "MIN_CHUNK", "DP_SPARE"):
        cfg.pop(key, None)
    kern = m._hstu_cached_sk_kernel
    consts = {}
    for p in kern.params:
        if p.is_constexpr:
            consts[p.name] = cfg.pop(p.name, known.get(p.name))
    return kern.warmup(*args, grid=(programs,), **consts, num_warps=warps, num_stages=stages, **cfg)


def compile_gluon(m, over: dict | None = None, B=8, n=1040, H=4, D=256, num_pt=104, PAGE=32, programs=132):
    """The compiled Gluon kernel (``_cached_gluon._hstu_cached_gl_kernel``) of package ``m`` for the
    same shape; ``over`` updates its constexprs (SK, SV, QB, PWARPS, CREGS, PREGS, TMA, ...), whose
    defaults here are ``launch_gluon``'s (main before helper gluon6: ``{'CREGS': 232, 'PREGS': 40}``)."""
    import importlib

    import torch

    g = importlib.import_module(m.__name__.rsplit(".", 1)[0] + "._cached_gluon")
    L = B * n
    q = torch.empty(L, H, D, dtype=torch.bfloat16)
    kc = torch.empty(num_pt * B, PAGE, H, D, dtype=torch.bfloat16)
    pt = torch.empty(B, num_pt, dtype=torch.int32)
    i32 = torch.empty(4096, dtype=torch.int32)
    consts = dict(D=D, PAGE=PAGE, BLOCK_M=128, BLOCK_N=32, HAS_TARGETS=True, SK=3, SV=3, PWARPS=4, CREGS=240,
                  PREGS=24, QB=2, H=H, BPOW=16, TPOW=128, DP=True, INPLAN=True, STAGE=True, TMA=2)
    consts.update(over or {})
    kd, qd = kc, q
    if consts["TMA"]:
        from triton.experimental.gluon import language as gl
        from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

        def desc(t, rows, block_rows):
            lay = gl.NVMMASharedLayout.get_default_for([block_rows, D], gl.bfloat16)
            return TensorDescriptor(t, [rows, H * D], [H * D, 1], [block_rows, D], lay)

        kd = desc(kc, kc.shape[0] * PAGE, 32)
        qd = desc(q, L, 128) if consts["TMA"] >= 2 else q
    args = (q, q, q, kc, kc, kd, kd, qd, pt, torch.empty(B, dtype=torch.int32), q,
            torch.empty(B + 1, dtype=torch.int64), torch.empty(B, dtype=torch.int64),
            q.stride(0), q.stride(1), q.stride(0), q.stride(1), q.stride(0), q.stride(1), q.stride(0), q.stride(1),
            kc.stride(0), kc.stride(1), kc.stride(2), kc.stride(0), kc.stride(1), kc.stride(2), pt.stride(0),
            torch.empty(programs * 2 * 128 * D, dtype=torch.float32), i32, i32, i32, 300, 0.03, 1.0 / 5120,
            B, 8, 1)
    return g._hstu_cached_gl_kernel.warmup(*args, grid=(programs,), num_warps=4, **consts)


def pv_waits(lines) -> list:
    """For each wait for all wgmmas (``WARPGROUP.DEPBAR.LE gsb0, 0x0``) that follows a wait with one
    left in flight (``0x1``: FA3's step, QK_{j+1} done, PV_j running): the tanh (``MUFU.TANH``)
    between the two, and after it before the next wgmma; i.e. how much of the SiLU overlaps PV_j."""
    out = []
    one = None
    for i, (_, ins) in enumerate(lines):
        if "WARPGROUP.DEPBAR.LE gsb0, 0x1" in ins:
            one = i
        elif "WARPGROUP.DEPBAR.LE gsb0, 0x0" in ins and one is not None:
            before = sum("MUFU.TANH" in x for _, x in lines[one:i])
            after = 0
            for _, x in lines[i + 1:]:
                if "HGMMA" in x or "DEPBAR" in x:
                    break
                after += "MUFU.TANH" in x
            out.append((lines[i][0], before, after))
            one = None
    return out


def analyse(ck, dump: str | None = None) -> None:
    import triton

    tools = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    with tempfile.TemporaryDirectory() as tmp:
        ptx, cubin = Path(tmp) / "k.ptx", Path(tmp) / "k.cubin"
        ptx.write_text(ck.asm["ptx"])
        r = subprocess.run([str(tools / "ptxas"), "-arch=sm_90a", "-v", str(ptx), "-o", str(Path(tmp) / "v.cubin")],
                           capture_output=True, text=True)
        cubin.write_bytes(ck.asm["cubin"])
        sass = subprocess.run([str(tools / "cuobjdump"), "-sass", str(cubin)], capture_output=True, text=True).stdout
    if dump:
        Path(dump).write_text(sass)
    print("ptxas:", " ".join(x.split(":", 1)[-1].strip() for x in r.stderr.splitlines()
                              if "registers" in x or "spill" in x))
    for x in r.stderr.splitlines():
        if "warning" in x.lower() or "C75" in x:
            print("ptxas", x.strip())
    lines = []
    for ln in sass.splitlines():
        mm = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", ln)
        if mm:
            lines.append((int(mm.group(1), 16), mm.group(2)))
    at = {a: i for i, (a, _) in enumerate(lines)}
    print("SASS instructions:", len(lines))
    for i, (a, ins) in enumerate(lines):
        b = re.search(r"BRA\b.*?0x([0-9a-f]+)", ins)
        if b and int(b.group(1), 16) < a and int(b.group(1), 16) in at:
            body = [x for _, x in lines[at[int(b.group(1), 16)]: i + 1]]
            if any("HGMMA" in x for x in body):
                ldl = sum(bool(_LDL.search(x)) for x in body)
                print(f"loop {int(b.group(1), 16):#x}-{a:#x}: {len(body)} instructions, "
                      f"{sum('HGMMA' in x for x in body)} HGMMA, {sum('BAR.SYNC' in x for x in body)} BAR.SYNC, "
                      f"{ldl} LDL")
    waits = pv_waits(lines)
    if waits:
        print("PV waits (address: tanh before / after):",
              " ".join(f"{a:#x}:{b}/{c}" for a, b, c in waits))


def main() -> None:
    argv = sys.argv[1:]
    dump = None
    if "--dump" in argv:
        i = argv.index("--dump")
        dump = argv[i + 1]
        del argv[i: i + 2]
    gluon = "--gluon" in argv
    if gluon:
        argv.remove("--gluon")
    kernels = argv[0] if argv else str(ROOT / "kernels")
    over = ast.literal_eval(argv[1]) if len(argv) > 1 else None
    import triton
    from attention_cached_cmp import _load  # (a kernels/ folder as its own package)

    triton.runtime.driver.set_active(_fake_driver())
    m = _load("_sass_kernels", kernels)
    analyse(compile_gluon(m, over) if gluon else compile_sk(m, over), dump)


if __name__ == "__main__":
    main()
