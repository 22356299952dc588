"""Frozen copy of kernels/_bsa.py before the fused kernel (2026-11-22), baseline for attention_tune.py --bsa."""

from __future__ import annotations

import triton
import triton.language as tl
from tracekit.kernels._common import interpret_mode
from tracekit.kernels._dense import _silu


@triton.jit
def _bsa_pool_kernel(
    K, V, KBAR, VBAR, SEQ_OFFSETS,
    stride_kt, stride_kh, stride_vt, stride_vh, stride_kb, stride_kc, stride_kbh, stride_vb, stride_vc, stride_vbh,
    inv_bs,
    H: tl.constexpr, D_QK: tl.constexpr, D_V: tl.constexpr, BS: tl.constexpr,
):
    """Mean of k and v over each full block of each sequence; zeros for partial/absent blocks."""
    pid_bh = tl.program_id(0)
    c = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    start = tl.load(SEQ_OFFSETS + b).to(tl.int64)
    T = (tl.load(SEQ_OFFSETS + b + 1).to(tl.int64) - start).to(tl.int32)
    lim = T * ((c + 1) * BS <= T).to(tl.int32)  # 0 unless block c is full
    offs = c * BS + tl.arange(0, BS)
    offs_d = tl.arange(0, D_QK)
    offs_dv = tl.arange(0, D_V)
    rmask = offs < lim
    k = tl.load(K + (start + offs[:, None]) * stride_kt + h * stride_kh + offs_d[None, :], mask=rmask[:, None], other=0.0)
    v = tl.load(V + (start + offs[:, None]) * stride_vt + h * stride_vh + offs_dv[None, :], mask=rmask[:, None], other=0.0)
    kb = tl.sum(k.to(tl.float32), axis=0) * inv_bs
    vb = tl.sum(v.to(tl.float32), axis=0) * inv_bs
    tl.store(KBAR + b.to(tl.int64) * stride_kb + c * stride_kc + h * stride_kbh + offs_d, kb.to(KBAR.dtype.element_ty))
    tl.store(VBAR + b.to(tl.int64) * stride_vb + c * stride_vc + h * stride_vbh + offs_dv, vb.to(VBAR.dtype.element_ty))


@triton.jit
def _bsa_cmp_kernel(
    Q, KBAR, VBAR, IMP, OCMP, GC, SEQ_OFFSETS, NUM_TARGETS,
    stride_qt, stride_qh, stride_kb, stride_kc, stride_kh, stride_vb, stride_vc, stride_vh,
    stride_ib, stride_ih, stride_iq, stride_ot, stride_oh, stride_gt,
    scale, out_scale, n_blocks,
    H: tl.constexpr, D_QK: tl.constexpr, D_V: tl.constexpr, BS: tl.constexpr, BLOCK_C: tl.constexpr,
    HAS_TARGETS: tl.constexpr, HAS_GC: tl.constexpr, FAST_SILU: tl.constexpr,
):
    pid_bh = tl.program_id(0)
    qb = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    start = tl.load(SEQ_OFFSETS + b).to(tl.int64)
    T = (tl.load(SEQ_OFFSETS + b + 1).to(tl.int64) - start).to(tl.int32)
    m0 = qb * BS
    if m0 >= T:
        return
    if HAS_TARGETS:
        nt = tl.load(NUM_TARGETS + b).to(tl.int32)
    else:
        nt = 0
    hl = T - nt
    offs_m = m0 + tl.arange(0, BS)
    offs_c0 = tl.arange(0, BLOCK_C)
    offs_d = tl.arange(0, D_QK)
    offs_dv = tl.arange(0, D_V)
    rmask = offs_m < T
    q = tl.load(Q + (start + offs_m[:, None]) * stride_qt + h * stride_qh + offs_d[None, :],
                mask=rmask[:, None], other=0.0)
    e = tl.minimum(offs_m + 1, hl)  # visible prefix length per query
    acc = tl.zeros([BS, D_V], dtype=tl.float32)
    cend = tl.minimum(m0 + BS, hl) // BS
    Kb = KBAR + b.to(tl.int64) * stride_kb + h * stride_kh
    Vb = VBAR + b.to(tl.int64) * stride_vb + h * stride_vh
    Ib = IMP + b.to(tl.int64) * stride_ib + h * stride_ih + qb * stride_iq
    for c0 in range(0, cend, BLOCK_C):
        offs_c = c0 + offs_c0
        cmask = offs_c < cend
        kb = tl.load(Kb + offs_c[None, :] * stride_kc + offs_d[:, None], mask=cmask[None, :], other=0.0)
        s = tl.dot(q, kb)
        p = _silu(s, s, scale, False, FAST_SILU)
        vis = ((offs_c[None, :] + 1) * BS <= e[:, None]) & rmask[:, None]
        p = tl.where(vis, p, 0.0)
        # importance for the selection: column sums; -inf where no row of the query block
        # sees the block fully, and for the local block (always processed, never selected)
        col_vis = tl.max(vis.to(tl.int32), axis=0) > 0
        imp = tl.where(col_vis & (offs_c != qb), tl.sum(p, axis=0), float("-inf"))
        tl.store(Ib + offs_c, imp, mask=cmask)
        vb = tl.load(Vb + offs_c[:, None] * stride_vc + offs_dv[None, :], mask=cmask[:, None], other=0.0)
        acc += tl.dot(p.to(vb.dtype), vb)
    acc = acc * out_scale
    if HAS_GC:
        gc = tl.load(GC + (start + offs_m) * stride_gt + h, mask=rmask, other=0.0).to(tl.float32)
        acc = acc * gc[:, None]
    tl.store(OCMP + (start + offs_m[:, None]) * stride_ot + h * stride_oh + offs_dv[None, :], acc,
             mask=rmask[:, None])


@triton.jit
def _bsa_slc_kernel(
    Q, K, V, SEL, OCMP, OUT, GS, SEQ_OFFSETS, NUM_TARGETS,
    stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh,
    stride_sb, stride_sh, stride_sq, stride_ct, stride_ch, stride_ot, stride_oh, stride_gt,
    scale, inv_n, n_sel,
    H: tl.constexpr, D_QK: tl.constexpr, D_V: tl.constexpr, BS: tl.constexpr,
    HAS_TARGETS: tl.constexpr, HAS_GS: tl.constexpr, FAST_SILU: tl.constexpr,
):
    pid_bh = tl.program_id(0)
    qb = tl.num_programs(1) - 1 - tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    start = tl.load(SEQ_OFFSETS + b).to(tl.int64)
    T = (tl.load(SEQ_OFFSETS + b + 1).to(tl.int64) - start).to(tl.int32)
    m0 = qb * BS
    if m0 >= T:
        return
    if HAS_TARGETS:
        nt = tl.load(NUM_TARGETS + b).to(tl.int32)
    else:
        nt = 0
    hl = T - nt
    offs_m = m0 + tl.arange(0, BS)
    offs_n0 = tl.arange(0, BS)
    offs_d = tl.arange(0, D_QK)
    offs_dv = tl.arange(0, D_V)
    rmask = offs_m < T
    Qb = Q + start * stride_qt + h * stride_qh
    Kb = K + start * stride_kt + h * stride_kh
    Vb = V + start * stride_vt + h * stride_vh
    q = tl.load(Qb + offs_m[:, None] * stride_qt + offs_d[None, :], mask=rmask[:, None], other=0.0)
    acc = tl.zeros([BS, D_V], dtype=tl.float32)
    Sb = SEL + b.to(tl.int64) * stride_sb + h * stride_sh + qb * stride_sq
    # slot 0: the local block; slots 1..n_sel: the selected blocks (-1 = none)
    for si in range(0, n_sel + 1):
        if si == 0:
            c = qb
        else:
            c = tl.load(Sb + si - 1)
        offs_n = tl.maximum(c, 0) * BS + offs_n0
        kmask = offs_n < T * (c >= 0).to(tl.int32)  # nothing for an empty slot (c = -1)
        k = tl.load(Kb + offs_n[None, :] * stride_kt + offs_d[:, None], mask=kmask[None, :], other=0.0)
        s = tl.dot(q, k)
        p = _silu(s, s, scale, False, FAST_SILU)
        valid = (((offs_n[None, :] <= offs_m[:, None]) & (offs_n[None, :] < hl))
                 | (offs_n[None, :] == offs_m[:, None])) & kmask[None, :]
        p = tl.where(valid, p, 0.0)
        v = tl.load(Vb + offs_n[:, None] * stride_vt + offs_dv[None, :], mask=kmask[:, None], other=0.0)
        acc += tl.dot(p.to(v.dtype), v)
    acc = acc * inv_n
    if HAS_GS:
        gs = tl.load(GS + (start + offs_m) * stride_gt + h, mask=rmask, other=0.0).to(tl.float32)
        acc = acc * gs[:, None]
    ocmp = tl.load(OCMP + (start + offs_m[:, None]) * stride_ct + h * stride_ch + offs_dv[None, :],
                   mask=rmask[:, None], other=0.0)
    acc += ocmp
    tl.store(OUT + (start + offs_m[:, None]) * stride_ot + h * stride_oh + offs_dv[None, :],
             acc.to(OUT.dtype.element_ty), mask=rmask[:, None])


def _cfg(device_type: str, d: int, bs: int) -> dict:
    if device_type != "cuda":
        return {"num_warps": 4, "num_stages": 1}
    if bs >= 128 or d > 128:
        return {"num_warps": 8, "num_stages": 2}
    return {"num_warps": 4, "num_stages": 3}


def hstu_bsa_fwd(
    q, k, v, seq_offsets, *, max_seq_len, alpha, block_size, block_counts, num_targets,
    gate_cmp=None, gate_slc=None, return_block_indices=False, out=None, block_indices=None,
):
    import torch


    L, H, D_QK = q.shape
    D_V = v.shape[2]
    q, k, v = (x if x.stride(-1) == 1 else x.contiguous() for x in (q, k, v))
    if out is None:
        out = torch.empty(L, H, D_V, dtype=q.dtype, device=q.device)
    B = seq_offsets.numel() - 1
    nb = triton.cdiv(max_seq_len, block_size)
    if L == 0 or B == 0:
        sel = torch.full((B, H, nb, block_counts + 1), -1, dtype=torch.int32, device=q.device)
        return (out, sel) if return_block_indices else out
    fast = q.device.type == "cuda" and not interpret_mode()
    scale = float(alpha) * (0.5 if fast else 1.0)
    kbar = torch.empty(B, nb, H, D_QK, dtype=q.dtype, device=q.device)
    vbar = torch.empty(B, nb, H, D_V, dtype=q.dtype, device=q.device)
    _bsa_pool_kernel[(B * H, nb)](
        k, v, kbar, vbar, seq_offsets, k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        kbar.stride(0), kbar.stride(1), kbar.stride(2), vbar.stride(0), vbar.stride(1), vbar.stride(2),
        1.0 / block_size, H=H, D_QK=D_QK, D_V=D_V, BS=block_size, num_warps=4,
    )
    imp = torch.full((B, H, nb, nb), float("-inf"), dtype=torch.float32, device=q.device)
    ocmp = torch.empty(L, H, D_V, dtype=torch.float32, device=q.device)
    gate_cmp, gate_slc = (None if x is None else x.contiguous() for x in (gate_cmp, gate_slc))
    gc = gate_cmp if gate_cmp is not None else seq_offsets
    gs = gate_slc if gate_slc is not None else seq_offsets
    cfg = _cfg(q.device.type, max(D_QK, D_V), block_size)
    dummy_t = seq_offsets
    grid = (B * H, nb)
    _bsa_cmp_kernel[grid](
        q, kbar, vbar, imp, ocmp, gc, seq_offsets,
        num_targets if num_targets is not None else dummy_t,
        q.stride(0), q.stride(1), kbar.stride(0), kbar.stride(1), kbar.stride(2),
        vbar.stride(0), vbar.stride(1), vbar.stride(2),
        imp.stride(0), imp.stride(1), imp.stride(2), ocmp.stride(0), ocmp.stride(1),
        gate_cmp.stride(0) if gate_cmp is not None else 0,
        scale, block_size / max_seq_len, nb,
        H=H, D_QK=D_QK, D_V=D_V, BS=block_size, BLOCK_C=64 if fast else 16,
        HAS_TARGETS=num_targets is not None, HAS_GC=gate_cmp is not None, FAST_SILU=fast, **cfg,
    )
    if block_indices is None:
        kk = min(block_counts, nb)
        if kk > 0:
            top = torch.topk(imp, kk, dim=-1)
            sel = torch.where(top.values > float("-inf"), top.indices, -1).to(torch.int32)
        else:
            sel = torch.empty(B, H, nb, 0, dtype=torch.int32, device=q.device)
    else:
        # given as [B, H, nqb, block_counts + 1] with the local block first
        sel = block_indices[..., 1:].to(torch.int32).contiguous()
    _bsa_slc_kernel[grid](
        q, k, v, sel, ocmp, out, gs, seq_offsets,
        num_targets if num_targets is not None else dummy_t,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        sel.stride(0), sel.stride(1), sel.stride(2), ocmp.stride(0), ocmp.stride(1),
        out.stride(0), out.stride(1), gate_slc.stride(0) if gate_slc is not None else 0,
        scale, 1.0 / max_seq_len, sel.shape[3],
        H=H, D_QK=D_QK, D_V=D_V, BS=block_size,
        HAS_TARGETS=num_targets is not None, HAS_GS=gate_slc is not None, FAST_SILU=fast, **cfg,
    )
    if return_block_indices:
        local = torch.arange(nb, device=q.device, dtype=torch.int32).view(1, 1, nb, 1).expand(B, H, nb, 1)
        off = seq_offsets.to(torch.int64)
        qvalid = (torch.arange(nb, device=q.device).view(1, 1, nb, 1) * block_size
                  < (off[1:] - off[:-1]).view(B, 1, 1, 1))
        full = torch.full((B, H, nb, block_counts + 1), -1, dtype=torch.int32, device=q.device)
        full[..., :1] = torch.where(qvalid, local, -1)
        full[..., 1 : 1 + sel.shape[3]] = torch.where(qvalid, sel, -1)
        return out, full
    return out
