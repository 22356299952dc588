"""Value checks on the device: one small Triton launch before an attention kernel.

``validate=True`` on GPU tensors must not wait for the GPU, so the checks that need the
values (offsets start at 0, never decrease and end at the token count; each sequence, with
its cache, fits ``max_seq_len``; ``0 <= num_targets <= length``; cache lengths within the
page table; every page a sequence uses inside the pool) run as device-side assertions
(Triton's ``tl.device_assert``, compiled in this kernel only). A failed one prints its
message and, like PyTorch's own device-side index checks, ends the CUDA context; the
attention kernel queued behind it never runs, so nothing is read out of bounds.

It is a separate launch (about 2 µs of GPU time) rather than checks inside the attention
kernels: compiling those with assertions enabled cost 7–14 % of their speed on an H200.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ._launch import launch

_BLOCK = 128
_PAGES = 64


@triton.jit
def _check_kernel(SEQ_OFFSETS, NUM_TARGETS, CACHE_LENS, PAGE_TABLE, stride_pt,
                  n_seq, total, max_seq_len, num_pt, num_pages,
                  HAS_TARGETS: tl.constexpr, HAS_CACHE: tl.constexpr, PAGE: tl.constexpr,
                  BLOCK: tl.constexpr, PAGES: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n_seq
    start = tl.load(SEQ_OFFSETS + offs, mask=m, other=0).to(tl.int64)
    end = tl.load(SEQ_OFFSETS + offs + 1, mask=m, other=0).to(tl.int64)
    ok_off = (start >= 0) & (start <= end) & (end <= total)
    ok_off = ok_off & ((offs != 0) | (start == 0)) & ((offs != n_seq - 1) | (end == total))
    tl.device_assert(ok_off | (m == 0), "tracekit HSTU attention: seq_offsets must start at 0, be non-decreasing "
                                        "and end at the number of tokens")
    n = end - start
    if HAS_TARGETS:
        nt = tl.load(NUM_TARGETS + offs, mask=m, other=0).to(tl.int64)
        tl.device_assert(((nt >= 0) & (nt <= n)) | (m == 0),
                         "tracekit HSTU attention: num_targets must lie in [0, the sequence's length]")
    if HAS_CACHE:
        C = tl.load(CACHE_LENS + offs, mask=m, other=0).to(tl.int64)
        ok_c = (C >= 0) & (C <= num_pt * PAGE)
        tl.device_assert(ok_c | (m == 0), "tracekit HSTU attention: kv_cache.cache_lens must lie in "
                                          "[0, the page table's capacity]")
        tl.device_assert((n + C <= max_seq_len) | (m == 0),
                         "tracekit HSTU attention: a sequence with its cache is longer than max_seq_len")
        used = (tl.where(ok_c & m, C, 0) + PAGE - 1) // PAGE
        offs_p0 = tl.arange(0, PAGES)
        rows = PAGE_TABLE + offs.to(tl.int64)[:, None] * stride_pt
        for p0 in range(0, num_pt, PAGES):
            offs_p = p0 + offs_p0
            inuse = offs_p[None, :] < used[:, None]
            pg = tl.load(rows + offs_p[None, :], mask=inuse, other=0)
            tl.device_assert(((pg >= 0) & (pg < num_pages)) | (inuse == 0),
                             "tracekit HSTU attention: kv_cache.page_table names a page outside k_cache")
    else:
        tl.device_assert((n <= max_seq_len) | (m == 0),
                         "tracekit HSTU attention: a sequence is longer than max_seq_len")


_LAUNCHERS: dict = {}


def check_on_device(seq_offsets, total: int, max_seq_len: int, num_targets=None, cache=None) -> None:
    """Queue the value checks of one call on the current stream (returns at once).

    The first launch of a specialisation goes through Triton's JIT (compiling it); later
    ones launch the compiled kernel directly, which keeps the default call's host time
    (a second launch beside the attention kernel's) small: at T = 1024 an attention call
    takes ~120 µs of GPU time, and the host must stay ahead of that."""
    n_seq = seq_offsets.numel() - 1
    if n_seq <= 0:
        return
    pt = cache.page_table if cache is not None else seq_offsets
    args = (seq_offsets, num_targets if num_targets is not None else seq_offsets,
            cache.cache_lens if cache is not None else seq_offsets, pt, pt.stride(0),
            n_seq, total, max_seq_len, int(pt.shape[1]) if cache is not None else 0,
            int(cache.k_cache.shape[0]) if cache is not None else 0)
    consts = dict(HAS_TARGETS=num_targets is not None, HAS_CACHE=cache is not None,
                  PAGE=cache.page_size if cache is not None else 1, BLOCK=_BLOCK, PAGES=_PAGES)
    launch(_check_kernel, _LAUNCHERS, (triton.cdiv(n_seq, _BLOCK),), args, consts,
           dict(num_warps=4, debug=True, sanitize_overflow=False), seq_offsets.device)
