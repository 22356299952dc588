"""Paged K/V cache for :func:`hstu_attention_cached` (inference).

Layout (one cache per layer):

- ``k_cache`` [num_pages, page_size, H, d_qk], ``v_cache`` [num_pages, page_size, H, d_v];
- ``page_table`` [B, max_pages] int32: physical page of each logical page of each sequence
  (token t of sequence b lives in page ``page_table[b, t // page_size]``, slot
  ``t % page_size``);
- ``cache_lens`` [B] int32: tokens cached per sequence.

Typical use in a decode/ranking step::

    cache = PagedKVCache.allocate(batch_size=B, max_len=N, num_heads=H, d_qk=dq, d_v=dv,
                                  dtype=torch.bfloat16, device="cuda")
    cache.append(k_hist, v_hist, hist_offsets)            # prefill with the history
    out = hstu_attention_cached(q_new, k_new, v_new, new_offsets, cache,
                                max_seq_len=N, alpha=alpha, num_targets=nt)
    cache.append(k_new, v_new, new_offsets)               # only if the new tokens are kept

or, from a jagged history in one go: ``build_paged_kv_cache(k, v, seq_offsets)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._common import KernelInputError

PAGE_SIZE = 32


@dataclass
class PagedKVCache:
    k_cache: Any
    v_cache: Any
    page_table: Any
    cache_lens: Any
    page_size: int = PAGE_SIZE

    @property
    def batch_size(self) -> int:
        return int(self.page_table.shape[0])

    @property
    def capacity(self) -> int:
        """Tokens each sequence can hold."""
        return int(self.page_table.shape[1]) * self.page_size

    @classmethod
    def allocate(
        cls,
        *,
        batch_size: int,
        max_len: int,
        num_heads: int,
        d_qk: int,
        d_v: int,
        dtype,
        device,
        page_size: int = PAGE_SIZE,
        generator=None,
    ) -> PagedKVCache:
        """An empty cache with room for ``max_len`` tokens per sequence. Pages are handed
        out in order, or in a random order when a torch ``generator`` is given (tests use
        that to check that the page table is honoured)."""
        import torch

        if page_size != PAGE_SIZE:
            raise KernelInputError(f"the kernels support page_size={PAGE_SIZE} only, got {page_size}")
        pages_per_seq = max(1, -(-max_len // page_size))
        num_pages = batch_size * pages_per_seq
        k_cache = torch.zeros(num_pages, page_size, num_heads, d_qk, dtype=dtype, device=device)
        v_cache = torch.zeros(num_pages, page_size, num_heads, d_v, dtype=dtype, device=device)
        if generator is not None:
            order = torch.randperm(num_pages, generator=generator).to(device)
        else:
            order = torch.arange(num_pages, device=device)
        page_table = order.view(batch_size, pages_per_seq).to(torch.int32).contiguous()
        cache_lens = torch.zeros(batch_size, dtype=torch.int32, device=device)
        return cls(k_cache, v_cache, page_table, cache_lens, page_size)

    def append(self, k, v, seq_offsets, *, validate: bool = True) -> None:
        """Write jagged new tokens (k [L, H, d_qk], v [L, H, d_v], offsets [B+1]) after each
        sequence's cached tokens and advance ``cache_lens``."""
        import torch

        from .reference import _segments

        L = k.shape[0]
        if seq_offsets.numel() != self.batch_size + 1:
            raise KernelInputError(
                f"seq_offsets has {seq_offsets.numel()} entries for a cache of {self.batch_size} sequences"
            )
        if tuple(k.shape[1:]) != tuple(self.k_cache.shape[2:]) or tuple(v.shape[1:]) != tuple(self.v_cache.shape[2:]):
            raise KernelInputError(
                f"k/v token shapes {tuple(k.shape[1:])}/{tuple(v.shape[1:])} do not match the cache "
                f"{tuple(self.k_cache.shape[2:])}/{tuple(self.v_cache.shape[2:])}"
            )
        seg, pos, lengths = _segments(seq_offsets, L)
        new_lens = self.cache_lens.to(torch.int64) + lengths
        if validate and new_lens.numel() and int(new_lens.max()) > self.capacity:
            raise KernelInputError(
                f"cache overflow: a sequence would hold {int(new_lens.max())} tokens, capacity {self.capacity}"
            )
        dest = self.cache_lens.to(torch.int64)[seg] + pos
        page = self.page_table[seg, dest // self.page_size].to(torch.int64)
        slot = dest % self.page_size
        self.k_cache[page, slot] = k.to(self.k_cache.dtype)
        self.v_cache[page, slot] = v.to(self.v_cache.dtype)
        self.cache_lens.copy_(new_lens.to(torch.int32))


def build_paged_kv_cache(
    k,
    v,
    seq_offsets,
    *,
    max_len: int | None = None,
    page_size: int = PAGE_SIZE,
    generator=None,
) -> PagedKVCache:
    """A paged cache holding the jagged ``k``/``v`` (the history), with room for
    ``max_len`` tokens per sequence (default: the longest sequence)."""
    import torch

    off = seq_offsets.to("cpu", torch.int64)
    lengths = off[1:] - off[:-1]
    longest = int(lengths.max()) if lengths.numel() else 0
    max_len = longest if max_len is None else max_len
    if max_len < longest:
        raise KernelInputError(f"max_len={max_len} is shorter than the longest sequence ({longest})")
    cache = PagedKVCache.allocate(
        batch_size=lengths.numel(),
        max_len=max_len,
        num_heads=k.shape[1],
        d_qk=k.shape[2],
        d_v=v.shape[2],
        dtype=k.dtype,
        device=k.device,
        page_size=page_size,
        generator=generator,
    )
    cache.append(k, v, seq_offsets)
    return cache


def check_cache(cache, q, k, v, seq_offsets) -> None:
    import torch

    if not isinstance(cache, PagedKVCache):
        raise KernelInputError(f"kv_cache must be a PagedKVCache, got {type(cache).__name__}")
    B = seq_offsets.numel() - 1
    if cache.batch_size != B:
        raise KernelInputError(f"kv_cache holds {cache.batch_size} sequences, the batch has {B}")
    if cache.k_cache.dtype != q.dtype or cache.v_cache.dtype != q.dtype:
        raise KernelInputError(f"kv_cache dtype {cache.k_cache.dtype} differs from q's {q.dtype}")
    if cache.k_cache.device != q.device:
        raise KernelInputError(f"kv_cache is on {cache.k_cache.device}, q on {q.device}")
    if tuple(cache.k_cache.shape[2:]) != tuple(k.shape[1:]) or tuple(cache.v_cache.shape[2:]) != tuple(v.shape[1:]):
        raise KernelInputError("kv_cache head/dim shapes differ from k/v")
    if cache.page_table.dtype != torch.int32 or cache.cache_lens.dtype != torch.int32:
        raise KernelInputError("page_table and cache_lens must be int32")
    if cache.page_size != PAGE_SIZE:
        raise KernelInputError(f"page_size must be {PAGE_SIZE}")


def check_cache_values(cache, new_lens, max_seq_len: int) -> None:
    """Host-side value checks of a cache against the new tokens' lengths (CPU tensor):
    cache lengths within the page table's capacity, cache + new tokens within max_seq_len,
    and every page a sequence uses inside ``k_cache`` (one copy of the page table to the
    host when the cache is on a GPU)."""
    import torch

    lens = cache.cache_lens.detach().to("cpu", torch.int64)
    if lens.numel() and (int(lens.min()) < 0 or int(lens.max()) > cache.capacity):
        b = int(((lens < 0) | (lens > cache.capacity)).nonzero()[0, 0])
        raise KernelInputError(
            f"kv_cache.cache_lens[{b}]={int(lens[b])} is outside [0, {cache.capacity}] (the page table's capacity)"
        )
    tot = lens + new_lens
    if tot.numel() and int(tot.max()) > max_seq_len:
        from .reference import raise_total

        raise_total(tot, max_seq_len)
    used = (lens + cache.page_size - 1) // cache.page_size
    if used.numel() and int(used.max()) > 0:
        pt = cache.page_table.detach().to("cpu", torch.int64)[:, : int(used.max())]
        inuse = torch.arange(pt.shape[1]).view(1, -1) < used.view(-1, 1)
        bad = inuse & ((pt < 0) | (pt >= cache.k_cache.shape[0]))
        if bool(bad.any()):
            b, p = (int(x) for x in bad.nonzero()[0])
            raise KernelInputError(
                f"kv_cache.page_table[{b}, {p}]={int(pt[b, p])} names no page of k_cache "
                f"({cache.k_cache.shape[0]} pages)"
            )
