"""Two HSTU attention kernels as a kernel writer brings their own to `tracekit bench attention`:

    tracekit bench attention --config hstu_T1024 \
        --variants triton_dense,loop=tests/data/programs/attention_variant.py:hstu_loop --baseline loop

Each is called as tracekit.kernels.api.hstu_attention is: a jagged batch (q, k [tokens, H, d_qk],
v [tokens, H, d_v], seq_offsets [B+1]) with max_seq_len, alpha and num_targets ([B] or None),
and returns [tokens, H, d_v].

- ``hstu_loop``: one sequence at a time in PyTorch, the version one writes first;
- ``hstu_causal_only``: the same with the plain causal mask, so that the candidates (the last
  num_targets tokens of a sequence) attend to each other too: the bug the benchmark's check
  against the reference catches where a configuration has targets.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _attention(q, k, v, seq_offsets, max_seq_len, alpha, num_targets, candidates_apart: bool):
    out = torch.empty(q.shape[0], q.shape[1], v.shape[2], dtype=q.dtype, device=q.device)
    offsets = seq_offsets.tolist()
    targets = num_targets.tolist() if num_targets is not None else [0] * (len(offsets) - 1)
    for start, end, nt in zip(offsets[:-1], offsets[1:], targets, strict=True):
        n = end - start
        if n == 0:
            continue
        pos = torch.arange(n, device=q.device)
        i, j = pos[:, None], pos[None, :]
        mask = j <= i
        if candidates_apart:  # a candidate attends to the history and to itself only
            history = n - min(nt, n)
            mask &= ~((i >= history) & (j >= history) & (i != j))
        scores = torch.einsum("ihd,jhd->hij", q[start:end], k[start:end]) * alpha
        weights = F.silu(scores) * mask / max_seq_len
        out[start:end] = torch.einsum("hij,jhd->ihd", weights, v[start:end])
    return out


def hstu_loop(q, k, v, seq_offsets, *, max_seq_len, alpha, num_targets=None):
    return _attention(q, k, v, seq_offsets, max_seq_len, alpha, num_targets, candidates_apart=True)


def hstu_causal_only(q, k, v, seq_offsets, *, max_seq_len, alpha, num_targets=None):
    return _attention(q, k, v, seq_offsets, max_seq_len, alpha, num_targets, candidates_apart=False)
