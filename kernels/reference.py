"""Plain PyTorch references: jagged inputs padded to dense [B, N, H, d], the full score
matrix materialised, computed in the dtype of the inputs (pass float64 inputs for tests).

These are the semantics; the Triton kernels must match them.
"""

from __future__ import annotations

import math

from ._common import hstu_mask

TS_BUCKET_DIV = 0.301
"""Time bias bucket: clamp(floor(log(max(|ts_i - ts_j|, 1)) / 0.301), 0, num_buckets)."""


def _segments(seq_offsets, total: int):
    """(segment id, position in segment, lengths) for a jagged batch, on its device."""
    import torch

    off = seq_offsets.to(torch.int64)
    lengths = off[1:] - off[:-1]
    seg = torch.repeat_interleave(torch.arange(lengths.numel(), device=off.device), lengths, output_size=total)
    pos = torch.arange(total, device=off.device) - off[seg]
    return seg, pos, lengths


def _pad(x, seg, pos, B: int, N: int):
    import torch

    out = torch.zeros((B, N) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device)
    out[seg, pos] = x
    return out


def _silu_scores(qp, kp, alpha: float, rab=None):
    import torch

    s = torch.einsum("bihd,bjhd->bhij", qp, kp) * alpha
    if rab is not None:
        s = s + rab
    return torch.nn.functional.silu(s)


def relative_bias(
    qpos,
    kpos,
    N: int,
    *,
    pos_weights=None,
    ts_q=None,
    ts_k=None,
    ts_weights=None,
):
    """Relative attention bias rab[b, i, j] (added to alpha·q·k before SiLU).

    - position term: ``pos_weights[N - 1 + j - i]`` (clamped to [0, 2N-2]), pos_weights [2N-1];
    - time term: ``ts_weights[bucket(ts_i - ts_j)]`` with
      ``bucket(x) = clamp(floor(log(max(|x|, 1)) / 0.301), 0, len(ts_weights) - 1)``.
    """
    import torch

    rab = None
    if pos_weights is not None:
        idx = (kpos[:, None, :] - qpos[:, :, None] + N - 1).clamp(0, 2 * N - 2)
        rab = pos_weights[idx]
    if ts_weights is not None:
        dt = (ts_q[:, :, None] - ts_k[:, None, :]).to(torch.float64).abs().clamp(min=1.0)
        nb = ts_weights.numel() - 1
        bucket = torch.floor(torch.log(dt) / TS_BUCKET_DIV).clamp(0, nb).long()
        t = ts_weights[bucket]
        rab = t if rab is None else rab + t
    return rab


def hstu_attention_reference(
    q,
    k,
    v,
    seq_offsets,
    *,
    max_seq_len: int,
    alpha: float,
    num_targets=None,
    contextual_seq_len: int = 0,
    max_attn_len: int = 0,
    timestamps=None,
    ts_weights=None,
    pos_weights=None,
    validate: bool = True,
):
    """Reference HSTU attention, same signature as :func:`hstu_attention`.

    out_i = sum_j SiLU(alpha * q_i.k_j + rab_ij) / max_seq_len * mask(i, j) * v_j
    """
    import torch

    from ._common import check_qkv, check_values

    check_qkv(q, k, v, seq_offsets, allow_fp64=True)
    L = q.shape[0]
    if validate:
        check_values(seq_offsets, L, max_seq_len, num_targets, contextual_seq_len, max_attn_len)
    _check_bias(q, seq_offsets, timestamps, ts_weights, pos_weights, max_seq_len)
    B = seq_offsets.numel() - 1
    seg, pos, lengths = _segments(seq_offsets, L)
    out = torch.empty(L, q.shape[1], v.shape[2], dtype=q.dtype, device=q.device)
    if L == 0:
        return out
    N = int(lengths.max())
    qp, kp, vp = (_pad(x, seg, pos, B, N) for x in (q, k, v))
    ar = torch.arange(N, device=q.device)
    T = lengths.view(B, 1, 1)
    nt = (num_targets.to(torch.int64) if num_targets is not None else torch.zeros_like(lengths)).view(B, 1, 1)
    i = ar.view(1, N, 1)
    j = ar.view(1, 1, N)
    mask = hstu_mask(i, j, T, nt, contextual_seq_len, max_attn_len)  # [B, N, N]
    rab = None
    if pos_weights is not None or ts_weights is not None:
        posb = ar.view(1, N).expand(B, N)
        tsp = None
        if ts_weights is not None:
            tsp = _pad(timestamps, seg, pos, B, N)
        rab = relative_bias(
            posb, posb, max_seq_len, pos_weights=pos_weights, ts_q=tsp, ts_k=tsp, ts_weights=ts_weights
        )
        rab = rab.to(q.dtype).unsqueeze(1)  # [B, 1, N, N]
    p = _silu_scores(qp, kp, alpha, rab) * mask.unsqueeze(1).to(q.dtype) / max_seq_len
    op = torch.einsum("bhij,bjhd->bihd", p, vp)
    out[:] = op[seg, pos]
    return out


def _check_bias(q, seq_offsets, timestamps, ts_weights, pos_weights, max_seq_len):
    from ._common import KernelInputError

    if (timestamps is None) != (ts_weights is None):
        raise KernelInputError("timestamps and ts_weights must be given together")
    if ts_weights is not None:
        if timestamps.dim() != 1 or timestamps.shape[0] != q.shape[0]:
            raise KernelInputError(f"timestamps must be [L]={q.shape[0]}, got {tuple(timestamps.shape)}")
        if ts_weights.dim() != 1 or ts_weights.numel() < 1:
            raise KernelInputError("ts_weights must be 1-D [num_buckets + 1]")
        if timestamps.device != q.device or ts_weights.device != q.device:
            raise KernelInputError("timestamps and ts_weights must be on the device of q")
    if pos_weights is not None:
        if pos_weights.dim() != 1 or pos_weights.numel() != 2 * max_seq_len - 1:
            raise KernelInputError(
                f"pos_weights must be [2*max_seq_len-1]={2 * max_seq_len - 1}, got {tuple(pos_weights.shape)}"
            )
        if pos_weights.device != q.device:
            raise KernelInputError("pos_weights must be on the device of q")


# ----------------------------------------------------------------------------- cached


def gather_cache(cache, dtype=None):
    """Padded [B, Cmax, H, d] copies of the cached K and V (for references and tests)."""
    import torch

    lens = cache.cache_lens.to(torch.int64)
    B = lens.numel()
    C = int(lens.max()) if B else 0
    ps = cache.page_size
    t = torch.arange(C, device=lens.device)
    pages = cache.page_table[:, (t // ps)].to(torch.int64) if C else cache.page_table[:, :0].long()
    kc = cache.k_cache[pages, (t % ps).view(1, -1)]  # [B, C, H, d]
    vc = cache.v_cache[pages, (t % ps).view(1, -1)]
    valid = (t.view(1, -1) < lens.view(-1, 1)).view(B, C, 1, 1)
    kc = torch.where(valid, kc, torch.zeros((), dtype=kc.dtype, device=kc.device))
    vc = torch.where(valid, vc, torch.zeros((), dtype=vc.dtype, device=vc.device))
    if dtype is not None:
        kc, vc = kc.to(dtype), vc.to(dtype)
    return kc, vc


def hstu_attention_cached_reference(
    q,
    k,
    v,
    seq_offsets,
    kv_cache,
    *,
    max_seq_len: int,
    alpha: float,
    num_targets=None,
    contextual_seq_len: int = 0,
    max_attn_len: int = 0,
    validate: bool = True,
):
    """Reference for :func:`hstu_attention_cached`: the rows of the new tokens in dense HSTU
    attention over each full sequence ``cache tokens ++ new tokens``."""
    import torch

    from ._common import check_qkv, check_values
    from .cache import check_cache

    check_qkv(q, k, v, seq_offsets, allow_fp64=True)
    check_cache(kv_cache, q, k, v, seq_offsets)
    L = q.shape[0]
    B = seq_offsets.numel() - 1
    if validate:
        new_lens = check_values(seq_offsets, L, max_seq_len, num_targets, contextual_seq_len, max_attn_len)
        tot = new_lens + kv_cache.cache_lens.to("cpu", torch.int64)
        if tot.numel() and int(tot.max()) > max_seq_len:
            raise_total(tot, max_seq_len)
    seg, pos, lengths = _segments(seq_offsets, L)
    out = torch.empty(L, q.shape[1], v.shape[2], dtype=q.dtype, device=q.device)
    if L == 0:
        return out
    kc, vc = gather_cache(kv_cache, q.dtype)
    C = kc.shape[1]
    n = int(lengths.max())
    clen = kv_cache.cache_lens.to(torch.int64)
    Tfull = C + n
    kf = torch.zeros(B, Tfull, k.shape[1], k.shape[2], dtype=q.dtype, device=q.device)
    vf = torch.zeros(B, Tfull, v.shape[1], v.shape[2], dtype=q.dtype, device=q.device)
    kf[:, :C] = kc
    vf[:, :C] = vc
    abs_pos = clen[seg] + pos
    kf[seg, abs_pos] = k
    vf[seg, abs_pos] = v
    qp = _pad(q, seg, pos, B, n)
    T = (clen + lengths).view(B, 1, 1)
    nt = (num_targets.to(torch.int64) if num_targets is not None else torch.zeros_like(lengths)).view(B, 1, 1)
    i = (clen.view(B, 1) + torch.arange(n, device=q.device).view(1, n)).view(B, n, 1)
    j = torch.arange(Tfull, device=q.device).view(1, 1, Tfull)
    mask = hstu_mask(i, j, T, nt, contextual_seq_len, max_attn_len)
    p = _silu_scores(qp, kf, alpha) * mask.unsqueeze(1).to(q.dtype) / max_seq_len
    op = torch.einsum("bhij,bjhd->bihd", p, vf)
    out[:] = op[seg, pos]
    return out


def raise_total(tot, max_seq_len):
    from ._common import KernelInputError

    b = int(tot.argmax())
    raise KernelInputError(
        f"sequence {b} has {int(tot[b])} tokens with its cache, more than max_seq_len={max_seq_len}"
    )


# ----------------------------------------------------------------------------- block-sparse


def bsa_pool(x, seq_offsets, block_size: int, n_blocks: int):
    """Mean of x over each full block of block_size tokens of each sequence:
    [B, n_blocks, H, d] (zeros where a sequence has no such full block)."""
    import torch

    B = seq_offsets.numel() - 1
    off = seq_offsets.to(torch.int64)
    lengths = off[1:] - off[:-1]
    t = torch.arange(n_blocks * block_size, device=x.device)
    idx = off[:-1].view(B, 1) + t.view(1, -1)
    full = (t.view(1, -1) // block_size + 1) * block_size <= lengths.view(B, 1)
    idx = torch.where(full, idx, torch.zeros_like(idx))
    g = x[idx] if x.shape[0] else x.new_zeros((B, t.numel()) + tuple(x.shape[1:]))
    g = torch.where(full.view(B, -1, 1, 1), g, torch.zeros((), dtype=g.dtype, device=g.device))
    return g.view(B, n_blocks, block_size, x.shape[1], x.shape[2]).mean(dim=2)


def bsa_importance(q, kbar, seq_offsets, num_targets, *, alpha: float, block_size: int, n_blocks: int):
    """Block importance per (sequence, head, query block, key block) in the dtype of q:
    the sum over the query block's tokens of SiLU(alpha q.kbar_c) over compressed-visible
    blocks; also returns the compressed visibility mask [B, N, n_blocks]."""
    import torch

    B = seq_offsets.numel() - 1
    L = q.shape[0]
    seg, pos, lengths = _segments(seq_offsets, L)
    N = n_blocks * block_size
    qp = _pad(q, seg, pos, B, N)  # [B, N, H, d]
    s = torch.nn.functional.silu(torch.einsum("bihd,bchd->bhic", qp, kbar) * alpha)
    vis = bsa_compressed_visible(lengths, num_targets, block_size, n_blocks)  # [B, N, nb]
    s = s * vis.unsqueeze(1).to(s.dtype)
    imp = s.view(B, q.shape[1], n_blocks, block_size, n_blocks).sum(dim=3)  # [B, H, nqb, nkb]
    return imp, s, vis


def bsa_compressed_visible(lengths, num_targets, block_size: int, n_blocks: int):
    """vis[b, i, c]: key block c is entirely inside the prefix visible to token i,
    ((c + 1) * block_size <= min(i + 1, T - nt)), and i is a real token."""
    import torch

    B = lengths.numel()
    N = n_blocks * block_size
    nt = num_targets.to(torch.int64) if num_targets is not None else torch.zeros_like(lengths)
    hl = (lengths - nt).view(B, 1)
    i = torch.arange(N, device=lengths.device).view(1, N)
    e = torch.minimum(i + 1, hl)  # [B, N]
    c = torch.arange(n_blocks, device=lengths.device)
    return ((c.view(1, 1, -1) + 1) * block_size <= e.unsqueeze(-1)) & (i < lengths.view(B, 1)).unsqueeze(-1)


def bsa_select(imp, lengths, num_targets, *, block_size: int, block_counts: int):
    """Selected key blocks [B, H, nqb, block_counts + 1] (int32, -1 = none): the local block
    (the query block's own index) first, then the top ``block_counts`` compressed-visible
    blocks by importance, in decreasing importance (the local block never twice)."""
    import torch

    B, H, nqb, nkb = imp.shape
    vis = bsa_block_visible(lengths, num_targets, block_size, nqb)  # [B, nqb, nkb]
    local = torch.arange(nqb, device=imp.device)
    not_local = local.view(1, -1, 1) != torch.arange(nkb, device=imp.device).view(1, 1, -1)
    cand = (vis & not_local).unsqueeze(1).expand(B, H, nqb, nkb)
    score = torch.where(cand, imp.to(torch.float64), torch.full((), -math.inf, dtype=torch.float64, device=imp.device))
    kk = min(block_counts, nkb)
    top = torch.topk(score, kk, dim=-1)
    idx = torch.where(torch.isfinite(top.values), top.indices, torch.full_like(top.indices, -1))
    sel = torch.full((B, H, nqb, block_counts + 1), -1, dtype=torch.int32, device=imp.device)
    qvalid = (local.view(1, -1) * block_size < lengths.view(-1, 1))  # [B, nqb]
    sel[..., 0] = torch.where(qvalid.unsqueeze(1), local.view(1, 1, -1).int(), torch.full((), -1, dtype=torch.int32, device=imp.device))
    sel[..., 1 : 1 + kk] = torch.where(qvalid.view(B, 1, nqb, 1), idx.int(), torch.full((), -1, dtype=torch.int32, device=imp.device))
    return sel


def bsa_block_visible(lengths, num_targets, block_size: int, nqb: int):
    """A key block may be selected for a query block if it is compressed-visible to at
    least one token of the query block: [B, nqb, nkb]."""
    vis = bsa_compressed_visible(lengths, num_targets, block_size, nqb)  # [B, N, nkb]
    B = lengths.numel()
    return vis.view(B, nqb, block_size, nqb).any(dim=2)


def hstu_attention_block_sparse_reference(
    q,
    k,
    v,
    seq_offsets,
    *,
    max_seq_len: int,
    alpha: float,
    block_size: int = 64,
    block_counts: int = 8,
    num_targets=None,
    gate_cmp=None,
    gate_slc=None,
    validate: bool = True,
    block_indices=None,
    return_block_indices: bool = False,
):
    """Reference for :func:`hstu_attention_block_sparse` (see there for the semantics).

    ``block_indices`` ([B, H, nqb, block_counts + 1], -1 = none) replaces the selection
    (tests use it to compare outputs on the same selection)."""
    import torch

    from ._common import check_qkv, check_values

    check_qkv(q, k, v, seq_offsets, allow_fp64=True)
    L = q.shape[0]
    check_bsa_args(q, seq_offsets, block_size, block_counts, gate_cmp, gate_slc)
    if validate:
        check_values(seq_offsets, L, max_seq_len, num_targets, 0, 0)
    B = seq_offsets.numel() - 1
    H = q.shape[1]
    seg, pos, lengths = _segments(seq_offsets, L)
    out = torch.empty(L, H, v.shape[2], dtype=q.dtype, device=q.device)
    nb = -(-max_seq_len // block_size)
    if L == 0:
        sel = torch.full((B, H, nb, block_counts + 1), -1, dtype=torch.int32, device=q.device)
        return (out, sel) if return_block_indices else out
    N = nb * block_size
    kbar = bsa_pool(k, seq_offsets, block_size, nb)
    vbar = bsa_pool(v, seq_offsets, block_size, nb)
    imp, s, _ = bsa_importance(q, kbar, seq_offsets, num_targets, alpha=alpha, block_size=block_size, n_blocks=nb)
    # compressed branch: each pooled block stands for block_size tokens
    o_cmp = torch.einsum("bhic,bchd->bihd", s, vbar) * (block_size / max_seq_len)
    sel = block_indices if block_indices is not None else bsa_select(
        imp, lengths, num_targets, block_size=block_size, block_counts=block_counts
    )
    # selected branch: fine HSTU mask restricted to the selected key blocks
    qp, kp, vp = (_pad(x, seg, pos, B, N) for x in (q, k, v))
    onehot = torch.zeros(B, H, nb, nb + 1, dtype=torch.bool, device=q.device)
    onehot.scatter_(3, torch.where(sel >= 0, sel, nb).long(), True)
    blk = onehot[..., :nb]  # [B, H, nqb, nkb]
    blk = blk.repeat_interleave(block_size, dim=2).repeat_interleave(block_size, dim=3)
    ar = torch.arange(N, device=q.device)
    nt = (num_targets.to(torch.int64) if num_targets is not None else torch.zeros_like(lengths)).view(B, 1, 1)
    mask = hstu_mask(ar.view(1, N, 1), ar.view(1, 1, N), lengths.view(B, 1, 1), nt, 0, 0)
    m = (mask.unsqueeze(1) & blk).to(q.dtype)
    p = _silu_scores(qp, kp, alpha) * m / max_seq_len
    o_slc = torch.einsum("bhij,bjhd->bihd", p, vp)
    gc = 1.0 if gate_cmp is None else _pad(gate_cmp, seg, pos, B, N).unsqueeze(-1).to(q.dtype)
    gs = 1.0 if gate_slc is None else _pad(gate_slc, seg, pos, B, N).unsqueeze(-1).to(q.dtype)
    o = gc * o_cmp + gs * o_slc
    out[:] = o[seg, pos]
    return (out, sel) if return_block_indices else out


def check_bsa_args(q, seq_offsets, block_size, block_counts, gate_cmp, gate_slc):
    from ._common import KernelInputError

    if block_size not in (16, 32, 64, 128):
        raise KernelInputError(f"block_size must be 16, 32, 64 or 128, got {block_size}")
    if block_counts < 0:
        raise KernelInputError(f"block_counts must be >= 0, got {block_counts}")
    for name, g in (("gate_cmp", gate_cmp), ("gate_slc", gate_slc)):
        if g is None:
            continue
        if tuple(g.shape) != tuple(q.shape[:2]):
            raise KernelInputError(f"{name} must be [L, H]={tuple(q.shape[:2])}, got {tuple(g.shape)}")
        if g.device != q.device:
            raise KernelInputError(f"{name} must be on the device of q")
