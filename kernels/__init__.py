"""HSTU attention kernels (Triton) and their PyTorch references.

Importing this package imports torch-free helpers only; torch and triton are imported
when a function runs (``import tracekit`` never imports this package).

Public API:

- :func:`hstu_attention` / :func:`hstu_attention_reference`: dense jagged HSTU attention;
- :func:`hstu_attention_cached` / :func:`hstu_attention_cached_reference`: new tokens
  against a paged K/V cache (:class:`PagedKVCache`, :func:`build_paged_kv_cache`, page size 32);
- :func:`hstu_attention_block_sparse` / :func:`hstu_attention_block_sparse_reference`:
  block-sparse attention (compressed + selected branches, gated).
- ``tracekit.kernels.bench``: the attention benchmark (``bench_attention``, ``format_table``).

Backend flag: ``backend="auto"|"triton"|"reference"`` on every function, or the
environment variable ``TRACEKIT_KERNELS_BACKEND``; ``auto`` falls back to the reference on
CPU tensors unless ``TRITON_INTERPRET=1``.
"""

from ._common import BACKEND_ENV, KernelInputError
from .api import hstu_attention, hstu_attention_block_sparse, hstu_attention_cached
from .cache import PAGE_SIZE, PagedKVCache, build_paged_kv_cache
from .reference import (
    hstu_attention_block_sparse_reference,
    hstu_attention_cached_reference,
    hstu_attention_reference,
)

__all__ = [
    "BACKEND_ENV",
    "KernelInputError",
    "PAGE_SIZE",
    "PagedKVCache",
    "build_paged_kv_cache",
    "hstu_attention",
    "hstu_attention_block_sparse",
    "hstu_attention_block_sparse_reference",
    "hstu_attention_cached",
    "hstu_attention_cached_reference",
    "hstu_attention_reference",
]
