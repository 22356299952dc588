"""Triton forward kernel: dense (jagged, causal + candidates) HSTU attention.

One program per (sequence, head) x query block; query blocks are launched heaviest first.
Default mask (no contextual tokens, no window): key blocks entirely valid for the whole
query block run without any mask, the few blocks crossing the diagonal or the history
end are masked, and each candidate's attention to itself (the only candidate key a
candidate sees) is added as a per-row dot product instead of a masked tile pass over the
candidate keys. ``ONE_LOOP`` (the tuned H200 tiles use it) runs the masked blocks in the
same pipelined loop as the unmasked ones, behind a per-block branch, so short loops fill and
drain the pipeline once. Contextual tokens or a window switch to the general mask on every tile.
SiLU on the GPU uses one tanh.approx per score: silu(x) = h + h*tanh(h), h = x/2.
"""

from __future__ import annotations

import triton
import triton.language as tl

from . import tiles
from ._checks import check_on_device, error_record, item_error, report
from ._common import interpret_mode
from ._launch import launch

_HANDLES: dict = {}


@triton.jit
def _tanh_approx(x):
    return tl.inline_asm_elementwise(
        "tanh.approx.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1
    )


@triton.jit
def _silu(s, rab, scale, HAS_RAB: tl.constexpr, FAST_SILU: tl.constexpr):
    """SiLU(alpha*s + rab). FAST_SILU: scale = alpha/2, rab pre-halved by the caller."""
    if FAST_SILU:
        hh = s * scale
        if HAS_RAB:
            hh = hh + rab
        return hh + hh * _tanh_approx(hh)
    else:
        x = s * scale
        if HAS_RAB:
            x = x + rab
        return x * tl.sigmoid(x)


@triton.jit
def _rab(offs_m, offs_n, start, T, TS, TSW, POSW, max_seq_len, num_buckets, rab_scale,
         HAS_TS: tl.constexpr, HAS_POS: tl.constexpr):
    rab = tl.zeros([offs_m.shape[0], offs_n.shape[0]], dtype=tl.float32)
    if HAS_POS:
        idx = offs_n[None, :] - offs_m[:, None] + max_seq_len - 1
        idx = tl.minimum(tl.maximum(idx, 0), 2 * max_seq_len - 2)
        rab += tl.load(POSW + idx).to(tl.float32)
    if HAS_TS:
        ts_i = tl.load(TS + start + offs_m, mask=offs_m < T, other=0).to(tl.float32)
        ts_j = tl.load(TS + start + offs_n, mask=offs_n < T, other=0).to(tl.float32)
        dt = tl.maximum(tl.abs(ts_i[:, None] - ts_j[None, :]), 1.0)
        bucket = (tl.log(dt) / 0.301).to(tl.int32)
        bucket = tl.minimum(tl.maximum(bucket, 0), num_buckets)
        rab += tl.load(TSW + bucket).to(tl.float32)
    return rab * rab_scale


@triton.jit
def _general_mask(offs_m, offs_n, T, nt, c, W):
    if c > 0:
        max_ids = T - nt - c + 1
        pi = tl.minimum(tl.maximum(offs_m - c + 1, 0), max_ids)
        pj = tl.minimum(tl.maximum(offs_n - c + 1, 0), max_ids)
    else:
        max_ids = T - nt
        pi = tl.minimum(offs_m, max_ids)
        pj = tl.minimum(offs_n, max_ids)
    d = pi[:, None] - pj[None, :]
    valid = (offs_m[:, None] == offs_n[None, :]) | (d > 0)
    if W > 0:
        valid = valid & (d <= W)
    if c > 0:
        valid = valid | ((pi[:, None] == 0) & (pj[None, :] < max_ids))
    return valid & (offs_n[None, :] < T) & (offs_m[:, None] < T)


@triton.jit(do_not_specialize=["n_tokens"])
def _hstu_fwd_kernel(
    Q, K, V, OUT, SEQ_OFFSETS, NUM_TARGETS, TS, TSW, POSW,
    stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh, stride_ot, stride_oh,
    scale, inv_n, rab_scale, max_seq_len, contextual_seq_len, max_attn_len, num_buckets, n_tokens, RECORD,
    H: tl.constexpr, D_QK: tl.constexpr, D_V: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    HAS_TARGETS: tl.constexpr, GENERAL: tl.constexpr, HAS_TS: tl.constexpr, HAS_POS: tl.constexpr,
    FAST_SILU: tl.constexpr, ONE_LOOP: tl.constexpr = False, CHECK: tl.constexpr = False,
    TRAP: tl.constexpr = False,
):
    pid_bh = tl.program_id(0)
    pid_m = tl.num_programs(1) - 1 - tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    start = tl.load(SEQ_OFFSETS + b).to(tl.int64)
    end = tl.load(SEQ_OFFSETS + b + 1).to(tl.int64)
    T = (end - start).to(tl.int32)
    if CHECK:
        # the value checks of validate=True (kernels/_checks.py), before anything is read: a
        # bad sequence's first program reports it (and traps), its others return
        nt_c = tl.load(NUM_TARGETS + b).to(tl.int64) if HAS_TARGETS else 0
        err = item_error(b, tl.num_programs(0) // H, start, end, n_tokens, max_seq_len, nt_c)
        if err != 0:
            if (h == 0) & (tl.program_id(1) == 0):
                report(err, b, RECORD, TRAP)
        T = tl.where(err != 0, 0, T)
    m0 = pid_m * BLOCK_M
    if m0 >= T:
        return
    if HAS_TARGETS:
        nt = tl.load(NUM_TARGETS + b).to(tl.int32)
    else:
        nt = 0
    hl = T - nt
    HAS_RAB: tl.constexpr = HAS_TS or HAS_POS
    offs_m = m0 + tl.arange(0, BLOCK_M)
    offs_n0 = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D_QK)
    offs_dv = tl.arange(0, D_V)
    Qb = Q + start * stride_qt + h * stride_qh
    Kb = K + start * stride_kt + h * stride_kh
    Vb = V + start * stride_vt + h * stride_vh
    q = tl.load(Qb + offs_m[:, None] * stride_qt + offs_d[None, :], mask=offs_m[:, None] < T, other=0.0)
    acc = tl.zeros([BLOCK_M, D_V], dtype=tl.float32)
    rab = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)

    if GENERAL:
        c = contextual_seq_len
        W = max_attn_len
        lo = m0 * 0
        if W > 0:
            lo = tl.maximum(tl.minimum(m0, hl) - W - c, 0) // BLOCK_N * BLOCK_N
        hi = tl.minimum(m0 + BLOCK_M, T)
        if m0 < c:
            hi = tl.maximum(hi, hl)
        for n0 in range(lo, hi, BLOCK_N):
            offs_n = n0 + offs_n0
            kmask = offs_n < T
            k = tl.load(Kb + offs_n[None, :] * stride_kt + offs_d[:, None], mask=kmask[None, :], other=0.0)
            s = tl.dot(q, k)
            if HAS_RAB:
                rab = _rab(offs_m, offs_n, start, T, TS, TSW, POSW, max_seq_len, num_buckets, rab_scale, HAS_TS, HAS_POS)
            p = _silu(s, rab, scale, HAS_RAB, FAST_SILU)
            valid = _general_mask(offs_m, offs_n, T, nt, c, W)
            p = tl.where(valid, p, 0.0)
            v = tl.load(Vb + offs_n[:, None] * stride_vt + offs_dv[None, :], mask=kmask[:, None], other=0.0)
            acc += tl.dot(p.to(v.dtype), v)
    else:
        kend = tl.minimum(m0 + BLOCK_M, hl)
        full_end = tl.minimum(m0 + 1, hl) // BLOCK_N * BLOCK_N
        if ONE_LOOP:
            # one pipelined loop over every key block: the blocks crossing the diagonal or the
            # history end (n0 >= full_end, the last one or two) take the mask inside it, so the
            # pipeline is filled and drained once per program instead of once per loop. Key
            # rows past the history end are clamped to its last row (read, then masked out of
            # p): no predicated loads in the loop
            for n0 in range(0, kend, BLOCK_N):
                offs_n = n0 + offs_n0
                kmask = offs_n < hl
                offs_nl = tl.minimum(offs_n, hl - 1)
                k = tl.load(Kb + offs_nl[None, :] * stride_kt + offs_d[:, None])
                s = tl.dot(q, k)
                if HAS_RAB:
                    rab = _rab(offs_m, offs_n, start, T, TS, TSW, POSW, max_seq_len, num_buckets, rab_scale, HAS_TS, HAS_POS)
                p = _silu(s, rab, scale, HAS_RAB, FAST_SILU)
                if n0 >= full_end:
                    p = tl.where((offs_n[None, :] <= offs_m[:, None]) & kmask[None, :], p, 0.0)
                v = tl.load(Vb + offs_nl[:, None] * stride_vt + offs_dv[None, :])
                acc += tl.dot(p.to(v.dtype), v)
        else:
            # key blocks valid for every row of the query block: no mask at all
            for n0 in range(0, full_end, BLOCK_N):
                offs_n = n0 + offs_n0
                k = tl.load(Kb + offs_n[None, :] * stride_kt + offs_d[:, None])
                s = tl.dot(q, k)
                if HAS_RAB:
                    rab = _rab(offs_m, offs_n, start, T, TS, TSW, POSW, max_seq_len, num_buckets, rab_scale, HAS_TS, HAS_POS)
                p = _silu(s, rab, scale, HAS_RAB, FAST_SILU)
                v = tl.load(Vb + offs_n[:, None] * stride_vt + offs_dv[None, :])
                acc += tl.dot(p.to(v.dtype), v)
            # blocks crossing the diagonal or the end of the history
            for n0 in range(full_end, kend, BLOCK_N):
                offs_n = n0 + offs_n0
                kmask = offs_n < hl
                k = tl.load(Kb + offs_n[None, :] * stride_kt + offs_d[:, None], mask=kmask[None, :], other=0.0)
                s = tl.dot(q, k)
                if HAS_RAB:
                    rab = _rab(offs_m, offs_n, start, T, TS, TSW, POSW, max_seq_len, num_buckets, rab_scale, HAS_TS, HAS_POS)
                p = _silu(s, rab, scale, HAS_RAB, FAST_SILU)
                valid = (offs_n[None, :] <= offs_m[:, None]) & kmask[None, :]
                p = tl.where(valid, p, 0.0)
                v = tl.load(Vb + offs_n[:, None] * stride_vt + offs_dv[None, :], mask=kmask[:, None], other=0.0)
                acc += tl.dot(p.to(v.dtype), v)
        if HAS_TARGETS:
            if m0 + BLOCK_M > hl:
                # each candidate attends to itself: a row-wise dot product
                cand = (offs_m >= hl) & (offs_m < T)
                kd = tl.load(Kb + offs_m[:, None] * stride_kt + offs_d[None, :], mask=cand[:, None], other=0.0)
                sd = tl.sum(q.to(tl.float32) * kd.to(tl.float32), axis=1)
                rd = tl.zeros([BLOCK_M], dtype=tl.float32)
                if HAS_RAB:
                    rd = tl.sum(
                        _rab(offs_m, offs_m, start, T, TS, TSW, POSW, max_seq_len, num_buckets, rab_scale, HAS_TS, HAS_POS)
                        * (offs_m[:, None] == offs_m[None, :]).to(tl.float32),
                        axis=1,
                    )
                pd = _silu(sd, rd, scale, HAS_RAB, FAST_SILU)
                pd = tl.where(cand, pd, 0.0)
                vd = tl.load(Vb + offs_m[:, None] * stride_vt + offs_dv[None, :], mask=cand[:, None], other=0.0)
                acc += pd[:, None] * vd.to(tl.float32)

    acc = acc * inv_n
    o_ptrs = OUT + start * stride_ot + h * stride_oh + offs_m[:, None] * stride_ot + offs_dv[None, :]
    tl.store(o_ptrs, acc.to(OUT.dtype.element_ty), mask=offs_m[:, None] < T)


def default_config(d_qk: int, d_v: int, device_type: str) -> dict:
    """Tile sizes per head dimension (tuned on an H200, see docs/performance.md)."""
    if device_type != "cuda":
        return {"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 4, "num_stages": 1}
    d = max(d_qk, d_v)
    if d <= 64:
        return {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}
    if d <= 128:
        return {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 3}
    return {"BLOCK_M": 128, "BLOCK_N": 32, "num_warps": 8, "num_stages": 3}


def hstu_fwd(
    q, k, v, seq_offsets, *, max_seq_len, alpha, num_targets, contextual_seq_len, max_attn_len,
    timestamps=None, ts_weights=None, pos_weights=None, config=None, out=None, check=False,
):
    """The dense kernel's launch. ``check``: the kernel checks each sequence's offsets, length
    and num_targets itself before reading it (validate=True on GPU tensors, ``_checks``)."""
    import torch

    L, H, D_QK = q.shape
    D_V = v.shape[2]
    q, k, v = (x if x.stride(-1) == 1 else x.contiguous() for x in (q, k, v))
    if out is None:
        out = torch.empty(L, H, D_V, dtype=q.dtype, device=q.device)
    B = seq_offsets.numel() - 1
    if L == 0 or B == 0:
        if check and B > 0:
            # no attention kernel to check in: the offsets (all 0?) by the separate check kernel
            check_on_device(seq_offsets, 0, max_seq_len, num_targets)
        return out
    cfg = dict(default_config(D_QK, D_V, q.device.type))
    cfg.update(tiles.lookup("dense", q.device, q.dtype, D_QK, D_V, max_seq_len) or {})
    if config:
        cfg.update(config)
    compiled = q.device.type == "cuda" and not interpret_mode()
    fast = compiled and cfg.pop("FAST_SILU", True)
    cfg.pop("FAST_SILU", None)
    BM, BN = cfg.pop("BLOCK_M"), cfg.pop("BLOCK_N")
    general = contextual_seq_len > 0 or max_attn_len > 0
    has_ts = ts_weights is not None
    has_pos = pos_weights is not None
    grid = (B * H, triton.cdiv(max_seq_len, BM))
    # compiled GPU code reports a failed check through trap (the interpreter: device_assert)
    trap = bool(check) and compiled
    dummy = seq_offsets
    args = (
        q, k, v, out, seq_offsets,
        num_targets if num_targets is not None else dummy,
        timestamps if has_ts else dummy,
        ts_weights if has_ts else dummy,
        pos_weights if has_pos else dummy,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        out.stride(0), out.stride(1),
        float(alpha) * (0.5 if fast else 1.0), 1.0 / max_seq_len, 0.5 if fast else 1.0,
        max_seq_len, contextual_seq_len, max_attn_len,
        (ts_weights.numel() - 1) if has_ts else 0, L, error_record() if trap else dummy,
    )
    consts = dict(H=H, D_QK=D_QK, D_V=D_V, BLOCK_M=BM, BLOCK_N=BN, HAS_TARGETS=num_targets is not None,
                  GENERAL=general, HAS_TS=has_ts, HAS_POS=has_pos, FAST_SILU=fast,
                  ONE_LOOP=bool(cfg.pop("ONE_LOOP", False)), CHECK=bool(check), TRAP=trap)
    # what is left of cfg are launch options (num_warps, num_stages, maxnreg)
    launch(_hstu_fwd_kernel, _HANDLES, grid, args, consts, cfg, q.device)
    return out
