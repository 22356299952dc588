"""Shared helpers: input validation, backend choice, the HSTU mask on index tensors.

Mask semantics (one sequence of length T, ``nt`` candidates, ``c`` contextual tokens,
window ``W``), identical to the public Triton kernel of meta-recsys/generative-recommenders:

    max_ids = T - nt - c + 1                  (c > 0)   else   T - nt
    p(t)    = min(max(t - c + 1, 0), max_ids) (c > 0)   else   min(t, max_ids)
    valid(i, j) = (i == j or p(i) > p(j)) and (W == 0 or p(i) - p(j) <= W)
                  or (c > 0 and p(i) == 0 and p(j) < max_ids)

Without contextual tokens and window this is: history tokens (the first ``T - nt``)
attend causally; each candidate (the last ``nt``) attends to all history and to itself.
"""

from __future__ import annotations

import os
from typing import Any

BACKEND_ENV = "TRACEKIT_KERNELS_BACKEND"
"""Environment variable: ``auto`` (default), ``triton`` or ``reference``."""

_BACKENDS = ("auto", "triton", "reference")


class KernelInputError(ValueError):
    """Invalid input to an HSTU attention function (shape, dtype, device, offsets)."""


def interpret_mode() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def choose_backend(backend: str, device: Any) -> str:
    """Resolve ``auto`` to ``triton`` (CUDA tensors, or CPU under TRITON_INTERPRET=1) or
    ``reference`` (CPU without the interpreter). The environment variable
    ``TRACEKIT_KERNELS_BACKEND`` overrides ``auto``."""
    if backend not in _BACKENDS:
        raise KernelInputError(f"backend must be one of {_BACKENDS}, got {backend!r}")
    if backend == "auto":
        env = os.environ.get(BACKEND_ENV, "auto").strip().lower() or "auto"
        if env not in _BACKENDS:
            raise KernelInputError(f"{BACKEND_ENV} must be one of {_BACKENDS}, got {env!r}")
        backend = env
    if backend == "auto":
        backend = "triton" if (device.type == "cuda" or interpret_mode()) else "reference"
    if backend == "triton" and device.type != "cuda" and not interpret_mode():
        raise KernelInputError(
            "backend='triton' on a CPU tensor needs TRITON_INTERPRET=1 set before triton "
            "is imported (or use backend='reference')"
        )
    return backend


def check_qkv(q, k, v, seq_offsets, *, allow_fp64: bool) -> None:
    import torch

    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise KernelInputError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 3:
            raise KernelInputError(f"{name} must be [L, H, d], got shape {tuple(t.shape)}")
    if not (q.shape[0] == k.shape[0] == v.shape[0]):
        raise KernelInputError(
            f"q, k, v must have the same number of tokens L, got {q.shape[0]}, {k.shape[0]}, {v.shape[0]}"
        )
    if not (q.shape[1] == k.shape[1] == v.shape[1]):
        raise KernelInputError(
            f"q, k, v must have the same number of heads H, got {q.shape[1]}, {k.shape[1]}, {v.shape[1]}"
        )
    if q.shape[2] != k.shape[2]:
        raise KernelInputError(f"q and k must share d_qk, got {q.shape[2]} and {k.shape[2]}")
    if not (q.dtype == k.dtype == v.dtype):
        raise KernelInputError(f"q, k, v dtypes differ: {q.dtype}, {k.dtype}, {v.dtype}")
    ok = [torch.float16, torch.bfloat16, torch.float32] + ([torch.float64] if allow_fp64 else [])
    if q.dtype not in ok:
        raise KernelInputError(f"dtype {q.dtype} not supported here; use one of {ok}")
    if not (q.device == k.device == v.device == seq_offsets.device):
        raise KernelInputError(
            f"q, k, v, seq_offsets must be on one device, got {q.device}, {k.device}, "
            f"{v.device}, {seq_offsets.device}"
        )
    check_offsets(seq_offsets, q.shape[0], name="seq_offsets")


def check_offsets(seq_offsets, total: int | None, *, name: str) -> None:
    import torch

    if not isinstance(seq_offsets, torch.Tensor) or seq_offsets.dim() != 1:
        raise KernelInputError(f"{name} must be a 1-D tensor [B+1]")
    if seq_offsets.dtype not in (torch.int32, torch.int64):
        raise KernelInputError(f"{name} must be int32 or int64, got {seq_offsets.dtype}")
    if seq_offsets.numel() < 2:
        raise KernelInputError(f"{name} must hold B+1 >= 2 offsets")


def values_on_host(seq_offsets) -> bool:
    """Where ``validate=True`` checks values: on the host when the offsets already live
    there (CPU tensors: free), else on the device by one small kernel whose assertions
    fire without a host synchronisation (``tracekit.kernels._checks``)."""
    return seq_offsets.device.type != "cuda"


# the fused device checks' failure record (kernels/_checks.py, ``error_record``): a view
# (ctypes.c_int64) of the pinned host word ``problem code << 32 | sequence`` a kernel writes
# before it traps; None until a call has checked values on a GPU
device_check_record = None
_DEVICE_CHECK_MESSAGES = {
    1: "seq_offsets must start at 0, be non-decreasing and end at the number of tokens",
    2: "a sequence is longer than max_seq_len",
    3: "num_targets must lie in [0, the sequence's length]",
}


def device_check_failure() -> str | None:
    """The message of a failed fused device check (read from host memory, no synchronisation),
    or None."""
    rec = device_check_record
    word = 0 if rec is None else rec.value
    if word == 0:
        return None
    code, seq = word >> 32, word & 0xFFFFFFFF
    what = _DEVICE_CHECK_MESSAGES.get(code, f"problem code {code}")
    return (f"tracekit HSTU attention: {what}; wrong at sequence {seq} "
            "(the kernel stopped with a trap, which ended the CUDA context)")


def raise_if_device_check_failed() -> None:
    """After a failed fused check the CUDA context is gone: every later call on GPU tensors
    raises why, instead of leaving the user a bare CUDA error."""
    msg = device_check_failure()
    if msg is not None:
        raise KernelInputError(msg)


def check_scalars(max_seq_len: int, contextual_seq_len: int, max_attn_len: int) -> None:
    if max_seq_len <= 0:
        raise KernelInputError(f"max_seq_len must be positive, got {max_seq_len}")
    if contextual_seq_len < 0 or max_attn_len < 0:
        raise KernelInputError("contextual_seq_len and max_attn_len must be >= 0")


def check_targets_structure(num_targets, n_seq: int, device) -> None:
    """Shape, dtype and device of num_targets (host-side, no data read)."""
    import torch

    if num_targets is None:
        return
    if not isinstance(num_targets, torch.Tensor) or num_targets.dim() != 1:
        raise KernelInputError("num_targets must be a 1-D tensor [B]")
    if num_targets.dtype not in (torch.int32, torch.int64):
        raise KernelInputError(f"num_targets must be int32 or int64, got {num_targets.dtype}")
    if num_targets.device != device:
        raise KernelInputError(f"num_targets is on {num_targets.device}, expected {device}")
    if num_targets.numel() != n_seq:
        raise KernelInputError(f"num_targets has {num_targets.numel()} entries for {n_seq} sequences")


def check_values(
    seq_offsets,
    total: int,
    max_seq_len: int,
    num_targets,
    contextual_seq_len: int,
    max_attn_len: int,
    *,
    name: str = "seq_offsets",
):
    """Value checks on the host (a device-to-host copy when the offsets are on a GPU).
    Returns the lengths as a CPU tensor."""
    import torch

    check_scalars(max_seq_len, contextual_seq_len, max_attn_len)
    off = seq_offsets.detach().to("cpu", torch.int64)
    if int(off[0]) != 0:
        raise KernelInputError(f"{name}[0] must be 0, got {int(off[0])}")
    if int(off[-1]) != total:
        raise KernelInputError(f"{name}[-1] must equal the number of tokens {total}, got {int(off[-1])}")
    lengths = off[1:] - off[:-1]
    if bool((lengths < 0).any()):
        b = int((lengths < 0).nonzero()[0, 0])
        raise KernelInputError(
            f"{name} must be non-decreasing, got {name}[{b}]={int(off[b])} > {name}[{b + 1}]={int(off[b + 1])}"
        )
    if lengths.numel() and int(lengths.max()) > max_seq_len:
        raise KernelInputError(
            f"a sequence has {int(lengths.max())} tokens, more than max_seq_len={max_seq_len}"
        )
    if num_targets is not None:
        check_num_targets(num_targets, lengths, seq_offsets.device)
    return lengths


def check_num_targets(num_targets, lengths, device) -> None:
    import torch

    check_targets_structure(num_targets, lengths.numel(), device)
    nt = num_targets.detach().to("cpu", torch.int64)
    if bool((nt < 0).any()):
        raise KernelInputError("num_targets must be >= 0")
    bad = (nt > lengths).nonzero()
    if bad.numel():
        b = int(bad[0, 0])
        raise KernelInputError(
            f"num_targets[{b}]={int(nt[b])} exceeds the length {int(lengths[b])} of sequence {b}"
        )


def hstu_mask(i, j, T, nt, contextual_seq_len: int, max_attn_len: int):
    """Boolean mask valid(i, j) on broadcastable integer tensors (see module docstring).
    ``T`` and ``nt`` broadcast against ``i``/``j`` (per-sequence values)."""
    import torch

    c = contextual_seq_len
    if c > 0:
        max_ids = T - nt - c + 1
        pi = torch.minimum(torch.clamp(i - c + 1, min=0), max_ids)
        pj = torch.minimum(torch.clamp(j - c + 1, min=0), max_ids)
    else:
        max_ids = T - nt
        pi = torch.minimum(i, max_ids)
        pj = torch.minimum(j, max_ids)
    valid = (i == j) | (pi > pj)
    if max_attn_len > 0:
        valid = valid & (pi - pj <= max_attn_len)
    if c > 0:
        valid = valid | ((pi == 0) & (pj < max_ids))
    return valid & (i < T) & (j < T)
