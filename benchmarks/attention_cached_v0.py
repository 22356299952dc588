"""Frozen copy of kernels/_cached.py before 2026-11-22 (baseline for attention_tune.py).

Original docstring: Triton forward kernel: new tokens queries against a paged K/V cache plus their own K/V.

One program per (sequence, head) x block of new queries. The cached keys are read page by
page through the page table (gathered loads, one page = 32 tokens); with the default mask
every cached key is history and visible to every new token, so those tiles run unmasked
except the last partial one. The new keys follow the dense kernel's scheme (causal among
new history tokens, candidates see the history and themselves). Work is proportional to
new_tokens x (cached + new) tokens: nothing is recomputed for the cached tokens' queries.
"""

from __future__ import annotations

import triton
import triton.language as tl
from tracekit.kernels._common import interpret_mode
from tracekit.kernels._dense import _general_mask, _silu


@triton.jit
def _hstu_cached_kernel(
    Q, K, V, KC, VC, PAGE_TABLE, CACHE_LENS, OUT, SEQ_OFFSETS, NUM_TARGETS,
    stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh, stride_ot, stride_oh,
    stride_kcp, stride_kcs, stride_kch, stride_vcp, stride_vcs, stride_vch, stride_pt,
    scale, inv_n, contextual_seq_len, max_attn_len,
    H: tl.constexpr, D_QK: tl.constexpr, D_V: tl.constexpr, PAGE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    HAS_TARGETS: tl.constexpr, GENERAL: tl.constexpr, FAST_SILU: tl.constexpr,
):
    pid_bh = tl.program_id(0)
    pid_m = tl.num_programs(1) - 1 - tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    start = tl.load(SEQ_OFFSETS + b).to(tl.int64)
    n = (tl.load(SEQ_OFFSETS + b + 1).to(tl.int64) - start).to(tl.int32)
    m0 = pid_m * BLOCK_M
    if m0 >= n:
        return
    C = tl.load(CACHE_LENS + b).to(tl.int32)
    if HAS_TARGETS:
        nt = tl.load(NUM_TARGETS + b).to(tl.int32)
    else:
        nt = 0
    nh = n - nt  # new history tokens
    offs_m = m0 + tl.arange(0, BLOCK_M)  # position among the new tokens
    offs_n0 = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D_QK)
    offs_dv = tl.arange(0, D_V)
    Qb = Q + start * stride_qt + h * stride_qh
    Kb = K + start * stride_kt + h * stride_kh
    Vb = V + start * stride_vt + h * stride_vh
    q = tl.load(Qb + offs_m[:, None] * stride_qt + offs_d[None, :], mask=offs_m[:, None] < n, other=0.0)
    acc = tl.zeros([BLOCK_M, D_V], dtype=tl.float32)
    rab = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    PT = PAGE_TABLE + b.to(tl.int64) * stride_pt
    T_abs = C + n
    i_abs = C + offs_m

    # ---- cached keys [0, C)
    c_full = C // BLOCK_N * BLOCK_N
    if GENERAL:
        c_full = 0
    for n0 in range(0, c_full, BLOCK_N):
        offs_n = n0 + offs_n0
        page = tl.load(PT + offs_n // PAGE).to(tl.int64)
        slot = offs_n % PAGE
        k = tl.load(KC + page[None, :] * stride_kcp + slot[None, :] * stride_kcs + h * stride_kch + offs_d[:, None])
        s = tl.dot(q, k)
        p = _silu(s, rab, scale, False, FAST_SILU)
        v = tl.load(VC + page[:, None] * stride_vcp + slot[:, None] * stride_vcs + h * stride_vch + offs_dv[None, :])
        acc += tl.dot(p.to(v.dtype), v)
    for n0 in range(c_full, C, BLOCK_N):
        offs_n = n0 + offs_n0
        kmask = offs_n < C
        page = tl.load(PT + offs_n // PAGE, mask=kmask, other=0).to(tl.int64)
        slot = offs_n % PAGE
        k = tl.load(
            KC + page[None, :] * stride_kcp + slot[None, :] * stride_kcs + h * stride_kch + offs_d[:, None],
            mask=kmask[None, :], other=0.0,
        )
        s = tl.dot(q, k)
        p = _silu(s, rab, scale, False, FAST_SILU)
        if GENERAL:
            valid = _general_mask(i_abs, offs_n, T_abs, nt, contextual_seq_len, max_attn_len) & kmask[None, :]
        else:
            valid = kmask[None, :] & (offs_m[:, None] < n)
        p = tl.where(valid, p, 0.0)
        v = tl.load(
            VC + page[:, None] * stride_vcp + slot[:, None] * stride_vcs + h * stride_vch + offs_dv[None, :],
            mask=kmask[:, None], other=0.0,
        )
        acc += tl.dot(p.to(v.dtype), v)

    # ---- new keys
    if GENERAL:
        for n0 in range(0, n, BLOCK_N):
            offs_n = n0 + offs_n0
            kmask = offs_n < n
            k = tl.load(Kb + offs_n[None, :] * stride_kt + offs_d[:, None], mask=kmask[None, :], other=0.0)
            s = tl.dot(q, k)
            p = _silu(s, rab, scale, False, FAST_SILU)
            valid = _general_mask(i_abs, C + offs_n, T_abs, nt, contextual_seq_len, max_attn_len) & kmask[None, :]
            p = tl.where(valid, p, 0.0)
            v = tl.load(Vb + offs_n[:, None] * stride_vt + offs_dv[None, :], mask=kmask[:, None], other=0.0)
            acc += tl.dot(p.to(v.dtype), v)
    else:
        kend = tl.minimum(m0 + BLOCK_M, nh)
        for n0 in range(0, kend, BLOCK_N):
            offs_n = n0 + offs_n0
            kmask = offs_n < nh
            k = tl.load(Kb + offs_n[None, :] * stride_kt + offs_d[:, None], mask=kmask[None, :], other=0.0)
            s = tl.dot(q, k)
            p = _silu(s, rab, scale, False, FAST_SILU)
            valid = (offs_n[None, :] <= offs_m[:, None]) & kmask[None, :]
            p = tl.where(valid, p, 0.0)
            v = tl.load(Vb + offs_n[:, None] * stride_vt + offs_dv[None, :], mask=kmask[:, None], other=0.0)
            acc += tl.dot(p.to(v.dtype), v)
        if HAS_TARGETS:
            if m0 + BLOCK_M > nh:
                cand = (offs_m >= nh) & (offs_m < n)
                kd = tl.load(Kb + offs_m[:, None] * stride_kt + offs_d[None, :], mask=cand[:, None], other=0.0)
                sd = tl.sum(q.to(tl.float32) * kd.to(tl.float32), axis=1)
                pd = _silu(sd, sd, scale, False, FAST_SILU)
                pd = tl.where(cand, pd, 0.0)
                vd = tl.load(Vb + offs_m[:, None] * stride_vt + offs_dv[None, :], mask=cand[:, None], other=0.0)
                acc += pd[:, None] * vd.to(tl.float32)

    acc = acc * inv_n
    o_ptrs = OUT + start * stride_ot + h * stride_oh + offs_m[:, None] * stride_ot + offs_dv[None, :]
    tl.store(o_ptrs, acc.to(OUT.dtype.element_ty), mask=offs_m[:, None] < n)


def default_config(d_qk: int, d_v: int, device_type: str) -> dict:
    if device_type != "cuda":
        return {"BLOCK_M": 16, "BLOCK_N": 32, "num_warps": 4, "num_stages": 1}
    if max(d_qk, d_v) <= 128:
        return {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 3}
    return {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 8, "num_stages": 2}


def hstu_cached_fwd(
    q, k, v, seq_offsets, cache, *, max_seq_len, alpha, num_targets, contextual_seq_len,
    max_attn_len, max_new_len=None, config=None, out=None,
):
    import torch

    L, H, D_QK = q.shape
    D_V = v.shape[2]
    q, k, v = (x if x.stride(-1) == 1 else x.contiguous() for x in (q, k, v))
    if out is None:
        out = torch.empty(L, H, D_V, dtype=q.dtype, device=q.device)
    B = seq_offsets.numel() - 1
    if L == 0 or B == 0:
        return out
    cfg = dict(default_config(D_QK, D_V, q.device.type))
    if config:
        cfg.update(config)
    fast = q.device.type == "cuda" and not interpret_mode() and cfg.pop("FAST_SILU", True)
    cfg.pop("FAST_SILU", None)
    BM, BN = cfg.pop("BLOCK_M"), cfg.pop("BLOCK_N")
    assert BN % cache.page_size == 0 or cache.page_size % BN == 0
    kc, vc = cache.k_cache, cache.v_cache
    bound = max_new_len if max_new_len is not None else min(max_seq_len, L)
    grid = (B * H, triton.cdiv(bound, BM))
    _hstu_cached_kernel[grid](
        q, k, v, kc, vc, cache.page_table, cache.cache_lens, out, seq_offsets,
        num_targets if num_targets is not None else seq_offsets,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        out.stride(0), out.stride(1),
        kc.stride(0), kc.stride(1), kc.stride(2), vc.stride(0), vc.stride(1), vc.stride(2),
        cache.page_table.stride(0),
        float(alpha) * (0.5 if fast else 1.0), 1.0 / max_seq_len, contextual_seq_len, max_attn_len,
        H=H, D_QK=D_QK, D_V=D_V, PAGE=cache.page_size, BLOCK_M=BM, BLOCK_N=BN,
        HAS_TARGETS=num_targets is not None, GENERAL=contextual_seq_len > 0 or max_attn_len > 0,
        FAST_SILU=fast, **cfg,
    )
    return out
