"""HSTU attention kernels vs their float64 references.

On a machine without CUDA the Triton kernels run under the interpreter (TRITON_INTERPRET=1,
set here before triton is imported), in fp32 and fp16 (bf16 tl.dot is wrong under
Triton 3.9's interpreter). With CUDA only the tests marked gpu run (compiled, bf16 too): the
others are sized and toleranced for the interpreter (tile products with K < 16, which the
compiler refuses; exact fp32 where the GPU's tl.dot rounds through TF32; device-side checks
that, compiled, end the process's CUDA context), so on a GPU machine they are skipped; run
them there with ``CUDA_VISIBLE_DEVICES=``. Every check draws a fresh random jagged batch and
poisons the output with NaN first.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("triton")
if not HAS_CUDA:
    from _interpreter import without_rescans

    without_rescans()

import tracekit.kernels as K  # noqa: E402
from tracekit.kernels import (  # noqa: E402
    KernelInputError,
    PagedKVCache,
    build_paged_kv_cache,
    hstu_attention,
    hstu_attention_block_sparse,
    hstu_attention_block_sparse_reference,
    hstu_attention_cached,
    hstu_attention_cached_reference,
    hstu_attention_reference,
)

DEV = "cuda" if HAS_CUDA else "cpu"


@pytest.fixture(autouse=True)
def _interpreter_tests_without_cuda(request):
    """With CUDA, the tests not marked gpu are skipped (see the module's docstring)."""
    if HAS_CUDA and request.node.get_closest_marker("gpu") is None:
        pytest.skip("an interpreter test: run it without CUDA (CUDA_VISIBLE_DEVICES=)")
TOL = {torch.float32: 1e-4 if not HAS_CUDA else 2e-3, torch.float16: 3e-3, torch.bfloat16: 2e-2}
_SEED = [1234]


def _gen():
    _SEED[0] += 1
    return torch.Generator().manual_seed(_SEED[0])


def _offsets(lengths):
    off = [0]
    for n in lengths:
        off.append(off[-1] + n)
    return torch.tensor(off, dtype=torch.int64, device=DEV)


def _rand(g, *shape, dtype):
    return torch.randn(*shape, generator=g).to(dtype).to(DEV)


def _rel(out, ref):
    assert torch.isfinite(out).all(), "output has NaN/inf: an element was not written"
    o, r = out.double().cpu(), ref.double().cpu()
    den = r.norm()
    return float((o - r).norm() / den) if den > 0 else float(o.norm())


def _poison(L, H, dv, dtype):
    return torch.full((L, H, dv), float("nan"), dtype=dtype, device=DEV)


def _d64(*xs):
    return [None if x is None else x.double() for x in xs]


# A mix of jagged batches: empty and one-token sequences, all-candidate and no-candidate
# sequences, lengths that are not multiples of the block sizes.
DENSE_CASES = {
    "jagged": dict(lengths=[5, 0, 1, 37, 20, 64], targets=[2, 0, 1, 37, 0, 7]),
    "no_targets": dict(lengths=[19, 1, 0, 50], targets=None),
    "all_candidates": dict(lengths=[9, 17], targets=[9, 17]),
    "contextual": dict(lengths=[33, 17, 4], targets=[3, 0, 4], contextual_seq_len=4),
    "window": dict(lengths=[45, 17], targets=[5, 0], max_attn_len=7),
    "contextual_window": dict(lengths=[40, 2, 26], targets=[6, 1, 0], contextual_seq_len=3, max_attn_len=9),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("case", list(DENSE_CASES))
def test_dense_matches_reference(case, dtype):
    c = dict(DENSE_CASES[case])
    lengths, targets = c.pop("lengths"), c.pop("targets")
    g = _gen()
    H, d, dv = 2, 32, 16
    off = _offsets(lengths)
    L = sum(lengths)
    q, k = _rand(g, L, H, d, dtype=dtype), _rand(g, L, H, d, dtype=dtype)
    v = _rand(g, L, H, dv, dtype=dtype)
    nt = None if targets is None else torch.tensor(targets, device=DEV)
    N = max(lengths) + 3
    out = _poison(L, H, dv, dtype)
    res = hstu_attention(q, k, v, off, max_seq_len=N, alpha=0.7, num_targets=nt, backend="triton", out=out, **c)
    assert res.data_ptr() == out.data_ptr()
    ref = hstu_attention_reference(*_d64(q, k, v), off, max_seq_len=N, alpha=0.7, num_targets=nt, **c)
    assert _rel(out, ref) < TOL[dtype]


def test_dense_relative_bias():
    g = _gen()
    lengths, H, d = [33, 0, 17, 9], 2, 16
    N = 40
    off = _offsets(lengths)
    L = sum(lengths)
    q, k, v = (_rand(g, L, H, d, dtype=torch.float32) for _ in range(3))
    ts = torch.randint(0, 10**6, (L,), generator=g).sort().values.to(DEV)
    tsw, posw = _rand(g, 21, dtype=torch.float32), _rand(g, 2 * N - 1, dtype=torch.float32)
    nt = torch.tensor([4, 0, 17, 1], device=DEV)
    for kw in (dict(timestamps=ts, ts_weights=tsw), dict(pos_weights=posw),
               dict(timestamps=ts, ts_weights=tsw, pos_weights=posw)):
        out = _poison(L, H, d, torch.float32)
        hstu_attention(q, k, v, off, max_seq_len=N, alpha=0.5, num_targets=nt, backend="triton", out=out, **kw)
        kw64 = {a: (b.double() if b.is_floating_point() else b) for a, b in kw.items()}
        ref = hstu_attention_reference(*_d64(q, k, v), off, max_seq_len=N, alpha=0.5, num_targets=nt, **kw64)
        ref_nob = hstu_attention_reference(*_d64(q, k, v), off, max_seq_len=N, alpha=0.5, num_targets=nt)
        assert _rel(out, ref) < TOL[torch.float32]
        assert _rel(ref_nob, ref) > 1e-2  # the bias matters


def test_reference_semantics_by_hand():
    """The reference itself against a loop over (i, j) with the mask spelled out."""
    g = _gen()
    lengths, targets, H, d = [6, 4], [2, 4], 1, 4
    off = _offsets(lengths)
    q, k, v = (_rand(g, 10, H, d, dtype=torch.float64) for _ in range(3))
    N, alpha = 8, 0.9
    ref = hstu_attention_reference(q, k, v, off, max_seq_len=N, alpha=alpha,
                                   num_targets=torch.tensor(targets, device=DEV))
    exp = torch.zeros_like(ref)
    for b in range(2):
        s, T, nt = int(off[b]), lengths[b], targets[b]
        for i in range(T):
            for j in range(T):
                if i < T - nt:
                    ok = j <= i
                else:
                    ok = j < T - nt or j == i
                if ok:
                    x = alpha * float((q[s + i, 0] * k[s + j, 0]).sum())
                    exp[s + i, 0] += x / (1 + torch.exp(torch.tensor(-x))) / N * v[s + j, 0]
    torch.testing.assert_close(ref, exp)


# ----------------------------------------------------------------------------- cached

CACHED_CASES = {
    "jagged": dict(hist=[40, 0, 7, 64, 3, 33], new=[5, 3, 0, 1, 9, 1], targets=[2, 3, 0, 1, 0, 1]),
    "no_targets": dict(hist=[31, 2], new=[17, 1], targets=None),
    "empty_cache": dict(hist=[0, 0], new=[6, 3], targets=[6, 1]),
    "contextual": dict(hist=[40, 70], new=[20, 9], targets=[4, 0], contextual_seq_len=3),
    "window": dict(hist=[40, 70], new=[20, 9], targets=[4, 9], max_attn_len=10),
}


def _full_dense_rows(hist, new, kh, vh, q, k, v, ho, no):
    """(q, k, v, offsets, rows) of the concatenated sequences cache ++ new."""
    qs, ks, vs, full = [], [], [], [0]
    for b in range(len(hist)):
        qs += [torch.zeros_like(kh[ho[b]:ho[b + 1]]), q[no[b]:no[b + 1]]]
        ks += [kh[ho[b]:ho[b + 1]], k[no[b]:no[b + 1]]]
        vs += [vh[ho[b]:ho[b + 1]], v[no[b]:no[b + 1]]]
        full.append(full[-1] + hist[b] + new[b])
    fo = torch.tensor(full, device=DEV)
    rows = torch.cat([torch.arange(full[b] + hist[b], full[b + 1]) for b in range(len(hist))]).to(DEV)
    return torch.cat(qs), torch.cat(ks), torch.cat(vs), fo, rows


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("case", list(CACHED_CASES))
def test_cached_matches_reference_and_dense(case, dtype):
    c = dict(CACHED_CASES[case])
    hist, new, targets = c.pop("hist"), c.pop("new"), c.pop("targets")
    g = _gen()
    H, d, dv = 2, 32, 16
    ho, no = _offsets(hist), _offsets(new)
    Lh, Ln = sum(hist), sum(new)
    kh, vh = _rand(g, Lh, H, d, dtype=dtype), _rand(g, Lh, H, dv, dtype=dtype)
    q, k = _rand(g, Ln, H, d, dtype=dtype), _rand(g, Ln, H, d, dtype=dtype)
    v = _rand(g, Ln, H, dv, dtype=dtype)
    N = max(a + b for a, b in zip(hist, new, strict=True)) + 5
    cache = build_paged_kv_cache(kh, vh, ho, max_len=N, generator=g)  # shuffled pages
    nt = None if targets is None else torch.tensor(targets, device=DEV)
    out = _poison(Ln, H, dv, dtype)
    hstu_attention_cached(q, k, v, no, cache, max_seq_len=N, alpha=0.4, num_targets=nt,
                          backend="triton", out=out, **c)
    c64 = PagedKVCache(cache.k_cache.double(), cache.v_cache.double(), cache.page_table, cache.cache_lens)
    ref = hstu_attention_cached_reference(*_d64(q, k, v), no, c64, max_seq_len=N, alpha=0.4, num_targets=nt, **c)
    assert _rel(out, ref) < TOL[dtype]
    fq, fk, fv, fo, rows = _full_dense_rows(hist, new, *_d64(kh, vh, q, k, v), ho.cpu(), no.cpu())
    dense = hstu_attention_reference(fq, fk, fv, fo, max_seq_len=N, alpha=0.4, num_targets=nt, **c)
    assert _rel(ref, dense[rows]) < 1e-12


def test_cache_append_grows_and_overflows():
    g = _gen()
    H, d = 2, 8
    cache = PagedKVCache.allocate(batch_size=2, max_len=40, num_heads=H, d_qk=d, d_v=d,
                                  dtype=torch.float32, device=DEV, generator=g)
    k1, v1 = _rand(g, 50, H, d, dtype=torch.float32), _rand(g, 50, H, d, dtype=torch.float32)
    cache.append(k1, v1, _offsets([33, 17]))
    k2, v2 = _rand(g, 10, H, d, dtype=torch.float32), _rand(g, 10, H, d, dtype=torch.float32)
    cache.append(k2, v2, _offsets([5, 5]))
    assert cache.cache_lens.tolist() == [38, 22]
    from tracekit.kernels.reference import gather_cache

    kc, _ = gather_cache(cache)
    torch.testing.assert_close(kc[0, :33], k1[:33])
    torch.testing.assert_close(kc[0, 33:38], k2[:5])
    torch.testing.assert_close(kc[1, 17:22], k2[5:])
    assert cache.capacity == 64  # two pages of 32
    with pytest.raises(KernelInputError, match="overflow"):
        cache.append(k1, v1, _offsets([27, 23]))


# ----------------------------------------------------------------------------- block-sparse

BSA_CASES = {
    "jagged": dict(lengths=[70, 0, 1, 33, 128, 90], targets=[5, 0, 1, 0, 20, 90], bs=16, counts=2),
    "no_targets": dict(lengths=[100, 47], targets=None, bs=32, counts=1),
    "many_counts": dict(lengths=[64, 63], targets=[3, 0], bs=16, counts=10),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("case", list(BSA_CASES))
def test_block_sparse_matches_reference(case, dtype):
    c = BSA_CASES[case]
    g = _gen()
    H, d, dv = 2, 32, 16
    lengths = c["lengths"]
    off = _offsets(lengths)
    L = sum(lengths)
    q, k = _rand(g, L, H, d, dtype=dtype), _rand(g, L, H, d, dtype=dtype)
    v = _rand(g, L, H, dv, dtype=dtype)
    gc = torch.rand(L, H, generator=g).to(DEV)
    gs = torch.rand(L, H, generator=g).to(DEV)
    nt = None if c["targets"] is None else torch.tensor(c["targets"], device=DEV)
    N = max(lengths) + 7
    kw = dict(max_seq_len=N, alpha=0.6, block_size=c["bs"], block_counts=c["counts"], num_targets=nt)
    out = _poison(L, H, dv, dtype)
    _, sel = hstu_attention_block_sparse(q, k, v, off, gate_cmp=gc.to(dtype), gate_slc=gs.to(dtype),
                                         backend="triton", return_block_indices=True, out=out, **kw)
    ref, sel_ref = hstu_attention_block_sparse_reference(
        *_d64(q, k, v), off, gate_cmp=gc.double(), gate_slc=gs.double(), return_block_indices=True, **kw
    )
    # the selection: identical except where two blocks' importances tie within rounding
    agree = (sel.cpu() == sel_ref.cpu()).float().mean().item()
    assert agree > 0.97, agree
    same = hstu_attention_block_sparse_reference(
        *_d64(q, k, v), off, gate_cmp=gc.double(), gate_slc=gs.double(), block_indices=sel, **kw
    )
    assert _rel(out, same) < TOL[dtype]
    if agree == 1.0:
        assert _rel(out, ref) < TOL[dtype]


BSA_KERNEL_CASES = dict(BSA_CASES, long=dict(lengths=[300, 17, 129], targets=[40, 0, 1], bs=16, counts=3))
# kernel variants that must all select the same blocks in the same slots and give the same
# output as the arg-max rounds over the scratch row with the per-row 1/N
BSA_KERNEL_VARIANTS = {
    "default": {},
    "rank": dict(RANK_SEL=True),
    "rank_scratch": dict(RANK_SEL=True, ONE_CMP=False),
    "rank_chunked": dict(RANK_SEL=True, ONE_CMP=False, RANK_CHUNK=4),
    "rounds_in_registers": dict(RANK_SEL=False, ONE_CMP=True, BLOCK_C=32),
    "uniform_scale_off": dict(UNIFORM=False),
    "pooled_tiles_late": dict(PRE=False),
    "pooled_tiles_early_scratch": dict(ONE_CMP=False, BLOCK_C=4),
    "pool_everything": dict(POOL_HIST=False, POOL_WARPS=4),
    "pool_k_v_apart": dict(POOL_SPLIT=True, POOL_WARPS=1),
    "local_block_in_loop": dict(LOOP_LOCAL=True),
    "local_block_in_loop_sub8": dict(LOOP_LOCAL=True, SUB=8),
    "local_block_in_loop_sub8_scratch": dict(LOOP_LOCAL=True, SUB=8, ONE_CMP=False, BLOCK_C=4),
    "local_block_in_loop_clamped": dict(LOOP_LOCAL=True, SUB=8, CLAMP=True),
    "local_block_in_loop_clamped_scratch": dict(LOOP_LOCAL=True, CLAMP=True, ONE_CMP=False, BLOCK_C=4),
}


@functools.cache
def _bsa_variants_base(case: str):
    """A case's inputs and the arg-max rounds' result, computed once for all the variants."""
    from tracekit.kernels._bsa import hstu_bsa_fwd

    c = BSA_KERNEL_CASES[case]
    g = _gen()
    H, d = 2, 32
    lengths = c["lengths"]
    off = _offsets(lengths)
    L = sum(lengths)
    q, k, v = (_rand(g, L, H, d, dtype=torch.float32) for _ in range(3))
    nt = None if c["targets"] is None else torch.tensor(c["targets"], device=DEV)
    kw = dict(max_seq_len=max(lengths) + 7, alpha=0.6, block_size=c["bs"], block_counts=c["counts"],
              num_targets=nt, return_block_indices=True)
    base = dict(RANK_SEL=False, ONE_CMP=False, UNIFORM=False, PRE=False, POOL_HIST=False)
    out_r, sel_r = hstu_bsa_fwd(q, k, v, off, out=_poison(L, H, d, torch.float32), config=base, **kw)
    return (q, k, v, off, kw), (out_r, sel_r)


@pytest.mark.parametrize("variant", list(BSA_KERNEL_VARIANTS))
@pytest.mark.parametrize("case", list(BSA_KERNEL_CASES))
def test_block_sparse_kernel_variants_equal_rounds(case, variant):
    """The selection as ranks (one compare, or in pieces), importances kept in registers, the
    selected branch's 1/N applied at the end: same blocks in the same slots as the arg-max
    rounds over the scratch row with the per-row scale, so the same outputs."""
    from tracekit.kernels._bsa import hstu_bsa_fwd

    (q, k, v, off, kw), (out_r, sel_r) = _bsa_variants_base(case)
    L, H, d = q.shape
    out_k, sel_k = hstu_bsa_fwd(q, k, v, off, out=_poison(L, H, d, torch.float32),
                                config=BSA_KERNEL_VARIANTS[variant], **kw)
    assert torch.equal(sel_k.cpu(), sel_r.cpu())
    assert _rel(out_k, out_r) < 1e-6


@pytest.mark.parametrize("sub", [16, 8], ids=["whole_blocks", "half_blocks"])
def test_block_sparse_local_block_in_the_selected_loop_with_gates(sub):
    """The local block as the first iterations of the selected loop (LOOP_LOCAL), whole or in
    halves (SUB), with both gates (per-row scale of the selected scores): equal to the
    reference on the kernel's own selection, and the selection row keeps its layout."""
    from tracekit.kernels._bsa import hstu_bsa_fwd

    g = _gen()
    lengths, H, d = [300, 17, 129, 0, 1], 2, 32
    off = _offsets(lengths)
    L = sum(lengths)
    q, k, v = (_rand(g, L, H, d, dtype=torch.float32) for _ in range(3))
    gc = torch.rand(L, H, generator=g).to(DEV)
    gs = torch.rand(L, H, generator=g).to(DEV)
    kw = dict(max_seq_len=320, alpha=0.6, block_size=16, block_counts=3,
              num_targets=torch.tensor([40, 0, 1, 0, 1], device=DEV))
    out = _poison(L, H, d, torch.float32)
    _, sel = hstu_bsa_fwd(q, k, v, off, gate_cmp=gc, gate_slc=gs, out=out, return_block_indices=True,
                          config=dict(LOOP_LOCAL=True, SUB=sub, CLAMP=sub < 16), **kw)
    _, sel_default = hstu_bsa_fwd(q, k, v, off, gate_cmp=gc, gate_slc=gs, return_block_indices=True, **kw)
    assert torch.equal(sel.cpu(), sel_default.cpu())
    ref = hstu_attention_block_sparse_reference(*_d64(q, k, v), off, gate_cmp=gc.double(), gate_slc=gs.double(),
                                                block_indices=sel, **kw)
    assert _rel(out, ref) < TOL[torch.float32]


@pytest.mark.parametrize("gates", ["none", "cmp_only"])
def test_block_sparse_uniform_scale_with_and_without_gate_cmp(gates):
    """Without gate_slc the selected branch's 1/N is applied once at the end (UNIFORM) and the
    compressed branch is scaled by block_size (times gate_cmp) instead: equal to the reference."""
    g = _gen()
    lengths, H, d = [300, 17, 129], 2, 32
    off = _offsets(lengths)
    L = sum(lengths)
    q, k, v = (_rand(g, L, H, d, dtype=torch.float32) for _ in range(3))
    gc = torch.rand(L, H, generator=g).to(DEV) if gates == "cmp_only" else None
    kw = dict(max_seq_len=320, alpha=0.6, block_size=16, block_counts=3, num_targets=torch.tensor([40, 0, 1], device=DEV))
    out = _poison(L, H, d, torch.float32)
    _, sel = hstu_attention_block_sparse(q, k, v, off, gate_cmp=gc, backend="triton", return_block_indices=True,
                                         out=out, **kw)
    ref = hstu_attention_block_sparse_reference(*_d64(q, k, v), off, gate_cmp=None if gc is None else gc.double(),
                                                block_indices=sel, **kw)
    assert _rel(out, ref) < TOL[torch.float32]


def test_block_sparse_selects_everything_equals_dense_plus_compressed():
    """With every block selected, the selected branch is dense HSTU attention."""
    g = _gen()
    lengths, H, d = [64, 40], 2, 16
    off = _offsets(lengths)
    L = sum(lengths)
    q, k, v = (_rand(g, L, H, d, dtype=torch.float64) for _ in range(3))
    nt = torch.tensor([4, 0], device=DEV)
    zero = torch.zeros(L, H, dtype=torch.float64, device=DEV)
    one = torch.ones(L, H, dtype=torch.float64, device=DEV)
    kw = dict(max_seq_len=64, alpha=0.5, block_size=16, block_counts=4, num_targets=nt)
    slc = hstu_attention_block_sparse_reference(q, k, v, off, gate_cmp=zero, gate_slc=one, **kw)
    dense = hstu_attention_reference(q, k, v, off, max_seq_len=64, alpha=0.5, num_targets=nt)
    torch.testing.assert_close(slc, dense)
    out = _poison(L, H, d, torch.float32)
    q32, k32, v32 = q.float(), k.float(), v.float()
    hstu_attention_block_sparse(q32, k32, v32, off, gate_cmp=zero.float(), gate_slc=one.float(),
                                backend="triton", out=out, **kw)
    assert _rel(out, dense) < TOL[torch.float32]


# ----------------------------------------------------------------------------- API contract


def test_validation_errors():
    g = _gen()
    q, k, v = (_rand(g, 10, 2, 8, dtype=torch.float32) for _ in range(3))
    off = _offsets([4, 6])
    kw = dict(max_seq_len=8, alpha=1.0)
    with pytest.raises(KernelInputError, match=r"\[L, H, d\]"):
        hstu_attention(q[:, 0], k, v, off, **kw)
    with pytest.raises(KernelInputError, match="dtypes differ"):
        hstu_attention(q, k.half(), v, off, **kw)
    with pytest.raises(KernelInputError, match="d_qk"):
        hstu_attention(q, k[..., :4], v, off, **kw)
    with pytest.raises(KernelInputError, match="int32 or int64"):
        hstu_attention(q, k, v, off.float(), **kw)
    with pytest.raises(KernelInputError, match="non-decreasing"):
        hstu_attention(q, k, v, torch.tensor([0, 7, 6, 10], device=DEV), **kw)
    with pytest.raises(KernelInputError, match="number of tokens"):
        hstu_attention(q, k, v, _offsets([4, 5]), **kw)
    with pytest.raises(KernelInputError, match="max_seq_len"):
        hstu_attention(q, k, v, off, max_seq_len=5, alpha=1.0)
    with pytest.raises(KernelInputError, match=r"num_targets\[1\]=7 exceeds"):
        hstu_attention(q, k, v, off, num_targets=torch.tensor([1, 7], device=DEV), **kw)
    with pytest.raises(KernelInputError, match="entries for 2 sequences"):
        hstu_attention(q, k, v, off, num_targets=torch.tensor([1], device=DEV), **kw)
    with pytest.raises(KernelInputError, match="block_size"):
        hstu_attention_block_sparse(q, k, v, off, block_size=24, **kw)
    with pytest.raises(KernelInputError, match="backend"):
        hstu_attention(q, k, v, off, backend="cuda", **kw)
    if HAS_CUDA:
        with pytest.raises(KernelInputError, match="one device"):
            hstu_attention(q, k, v.cpu(), off, **kw)


def test_cpu_fallback_without_interpreter(monkeypatch):
    """CPU tensors without TRITON_INTERPRET run the reference (the CPU workload relies on it)."""
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    from tracekit.kernels._common import choose_backend

    cpu = torch.device("cpu")
    assert choose_backend("auto", cpu) == "reference"
    with pytest.raises(KernelInputError, match="TRITON_INTERPRET"):
        choose_backend("triton", cpu)
    monkeypatch.setenv(K.BACKEND_ENV, "reference")
    assert choose_backend("auto", torch.device("cuda")) == "reference"
    monkeypatch.delenv(K.BACKEND_ENV)
    g = _gen()
    q, k, v = (torch.randn(10, 2, 8, generator=g).bfloat16() for _ in range(3))
    off = torch.tensor([0, 4, 10])
    out = hstu_attention(q, k, v, off, max_seq_len=8, alpha=1.0, num_targets=torch.tensor([1, 2]))
    ref = hstu_attention_reference(*_d64(q, k, v), off, max_seq_len=8, alpha=1.0, num_targets=torch.tensor([1, 2]))
    assert out.dtype == torch.bfloat16
    assert _rel(out, ref) < 1e-2


def test_import_tracekit_does_not_import_torch():
    code = "import sys, tracekit; assert 'torch' not in sys.modules and 'triton' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
    code = "import sys, tracekit.kernels.bench; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# ----------------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("d", [128, 256])
def test_gpu_dense_realistic(dtype, d):
    g = _gen()
    lengths = [1024, 0, 1, 777, 2048]
    off = _offsets(lengths)
    L, H = sum(lengths), 4
    nt = torch.tensor([64, 0, 1, 777, 256], device=DEV)
    # the second call of a specialisation launches the compiled handle (kernels/_launch.py)
    for _ in range(2):
        q, k, v = (_rand(g, L, H, d, dtype=dtype) for _ in range(3))
        out = _poison(L, H, d, dtype)
        hstu_attention(q, k, v, off, max_seq_len=2048, alpha=1 / d**0.5, num_targets=nt, out=out)
        ref = hstu_attention_reference(q.float(), k.float(), v.float(), off, max_seq_len=2048,
                                       alpha=1 / d**0.5, num_targets=nt)
        assert _rel(out, ref) < TOL[dtype]


@pytest.mark.parametrize("args, match", [
    (["--config", "nosuch"], "--config 'nosuch': unknown configuration"),
    (["--config", "B=2"], "--config 'B=2': not an inline configuration"),
    (["--config", "B=2,N=8,kind=foo"], "kind=foo"),
    (["--variants", "bogus"], "--variants 'bogus': unknown variant"),
    (["--variants", ""], "--variants '': unknown variant"),
    (["--baseline", "bogus"], "--baseline 'bogus': unknown variant"),
    (["--warmup-ms", "-1"], "--warmup-ms -1.0"),
    (["--rep-ms", "nan"], "Invalid value for '--rep-ms': 'nan' is not a finite number."),
    (["--json", "{tmp}/missing/r.json"], "folder {tmp}/missing does not exist"),
    (["--csv", "{tmp}"], "is a folder"),
])
def test_bench_arguments_are_checked_before_the_first_measurement(tmp_path, args, match, monkeypatch, capsys):
    """One line, exit 2, before any configuration is timed (the standard set takes minutes)."""
    from tracekit.kernels import bench

    from tracekit.cli import main

    timed = []
    monkeypatch.setattr(bench, "_make_inputs", lambda *a: timed.append(a))
    args = [a.format(tmp=tmp_path) for a in args]
    assert main(["bench", "attention", "--config", "seed1", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tracekit: error: ") and err.count("\n") == 1 and match.format(tmp=tmp_path) in err
    assert timed == []


def test_bench_cpu_tiny(tmp_path):
    from tracekit.kernels.bench import CONFIGS, bench_attention, format_table

    assert {"seed1", "seed5", "hstu_T4096", "hstu_T8192", "jagged_T4096", "bsa_T8192", "cached_C4096_n256"} <= set(CONFIGS)
    configs = ["B=2,N=32,H=2,d=16,targets=4", "kind=bsa,B=1,N=64,H=1,d=16,bs=16,counts=1",
               "kind=cached,B=2,N=48,H=1,d=16,cache=40,new=8,targets=8"]
    rows = bench_attention(configs, variants=("triton_dense", "triton_block_sparse", "triton_cached", "reference"),
                           baseline="reference", dtype="fp32", warmup_ms=0, rep_ms=1,
                           json_path=tmp_path / "r.json", csv_path=tmp_path / "r.csv", device=DEV)
    got = {(r["config"].split(",")[0], r["variant"]) for r in rows}
    assert ("B=2", "triton_dense") in got and ("kind=bsa", "triton_block_sparse") in got
    assert ("kind=cached", "triton_cached") in got
    for r in rows:
        assert r["error"] is None, r
        assert r["median_ms"] > 0 and r["min_ms"] <= r["median_ms"] <= r["max_ms"]
        assert r["valid_pairs"] > 0 and r["tflops"] > 0
    dense = next(r for r in rows if r["config"].startswith("B=2") and r["variant"] == "triton_dense")
    assert dense["valid_pairs"] == 2 * (28 * 29 // 2 + 4 * 28 + 4)
    ref = next(r for r in rows if r["config"].startswith("B=2") and r["variant"] == "reference")
    assert ref["speedup_vs_baseline"] == pytest.approx(1.0)
    import json

    assert len(json.loads((tmp_path / "r.json").read_text())["results"]) == len(rows)
    assert (tmp_path / "r.csv").read_text().count("\n") == len(rows) + 1
    table = format_table(rows)
    assert "triton_dense" in table and "speedup" in table


@pytest.mark.parametrize("one_loop", [False, True], ids=["two-loops", "one-loop"])
@pytest.mark.parametrize("tiles", [(64, 16), (16, 32)], ids=["BM>BN", "BM<BN"])
def test_dense_tile_shapes(tiles, one_loop):
    """The block bookkeeping (unmasked / masked / window ranges) for unequal tile sizes, with the
    diagonal blocks in their own loop or inside the one loop (ONE_LOOP)."""
    from tracekit.kernels._dense import hstu_fwd

    g = _gen()
    lengths, nts = [70, 0, 1, 45, 128], [9, 0, 1, 45, 0]
    off = _offsets(lengths)
    L = sum(lengths)
    q, k, v = (_rand(g, L, 2, 16, dtype=torch.float32) for _ in range(3))
    nt = torch.tensor(nts, device=DEV)
    cfg = dict(BLOCK_M=tiles[0], BLOCK_N=tiles[1], ONE_LOOP=one_loop)
    for kw in (dict(contextual_seq_len=0, max_attn_len=0), dict(contextual_seq_len=3, max_attn_len=20)):
        out = hstu_fwd(q, k, v, off, max_seq_len=130, alpha=0.5, num_targets=nt, config=cfg,
                       out=_poison(L, 2, 16, torch.float32), **kw)
        ref = hstu_attention_reference(*_d64(q, k, v), off, max_seq_len=130, alpha=0.5, num_targets=nt, **kw)
        assert _rel(out, ref) < TOL[torch.float32]


#: the cached kernel's page addressing modes, tile shapes, query-block loop and key splits
CACHED_MODES = [dict(PAGES=0, BLOCK_N=64, GRID_M=2), dict(PAGES=1, DIAG_TILE=True, BLOCK_N=16),
                dict(PAGES=1, BLOCK_N=64), dict(PAGES=2, DIAG_TILE=True, BLOCK_N=32, GRID_M=None),
                dict(PAGES=1, DIAG_TILE=True, BLOCK_N=32, SPLIT=3),
                dict(PAGES=0, BLOCK_N=32, SPLIT=2, GRID_M=1),
                dict(PAGES=3, DIAG_TILE=True, BLOCK_N=32), dict(PAGES=3, BLOCK_N=16, SPLIT=2),
                dict(PAGES=1, DIAG_TILE=True, BLOCK_N=32, SPLIT=2, G_FAST=True, GRID_M=2),
                dict(PAGES=1, DIAG_TILE=True, BLOCK_N=16, GRID_M=0),
                dict(PAGES=1, DIAG_TILE=True, BLOCK_N=32, SPLIT=3, FLAT=True),
                dict(PAGES=3, BLOCK_N=16, FLAT=True), dict(PAGES=0, BLOCK_N=64, SPLIT=2, FLAT=True),
                dict(PAGES=1, BLOCK_N=16, PERSIST=True, PROGRAMS=5, MIN_CHUNK=1),
                dict(PAGES=1, BLOCK_M=32, BLOCK_N=16, PERSIST=True, PROGRAMS=4, MIN_CHUNK=2),
                dict(PAGES=0, BLOCK_M=64, BLOCK_N=16, PERSIST=True, PROGRAMS=3, MIN_CHUNK=1),
                dict(PAGES=2, BLOCK_N=16, PERSIST=True, PROGRAMS=2, MIN_CHUNK=1000),
                dict(PAGES=1, BLOCK_N=16, PERSIST=True, PROGRAMS=3, MIN_CHUNK=1, DP=True),
                dict(PAGES=1, BLOCK_N=16, PERSIST=True, PROGRAMS=2, MIN_CHUNK=1, DP=True, DP_SPARE=2),
                dict(PAGES=1, BLOCK_N=16, PERSIST=True, PROGRAMS=3, MIN_CHUNK=1, DP=True, DP_SPARE=0),
                dict(PAGES=1, BLOCK_N=16, PERSIST=True, PROGRAMS=5, MIN_CHUNK=1, DP=True, DP_SPARE=0),
                dict(PAGES=5, BLOCK_N=16, PERSIST=True, PROGRAMS=3, MIN_CHUNK=1, DP=True, UNIFORM=True),
                dict(PAGES=1, BLOCK_N=16, PERSIST=True, PROGRAMS=4, MIN_CHUNK=1, TWO_LOOPS=False),
                dict(PAGES=1, BLOCK_N=16, PERSIST=True, PROGRAMS=40, MIN_CHUNK=1),
                dict(PAGES=1, BLOCK_N=16, PERSIST=True, PROGRAMS=40, MIN_CHUNK=1, WS_PERM=False)]
CACHED_MODE_IDS = ["load-bn64", "regs-diag-bn16", "regs-bn64", "copy-diag", "split3", "split2-loop",
                   "tma-diag", "tma-bn16-split2", "gfast-split2", "noloop", "flat-split3", "flat-tma",
                   "flat-load-split2", "persist", "persist-32x16", "persist-load-64x16", "persist-copy-whole", "persist-dp", "persist-dp-spare2",
                   "persist-dp-spare0", "persist-dp-spare0-whole-waves",
                   "persist-dp-nc-uniform", "persist-four-loops", "persist-many-pieces",
                   "persist-many-pieces-plain-ws"]
#: the masks besides the plain one: each mode runs with one of them, in turn (every mask meets
#: most kinds of mode, for the suite's time)
CACHED_MASKS = (dict(contextual_seq_len=2, max_attn_len=0), dict(contextual_seq_len=0, max_attn_len=9))


@pytest.mark.parametrize(("cfg", "mask"), [(c, CACHED_MASKS[i % 2]) for i, c in enumerate(CACHED_MODES)],
                         ids=CACHED_MODE_IDS)
def test_cached_page_modes(cfg, mask):
    """The cached kernel's page addressing modes, tile shapes, query-block loop and key
    splits (partial sums added by the last program to arrive; empty caches included)."""
    from tracekit.kernels._cached import hstu_cached_fwd

    g = _gen()
    hist, new, targets = [40, 0, 7, 64, 3, 33], [5, 3, 0, 1, 20, 1], [2, 3, 0, 1, 16, 1]
    H, d, dv = 2, 32, 16
    ho, no = _offsets(hist), _offsets(new)
    kh, vh = _rand(g, sum(hist), H, d, dtype=torch.float32), _rand(g, sum(hist), H, dv, dtype=torch.float32)
    q, k = _rand(g, sum(new), H, d, dtype=torch.float32), _rand(g, sum(new), H, d, dtype=torch.float32)
    v = _rand(g, sum(new), H, dv, dtype=torch.float32)
    cache = build_paged_kv_cache(kh, vh, ho, max_len=100, generator=g)
    nt = torch.tensor(targets, device=DEV)
    for extra in (dict(contextual_seq_len=0, max_attn_len=0), mask):
        out = _poison(sum(new), H, dv, torch.float32)
        hstu_cached_fwd(q, k, v, no, cache, max_seq_len=100, alpha=0.4, num_targets=nt, out=out,
                        config={"BLOCK_M": 16, "PERSIST": False, **cfg}, **extra)
        c64 = PagedKVCache(cache.k_cache.double(), cache.v_cache.double(), cache.page_table, cache.cache_lens)
        ref = hstu_attention_cached_reference(*_d64(q, k, v), no, c64, max_seq_len=100, alpha=0.4, num_targets=nt,
                                              **extra)
        assert _rel(out, ref) < TOL[torch.float32]


@pytest.mark.parametrize("cfg", [dict(PERSIST=True), dict(PERSIST=True, TWO_LOOPS=False), dict(PERSIST=False)],
                         ids=["persist", "persist-four-loops", "flat"])
def test_cached_page_table_without_pages(cfg):
    """Every cache empty and a page table with no column (no page in the pool): the
    persistent kernel's last loop computes a cached address it never loads through, from a
    page-table entry that must then exist (on the GPU an empty tensor may have no storage)."""
    from tracekit.kernels._cached import hstu_cached_fwd

    g = _gen()
    H, d = 2, 16
    new, targets = [5, 1, 7], [3, 1, 0]
    no = _offsets(new)
    q, k, v = (_rand(g, sum(new), H, d, dtype=torch.float32) for _ in range(3))
    cache = PagedKVCache(torch.zeros(0, 32, H, d, device=DEV), torch.zeros(0, 32, H, d, device=DEV),
                         torch.zeros(3, 0, dtype=torch.int32, device=DEV), torch.zeros(3, dtype=torch.int32, device=DEV))
    nt = torch.tensor(targets, device=DEV)
    out = _poison(sum(new), H, d, torch.float32)
    hstu_cached_fwd(q, k, v, no, cache, max_seq_len=16, alpha=0.4, num_targets=nt, contextual_seq_len=0,
                    max_attn_len=0, config=cfg, out=out)
    c64 = PagedKVCache(cache.k_cache.double(), cache.v_cache.double(), cache.page_table, cache.cache_lens)
    ref = hstu_attention_cached_reference(*_d64(q, k, v), no, c64, max_seq_len=16, alpha=0.4, num_targets=nt)
    assert _rel(out, ref) < TOL[torch.float32]


@pytest.mark.parametrize("cfg", [dict(BLOCK_M=16, BLOCK_N=32, SPLIT=3, FLAT=True, PAGES=1, PERSIST=False),
                                 dict(BLOCK_M=32, BLOCK_N=16, PAGES=1, PERSIST=True, PROGRAMS=4, MIN_CHUNK=1)],
                         ids=["flat-split3", "persist"])
def test_cached_split_buffers_reused_and_reset(cfg):
    """The split kernels' workspace and arrival counters persist between calls (grown on
    demand): each launch leaves its counters at zero, so the next call's blocks are still
    summed and written (a counter left at 1 would leave the poisoned output in place)."""
    from tracekit.kernels import _cached

    g = _gen()
    H, d, dv = 2, 32, 16
    _cached.release_split_buffers()
    seen = []
    for hist, new in (([40, 0, 7], [5, 3, 20]), ([33, 50], [9, 40]), ([40, 0, 7], [5, 3, 20])):
        ho, no = _offsets(hist), _offsets(new)
        kh, vh = _rand(g, sum(hist), H, d, dtype=torch.float32), _rand(g, sum(hist), H, dv, dtype=torch.float32)
        q, k = _rand(g, sum(new), H, d, dtype=torch.float32), _rand(g, sum(new), H, d, dtype=torch.float32)
        v = _rand(g, sum(new), H, dv, dtype=torch.float32)
        cache = build_paged_kv_cache(kh, vh, ho, max_len=100, generator=g)
        out = _poison(sum(new), H, dv, torch.float32)
        _cached.hstu_cached_fwd(q, k, v, no, cache, max_seq_len=100, alpha=0.4, num_targets=None, out=out,
                                contextual_seq_len=0, max_attn_len=0, config=dict(cfg))
        c64 = PagedKVCache(cache.k_cache.double(), cache.v_cache.double(), cache.page_table, cache.cache_lens)
        ref = hstu_attention_cached_reference(*_d64(q, k, v), no, c64, max_seq_len=100, alpha=0.4)
        assert _rel(out, ref) < TOL[torch.float32]
        (ws, cnt), = _cached._BUFFERS.values()
        assert int(cnt.abs().sum()) == 0
        seen.append((ws.data_ptr(), ws.numel(), cnt.numel()))
    assert seen[2] == seen[1]  # reused
    if not cfg["PERSIST"]:
        assert seen[1][1] > seen[0][1]  # the workspace grew for the larger call
    _cached.release_split_buffers()


# ----------------------------------------------------------------------------- value checks


def _bad_inputs():
    """(name, function, kwargs, expected message) of calls with one bad value each."""
    g = _gen()
    q, k, v = (_rand(g, 10, 2, 8, dtype=torch.float32) for _ in range(3))
    off = _offsets([4, 6])
    kw = dict(max_seq_len=8, alpha=1.0)
    kh, vh = _rand(g, 40, 2, 8, dtype=torch.float32), _rand(g, 40, 2, 8, dtype=torch.float32)

    def cache(mutate):
        c = build_paged_kv_cache(kh, vh, _offsets([33, 7]), max_len=64, generator=g)
        mutate(c)
        return c

    def bad_page(c):
        c.page_table[0, 1] = c.k_cache.shape[0] + 3

    def long_cache(c):
        c.cache_lens[1] = 70

    dense = lambda **a: hstu_attention(q, k, v, **a)  # noqa: E731
    cached = lambda c, **a: hstu_attention_cached(q, k, v, off, c, **a)  # noqa: E731
    bsa = lambda **a: hstu_attention_block_sparse(q, k, v, block_size=16, **a)  # noqa: E731
    return [
        ("decreasing", dense, dict(seq_offsets=torch.tensor([0, 7, 6, 10], device=DEV), **kw),
         "non-decreasing"),
        ("short_end", dense, dict(seq_offsets=_offsets([4, 5]), **kw), "number of tokens"),
        ("too_long", dense, dict(seq_offsets=_offsets([1, 9]), **kw), "max_seq_len"),
        ("targets", dense, dict(seq_offsets=off, num_targets=torch.tensor([1, 7], device=DEV), **kw),
         "num_targets"),
        ("bsa_offsets", bsa, dict(seq_offsets=torch.tensor([1, 4, 10], device=DEV), **kw), "seq_offsets"),
        ("cache_total", cached, dict(c=cache(lambda c: None), max_seq_len=36, alpha=1.0), "max_seq_len"),
        ("cache_page", cached, dict(c=cache(bad_page), max_seq_len=64, alpha=1.0), "page"),
        ("cache_len", cached, dict(c=cache(long_cache), max_seq_len=200, alpha=1.0), "cache_lens"),
    ]


@pytest.mark.parametrize("case", range(8), ids=[c[0] for c in _bad_inputs()])
def test_bad_values_raise_clear_errors_on_the_host(case):
    """CPU tensors: the default call checks values on the host, a one-line KernelInputError."""
    _, fn, kw, msg = _bad_inputs()[case]
    with pytest.raises(KernelInputError, match=msg):
        fn(**kw)


@pytest.mark.skipif(HAS_CUDA, reason="a device-side assertion ends the CUDA context; run under the interpreter")
@pytest.mark.parametrize("case", range(8), ids=[c[0] for c in _bad_inputs()])
def test_device_side_checks_name_the_problem(case, monkeypatch):
    """The checks the kernels run on a GPU (no host sync), exercised under the interpreter:
    each bad value fails the kernel's assertion with the message a user sees."""
    import dataclasses

    from tracekit.kernels import _common
    from triton.runtime import interpreter

    monkeypatch.setattr(_common, "values_on_host", lambda t: False)
    opts = interpreter.interpreter_builder.options
    monkeypatch.setattr(interpreter.interpreter_builder, "options", dataclasses.replace(opts, debug=True))
    _, fn, kw, msg = _bad_inputs()[case]
    with pytest.raises(Exception, match=msg) as err:
        fn(backend="triton", **kw)
    assert not isinstance(err.value, KernelInputError)  # raised by the kernel, not by the host checks


@pytest.mark.skipif(HAS_CUDA, reason="a device-side assertion ends the CUDA context; run under the interpreter")
@pytest.mark.parametrize("page", [1, 70])
def test_device_side_page_check_covers_the_whole_table(page, monkeypatch):
    """The check kernel splits the page table into chunks of 64 pages, one program each: a bad
    page is caught in the first chunk and in a later one."""
    import dataclasses

    from tracekit.kernels import _common
    from triton.runtime import interpreter

    monkeypatch.setattr(_common, "values_on_host", lambda t: False)
    opts = interpreter.interpreter_builder.options
    monkeypatch.setattr(interpreter.interpreter_builder, "options", dataclasses.replace(opts, debug=True))
    g = _gen()
    kh, vh = _rand(g, 2307, 1, 16, dtype=torch.float32), _rand(g, 2307, 1, 16, dtype=torch.float32)
    cache = build_paged_kv_cache(kh, vh, _offsets([2300, 7]), max_len=2400, generator=g)
    q, k, v = (_rand(g, 6, 1, 16, dtype=torch.float32) for _ in range(3))
    kw = dict(max_seq_len=2400, alpha=1.0, backend="triton")
    hstu_attention_cached(q, k, v, _offsets([4, 2]), cache, **kw)
    cache.page_table[0, page] = cache.k_cache.shape[0]
    with pytest.raises(Exception, match="page_table names a page outside k_cache"):
        hstu_attention_cached(q, k, v, _offsets([4, 2]), cache, **kw)


@pytest.mark.skipif(HAS_CUDA, reason="a device-side assertion ends the CUDA context; run under the interpreter")
def test_device_side_checks_without_tokens(monkeypatch):
    """No tokens, so no dense kernel to check in: offsets that do not end at 0 still fail."""
    import dataclasses

    from tracekit.kernels import _common
    from triton.runtime import interpreter

    monkeypatch.setattr(_common, "values_on_host", lambda t: False)
    opts = interpreter.interpreter_builder.options
    monkeypatch.setattr(interpreter.interpreter_builder, "options", dataclasses.replace(opts, debug=True))
    q = torch.zeros(0, 2, 16, device=DEV)
    assert hstu_attention(q, q, q, _offsets([0, 0]), max_seq_len=8, alpha=1.0, backend="triton").shape == (0, 2, 16)
    with pytest.raises(Exception, match="number of tokens"):
        hstu_attention(q, q, q, _offsets([0, 3]), max_seq_len=8, alpha=1.0, backend="triton")


def test_device_side_checks_pass_valid_inputs(monkeypatch):
    from tracekit.kernels import _common

    monkeypatch.setattr(_common, "values_on_host", lambda t: False)
    g = _gen()
    hist, new, targets = [40, 0, 7], [5, 3, 0], [2, 3, 0]
    kh, vh = _rand(g, sum(hist), 2, 16, dtype=torch.float32), _rand(g, sum(hist), 2, 16, dtype=torch.float32)
    q, k, v = (_rand(g, sum(new), 2, 16, dtype=torch.float32) for _ in range(3))
    cache = build_paged_kv_cache(kh, vh, _offsets(hist), max_len=50, generator=g)
    nt = torch.tensor(targets, device=DEV)
    kw = dict(max_seq_len=50, alpha=0.5, num_targets=nt)
    out = hstu_attention_cached(q, k, v, _offsets(new), cache, backend="triton", **kw)
    c64 = PagedKVCache(cache.k_cache.double(), cache.v_cache.double(), cache.page_table, cache.cache_lens)
    assert _rel(out, hstu_attention_cached_reference(*_d64(q, k, v), _offsets(new), c64, **kw)) < TOL[torch.float32]
    out = hstu_attention(q, k, v, _offsets(new), backend="triton", **kw)
    assert _rel(out, hstu_attention_reference(*_d64(q, k, v), _offsets(new), **kw)) < TOL[torch.float32]


def test_dense_default_call_checks_inside_the_kernel(monkeypatch):
    """The dense kernel checks values itself: its default call on device-side values queues no
    separate check kernel (the cached and block-sparse calls still do), and bad values are
    still caught (by the kernel, see test_device_side_checks_name_the_problem)."""
    from tracekit.kernels import _checks, _common

    monkeypatch.setattr(_common, "values_on_host", lambda t: False)
    calls = []
    monkeypatch.setattr(_checks, "check_on_device", lambda *a, **k: calls.append(a))
    g = _gen()
    q, k, v = (_rand(g, 12, 2, 16, dtype=torch.float32) for _ in range(3))
    off, nt = _offsets([5, 0, 7]), torch.tensor([2, 0, 7], device=DEV)
    out = hstu_attention(q, k, v, off, max_seq_len=8, alpha=0.5, num_targets=nt, backend="triton")
    ref = hstu_attention_reference(*_d64(q, k, v), off, max_seq_len=8, alpha=0.5, num_targets=nt)
    assert _rel(out, ref) < TOL[torch.float32] and calls == []
    hstu_attention_block_sparse(q, k, v, off, max_seq_len=8, alpha=0.5, block_size=16, backend="triton")
    assert len(calls) == 1


def test_failed_device_check_raises_on_the_next_call(monkeypatch):
    """What a trapped kernel left in the pinned record (problem code << 32 | sequence) becomes
    the KernelInputError of every later call on GPU tensors, validate=False or not; calls on
    CPU tensors are not affected."""
    import ctypes

    from tracekit.kernels import _common

    g = _gen()
    q, k, v = (_rand(g, 12, 2, 16, dtype=torch.float32) for _ in range(3))
    off = _offsets([5, 7])
    monkeypatch.setattr(_common, "device_check_record", ctypes.c_int64(3 << 32 | 1))
    hstu_attention(q, k, v, off, max_seq_len=8, alpha=0.5)  # values on the host: checked there
    monkeypatch.setattr(_common, "values_on_host", lambda t: False)
    for validate in (True, False):
        with pytest.raises(KernelInputError, match=r"num_targets must lie in \[0, the sequence's length\]; wrong "
                                                   r"at sequence 1 \(the kernel stopped with a trap"):
            hstu_attention(q, k, v, off, max_seq_len=8, alpha=0.5, backend="triton", validate=validate)
    monkeypatch.setattr(_common, "device_check_record", ctypes.c_int64(2 << 32 | 70000))
    with pytest.raises(KernelInputError, match=r"longer than max_seq_len; wrong at sequence 70000 "):
        hstu_attention(q, k, v, off, max_seq_len=8, alpha=0.5, backend="triton")
    monkeypatch.setattr(_common, "device_check_record", ctypes.c_int64(0))
    hstu_attention(q, k, v, off, max_seq_len=8, alpha=0.5, backend="triton")


def test_launch_spec_keys():
    """The compiled-handle key of one argument follows Triton's specialisation: int width,
    == 1, divisibility by 16; floats all alike; bools apart from ints."""
    from tracekit.kernels._launch import spec

    assert spec(32) == spec(64) != spec(8) != spec(1)
    assert spec(2**31) != spec(2**31 - 16) and spec(0.5) == spec(3.0)
    assert spec(True) != spec(1) and spec(True) != spec(False)
    t = torch.zeros(8, dtype=torch.int32)
    assert spec(t) == (torch.int32, True) and spec(t[1:]) == (torch.int32, False)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")
def test_gpu_default_calls_never_sync():
    """The default call (validate=True) of every public kernel: no host synchronisation."""
    g = _gen()
    lengths, nts, H, d = [300, 0, 1, 129], [64, 0, 1, 0], 4, 128
    off = _offsets(lengths)
    q, k, v = (_rand(g, sum(lengths), H, d, dtype=torch.bfloat16) for _ in range(3))
    nt = torch.tensor(nts, device=DEV)
    kh, vh = (_rand(g, 500, H, d, dtype=torch.bfloat16) for _ in range(2))
    cache = build_paged_kv_cache(kh, vh, _offsets([200, 0, 33, 267]), max_len=600, generator=g)
    kw = dict(max_seq_len=1024, alpha=0.1, num_targets=nt)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        outs = [hstu_attention(q, k, v, off, **kw), hstu_attention_cached(q, k, v, off, cache, **kw),
                hstu_attention_block_sparse(q, k, v, off, block_size=32, block_counts=2, **kw)]
    finally:
        torch.cuda.set_sync_debug_mode(0)
    ref = hstu_attention_reference(q.float(), k.float(), v.float(), off, **kw)
    assert _rel(outs[0], ref) < TOL[torch.bfloat16]
    c32 = PagedKVCache(cache.k_cache.float(), cache.v_cache.float(), cache.page_table, cache.cache_lens)
    ref = hstu_attention_cached_reference(q.float(), k.float(), v.float(), off, c32, **kw)
    assert _rel(outs[1], ref) < TOL[torch.bfloat16]


_TRAP_CHILD = r"""
import sys
sys.path.insert(0, sys.argv[1])
import attention_gpu
import torch
K = attention_gpu.K
off, nt, max_seq_len = eval(sys.argv[2])
q = torch.randn(10, 2, 16, device="cuda", dtype=torch.bfloat16)
off = torch.tensor(off, device="cuda")
nt = None if nt is None else torch.tensor(nt, device="cuda")
K.hstu_attention(q, q, q, off, max_seq_len=max_seq_len, alpha=1.0, num_targets=nt)
try:
    torch.cuda.synchronize()
    print("no error")
except RuntimeError as exc:
    print("cuda error:", str(exc).splitlines()[0])
try:
    K.hstu_attention(q, q, q, off, max_seq_len=max_seq_len, alpha=1.0, num_targets=nt)
except K.KernelInputError as exc:
    print("next call:", exc)
"""


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")
@pytest.mark.parametrize("case", [
    (([0, 7, 6, 10], None, 16), "seq_offsets must start at 0, be non-decreasing and end at the number of tokens; "
                                "wrong at sequence 1"),
    (([0, 1, 10], None, 8), "a sequence is longer than max_seq_len; wrong at sequence 1"),
    (([0, 4, 10], [1, 7], 16), "num_targets must lie in \\[0, the sequence's length\\]; wrong at sequence 1"),
], ids=["decreasing", "too_long", "targets"])
def test_gpu_fused_checks_stop_the_call_with_a_message(case):
    """The dense kernel's fused checks on a GPU: a bad value stops the kernel (trap) before it
    reads anything, the next call raises the message, and the message is printed at exit."""
    import re
    from pathlib import Path

    inputs, msg = case
    bench = str(Path(__file__).resolve().parents[1] / "benchmarks")
    r = subprocess.run([sys.executable, "-c", _TRAP_CHILD, bench, repr(inputs)], capture_output=True, text=True,
                       timeout=300)
    assert "cuda error:" in r.stdout, r.stdout + r.stderr
    assert re.search("next call: tracekit HSTU attention: " + msg, r.stdout), r.stdout + r.stderr
    assert re.search("tracekit HSTU attention: " + msg, r.stderr), r.stderr


_GRAPH_CHILD = r"""
import sys
sys.path.insert(0, sys.argv[1])
import attention_gpu
import torch
from tracekit.kernels import _checks
K = attention_gpu.K
g = torch.Generator(device="cuda").manual_seed(0)
q, k, v = (torch.randn(429, 2, 64, device="cuda", generator=g).bfloat16() for _ in range(3))
off, nt = torch.tensor([0, 300, 300, 429], device="cuda"), torch.tensor([64, 0, 1], device="cuda")
kw = dict(max_seq_len=512, alpha=0.1, num_targets=nt)
ref = K.hstu_attention_reference(q.float(), k.float(), v.float(), off, **kw)
def rel(out):
    return float((out.float() - ref).norm() / ref.norm())
K.hstu_attention(q, k, v, off, validate=False, **kw)  # compiled before the captures
_checks.check_on_device(off, 429, 512, nt)
torch.cuda.synchronize()
errs = []
for _ in range(2):  # first before any eager default call (no failure record yet), then after one
    had_record = _checks._RECORD is not None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = K.hstu_attention(q, k, v, off, **kw)
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    errs.append((had_record, rel(out)))
    K.hstu_attention(q, k, v, off, **kw)  # eager: makes the record (and compiles the fused variant)
    torch.cuda.synchronize()
print("errors", errs)
"""


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")
def test_gpu_dense_default_call_in_a_cuda_graph():
    """A default dense call captured in a CUDA graph before any eager one (the pinned failure
    record is allocated inside the capture) and after one: both replay to the right output."""
    import ast
    from pathlib import Path

    bench = str(Path(__file__).resolve().parents[1] / "benchmarks")
    r = subprocess.run([sys.executable, "-c", _GRAPH_CHILD, bench], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    errs = ast.literal_eval(r.stdout.split("errors", 1)[1].strip())
    assert [had for had, _ in errs] == [False, True]
    assert all(e < TOL[torch.bfloat16] for _, e in errs), errs


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")
def test_gpu_block_sparse_dependent_launch_streams_and_graphs():
    """The fused block-sparse kernel launched as a programmatic dependent of the pool kernel
    (the default on sm_90+) reads the pooled keys only once the pool kernel is done: calls with
    two different K alternating on two streams (so a call's pooled buffer may hold the other
    input's values when reused), and a call captured in a CUDA graph and replayed after K
    changed, give exactly the outputs and selections of the plain launch."""
    from tracekit.kernels._bsa import hstu_bsa_fwd

    g = _gen()
    lengths, nts, H, d = [2048, 1000, 0, 3000], [256, 0, 0, 64], 4, 128
    off, L = _offsets(lengths), sum(lengths)
    q, v = (_rand(g, L, H, d, dtype=torch.bfloat16) for _ in range(2))
    ks = [_rand(g, L, H, d, dtype=torch.bfloat16) for _ in range(2)]
    kw = dict(max_seq_len=3000, alpha=d**-0.5, num_targets=torch.tensor(nts, device=DEV), block_size=64,
              block_counts=8, return_block_indices=True)
    want = [hstu_bsa_fwd(q, k, v, off, config=dict(PDL=False), **kw) for k in ks]
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    torch.cuda.synchronize()
    got = []
    for i in range(16):
        with torch.cuda.stream(streams[i % 2]):
            got.append(hstu_bsa_fwd(q, ks[(i // 2) % 2], v, off, **kw))
    torch.cuda.synchronize()
    for i, (o, s) in enumerate(got):
        assert torch.equal(o, want[(i // 2) % 2][0]) and torch.equal(s, want[(i // 2) % 2][1]), i
    k = ks[0].clone()
    out = torch.empty_like(q)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        hstu_bsa_fwd(q, k, v, off, out=out, **kw)  # compiles outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        _, sel = hstu_bsa_fwd(q, k, v, off, out=out, **kw)
    for j in (1, 0, 1):
        k.copy_(ks[j])
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, want[j][0]) and torch.equal(sel, want[j][1]), j


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")
@pytest.mark.parametrize("cfg", [dict(SPLIT=2, PERSIST=False), dict(PERSIST=True)], ids=["flat-split2", "persist"])
def test_gpu_cached_split_buffers_streams_and_graphs(cfg):
    """The split kernel's persistent workspace and counters: calls queued back to back on two
    streams at once, and a call captured in a CUDA graph then replayed after eager calls of
    another size (which grow the eager buffers), all equal their float32 reference."""
    from tracekit.kernels import _cached

    g = _gen()
    H, d = 4, 128
    _cached.release_split_buffers()

    def case(hist, new):
        q, k, v = (_rand(g, sum(new), H, d, dtype=torch.bfloat16) for _ in range(3))
        kh, vh = (_rand(g, sum(hist), H, d, dtype=torch.bfloat16) for _ in range(2))
        cache = build_paged_kv_cache(kh, vh, _offsets(hist), max_len=2048, generator=g)
        off, nt = _offsets(new), torch.tensor([min(64, x) for x in new], device=DEV)
        kw = dict(max_seq_len=2048, alpha=0.1, num_targets=nt)
        c32 = PagedKVCache(cache.k_cache.float(), cache.v_cache.float(), cache.page_table, cache.cache_lens)
        ref = hstu_attention_cached_reference(q.float(), k.float(), v.float(), off, c32, **kw)
        return (lambda out: _cached.hstu_cached_fwd(q, k, v, off, cache, out=out, contextual_seq_len=0,
                                                    max_attn_len=0, config=dict(cfg), **kw)), ref

    small, big = case([300, 0, 1000], [200, 64, 129]), case([700, 900, 1200, 33], [500, 300, 400, 640])
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    outs = [[], []]
    torch.cuda.synchronize()
    for _ in range(20):
        for i, st in enumerate(streams):
            with torch.cuda.stream(st):
                fn, ref = (small, big)[i]
                o = torch.full_like(ref, float("nan"), dtype=torch.bfloat16)
                fn(o)
                outs[i].append(o)
    torch.cuda.synchronize()
    for i in range(2):
        assert all(_rel(o, (small, big)[i][1]) < TOL[torch.bfloat16] for o in outs[i])
    graph_out = torch.full_like(small[1], float("nan"), dtype=torch.bfloat16)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        small[0](graph_out)  # warm-up outside the capture (compiles)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        small[0](graph_out)
    _cached.release_split_buffers()
    for _ in range(3):
        eager = torch.full_like(big[1], float("nan"), dtype=torch.bfloat16)
        big[0](eager)
        graph_out.fill_(float("nan"))
        graph.replay()
        assert _rel(eager, big[1]) < TOL[torch.bfloat16]
        assert _rel(graph_out, small[1]) < TOL[torch.bfloat16]
    torch.cuda.synchronize()
    assert all(int(cnt.abs().sum()) == 0 for _, cnt in _cached._BUFFERS.values())
    _cached.release_split_buffers()


def test_tiles_file_overrides_builtin_and_default(tmp_path, monkeypatch):
    """Tuned tiles are read from the tuning file by key (GPU, dtype, dims, max_seq_len bucket)."""
    from tracekit.kernels import tiles

    monkeypatch.setenv(tiles.TILES_ENV, str(tmp_path / "t.json"))
    monkeypatch.setattr(tiles, "_device", lambda device: ("NVIDIA H200", 9))
    monkeypatch.setattr(tiles, "BUILTIN", {("dense", "bfloat16", 128, 128, 2048): {"BLOCK_M": 64}})
    tiles._memo.clear()
    cuda = torch.device("cuda", 0)
    assert tiles.bucket(1000) == 1024 and tiles.bucket(1024) == 1024 and tiles.bucket(1 << 20) == 16384
    assert tiles.lookup("dense", torch.device("cpu"), torch.bfloat16, 128, 128, 1024) is None
    assert tiles.lookup("dense", cuda, torch.bfloat16, 128, 128, 1024) is None
    assert tiles.lookup("dense", cuda, torch.bfloat16, 128, 128, 1500) == {"BLOCK_M": 64}
    tiles.save("dense", "NVIDIA H200", torch.bfloat16, 128, 128, 1000, {"BLOCK_M": 128, "num_stages": 4})
    assert tiles.lookup("dense", cuda, torch.bfloat16, 128, 128, 1024) == {"BLOCK_M": 128, "num_stages": 4}
    assert tiles.lookup("dense", cuda, torch.float16, 128, 128, 1024) is None
    monkeypatch.setattr(tiles, "_device", lambda device: ("NVIDIA H100", 9))
    tiles._memo.clear()
    assert tiles.lookup("dense", cuda, torch.bfloat16, 128, 128, 1024) is None  # tuned on another GPU
    tiles._memo.clear()


@pytest.mark.parametrize("content, said", [
    (b'{"tiles": {"dense|NVIDIA H200|bfloat16|128|128|1024": {"BLOCK_M": 64}', "is not JSON (Expecting"),
    (b"[1, 2]", "not a tiles file (it is not a JSON object;"),
    (b'{"tiles": [1]}', 'not a tiles file ("tiles" is not an object;'),
    (b'{"tiles": {"dense|x": 128}}', "not a tiles file (tile 'dense|x' is not an object of settings;"),
    (b"\xff\xfe{}", "is not UTF-8 text"),
    (None, "cannot be read (Is a directory)"),
])
def test_a_tiles_file_that_is_not_one_is_an_error_not_left_out(tmp_path, monkeypatch, capsys, content, said):
    """A tuning file that cannot be used stops the kernels' lookup with its name and what to do
    (it was read as no tuned tiles: the kernels ran other tiles without a word), is not replaced
    by ``save`` (its other tuned tiles were lost), and stops ``tune`` before it times anything.
    An empty object is a file with no tiles yet."""
    from tracekit.kernels import tiles

    path = tmp_path / "t.json"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    monkeypatch.setenv(tiles.TILES_ENV, str(path))
    monkeypatch.setattr(tiles, "_device", lambda device: ("NVIDIA H200", 9))
    tiles._memo.clear()
    cuda = torch.device("cuda", 0)
    try:
        with pytest.raises(tiles.TilesFileError, match=re.escape(f"{path}: ") + ".*" + re.escape(said)) as err:
            tiles.lookup("dense", cuda, torch.bfloat16, 128, 128, 1024)
        assert str(err.value).endswith(f"fix or delete it (python -m tracekit.kernels.tiles tune writes a new one), "
                                       f"or set {tiles.TILES_ENV} to another file")
        with pytest.raises(tiles.TilesFileError, match=re.escape(said)):
            tiles.save("dense", "NVIDIA H200", torch.bfloat16, 128, 128, 1024, {"BLOCK_M": 128})
        assert content is None and path.is_dir() or path.read_bytes() == content
        assert tiles.main(["tune", "--max-seq-len", "1024"]) == 2
        got = capsys.readouterr()
        assert got.err.count("\n") == 1 and got.err.startswith(f"python -m tracekit.kernels.tiles: error: {path}: ")
        # the library's tune and the benchmark: refused before anything is timed, not each
        # candidate's (each row's) error
        with pytest.raises(tiles.TilesFileError, match=re.escape(said)):
            tiles.tune(1024)
        from tracekit.kernels import bench

        with pytest.raises(tiles.TilesFileError, match=re.escape(said)):
            bench.bench_attention(["seed1"], device="cpu")
    finally:
        tiles._memo.clear()
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv(tiles.TILES_ENV, "~/empty.json")  # (~ as a shell expands it: the file read is the one hashed)
    assert tiles.tiles_path() == empty
    assert tiles.lookup("dense", cuda, torch.bfloat16, 128, 128, 1024) == tiles.BUILTIN[
        ("dense", "bfloat16", 128, 128, 1024)]
    tiles._memo.clear()


@pytest.mark.skipif(HAS_CUDA, reason="tunes on the GPU where there is one")
def test_tiles_tune_without_a_gpu_is_one_line(tmp_path, monkeypatch, capsys):
    """`python -m tracekit.kernels.tiles tune` (README: once per GPU) on a machine without
    CUDA says so in one line, exit 2, and writes no tuning file: it raised a RuntimeError
    from torch.Generator(device="cuda"), a traceback of PyTorch's about its CUDA library."""
    from tracekit.kernels import tiles

    monkeypatch.setenv(tiles.TILES_ENV, str(tmp_path / "t.json"))
    assert tiles.main(["tune", "--max-seq-len", "1024"]) == 2
    got = capsys.readouterr()
    assert got.out == "" and got.err.count("\n") == 1 and "Traceback" not in got.err
    assert got.err.startswith("python -m tracekit.kernels.tiles: error: ") and "CUDA GPU" in got.err
    assert not (tmp_path / "t.json").exists()


@pytest.mark.parametrize("capability, expected", [((7, 5), False), ((7, 0), False), ((8, 0), True), ((9, 0), True)])
def test_cached_uniform_bounds_only_where_redux_sync_runs(monkeypatch, capability, expected):
    """The persistent cached kernel's warp-uniform loop bounds go through ``redux.sync``,
    which PTX has from sm_80: older GPUs (T4, V100) get the plain bounds instead of a
    kernel that does not compile."""
    from tracekit.kernels import _cached

    monkeypatch.setattr(_cached, "_MAJOR", {})
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda idx=None: capability)
    assert _cached._redux_supported(torch.device("cuda", 0)) is expected


def _gluon_sm90() -> bool:
    if not HAS_CUDA or torch.cuda.get_device_capability()[0] != 9:
        return False
    try:
        from tracekit.kernels import _cached_gluon  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.gpu
@pytest.mark.skipif(not _gluon_sm90(), reason="needs an sm_90 GPU and triton.experimental.gluon")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("d", [128, 256])
@pytest.mark.parametrize("cfg", [{}, {"PROGRAMS": 7}, {"PROGRAMS": 5, "DP": False}, {"PROGRAMS": 1, "DP": False},
                                 {"PROGRAMS": 7, "GL_TMA": 0}],
                         ids=["grid", "p7", "p5-nodp", "p1-nodp", "p7-cpasync"])
def test_gpu_cached_gluon_matches_reference(cfg, d, dtype):
    """The persistent kernel's Gluon version (config GLUON; its copies by TMA, or by cp.async only
    with GL_TMA=0): shuffled pages, empty caches and cache lengths not a multiple of the page size
    (every cache slot that holds no token NaN: a stale slot must be masked by a select), jagged
    new-token runs not a multiple of the block, with and without targets, small grids (cut items:
    partial sums); every call twice (the second reuses the counters the first left), against the
    float64 reference."""
    from tracekit.kernels import _cached

    g = _gen()
    H = 2
    hist = [0, 45, 300, 1000, 31, 0, 517, 0, 3, 7, 60, 0]
    new = [200, 1, 129, 64, 300, 100, 100, 100, 100, 100, 1, 1]
    # (the sequences of no targets and new tokens not a multiple of 32: on one program, 48 pieces
    # where the plan once had room for 44)
    for targets in (None, [50, 1, 0, 64, 299, 0, 0, 0, 0, 0, 0, 0]):
        kh, vh = (_rand(g, sum(hist), H, d, dtype=dtype) for _ in range(2))
        q, k, v = (_rand(g, sum(new), H, d, dtype=dtype) for _ in range(3))
        N = max(a + b for a, b in zip(hist, new, strict=True)) + 5
        cache = build_paged_kv_cache(kh, vh, _offsets(hist), max_len=N, generator=g)
        off = _offsets(new)
        nt = None if targets is None else torch.tensor(targets, device=DEV)
        c64 = PagedKVCache(cache.k_cache.double(), cache.v_cache.double(), cache.page_table, cache.cache_lens)
        ref = hstu_attention_cached_reference(*_d64(q, k, v), off, c64, max_seq_len=N, alpha=0.3, num_targets=nt)
        held = torch.zeros(cache.k_cache.shape[:2], dtype=torch.bool, device=DEV)
        for b, c in enumerate(hist):
            for t in range(-(-c // 32)):
                held[int(cache.page_table[b, t]), : min(32, c - 32 * t)] = True
        cache.k_cache[~held] = float("nan")
        cache.v_cache[~held] = float("nan")
        for _ in range(2):
            out = _poison(sum(new), H, d, dtype)
            _cached.hstu_cached_fwd(q, k, v, off, cache, max_seq_len=N, alpha=0.3, num_targets=nt,
                                    contextual_seq_len=0, max_attn_len=0, config={"GLUON": True, **cfg}, out=out)
            assert "gl_kernel" in _cached.LAST_KERNEL.name
            assert _rel(out, ref) < TOL[dtype]


@pytest.mark.gpu
@pytest.mark.skipif(not _gluon_sm90(), reason="needs an sm_90 GPU and triton.experimental.gluon")
def test_gpu_cached_default_is_gluon_and_gluon_false_is_triton():
    """On sm_90 in bf16 the default call runs the Gluon kernel, ``GLUON: False`` the Triton
    kernel, the same result; a default call after them reuses the Gluon kernel's launch handle
    (same plan table, same encoded tensor maps) and is still right after the caches change."""
    from tracekit.kernels import _cached, _cached_gluon

    g = _gen()
    H, d, dtype = 4, 128, torch.bfloat16
    hist, new = [70, 0, 301, 33], [150, 40, 1, 90]
    N = 512
    for rnd in range(2):
        kh, vh = (_rand(g, sum(hist), H, d, dtype=dtype) for _ in range(2))
        q, k, v = (_rand(g, sum(new), H, d, dtype=dtype) for _ in range(3))
        cache = build_paged_kv_cache(kh, vh, _offsets(hist), max_len=N, generator=g)
        off = _offsets(new)
        c64 = PagedKVCache(cache.k_cache.double(), cache.v_cache.double(), cache.page_table, cache.cache_lens)
        ref = hstu_attention_cached_reference(*_d64(q, k, v), off, c64, max_seq_len=N, alpha=0.3)
        for name, cfg in (("default", None), ("triton", {"GLUON": False}), ("again", None)):
            out = _poison(sum(new), H, d, dtype)
            _cached.hstu_cached_fwd(q, k, v, off, cache, max_seq_len=N, alpha=0.3, num_targets=None,
                                    contextual_seq_len=0, max_attn_len=0, config=cfg, out=out)
            kind = "gl_kernel" if name != "triton" else "sk_kernel"
            assert kind in _cached.LAST_KERNEL.name, (rnd, name, _cached.LAST_KERNEL.name)
            assert _rel(out, ref) < TOL[dtype], (rnd, name)
    assert _cached_gluon._HANDLES and any(h is not None for h in _cached_gluon._HANDLES.values())


@pytest.mark.skipif(HAS_CUDA, reason="the planner kernel under the interpreter (CPU)")
@pytest.mark.parametrize(("B", "n", "H", "targets", "programs", "dp"), [
    (13, 100, 1, 0, 1, False),  # 26 pieces on one program: the former bound held 24
    (3, 129, 2, 0, 1, False),  # the GPU's NaN rows: the last sequence's second head never planned
    (7, 1, 2, 0, 1, False), (4, 257, 1, 0, 3, True), (5, 31, 4, 15, 7, True), (13, 100, 4, 50, 13, False)])
def test_cached_gluon_plan_has_room_for_every_piece(B, n, H, targets, programs, dp):
    """The Gluon kernel's plan table (``max_pieces`` rows a program) holds every piece the
    schedule makes, including the tile past the blocks of each head of a sequence with no targets
    and new tokens not a multiple of BLOCK_N: where it did not, the plan stopped short and the
    last items' rows were never written (NaN rows on the H200)."""
    pytest.importorskip("triton.experimental.gluon")
    import triton
    from tracekit.kernels import _cached_gluon as G

    off = torch.arange(0, (B + 1) * n, n, dtype=torch.int32)
    caches = torch.tensor([(0, 1, 31, 45, 517, 1012)[i % 6] for i in range(B)], dtype=torch.int32)
    nt = torch.full((B,), targets, dtype=torch.int32)
    L = B * n
    rows = 4 * G.max_pieces(L, B, H, 128)  # (room to spare: the pieces the schedule makes, all of them)
    plan = torch.full((programs * rows * G.NF,), -7, dtype=torch.int32)
    counts = torch.full((programs,), -7, dtype=torch.int32)
    G._sk_plan_kernel[(programs,)](off, caches, nt, plan, counts, B, 1, 2, rows, H=H, BLOCK_M=128, BLOCK_N=32,
                                   HAS_TARGETS=True, BPOW=triton.next_power_of_2(B + 1),
                                   TPOW=triton.next_power_of_2(triton.cdiv(L, 128) + 1), DP=dp, UNIFORM=False,
                                   num_warps=4)
    assert 0 < int(counts.max()) <= G.max_pieces(L, B, H, 128)
    if (B, n, programs) == (13, 100, 1):
        assert int(counts.max()) > H * (triton.cdiv(L, 128) + B)  # (what the former bound missed)


def test_cached_gluon_default_on_cuda_only():
    """The Gluon kernel is the CUDA default (where it can run: _cached_gluon.usable); the CPU
    (interpreter) configuration does not ask for it."""
    from tracekit.kernels import _cached

    assert _cached.default_config(256, 256, "cuda")["GLUON"] is True
    assert not _cached.default_config(256, 256, "cpu").get("GLUON", False)


def test_cached_gluon_option_falls_back_off_the_gpu():
    """GLUON and its ring options are accepted everywhere; where the Gluon kernel cannot run (the
    interpreter, another GPU) the Triton kernel computes the same result."""
    g = _gen()
    H, d, dtype = 2, 32, torch.float16
    hist, new = [0, 37], [20, 9]
    kh, vh = (_rand(g, sum(hist), H, d, dtype=dtype) for _ in range(2))
    q, k, v = (_rand(g, sum(new), H, d, dtype=dtype) for _ in range(3))
    cache = build_paged_kv_cache(kh, vh, _offsets(hist), max_len=64, generator=g)
    off = _offsets(new)
    c64 = PagedKVCache(cache.k_cache.double(), cache.v_cache.double(), cache.page_table, cache.cache_lens)
    ref = hstu_attention_cached_reference(*_d64(q, k, v), off, c64, max_seq_len=64, alpha=0.4)
    from tracekit.kernels import _cached

    out = _poison(sum(new), H, d, dtype)
    _cached.hstu_cached_fwd(q, k, v, off, cache, max_seq_len=64, alpha=0.4, num_targets=None, contextual_seq_len=0,
                            max_attn_len=0, config={"GLUON": True, "GL_SK": 3, "GL_SV": 3, "GL_QB": 2, "GL_TMA": 2},
                            out=out)
    assert _rel(out, ref) < TOL[dtype]
