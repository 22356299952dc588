"""Value checks on the device, without a host synchronisation.

``validate=True`` on GPU tensors must not wait for the GPU, so the checks that need the
values (offsets start at 0, never decrease and end at the token count; each sequence, with
its cache, fits ``max_seq_len``; ``0 <= num_targets <= length``; cache lengths within the
page table; every page a sequence uses inside the pool) run on the device, in one of two
ways:

- fused into the attention kernel (the dense kernel: ``item_error`` / ``report``): each
  program checks its own sequence's offsets, length and target count before it reads
  anything. On a bad value the first program of that sequence writes (problem, sequence) to a
  pinned host buffer (``error_record``) and executes ``trap``, which ends the CUDA context;
  the sequence's other programs return without touching memory. The host turns the record
  into the message without waiting for the GPU: the next call that checks values raises it
  as a ``KernelInputError``, and it is printed to stderr at exit. The kernel itself prints
  nothing: a ``printf`` (or ``tl.device_assert``, an ``__assertfail`` call) anywhere in it
  makes ptxas serialise all its wgmma instructions (C7510), which cost the attention kernels
  7–14 % of their speed on an H200. The checks are a few scalar compares and a branch at the
  start of a program: the key loop's SASS is unchanged, and there is no second launch;
- one small Triton launch before the attention kernel (``check_on_device``, the cached and
  block-sparse kernels), reporting through ``tl.device_assert`` compiled in that kernel only
  (about 1–2 µs of GPU time, and a second launch's host time). It also covers what one
  program of the cached kernel does not see: every page the sequence's cache uses.

Either way a failed check, like PyTorch's own device-side index checks, ends the CUDA context
with a message that names the problem, and the attention kernel reads nothing out of bounds.
Under Triton's interpreter (no ``trap``) the fused checks report through ``tl.device_assert``
(``TRAP=False``).
"""

from __future__ import annotations

import threading

import triton
import triton.language as tl

from . import _common
from ._launch import launch

_BLOCK = 128
_PAGES = 64

# problem codes of the fused checks (their messages: _common._DEVICE_CHECK_MESSAGES)
ERR_OFFSETS = tl.constexpr(1)
ERR_TOO_LONG = tl.constexpr(2)
ERR_TARGETS = tl.constexpr(3)


@triton.jit
def item_error(b, n_seq, start, end, n_tokens, max_seq_len, nt):
    """0 when sequence ``b`` (of ``n_seq``; tokens ``start:end`` of ``n_tokens``, int64) is
    valid, else the ``ERR_*`` code of its first problem. ``nt``: its num_targets (0 if none).
    The offsets' checks of all sequences together say: they start at 0, never decrease and end
    at the token count; each one alone keeps its own sequence's reads in bounds."""
    ok = (start >= 0) & (start <= end) & (end <= n_tokens)
    ok = ok & ((b != 0) | (start == 0)) & ((b != n_seq - 1) | (end == n_tokens))
    n = end - start
    err = tl.where(ok, 0, ERR_OFFSETS)
    err = tl.where((err == 0) & (n > max_seq_len), ERR_TOO_LONG, err)
    return tl.where((err == 0) & ((nt < 0) | (nt > n)), ERR_TARGETS, err)


@triton.jit
def _trap():
    # the record's stores reach host memory before the kernel stops
    tl.inline_asm_elementwise("membar.sys;\n\ttrap; // $0", "=r", [], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def report(err, b, RECORD, TRAP: tl.constexpr):
    """Report ``item_error``'s code ``err`` (non-zero) of sequence ``b``. ``TRAP`` (compiled GPU
    code): write ``err << 32 | b`` to ``RECORD`` (``error_record()``, pinned host memory) and
    trap, which ends the CUDA context; the host words the message
    (``_common.device_check_failure``). One 64-bit store, so that programs failing at once
    never leave one's code beside another's sequence. No ``printf`` here: a function call
    anywhere in a kernel makes ptxas serialise its wgmma instructions (C7510). Otherwise (the
    interpreter) a failed ``tl.device_assert``."""
    if TRAP:
        tl.store(RECORD, (err.to(tl.int64) << 32) | b.to(tl.int64))
        _trap()
    else:
        tl.device_assert(err != ERR_OFFSETS, "tracekit HSTU attention: seq_offsets must start at 0, be "
                                             "non-decreasing and end at the number of tokens")
        tl.device_assert(err != ERR_TOO_LONG, "tracekit HSTU attention: a sequence is longer than max_seq_len")
        tl.device_assert(err != ERR_TARGETS,
                         "tracekit HSTU attention: num_targets must lie in [0, the sequence's length]")


_RECORD = None  # the pinned host tensor int64 [problem code << 32 | sequence]
_RECORD_LOCK = threading.Lock()


def error_record():
    """The pinned host buffer (mapped into every GPU's address space) the fused checks write a
    failure into, created once, on first use, by one thread (also inside a CUDA graph
    capture, where a pinned allocation is allowed); ``_common`` reads it
    (``device_check_failure``), and a failure recorded there is printed at exit."""
    global _RECORD
    if _RECORD is None:
        with _RECORD_LOCK:
            if _RECORD is None:
                import atexit
                import ctypes

                import torch

                rec = torch.zeros(1, dtype=torch.int64, pin_memory=True)
                # the view keeps the tensor (and so its pinned block) alive
                view = ctypes.c_int64.from_address(rec.data_ptr())
                view.tensor = rec
                _common.device_check_record = view
                atexit.register(_print_at_exit)
                _RECORD = rec
    return _RECORD


def _print_at_exit() -> None:
    msg = _common.device_check_failure()
    if msg is not None:
        import sys

        print(msg, file=sys.stderr, flush=True)


@triton.jit
def _check_kernel(SEQ_OFFSETS, NUM_TARGETS, CACHE_LENS, PAGE_TABLE, stride_pt,
                  n_seq, total, max_seq_len, num_pt, num_pages,
                  HAS_TARGETS: tl.constexpr, HAS_CACHE: tl.constexpr, PAGE: tl.constexpr,
                  BLOCK: tl.constexpr, PAGES: tl.constexpr):
    """Program (i, j): sequences i*BLOCK ... (i+1)*BLOCK - 1; j == 0 checks their offsets,
    targets and lengths, and with a cache every j checks pages j*PAGES ... of their page-table
    rows (all chunks at once: one dependent load each, not a loop over the table)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n_seq
    if HAS_CACHE:
        C = tl.load(CACHE_LENS + offs, mask=m, other=0).to(tl.int64)
        ok_c = (C >= 0) & (C <= num_pt * PAGE)
    if tl.program_id(1) == 0:
        start = tl.load(SEQ_OFFSETS + offs, mask=m, other=0).to(tl.int64)
        end = tl.load(SEQ_OFFSETS + offs + 1, mask=m, other=0).to(tl.int64)
        ok_off = (start >= 0) & (start <= end) & (end <= total)
        ok_off = ok_off & ((offs != 0) | (start == 0)) & ((offs != n_seq - 1) | (end == total))
        tl.device_assert(ok_off | (m == 0), "tracekit HSTU attention: seq_offsets must start at 0, be "
                                            "non-decreasing and end at the number of tokens")
        n = end - start
        if HAS_TARGETS:
            nt = tl.load(NUM_TARGETS + offs, mask=m, other=0).to(tl.int64)
            tl.device_assert(((nt >= 0) & (nt <= n)) | (m == 0),
                             "tracekit HSTU attention: num_targets must lie in [0, the sequence's length]")
        if HAS_CACHE:
            tl.device_assert(ok_c | (m == 0), "tracekit HSTU attention: kv_cache.cache_lens must lie in "
                                              "[0, the page table's capacity]")
            tl.device_assert((n + C <= max_seq_len) | (m == 0),
                             "tracekit HSTU attention: a sequence with its cache is longer than max_seq_len")
        else:
            tl.device_assert((n <= max_seq_len) | (m == 0),
                             "tracekit HSTU attention: a sequence is longer than max_seq_len")
    if HAS_CACHE:
        used = (tl.where(ok_c & m, C, 0) + PAGE - 1) // PAGE
        offs_p = tl.program_id(1) * PAGES + tl.arange(0, PAGES)
        inuse = offs_p[None, :] < used[:, None]
        pg = tl.load(PAGE_TABLE + offs.to(tl.int64)[:, None] * stride_pt + offs_p[None, :], mask=inuse, other=0)
        tl.device_assert(((pg >= 0) & (pg < num_pages)) | (inuse == 0),
                         "tracekit HSTU attention: kv_cache.page_table names a page outside k_cache")


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
    grid = (triton.cdiv(n_seq, _BLOCK), max(1, triton.cdiv(args[8], _PAGES)))
    launch(_check_kernel, _LAUNCHERS, grid, args, consts,
           dict(num_warps=4, debug=True, sanitize_overflow=False), seq_offsets.device)
