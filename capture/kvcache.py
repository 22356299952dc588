"""A paged KV cache of the history's keys and values, one pair of page pools per layer.

Pages hold ``page_size`` tokens of ``num_heads x head_dim``; each user owns a page table
(a list of page ids) and a length. Tokens are written in order, so every page but the
last is full. When a user's history would grow past ``max_tokens``, whole pages are
dropped from the front (the oldest history), which keeps the table contiguous.
The bookkeeping is on the host (numpy); only the pools live on the device.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tracekit.errors import CaptureError


@dataclass
class CacheEntry:
    pages: list[int] = field(default_factory=list)
    length: int = 0  # cached tokens


@dataclass
class Reservation:
    """Where a request's new tokens go, and what was cached before them."""

    hit: bool  # the user had a cache entry before this request
    cached_len: int  # tokens the new tokens attend to (after eviction)
    cached_slots: np.ndarray  # flat slot (page * page_size + offset) of each cached token
    new_slots: np.ndarray  # flat slot of each new token
    pages: list[int]  # the page table after this request's appends
    evicted_tokens: int


class PagedKVCache:
    def __init__(self, *, num_layers: int, num_pages: int, page_size: int, num_heads: int,
                 head_dim: int, max_tokens: int, dtype, device):
        import torch

        self.page_size = page_size
        self.num_pages = num_pages
        self.max_tokens = max_tokens
        shape = (num_pages, page_size, num_heads, head_dim)
        self.k = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        self.v = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        self._free = list(range(num_pages - 1, -1, -1))
        self.entries: dict[int, CacheEntry] = {}

    @property
    def free_pages(self) -> int:
        return len(self._free)

    def flat(self, layer: int):
        """Layer ``layer``'s K and V pools viewed as ``[num_pages * page_size, H, d]``."""
        k, v = self.k[layer], self.v[layer]
        return k.view(-1, *k.shape[2:]), v.view(-1, *v.shape[2:])

    def _slots(self, pages: list[int], start: int, stop: int) -> np.ndarray:
        pos = np.arange(start, stop, dtype=np.int64)
        table = np.asarray(pages, dtype=np.int64)
        if len(pos) == 0:
            return pos
        return table[pos // self.page_size] * self.page_size + pos % self.page_size

    def reserve(self, user: int, n_new: int) -> Reservation:
        """Make room for ``n_new`` tokens of ``user`` (evicting its oldest pages past
        ``max_tokens``) and return the slots of its cached and new tokens."""
        if n_new > self.max_tokens:
            raise CaptureError(f"{n_new} new tokens exceed the cache's {self.max_tokens} per user")
        entry = self.entries.get(user)
        hit = entry is not None
        if entry is None:
            entry = self.entries[user] = CacheEntry()
        evicted = 0
        while entry.length + n_new > self.max_tokens and entry.pages:
            page = entry.pages.pop(0)
            dropped = min(self.page_size, entry.length)
            entry.length -= dropped
            evicted += dropped
            self._free.append(page)
        cached_len = entry.length
        needed = -(-(cached_len + n_new) // self.page_size) - len(entry.pages)
        if needed > len(self._free):
            raise CaptureError(
                f"KV cache out of pages ({self.num_pages} of {self.page_size} tokens); "
                "lower --bs or the preset's history")
        for _ in range(needed):
            entry.pages.append(self._free.pop())
        cached_slots = self._slots(entry.pages, 0, cached_len)
        new_slots = self._slots(entry.pages, cached_len, cached_len + n_new)
        entry.length = cached_len + n_new
        return Reservation(hit, cached_len, cached_slots, new_slots, list(entry.pages), evicted)

    def drop(self, user: int) -> None:
        entry = self.entries.pop(user, None)
        if entry is not None:
            self._free.extend(entry.pages)
