"""Triton forward kernels: block-sparse HSTU attention (BSA).

Two launches (semantics in :func:`tracekit.kernels.hstu_attention_block_sparse`):

1. ``_bsa_pool_kernel``: mean of k and v over each full block of the history (fp32
   accumulation), 2-warp programs;
2. ``_bsa_fused_kernel``, on sm_90+ a programmatic dependent launch of the first (its q and
   local block overlap the pool kernel's last programs; ``gdc_wait`` before the pooled keys
   are read): one program per (sequence, head, query block) does the rest:
   the compressed attention over the pooled blocks (tl.dot against the pooled keys, masked
   by block visibility; output kept in registers, block importances = column sums of the
   SiLU scores, kept in registers when the pass is one tile of BLOCK_C blocks, else written
   to a scratch row), the top-k selection in the program (every block's rank: one compare
   in registers, or [nb, 32] pieces of the scratch row, up to 128 blocks; else repeated
   arg-max), then HSTU attention over the local block (masked) and the selected blocks (no
   mask needed: they lie entirely before the query block, in the history), and the gated
   sum of both branches.

On the GPU at block_size 64 and d <= 128 the local block runs as the first iterations of the
selected loop (``LOOP_LOCAL``, settings in ``_LOOP_LOCAL_CFG``): less shared memory, so four
CTAs per SM up to 64 blocks. Both kernels are launched through their compiled handles after
the first call of a shape (``_launch``), the launch settings computed once per call shape
(``_plan``).

A given selection (``block_indices``, tests) skips the in-kernel top-k and masks every
selected block.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ._common import interpret_mode
from ._dense import _silu
from ._launch import launch

try:  # grid dependency control (programmatic dependent launch, sm_90+)
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
except ImportError:  # older Triton: PDL stays off
    gdc_launch_dependents = gdc_wait = None


@triton.jit
def _bsa_pool_kernel(
    K, V, KBAR, VBAR, SEQ_OFFSETS, NUM_TARGETS,
    stride_kt, stride_kh, stride_vt, stride_vh, stride_kb, stride_kc, stride_kbh, stride_vb, stride_vc, stride_vbh,
    inv_bs,
    H: tl.constexpr, D_QK: tl.constexpr, D_V: tl.constexpr, BS: tl.constexpr,
    HIST: tl.constexpr = False, HAS_TARGETS: tl.constexpr = False, PDL: tl.constexpr = False,
    SPLIT: tl.constexpr = False,
):
    """Mean of k and v over each full block of each sequence; zeros for partial/absent blocks.

    HIST: only the blocks inside the history (the last num_targets tokens are candidates)
    are pooled, the others are left unwritten: the compressed pass reads block c only where
    (c + 1) * BS <= history length. PDL: the fused kernel (launched as a programmatic
    dependent) may start as soon as every program of this one has started. SPLIT: k and v
    pooled by separate programs (grid axis 2)."""
    if PDL:
        gdc_launch_dependents()
    pid_bh = tl.program_id(0)
    c = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    start = tl.load(SEQ_OFFSETS + b).to(tl.int64)
    T = (tl.load(SEQ_OFFSETS + b + 1).to(tl.int64) - start).to(tl.int32)
    if HIST:
        if HAS_TARGETS:
            T = T - tl.maximum(tl.load(NUM_TARGETS + b).to(tl.int32), 0)  # (validate=False: never past T)
        if (c + 1) * BS > T:
            return
    lim = T * ((c + 1) * BS <= T).to(tl.int32)  # 0 unless block c is full
    offs = c * BS + tl.arange(0, BS)
    rmask = offs < lim
    if SPLIT:
        # k by the programs of grid axis 2 index 0, v by those of index 1
        if tl.program_id(2) == 0:
            _pool_one(K, KBAR, start, offs, rmask, b, c, h, stride_kt, stride_kh, stride_kb, stride_kc, stride_kbh,
                      inv_bs, D_QK)
        else:
            _pool_one(V, VBAR, start, offs, rmask, b, c, h, stride_vt, stride_vh, stride_vb, stride_vc, stride_vbh,
                      inv_bs, D_V)
    else:
        _pool_one(K, KBAR, start, offs, rmask, b, c, h, stride_kt, stride_kh, stride_kb, stride_kc, stride_kbh,
                  inv_bs, D_QK)
        _pool_one(V, VBAR, start, offs, rmask, b, c, h, stride_vt, stride_vh, stride_vb, stride_vc, stride_vbh,
                  inv_bs, D_V)


@triton.jit
def _pool_one(X, XBAR, start, offs, rmask, b, c, h, stride_xt, stride_xh, stride_xb, stride_xc, stride_xbh, inv_bs,
              D: tl.constexpr):
    """XBAR[b, c, h] = the mean of the rows offs (rmask) of X's head h."""
    offs_d = tl.arange(0, D)
    x = tl.load(X + (start + offs[:, None]) * stride_xt + h * stride_xh + offs_d[None, :], mask=rmask[:, None], other=0.0)
    xb = tl.sum(x.to(tl.float32), axis=0) * inv_bs
    tl.store(XBAR + b.to(tl.int64) * stride_xb + c * stride_xc + h * stride_xbh + offs_d, xb.to(XBAR.dtype.element_ty))


@triton.jit
def _bsa_local_kv(Kb, Vb, stride_kt, stride_vt, m0, offs_n0, offs_d, offs_dv, T):
    """The local key block's k (as [D_QK, BS]) and v, rows past the sequence zero."""
    offs_n = m0 + offs_n0
    kmask = offs_n < T
    k = tl.load(Kb + offs_n[None, :] * stride_kt + offs_d[:, None], mask=kmask[None, :], other=0.0)
    v = tl.load(Vb + offs_n[:, None] * stride_vt + offs_dv[None, :], mask=kmask[:, None], other=0.0)
    return k, v


@triton.jit
def _scores(q, k, r, scale, ROW_SCALE: tl.constexpr, FAST_SILU: tl.constexpr):
    """SiLU(alpha q k), times r per row (ROW_SCALE), as the PV product's operand type."""
    s = tl.dot(q, k)
    p = _silu(s, s, scale, False, FAST_SILU)
    if ROW_SCALE:
        p = p * r[:, None]
    return p.to(k.dtype)


@triton.jit
def _bsa_selected(acc, q, r, Sb, si, Kb, Vb, stride_kt, stride_vt, offs_n0, offs_d, offs_dv, scale, BS: tl.constexpr,
                  ROW_SCALE: tl.constexpr, FAST_SILU: tl.constexpr):
    """Selected block number si (its index in Sb): unmasked, it lies in the history before
    every query row."""
    c = tl.load(Sb + si)
    offs_n = c * BS + offs_n0
    k = tl.load(Kb + offs_n[None, :] * stride_kt + offs_d[:, None])
    p = _scores(q, k, r, scale, ROW_SCALE, FAST_SILU)
    v = tl.load(Vb + offs_n[:, None] * stride_vt + offs_dv[None, :])
    return acc + tl.dot(p, v)


@triton.jit
def _bsa_local(acc, q, r, k, v, m0, offs_m, offs_n0, T, hl, scale, ROW_SCALE: tl.constexpr, FAST_SILU: tl.constexpr):
    """The query block against its own key block (k, v from _bsa_local_kv) under the HSTU mask."""
    offs_n = m0 + offs_n0
    kmask = offs_n < T
    p = _scores(q, k, r, scale, ROW_SCALE, FAST_SILU)
    valid = (((offs_n[None, :] <= offs_m[:, None]) & (offs_n[None, :] < hl))
             | (offs_n[None, :] == offs_m[:, None])) & kmask[None, :]
    p = tl.where(valid, p, 0.0)
    return acc + tl.dot(p.to(v.dtype), v)


@triton.jit
def _bsa_cmp_load(KBb, VBb, stride_kbc, stride_vbc, offs_c, cend, offs_d, offs_dv):
    """The pooled keys (as [D_QK, BLOCK_C]) and values of the blocks offs_c, zeros from cend."""
    cmask = offs_c < cend
    kb = tl.load(KBb + offs_c[None, :] * stride_kbc + offs_d[:, None], mask=cmask[None, :], other=0.0)
    vb = tl.load(VBb + offs_c[:, None] * stride_vbc + offs_dv[None, :], mask=cmask[:, None], other=0.0)
    return kb, vb


@triton.jit
def _bsa_cmp_tile(acc, acc_c, q, rc, KBb, VBb, Ib, stride_kbc, stride_vbc, offs_c, cend, e, rmask, offs_d, offs_dv,
                  qb, scale, BS: tl.constexpr, LOCAL_FIRST: tl.constexpr, STORE_IMP: tl.constexpr,
                  FAST_SILU: tl.constexpr, kb_in, vb_in, PRELOADED: tl.constexpr):
    """One tile of the compressed pass: pooled blocks offs_c against the query block, the
    scores masked to the blocks fully inside each row's visible prefix (e), added to acc
    (times rc per row, LOCAL_FIRST) or acc_c. Also returns the blocks' importances (stored
    to the scratch row Ib too with STORE_IMP): column sums of the scores, -inf where no row
    sees the block fully (c >= cend: the last valid row sees the most) and for the local
    block (always processed, never selected). PRELOADED: the pooled tiles are kb_in, vb_in
    (from _bsa_cmp_load, issued earlier by the caller)."""
    cmask = offs_c < cend
    if PRELOADED:
        kb = kb_in
    else:
        kb = tl.load(KBb + offs_c[None, :] * stride_kbc + offs_d[:, None], mask=cmask[None, :], other=0.0)
    s = tl.dot(q, kb)
    p = _silu(s, s, scale, False, FAST_SILU)
    vis = ((offs_c[None, :] + 1) * BS <= e[:, None]) & rmask[:, None]
    p = tl.where(vis, p, 0.0)
    imp = tl.where(cmask & (offs_c != qb), tl.sum(p, axis=0), float("-inf"))
    if STORE_IMP:
        tl.store(Ib + offs_c, imp, mask=cmask)
    if PRELOADED:
        vb = vb_in
    else:
        vb = tl.load(VBb + offs_c[:, None] * stride_vbc + offs_dv[None, :], mask=cmask[:, None], other=0.0)
    if LOCAL_FIRST:
        acc += tl.dot((p * rc[:, None]).to(vb.dtype), vb)
    else:
        acc_c += tl.dot(p.to(vb.dtype), vb)
    return acc, acc_c, imp


@triton.jit
def _sel_key(imp, offs, W: tl.constexpr):
    """Order-preserving packed int64 key of importances: the fp32 bits as an ordered int32 in
    the high word, the index reversed in the low word (distinct keys; ties to the lower index)."""
    bits = imp.to(tl.int32, bitcast=True)
    bits = tl.where(bits < 0, bits ^ 0x7FFFFFFF, bits)
    return (bits.to(tl.int64) << 32) | (W - 1 - offs).to(tl.int64), bits


@triton.jit
def _bsa_fused_kernel(
    Q, K, V, KBAR, VBAR, IMP, SEL, OUT, GC, GS, SEQ_OFFSETS, NUM_TARGETS,
    stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh,
    stride_kbb, stride_kbc, stride_kbh, stride_vbb, stride_vbc, stride_vbh,
    stride_ib, stride_ih, stride_iq, stride_sb, stride_sh, stride_sq, stride_ot, stride_oh, stride_gt,
    scale, out_scale, inv_n, n_sel, n_qb,
    H: tl.constexpr, D_QK: tl.constexpr, D_V: tl.constexpr, BS: tl.constexpr, BLOCK_C: tl.constexpr,
    NB_P2: tl.constexpr, SELECT: tl.constexpr, QB_FAST: tl.constexpr, FOLD: tl.constexpr,
    CMP_STAGES: tl.constexpr, LOCAL_FIRST: tl.constexpr, ROW_SCALE: tl.constexpr,
    HAS_TARGETS: tl.constexpr, HAS_GC: tl.constexpr, HAS_GS: tl.constexpr, FAST_SILU: tl.constexpr,
    RANK_SEL: tl.constexpr = False, RANK_CHUNK: tl.constexpr = 0, ONE_CMP: tl.constexpr = False,
    W: tl.constexpr = 64, UNIFORM: tl.constexpr = False, PDL: tl.constexpr = False, PRE: tl.constexpr = False,
    SEL_STAGES: tl.constexpr = 0, LOOP_LOCAL: tl.constexpr = False,
    SUB: tl.constexpr = 64, CLAMP: tl.constexpr = False,
):
    """One program per (sequence, head, query block): compressed pass (output kept in
    registers, importances to a scratch row), top-k selection in the program (SELECT) or
    the given selection, then the local block (masked) and the selected blocks.

    QB_FAST: one flat grid, query block fastest (the programs in flight share a few
    (sequence, head) pairs, so the selected K/V blocks they read stay in L2); else the
    grid is (B*H, n_qb). FOLD: the compressed output (times its gate) initialises the one
    accumulator and the selected branch's scores are scaled per row (1/N times the gate)
    before their tl.dot, instead of a second [BS, D_V] fp32 accumulator. LOCAL_FIRST: the
    local block first (its loads issued with q's), the compressed scores scaled per row too
    (block_size/N times the gate), one accumulator throughout.

    ONE_CMP: the compressed pass is one BLOCK_C tile (all blocks fit), its importances stay in
    registers for the selection (no scratch row, no barrier). RANK_CHUNK: the rank compare in
    [NB_P2, RANK_CHUNK] pieces read from the scratch row (bounded registers at 128 blocks).
    UNIFORM (LOCAL_FIRST, no gate_slc): the selected-branch scale 1/N is the same for every
    row, so the local and selected scores are summed unscaled, the compressed ones scaled by
    block_size (times gate_cmp), and the sum times 1/N at the end (one FMUL per score less).

    PDL: launched as a programmatic dependent of the pool kernel: what comes before the first
    read of KBAR/VBAR (q and the local block's loads, and its product without PRE) runs while
    the pool kernel finishes; gdc_wait() then waits for the pool kernel's writes. PRE
    (LOCAL_FIRST): the first tile of pooled keys and values is loaded together with the local
    block's k and v, before its product.

    LOOP_LOCAL (SELECT, LOCAL_FIRST): the local block is not processed before the compressed
    pass but as the first iterations of the selected loop (its index in slot 0 of the
    selection row, its HSTU mask behind a branch), so the compressed pass holds only q and the
    pooled tiles in shared memory and the loop only q and its K/V buffers. SUB: the loop's
    iterations take SUB keys of a block (SUB < BS: smaller buffers, more iterations);
    SEL_STAGES: the loop's pipeline depth (0: num_stages); CLAMP: the loop's K/V rows clamped
    to the sequence's last row instead of predicated loads (only the local block reaches past
    it, and its mask zeroes those columns)."""
    if QB_FAST:
        pid = tl.program_id(0)
        pid_bh = pid // n_qb
        qb = n_qb - 1 - pid % n_qb
    else:
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
    offs_c0 = tl.arange(0, BLOCK_C)
    offs_d = tl.arange(0, D_QK)
    offs_dv = tl.arange(0, D_V)
    rmask = offs_m < T
    Qb = Q + start * stride_qt + h * stride_qh
    Kb = K + start * stride_kt + h * stride_kh
    Vb = V + start * stride_vt + h * stride_vh
    KBb = KBAR + b.to(tl.int64) * stride_kbb + h * stride_kbh
    VBb = VBAR + b.to(tl.int64) * stride_vbb + h * stride_vbh
    q = tl.load(Qb + offs_m[:, None] * stride_qt + offs_d[None, :], mask=rmask[:, None], other=0.0)

    r = tl.full([BS], 1.0, tl.float32) * inv_n
    rc = tl.full([BS], 1.0, tl.float32) * out_scale
    if HAS_GS:
        r = r * tl.load(GS + (start + offs_m) * stride_gt + h, mask=rmask, other=0.0).to(tl.float32)
    if HAS_GC:
        rc = rc * tl.load(GC + (start + offs_m) * stride_gt + h, mask=rmask, other=0.0).to(tl.float32)
    if UNIFORM:
        rc = rc / inv_n
    acc = tl.zeros([BS, D_V], dtype=tl.float32)
    cend = tl.minimum(m0 + BS, hl) // BS
    kb_pre = q
    vb_pre = q
    if LOOP_LOCAL:
        # the local block runs as the first iterations of the selected loop
        if PRE:
            if PDL:
                gdc_wait()
            kb_pre, vb_pre = _bsa_cmp_load(KBb, VBb, stride_kbc, stride_vbc, offs_c0, cend, offs_d, offs_dv)
    elif LOCAL_FIRST:
        kl, vl = _bsa_local_kv(Kb, Vb, stride_kt, stride_vt, m0, offs_n0, offs_d, offs_dv, T)
        if PRE:
            if PDL:
                gdc_wait()
            kb_pre, vb_pre = _bsa_cmp_load(KBb, VBb, stride_kbc, stride_vbc, offs_c0, cend, offs_d, offs_dv)
        acc = _bsa_local(acc, q, r, kl, vl, m0, offs_m, offs_n0, T, hl, scale, not UNIFORM, FAST_SILU)
    if PDL and not (PRE and LOCAL_FIRST):
        gdc_wait()

    # 1. compressed pass over the pooled blocks fully inside each row's visible prefix
    e = tl.minimum(offs_m + 1, hl)
    acc_c = tl.zeros([BS, D_V], dtype=tl.float32)
    Ib = IMP + b.to(tl.int64) * stride_ib + h * stride_ih + qb * stride_iq
    if ONE_CMP:
        acc, acc_c, imp_reg = _bsa_cmp_tile(acc, acc_c, q, rc, KBb, VBb, Ib, stride_kbc, stride_vbc, offs_c0, cend, e,
                                            rmask, offs_d, offs_dv, qb, scale, BS, LOCAL_FIRST, False, FAST_SILU,
                                            kb_pre, vb_pre, PRE and LOCAL_FIRST)
    else:
        c_first = 0
        if PRE and LOCAL_FIRST:
            # the first tile from the pooled tiles loaded early, the loop from the second
            acc, acc_c, _ = _bsa_cmp_tile(acc, acc_c, q, rc, KBb, VBb, Ib, stride_kbc, stride_vbc, offs_c0, cend, e,
                                          rmask, offs_d, offs_dv, qb, scale, BS, LOCAL_FIRST, SELECT, FAST_SILU,
                                          kb_pre, vb_pre, True)
            c_first = BLOCK_C
        for c0 in tl.range(c_first, cend, BLOCK_C, num_stages=CMP_STAGES):
            acc, acc_c, _ = _bsa_cmp_tile(acc, acc_c, q, rc, KBb, VBb, Ib, stride_kbc, stride_vbc, c0 + offs_c0, cend,
                                          e, rmask, offs_d, offs_dv, qb, scale, BS, LOCAL_FIRST, SELECT, FAST_SILU,
                                          q, q, False)

    # 2. selection on a packed int64 key per block (order-preserving int32 of the fp32
    #    importance, then the index reversed so that ties go to the lower block index): every
    #    block's rank (RANK_SEL), or n_sel rounds of arg-max, one reduction each; -1 once only
    #    -inf is left
    Sb = SEL + b.to(tl.int64) * stride_sb + h * stride_sh + qb * stride_sq
    if LOOP_LOCAL:
        # slot 0 holds the local block, the selection follows from slot 1
        tl.store(Sb, qb)
        Sb += 1
    n_valid = n_sel
    if SELECT:
        # W: BLOCK_C with ONE_CMP, else NB_P2
        if ONE_CMP:
            offs_a = offs_c0
            key, bits = _sel_key(imp_reg, offs_a, W)
        else:
            tl.debug_barrier()
            offs_a = tl.arange(0, W)
            key, bits = _sel_key(tl.load(Ib + offs_a, mask=offs_a < cend, other=float("-inf")), offs_a, W)
        dead = tl.full([W], -2147483648, tl.int64) << 32
        neg_inf_key = -2139095041  # order-preserving int32 of -inf
        if RANK_SEL:
            # all rounds at once: each block's rank is the number of keys above its own (keys
            # are distinct), its slot is its rank; one [W, W] compare (or RANK_CHUNK-wide pieces
            # of it) and a sum instead of n_sel dependent reductions. Same order as the rounds.
            if RANK_CHUNK > 0:
                rank = tl.zeros([W], tl.int32)
                for j0 in tl.static_range(0, W, RANK_CHUNK):
                    offs_j = j0 + tl.arange(0, RANK_CHUNK)
                    key_j, _ = _sel_key(tl.load(Ib + offs_j, mask=offs_j < cend, other=float("-inf")), offs_j, W)
                    rank += tl.sum((key_j[None, :] > key[:, None]).to(tl.int32), axis=1)
            else:
                rank = tl.sum((key[None, :] > key[:, None]).to(tl.int32), axis=1)
            ok = (bits > neg_inf_key) & (rank < n_sel)
            tl.store(Sb + rank, tl.where(ok, offs_a, -1), mask=rank < n_sel)
            n_valid = tl.sum(ok.to(tl.int32), axis=0)
        else:
            n_valid = 0
            for j in range(0, n_sel):
                mk = tl.max(key, axis=0)
                hi = mk >> 32
                idx = W - 1 - (mk - (hi << 32)).to(tl.int32)
                ok = hi > neg_inf_key
                tl.store(Sb + j, tl.where(ok, idx, -1))
                n_valid += ok.to(tl.int32)
                key = tl.where(offs_a == idx, dead, key)
        tl.debug_barrier()

    # 3. selected branch: the local block (HSTU mask), then the selected blocks
    if not LOCAL_FIRST:
        if FOLD:
            acc = acc_c * rc[:, None]
        else:
            r = tl.full([BS], 1.0, tl.float32)
        kl, vl = _bsa_local_kv(Kb, Vb, stride_kt, stride_vt, m0, offs_n0, offs_d, offs_dv, T)
        acc = _bsa_local(acc, q, r, kl, vl, m0, offs_m, offs_n0, T, hl, scale, FOLD, FAST_SILU)
    if SELECT and LOOP_LOCAL:
        # iterations of SUB keys: the local block's first (HSTU mask), then the selected blocks'
        # (no mask, see below). The accumulator passes through a select and the loop sits in a
        # branch so that the wgmma wait after the loop does not keep the pooled tiles' shared
        # memory live through the loop (Triton threads the memdesc operands of the dots that
        # feed the loop's operands in the same block through that wait).
        acc = tl.where(rmask[:, None], acc, 0.0)
        if n_valid >= 0:
            offs_s0 = tl.arange(0, SUB)
            for it in tl.range(0, (BS // SUB) * (n_valid + 1), num_stages=SEL_STAGES if SEL_STAGES > 0 else None):
                j = it // (BS // SUB)
                c = tl.load(Sb - 1 + j)
                offs_n = c * BS + (it % (BS // SUB)) * SUB + offs_s0
                kmask = offs_n < T
                if CLAMP:
                    # rows past the sequence (the local block of its last query block) read its
                    # last row, finite, and are masked out of p below
                    offs_l = tl.minimum(offs_n, T - 1)
                    k = tl.load(Kb + offs_l[None, :] * stride_kt + offs_d[:, None])
                else:
                    offs_l = offs_n
                    k = tl.load(Kb + offs_n[None, :] * stride_kt + offs_d[:, None], mask=kmask[None, :], other=0.0)
                p = _scores(q, k, r, scale, ROW_SCALE and not UNIFORM, FAST_SILU)
                if j == 0:
                    valid = (((offs_n[None, :] <= offs_m[:, None]) & (offs_n[None, :] < hl))
                             | (offs_n[None, :] == offs_m[:, None])) & kmask[None, :]
                    p = tl.where(valid, p, 0.0)
                if CLAMP:
                    v = tl.load(Vb + offs_l[:, None] * stride_vt + offs_dv[None, :])
                else:
                    v = tl.load(Vb + offs_n[:, None] * stride_vt + offs_dv[None, :], mask=kmask[:, None], other=0.0)
                acc += tl.dot(p, v)
    elif SELECT:
        # a selected block c is compressed-visible to a row of this query block and is not
        # the local block: (c + 1) * BS <= min(m0 + BS, hl), so c < qb and every key of c is
        # history before every query row: no mask
        for si in tl.range(0, n_valid, num_stages=SEL_STAGES if SEL_STAGES > 0 else None):
            acc = _bsa_selected(acc, q, r, Sb, si, Kb, Vb, stride_kt, stride_vt, offs_n0, offs_d, offs_dv, scale,
                                BS, ROW_SCALE and not UNIFORM, FAST_SILU)
    else:
        for si in range(0, n_sel):
            c = tl.load(Sb + si)
            offs_n = tl.maximum(c, 0) * BS + offs_n0
            kmask = offs_n < T * (c >= 0).to(tl.int32)  # nothing for an empty slot (c = -1)
            k = tl.load(Kb + offs_n[None, :] * stride_kt + offs_d[:, None], mask=kmask[None, :], other=0.0)
            p = _scores(q, k, r, scale, ROW_SCALE and not UNIFORM, FAST_SILU)
            valid = (((offs_n[None, :] <= offs_m[:, None]) & (offs_n[None, :] < hl))
                     | (offs_n[None, :] == offs_m[:, None])) & kmask[None, :]
            p = tl.where(valid, p, 0.0)
            v = tl.load(Vb + offs_n[:, None] * stride_vt + offs_dv[None, :], mask=kmask[:, None], other=0.0)
            acc += tl.dot(p.to(v.dtype), v)
    if UNIFORM:
        acc = acc * inv_n
    if not ROW_SCALE:
        acc = acc * inv_n
        if HAS_GS:
            acc = acc * tl.load(GS + (start + offs_m) * stride_gt + h, mask=rmask, other=0.0).to(tl.float32)[:, None]
        acc += acc_c * rc[:, None]
    tl.store(OUT + (start + offs_m[:, None]) * stride_ot + h * stride_oh + offs_dv[None, :],
             acc.to(OUT.dtype.element_ty), mask=rmask[:, None])


LAST_KERNEL = None  # the last compiled fused kernel launched (benchmarks' compile report)
_POOL_HANDLES: dict = {}  # compiled kernels per specialisation (see _launch)
_FUSED_HANDLES: dict = {}
_PLANS: dict = {}  # the launch settings per call shape and config (see _plan)
_OPTIONS = ("num_warps", "num_stages", "maxnreg", "num_ctas", "launch_pdl")


def _pool(k, v, kbar, vbar, seq_offsets, block_size: int, num_targets=None, hist=False, pdl=False, num_warps=2,
          split=False):
    """kbar, vbar [B, nb, H, D] = the means of k, v over each full block (zeros elsewhere;
    hist: only the blocks inside each sequence's history are written)."""
    B, nb, H, D_QK = kbar.shape
    consts = dict(H=H, D_QK=D_QK, D_V=vbar.shape[3], BS=block_size, HIST=hist, HAS_TARGETS=num_targets is not None,
                  PDL=pdl, SPLIT=split)
    _launch_pool(k, v, kbar, vbar, seq_offsets, num_targets, block_size, (B * H, nb, 2 if split else 1), consts,
                 {"num_warps": num_warps})


def _launch_pool(k, v, kbar, vbar, seq_offsets, num_targets, block_size, grid, consts, options):
    args = (k, v, kbar, vbar, seq_offsets, num_targets if num_targets is not None else seq_offsets,
            k.stride(0), k.stride(1), v.stride(0), v.stride(1),
            kbar.stride(0), kbar.stride(1), kbar.stride(2), vbar.stride(0), vbar.stride(1), vbar.stride(2),
            1.0 / block_size)
    launch(_bsa_pool_kernel, _POOL_HANDLES, grid, args, consts, options, k.device)


# LOOP_LOCAL's defaults by the compressed pass's kind (one tile of 64 blocks or more):
# - one tile (up to 64 blocks, e.g. T=4096): the loop in 32-key halves, double-buffered
#   (q 16 KB + 2 x 16 KB; the compressed pass needs q and the pooled tiles, 48 KB) and 128
#   registers: four 4-warp CTAs per SM (the local block first needs 114.7 KB: two);
# - more (e.g. T=8192, 128 blocks, 243-255 registers: two CTAs either way): whole blocks, K/V
#   three deep (q 16 KB + 3 x 32 KB), two blocks ahead.
# CLAMP: the loop's K/V rows clamped to the sequence instead of predicated loads.
_LOOP_LOCAL_CFG = {
    True: dict(SUB=32, SEL_STAGES=2, maxnreg=128, CLAMP=True),
    False: dict(SUB=64, CLAMP=True),
}


def _fast(device) -> bool:
    """Compiled for a GPU (not the interpreter): the tanh SiLU, tensor-core tiles."""
    return device.type == "cuda" and not interpret_mode()


def _capability(device):
    import torch

    return torch.cuda.get_device_capability(device)


def _cfg(device_type: str, d: int, bs: int) -> dict:
    if device_type != "cuda":
        return {"num_warps": 4, "num_stages": 1}
    if bs >= 128 or d > 128:
        return {"num_warps": 8, "num_stages": 2}
    return {"num_warps": 4, "num_stages": 3}


def _constexpr_params(kernel) -> dict:
    """The kernel's constexpr parameters in order, with their defaults (the JIT function's or,
    under the interpreter, the Python function's)."""
    import inspect

    fn = kernel
    while hasattr(fn, "fn"):  # JITFunction / InterpretedFunction around the Python function
        fn = fn.fn
    return {p.name: p.default for p in inspect.signature(fn).parameters.values()
            if "constexpr" in str(p.annotation)}


def _plan(device, H, D_QK, D_V, max_seq_len, block_size, block_counts, has_targets, has_gc, has_gs, select,
          config) -> dict:
    """What a call of this shape and config launches: both kernels' constants and options,
    the strides of the buffers it allocates. Computed once per key (hstu_bsa_fwd's _PLANS)."""
    fast = _fast(device)
    cfg = dict(_cfg(device.type, max(D_QK, D_V), block_size))
    cfg.update(config or {})
    nb = triton.cdiv(max_seq_len, block_size)
    block_c = cfg.pop("BLOCK_C", 64 if fast else 16)
    qb_fast = cfg.pop("QB_FAST", True)
    fold = cfg.pop("FOLD", True)
    cmp_stages = cfg.pop("CMP_STAGES", 2)
    local_first = cfg.pop("LOCAL_FIRST", True)
    nb_p2 = triton.next_power_of_2(nb)
    # the compressed pass as one tile, its importances kept in registers, when all blocks fit
    one_cmp = cfg.pop("ONE_CMP", True) and nb_p2 <= block_c
    # the selection as ranks (in registers with one_cmp, else compared in [nb, 32] pieces of
    # the scratch row) up to 128 blocks, else the arg-max rounds
    rank_sel = cfg.pop("RANK_SEL", nb_p2 <= 128)
    rank_chunk = cfg.pop("RANK_CHUNK", 32 if nb_p2 > 32 else 0)
    rank_chunk = 0 if one_cmp or rank_chunk >= nb_p2 else rank_chunk
    # the selected branch's 1/N applied once at the end when no gate_slc scales its rows
    uniform = cfg.pop("UNIFORM", True) and local_first and not has_gs
    # the fused kernel as a programmatic dependent launch of the pool kernel (sm_90+): its
    # q and local block overlap the pool's last programs
    pdl = bool(cfg.pop("PDL", True) and fast and gdc_wait is not None and _capability(device)[0] >= 9)
    # the (first) pooled tiles loaded with the local block's k and v
    pre = cfg.pop("PRE", True) and local_first
    # only the history's blocks pooled (the candidates' are never read)
    hist = cfg.pop("POOL_HIST", True)
    pool_warps = cfg.pop("POOL_WARPS", 2)
    pool_split = cfg.pop("POOL_SPLIT", False)
    # the local block as the first iterations of the selected loop, in iterations of SUB keys
    # (its index in slot 0 of the selection row). By default on the GPU where it was measured
    # (block_size 64, d <= 128, 4 warps), with the tuned settings of _LOOP_LOCAL_CFG
    tuned = (fast and select and local_first and block_size == 64 and max(D_QK, D_V) <= 128
             and cfg.get("num_warps") == 4 and "LOOP_LOCAL" not in cfg)
    loop_local = int(bool(cfg.pop("LOOP_LOCAL", tuned)) and select and local_first)
    if tuned:
        for key, val in _LOOP_LOCAL_CFG[one_cmp].items():
            cfg.setdefault(key, val)
    sub = cfg.pop("SUB", block_size)
    # SUB divides block_size (powers of two); tensor-core dots need >= 16
    sub = min(max(sub, 16 if fast else 1), block_size) if loop_local else block_size
    if pdl:
        cfg["launch_pdl"] = True
    options = {k: cfg.pop(k) for k in _OPTIONS if k in cfg}
    vals = dict(H=H, D_QK=D_QK, D_V=D_V, BS=block_size, BLOCK_C=block_c, NB_P2=nb_p2, SELECT=select,
                QB_FAST=qb_fast, FOLD=fold, CMP_STAGES=cmp_stages, LOCAL_FIRST=local_first,
                ROW_SCALE=fold or local_first, HAS_TARGETS=has_targets, HAS_GC=has_gc, HAS_GS=has_gs,
                FAST_SILU=fast, RANK_SEL=rank_sel, RANK_CHUNK=rank_chunk, ONE_CMP=one_cmp,
                W=block_c if one_cmp else nb_p2, UNIFORM=uniform, PDL=pdl, PRE=pre, LOOP_LOCAL=bool(loop_local),
                SUB=sub)
    vals.update(cfg)  # the kernel's other constants given in config (SEL_STAGES, CLAMP, ...)
    params = _constexpr_params(_bsa_fused_kernel)
    unknown = set(vals) - set(params)
    if unknown:
        raise TypeError(f"unknown block-sparse config keys: {sorted(unknown)}")
    consts = {n: vals.get(n, default) for n, default in params.items()}
    pool_consts = dict(H=H, D_QK=D_QK, D_V=D_V, BS=block_size, HIST=hist, HAS_TARGETS=has_targets, PDL=pdl,
                       SPLIT=pool_split)
    # the strides of the buffers each call allocates (contiguous; none depends on B)
    kk = min(block_counts, nb) + loop_local
    bufs = (nb * H * D_QK, H * D_QK, D_QK, nb * H * D_V, H * D_V, D_V)
    bufs += (1, 1, 1) if one_cmp or not select else (H * nb * nb, nb * nb, nb)
    bufs += (H * nb * kk, nb * kk, kk) if select else ()
    return dict(fast=fast, nb=nb, one_cmp=one_cmp, loop_local=loop_local, qb_fast=qb_fast, consts=consts, bufs=bufs,
                options=options, pool_consts=pool_consts, pool_options={"num_warps": pool_warps},
                pool_z=2 if pool_split else 1)


def hstu_bsa_fwd(
    q, k, v, seq_offsets, *, max_seq_len, alpha, block_size, block_counts, num_targets,
    gate_cmp=None, gate_slc=None, return_block_indices=False, out=None, block_indices=None, config=None,
):
    import torch

    L, H, D_QK = q.shape
    D_V = v.shape[2]
    dev = q.device
    if q.stride(-1) != 1 or k.stride(-1) != 1 or v.stride(-1) != 1:
        q, k, v = (x if x.stride(-1) == 1 else x.contiguous() for x in (q, k, v))
    if out is None:
        out = torch.empty(L, H, D_V, dtype=q.dtype, device=dev)
    B = seq_offsets.numel() - 1
    if L == 0 or B == 0:
        nb = triton.cdiv(max_seq_len, block_size)
        sel = torch.full((B, H, nb, block_counts + 1), -1, dtype=torch.int32, device=dev)
        return (out, sel) if return_block_indices else out
    if gate_cmp is not None and not gate_cmp.is_contiguous():
        gate_cmp = gate_cmp.contiguous()
    if gate_slc is not None and not gate_slc.is_contiguous():
        gate_slc = gate_slc.contiguous()
    select = block_indices is None
    key = (dev, H, D_QK, D_V, max_seq_len, block_size, block_counts, num_targets is not None, gate_cmp is not None,
           gate_slc is not None, select, tuple(sorted(config.items())) if config else None)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS[key] = _plan(dev, H, D_QK, D_V, max_seq_len, block_size, block_counts, num_targets is not None,
                                   gate_cmp is not None, gate_slc is not None, select, config)
    nb, one_cmp, loop_local = plan["nb"], plan["one_cmp"], plan["loop_local"]
    scale = float(alpha) * (0.5 if plan["fast"] else 1.0)
    kbar = torch.empty(B, nb, H, D_QK, dtype=q.dtype, device=dev)
    vbar = torch.empty(B, nb, H, D_V, dtype=q.dtype, device=dev)
    gc = gate_cmp if gate_cmp is not None else seq_offsets
    gs = gate_slc if gate_slc is not None else seq_offsets
    gstride = gate_cmp if gate_cmp is not None else gate_slc
    if select:
        kk = min(block_counts, nb)
        # importance scratch: one row per (sequence, head, query block), written and read
        # back by the same program (not used with one_cmp)
        imp = (torch.empty(B, H, nb, nb, dtype=torch.float32, device=dev) if not one_cmp
               else torch.empty(1, 1, 1, 1, dtype=torch.float32, device=dev))
        sel = torch.empty(B, H, nb, kk + loop_local, dtype=torch.int32, device=dev)
    else:
        # given as [B, H, nqb, block_counts + 1] with the local block first
        sel = block_indices[..., 1:].to(torch.int32).contiguous()
        kk = sel.shape[3]
        imp = sel
    # the pool kernel right before the fused one (nothing launched between them: with PDL the
    # fused kernel's gdc_wait() waits for the kernel launched just before it)
    _launch_pool(k, v, kbar, vbar, seq_offsets, num_targets, block_size, (B * H, nb, plan["pool_z"]),
                 plan["pool_consts"], plan["pool_options"])
    grid = (B * H * nb,) if plan["qb_fast"] else (B * H, nb)
    bufs = plan["bufs"] if select else plan["bufs"][:6] + (sel.stride(0), sel.stride(1), sel.stride(2)) * 2
    args = (q, k, v, kbar, vbar, imp, sel, out, gc, gs, seq_offsets,
            num_targets if num_targets is not None else seq_offsets,
            q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1), *bufs,
            out.stride(0), out.stride(1), gstride.stride(0) if gstride is not None else 0,
            scale, block_size / max_seq_len, 1.0 / max_seq_len, kk, nb)
    global LAST_KERNEL
    LAST_KERNEL = launch(_bsa_fused_kernel, _FUSED_HANDLES, grid, args, plan["consts"], plan["options"], dev)
    if return_block_indices:
        local = torch.arange(nb, device=dev, dtype=torch.int32).view(1, 1, nb, 1).expand(B, H, nb, 1)
        off = seq_offsets.to(torch.int64)
        qvalid = (torch.arange(nb, device=dev).view(1, 1, nb, 1) * block_size
                  < (off[1:] - off[:-1]).view(B, 1, 1, 1))
        full = torch.full((B, H, nb, block_counts + 1), -1, dtype=torch.int32, device=dev)
        full[..., :1] = torch.where(qvalid, local, -1)
        full[..., 1 : 1 + kk] = torch.where(qvalid, sel[..., loop_local:], -1)
        return out, full
    return out
