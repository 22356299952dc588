"""The HSTU inference request loop: users, KV cache, one request = one batch (needs torch).

A workload serves a fixed batch of ``bs`` users. A user's first request is a cache miss:
its whole (capped) history is computed and cached. Every later request appends the
``new_items_per_request`` interactions the user made since (``2 x`` that many tokens)
and scores ``nc`` fresh candidates per user, computing only the new tokens and the
candidates; the rest of the history is read from the paged KV cache.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from .config import WorkloadConfig
from .data import SyntheticKuaiRand, time_buckets
from .kvcache import PagedKVCache
from .model import AttnBatch, HSTURanker, nvtx, request_flop


@dataclass
class RequestResult:
    kv_caches: int  # users of the batch served from the KV cache (cache hits)
    candidate_embeddings: int  # candidates scored per user
    new_tokens: int  # history tokens computed in this request, all users
    cached_tokens: int  # history tokens read from the cache, all users
    scores: torch.Tensor  # [bs, nc, num_tasks] on the host
    model_flop: int = 0  # the request's floating-point work (model.request_flop)
    attention_flop: int = 0  # its attention's part

    def line(self, latency_ms: float) -> str:
        """The seed benchmark's log line."""
        return (f"KV Caches: {self.kv_caches}, Candidate Embeddings: {self.candidate_embeddings}, "
                f"Total time(ms): {latency_ms:.3f}")


def _dtype(cfg: WorkloadConfig, device: torch.device) -> torch.dtype:
    return getattr(torch, cfg.gpu_dtype) if device.type == "cuda" else torch.float32


class Workload:
    def __init__(self, cfg: WorkloadConfig, bs: int, nc: int, device: torch.device | str):
        self.cfg, self.bs, self.nc = cfg, bs, nc
        self.device = torch.device(device)
        self.dtype = _dtype(cfg, self.device)
        self.data = SyntheticKuaiRand(cfg.num_items, cfg.max_history_items, cfg.seed,
                                      cfg.zipf_exponent)
        self.users = list(range(bs))
        self.model = HSTURanker(cfg, self.device, self.dtype)
        pages_per_user = -(-cfg.max_cache_tokens // cfg.page_size) + 1
        self.page_table_width = pages_per_user
        self.cache = PagedKVCache(
            num_layers=cfg.num_layers, num_pages=bs * pages_per_user, page_size=cfg.page_size,
            num_heads=cfg.num_heads, head_dim=cfg.head_dim, max_tokens=cfg.max_cache_tokens,
            dtype=self.dtype, device=self.device)
        self._pin = self.device.type == "cuda"

    def _to_dev(self, a: np.ndarray) -> torch.Tensor:
        t = torch.from_numpy(np.ascontiguousarray(a))
        if self._pin:
            t = t.pin_memory()
        return t.to(self.device, non_blocking=True)

    def request(self) -> RequestResult:
        cfg, nc = self.cfg, self.nc
        with nvtx("hstu.request"):
            with nvtx("hstu.kv_cache.lookup"):
                hist, res = [], []
                for user in self.users:
                    hit = user in self.cache.entries
                    n_items = (cfg.new_items_per_request if hit
                               else self.data.history_length(user))
                    inter = self.data.stream(user).take(n_items)
                    hist.append(inter)
                    res.append(self.cache.reserve(user, 2 * n_items))
                # A fixed page-table width (the most pages a user can hold): a width that
                # grew with the caches changed the attention kernel's specialisation and
                # recompiled it inside timed requests (2.5-3.4 s stalls seen with nsys).
                max_pages = max([self.page_table_width] + [len(r.pages) for r in res])
                table = np.zeros((self.bs, max_pages), dtype=np.int32)  # pad: any valid page
                for b, r in enumerate(res):
                    table[b, :len(r.pages)] = r.pages
                cache_lens = np.array([r.cached_len for r in res], dtype=np.int32)
                cached_offsets = np.concatenate([[0], np.cumsum(cache_lens)]).astype(np.int64)
                cached_slots = (np.concatenate([r.cached_slots for r in res])
                                if cached_offsets[-1] else np.zeros(0, dtype=np.int64))
                new_slots = np.concatenate([r.new_slots for r in res])
                page_table_d = self._to_dev(table)
                cache_lens_d = self._to_dev(cache_lens)
                cached_slots_d = self._to_dev(cached_slots)
                new_slots_d = self._to_dev(new_slots)
            with nvtx("hstu.embedding"):
                n_hist = np.array([len(h) for h in hist], dtype=np.int64)
                cands = [self.data.stream(u).candidates(nc) for u in self.users]
                item_ids = self._to_dev(np.concatenate([h.items for h in hist] + cands))
                action_ids = self._to_dev(np.concatenate([h.actions for h in hist]))
                buckets = self._to_dev(time_buckets(np.concatenate([h.gaps for h in hist]),
                                                    cfg.num_time_buckets))
                m = self.model
                item_e = F.embedding(item_ids, m.item_emb)
                action_e = F.embedding(action_ids, m.action_emb)
                time_e = F.embedding(buckets, m.time_emb)
            with nvtx("hstu.preprocess"):
                lengths = 2 * n_hist + nc
                offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
                item_rows = np.concatenate([offsets[b] + 2 * np.arange(n_hist[b])
                                            for b in range(self.bs)])
                hist_rows = np.concatenate([offsets[b] + np.arange(2 * n_hist[b])
                                            for b in range(self.bs)])
                cand_rows = np.concatenate([offsets[b] + 2 * n_hist[b] + np.arange(nc)
                                            for b in range(self.bs)])
                total_hist = int(n_hist.sum())
                rows_d = self._to_dev(np.concatenate([item_rows, hist_rows, cand_rows]))
                item_rows_d = rows_d[:total_hist]
                hist_rows_d = rows_d[total_hist:3 * total_hist]
                cand_rows_d = rows_d[3 * total_hist:]
                x = torch.empty(int(offsets[-1]), cfg.d_model, dtype=self.dtype, device=self.device)
                x.index_copy_(0, item_rows_d, item_e[:total_hist] + time_e)
                x.index_copy_(0, item_rows_d + 1, action_e)
                x.index_copy_(0, cand_rows_d, item_e[total_hist:])
                batch = AttnBatch(
                    num_users=self.bs,
                    seq_offsets=self._to_dev(offsets),
                    num_targets=torch.full((self.bs,), nc, dtype=torch.int64, device=self.device),
                    cache_lens=cache_lens_d, page_table=page_table_d,
                    hist_rows=hist_rows_d, new_slots=new_slots_d, cached_slots=cached_slots_d,
                    cand_rows=cand_rows_d,
                    offsets_host=offsets.tolist(), hist_tokens_host=(2 * n_hist).tolist(),
                    cache_lens_host=cache_lens.tolist(), cached_offsets_host=cached_offsets.tolist(),
                    max_seq_len=cfg.max_cache_tokens + nc)
            for i in range(cfg.num_layers):
                x = m.layer(i, x, batch, self.cache)
            scores = m.score(x, batch, nc)
        flop, attention_flop = request_flop(cfg, batch, nc)  # (host lists: after the GPU work is queued)
        return RequestResult(
            kv_caches=sum(r.hit for r in res), candidate_embeddings=nc,
            new_tokens=2 * total_hist, cached_tokens=int(cache_lens.sum()), scores=scores,
            model_flop=flop, attention_flop=attention_flop)
