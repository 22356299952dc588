"""The HSTU workload on CPU: KV-cache correctness, eviction, request bookkeeping."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tracekit.capture.config import workload_config  # noqa: E402
from tracekit.capture.data import Interactions  # noqa: E402
from tracekit.capture.kvcache import PagedKVCache  # noqa: E402
from tracekit.capture.workload import Workload  # noqa: E402

pytestmark = pytest.mark.usefixtures("reference_kernels")

TINY = dict(max_history_items=40, num_items=2048, num_layers=2, d_model=64, num_heads=2,
            head_dim=32, scoring_hidden=32)


class _Stream:
    def __init__(self, inter, cands):
        self.inter, self.cands, self.pos = inter, cands, 0

    def take(self, n):
        s = slice(self.pos, self.pos + n)
        self.pos += n
        i = self.inter
        return Interactions(i.items[s], i.actions[s], i.timestamps[s], i.gaps[s])

    def candidates(self, n):
        return self.cands[:n]


class _FakeData:
    """Serves the same interactions in any chunking, so cached == recomputed."""

    def __init__(self, users, initial, total, nc, seed=0):
        rng = np.random.default_rng(seed)
        self.initial = initial
        self.streams = {}
        for u in users:
            gaps = rng.integers(1, 1000, total)
            inter = Interactions(rng.integers(0, 2048, total), rng.integers(0, 256, total),
                                 np.cumsum(gaps), gaps)
            self.streams[u] = _Stream(inter, rng.integers(0, 2048, nc))

    def history_length(self, user):
        return self.initial

    def stream(self, user):
        return self.streams[user]


def _workload(bs, nc, initial, total, **over):
    cfg = workload_config("small", **{**TINY, **over})
    w = Workload(cfg, bs, nc, "cpu")
    w.data = _FakeData(w.users, initial, total, nc)
    return w


@torch.inference_mode()
def test_cached_request_equals_full_recompute():
    # A: prefill 13 items, then append 5 (cached path). B: prefill all 18 at once.
    a = _workload(3, 7, initial=13, total=18, new_items_per_request=5)
    r1 = a.request()
    assert (r1.kv_caches, r1.new_tokens, r1.cached_tokens) == (0, 3 * 26, 0)
    r2 = a.request()
    assert (r2.kv_caches, r2.new_tokens, r2.cached_tokens) == (3, 3 * 10, 3 * 26)
    b = _workload(3, 7, initial=18, total=18)
    full = b.request()
    assert r2.scores.shape == (3, 7, 8)
    torch.testing.assert_close(r2.scores, full.scores, rtol=1e-4, atol=1e-5)
    # and the cache holds the same keys for every history token
    for layer in range(2):
        ka, _ = a.cache.flat(layer)
        kb, _ = b.cache.flat(layer)
        for u in range(3):
            ea, eb = a.cache.entries[u], b.cache.entries[u]
            sa = a.cache._slots(ea.pages, 0, ea.length)
            sb = b.cache._slots(eb.pages, 0, eb.length)
            torch.testing.assert_close(ka[sa], kb[sb], rtol=1e-4, atol=1e-5)


@torch.inference_mode()
def test_candidates_do_not_see_each_other():
    # the score of a candidate must not change when the other candidates change
    a = _workload(1, 4, initial=10, total=10)
    b = _workload(1, 4, initial=10, total=10)
    b.data.streams[0].cands = a.data.streams[0].cands.copy()
    b.data.streams[0].cands[1:] = (b.data.streams[0].cands[1:] + 17) % 2048
    sa, sb = a.request().scores, b.request().scores
    torch.testing.assert_close(sa[0, 0], sb[0, 0], rtol=1e-5, atol=1e-6)
    assert not torch.allclose(sa[0, 1:], sb[0, 1:])


@torch.inference_mode()
def test_history_is_capped_by_evicting_oldest_pages():
    w = _workload(2, 3, initial=40, total=40 + 12 * 6, new_items_per_request=6)
    w.request()
    assert [w.cache.entries[u].length for u in range(2)] == [80, 80]
    total_pages = w.cache.num_pages
    for _ in range(12):
        r = w.request()
        assert r.kv_caches == 2
        for u in range(2):
            e = w.cache.entries[u]
            assert e.length <= 80 and len(e.pages) == -(-e.length // 32)
        in_use = sum(len(e.pages) for e in w.cache.entries.values())
        assert in_use + w.cache.free_pages == total_pages


def test_paged_cache_slots_and_errors():
    from tracekit.errors import CaptureError

    c = PagedKVCache(num_layers=1, num_pages=4, page_size=4, num_heads=1, head_dim=2,
                     max_tokens=12, dtype=torch.float32, device="cpu")
    r = c.reserve(7, 6)
    assert not r.hit and r.cached_len == 0 and len(r.pages) == 2
    assert list(r.new_slots) == [r.pages[0] * 4 + i for i in range(4)] + [r.pages[1] * 4, r.pages[1] * 4 + 1]
    r = c.reserve(7, 5)  # 11 tokens, fits
    assert r.hit and r.cached_len == 6 and len(r.pages) == 3
    r = c.reserve(7, 4)  # 15 > 12: the oldest page (4 tokens) goes
    assert r.evicted_tokens == 4 and r.cached_len == 7 and len(r.cached_slots) == 7
    with pytest.raises(CaptureError, match="exceed"):
        c.reserve(8, 13)
    with pytest.raises(CaptureError, match="out of pages"):
        c.reserve(9, 12)


@torch.inference_mode()
@pytest.mark.parametrize("backend", ["reference", "triton"])
def test_kernels_api_matches_own_reference(monkeypatch, backend):
    # tracekit.kernels.hstu_attention_cached (its CPU reference, or the Triton kernel under
    # the interpreter) in the workload's paged layout gives what the capture's own per-user
    # reference gives
    from tracekit.capture import model

    if model._kernels() is None:
        pytest.skip("tracekit.kernels not importable")
    if backend == "triton":
        from tracekit.kernels._common import interpret_mode

        if not interpret_mode():  # (set by test_kernels_hstu.py before triton is imported)
            pytest.skip("the Triton kernel on CPU tensors needs TRITON_INTERPRET=1 set before triton is imported")
    monkeypatch.setenv("TRACEKIT_KERNELS_BACKEND", backend)
    assert model.attention_backend("cpu").endswith(f"[{backend}]")
    a = _workload(2, 5, initial=30, total=40, new_items_per_request=5)
    ra = [a.request().scores for _ in range(3)]
    monkeypatch.setattr(model, "_kernels", lambda: None)
    b = _workload(2, 5, initial=30, total=40, new_items_per_request=5)
    rb = [b.request().scores for _ in range(3)]
    for x, y in zip(ra, rb, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-5)


def test_page_table_width_is_fixed_across_requests():
    """The page table handed to the attention kernel keeps one width while caches grow
    (a growing width recompiled the Triton kernel inside timed requests on the GPU)."""
    wl = Workload(workload_config("small"), bs=2, nc=8, device="cpu")
    widths = set()
    orig = wl._to_dev

    def spy(a):
        if a.dtype == np.int32 and a.ndim == 2:
            widths.add(a.shape[1])
        return orig(a)

    wl._to_dev = spy
    with torch.no_grad():
        for _ in range(4):
            wl.request()
    assert widths == {wl.page_table_width}


def test_attention_kernel_names_the_compiled_kernel_launched_last(monkeypatch):
    """What a capture records as its attention kernel: the name of the compiled kernel the
    last cached-attention call launched (on CUDA: Triton's or its Gluon version), None where
    nothing compiled was launched (the reference, the interpreter)."""
    import types

    from tracekit.capture import model

    if model._kernels() is None:
        pytest.skip("tracekit.kernels not importable")
    from tracekit.kernels import _cached

    monkeypatch.setattr(_cached, "LAST_KERNEL", types.SimpleNamespace(name="_hstu_cached_gl_kernel"))
    assert model.attention_kernel() == "_hstu_cached_gl_kernel"
    monkeypatch.setattr(_cached, "LAST_KERNEL", None)
    assert model.attention_kernel() is None
    monkeypatch.setattr(model, "_kernels", lambda: None)
    monkeypatch.setattr(_cached, "LAST_KERNEL", types.SimpleNamespace(name="stale"))
    assert model.attention_kernel() is None


def test_the_warm_up_budget_starts_after_the_first_request():
    """A first request longer than the budget (the kernels' compilation) left one more warm-up
    request before the timed ones: the budget now counts from its end."""
    import time
    from types import SimpleNamespace

    from tracekit.capture.timing import MIN_WARMUP_AFTER_FIRST, run_requests

    calls = []

    def request():
        time.sleep(0.3 if not calls else 0.01)
        calls.append(time.perf_counter())
        return SimpleNamespace(kv_caches=0, candidate_embeddings=0, model_flop=0, attention_flop=0,
                               line=lambda ms: f"{ms:.3f}")

    workload = SimpleNamespace(device=torch.device("cpu"), bs=1, nc=4, request=request)
    rows = run_requests(workload, warmup_ms=100, iters=3)
    warm = [r for r in rows if r.phase == "warmup"]
    assert [r.phase for r in rows[len(warm):]] == ["timed"] * 3
    assert len(warm) >= 1 + MIN_WARMUP_AFTER_FIRST
    assert calls[len(warm) - 1] - calls[0] >= 0.1  # the budget spent after the first request
    assert warm[0].latency_ms >= 300
    rows = run_requests(workload, warmup_ms=0, iters=1)
    assert [r.phase for r in rows] == ["warmup"] * (1 + MIN_WARMUP_AFTER_FIRST) + ["timed"]


@torch.inference_mode()
@pytest.mark.parametrize("cached", [False, True], ids=["prefill", "cached"])
def test_a_requests_flop_count_equals_pytorchs_and_the_references_mask(monkeypatch, cached):
    """request_flop's projections and scoring equal what PyTorch's own FLOP counter counts for
    the request (the attention left out), and its attention the reference's visible query-key
    pairs (attention_reference of ones: each query's output is its number of visible keys times
    one weight), 4 x head_dim FLOP per pair and head, in a prefill and in a request from the cache."""
    from torch.utils.flop_counter import FlopCounterMode
    from tracekit.capture import model

    w = _workload(3, 7, initial=13, total=18, new_items_per_request=5)
    if cached:
        w.request()
    cfg, seen = w.cfg, []
    H, d = cfg.num_heads, cfg.head_dim

    def no_attention(q, k, v, cache, layer, batch, *, alpha):
        seen.append(batch)
        return torch.zeros(q.shape[0], H * d, dtype=q.dtype)

    monkeypatch.setattr(model, "attention", no_attention)
    with FlopCounterMode(display=False) as counter:
        res = w.request()
    assert res.model_flop - res.attention_flop == counter.get_total_flops() > 0
    batch = seen[0]
    t = batch.offsets_host[-1]
    cached_tokens = batch.cached_offsets_host[-1]
    ones = torch.ones(t, H, d)
    slots = int(batch.cached_slots.max()) + 1 if cached_tokens else 1
    out = model.attention_reference(ones, ones, ones, torch.ones(slots, H, d), torch.ones(slots, H, d), batch,
                                    alpha=1.0, scale_len=1)
    per_key = torch.nn.functional.silu(torch.tensor(float(d))).item()  # (each visible key's weight x v = 1)
    pairs = round((out[:, 0] / per_key).sum().item())
    assert (cached_tokens > 0) == cached
    assert res.attention_flop == cfg.num_layers * 4 * H * d * pairs
