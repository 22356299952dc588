"""Gluon (Hopper) version of the persistent cached kernel: FA3's structure for the default mask.

The schedule is the Triton kernel's (``_hstu_cached_sk_kernel``: whole items in DP waves, then
stream-K chunks). Each program computes its own pieces in its prologue (``_gl_plan``: the 4 default
warps, before the partitions start; the per-sequence figures as vectors over lanes, each piece's
query block by bisection over closed-form sums) into its rows of a table of pieces; ``INPLAN=0``
has the planner kernel ``_sk_plan_kernel`` (the Triton functions, one program per persistent
program) write the same table before the launch instead. ``_hstu_cached_gl_kernel`` then runs
each program's pieces with warp specialization: a producer partition (4 warps) copies q and every
K/V tile of the pieces into rings of ``SK`` / ``SV`` slots, gathered through the page table: q and
the unmasked cached tiles (whole pages, in a loop of their own) by TMA (``TMA``: a tile is one box
of the cache seen as a [pages * PAGE, H * D] matrix, a phantom tile a box past its rows, i.e.
zeros), the other tiles (the partial cached tile, the new keys) by cp.async with clamped
addresses, a phantom zero-filled; two consumer warpgroups (64 query rows each) compute; per ring
slot a ``full`` mbarrier (the producer's 128 threads arrive, cp.async's as their copies land, or
one arrival with the TMA's bytes and 127 at once) and an ``empty`` one (each consumer arrives once
its products have read the slot). The TMA copies matter: with every tile by cp.async the unmasked
tile took ~1,690 cycles, by TMA ~1,320 (docs/performance.md, "helper gluon4"). A consumer issues QK_{j+1} with PV_j, waits for
QK_{j+1} only and computes its SiLU (and mask) while PV_j runs (FA3's intra-warpgroup overlap; two
steps a loop trip, so that ptxas keeps P_j and P_{j+1} in distinct registers, see
benchmarks/attention_cached_gluon.py). Each consumer finishes its 64 rows on its own: a whole item
is written out; a cut piece that finds the item's other pieces all counted adds their partials to
its own accumulator and writes the output; any other cut piece stores its fp32 partial and counts
its arrival on the (item, half) counter, and the one that arrives last sums the partials (as the
Triton kernel does per item). Outputs go through the consumer's half of the piece's q buffer
(``STAGE``: 16-byte stores instead of the accumulator layout's 4-byte ones).

Needs Triton >= 3.6 with ``triton.experimental.gluon`` and an sm_90 GPU (wgmma); the caller
falls back to the Triton kernel otherwise (and in the interpreter). The default where it can run;
config ``GLUON=False`` runs the Triton kernel.
No spills at the defaults (d = 64, 128, 256; Triton 3.6's ptxas): the sums of partials add a
column half at a time (``_gl_sums``: the accumulator and a whole loaded partial did not fit the
consumers' registers), the producer's cp.async tiles are copied one row a thread (one address a
thread instead of eight), and the consumers get 240 registers, the producer 24
(docs/performance.md, "helper gluon6").
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    async_copy,
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from ._cached import _sk_item_start, _sk_locate, _sk_sequences, _uniform
from ._launch import cdiv, next_pow2

NF = 16  # int32 fields per piece in the plan


# ---------------------------------------------------------------- the schedule (Triton)
@triton.jit
def _sk_plan_piece(i, lo, hi, pid, s0, chunk, row, SEQ_OFFSETS, CACHE_LENS, NUM_TARGETS, nseq,
                   H: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HAS_TARGETS: tl.constexpr,
                   BPOW: tl.constexpr, TPOW: tl.constexpr):
    """The piece from iteration i (``_sk_locate``, as ``_sk_segment`` finds it), written to the
    plan row ``row`` instead of computed on; returns the end of the piece."""
    offs_b, _, nbv, _, b, h, t, _, _, _, nb, item_lo, item_hi, seg_hi = _sk_locate(
        i, hi, SEQ_OFFSETS, CACHE_LENS, NUM_TARGETS, nseq, H, BLOCK_M, BLOCK_N, HAS_TARGETS, BPOW, TPOW)
    whole = ((item_lo >= lo) & (item_hi <= hi)).to(tl.int32)
    slot = pid * 2 + tl.where(item_lo <= lo, 0, 1)
    item = tl.sum(tl.where(offs_b < b, nbv, 0)) * H + h * nb + t
    tl.store(row + 0, b)
    tl.store(row + 1, h)
    tl.store(row + 2, t)
    tl.store(row + 3, i - item_lo)
    tl.store(row + 4, seg_hi - item_lo)
    tl.store(row + 5, whole)
    tl.store(row + 6, slot)
    tl.store(row + 7, item)
    tl.store(row + 8, (item_lo - s0) // chunk)
    tl.store(row + 9, (item_hi - 1 - s0) // chunk)
    tl.store(row + 10, item_lo)
    tl.store(row + 11, s0)
    tl.store(row + 12, chunk)
    return seg_hi


@triton.jit
def _sk_plan_kernel(SEQ_OFFSETS, CACHE_LENS, NUM_TARGETS, PLAN, PLAN_N, nseq, min_chunk, dp_spare, MAXPC,
                    H: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HAS_TARGETS: tl.constexpr,
                    BPOW: tl.constexpr, TPOW: tl.constexpr, DP: tl.constexpr, UNIFORM: tl.constexpr):
    """The pieces of persistent program ``pid`` in order (``_hstu_cached_sk_kernel``'s loop), at
    most MAXPC of them, into PLAN[pid]; their count into PLAN_N[pid]."""
    pid = tl.program_id(0)
    P = tl.num_programs(0)
    offs_b = tl.arange(0, BPOW)
    o0, nv, cv, nhv, nbv, wv = _sk_sequences(SEQ_OFFSETS, CACHE_LENS, NUM_TARGETS, nseq, offs_b, BLOCK_M, BLOCK_N,
                                             HAS_TARGETS)
    total = _uniform(tl.sum(wv * H), UNIFORM)
    base = PLAN + pid.to(tl.int64) * MAXPC * 16
    npc = 0
    if DP:
        items = _uniform(tl.sum(nbv) * H, UNIFORM)
        waves = tl.maximum(items // P - dp_spare, 0)
        s0 = 0
        if waves > 0:
            s0 = _uniform(_sk_item_start(waves * P, SEQ_OFFSETS, CACHE_LENS, NUM_TARGETS, nseq, H, BLOCK_M,
                                         BLOCK_N, HAS_TARGETS, BPOW, TPOW), UNIFORM)
        chunk = tl.maximum(tl.cdiv(total - s0, P), min_chunk)
        lo = s0 + pid * chunk
        hi = tl.minimum(lo + chunk, total)
        k = 0
        i = lo
        while ((k < waves) | (i < hi)) & (npc < MAXPC):
            in_dp = k < waves
            j = i
            if in_dp:
                j = _sk_item_start(k * P + pid, SEQ_OFFSETS, CACHE_LENS, NUM_TARGETS, nseq, H, BLOCK_M, BLOCK_N,
                                   HAS_TARGETS, BPOW, TPOW)
            e = _sk_plan_piece(j, tl.where(in_dp, j, lo), tl.where(in_dp, total, hi), pid, s0, chunk,
                               base + npc * 16, SEQ_OFFSETS, CACHE_LENS, NUM_TARGETS, nseq, H, BLOCK_M, BLOCK_N,
                               HAS_TARGETS, BPOW, TPOW)
            npc += 1
            i = tl.where(in_dp, i, e)
            k += 1
    else:
        chunk = tl.maximum(tl.cdiv(total, P), min_chunk)
        lo = pid * chunk
        hi = tl.minimum(lo + chunk, total)
        i = lo
        while (i < hi) & (npc < MAXPC):
            i = _sk_plan_piece(i, lo, hi, pid, 0, chunk, base + npc * 16, SEQ_OFFSETS, CACHE_LENS, NUM_TARGETS,
                               nseq, H, BLOCK_M, BLOCK_N, HAS_TARGETS, BPOW, TPOW)
            npc += 1
    tl.store(PLAN_N + pid, npc)


# ---------------------------------------------------------------- the kernel (Gluon)
@gluon.jit
def _gl_tanh(x):
    return gl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=r,r", [x], dtype=gl.float32, is_pure=True,
                                     pack=1)


@gluon.jit
def _gl_fence(x):
    """``fence.acq_rel.gpu`` in every thread holding an element of x (``__threadfence``)."""
    return gl.inline_asm_elementwise("fence.acq_rel.gpu;\n\tmov.b32 $0, $1;", "=r,r", [x], dtype=gl.int32,
                                     is_pure=False, pack=1)


@gluon.jit
def _gl_here(x):
    """x through an assembly move that has side effects: values computed from it stay where they
    are used instead of being hoisted out of the loop around them (and held in registers over it)."""
    return gl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=gl.int32, is_pure=False, pack=1)


# ---------------------------------------------------------------- the schedule (Gluon, in the kernel)
@gluon.jit
def _gl_add(a, b):
    return a + b


@gluon.jit
def _gl_prefix(T, C, n, nh, nb, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HAS_TARGETS: gl.constexpr):
    """Iterations of query blocks 0 .. min(T, nb) - 1 of one head of a sequence: the sum of
    ``_sk_block_iters`` in closed form (the history tiles as ``_sk_sequences`` counts them; the
    candidate tiles of consecutive tile-aligned blocks telescope)."""
    R: gl.constexpr = BLOCK_M // BLOCK_N
    T = gl.minimum(T, nb)
    chv = gl.cdiv(nh, BLOCK_N)
    f = gl.minimum(chv // R, T)
    s = T * gl.cdiv(C, BLOCK_N) + R * f * (f + 1) // 2 + (T - f) * chv
    if HAS_TARGETS:
        e = gl.minimum(T * BLOCK_M, n)
        s += gl.where(e > nh, gl.cdiv(e, BLOCK_N) - nh // BLOCK_N, 0)
    return s


@gluon.jit
def _gl_block_of(r, C, n, nh, nb, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HAS_TARGETS: gl.constexpr,
                 TPOW: gl.constexpr):
    """``_sk_locate``'s query block t of the head iteration r (the number of t' < TPOW whose
    blocks 0..t' end at or before r): TPOW if all nb blocks do (an iteration past the head's
    blocks), else by bisection over [0, nb) on the closed-form prefix sums."""
    lo = r * 0
    hi = nb
    if _gl_prefix(nb, C, n, nh, nb, BLOCK_M, BLOCK_N, HAS_TARGETS) <= r:
        lo = lo + TPOW
        hi = lo
    while lo < hi:
        mid = (lo + hi) // 2
        if _gl_prefix(mid + 1, C, n, nh, nb, BLOCK_M, BLOCK_N, HAS_TARGETS) <= r:
            lo = mid + 1
        else:
            hi = mid
    return lo


@gluon.jit
def _gl_item_start(j, offs_b, ci, iv, sv, wv, nv, cv, nhv, nbv, H: gl.constexpr, BLOCK_M: gl.constexpr,
                   BLOCK_N: gl.constexpr, HAS_TARGETS: gl.constexpr):
    """``_sk_item_start``: the first iteration of item j (ci: the inclusive prefix sums of iv)."""
    b = gl.sum((ci <= j).to(gl.int32), axis=0)
    sel = offs_b == b
    before = offs_b < b
    jr = j - gl.sum(gl.where(before, iv, 0), axis=0)
    nb = gl.maximum(gl.sum(gl.where(sel, nbv, 0), axis=0), 1)
    h = jr // nb
    t = jr - h * nb
    C = gl.sum(gl.where(sel, cv, 0), axis=0)
    n = gl.sum(gl.where(sel, nv, 0), axis=0)
    nh = gl.sum(gl.where(sel, nhv, 0), axis=0)
    return (gl.sum(gl.where(before, sv, 0), axis=0) + h * gl.sum(gl.where(sel, wv, 0), axis=0)
            + _gl_prefix(t, C, n, nh, nb, BLOCK_M, BLOCK_N, HAS_TARGETS))


@gluon.jit
def _gl_plan_piece(i, lo, hi, pid, s0, chunk, row, offs_b, cs, sv, wv, nv, cv, nhv, nbv, H: gl.constexpr,
                   BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HAS_TARGETS: gl.constexpr, TPOW: gl.constexpr):
    """``_sk_plan_piece``: the piece from iteration i (``_sk_locate``) into the plan row ``row``;
    returns the end of the piece (cs: the inclusive prefix sums of sv)."""
    b = gl.sum((cs <= i).to(gl.int32), axis=0)
    sel = offs_b == b
    before = offs_b < b
    W = gl.maximum(gl.sum(gl.where(sel, wv, 0), axis=0), 1)
    rr = i - gl.sum(gl.where(before, sv, 0), axis=0)
    h = rr // W
    r = rr - h * W
    n = gl.sum(gl.where(sel, nv, 0), axis=0)
    nh = gl.sum(gl.where(sel, nhv, 0), axis=0)
    C = gl.sum(gl.where(sel, cv, 0), axis=0)
    nb = gl.sum(gl.where(sel, nbv, 0), axis=0)
    t = _gl_block_of(r, C, n, nh, nb, BLOCK_M, BLOCK_N, HAS_TARGETS, TPOW)
    pt = _gl_prefix(t, C, n, nh, nb, BLOCK_M, BLOCK_N, HAS_TARGETS)
    item_lo = i - r + pt
    item_hi = item_lo + _gl_prefix(t + 1, C, n, nh, nb, BLOCK_M, BLOCK_N, HAS_TARGETS) - pt
    seg_hi = gl.maximum(gl.minimum(item_hi, hi), i + 1)
    whole = ((item_lo >= lo) & (item_hi <= hi)).to(gl.int32)
    slot = pid * 2 + gl.where(item_lo <= lo, 0, 1)
    item = gl.sum(gl.where(before, nbv, 0), axis=0) * H + h * nb + t
    gl.store(row + 0, b)
    gl.store(row + 1, h)
    gl.store(row + 2, t)
    gl.store(row + 3, i - item_lo)
    gl.store(row + 4, seg_hi - item_lo)
    gl.store(row + 5, whole)
    gl.store(row + 6, slot)
    gl.store(row + 7, item)
    gl.store(row + 8, (item_lo - s0) // chunk)
    gl.store(row + 9, (item_hi - 1 - s0) // chunk)
    gl.store(row + 10, item_lo)
    gl.store(row + 11, s0)
    gl.store(row + 12, chunk)
    return seg_hi


@gluon.jit
def _gl_plan(SEQ_OFFSETS, CACHE_LENS, NUM_TARGETS, PLAN, PLAN_N, nseq, min_chunk, dp_spare, MAXPC,
             H: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HAS_TARGETS: gl.constexpr,
             BPOW: gl.constexpr, TPOW: gl.constexpr, DP: gl.constexpr, num_warps: gl.constexpr):
    """``_sk_plan_kernel`` for this program, in the kernel's prologue (its 4 warps, before the
    partitions start): the per-sequence vectors once (one sequence a lane, reduced by shuffles;
    every sequence in every thread made the prologue ~8 us longer on the H200: serial chains of
    dependent adds, and spills in the consumers' loop), each
    piece's query block by bisection over closed-form sums instead of vectors over the blocks; the
    rows go to PLAN[pid] exactly as the planner kernel writes them
    (benchmarks/attention_cached_gluon_plan.py compares the two on the GPU)."""
    R: gl.constexpr = BLOCK_M // BLOCK_N
    bl: gl.constexpr = gl.BlockedLayout([1], [32], [num_warps], [0])
    pid = gl.program_id(0)
    P = gl.num_programs(0)
    offs_b = gl.arange(0, BPOW, layout=bl)
    bmask = offs_b < nseq
    o0 = gl.load(SEQ_OFFSETS + offs_b, mask=bmask, other=0)
    nv = (gl.load(SEQ_OFFSETS + offs_b + 1, mask=bmask, other=0) - o0).to(gl.int32)
    cv = gl.load(CACHE_LENS + offs_b, mask=bmask, other=0).to(gl.int32)
    if HAS_TARGETS:
        nhv = nv - gl.load(NUM_TARGETS + offs_b, mask=bmask, other=0).to(gl.int32)
    else:
        nhv = nv
    nbv = gl.cdiv(nv, BLOCK_M)
    chv = gl.cdiv(nhv, BLOCK_N)
    fv = gl.minimum(chv // R, nbv)
    wv = nbv * gl.cdiv(cv, BLOCK_N) + R * fv * (fv + 1) // 2 + (nbv - fv) * chv
    if HAS_TARGETS:
        wv += gl.cdiv(nv, BLOCK_N) - nhv // BLOCK_N
    sv = wv * H
    cs = gl.associative_scan(sv, 0, _gl_add)
    total = gl.sum(sv, axis=0)
    base = PLAN + pid.to(gl.int64) * MAXPC * 16
    npc = 0
    if DP:
        iv = nbv * H
        ci = gl.associative_scan(iv, 0, _gl_add)
        items = gl.sum(iv, axis=0)
        waves = gl.maximum(items // P - dp_spare, 0)
        s0 = 0
        if waves > 0:
            s0 = _gl_item_start(waves * P, offs_b, ci, iv, sv, wv, nv, cv, nhv, nbv, H, BLOCK_M, BLOCK_N,
                                HAS_TARGETS)
        chunk = gl.maximum(gl.cdiv(total - s0, P), min_chunk)
        lo = s0 + pid * chunk
        hi = gl.minimum(lo + chunk, total)
        k = 0
        i = lo
        while ((k < waves) | (i < hi)) & (npc < MAXPC):
            in_dp = k < waves
            j = i
            if in_dp:
                j = _gl_item_start(k * P + pid, offs_b, ci, iv, sv, wv, nv, cv, nhv, nbv, H, BLOCK_M, BLOCK_N,
                                   HAS_TARGETS)
            e = _gl_plan_piece(j, gl.where(in_dp, j, lo), gl.where(in_dp, total, hi), pid, s0, chunk,
                               base + npc * 16, offs_b, cs, sv, wv, nv, cv, nhv, nbv, H, BLOCK_M, BLOCK_N,
                               HAS_TARGETS, TPOW)
            npc += 1
            i = gl.where(in_dp, i, e)
            k += 1
    else:
        chunk = gl.maximum(gl.cdiv(total, P), min_chunk)
        lo = pid * chunk
        hi = gl.minimum(lo + chunk, total)
        i = lo
        while (i < hi) & (npc < MAXPC):
            i = _gl_plan_piece(i, lo, hi, pid, 0, chunk, base + npc * 16, offs_b, cs, sv, wv, nv, cv, nhv, nbv, H,
                               BLOCK_M, BLOCK_N, HAS_TARGETS, TPOW)
            npc += 1
    gl.store(PLAN_N + pid, npc)
    _gl_fence(gl.arange(0, 32 * num_warps, layout=gl.BlockedLayout([1], [32], [num_warps], [0])))


@gluon.jit
def _gl_piece(PLAN, pid, k, MAXPC, SEQ_OFFSETS, CACHE_LENS, NUM_TARGETS, BLOCK_M: gl.constexpr,
              BLOCK_N: gl.constexpr, HAS_TARGETS: gl.constexpr):
    """Piece k of program pid: its plan fields and the figures of its sequence."""
    row = PLAN + (pid * MAXPC + k) * 16  # (int32: the table is at most _PLAN_BYTES_MAX bytes)
    b = gl.load(row + 0)
    h = gl.load(row + 1)
    t = gl.load(row + 2)
    r0 = gl.load(row + 3)
    r1 = gl.load(row + 4)
    start = gl.load(SEQ_OFFSETS + b).to(gl.int64)
    n = (gl.load(SEQ_OFFSETS + b + 1).to(gl.int64) - start).to(gl.int32)
    C = gl.load(CACHE_LENS + b).to(gl.int32)
    if HAS_TARGETS:
        nh = n - gl.load(NUM_TARGETS + b).to(gl.int32)
    else:
        nh = n
    m0 = t * BLOCK_M
    ct = gl.cdiv(C, BLOCK_N)
    c_full = C // BLOCK_N
    nkt = gl.minimum((t + 1) * (BLOCK_M // BLOCK_N), gl.cdiv(nh, BLOCK_N))
    j0 = gl.maximum(m0, nh) // BLOCK_N * BLOCK_N
    return b, h, r0, r1, start, n, C, nh, m0, ct, c_full, nkt, j0


@gluon.jit
def _gl_fill(ring, full, empty, g, ptrs, mask, S: gl.constexpr):
    """Tile number g (counted over the program's pieces) into slot g % S once every consumer
    released the slot's previous tile (rows off ``mask``: zeros); ``full`` completes when all
    producer threads' copies land."""
    if g >= S:
        mbarrier.wait(empty.index(g % S), (g // S - 1) & 1)
    async_copy.async_copy_global_to_shared(ring.index(g % S), ptrs, mask=mask)
    async_copy.mbarrier_arrive(full.index(g % S), increment_count=False)


@gluon.jit
def _gl_fill_tma(ring, full, empty, g, desc, r, c, S: gl.constexpr, PWARPS: gl.constexpr):
    """``_gl_fill`` by one TMA copy: the box at rows r.., columns c.. of ``desc`` into slot g % S
    (rows past the view: zeros). ``full`` counts the producer's PWARPS * 32 arrivals as for the
    cp.async tiles: one with the expected bytes, the other PWARPS * 32 - 1 at once."""
    if g >= S:
        mbarrier.wait(empty.index(g % S), (g // S - 1) & 1)
    bar = full.index(g % S)
    mbarrier.expect(bar, desc.block_type.nbytes)
    tma.async_copy_global_to_shared(desc, [r, c], bar, ring.index(g % S))
    mbarrier.arrive(bar, count=PWARPS * 32 - 1)


@gluon.jit
def _gl_producer(Q, K, V, KC, VC, PT, CACHE_LENS, SEQ_OFFSETS, NUM_TARGETS, PLAN, PLAN_N, MAXPC,
                 stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh,
                 stride_kcp, stride_kcs, stride_kch, stride_vcp, stride_vcs, stride_vch, stride_pt,
                 q_smem, k_ring, v_ring, full_k, empty_k, full_v, empty_v, q_full, q_empty, KD, VD, QD,
                 D: gl.constexpr, PAGE: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                 HAS_TARGETS: gl.constexpr, SK: gl.constexpr, SV: gl.constexpr, PWARPS: gl.constexpr,
                 QB: gl.constexpr, TMA: gl.constexpr):
    """The copies: per piece q, then K and V of its tiles in the order the consumers use them
    (``_sk_piece``'s TWO_LOOPS order: unmasked cached tiles, then the partial cached tile, new
    history tiles, the block's candidate tiles; addresses clamped as there, masks applied by the
    consumers). TMA >= 1: the unmasked cached tiles (whole pages) by TMA through the descriptors KD,
    VD (the caches as [pages * PAGE, H * D]), a phantom as a box past the view's rows (zeros);
    TMA >= 2: q too (QD: q as [L, H * D]; its rows past the sequence are other sequences' or zeros:
    those rows' outputs are never stored, and each row's result depends on its own q row only)."""
    # cp.async copies: a thread copies 16-byte pieces of one row (its columns 32 apart), so one
    # address a thread (the columns immediates), not one per row: with 8 rows a thread the
    # producer spilled in its registers (the consumers' other loop: ~2,470 cycles a tile before
    # this and the epilogue's changes, ~1,840 after; docs/performance.md, "helper gluon6")
    cp: gl.constexpr = gl.BlockedLayout([1, 8], [8, 4], [PWARPS, 1], [1, 0])
    offs_n = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, cp))
    offs_d = gl.arange(0, D, layout=gl.SliceLayout(0, cp))
    offs_q = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, cp))
    pid = gl.program_id(0)
    npc = gl.load(PLAN_N + pid)
    g = 0
    for k in range(0, npc):
        b, h, r0, r1, start, n, C, nh, m0, ct, c_full, nkt, j0 = _gl_piece(
            PLAN, pid, k, MAXPC, SEQ_OFFSETS, CACHE_LENS, NUM_TARGETS, BLOCK_M, BLOCK_N, HAS_TARGETS)
        PTb = PT + b.to(gl.int64) * stride_pt
        KCh = KC + h * stride_kch
        VCh = VC + h * stride_vch
        if k >= QB:
            mbarrier.wait(q_empty.index(k % QB), (k // QB - 1) & 1)
        if TMA >= 2:
            qbar = q_full.index(k % QB)
            mbarrier.expect(qbar, QD.block_type.nbytes)
            tma.async_copy_global_to_shared(QD, [(start + m0).to(gl.int32), h * D], qbar, q_smem.index(k % QB))
            mbarrier.arrive(qbar, count=PWARPS * 32 - 1)
        else:
            rows = m0 + offs_q
            async_copy.async_copy_global_to_shared(
                q_smem.index(k % QB),
                Q + start * stride_qt + h * stride_qh + rows[:, None] * stride_qt + offs_d[None, :],
                mask=(rows < n)[:, None])
            async_copy.mbarrier_arrive(q_full.index(k % QB), increment_count=False)
        a1, nA, npos = _gl_positions(r0, r1, c_full)
        # a tile is one page (BLOCK_N == PAGE): the page of the next tile is loaded a tile ahead,
        # so its latency is not in the copies' issue. A phantom tile is filled with zeros (cp.async's
        # zero fill, nothing read): its scores are 0, SiLU(0) = 0 and its P.V adds nothing, so the
        # consumers need not mask it.
        it = r0
        if TMA:
            # positions 0 .. nA-1: the unmasked cached tiles [r0, a1), whole pages, then a phantom
            # if needed; by TMA (no per-row addresses), a phantom as a box past the view's rows
            NR = KD.shape[0]
            page = gl.load(PTb + gl.maximum(gl.minimum(it, ct - 1), 0))
            for u in range(0, nA):
                page_n = gl.load(PTb + gl.maximum(gl.minimum(gl.where(u + 1 < nA, it + 1, a1), ct - 1), 0))
                r = gl.where(it < a1, page * PAGE, NR)
                _gl_fill_tma(k_ring, full_k, empty_k, g, KD, r, h * D, SK, PWARPS)
                _gl_fill_tma(v_ring, full_v, empty_v, g, VD, r, h * D, SV, PWARPS)
                it += 1
                page = page_n
                g += 1
        else:
            page = gl.load(PTb + gl.maximum(gl.minimum(it, ct - 1), 0)).to(gl.int64)
            # positions 0 .. nA-1 as above by cp.async, plain page addresses
            for u in range(0, nA):
                page_n = gl.load(PTb + gl.maximum(gl.minimum(gl.where(u + 1 < nA, it + 1, a1), ct - 1),
                                                  0)).to(gl.int64)
                fill = (offs_n >= 0)[:, None] & (it < a1)
                _gl_fill(k_ring, full_k, empty_k, g, KCh + (page * stride_kcp + offs_n * stride_kcs)[:, None]
                         + offs_d[None, :], fill, SK)
                _gl_fill(v_ring, full_v, empty_v, g, VCh + (page * stride_vcp + offs_n * stride_vcs)[:, None]
                         + offs_d[None, :], fill, SV)
                it += 1
                page = page_n
                g += 1
        # the other tiles from a1 (``_sk_piece``'s addresses, branch-free: a cached tile's slots
        # clamped to the last cached token, new keys' rows clamped to the last new token), a phantom
        # last if needed; the piece's figures loaded again (fewer registers held over the first loop)
        b, h, r0, r1, start, n, C, nh, m0, ct, c_full, nkt, j0 = _gl_piece(
            PLAN, pid, k, MAXPC, SEQ_OFFSETS, CACHE_LENS, NUM_TARGETS, BLOCK_M, BLOCK_N, HAS_TARGETS)
        PTb = PT + b.to(gl.int64) * stride_pt
        KCh = KC + h * stride_kch
        VCh = VC + h * stride_vch
        Kb = K + start * stride_kt + h * stride_kh
        Vb = V + start * stride_vt + h * stride_vh
        a1, nA, npos = _gl_positions(r0, r1, c_full)
        it = a1
        page = gl.load(PTb + gl.maximum(gl.minimum(it, ct - 1), 0)).to(gl.int64)
        for _ in range(nA, npos):  # (positions nA .. npos-1)
            page_n = gl.load(PTb + gl.maximum(gl.minimum(it + 1, ct - 1), 0)).to(gl.int64)
            cached = it < ct
            pidx = gl.maximum(gl.minimum(it, ct - 1), 0)
            sl = gl.maximum(gl.minimum(offs_n, C - 1 - pidx * PAGE), 0)
            j = it - ct
            base = gl.where(j < nkt, j * BLOCK_N, j0 + (j - nkt) * BLOCK_N)
            offs_nl = gl.maximum(gl.minimum(base + offs_n, n - 1), 0).to(gl.int64)
            fill = (offs_n >= 0)[:, None] & (it < r1)
            kp = gl.where(cached, KCh + (page * stride_kcp + sl * stride_kcs)[:, None],
                          Kb + offs_nl[:, None] * stride_kt) + offs_d[None, :]
            _gl_fill(k_ring, full_k, empty_k, g, kp, fill, SK)
            vp = gl.where(cached, VCh + (page * stride_vcp + sl * stride_vcs)[:, None],
                          Vb + offs_nl[:, None] * stride_vt) + offs_d[None, :]
            _gl_fill(v_ring, full_v, empty_v, g, vp, fill, SV)
            it += 1
            page = page_n
            g += 1


@gluon.jit
def _gl_tile_of(u, r0, a1, nA):
    """Key tile at position u of a piece's tile sequence (``nA`` positions over the unmasked cached
    tiles [r0, a1), a phantom among them if needed, then the other tiles from a1, a phantom last if
    needed), and whether it is a phantom (any valid address, scores zero)."""
    in_a = u < nA
    it = gl.where(in_a, r0 + u, a1 + u - nA)
    return it, in_a, it >= a1


@gluon.jit
def _gl_scores(s, u, r0, a1, r1, nA, scale, ct, C, n, nh, nkt, j0, rows, offs_n0, BLOCK_N: gl.constexpr,
               FULL: gl.constexpr):
    """SiLU of the QK tile at position u (``_silu``'s FAST_SILU form). FULL=False (positions among
    the unmasked cached tiles): no mask (a phantom tile there is zeros: scores 0, SiLU 0); FULL:
    masked as ``_sk_piece``'s second loop masks it. (No branch: control flow between a wgmma and its wait
    makes ptxas serialize every wgmma of the kernel, C7513.)"""
    hh = s * scale
    p = hh + hh * _gl_tanh(hh)
    it, in_a, past_a = _gl_tile_of(u, r0, a1, nA)
    if FULL:
        j = it - ct
        hist = j < nkt
        offs_n = gl.where(hist, j * BLOCK_N, j0 + (j - nkt) * BLOCK_N) + offs_n0
        valid = gl.where(hist, (offs_n[None, :] <= rows[:, None]) & (offs_n < nh)[None, :],
                         (offs_n[None, :] == rows[:, None]) & ((offs_n >= nh) & (offs_n < n))[None, :])
        n0c = gl.maximum(gl.minimum(it, ct - 1), 0) * BLOCK_N
        valid = gl.where(it < ct, (n0c + offs_n0 < C)[None, :] & (rows >= 0)[:, None], valid)
        keep = gl.where(in_a, ~past_a, it < r1)
        p = gl.where((valid | (in_a & ~past_a)) & keep, p, 0.0)
    return p


@gluon.jit
def _gl_step(u, g0, r0, a1, r1, nA, p, acc, q_my, k_ring, v_ring, full_k, empty_k, full_v, empty_v, scale, s0,
             ct, C, n, nh, nkt, j0, rows, offs_n0, BLOCK_N: gl.constexpr, SK: gl.constexpr,
             SV: gl.constexpr, p_layout: gl.constexpr, dtype: gl.constexpr, FULL: gl.constexpr):
    """Position u+1's QK issued with position u's PV; its scores computed while the PV runs."""
    gk = g0 + u + 1
    gv = g0 + u
    mbarrier.wait(full_k.index(gk % SK), (gk // SK) & 1)
    mbarrier.wait(full_v.index(gv % SV), (gv // SV) & 1)
    s_tok = warpgroup_mma(q_my, k_ring.index(gk % SK).permute((1, 0)), s0, use_acc=False, is_async=True)
    acc_tok = warpgroup_mma(p, v_ring.index(gv % SV), acc, is_async=True)
    s = warpgroup_mma_wait(num_outstanding=1, deps=(s_tok, ))
    mbarrier.arrive(empty_k.index(gk % SK))
    p_next = _gl_scores(s, u + 1, r0, a1, r1, nA, scale, ct, C, n, nh, nkt, j0, rows, offs_n0, BLOCK_N, FULL)
    p_next = gl.convert_layout(p_next.to(dtype), p_layout)
    acc, p = warpgroup_mma_wait(num_outstanding=0, deps=(acc_tok, p))
    mbarrier.arrive(empty_v.index(gv % SV))
    return p_next, acc


@gluon.jit
def _gl_positions(r0, r1, c_full):
    """A piece's unmasked cached tiles [r0, a1) and the rest [a1, r1), as position counts: nA (odd,
    or 0) and the total, so that each of the consumer's two loops runs an even number of steps
    (two steps a loop trip; a remainder step under a branch would make ptxas serialize the wgmmas)."""
    a1 = gl.maximum(r0, gl.minimum(r1, c_full))
    na = a1 - r0
    nb = r1 - a1
    nA = gl.where(na > 0, na + 1 - na % 2, 0)
    nB = gl.where(nA > 0, nb + nb % 2, nb + 1 - nb % 2)
    return a1, nA, nA + nB


@gluon.jit
def _gl_out(OUT, start, h, r0, n, stride_ot, stride_oh, x, offs_r, offs_c):
    """Rows r0 .. r0+63 of a query block's output (rows past the sequence's n new tokens left);
    the addresses are formed here, at the store, not held over the epilogue's sums."""
    rows = r0 + offs_r
    gl.store(OUT + start * stride_ot + h * stride_oh + rows[:, None] * stride_ot + offs_c[None, :],
             x.to(OUT.dtype.element_ty), mask=(rows < n)[:, None])


@gluon.jit
def _gl_out_staged(OUT, start, h, r0, n, stride_ot, stride_oh, x, buf, D: gl.constexpr, HALF: gl.constexpr):
    """``_gl_out`` through shared memory: x (the accumulator's layout) converted and stored into
    ``buf`` (this warpgroup's half of the piece's q buffer, free once its QKs are done), read back
    8 contiguous columns a thread and written with 16-byte stores."""
    TC: gl.constexpr = D // 8 if D // 8 < 16 else 16
    ol: gl.constexpr = gl.BlockedLayout([1, 8], [32 // TC, TC], [4, 1], [1, 0])
    buf.store(x.to(OUT.dtype.element_ty))
    gl.thread_barrier()
    y = buf.load(ol)
    rows = r0 + gl.arange(0, HALF, layout=gl.SliceLayout(1, ol))
    cols = gl.arange(0, D, layout=gl.SliceLayout(0, ol))
    gl.store(OUT + start * stride_ot + h * stride_oh + rows[:, None] * stride_ot + cols[None, :], y,
             mask=(rows < n)[:, None])


@gluon.jit
def _gl_halves(x, HALF: gl.constexpr, D: gl.constexpr):
    """x [HALF, D] in the wgmma accumulator's layout as its column halves [:, :D/2] and [:, D/2:]:
    the column's top bit is a register bit of that layout, so this moves no data (the split selects
    registers)."""
    return gl.split(gl.permute(gl.reshape(x, [HALF, 2, D // 2]), (0, 2, 1)))


@gluon.jit
def _gl_sum_half(x, WS, off, c_first, c_last, item_lo, sk0, chunk, slot, BLOCK_M: gl.constexpr, D: gl.constexpr):
    """x plus the other pieces' partials (every chunk's slot but ``slot``) at the element offsets
    ``off`` (x's layout) of each partial: one partial's loads in flight at a time."""
    for c in range(c_first, c_last + 1):
        sc = c * 2 + gl.where(item_lo <= sk0 + c * chunk, 0, 1)
        if sc != slot:
            x += gl.load(WS + sc.to(gl.int64) * BLOCK_M * D + off, cache_modifier=".cg")
    return x


@gluon.jit
def _gl_sums(acc, WS, wg: gl.constexpr, c_first, c_last, item_lo, sk0, chunk, slot, o_layout: gl.constexpr,
             BLOCK_M: gl.constexpr, D: gl.constexpr):
    """acc (this warpgroup's [64, D] accumulator) plus the other pieces' partials of the item, a
    column half at a time: the accumulator and one half partial fit the consumers' registers (a
    whole partial beside the accumulator did not: spills, loads in small waves)."""
    HALF: gl.constexpr = BLOCK_M // 2
    a0, a1 = _gl_halves(acc, HALF, D)
    hl: gl.constexpr = a0.type.layout
    # (the offsets formed here: hoisted out of the piece loop, they held ~10 registers over it and
    # ptxas spilled other values)
    rows = _gl_here(gl.arange(0, HALF, layout=gl.SliceLayout(1, hl)))
    cols = gl.arange(0, D // 2, layout=gl.SliceLayout(0, hl))
    off = (wg * HALF + rows)[:, None] * D + cols[None, :]
    a0 = _gl_sum_half(a0, WS, off, c_first, c_last, item_lo, sk0, chunk, slot, BLOCK_M, D)
    a1 = _gl_sum_half(a1, WS + D // 2, off, c_first, c_last, item_lo, sk0, chunk, slot, BLOCK_M, D)
    return gl.convert_layout(gl.reshape(gl.permute(gl.join(a0, a1), (0, 2, 1)), [HALF, D]), o_layout,
                             assert_trivial=True)


@gluon.jit
def _gl_consumer(wg: gl.constexpr, OUT, WS, CNT, CACHE_LENS, SEQ_OFFSETS, NUM_TARGETS, PLAN, PLAN_N, MAXPC, stride_ot, stride_oh,
                 scale, inv_n, q_smem, k_ring, v_ring, full_k, empty_k, full_v, empty_v, q_full, q_empty,
                 D: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HAS_TARGETS: gl.constexpr,
                 SK: gl.constexpr, SV: gl.constexpr, QB: gl.constexpr, STAGE: gl.constexpr):
    """Rows wg*64 .. wg*64+63 of every piece's query block. STAGE: outputs written through this
    warpgroup's half of the piece's q buffer (``_gl_out_staged``), which is then released after the
    epilogue instead of after the last QK."""
    HALF: gl.constexpr = BLOCK_M // 2
    dtype: gl.constexpr = q_smem.dtype
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, D, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    s0 = gl.zeros([HALF, BLOCK_N], gl.float32, layout=s_layout)
    offs_n0 = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    offs_hs = gl.arange(0, HALF, layout=gl.SliceLayout(1, s_layout))
    offs_r = gl.arange(0, HALF, layout=gl.SliceLayout(1, o_layout))
    offs_c = gl.arange(0, D, layout=gl.SliceLayout(0, o_layout))
    one = gl.zeros([128], gl.int32, layout=gl.BlockedLayout([1], [32], [4], [0]))  # an element a thread (fences)
    pid = gl.program_id(0)
    npc = gl.load(PLAN_N + pid)
    g = 0
    for k in range(0, npc):
        b, h, r0, r1, start, n, C, nh, m0, ct, c_full, nkt, j0 = _gl_piece(
            PLAN, pid, k, MAXPC, SEQ_OFFSETS, CACHE_LENS, NUM_TARGETS, BLOCK_M, BLOCK_N, HAS_TARGETS)
        rows = m0 + wg * HALF + offs_hs
        a1, nA, npos = _gl_positions(r0, r1, c_full)
        mbarrier.wait(q_full.index(k % QB), (k // QB) & 1)
        q_my = q_smem.index(k % QB).slice(wg * HALF, HALF)
        # position 0: QK, scores
        mbarrier.wait(full_k.index(g % SK), (g // SK) & 1)
        s = warpgroup_mma(q_my, k_ring.index(g % SK).permute((1, 0)), s0, use_acc=False, is_async=True)
        s = warpgroup_mma_wait(num_outstanding=0, deps=(s,))
        mbarrier.arrive(empty_k.index(g % SK))
        p = _gl_scores(s, 0, r0, a1, r1, nA, scale, ct, C, n, nh, nkt, j0, rows, offs_n0, BLOCK_N, True)
        p = gl.convert_layout(p.to(dtype), p_layout)
        acc = gl.zeros([HALF, D], gl.float32, layout=o_layout)
        for u in range(0, nA - 1, 2):  # scores of unmasked cached tiles
            p1, acc = _gl_step(u, g, r0, a1, r1, nA, p, acc, q_my, k_ring, v_ring, full_k, empty_k, full_v, empty_v,
                               scale, s0, ct, C, n, nh, nkt, j0, rows, offs_n0, BLOCK_N, SK, SV, p_layout, dtype,
                               False)
            p, acc = _gl_step(u + 1, g, r0, a1, r1, nA, p1, acc, q_my, k_ring, v_ring, full_k, empty_k, full_v,
                              empty_v, scale, s0, ct, C, n, nh, nkt, j0, rows, offs_n0, BLOCK_N, SK, SV, p_layout,
                              dtype, False)
        for u in range(gl.maximum(nA - 1, 0), npos - 1, 2):  # scores of the other tiles: masked
            p1, acc = _gl_step(u, g, r0, a1, r1, nA, p, acc, q_my, k_ring, v_ring, full_k, empty_k, full_v, empty_v,
                               scale, s0, ct, C, n, nh, nkt, j0, rows, offs_n0, BLOCK_N, SK, SV, p_layout, dtype,
                               True)
            p, acc = _gl_step(u + 1, g, r0, a1, r1, nA, p1, acc, q_my, k_ring, v_ring, full_k, empty_k, full_v,
                              empty_v, scale, s0, ct, C, n, nh, nkt, j0, rows, offs_n0, BLOCK_N, SK, SV, p_layout,
                              dtype, True)
        nt = npos
        if not STAGE:
            mbarrier.arrive(q_empty.index(k % QB))  # every QK of the piece is done
        gv = g + nt - 1
        mbarrier.wait(full_v.index(gv % SV), (gv // SV) & 1)
        acc = warpgroup_mma(p, v_ring.index(gv % SV), acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        mbarrier.arrive(empty_v.index(gv % SV))
        g += nt
        # epilogue, this warpgroup's rows
        row = PLAN + (pid * MAXPC + k) * 16
        if gl.load(row + 5) != 0:
            if STAGE:
                _gl_out_staged(OUT, start, h, m0 + wg * HALF, n, stride_ot, stride_oh, acc * inv_n, q_my, D, HALF)
            else:
                _gl_out(OUT, start, h, m0 + wg * HALF, n, stride_ot, stride_oh, acc * inv_n, offs_r, offs_c)
        else:
            slot = gl.load(row + 6)
            cnt = CNT + gl.load(row + 7) * 2 + wg
            c_first = gl.load(row + 8)
            c_last = gl.load(row + 9)
            item_lo = gl.load(row + 10)
            sk0 = gl.load(row + 11)
            chunk = gl.load(row + 12)
            wrow = (wg * HALF + offs_r).to(gl.int64)
            # the item's other pieces all arrived already (their partials stored, then counted):
            # this piece is the last one; it adds their partials to its own accumulator, storing,
            # counting and reading back none of its own. The count is read once for the warpgroup
            # (a scalar atomic: one thread, its result shared), so that all its threads take the
            # same branch (a plain load per thread could see two counts), then a fence: acquire
            if gl.atomic_add(cnt, 0, sem="relaxed") == c_last - c_first:
                _gl_fence(one)
                acc = _gl_sums(acc, WS, wg, c_first, c_last, item_lo, sk0, chunk, slot, o_layout, BLOCK_M, D)
                if STAGE:
                    _gl_out_staged(OUT, start, h, m0 + wg * HALF, n, stride_ot, stride_oh, acc * inv_n, q_my, D,
                                   HALF)
                else:
                    _gl_out(OUT, start, h, m0 + wg * HALF, n, stride_ot, stride_oh, acc * inv_n, offs_r, offs_c)
                gl.atomic_xchg(cnt, 0, sem="relaxed")
            else:
                gl.store(WS + (slot.to(gl.int64) * BLOCK_M + wrow)[:, None] * D + offs_c[None, :], acc)
                _gl_fence(one)
                gl.thread_barrier()
                arrived = gl.atomic_add(cnt, 1, sem="acq_rel")
                if arrived == c_last - c_first:
                    # its own partial from its registers, the others' loaded
                    _gl_fence(one)
                    tot = _gl_sums(acc, WS, wg, c_first, c_last, item_lo, sk0, chunk, slot, o_layout, BLOCK_M, D)
                    if STAGE:
                        _gl_out_staged(OUT, start, h, m0 + wg * HALF, n, stride_ot, stride_oh, tot * inv_n, q_my,
                                       D, HALF)
                    else:
                        _gl_out(OUT, start, h, m0 + wg * HALF, n, stride_ot, stride_oh, tot * inv_n, offs_r,
                                offs_c)
                    gl.atomic_xchg(cnt, 0, sem="relaxed")
        if STAGE:
            # this warpgroup's reads of its q half are done (its QKs, the staged output): the
            # producer may copy the next q into the buffer
            fence_async_shared()
            gl.thread_barrier()
            mbarrier.arrive(q_empty.index(k % QB))


@gluon.jit
def _gl_consumer0(OUT, WS, CNT, CACHE_LENS, SEQ_OFFSETS, NUM_TARGETS, PLAN, PLAN_N, MAXPC, stride_ot, stride_oh,
                  scale, inv_n, q_smem, k_ring, v_ring, full_k, empty_k, full_v, empty_v, q_full, q_empty,
                  D: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HAS_TARGETS: gl.constexpr,
                  SK: gl.constexpr, SV: gl.constexpr, QB: gl.constexpr, STAGE: gl.constexpr):
    _gl_consumer(0, OUT, WS, CNT, CACHE_LENS, SEQ_OFFSETS, NUM_TARGETS, PLAN, PLAN_N, MAXPC, stride_ot, stride_oh,
                 scale, inv_n, q_smem, k_ring, v_ring, full_k, empty_k, full_v, empty_v, q_full, q_empty, D,
                 BLOCK_M, BLOCK_N, HAS_TARGETS, SK, SV, QB, STAGE)


@gluon.jit
def _gl_consumer1(OUT, WS, CNT, CACHE_LENS, SEQ_OFFSETS, NUM_TARGETS, PLAN, PLAN_N, MAXPC, stride_ot, stride_oh,
                  scale, inv_n, q_smem, k_ring, v_ring, full_k, empty_k, full_v, empty_v, q_full, q_empty,
                  D: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HAS_TARGETS: gl.constexpr,
                  SK: gl.constexpr, SV: gl.constexpr, QB: gl.constexpr, STAGE: gl.constexpr):
    _gl_consumer(1, OUT, WS, CNT, CACHE_LENS, SEQ_OFFSETS, NUM_TARGETS, PLAN, PLAN_N, MAXPC, stride_ot, stride_oh,
                 scale, inv_n, q_smem, k_ring, v_ring, full_k, empty_k, full_v, empty_v, q_full, q_empty, D,
                 BLOCK_M, BLOCK_N, HAS_TARGETS, SK, SV, QB, STAGE)


@gluon.jit
def _hstu_cached_gl_kernel(
    Q, K, V, KC, VC, KD, VD, QD, PT, CACHE_LENS, OUT, SEQ_OFFSETS, NUM_TARGETS,
    stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh, stride_ot, stride_oh,
    stride_kcp, stride_kcs, stride_kch, stride_vcp, stride_vcs, stride_vch, stride_pt,
    WS, CNT, PLAN, PLAN_N, MAXPC, scale, inv_n, nseq, min_chunk, dp_spare,
    D: gl.constexpr, PAGE: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
    HAS_TARGETS: gl.constexpr, SK: gl.constexpr, SV: gl.constexpr, PWARPS: gl.constexpr,
    CREGS: gl.constexpr, PREGS: gl.constexpr, QB: gl.constexpr, H: gl.constexpr, BPOW: gl.constexpr,
    TPOW: gl.constexpr, DP: gl.constexpr, INPLAN: gl.constexpr, STAGE: gl.constexpr, TMA: gl.constexpr,
    num_warps: gl.constexpr,
):
    gl.static_assert(num_warps == 4)
    gl.static_assert(BLOCK_M == 128)
    if INPLAN:
        # the program's plan, written by this CTA before its partitions start (warp_specialize's
        # entry is a barrier of all the CTA's warps; bar.sync orders their memory accesses)
        _gl_plan(SEQ_OFFSETS, CACHE_LENS, NUM_TARGETS, PLAN, PLAN_N, nseq, min_chunk, dp_spare, MAXPC, H, BLOCK_M,
                 BLOCK_N, HAS_TARGETS, BPOW, TPOW, DP, num_warps)
    dtype: gl.constexpr = Q.dtype.element_ty
    q_sl: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, D], dtype)
    kv_sl: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, D], dtype)
    k_ring = gl.allocate_shared_memory(dtype, [SK, BLOCK_N, D], kv_sl)
    v_ring = gl.allocate_shared_memory(dtype, [SV, BLOCK_N, D], kv_sl)
    q_smem = gl.allocate_shared_memory(dtype, [QB, BLOCK_M, D], q_sl)
    full_k = gl.allocate_shared_memory(gl.int64, [SK, 1], mbarrier.MBarrierLayout())
    empty_k = gl.allocate_shared_memory(gl.int64, [SK, 1], mbarrier.MBarrierLayout())
    full_v = gl.allocate_shared_memory(gl.int64, [SV, 1], mbarrier.MBarrierLayout())
    empty_v = gl.allocate_shared_memory(gl.int64, [SV, 1], mbarrier.MBarrierLayout())
    q_full = gl.allocate_shared_memory(gl.int64, [QB, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [QB, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(SK):
        mbarrier.init(full_k.index(i), count=PWARPS * 32)
        mbarrier.init(empty_k.index(i), count=2)
    for i in gl.static_range(SV):
        mbarrier.init(full_v.index(i), count=PWARPS * 32)
        mbarrier.init(empty_v.index(i), count=2)
    for i in gl.static_range(QB):
        mbarrier.init(q_full.index(i), count=PWARPS * 32)
        mbarrier.init(q_empty.index(i), count=2)
    gl.warp_specialize([
        (_gl_consumer0, (OUT, WS, CNT, CACHE_LENS, SEQ_OFFSETS, NUM_TARGETS, PLAN, PLAN_N, MAXPC, stride_ot,
                         stride_oh, scale, inv_n, q_smem, k_ring, v_ring, full_k, empty_k, full_v, empty_v, q_full,
                         q_empty, D, BLOCK_M, BLOCK_N, HAS_TARGETS, SK, SV, QB, STAGE)),
        (_gl_consumer1, (OUT, WS, CNT, CACHE_LENS, SEQ_OFFSETS, NUM_TARGETS, PLAN, PLAN_N, MAXPC, stride_ot,
                         stride_oh, scale, inv_n, q_smem, k_ring, v_ring, full_k, empty_k, full_v, empty_v, q_full,
                         q_empty, D, BLOCK_M, BLOCK_N, HAS_TARGETS, SK, SV, QB, STAGE)),
        (_gl_producer, (Q, K, V, KC, VC, PT, CACHE_LENS, SEQ_OFFSETS, NUM_TARGETS, PLAN, PLAN_N, MAXPC,
                        stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh,
                        stride_kcp, stride_kcs, stride_kch, stride_vcp, stride_vcs, stride_vch, stride_pt,
                        q_smem, k_ring, v_ring, full_k, empty_k, full_v, empty_v, q_full, q_empty, KD, VD, QD,
                        D, PAGE, BLOCK_M, BLOCK_N, HAS_TARGETS, SK, SV, PWARPS, QB, TMA)),
    ], [4, PWARPS], [CREGS, PREGS])


# ---------------------------------------------------------------- host
_CAPABLE: dict = {}
_PLAN_BYTES_MAX = 64 << 20
# (tools) a list: each call with the plan computed in the kernel also runs the planner kernel into
# tables of its own and appends (kernel's plan, its counts, planner's plan, its counts)
PLAN_CHECK = None


def usable(q, kc, vc, d_qk: int, d_v: int, block_m: int, block_n: int, page: int, fast: bool) -> bool:
    """Whether the Gluon kernel can run this call: an sm_90 GPU, bf16/fp16, d_qk == d_v in
    (64, 128, 256), the default tiles (128 x 32, pages of 32 tokens), FAST_SILU, 16-byte rows."""
    import torch

    if not q.is_cuda or not fast or q.dtype not in (torch.bfloat16, torch.float16):
        return False
    if d_qk != d_v or d_qk not in (64, 128, 256) or block_m != 128 or block_n != 32 or page != 32:
        return False
    if kc.dtype != q.dtype or vc.dtype != q.dtype or kc.stride(3) != 1 or vc.stride(3) != 1:
        return False
    idx = q.get_device()
    if idx not in _CAPABLE:
        _CAPABLE[idx] = torch.cuda.get_device_capability(idx)[0] == 9
    return _CAPABLE[idx]


def max_pieces(L: int, B: int, H: int, block_m: int) -> int:
    """An upper bound on the pieces of any program's plan (the plan table's rows a program):
    the items, at most H * (cdiv(L, block_m) + B) (each sequence's query blocks, each head), and
    one iteration more a head of a sequence: the schedule counts one tile past the blocks of a
    sequence whose targets are 0 and whose new tokens are not a multiple of BLOCK_N, and a piece
    is planned for it (its rows all masked). A bound without those pieces let the plan stop
    short of the last items, whose rows were then never written."""
    return H * (cdiv(L, block_m) + 2 * B)


_PLANS: dict = {}  # (device index, stream) -> [plan table, counts], grown on demand
_DESCS: dict = {}  # (address, rows, columns, dtype, box rows, swizzle, ...) -> encoded tensor map and its shape
_DESCS_MAX = 64
_HANDLES: dict = {}  # compiled kernel per specialisation -> _Handle, or None where only the JIT launches it
try:  # the launch hooks (a profiler's): the handle passes none, so it is used only while none is set
    from triton import knobs as _knobs

    _RT = _knobs.runtime if hasattr(_knobs.runtime.launch_enter_hook, "calls") else None
except ImportError:
    _RT = None


def _plan_buffers(device, n_plan: int, n_counts: int):
    """The plan table (``n_plan`` int32) and its counts (``n_counts``) for the current stream
    of ``device``: one pair per (device, stream), grown on demand. The kernel (or the planner
    kernel before it) writes every row it reads on each launch, and launches on one stream run
    in order, so a launch never reads another's plan. While the stream is being captured into
    a CUDA graph the pair is allocated per call from the graph's pool (as _split_buffers does);
    with PLAN_CHECK too (the tool keeps every call's tables)."""
    import torch

    if PLAN_CHECK is not None or torch.cuda.is_current_stream_capturing():
        return (torch.empty(n_plan, dtype=torch.int32, device=device),
                torch.empty(n_counts, dtype=torch.int32, device=device))
    key = (device.index, torch._C._cuda_getCurrentRawStream(device.index))
    pair = _PLANS.get(key)
    if pair is None or pair[0].numel() < n_plan or pair[1].numel() < n_counts:
        old = pair or (None, None)
        plan = old[0] if old[0] is not None and old[0].numel() >= n_plan else \
            torch.empty(next_pow2(n_plan), dtype=torch.int32, device=device)
        counts = old[1] if old[1] is not None and old[1].numel() >= n_counts else \
            torch.empty(next_pow2(n_counts), dtype=torch.int32, device=device)
        pair = _PLANS[key] = (plan, counts)
    return pair


def release_plan_buffers() -> None:
    """Drop the cached plan tables and the encoded tensor maps."""
    _PLANS.clear()
    _DESCS.clear()


class _Handle:
    """A compiled Gluon kernel launched past the JIT: the launcher module's own ``launch`` (the
    C function Triton generates for the kernel's signature), each tensor descriptor passed as its
    encoded tensor map. Triton's launcher encodes a ``TensorDescriptor`` argument into a
    CUtensorMap (``cuTensorMapEncodeTiled``) on every launch; the map depends only on the base
    address, shape, strides, dtype, box and swizzle, so one encoded per such tuple (``_DESCS``)
    is reused: the same inputs give the same bytes, whichever tensor now owns the address."""

    __slots__ = ("compiled", "launch", "function", "packed", "coop", "pdl", "metas")

    @staticmethod
    def make(compiled, desc_pos: tuple):
        """The handle of ``compiled``, or None where this Triton does not expose what the fast
        launch needs (then every launch goes through the JIT)."""
        try:
            run = compiled.run
            fn = run.launch
            if getattr(fn, "__code__", None) is not None:  # wrap_handle_tensordesc's closure
                cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True))
                fn = cells["launcher"].cell_contents
            if getattr(fn, "__code__", None) is not None or run.global_scratch_size or run.profile_scratch_size:
                return None
            metas = tuple(getattr(compiled.metadata, "tensordesc_meta", None) or ())
            if len(metas) != len(desc_pos) or any(m is None for m in metas):
                return None
            h = _Handle()
            h.compiled, h.launch, h.function, h.packed = compiled, fn, compiled.function, compiled.packed_metadata
            h.coop, h.pdl, h.metas = run.launch_cooperative_grid, run.launch_pdl, metas
            return h
        except (AttributeError, KeyError, TypeError, ImportError):
            return None


def _encoded(t, rows: int, cols: int, block_rows: int, block_cols: int, meta):
    """[tensor map, rows, cols, cols, 1]: t (contiguous) as a [rows, cols] matrix, box
    [block_rows, block_cols], as Triton's launcher encodes it (``make_tensordesc_arg``)."""
    key = (t.data_ptr(), rows, cols, t.dtype, block_rows, block_cols, meta["swizzle"], meta["elem_type"],
           tuple(meta["block_size"]))
    enc = _DESCS.get(key)
    if enc is None:
        from triton.backends.nvidia.driver import make_tensordesc_arg
        from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

        gdt = gl.bfloat16 if str(t.dtype) == "torch.bfloat16" else gl.float16
        lay = gl.NVMMASharedLayout.get_default_for([block_rows, block_cols], gdt)
        enc = tuple(make_tensordesc_arg(TensorDescriptor(t, [rows, cols], [cols, 1], [block_rows, block_cols], lay),
                                        meta))
        if len(_DESCS) >= _DESCS_MAX:
            _DESCS.pop(next(iter(_DESCS)))  # the oldest
        _DESCS[key] = enc
    return enc


def launch_gluon(q, k, v, kc, vc, pt, cache_lens, out, seq_offsets, num_targets, ws, cnt, *, scale, inv_n,
                 programs, dp, dp_spare, min_chunk, uniform, page, block_m=128, block_n=32, sk=3, sv=3, qb=2,
                 pwarps=4, cregs=None, pregs=None, inplan=1, stage=1, tma=2):
    """Run the Gluon persistent cached kernel (inplan=0: after the planner kernel); returns its
    compiled kernel, or None when the plan table would be too large (the caller then runs the
    Triton kernel). ``cnt`` holds two counters per item (one per consumer warpgroup). stage:
    outputs through shared memory. tma: what the producer copies by TMA (0: nothing, cp.async
    only; 1: the unmasked cached tiles; 2: and q; where those tensors are contiguous). cregs /
    pregs: the registers of each consumer warpgroup / of the producer (``setmaxnreg``; the three
    share 504 a thread), by default 240 / 24 where the producer copies by TMA (no spills at d = 256;
    with 232 / 40 ptxas spills one word of predicates in the consumers), 232 / 40 with cp.async
    only (whose producer needs them).

    The first launch of a specialisation goes through the JIT (compiling if needed); later ones
    launch the compiled kernel directly (``_Handle``) with the tensor maps encoded once per
    tensor layout, the plan table reused per stream (``_plan_buffers``): no host sync, no
    per-call allocation."""
    import torch

    L, H, D = q.shape
    B = seq_offsets.numel() - 1
    items = max_pieces(L, B, H, block_m)
    P = programs
    if P * items * NF * 4 > _PLAN_BYTES_MAX:
        return None
    plan, plan_n = _plan_buffers(q.device, P * items * NF, P)
    nt = num_targets if num_targets is not None else seq_offsets
    has_t = num_targets is not None
    bpow = next_pow2(B + 1)
    tpow = next_pow2(cdiv(L, block_m) + 1)
    inplan = bool(inplan)
    chk = None
    if inplan and PLAN_CHECK is not None:
        chk = (torch.full_like(plan, -7), torch.full_like(plan_n, -7))
        plan.fill_(-7)
        plan_n.fill_(-7)
        PLAN_CHECK.append((plan, plan_n) + chk)
    if not inplan or chk is not None:
        # the planner kernel (PLAN_CHECK: into tables of its own, to compare)
        pl, pn = (plan, plan_n) if chk is None else chk
        _sk_plan_kernel[(P,)](seq_offsets, cache_lens, nt, pl, pn, B, min_chunk, dp_spare, items,
                              H=H, BLOCK_M=block_m, BLOCK_N=block_n, HAS_TARGETS=has_t,
                              BPOW=bpow, TPOW=tpow, DP=dp, UNIFORM=uniform, num_warps=4)
    # TMA reads the tensors as matrices [rows, H * D]: the caches [pages * page, H * D] (level 1),
    # q [L, H * D] (level 2); where they are not contiguous, the level below
    tma = min(int(tma), 2) if kc.is_contiguous() and vc.is_contiguous() else 0
    if tma == 2 and not q.is_contiguous():
        tma = 1
    if cregs is None or pregs is None:
        cregs, pregs = (240, 24) if tma else (232, 40)
    desc_pos = (5, 6, 7) if tma == 2 else (5, 6) if tma else ()
    consts = (D, page, block_m, block_n, has_t, sk, sv, pwarps, cregs, pregs, qb, H, bpow, tpow, bool(dp),
              inplan, bool(stage), tma, 4)
    # the kernel's pointer and integer arguments (its parameters in order: Q, K, V, KC, VC, the three
    # descriptors, PT, CACHE_LENS, OUT, SEQ_OFFSETS, NUM_TARGETS, the strides, WS, CNT, PLAN, PLAN_N,
    # MAXPC, scale, inv_n, nseq, min_chunk, dp_spare)
    tens = (q, k, v, kc, vc, pt, cache_lens, out, seq_offsets, nt, ws, cnt, plan, plan_n)
    ints = (q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1), out.stride(0),
            out.stride(1), kc.stride(0), kc.stride(1), kc.stride(2), vc.stride(0), vc.stride(1), vc.stride(2),
            pt.stride(0), items, B, min_chunk, dp_spare)
    ptrs = [t.data_ptr() for t in tens]
    # what the JIT specialises on (see _launch.spec): each tensor's dtype and alignment (here its
    # address mod 16: a finer key, the same kernels), each integer's width, == 1 and % 16 == 0
    key = (q.get_device(), consts, tuple([t.dtype for t in tens]), tuple([x & 15 for x in ptrs]),
           tuple([(-(2**31) <= x < 2**31, x == 1, x % 16 == 0) for x in ints]))
    h = _HANDLES.get(key)
    if h is not None and not (_RT.launch_enter_hook.calls or _RT.launch_exit_hook.calls) \
            and vc.is_cuda and pt.is_cuda and cache_lens.is_cuda and out.is_cuda:
        # pointers passed as integers (the launcher's checks of tensor arguments skipped: q, k, v,
        # the K cache, the offsets and targets are checked on one device by the public API, the
        # other tensors just above or allocated here)
        p = ptrs
        kd = vd = qd = ()
        if tma:
            m = h.metas
            kd = _encoded(kc, kc.shape[0] * kc.shape[1], H * D, block_n, D, m[0])
            vd = _encoded(vc, vc.shape[0] * vc.shape[1], H * D, block_n, D, m[1])
            qd = _encoded(q, L, H * D, block_m, D, m[2]) if tma == 2 else (p[0],)
        else:
            kd, vd, qd = (p[3],), (p[4],), (p[0],)
        h.launch(P, 1, 1, torch._C._cuda_getCurrentRawStream(key[0]), h.function, h.coop, h.pdl, None, None,
                 h.packed, None, None, None, p[0], p[1], p[2], p[3], p[4], *kd, *vd, *qd, p[5], p[6], p[7], p[8],
                 p[9], *ints[:15], p[10], p[11], p[12], p[13], items, scale, inv_n, B, min_chunk, dp_spare, *consts)
        return h.compiled
    args = [q, k, v, kc, vc, kc, vc, q, pt, cache_lens, out, seq_offsets, nt, *ints[:15], ws, cnt, plan, plan_n,
            items, scale, inv_n, B, min_chunk, dp_spare]
    if desc_pos:
        from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

        gdt = gl.bfloat16 if q.dtype == torch.bfloat16 else gl.float16
        mats = ((kc, kc.shape[0] * kc.shape[1], block_n), (vc, vc.shape[0] * vc.shape[1], block_n), (q, L, block_m))
        for i in desc_pos:
            t, rows, br = mats[i - 5]
            lay = gl.NVMMASharedLayout.get_default_for([br, D], gdt)
            args[i] = TensorDescriptor(t, [rows, H * D], [H * D, 1], [br, D], lay)
    compiled = _hstu_cached_gl_kernel[(P,)](
        *args, D=D, PAGE=page, BLOCK_M=block_m, BLOCK_N=block_n, HAS_TARGETS=has_t, SK=sk, SV=sv,
        PWARPS=pwarps, CREGS=cregs, PREGS=pregs, QB=qb, H=H, BPOW=bpow, TPOW=tpow, DP=bool(dp),
        INPLAN=inplan, STAGE=bool(stage), TMA=tma, num_warps=4)
    if key not in _HANDLES and compiled is not None and _signature_ok(compiled) and _RT is not None:
        _HANDLES[key] = _Handle.make(compiled, desc_pos)
    return compiled


_CONSTS = ("D", "PAGE", "BLOCK_M", "BLOCK_N", "HAS_TARGETS", "SK", "SV", "PWARPS", "CREGS", "PREGS", "QB", "H", "BPOW",
           "TPOW", "DP", "INPLAN", "STAGE", "TMA", "num_warps")  # launch_gluon's consts, in order
_N_ARGS = 38  # launch_gluon's args


def _signature_ok(compiled) -> bool:
    """Whether the kernel's parameters are launch_gluon's args then its consts, in that order
    (the handle passes them positionally, the launcher parsing the consts and ignoring them)."""
    try:
        names = list(compiled.src.signature)
        const = [p.name for p in _hstu_cached_gl_kernel.params if p.is_constexpr]
        plain = [p for p in _hstu_cached_gl_kernel.params if not p.is_constexpr]
    except AttributeError:
        return False
    return len(plain) == _N_ARGS and tuple(const) == _CONSTS and names[_N_ARGS:] == list(_CONSTS)
