"""The HSTU ranking model for inference with a paged KV cache (needs torch).

Per request the model sees, for each user ``b`` of the batch, a jagged block of new
tokens: ``2 * n_b`` history tokens (item, action, item, action, ...) that arrived since
the user's last request, then ``nc`` candidate item tokens. Only these tokens are
computed; earlier history comes from the KV cache. Each layer:

    h = LayerNorm(x)                                   input_norm
    u, v, q, k = split(SiLU(h @ W_uvqk + b))           uvqk_linear
    cache[layer] <- k, v of the new history tokens      kv_cache.append
    a = HSTU attention of q against cache + new k/v     hstu_attention
    y = LayerNorm(a) * u                               norm_mul
    x = x + y @ W_out + b                              output_linear

HSTU attention is pointwise: ``softmax`` is replaced by ``SiLU(alpha * q.k) / N`` with
``N`` the cache capacity in tokens plus ``nc`` (the longest sequence a request can see). History tokens see the cache and earlier new
history tokens (causal); candidates see the whole history and themselves only, never
each other. The candidate rows of the last layer go through a small scoring MLP.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .config import WorkloadConfig


@contextlib.contextmanager
def nvtx(name: str):
    """An NVTX push/pop range (``torch.cuda.nvtx``); a no-op without CUDA."""
    if torch.cuda.is_available():
        torch.cuda.nvtx.range_push(name)
        try:
            yield
        finally:
            torch.cuda.nvtx.range_pop()
    else:
        yield


@dataclass
class AttnBatch:
    """The per-request layout the attention (and the cache append) needs.

    Rows of ``x`` are ordered user by user: ``[history tokens; candidates]``.
    Host-side lists are kept for the PyTorch reference; tensors live on the device.
    """

    num_users: int
    seq_offsets: torch.Tensor  # [B+1] int64, offsets of each user's new tokens in x
    num_targets: torch.Tensor  # [B] int64, candidates per user
    cache_lens: torch.Tensor  # [B] int32, cached tokens per user (before this request)
    page_table: torch.Tensor  # [B, max_pages] int32, 0-padded; pages after the append
    hist_rows: torch.Tensor  # rows of x holding new history tokens (cache append order)
    new_slots: torch.Tensor  # flat cache slots of those tokens
    cached_slots: torch.Tensor  # flat cache slots of the cached tokens, user by user
    cand_rows: torch.Tensor  # rows of x holding candidates, user by user
    offsets_host: list[int]
    hist_tokens_host: list[int]  # new history tokens per user
    cache_lens_host: list[int]
    cached_offsets_host: list[int]  # offsets into cached_slots
    max_seq_len: int  # bound of cached + new tokens per user; the attention's 1/N


def attention_reference(q, k, v, k_cache, v_cache, batch: AttnBatch, *, alpha: float,
                        scale_len: int) -> torch.Tensor:
    """PyTorch reference of the cached HSTU attention; ``[T, H, d]`` in, ``[T, H*d]`` out."""
    out = torch.empty_like(q)
    for b in range(batch.num_users):
        s, e = batch.offsets_host[b], batch.offsets_host[b + 1]
        n_hist = batch.hist_tokens_host[b]
        cs, ce = batch.cached_offsets_host[b], batch.cached_offsets_host[b + 1]
        slots = batch.cached_slots[cs:ce]
        keys = torch.cat([k_cache[slots], k[s:e]])
        vals = torch.cat([v_cache[slots], v[s:e]])
        scores = torch.einsum("qhd,khd->hqk", q[s:e].float(), keys.float()) * alpha
        weights = F.silu(scores) / scale_len
        tq = e - s
        qi = torch.arange(tq, device=q.device)[:, None]
        kj = torch.arange(tq, device=q.device)[None, :]
        new_mask = (kj <= qi) & ((qi < n_hist) | (kj < n_hist) | (kj == qi))
        mask = torch.cat([torch.ones(tq, ce - cs, dtype=torch.bool, device=q.device), new_mask], 1)
        weights = weights * mask
        out[s:e] = torch.einsum("hqk,khd->qhd", weights, vals.float()).to(q.dtype)
    return out.reshape(q.shape[0], -1)


def _kernels():
    """``tracekit.kernels`` (Triton on CUDA, its PyTorch reference on CPU), or None."""
    try:
        from tracekit import kernels
    except Exception:
        return None
    return kernels if hasattr(kernels, "hstu_attention_cached") else None


def attention_backend(device: torch.device | str = "cpu") -> str:
    kernels = _kernels()
    if kernels is None:
        return "capture.model.attention_reference"
    from tracekit.kernels._common import choose_backend

    return f"tracekit.kernels.hstu_attention_cached[{choose_backend('auto', torch.device(device))}]"


def attention_kernel() -> str | None:
    """The compiled kernel the last cached-attention call launched (Triton's
    ``_hstu_cached_sk_kernel``, its Gluon version ``_hstu_cached_gl_kernel``, ...), or None
    where none was (the PyTorch reference; the interpreter's launches have no name)."""
    if _kernels() is None:
        return None
    from tracekit.kernels import _cached

    name = getattr(_cached.LAST_KERNEL, "name", None)
    return name if isinstance(name, str) and name else None


def attention(q, k, v, cache, layer: int, batch: AttnBatch, *, alpha: float) -> torch.Tensor:
    """The one place the model calls HSTU attention: the new tokens' queries against the
    layer's paged cache (``batch.cache_lens`` tokens per user) plus their own K/V.
    ``[T, H, d]`` in, ``[T, H*d]`` out."""
    kernels = _kernels()
    if kernels is None:
        k_cache, v_cache = cache.flat(layer)
        return attention_reference(q, k, v, k_cache, v_cache, batch, alpha=alpha,
                                   scale_len=batch.max_seq_len)
    kv = kernels.PagedKVCache(cache.k[layer], cache.v[layer], batch.page_table, batch.cache_lens,
                              cache.page_size)
    out = kernels.hstu_attention_cached(q, k, v, batch.seq_offsets, kv, max_seq_len=batch.max_seq_len,
                                        alpha=alpha, num_targets=batch.num_targets, validate=False)
    return out.reshape(q.shape[0], -1)


def request_flop(cfg, batch: AttnBatch, nc: int) -> tuple[int, int]:
    """The floating-point work one request needs: (all of it, the attention's part), counting
    the matrix products, 2 FLOP per multiply-add (element-wise work, norms and look-ups left out,
    as model FLOP counts do). Per layer: the uvqk and output projections of every new token, and
    the attention over each query's visible keys (``attention_reference``'s mask: every cached
    token; among the new ones, a history token sees the history up to itself, a candidate the
    history and itself), QK^T and its product with V, 4 x head_dim FLOP per pair and head; then
    the candidates' scoring MLP. What a kernel computes beyond it (masked tiles) is not counted."""
    D, H, d = cfg.d_model, cfg.num_heads, cfg.head_dim
    tokens = batch.offsets_host[-1]
    pairs = 0
    for b in range(batch.num_users):
        n_hist, new = batch.hist_tokens_host[b], batch.offsets_host[b + 1] - batch.offsets_host[b]
        cands = new - n_hist
        pairs += new * batch.cache_lens_host[b] + n_hist * (n_hist + 1) // 2 + cands * (n_hist + 1)
    attention = cfg.num_layers * 4 * H * d * pairs
    projections = cfg.num_layers * 2 * tokens * D * (4 * H * d + H * d)
    scoring = 2 * batch.num_users * nc * (D * cfg.scoring_hidden + cfg.scoring_hidden * cfg.num_tasks)
    return attention + projections + scoring, attention


class HSTURanker:
    """Randomly initialised (seeded) HSTU ranking model; weights live on ``device``."""

    def __init__(self, cfg: WorkloadConfig, device: torch.device, dtype: torch.dtype):
        self.cfg = cfg
        self.device = device
        self.dtype = dtype
        # seeded on the device itself: fast for the multi-GB embedding table of the large
        # preset; the numbers are reproducible per device type (CPU and CUDA differ)
        g = torch.Generator(device=device).manual_seed(cfg.seed)
        D, H, d = cfg.d_model, cfg.num_heads, cfg.head_dim
        hd = H * d

        def param(*shape, std=0.02):
            return torch.empty(shape, dtype=dtype, device=device).normal_(0.0, std, generator=g)

        def ones(n):
            return torch.ones(n, dtype=dtype, device=device)

        def zeros(n):
            return torch.zeros(n, dtype=dtype, device=device)

        self.item_emb = param(cfg.num_items, D)
        self.action_emb = param(cfg.num_actions, D)
        self.time_emb = param(cfg.num_time_buckets, D)
        self.layers = []
        for _ in range(cfg.num_layers):
            self.layers.append(dict(
                ln_w=ones(D), ln_b=zeros(D),
                w_uvqk=param(4 * hd, D, std=1 / math.sqrt(D)), b_uvqk=zeros(4 * hd),
                ln_attn_w=ones(hd), ln_attn_b=zeros(hd),
                w_out=param(D, hd, std=1 / math.sqrt(hd)), b_out=zeros(D),
            ))
        self.ln_final_w, self.ln_final_b = ones(D), zeros(D)
        self.w1 = param(cfg.scoring_hidden, D, std=1 / math.sqrt(D))
        self.b1 = zeros(cfg.scoring_hidden)
        self.w2 = param(cfg.num_tasks, cfg.scoring_hidden, std=1 / math.sqrt(cfg.scoring_hidden))
        self.b2 = zeros(cfg.num_tasks)
        self.alpha = 1.0 / math.sqrt(d)

    def layer(self, i: int, x: torch.Tensor, batch: AttnBatch, cache) -> torch.Tensor:
        cfg, p = self.cfg, self.layers[i]
        H, d = cfg.num_heads, cfg.head_dim
        hd = H * d
        with nvtx(f"hstu.layer{i}"):
            with nvtx("input_norm"):
                h = F.layer_norm(x, (cfg.d_model,), p["ln_w"], p["ln_b"])
            with nvtx("uvqk_linear"):
                uvqk = F.silu(F.linear(h, p["w_uvqk"], p["b_uvqk"]))
                u, v, q, k = uvqk.split([hd, hd, hd, hd], dim=-1)
                q = q.reshape(-1, H, d)
                k = k.reshape(-1, H, d)
                v = v.reshape(-1, H, d)
            k_cache, v_cache = cache.flat(i)
            with nvtx("kv_cache.append"):  # before attention, which reads only cache_lens tokens
                k_cache.index_copy_(0, batch.new_slots, k.index_select(0, batch.hist_rows))
                v_cache.index_copy_(0, batch.new_slots, v.index_select(0, batch.hist_rows))
            with nvtx("hstu_attention"):
                a = attention(q, k, v, cache, i, batch, alpha=self.alpha)
            with nvtx("norm_mul"):
                y = F.layer_norm(a, (hd,), p["ln_attn_w"], p["ln_attn_b"]) * u
            with nvtx("output_linear"):
                x = x + F.linear(y, p["w_out"], p["b_out"])
        return x

    def score(self, x: torch.Tensor, batch: AttnBatch, nc: int) -> torch.Tensor:
        with nvtx("hstu.candidate_scoring"):
            c = x.index_select(0, batch.cand_rows)
            c = F.layer_norm(c, (self.cfg.d_model,), self.ln_final_w, self.ln_final_b)
            h = F.silu(F.linear(c, self.w1, self.b1))
            logits = F.linear(h, self.w2, self.b2)
            scores = torch.sigmoid(logits.float()).view(batch.num_users, nc, self.cfg.num_tasks)
            return scores.cpu()
