"""Tile configurations of the HSTU kernels per shape, tuned once and kept on disk.

A configuration (``BLOCK_M``, ``BLOCK_N``, ``num_warps``, ``num_stages`` and kernel-specific
switches) is chosen per key ``(kernel, GPU name, dtype, d_qk, d_v, max_seq_len bucket)``, the
bucket being ``max_seq_len`` rounded up to a power of two (256 … 16384). Lookup order:

1. the tuning file (``$TRACEKIT_TILES``, default ``~/.cache/tracekit/hstu_tiles.json``),
   written by :func:`tune` (``python -m tracekit.kernels.tiles tune ...``);
2. the table below, measured on an H200 (docs/performance.md), used for every sm_90 GPU;
3. the kernel's own default for its head dimension.

Nothing is tuned inside a call: a capture that wants tiles of its own tunes them before it
starts timing (``tune`` is a separate step), so the timed requests only look a dict up.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tracekit.errors import InputError

TILES_ENV = "TRACEKIT_TILES"
_BUCKETS = (256, 512, 1024, 2048, 4096, 8192, 16384)

# (kernel, dtype, d_qk, d_v, bucket) -> configuration, H200 (sm_90) sweeps; a missing
# bucket falls back to the kernel's default_config. Filled from `python -m
# tracekit.kernels.tiles tune` runs (docs/performance.md, "Short sequences"); only entries
# that beat the default in every sweep are kept.
#
# d=128, 512 <= max_seq_len <= 8192 (issue 16 sweeps, docs/performance.md): 128x32 tiles of 8
# warps capped at 128 registers, so two CTAs share an SM (one hides the other's q load, pipeline
# fill and epilogue), the masked blocks inside the one loop (ONE_LOOP). 1.07-1.27x the
# 128x64/8/3 default (bf16 T=512 ... 8192), 4 stages beating 3 by 1-2 % at T >= 4096 in bf16;
# fp16 measured with 3 stages only.
BUILTIN: dict[tuple, dict] = {
    ("dense", dt, 128, 128, bkt): {"BLOCK_M": 128, "BLOCK_N": 32, "num_warps": 8, "num_stages": st,
                                   "maxnreg": 128, "ONE_LOOP": True}
    for dt, st in (("bfloat16", 4), ("float16", 3))
    for bkt in (512, 1024, 2048, 4096, 8192)
}

_loaded: dict[str, dict] = {}
_memo: dict[tuple, dict | None] = {}


def bucket(max_seq_len: int) -> int:
    """``max_seq_len`` rounded up to a power of two within the tuned range."""
    for b in _BUCKETS:
        if max_seq_len <= b:
            return b
    return _BUCKETS[-1]


def tiles_path() -> Path:
    """The tuning file: $TRACEKIT_TILES (``~`` expanded, as a shell would), else the cache's."""
    env = os.environ.get(TILES_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "tracekit" / "hstu_tiles.json"


def _key_str(kernel, device_name, dtype, d_qk, d_v, bkt) -> str:
    return f"{kernel}|{device_name}|{dtype}|{d_qk}|{d_v}|{bkt}"


class TilesFileError(InputError, ValueError):
    """The tuning file is there and cannot be used: unreadable, not JSON, or not tile settings
    (an InputError: the CLI says it in one line, exit 2)."""


def read_file(path: Path | None = None) -> dict:
    """The tuning file's content (``{}`` where there is no file), checked: a file that is there
    and cannot be read, is not JSON or is not ``{"tiles": {key: {setting: value}}}`` raises
    TilesFileError naming it, rather than leaving its tuned tiles out without a word (or, in
    ``save``, replacing them)."""
    path = Path(path) if path else tiles_path()
    fix = ("; fix or delete it (python -m tracekit.kernels.tiles tune writes a new one), or set "
           f"{TILES_ENV} to another file")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as err:
        raise TilesFileError(f"{path}: the tiles file cannot be read ({err.strerror or err}){fix}") from None
    except UnicodeDecodeError:
        raise TilesFileError(f"{path}: the tiles file is not UTF-8 text{fix}") from None
    try:
        data = json.loads(text)
    except ValueError as err:
        raise TilesFileError(f"{path}: the tiles file is not JSON ({err}){fix}") from None
    tiles = data.get("tiles", {}) if isinstance(data, dict) else None
    bad = (None if isinstance(tiles, dict) and all(isinstance(v, dict) for v in tiles.values()) else
           "it is not a JSON object" if not isinstance(data, dict) else
           '"tiles" is not an object' if not isinstance(tiles, dict) else
           f"tile {next(k for k, v in tiles.items() if not isinstance(v, dict))!r} is not an object of settings")
    if bad:
        raise TilesFileError(f'{path}: not a tiles file ({bad}; it holds {{"tiles": {{key: {{setting: value}}}}}}){fix}')
    return data


def _file_entries() -> dict:
    path = str(tiles_path())
    if path not in _loaded:
        _loaded[path] = read_file(Path(path)).get("tiles", {})
    return _loaded[path]


def _dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


_DEVICE_NAMES: dict = {}


def _device(device) -> tuple[str, int]:
    """(name, major compute capability) of a CUDA device, cached per index."""
    import torch

    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _DEVICE_NAMES:
        _DEVICE_NAMES[idx] = (torch.cuda.get_device_name(idx), torch.cuda.get_device_capability(idx)[0])
    return _DEVICE_NAMES[idx]


def lookup(kernel: str, device, dtype, d_qk: int, d_v: int, max_seq_len: int) -> dict | None:
    """The tuned configuration for this call's shape, or None (use the kernel's default).
    CPU devices (the interpreter) have none."""
    if device.type != "cuda":
        return None
    # the tuning file's path follows from these two variables (tiles_path); reading them is
    # cheaper than building the path on every call
    key = (kernel, device.index, dtype, d_qk, d_v, bucket(max_seq_len), os.environ.get(TILES_ENV),
           os.environ.get("HOME"))
    if key not in _memo:
        name, major = _device(device)
        bkt = bucket(max_seq_len)
        cfg = _file_entries().get(_key_str(kernel, name, _dtype_name(dtype), d_qk, d_v, bkt))
        if cfg is None and major == 9:
            cfg = BUILTIN.get((kernel, _dtype_name(dtype), d_qk, d_v, bkt))
        _memo[key] = dict(cfg) if cfg else None
    return _memo[key]


def save(kernel: str, device_name: str, dtype, d_qk: int, d_v: int, max_seq_len: int, cfg: dict,
         path: Path | None = None) -> Path:
    """Record ``cfg`` for the key in the tuning file (read, update, atomic replace)."""
    path = Path(path) if path else tiles_path()
    data = read_file(path)  # (a file that is not one is refused, not replaced: its tuned tiles kept)
    path.parent.mkdir(parents=True, exist_ok=True)
    data.setdefault("tiles", {})[_key_str(kernel, device_name, _dtype_name(dtype), d_qk, d_v,
                                          bucket(max_seq_len))] = cfg
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    tmp.replace(path)
    _loaded.pop(str(path), None)
    _memo.clear()
    return path


DENSE_CANDIDATES = [
    dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=w, num_stages=st)
    for bm, bn, w in ((128, 64, 8), (128, 64, 4), (128, 32, 8), (128, 128, 8), (64, 64, 4), (64, 32, 4),
                      (64, 128, 4), (64, 64, 8))
    for st in (2, 3, 4)
] + [
    # two CTAs of 8 warps per SM (registers capped), the masked blocks in the one loop
    dict(BLOCK_M=128, BLOCK_N=bn, num_warps=8, num_stages=st, maxnreg=128, ONE_LOOP=True)
    for bn, st in ((32, 2), (32, 3), (32, 4), (64, 2))
]


def tune(max_seq_len: int, *, d_qk: int = 128, d_v: int | None = None, dtype: str = "bf16", heads: int = 4,
         targets: int = 256, tokens: int = 32768, candidates=None, rep_ms: int = 100, save_result: bool = True,
         progress=None) -> list[dict]:
    """Time the dense kernel's candidate tiles on full-length sequences of ``max_seq_len``
    tokens (``tokens`` in all, ``targets`` candidates each) on the current GPU; record the
    fastest in the tuning file. Returns one row per candidate (config, ms, TFLOP/s)."""
    import torch
    import triton

    from ._dense import hstu_fwd

    read_file()  # (the file it records into, checked before any time is spent timing)
    d_v = d_v or d_qk
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    B = max(1, tokens // max_seq_len)
    T = max_seq_len
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k = (torch.randn(B * T, heads, d_qk, generator=g, device="cuda").to(dt) for _ in range(2))
    v = torch.randn(B * T, heads, d_v, generator=g, device="cuda").to(dt)
    off = torch.arange(B + 1, device="cuda") * T
    nt = torch.full((B,), min(targets, T), device="cuda")
    hl = T - min(targets, T)
    pairs = B * (hl * (hl + 1) // 2 + (T - hl) * hl + (T - hl))
    flops = 2 * heads * (d_qk + d_v) * pairs
    rows = []
    for cfg in candidates or DENSE_CANDIDATES:
        try:
            fn = lambda cfg=cfg: hstu_fwd(q, k, v, off, max_seq_len=T, alpha=d_qk**-0.5, num_targets=nt,  # noqa: E731
                                          contextual_seq_len=0, max_attn_len=0, config=dict(cfg))
            ms = triton.testing.do_bench(fn, warmup=25, rep=rep_ms, return_mode="median")
            row = dict(config=cfg, ms=ms, tflops=flops / ms / 1e9)
        except TilesFileError:  # (the file changed under the tuning: not a config's failure)
            raise
        except Exception as exc:  # noqa: BLE001 - a config that does not fit (shared memory) is skipped
            row = dict(config=cfg, ms=None, tflops=None, error=f"{type(exc).__name__}: {str(exc)[:100]}")
        rows.append(row)
        if progress:
            progress(row)
    ok = [r for r in rows if r["ms"] is not None]
    if ok and save_result:
        best = min(ok, key=lambda r: r["ms"])
        save("dense", torch.cuda.get_device_name(), dt, d_qk, d_v, T, dict(best["config"]))
    return rows


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m tracekit.kernels.tiles",
                                description="Tune the dense HSTU kernel's tiles per max_seq_len bucket (GPU).")
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("tune", help="time candidate tiles and record the fastest per bucket")
    t.add_argument("--max-seq-len", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    t.add_argument("--d", type=int, default=128)
    t.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    t.add_argument("--heads", type=int, default=4)
    t.add_argument("--targets", type=int, default=256)
    sub.add_parser("show", help="print the tuning file")
    a = p.parse_args(argv)
    if a.cmd == "show":
        path = tiles_path()
        print(path)
        print(path.read_text() if path.exists() else "(no tuning file)")
        return 0
    try:  # (the file tune records into: refused before any time is spent)
        read_file()
    except TilesFileError as err:
        print(f"{p.prog}: error: {err}", file=sys.stderr)
        return 2
    import torch

    if not torch.cuda.is_available():  # (tune times the kernel on the GPU: nothing to time here)
        print(f"{p.prog}: error: tune times the kernel's tiles on a CUDA GPU, and torch sees none here "
              "(torch.cuda.is_available() is False); run it on the GPU machine, once per GPU", file=sys.stderr)
        return 2
    for n in a.max_seq_len:
        rows = tune(n, d_qk=a.d, dtype=a.dtype, heads=a.heads, targets=a.targets,
                    progress=lambda r, n=n: print(f"T={n} {r['config']}: "
                                                  + (f"{r['ms']:.4f} ms {r['tflops']:.0f} TFLOP/s" if r["ms"]
                                                     else r["error"]), flush=True))
        best = min((r for r in rows if r["ms"]), key=lambda r: r["ms"], default=None)
        print(f"T={n} best: {best}")
    print(f"recorded in {tiles_path()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
