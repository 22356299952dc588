"""Triton forward kernel: new tokens' queries against a paged K/V cache plus their own K/V.

With the default mask (no contextual tokens, no window) a persistent grid, one program per
SM, each taking an equal share of the batch's key tiles (_hstu_cached_sk_kernel); with the
other masks one program per (sequence, head) x block of new queries (x run of cached keys
when they are split over several programs, _hstu_cached_kernel). The cached keys are read page by
page through the page table (gathered loads, one page = 32 tokens); with the default mask
every cached key is history and visible to every new token, so those tiles run unmasked
except the last partial one. The new keys follow the dense kernel's scheme (causal among
new history tokens, candidates see the history and themselves). Work is proportional to
new_tokens x (cached + new) tokens: nothing is recomputed for the cached tokens' queries.
"""

from __future__ import annotations

import warnings

import triton
import triton.language as tl

from . import tiles
from ._common import interpret_mode
from ._dense import _general_mask, _silu
from ._launch import cdiv, launch, next_pow2


@triton.jit
def _fence(x):
    """A GPU-scope memory fence in every thread holding an element of ``x`` (``__threadfence``)."""
    return tl.inline_asm_elementwise("fence.acq_rel.gpu;\n\tmov.b32 $0, $1;", "=r,r", [x],
                                     dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _uniform(x, UNIFORM: tl.constexpr):
    """``x`` (an int32 that every thread of a warp holds alike) through ``redux.sync``, whose
    result ptxas knows to be warp-uniform. Loop bounds and branches on such values are then
    uniform control flow, so the loop's pipeline stage index and the wgmma shared-memory
    descriptors stay in uniform registers (as in the dense kernel), instead of being built
    per thread and moved over (R2UR) before every wgmma. UNIFORM=False (the interpreter): x."""
    if UNIFORM:
        return tl.inline_asm_elementwise("redux.sync.min.s32 $0, $1, 0xffffffff;", "=r,r", [x],
                                         dtype=tl.int32, is_pure=True, pack=1)
    else:
        return x


@triton.jit
def _load_nc(ptrs):
    """int32 loads (``ld.global.nc``) the compiler's software pipeliner does not see: the
    page table is small, read-only during the kernel and L1-resident after the first tile."""
    return tl.inline_asm_elementwise("ld.global.nc.b32 $0, [$1];", "=r,l", [ptrs], dtype=tl.int32, is_pure=True,
                                     pack=1)


@triton.jit
def _ws_cols(offs, D_V: tl.constexpr, WS_PERM: tl.constexpr):
    """Where column ``offs`` of a stream-K partial lies in its workspace row (fp32, D_V columns).

    WS_PERM: the row's even 16-byte pieces (columns 8j..8j+3) first, then its odd ones (8j+4..8j+7).
    The last piece sums the partials in the layout of its bf16 output store, 8 contiguous columns
    (32 bytes) a thread, which a thread loads as two 16-byte vectors: in a plain row one warp
    instruction then reads every other 16 bytes, half of each 32-byte sector (ncu: 2x the ideal
    L2 sectors for those loads). With the pieces so ordered each instruction reads whole
    sectors; 4 contiguous columns stay contiguous, so the partial's stores (4 columns a thread)
    keep their 16-byte vectors and whole sectors too. Stores and loads use the same map, so the
    sums are right whatever layout the compiler picks; only the sector count depends on it."""
    if WS_PERM:
        return (offs // 4) % 2 * (D_V // 2) + offs // 8 * 4 + offs % 4
    else:
        return offs


@triton.jit
def _page_slots(PT, pt_row, b, n0, offs_n0, kmask, PAGE: tl.constexpr, BLOCK_N: tl.constexpr,
                MASKED: tl.constexpr, PAGES: tl.constexpr, MAXP: tl.constexpr):
    """(page, slot) of cached tokens n0 .. n0+BLOCK_N: the element offset of token j in a
    pool is page*stride_page + slot_j*stride_slot.

    PAGES=0: page-table entries loaded from global memory per tile (one scalar load when the
    tile lies in one page); PAGES=5: the same loads in inline assembly (``_load_nc``), so the
    software pipeliner leaves them in the stage that computes the K/V addresses instead of
    staging them through shared memory a stage earlier (which leaves the K/V loads a single
    stage ahead); PAGES=1: the sequence's page-table row is held in registers
    (``pt_row``, MAXP entries) and indexed with tl.gather, so no K/V address depends on a
    load inside the loop; PAGES=3 (in the kernel, not here): one TMA load per tile through
    descriptors over the pools, the tile's page read per tile; PAGES=2: K/V were gathered into a contiguous per-sequence buffer
    (page = the sequence, slot = the token)."""
    if PAGES == 2:
        page = b.to(tl.int64)
        slot = n0 + offs_n0
    elif PAGES == 1:
        idx = tl.minimum((n0 + offs_n0) // PAGE, MAXP - 1)
        page = tl.gather(pt_row, idx, 0).to(tl.int64)
        slot = (n0 + offs_n0) % PAGE
    elif PAGES == 5:
        if BLOCK_N <= PAGE:
            page = _load_nc(PT + n0 // PAGE).to(tl.int64)
            slot = (n0 % PAGE) + offs_n0
        else:
            offs_n = n0 + offs_n0
            if MASKED:
                page = _load_nc(PT + tl.where(kmask, offs_n // PAGE, 0)).to(tl.int64)
            else:
                page = _load_nc(PT + offs_n // PAGE).to(tl.int64)
            slot = offs_n % PAGE
    elif BLOCK_N <= PAGE:
        page = tl.load(PT + n0 // PAGE).to(tl.int64)
        slot = (n0 % PAGE) + offs_n0
    else:
        offs_n = n0 + offs_n0
        if MASKED:
            page = tl.load(PT + offs_n // PAGE, mask=kmask, other=0).to(tl.int64)
        else:
            page = tl.load(PT + offs_n // PAGE).to(tl.int64)
        slot = offs_n % PAGE
    return page, slot


@triton.jit
def _page_table_row(PAGE_TABLE, b, stride_pt, num_pt, PAGES: tl.constexpr, MAXP: tl.constexpr):
    """Sequence ``b``'s page-table row (``PT``) and what ``_page_slots`` reads of it: for
    PAGES=1 its MAXP entries held in registers, else ``b`` (unused)."""
    PT = PAGE_TABLE + b.to(tl.int64) * stride_pt
    if PAGES == 1:
        offs_p = tl.arange(0, MAXP)
        pt_row = tl.load(PT + offs_p, mask=offs_p < num_pt, other=0)
    else:
        pt_row = b
    return PT, pt_row


@triton.jit
def _gather_pages_kernel(KC, VC, PT, CACHE_LENS, KS, VS, stride_kcp, stride_vcp, stride_pt, stride_ks, stride_vs,
                         PAGE: tl.constexpr, PK: tl.constexpr, PV: tl.constexpr, CHUNK: tl.constexpr):
    """Copy the cached pages of sequence b into KS[b], VS[b] (contiguous tokens)."""
    b = tl.program_id(0)
    p = tl.program_id(1)
    C = tl.load(CACHE_LENS + b)
    if p * PAGE >= C:
        return
    page = tl.load(PT + b.to(tl.int64) * stride_pt + p).to(tl.int64)
    src = KC + page * stride_kcp
    dst = KS + b.to(tl.int64) * stride_ks + p.to(tl.int64) * PK
    for i in tl.static_range(0, PK, CHUNK):
        o = i + tl.arange(0, CHUNK)
        tl.store(dst + o, tl.load(src + o))
    src = VC + page * stride_vcp
    dst = VS + b.to(tl.int64) * stride_vs + p.to(tl.int64) * PV
    for i in tl.static_range(0, PV, CHUNK):
        o = i + tl.arange(0, CHUNK)
        tl.store(dst + o, tl.load(src + o))


@triton.jit
def _cached_block(
    t, b, h, split, start, n, C, nt, nh, num_mb, Qb, Kb, Vb, KCh, VCh, PT, pt_row, OUT, WS, CNT,
    stride_qt, stride_kt, stride_vt, stride_ot, stride_oh, stride_kcp, stride_kcs, stride_vcp, stride_vcs,
    stride_ws, stride_wt, stride_wh, scale, inv_n, contextual_seq_len, max_attn_len, total, T_abs, c_full,
    H: tl.constexpr, D_QK: tl.constexpr, D_V: tl.constexpr, PAGE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    HAS_TARGETS: tl.constexpr, GENERAL: tl.constexpr, FAST_SILU: tl.constexpr,
    PAGES: tl.constexpr, MAXP: tl.constexpr, DIAG_TILE: tl.constexpr,
    SPLIT: tl.constexpr, FENCE: tl.constexpr, CHUNK: tl.constexpr,
):
    """Query block t (counted from the last) of sequence b, head h, against key run ``split``."""
    offs_n0 = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D_QK)
    offs_dv = tl.arange(0, D_V)
    m0 = (num_mb - 1 - t) * BLOCK_M
    offs_m = m0 + tl.arange(0, BLOCK_M)  # position among the new tokens
    q = tl.load(Qb + offs_m[:, None] * stride_qt + offs_d[None, :], mask=offs_m[:, None] < n, other=0.0)
    acc = tl.zeros([BLOCK_M, D_V], dtype=tl.float32)
    rab = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    i_abs = C + offs_m

    # ---- cached keys [0, C): every one is visible to every new token (default mask);
    #      this program's run of tiles is [k_lo, k_hi), unmasked up to c_full
    # the last run also takes the new keys (its tiles over them counted in `extra`), so the
    # cached tiles are cut into SPLIT runs that leave the last one that much shorter
    extra = 0
    if SPLIT > 1:
        if GENERAL:
            extra = tl.cdiv(n, BLOCK_N)
        else:
            extra = tl.cdiv(tl.minimum(m0 + BLOCK_M, nh), BLOCK_N)
            if HAS_TARGETS and DIAG_TILE:
                extra += tl.where(m0 + BLOCK_M > nh, BLOCK_M // BLOCK_N, 0)
    per = tl.cdiv(tl.cdiv(C, BLOCK_N) + extra, SPLIT) * BLOCK_N
    k_lo = split * per
    k_hi = tl.minimum(k_lo + per, C)
    if split == SPLIT - 1:
        k_hi = C
    full_hi = tl.minimum(k_hi, c_full)
    for n0 in range(k_lo, full_hi, BLOCK_N):
        if PAGES == 3:
            row = tl.load(PT + n0 // PAGE) * PAGE + n0 % PAGE
            k = KCh.load([row, h * D_QK]).T
        else:
            page, slot = _page_slots(PT, pt_row, b, n0, offs_n0, offs_n0 < BLOCK_N, PAGE, BLOCK_N, False,
                                     PAGES, MAXP)
            k = tl.load(KCh + (page * stride_kcp + slot * stride_kcs)[None, :] + offs_d[:, None])
        s = tl.dot(q, k)
        p = _silu(s, rab, scale, False, FAST_SILU)
        if PAGES == 3:
            v = VCh.load([row, h * D_V])
        else:
            v = tl.load(VCh + (page * stride_vcp + slot * stride_vcs)[:, None] + offs_dv[None, :])
        acc += tl.dot(p.to(v.dtype), v)
    for n0 in range(tl.maximum(k_lo, full_hi), k_hi, BLOCK_N):
        offs_n = n0 + offs_n0
        kmask = offs_n < C
        if PAGES == 3:
            row = tl.load(PT + n0 // PAGE) * PAGE + n0 % PAGE
            k = KCh.load([row, h * D_QK]).T
        else:
            page, slot = _page_slots(PT, pt_row, b, n0, offs_n0, kmask, PAGE, BLOCK_N, True,
                                     PAGES, MAXP)
            k = tl.load(KCh + (page * stride_kcp + slot * stride_kcs)[None, :] + offs_d[:, None],
                        mask=kmask[None, :], other=0.0)
        s = tl.dot(q, k)
        p = _silu(s, rab, scale, False, FAST_SILU)
        if GENERAL:
            valid = _general_mask(i_abs, offs_n, T_abs, nt, contextual_seq_len, max_attn_len) & kmask[None, :]
        else:
            valid = kmask[None, :] & (offs_m[:, None] < n)
        p = tl.where(valid, p, 0.0)
        if PAGES == 3:
            # slots past the cache end hold whatever the pool held: zero them (0 * NaN)
            v = tl.where(kmask[:, None], VCh.load([row, h * D_V]), 0.0)
        else:
            v = tl.load(VCh + (page * stride_vcp + slot * stride_vcs)[:, None] + offs_dv[None, :],
                        mask=kmask[:, None], other=0.0)
        acc += tl.dot(p.to(v.dtype), v)

    # ---- new keys (the last run's program)
    if split == SPLIT - 1:
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
            if HAS_TARGETS and DIAG_TILE:
                # each candidate sees itself: masked tiles over the block's own keys (tensor cores)
                if m0 + BLOCK_M > nh:
                    for j0 in tl.static_range(0, BLOCK_M, BLOCK_N):
                        offs_n = m0 + j0 + offs_n0
                        cmask = (offs_n >= nh) & (offs_n < n)
                        k = tl.load(Kb + offs_n[None, :] * stride_kt + offs_d[:, None], mask=cmask[None, :], other=0.0)
                        s = tl.dot(q, k)
                        p = _silu(s, rab, scale, False, FAST_SILU)
                        p = tl.where((offs_n[None, :] == offs_m[:, None]) & cmask[None, :], p, 0.0)
                        v = tl.load(Vb + offs_n[:, None] * stride_vt + offs_dv[None, :], mask=cmask[:, None], other=0.0)
                        acc += tl.dot(p.to(v.dtype), v)
            elif HAS_TARGETS:
                if m0 + BLOCK_M > nh:
                    cand = (offs_m >= nh) & (offs_m < n)
                    kd = tl.load(Kb + offs_m[:, None] * stride_kt + offs_d[None, :], mask=cand[:, None], other=0.0)
                    sd = tl.sum(q.to(tl.float32) * kd.to(tl.float32), axis=1)
                    pd = _silu(sd, sd, scale, False, FAST_SILU)
                    pd = tl.where(cand, pd, 0.0)
                    vd = tl.load(Vb + offs_m[:, None] * stride_vt + offs_dv[None, :], mask=cand[:, None], other=0.0)
                    acc += pd[:, None] * vd.to(tl.float32)

    acc = acc * inv_n
    rows = offs_m[:, None] < n
    o_ptrs = OUT + start * stride_ot + h * stride_oh + offs_m[:, None] * stride_ot + offs_dv[None, :]
    if SPLIT == 1:
        tl.store(o_ptrs, acc.to(OUT.dtype.element_ty), mask=rows)
    else:
        w_off = (start + offs_m)[:, None] * stride_wt + h * stride_wh + offs_dv[None, :]
        tl.store(WS + split * stride_ws + w_off, acc, mask=rows)
        if FENCE:
            _fence(offs_m)
        tl.debug_barrier()
        arrived = tl.atomic_add(CNT + h * total + start + m0, 1, sem="acq_rel")
        if arrived == SPLIT - 1:
            if FENCE:
                _fence(offs_m)
            # sum the SPLIT partials (this program's own included) a column chunk at a time
            offs_c = tl.arange(0, CHUNK)
            for c0 in tl.static_range(0, D_V, CHUNK):
                c_off = (start + offs_m)[:, None] * stride_wt + h * stride_wh + (c0 + offs_c)[None, :]
                tot = tl.zeros([BLOCK_M, CHUNK], dtype=tl.float32)
                for j in tl.static_range(SPLIT):
                    tot += tl.load(WS + j * stride_ws + c_off, mask=rows, other=0.0, cache_modifier=".cg")
                tl.store(OUT + start * stride_ot + h * stride_oh + offs_m[:, None] * stride_ot
                         + (c0 + offs_c)[None, :], tot.to(OUT.dtype.element_ty), mask=rows)
            # every other program of this block has arrived: reset the counter for the next
            # launch, so the counters stay zero between launches and need no fill per call
            tl.atomic_xchg(CNT + h * total + start + m0, 0, sem="relaxed")


@triton.jit
def _hstu_cached_kernel(
    Q, K, V, KC, VC, PAGE_TABLE, CACHE_LENS, OUT, SEQ_OFFSETS, NUM_TARGETS,
    stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh, stride_ot, stride_oh,
    stride_kcp, stride_kcs, stride_kch, stride_vcp, stride_vcs, stride_vch, stride_pt,
    WS, CNT, stride_ws, stride_wt, stride_wh,
    scale, inv_n, contextual_seq_len, max_attn_len, num_pt, total, G, nseq,
    H: tl.constexpr, D_QK: tl.constexpr, D_V: tl.constexpr, PAGE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    HAS_TARGETS: tl.constexpr, GENERAL: tl.constexpr, FAST_SILU: tl.constexpr,
    PAGES: tl.constexpr, MAXP: tl.constexpr, DIAG_TILE: tl.constexpr,
    SPLIT: tl.constexpr, FENCE: tl.constexpr, G_FAST: tl.constexpr, CHUNK: tl.constexpr,
    LOOP: tl.constexpr, FLAT: tl.constexpr, BPOW: tl.constexpr,
):
    """Grid (B*H, G, SPLIT); or flat with s fastest, then g (G_FAST); or flat over the batch's
    existing query blocks (FLAT, see below). Program (bh, g, s) takes the query blocks g,
    g + G, ... of its sequence (LOOP; else block g only) and, of the cached keys, the s-th of
    SPLIT runs of tiles (the last run also takes the new keys, and fewer cached tiles to make
    up for them). With SPLIT > 1 each program stores its fp32 partial sum
    (per token row, in WS[s]) and counts itself in CNT; the last of a block's SPLIT
    programs to arrive adds the others' partials to its own and writes the output (HSTU
    has no softmax: partial sums over disjoint keys simply add)."""
    if FLAT:
        # flat grid over the batch's query blocks (at most cdiv(L, BLOCK_M) + B of them):
        # program (j, h, s), s fastest, then h, takes the j-th query block of the batch, found
        # from the sequences' block counts (a prefix sum over the nseq <= BPOW offsets), so
        # no program is launched for blocks that do not exist and the blocks (and heads) of
        # one sequence run side by side, sharing its K/V in L2
        pid = tl.program_id(0)
        split = pid % SPLIT
        h = (pid // SPLIT) % H
        j = pid // (SPLIT * H)
        offs_b = tl.arange(0, BPOW)
        o0 = tl.load(SEQ_OFFSETS + offs_b, mask=offs_b < nseq, other=0)
        o1 = tl.load(SEQ_OFFSETS + offs_b + 1, mask=offs_b < nseq, other=0)
        nb = tl.cdiv((o1 - o0).to(tl.int32), BLOCK_M)
        cum = tl.cumsum(nb, 0)  # inclusive
        b = tl.sum((cum <= j).to(tl.int32))
        g = j - tl.sum(tl.where(offs_b < b, nb, 0))
        if b >= nseq:
            g = 1 << 30  # past the batch's last block: nothing to do
        b = tl.minimum(b, nseq - 1)  # (every load below stays inside the batch's arrays)
    elif G_FAST:
        # flat grid, a sequence's G programs (and their key runs) next to each other: the
        # programs in flight share few sequences' K/V, which then stay in L2
        pid = tl.program_id(0)
        split = pid % SPLIT
        g = (pid // SPLIT) % G
        pid_bh = pid // (SPLIT * G)
    else:
        pid_bh = tl.program_id(0)
        g = tl.program_id(1)
        split = tl.program_id(2)
    if not FLAT:
        b = pid_bh // H
        h = pid_bh % H
    start = tl.load(SEQ_OFFSETS + b).to(tl.int64)
    n = (tl.load(SEQ_OFFSETS + b + 1).to(tl.int64) - start).to(tl.int32)
    C = tl.load(CACHE_LENS + b).to(tl.int32)
    if HAS_TARGETS:
        nt = tl.load(NUM_TARGETS + b).to(tl.int32)
    else:
        nt = 0
    nh = n - nt  # new history tokens
    Qb = Q + start * stride_qt + h * stride_qh
    Kb = K + start * stride_kt + h * stride_kh
    Vb = V + start * stride_vt + h * stride_vh
    if PAGES == 3:
        # KC, VC are TMA descriptors over the pools viewed as [pages * PAGE, H * d]
        KCh = KC
        VCh = VC
    else:
        KCh = KC + h * stride_kch
        VCh = VC + h * stride_vch
    PT, pt_row = _page_table_row(PAGE_TABLE, b, stride_pt, num_pt, PAGES, MAXP)
    T_abs = C + n
    c_full = C // BLOCK_N * BLOCK_N
    if GENERAL:
        c_full = 0
    num_mb = tl.cdiv(n, BLOCK_M)
    if LOOP:
        # the grid's second axis is capped (see hstu_cached_fwd): each program takes query
        # blocks g, g + G, ... of its sequence, so no program is launched per token of the batch
        for t in range(g, num_mb, G):
            _cached_block(t, b, h, split, start, n, C, nt, nh, num_mb, Qb, Kb, Vb, KCh, VCh, PT, pt_row, OUT, WS, CNT,
                          stride_qt, stride_kt, stride_vt, stride_ot, stride_oh, stride_kcp, stride_kcs, stride_vcp,
                          stride_vcs, stride_ws, stride_wt, stride_wh, scale, inv_n, contextual_seq_len, max_attn_len, total,
                          T_abs, c_full, H, D_QK, D_V, PAGE, BLOCK_M, BLOCK_N, HAS_TARGETS, GENERAL, FAST_SILU, PAGES, MAXP,
                          DIAG_TILE, SPLIT, FENCE, CHUNK)
    elif g < num_mb:
        # one program per query block: no loop, so nothing stays live from one block to the next
        _cached_block(g, b, h, split, start, n, C, nt, nh, num_mb, Qb, Kb, Vb, KCh, VCh, PT, pt_row, OUT, WS, CNT,
                      stride_qt, stride_kt, stride_vt, stride_ot, stride_oh, stride_kcp, stride_kcs, stride_vcp,
                      stride_vcs, stride_ws, stride_wt, stride_wh, scale, inv_n, contextual_seq_len, max_attn_len, total,
                      T_abs, c_full, H, D_QK, D_V, PAGE, BLOCK_M, BLOCK_N, HAS_TARGETS, GENERAL, FAST_SILU, PAGES, MAXP,
                      DIAG_TILE, SPLIT, FENCE, CHUNK)


@triton.jit
def _sk_piece(q, r0, r1, ct, c_full, C, n, nh, m0, nkt, Kb, Vb, KCh, VCh, PT, pt_row, b,
              stride_kt, stride_vt, stride_kcp, stride_kcs, stride_vcp, stride_vcs, scale,
              D_QK: tl.constexpr, D_V: tl.constexpr, PAGE: tl.constexpr, BLOCK_M: tl.constexpr,
              BLOCK_N: tl.constexpr, HAS_TARGETS: tl.constexpr, FAST_SILU: tl.constexpr,
              PAGES: tl.constexpr, MAXP: tl.constexpr, TWO_LOOPS: tl.constexpr):
    """The sum over iterations [r0, r1) of one query block's key tiles (unscaled, fp32):
    iteration r < ct is cached tile r (unmasked below c_full tiles), then nkt tiles of the
    new history keys (causal), then the tiles holding the block's own candidates (each
    candidate sees itself).

    TWO_LOOPS (tiles within one page): one loop over the unmasked cached tiles and one over
    the rest (the partial cached tile, history, candidates), so a piece fills and drains
    the software pipeline twice instead of four times; else a loop per kind of tile."""
    offs_n0 = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D_QK)
    offs_dv = tl.arange(0, D_V)
    offs_m = m0 + tl.arange(0, BLOCK_M)
    acc = tl.zeros([BLOCK_M, D_V], dtype=tl.float32)
    rab = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    if TWO_LOOPS:
        for it in range(r0, tl.minimum(r1, c_full)):
            n0 = it * BLOCK_N
            page, slot = _page_slots(PT, pt_row, b, n0, offs_n0, offs_n0 < BLOCK_N, PAGE, BLOCK_N, False, PAGES,
                                     MAXP)
            k = tl.load(KCh + (page * stride_kcp + slot * stride_kcs)[None, :] + offs_d[:, None])
            p = _silu(tl.dot(q, k), rab, scale, False, FAST_SILU)
            v = tl.load(VCh + (page * stride_vcp + slot * stride_vcs)[:, None] + offs_dv[None, :])
            acc += tl.dot(p.to(v.dtype), v)
        # the rest in one loop: the cache's last, partial tile, then nkt tiles of new history
        # keys (causal), then from the first candidate row's tile the tiles holding the
        # block's candidates (each sees itself). Each iteration computes both addresses and
        # loads through the one it needs, unmasked: a cached tile's slots clamped to the
        # last cached token (the tile lies in one page; its page-table entry is in use), new
        # keys' rows to the last new token; what lies past the ends is masked out of p
        j0 = tl.maximum(m0, nh) // BLOCK_N * BLOCK_N
        for it in range(tl.maximum(r0, c_full), r1):
            cached = it < ct
            n0c = tl.maximum(tl.minimum(it, ct - 1), 0) * BLOCK_N
            page, slot = _page_slots(PT, pt_row, b, n0c, offs_n0, offs_n0 < BLOCK_N, PAGE, BLOCK_N, False, PAGES,
                                     MAXP)
            slot = tl.maximum(tl.minimum(slot, C - 1 - n0c // PAGE * PAGE), 0)
            j = it - ct
            hist = j < nkt
            offs_n = tl.where(hist, j * BLOCK_N, j0 + (j - nkt) * BLOCK_N) + offs_n0
            offs_nl = tl.maximum(tl.minimum(offs_n, n - 1), 0)
            k = tl.load(tl.where(cached, KCh + (page * stride_kcp + slot * stride_kcs)[None, :],
                                 Kb + offs_nl[None, :] * stride_kt) + offs_d[:, None])
            p = _silu(tl.dot(q, k), rab, scale, False, FAST_SILU)
            valid = tl.where(hist, (offs_n[None, :] <= offs_m[:, None]) & (offs_n < nh)[None, :],
                             (offs_n[None, :] == offs_m[:, None]) & ((offs_n >= nh) & (offs_n < n))[None, :])
            valid = tl.where(cached, (n0c + offs_n0 < C)[None, :], valid)
            p = tl.where(valid, p, 0.0)
            v = tl.load(tl.where(cached, VCh + (page * stride_vcp + slot * stride_vcs)[:, None],
                                 Vb + offs_nl[:, None] * stride_vt) + offs_dv[None, :])
            acc += tl.dot(p.to(v.dtype), v)
    else:
        for it in range(r0, tl.minimum(r1, c_full)):
            n0 = it * BLOCK_N
            page, slot = _page_slots(PT, pt_row, b, n0, offs_n0, offs_n0 < BLOCK_N, PAGE, BLOCK_N, False, PAGES, MAXP)
            k = tl.load(KCh + (page * stride_kcp + slot * stride_kcs)[None, :] + offs_d[:, None])
            p = _silu(tl.dot(q, k), rab, scale, False, FAST_SILU)
            v = tl.load(VCh + (page * stride_vcp + slot * stride_vcs)[:, None] + offs_dv[None, :])
            acc += tl.dot(p.to(v.dtype), v)
        for it in range(tl.maximum(r0, c_full), tl.minimum(r1, ct)):
            # the cache's last, partial tile
            n0 = it * BLOCK_N
            kmask = n0 + offs_n0 < C
            page, slot = _page_slots(PT, pt_row, b, n0, offs_n0, kmask, PAGE, BLOCK_N, True, PAGES, MAXP)
            k = tl.load(KCh + (page * stride_kcp + slot * stride_kcs)[None, :] + offs_d[:, None],
                        mask=kmask[None, :], other=0.0)
            p = _silu(tl.dot(q, k), rab, scale, False, FAST_SILU)
            p = tl.where(kmask[None, :], p, 0.0)
            v = tl.load(VCh + (page * stride_vcp + slot * stride_vcs)[:, None] + offs_dv[None, :],
                        mask=kmask[:, None], other=0.0)
            acc += tl.dot(p.to(v.dtype), v)
        for it in range(tl.maximum(r0, ct), tl.minimum(r1, ct + nkt)):
            # new history keys: causal
            offs_n = (it - ct) * BLOCK_N + offs_n0
            kmask = offs_n < nh
            k = tl.load(Kb + offs_n[None, :] * stride_kt + offs_d[:, None], mask=kmask[None, :], other=0.0)
            p = _silu(tl.dot(q, k), rab, scale, False, FAST_SILU)
            p = tl.where((offs_n[None, :] <= offs_m[:, None]) & kmask[None, :], p, 0.0)
            v = tl.load(Vb + offs_n[:, None] * stride_vt + offs_dv[None, :], mask=kmask[:, None], other=0.0)
            acc += tl.dot(p.to(v.dtype), v)
        if HAS_TARGETS:
            # the block's candidates: each sees itself (tiles from the first candidate row's tile)
            j0 = tl.maximum(m0, nh) // BLOCK_N * BLOCK_N
            for it in range(tl.maximum(r0, ct + nkt), r1):
                offs_n = j0 + (it - ct - nkt) * BLOCK_N + offs_n0
                cmask = (offs_n >= nh) & (offs_n < n)
                k = tl.load(Kb + offs_n[None, :] * stride_kt + offs_d[:, None], mask=cmask[None, :], other=0.0)
                p = _silu(tl.dot(q, k), rab, scale, False, FAST_SILU)
                p = tl.where((offs_n[None, :] == offs_m[:, None]) & cmask[None, :], p, 0.0)
                v = tl.load(Vb + offs_n[:, None] * stride_vt + offs_dv[None, :], mask=cmask[:, None], other=0.0)
                acc += tl.dot(p.to(v.dtype), v)
    return acc


@triton.jit
def _sk_sequences(SEQ_OFFSETS, CACHE_LENS, NUM_TARGETS, nseq, offs_b, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  HAS_TARGETS: tl.constexpr):
    """Per sequence (vectors over offs_b): start offset, new tokens, cached tokens, new history
    tokens, query blocks, and the persistent kernel's iterations per head."""
    R: tl.constexpr = BLOCK_M // BLOCK_N
    bmask = offs_b < nseq
    o0 = tl.load(SEQ_OFFSETS + offs_b, mask=bmask, other=0)
    nv = (tl.load(SEQ_OFFSETS + offs_b + 1, mask=bmask, other=0) - o0).to(tl.int32)
    cv = tl.load(CACHE_LENS + offs_b, mask=bmask, other=0).to(tl.int32)
    if HAS_TARGETS:
        nhv = nv - tl.load(NUM_TARGETS + offs_b, mask=bmask, other=0).to(tl.int32)
    else:
        nhv = nv
    nbv = tl.cdiv(nv, BLOCK_M)  # query blocks
    chv = tl.cdiv(nhv, BLOCK_N)  # new history tiles
    fv = tl.minimum(chv // R, nbv)  # blocks that see fewer than chv history tiles
    wv = nbv * tl.cdiv(cv, BLOCK_N) + R * fv * (fv + 1) // 2 + (nbv - fv) * chv
    if HAS_TARGETS:
        wv += tl.cdiv(nv, BLOCK_N) - nhv // BLOCK_N  # candidate tiles (blocks are tile-aligned)
    return o0, nv, cv, nhv, nbv, wv


@triton.jit
def _sk_block_iters(offs_t, C, n, nh, nb, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    HAS_TARGETS: tl.constexpr):
    """Iterations (key tiles) of query blocks offs_t of one sequence: its cached tiles, the
    new history tiles the block sees (causal), and the tiles holding its own candidates."""
    it_t = tl.cdiv(C, BLOCK_N) + tl.minimum((offs_t + 1) * (BLOCK_M // BLOCK_N), tl.cdiv(nh, BLOCK_N))
    if HAS_TARGETS:
        c_lo = tl.maximum(offs_t * BLOCK_M, nh)
        c_hi = tl.minimum((offs_t + 1) * BLOCK_M, n)
        it_t += tl.where(c_hi > c_lo, tl.cdiv(c_hi, BLOCK_N) - c_lo // BLOCK_N, 0)
    return tl.where(offs_t < nb, it_t, 0)


@triton.jit
def _sk_item_start(j, SEQ_OFFSETS, CACHE_LENS, NUM_TARGETS, nseq, H: tl.constexpr, BLOCK_M: tl.constexpr,
                   BLOCK_N: tl.constexpr, HAS_TARGETS: tl.constexpr, BPOW: tl.constexpr, TPOW: tl.constexpr):
    """The first iteration of item j (items in order: sequence, head, query block)."""
    offs_b = tl.arange(0, BPOW)
    o0, nv, cv, nhv, nbv, wv = _sk_sequences(SEQ_OFFSETS, CACHE_LENS, NUM_TARGETS, nseq, offs_b, BLOCK_M, BLOCK_N,
                                             HAS_TARGETS)
    iv = nbv * H
    b = tl.sum((tl.cumsum(iv, 0) <= j).to(tl.int32))
    sel = offs_b == b
    jr = j - tl.sum(tl.where(offs_b < b, iv, 0))
    nb = tl.maximum(tl.sum(tl.where(sel, nbv, 0)), 1)
    h = jr // nb
    t = jr - h * nb
    offs_t = tl.arange(0, TPOW)
    it_t = _sk_block_iters(offs_t, tl.sum(tl.where(sel, cv, 0)), tl.sum(tl.where(sel, nv, 0)),
                           tl.sum(tl.where(sel, nhv, 0)), nb, BLOCK_M, BLOCK_N, HAS_TARGETS)
    return (tl.sum(tl.where(offs_b < b, wv * H, 0)) + h * tl.sum(tl.where(sel, wv, 0))
            + tl.sum(tl.where(offs_t < t, it_t, 0)))


@triton.jit
def _sk_locate(i, hi, SEQ_OFFSETS, CACHE_LENS, NUM_TARGETS, nseq, H: tl.constexpr, BLOCK_M: tl.constexpr,
               BLOCK_N: tl.constexpr, HAS_TARGETS: tl.constexpr, BPOW: tl.constexpr, TPOW: tl.constexpr):
    """The item holding iteration i of a program whose range ends at hi: (offs_b, o0, nbv, sel:
    the per-sequence vectors and the item's sequence among them; sequence b, head h, query block
    t; its new tokens n, history tokens nh, cached tokens C, query blocks nb; the item's
    iterations [item_lo, item_hi) and the end of the piece from i, seg_hi)."""
    offs_b = tl.arange(0, BPOW)
    o0, nv, cv, nhv, nbv, wv = _sk_sequences(SEQ_OFFSETS, CACHE_LENS, NUM_TARGETS, nseq, offs_b, BLOCK_M, BLOCK_N,
                                             HAS_TARGETS)
    sv = wv * H
    b = tl.sum((tl.cumsum(sv, 0) <= i).to(tl.int32))
    sel = offs_b == b
    W = tl.maximum(tl.sum(tl.where(sel, wv, 0)), 1)
    rr = i - tl.sum(tl.where(offs_b < b, sv, 0))
    h = rr // W
    r = rr - h * W
    n = tl.sum(tl.where(sel, nv, 0))
    nh = tl.sum(tl.where(sel, nhv, 0))
    C = tl.sum(tl.where(sel, cv, 0))
    nb = tl.sum(tl.where(sel, nbv, 0))
    offs_t = tl.arange(0, TPOW)
    it_t = _sk_block_iters(offs_t, C, n, nh, nb, BLOCK_M, BLOCK_N, HAS_TARGETS)
    t = tl.sum((tl.cumsum(it_t, 0) <= r).to(tl.int32))
    item_lo = i - r + tl.sum(tl.where(offs_t < t, it_t, 0))
    item_hi = item_lo + tl.sum(tl.where(offs_t == t, it_t, 0))
    # (always past i for consistent sizes; the bound keeps inconsistent ones, such as
    # unvalidated decreasing offsets, from looping forever)
    seg_hi = tl.maximum(tl.minimum(item_hi, hi), i + 1)
    return offs_b, o0, nbv, sel, b, h, t, n, nh, C, nb, item_lo, item_hi, seg_hi


@triton.jit
def _sk_segment(
    i, lo, hi, pid, s0, chunk, Q, K, V, KC, VC, PAGE_TABLE, CACHE_LENS, OUT, SEQ_OFFSETS, NUM_TARGETS,
    stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh, stride_ot, stride_oh,
    stride_kcp, stride_kcs, stride_kch, stride_vcp, stride_vcs, stride_vch, stride_pt,
    WS, CNT, scale, inv_n, num_pt, nseq,
    H: tl.constexpr, D_QK: tl.constexpr, D_V: tl.constexpr, PAGE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    HAS_TARGETS: tl.constexpr, FAST_SILU: tl.constexpr, PAGES: tl.constexpr, MAXP: tl.constexpr,
    FENCE: tl.constexpr, CHUNK: tl.constexpr, BPOW: tl.constexpr, TPOW: tl.constexpr, UNIFORM: tl.constexpr,
    TWO_LOOPS: tl.constexpr, WS_PERM: tl.constexpr,
):
    """Iterations [i, min(end of i's item, hi)) of the item holding iteration i, for a program
    whose range is [lo, hi); returns the end of that piece. A whole item is written out; a
    piece of an item cut by the chunks (of ``chunk`` iterations from ``s0``, chunk c = program c)
    stores its fp32 partial in slot 2*pid (the program's first piece) or 2*pid+1 (its last), and the last
    piece to arrive adds the item's partials in chunk order and writes the output."""
    # the item holding iteration i: sequence b, head h, query block t (the per-sequence
    # figures are reloaded per piece rather than kept live across the program's loop)
    offs_b, o0, nbv, sel, b, h, t, n, nh, C, nb, item_lo, item_hi, seg_hi = _sk_locate(
        i, hi, SEQ_OFFSETS, CACHE_LENS, NUM_TARGETS, nseq, H, BLOCK_M, BLOCK_N, HAS_TARGETS, BPOW, TPOW)
    # the piece's figures come from reductions over vectors: the same in every thread, but
    # not known to be (see _uniform)
    i, seg_hi, item_lo, item_hi = (_uniform(i, UNIFORM), _uniform(seg_hi, UNIFORM), _uniform(item_lo, UNIFORM),
                                   _uniform(item_hi, UNIFORM))
    b, h, t = _uniform(b, UNIFORM), _uniform(h, UNIFORM), _uniform(t, UNIFORM)
    C, n, nh = _uniform(C, UNIFORM), _uniform(n, UNIFORM), _uniform(nh, UNIFORM)
    ct = tl.cdiv(C, BLOCK_N)
    nkt = tl.minimum((t + 1) * (BLOCK_M // BLOCK_N), tl.cdiv(nh, BLOCK_N))
    m0 = t * BLOCK_M

    start = tl.sum(tl.where(sel, o0, 0)).to(tl.int64)
    offs_m = m0 + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D_QK)
    offs_dv = tl.arange(0, D_V)
    q = tl.load(Q + start * stride_qt + h * stride_qh + offs_m[:, None] * stride_qt + offs_d[None, :],
                mask=offs_m[:, None] < n, other=0.0)
    PT, pt_row = _page_table_row(PAGE_TABLE, b, stride_pt, num_pt, PAGES, MAXP)
    acc = _sk_piece(q, i - item_lo, seg_hi - item_lo, ct, C // BLOCK_N, C, n, nh, m0, nkt,
                    K + start * stride_kt + h * stride_kh, V + start * stride_vt + h * stride_vh,
                    KC + h * stride_kch, VC + h * stride_vch, PT, pt_row, b,
                    stride_kt, stride_vt, stride_kcp, stride_kcs, stride_vcp, stride_vcs, scale,
                    D_QK, D_V, PAGE, BLOCK_M, BLOCK_N, HAS_TARGETS, FAST_SILU, PAGES, MAXP, TWO_LOOPS)

    rows = offs_m[:, None] < n
    if (item_lo >= lo) & (item_hi <= hi):
        o_ptrs = OUT + start * stride_ot + h * stride_oh + offs_m[:, None] * stride_ot + offs_dv[None, :]
        tl.store(o_ptrs, (acc * inv_n).to(OUT.dtype.element_ty), mask=rows)
    else:
        offs_r = tl.arange(0, BLOCK_M)
        slot = pid * 2 + tl.where(item_lo <= lo, 0, 1)
        tl.store(WS + slot.to(tl.int64) * (BLOCK_M * D_V) + offs_r[:, None] * D_V
                 + _ws_cols(offs_dv, D_V, WS_PERM)[None, :], acc)
        if FENCE:
            _fence(offs_r)
        tl.debug_barrier()
        item = tl.sum(tl.where(offs_b < b, nbv, 0)) * H + h * nb + t
        c_first = (item_lo - s0) // chunk
        c_last = (item_hi - 1 - s0) // chunk
        arrived = tl.atomic_add(CNT + item, 1, sem="acq_rel")
        if arrived == c_last - c_first:
            if FENCE:
                _fence(offs_r)
            offs_c = tl.arange(0, CHUNK)
            for c0 in tl.static_range(0, D_V, CHUNK):
                cols = _ws_cols(c0 + offs_c, D_V, WS_PERM)
                tot = tl.zeros([BLOCK_M, CHUNK], dtype=tl.float32)
                for c in range(c_first, c_last + 1):
                    s = c * 2 + tl.where(item_lo <= s0 + c * chunk, 0, 1)
                    tot += tl.load(WS + s.to(tl.int64) * (BLOCK_M * D_V) + offs_r[:, None] * D_V + cols[None, :],
                                   cache_modifier=".cg")
                tl.store(OUT + start * stride_ot + h * stride_oh + offs_m[:, None] * stride_ot
                         + (c0 + offs_c)[None, :], (tot * inv_n).to(OUT.dtype.element_ty), mask=rows)
            # every piece has arrived: reset the counter for the next launch
            tl.atomic_xchg(CNT + item, 0, sem="relaxed")
    return seg_hi


@triton.jit
def _hstu_cached_sk_kernel(
    Q, K, V, KC, VC, PAGE_TABLE, CACHE_LENS, OUT, SEQ_OFFSETS, NUM_TARGETS,
    stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh, stride_ot, stride_oh,
    stride_kcp, stride_kcs, stride_kch, stride_vcp, stride_vcs, stride_vch, stride_pt,
    WS, CNT, scale, inv_n, num_pt, nseq, min_chunk, dp_spare,
    H: tl.constexpr, D_QK: tl.constexpr, D_V: tl.constexpr, PAGE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    HAS_TARGETS: tl.constexpr, FAST_SILU: tl.constexpr, PAGES: tl.constexpr, MAXP: tl.constexpr,
    FENCE: tl.constexpr, CHUNK: tl.constexpr, BPOW: tl.constexpr, TPOW: tl.constexpr, DP: tl.constexpr,
    UNIFORM: tl.constexpr, TWO_LOOPS: tl.constexpr, WS_PERM: tl.constexpr,
):
    """Persistent (stream-K) grid for the default mask: the batch's work is one list of
    iterations, items (sequence, head, query block) in order, each item's iterations its key
    tiles: its cached tiles, the new history tiles it sees, then the tiles holding its own
    candidates. Program p of P takes the p-th of P equal chunks of that list: it writes the
    items it holds whole, and the pieces of an item cut by a chunk boundary add up through
    the workspace (see _sk_segment; HSTU has no softmax, so sums over disjoint keys add).
    So every program gets the same number of key tiles whatever the sequences' lengths (no
    wave tail), and pays the per-item fixed cost (q load, pipeline fill, epilogue) about
    twice, not once per query block and key run. All sizes come from the offsets, cache
    lengths and targets on the device (no host sync)."""
    pid = tl.program_id(0)
    P = tl.num_programs(0)
    offs_b = tl.arange(0, BPOW)
    o0, nv, cv, nhv, nbv, wv = _sk_sequences(SEQ_OFFSETS, CACHE_LENS, NUM_TARGETS, nseq, offs_b, BLOCK_M, BLOCK_N,
                                             HAS_TARGETS)
    total = _uniform(tl.sum(wv * H), UNIFORM)
    if DP:
        # whole items in waves first (program p: items p, p + P, ...; a wave's programs start
        # their items together, so the query blocks of one (sequence, head) read the same keys
        # at about the same time: L2), as long as dp_spare waves' worth of items are left for
        # the stream-K part, which then starts at iteration s0
        items = _uniform(tl.sum(nbv) * H, UNIFORM)
        waves = tl.maximum(items // P - dp_spare, 0)
        s0 = 0
        if waves > 0:
            s0 = _uniform(_sk_item_start(waves * P, SEQ_OFFSETS, CACHE_LENS, NUM_TARGETS, nseq, H, BLOCK_M,
                                         BLOCK_N, HAS_TARGETS, BPOW, TPOW), UNIFORM)
        chunk = tl.maximum(tl.cdiv(total - s0, P), min_chunk)
        lo = s0 + pid * chunk
        hi = tl.minimum(lo + chunk, total)
        # one loop for both parts (one copy of the piece's code)
        k = 0
        i = lo
        while (k < waves) | (i < hi):
            in_dp = k < waves
            j = i  # a stream-K piece starts where the last one ended: no item lookup
            if in_dp:
                j = _sk_item_start(k * P + pid, SEQ_OFFSETS, CACHE_LENS, NUM_TARGETS, nseq, H, BLOCK_M, BLOCK_N,
                                   HAS_TARGETS, BPOW, TPOW)
            e = _sk_segment(j, tl.where(in_dp, j, lo), tl.where(in_dp, total, hi), pid, s0,
                            chunk, Q, K, V, KC, VC, PAGE_TABLE, CACHE_LENS, OUT, SEQ_OFFSETS,
                            NUM_TARGETS, stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh,
                            stride_ot, stride_oh, stride_kcp, stride_kcs, stride_kch, stride_vcp, stride_vcs,
                            stride_vch, stride_pt, WS, CNT, scale, inv_n, num_pt, nseq, H, D_QK, D_V, PAGE, BLOCK_M,
                            BLOCK_N, HAS_TARGETS, FAST_SILU, PAGES, MAXP, FENCE, CHUNK, BPOW, TPOW,
                            UNIFORM, TWO_LOOPS, WS_PERM)
            i = tl.where(in_dp, i, e)
            k += 1
    else:
        chunk = tl.maximum(tl.cdiv(total, P), min_chunk)
        lo = pid * chunk
        hi = tl.minimum(lo + chunk, total)
        i = lo
        while i < hi:
            i = _sk_segment(i, lo, hi, pid, 0, chunk, Q, K, V, KC, VC, PAGE_TABLE, CACHE_LENS, OUT, SEQ_OFFSETS,
                            NUM_TARGETS, stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh,
                            stride_ot, stride_oh, stride_kcp, stride_kcs, stride_kch, stride_vcp, stride_vcs,
                            stride_vch, stride_pt, WS, CNT, scale, inv_n, num_pt, nseq, H, D_QK, D_V, PAGE, BLOCK_M,
                            BLOCK_N, HAS_TARGETS, FAST_SILU, PAGES, MAXP, FENCE, CHUNK, BPOW, TPOW,
                            UNIFORM, TWO_LOOPS, WS_PERM)


def default_config(d_qk: int, d_v: int, device_type: str) -> dict:
    """Tiles per head dimension (H200 sweeps, docs/performance.md). ``PERSIST`` runs the
    default mask on the persistent grid (see _hstu_cached_sk_kernel; ``PROGRAMS``, default
    one per SM, and ``MIN_CHUNK``, the fewest iterations per program, size it; ``DP`` takes
    whole items in waves first, leaving ``DP_SPARE`` waves' worth to stream-K: the query
    blocks of one (sequence, head) then read the same cached keys at about the same time,
    from L2; ``UNIFORM`` passes the loop bounds through redux.sync, see _uniform; ``WS_PERM``
    orders the partial sums' workspace rows so that their loads read whole sectors, see
    _ws_cols); the keys below serve the other masks (contextual tokens, windows), which keep
    one program per query block.
    ``GRID_M`` caps the programs per (sequence, head) and key run (None: see hstu_cached_fwd;
    0: one program per query block of the longest possible sequence, no loop in the
    kernel); ``PAGES`` picks how cached tokens are addressed (see _page_slots);
    ``DIAG_TILE`` adds each candidate's self-attention as masked tensor-core tiles instead
    of a float32 row-wise dot product; ``SPLIT`` cuts the cached keys into that many runs,
    one program each (see the kernel); ``FLAT`` launches one program per existing query
    block (and key run), the blocks found on the device from the offsets, instead of a
    grid over (sequence, head, block slot)."""
    if device_type != "cuda":
        return {"BLOCK_M": 32, "BLOCK_N": 16, "num_warps": 4, "num_stages": 1, "GRID_M": 1, "SPLIT": 1,
                "PERSIST": True}
    return {"BLOCK_M": 128, "BLOCK_N": 32, "num_warps": 8, "num_stages": 3, "GRID_M": None,
            "PAGES": 5, "DIAG_TILE": True, "SPLIT": 2, "FLAT": True, "PERSIST": True, "DP": True, "DP_SPARE": 1,
            "GLUON": True}


def _has_descriptors() -> bool:
    try:
        from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: F401
    except ImportError:
        return False
    return True


_SM_COUNT: dict = {}
LAST_KERNEL = None  # the last launch's compiled kernel (n_regs / n_spills for diagnostics)


def _sm_count(device) -> int:
    import torch

    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _SM_COUNT:
        _SM_COUNT[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _SM_COUNT[idx]


_MAJOR: dict = {}
_GL = None  # the _cached_gluon module once imported, False where it cannot be (Triton without Gluon)
_GLUON_FAILED: dict = {}  # device index -> why the Gluon kernel could not be built there (default calls skip it)


def _gluon_usable(q, kc, vc, d_qk, d_v, block_m, block_n, page, fast) -> bool:
    """Whether the Gluon version of the persistent kernel (``_cached_gluon``) runs this call:
    Triton with ``triton.experimental.gluon`` (3.6+), an sm_90 GPU, the default tiles."""
    global _GL
    if _GL is None:
        try:
            from . import _cached_gluon as _GL
        except ImportError:
            _GL = False
    return _GL is not False and _GL.usable(q, kc, vc, d_qk, d_v, block_m, block_n, page, fast)


def _redux_supported(device) -> bool:
    """Whether ``device`` runs ``redux.sync`` (_uniform): compute capability 8.0 or newer."""
    import torch

    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _MAJOR:
        _MAJOR[idx] = torch.cuda.get_device_capability(idx)[0]
    return _MAJOR[idx] >= 8


_HANDLES: dict = {}  # compiled kernels per specialisation (see _launch)
_SK_HANDLES: dict = {}  # the same for the persistent kernel
_BUFFERS: dict = {}  # (device type, index, stream handle) -> [workspace, counters], grown on demand


def _split_buffers(device, ws_numel: int, cnt_numel: int):
    """The split kernel's fp32 workspace (at least ``ws_numel`` elements) and int32 arrival
    counters (at least ``cnt_numel``, all zero) for the current stream of ``device``.

    Eager calls reuse one pair per (device, stream), grown to the next power of two when a
    call needs more: launches on one stream run in order, so they never share the buffers
    at the same time, and launches on other streams get their own pair. The kernel leaves
    every counter it used at zero, so only a new pair is filled (queued on the stream, no
    host sync); a replaced pair is freed through PyTorch's stream-ordered allocator, after
    the launches queued on it. While the stream is being captured into a CUDA graph, the
    pair is allocated per call from the graph's memory pool instead, which the graph keeps
    for its replays (a persistent pair could be replaced while the graph still points at
    it). Not for streams of other processes: CUDA IPC of these buffers is not supported."""
    import torch

    if device.type == "cuda":
        if torch.cuda.is_current_stream_capturing():
            return (torch.empty(ws_numel, dtype=torch.float32, device=device),
                    torch.zeros(cnt_numel, dtype=torch.int32, device=device))
        stream = torch.cuda.current_stream(device)
        key = (device.type, stream.device_index, stream.cuda_stream)
    else:
        key = (device.type, device.index, 0)  # (the interpreter runs launches one by one)
    pair = _BUFFERS.get(key)
    if pair is None or pair[0].numel() < ws_numel:
        ws = torch.empty(next_pow2(ws_numel), dtype=torch.float32, device=device)
        pair = _BUFFERS[key] = [ws, pair[1] if pair is not None else None]
    if pair[1] is None or pair[1].numel() < cnt_numel:
        pair[1] = torch.zeros(next_pow2(cnt_numel), dtype=torch.int32, device=device)
    return pair[0], pair[1]


def release_split_buffers() -> None:
    """Drop the cached split workspaces and counters of every device and stream (their
    memory goes back to PyTorch's allocator once the launches queued on them have run), and the
    Gluon kernel's plan tables and encoded tensor maps."""
    _BUFFERS.clear()
    if _GL:
        _GL.release_plan_buffers()


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
    cfg.update(tiles.lookup("cached", q.device, q.dtype, D_QK, D_V, max_seq_len) or {})
    if config:
        cfg.update(config)
    fast = q.device.type == "cuda" and not interpret_mode() and cfg.pop("FAST_SILU", True)
    cfg.pop("FAST_SILU", None)
    BM, BN = cfg.pop("BLOCK_M"), cfg.pop("BLOCK_N")
    assert BN % cache.page_size == 0 or cache.page_size % BN == 0
    kc, vc = cache.k_cache, cache.v_cache
    pt = cache.page_table
    num_pt = int(pt.shape[1])
    if num_pt == 0:
        # no page at all (every cache empty): a one-entry row the kernels may read, never use
        pt = torch.zeros(B, 1, dtype=torch.int32, device=q.device)
    pages = cfg.pop("PAGES", 0)
    diag_tile = cfg.pop("DIAG_TILE", False)
    general = contextual_seq_len > 0 or max_attn_len > 0
    persist = bool(cfg.pop("PERSIST", False)) and not general and BM % BN == 0 and B < 4096
    programs = cfg.pop("PROGRAMS", None)
    min_chunk = int(cfg.pop("MIN_CHUNK", 8))
    dp_spare = max(0, int(cfg.pop("DP_SPARE", 1)))  # DP: waves' worth of items left to stream-K
    dp = bool(cfg.pop("DP", False))
    uniform = bool(cfg.pop("UNIFORM", True)) and q.device.type == "cuda" and not interpret_mode() \
        and _redux_supported(q.device)
    two_loops = bool(cfg.pop("TWO_LOOPS", True))
    ws_perm = bool(cfg.pop("WS_PERM", True))  # persistent kernel: workspace rows' 16-byte pieces reordered
    # persistent kernel: GLUON (on by default on CUDA) runs its Gluon version (_cached_gluon) where
    # it can (sm_90, bf16/fp16, the default tiles: see _cached_gluon.usable), the Triton kernel
    # elsewhere; GLUON=False always runs the Triton kernel (docs/performance.md, "helper gluon4",
    # "helper gluon5"). GL_SK, GL_SV, GL_QB: that kernel's K/V ring depths and q buffers; GL_INPLAN
    # (default 1): its plan computed in the kernel (0: by the planner kernel); GL_STAGE (default 1):
    # outputs written through shared memory; GL_TMA (default 2): what its producer copies by TMA (0:
    # nothing, 1: the unmasked cached tiles, 2: and q); GL_CREGS / GL_PREGS: the registers of its
    # consumer warpgroups / producer (default 240 / 24 with TMA, 232 / 40 without)
    gluon_asked = bool(config) and "GLUON" in config
    gluon = bool(cfg.pop("GLUON", False))
    gl_keys = ("GL_SK", "GL_SV", "GL_QB", "GL_INPLAN", "GL_STAGE", "GL_TMA", "GL_CREGS", "GL_PREGS")
    gl_opts = {key[3:].lower(): int(cfg.pop(key)) for key in gl_keys if key in cfg}
    if persist and pages == 3:
        pages = 1  # (the persistent kernel reads pages through the page table)
    if pages == 5 and (q.device.type != "cuda" or interpret_mode()):
        pages = 0  # (the same loads without inline assembly)
    maxp = next_pow2(max(num_pt, 1))
    if pages == 1 and maxp > 1024:
        pages = 0  # page-table row too long to hold in registers
    page_contig = (kc.stride(1) == kc.shape[2] * kc.stride(2) and kc.stride(2) == D_QK and kc.stride(3) == 1
                   and vc.stride(1) == vc.shape[2] * vc.stride(2) and vc.stride(2) == D_V and vc.stride(3) == 1)
    if pages == 2 and not page_contig:
        pages = 0
    if pages == 2:
        # gather each sequence's cached pages into contiguous buffers, then read those
        cap = num_pt * cache.page_size
        ks = torch.empty(B, cap, H, D_QK, dtype=kc.dtype, device=kc.device)
        vs = torch.empty(B, cap, H, D_V, dtype=vc.dtype, device=vc.device)
        pk, pv = cache.page_size * H * D_QK, cache.page_size * H * D_V
        chunk = min(4096, pk, pv)
        if num_pt:
            _gather_pages_kernel[(B, num_pt)](
                kc, vc, pt, cache.cache_lens, ks, vs, kc.stride(0), vc.stride(0), pt.stride(0),
                ks.stride(0), vs.stride(0), PAGE=cache.page_size, PK=pk, PV=pv, CHUNK=chunk, num_warps=4,
            )
        kc, vc = ks, vs
    if pages == 3 and not (page_contig and kc.is_contiguous() and vc.is_contiguous()
                           and cache.page_size % BN == 0 and _has_descriptors()):
        pages = 1
    if pages == 3:
        from triton.tools.tensor_descriptor import TensorDescriptor

        kc = TensorDescriptor(kc, shape=[kc.shape[0] * kc.shape[1], H * D_QK], strides=[H * D_QK, 1],
                              block_shape=[BN, D_QK])
        vc = TensorDescriptor(vc, shape=[vc.shape[0] * vc.shape[1], H * D_V], strides=[H * D_V, 1],
                              block_shape=[BN, D_V])
        kc_strides, vc_strides = (0, 0, 0), (0, 0, 0)
    else:
        kc_strides, vc_strides = (kc.stride(0), kc.stride(1), kc.stride(2)), (vc.stride(0), vc.stride(1), vc.stride(2))
    if pages != 1:
        maxp = 1
    two_loops = two_loops and BN <= cache.page_size and pages in (0, 1, 5)  # (each tile in one page)
    global LAST_KERNEL
    if persist:
        for key in ("GRID_M", "SPLIT", "G_FAST", "FLAT"):
            cfg.pop(key, None)
        if programs is None:
            programs = _sm_count(q.device) if q.device.type == "cuda" else 3
        programs = max(1, int(programs))
        gluon = gluon and not interpret_mode() and pages in (0, 1, 5) and (gluon_asked or q.device.index not in
                                                                           _GLUON_FAILED) and _gluon_usable(
            q, kc, vc, D_QK, D_V, BM, BN, cache.page_size, fast)
        # two fp32 partial slots per program; an arrival counter per (head, query block)
        # (the Gluon kernel: one per half block)
        ws, cnt = _split_buffers(q.device, programs * 2 * BM * D_V, H * (cdiv(L, BM) + B) * (2 if gluon else 1))
        if gluon:
            try:
                handle = _GL.launch_gluon(
                    q, k, v, kc, vc, pt, cache.cache_lens, out, seq_offsets, num_targets, ws, cnt,
                    scale=float(alpha) * 0.5, inv_n=1.0 / max_seq_len, programs=programs, dp=dp, dp_spare=dp_spare,
                    min_chunk=min_chunk, uniform=uniform, page=cache.page_size, block_m=BM, block_n=BN, **gl_opts)
            except Exception as e:  # noqa: BLE001  (a Triton whose Gluon cannot build it: see below)
                if gluon_asked:
                    raise
                # the default call: a Triton whose Gluon API differs from 3.6's fails in the
                # compile, before anything is launched; the Triton kernel runs this and every
                # later call on the device
                _GLUON_FAILED[q.device.index] = repr(e)
                warnings.warn(f"tracekit: the Gluon cached-attention kernel failed to build ({e!r}); "
                              "using the Triton kernel", RuntimeWarning, stacklevel=2)
                handle = None
            if handle is not None:
                LAST_KERNEL = handle
                return out
        args = (
            q, k, v, kc, vc, pt, cache.cache_lens, out, seq_offsets,
            num_targets if num_targets is not None else seq_offsets,
            q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
            out.stride(0), out.stride(1), *kc_strides, *vc_strides, pt.stride(0),
            ws, cnt, float(alpha) * (0.5 if fast else 1.0), 1.0 / max_seq_len, num_pt, B, min_chunk, dp_spare,
        )
        consts = dict(
            H=H, D_QK=D_QK, D_V=D_V, PAGE=cache.page_size, BLOCK_M=BM, BLOCK_N=BN,
            HAS_TARGETS=num_targets is not None, FAST_SILU=fast, PAGES=pages, MAXP=maxp,
            FENCE=q.device.type == "cuda" and not interpret_mode(), CHUNK=min(64, D_V),
            BPOW=next_pow2(B + 1), TPOW=next_pow2(cdiv(L, BM) + 1), DP=dp,
            UNIFORM=uniform, TWO_LOOPS=two_loops, WS_PERM=ws_perm,
        )
        LAST_KERNEL = launch(_hstu_cached_sk_kernel, _SK_HANDLES, (programs,), args, consts, cfg, q.device)
        return out
    grid_m = cfg.pop("GRID_M", None)
    split = max(1, int(cfg.pop("SPLIT", 1)))
    bound = max_new_len if max_new_len is not None else min(max_seq_len, L)
    blocks = cdiv(bound, BM)
    if grid_m == 0:
        grid_m = blocks  # a program per query block the longest sequence could have
    if grid_m is None:
        # the longest new-token run is unknown on the host (no device sync): enough
        # programs per (sequence, head) for the average sequence's query blocks, and at
        # least about two programs per SM in all; each program loops over its sequence's
        # query blocks with that stride (longer sequences loop)
        fill = cdiv(2 * _sm_count(q.device), B * H * split) if q.device.type == "cuda" else blocks
        grid_m = max(cdiv(cdiv(L, B), BM), fill)
    G = max(1, min(blocks, grid_m))
    g_fast = bool(cfg.pop("G_FAST", False))
    flat = bool(cfg.pop("FLAT", False)) and B < 4096
    if flat:
        grid = ((cdiv(L, BM) + B) * H * split,)
    else:
        grid = (B * H * G * split,) if g_fast else (B * H, G, split)
    if split > 1:
        # per-token fp32 partial sums of each key run, and per (head, query block) arrival
        # counts (zero before and after every launch: the last program of a block resets its own)
        ws, cnt = _split_buffers(q.device, split * L * H * D_V, H * L)
        ws = ws[: split * L * H * D_V].view(split, L, H, D_V)
    else:
        ws, cnt = out, seq_offsets
    args = (
        q, k, v, kc, vc, pt, cache.cache_lens, out, seq_offsets,
        num_targets if num_targets is not None else seq_offsets,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        out.stride(0), out.stride(1),
        *kc_strides, *vc_strides, pt.stride(0),
        ws, cnt, ws.stride(0), ws.stride(1) if split > 1 else 0, ws.stride(2) if split > 1 else 0,
        float(alpha) * (0.5 if fast else 1.0), 1.0 / max_seq_len, contextual_seq_len, max_attn_len, num_pt,
        L, G, B,
    )
    consts = dict(
        H=H, D_QK=D_QK, D_V=D_V, PAGE=cache.page_size, BLOCK_M=BM, BLOCK_N=BN,
        HAS_TARGETS=num_targets is not None, GENERAL=contextual_seq_len > 0 or max_attn_len > 0,
        FAST_SILU=fast, PAGES=pages, MAXP=maxp, DIAG_TILE=diag_tile, SPLIT=split,
        FENCE=q.device.type == "cuda" and not interpret_mode(), G_FAST=g_fast, CHUNK=min(64, D_V),
        LOOP=G < blocks and not flat, FLAT=flat, BPOW=next_pow2(B + 1) if flat else 1,
    )
    if pages == 3:  # tensor descriptors: the JIT converts them per call
        LAST_KERNEL = _hstu_cached_kernel[grid](*args, **consts, **cfg)
    else:
        LAST_KERNEL = launch(_hstu_cached_kernel, _HANDLES, grid, args, consts, cfg, q.device)
    return out
