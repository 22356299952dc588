"""Public HSTU attention functions (jagged batches).

Every function takes ``backend="auto"``: ``auto`` runs the Triton kernel on CUDA tensors
(and on CPU tensors when ``TRITON_INTERPRET=1`` was set before triton was imported) and
the PyTorch reference on plain CPU tensors; ``triton`` forces the kernel (an error on a
CPU tensor without the interpreter); ``reference`` forces the reference. The environment
variable ``TRACEKIT_KERNELS_BACKEND`` (auto|triton|reference) overrides ``auto``.

Shapes, dtypes, devices and the scalar arguments are always checked on the host.
``validate=True`` (the default) also checks the values of the offsets, num_targets and the
cache's lengths and page table without synchronising the GPU: on the host when they are
CPU tensors, on the GPU when they are on a GPU: inside the dense kernel itself, by one small
kernel queued before the cached and block-sparse kernels (a failed check ends the CUDA
context, like PyTorch's own device-side index checks, with a message that names the problem;
see ``_checks``).
``validate=False`` skips the value checks.
"""

from __future__ import annotations

from . import _common
from ._common import check_qkv, check_scalars, check_targets_structure, check_values, choose_backend


def _value_checks(validate: bool, backend: str, seq_offsets) -> str:
    """Where the value checks run: "host", "device" (on the GPU, see ``_checks``) or "none".
    Any call on GPU tensors first raises a failure an earlier call's kernel recorded."""
    on_gpu = not _common.values_on_host(seq_offsets)
    if on_gpu:
        _common.raise_if_device_check_failed()
    if not validate:
        return "none"
    if backend == "triton" and on_gpu:
        return "device"
    return "host"


def _fallback_dtype(q):
    """The CPU reference fallback computes half-precision inputs in float32."""
    import torch

    return torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else None


def _cast(dt, *xs):
    return tuple(None if x is None else x.to(dt) for x in xs)


def hstu_attention(
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
    backend: str = "auto",
    out=None,
):
    """HSTU attention over a jagged batch.

    Args:
        q, k: [L, H, d_qk]; v: [L, H, d_v]; fp16, bf16 or fp32 (fp64: reference only).
        seq_offsets: [B+1] int32/int64, ``seq_offsets[b]:seq_offsets[b+1]`` are sequence b's tokens.
        max_seq_len: N, the normalisation (and an upper bound on every sequence's length).
        alpha: scale of q.k inside SiLU.
        num_targets: [B] int, the last ``num_targets[b]`` tokens of sequence b are candidates:
            each attends to the whole history and to itself only.
        contextual_seq_len: leading tokens attending to and attended by all non-candidates.
        max_attn_len: sliding window (0 = none).
        timestamps [L], ts_weights [nb+1]: log-bucketed time bias ts_weights[bucket(ts_i - ts_j)];
        pos_weights [2N-1]: position bias pos_weights[N-1+j-i]. Both added before SiLU.

        out: optional preallocated [L, H, d_v] output (written by the Triton path).

    Returns:
        [L, H, d_v]: out_i = sum_j SiLU(alpha q_i.k_j + rab_ij) / N * mask(i, j) * v_j.
    """
    check_qkv(q, k, v, seq_offsets, allow_fp64=True)
    from .reference import _check_bias, hstu_attention_reference

    _check_bias(q, seq_offsets, timestamps, ts_weights, pos_weights, max_seq_len)
    check_scalars(max_seq_len, contextual_seq_len, max_attn_len)
    check_targets_structure(num_targets, seq_offsets.numel() - 1, q.device)
    backend = choose_backend(backend, q.device)
    checks = _value_checks(validate, backend, seq_offsets)
    if checks == "host":
        check_values(seq_offsets, q.shape[0], max_seq_len, num_targets, contextual_seq_len, max_attn_len)
    kw = dict(
        max_seq_len=max_seq_len,
        alpha=alpha,
        num_targets=_contig(num_targets),
        contextual_seq_len=contextual_seq_len,
        max_attn_len=max_attn_len,
    )
    if backend == "reference":
        dt = _fallback_dtype(q)
        if dt is None:
            return hstu_attention_reference(
                q, k, v, seq_offsets, timestamps=timestamps, ts_weights=ts_weights,
                pos_weights=pos_weights, validate=False, **kw,
            )
        out = hstu_attention_reference(
            *_cast(dt, q, k, v), seq_offsets, timestamps=timestamps,
            ts_weights=ts_weights, pos_weights=pos_weights, validate=False, **kw,
        )
        return out.to(q.dtype)
    _no_fp64(q)
    from ._dense import hstu_fwd

    # the dense kernel checks the values itself (no second launch, no host work)
    return hstu_fwd(
        q, k, v, _contig(seq_offsets), timestamps=timestamps, ts_weights=ts_weights, pos_weights=pos_weights,
        out=_check_out(out, q, v), check=checks == "device", **kw,
    )


def _device_checked(checks: str, seq_offsets, total: int, max_seq_len: int, num_targets, cache=None):
    """The offsets as the kernels read them (unit stride), after queueing the device-side
    value checks when ``checks == "device"``."""
    seq_offsets = _contig(seq_offsets)
    if checks == "device":
        from ._checks import check_on_device

        check_on_device(seq_offsets, total, max_seq_len, num_targets, cache)
    return seq_offsets


def _contig(t):
    """Offsets and counts are read with unit stride by the kernels."""
    return t if t is None or t.is_contiguous() else t.contiguous()


def _check_out(out, q, v):
    from ._common import KernelInputError

    if out is None:
        return None
    want = (q.shape[0], q.shape[1], v.shape[2])
    if tuple(out.shape) != want or out.dtype != q.dtype or out.device != q.device or out.stride(-1) != 1:
        raise KernelInputError(f"out must be a {want} {q.dtype} tensor on {q.device} with unit last stride")
    return out


def _no_fp64(q):
    import torch

    from ._common import KernelInputError

    if q.dtype == torch.float64:
        raise KernelInputError("the Triton kernels take fp16, bf16 or fp32; float64 is reference-only")


def hstu_attention_cached(
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
    backend: str = "auto",
    out=None,
):
    """HSTU attention of new tokens against a paged K/V cache (inference).

    Args:
        q, k: [L_new, H, d_qk], v: [L_new, H, d_v]: the new tokens, jagged by ``seq_offsets``.
        kv_cache: a :class:`~tracekit.kernels.PagedKVCache` holding each sequence's earlier
            tokens (page size 32); it is read, not modified (call ``kv_cache.append`` to keep
            the new tokens).
        num_targets: [B], how many of each sequence's *new* tokens are candidates.
        The other arguments are those of :func:`hstu_attention`, applied to the full sequence
        ``cached tokens ++ new tokens`` (max_seq_len bounds that full length).

    Returns:
        [L_new, H, d_v]: the new tokens' rows of :func:`hstu_attention` over the full sequences.

    On an sm_90 GPU (H100, H200) in bf16 or fp16 with the default mask (no contextual tokens,
    no attention window) and the default tiles, the kernel is a warp-specialized Gluon version
    (TMA copies, Triton >= 3.6); elsewhere the Triton kernel.
    """
    from .cache import check_cache, check_cache_values
    from .reference import hstu_attention_cached_reference

    check_qkv(q, k, v, seq_offsets, allow_fp64=True)
    check_cache(kv_cache, q, k, v, seq_offsets)
    check_scalars(max_seq_len, contextual_seq_len, max_attn_len)
    check_targets_structure(num_targets, seq_offsets.numel() - 1, q.device)
    backend = choose_backend(backend, q.device)
    checks = _value_checks(validate, backend, seq_offsets)
    if checks == "host":
        new_lens = check_values(seq_offsets, q.shape[0], max_seq_len, num_targets, contextual_seq_len, max_attn_len)
        check_cache_values(kv_cache, new_lens, max_seq_len)
    kw = dict(
        max_seq_len=max_seq_len,
        alpha=alpha,
        num_targets=_contig(num_targets),
        contextual_seq_len=contextual_seq_len,
        max_attn_len=max_attn_len,
    )
    if backend == "reference":
        dt = _fallback_dtype(q)
        if dt is None:
            return hstu_attention_cached_reference(q, k, v, seq_offsets, kv_cache, validate=False, **kw)
        from .cache import PagedKVCache

        c32 = PagedKVCache(
            kv_cache.k_cache.to(dt), kv_cache.v_cache.to(dt), kv_cache.page_table,
            kv_cache.cache_lens, kv_cache.page_size,
        )
        out = hstu_attention_cached_reference(*_cast(dt, q, k, v), seq_offsets, c32, validate=False, **kw)
        return out.to(q.dtype)
    _no_fp64(q)
    from ._cached import hstu_cached_fwd

    off = _device_checked(checks, seq_offsets, q.shape[0], max_seq_len, kw["num_targets"], kv_cache)
    return hstu_cached_fwd(q, k, v, off, kv_cache, out=_check_out(out, q, v), **kw)


def hstu_attention_block_sparse(
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
    backend: str = "auto",
    return_block_indices: bool = False,
    out=None,
):
    """Block-sparse HSTU attention (BSA).

    Per sequence, keys are cut into blocks of ``block_size`` tokens (from the sequence start):

    1. compressed branch: each full block c is pooled (mean) into kbar_c, vbar_c; token i
       attends to the blocks entirely inside its visible prefix (history: tokens <= i;
       candidates: the history), o_cmp_i = sum_c SiLU(alpha q_i.kbar_c) * block_size / N * vbar_c;
    2. selection: for each query block (block_size queries) and head, the importance of key
       block c is the sum over the query block of SiLU(alpha q_i.kbar_c); the local block (the
       query block's own index) is always kept, plus the ``block_counts`` most important
       compressed-visible blocks;
    3. selected branch: o_slc_i = HSTU attention of token i (same mask as
       :func:`hstu_attention`) restricted to the selected blocks;
    4. out = gate_cmp * o_cmp + gate_slc * o_slc, gates [L, H] (default 1).

    ``block_size`` in {16, 32, 64, 128}. Contextual tokens, windows and relative bias are not
    supported by this variant. ``return_block_indices=True`` also returns the selection
    [B, H, nqb, block_counts + 1] (int32, local block first, -1 = none).
    """
    from .reference import check_bsa_args, hstu_attention_block_sparse_reference

    check_qkv(q, k, v, seq_offsets, allow_fp64=True)
    check_bsa_args(q, seq_offsets, block_size, block_counts, gate_cmp, gate_slc)
    check_scalars(max_seq_len, 0, 0)
    check_targets_structure(num_targets, seq_offsets.numel() - 1, q.device)
    backend = choose_backend(backend, q.device)
    checks = _value_checks(validate, backend, seq_offsets)
    if checks == "host":
        check_values(seq_offsets, q.shape[0], max_seq_len, num_targets, 0, 0)
    kw = dict(
        max_seq_len=max_seq_len, alpha=alpha, block_size=block_size, block_counts=block_counts,
        num_targets=_contig(num_targets), return_block_indices=return_block_indices,
    )
    if backend == "reference":
        dt = _fallback_dtype(q)
        if dt is None:
            return hstu_attention_block_sparse_reference(
                q, k, v, seq_offsets, gate_cmp=gate_cmp, gate_slc=gate_slc, validate=False, **kw
            )
        res = hstu_attention_block_sparse_reference(
            *_cast(dt, q, k, v), seq_offsets, gate_cmp=gate_cmp, gate_slc=gate_slc, validate=False, **kw
        )
        if return_block_indices:
            return res[0].to(q.dtype), res[1]
        return res.to(q.dtype)
    _no_fp64(q)
    from ._bsa import hstu_bsa_fwd

    off = _device_checked(checks, seq_offsets, q.shape[0], max_seq_len, kw["num_targets"])
    return hstu_bsa_fwd(q, k, v, off, gate_cmp=gate_cmp, gate_slc=gate_slc, out=_check_out(out, q, v), **kw)
