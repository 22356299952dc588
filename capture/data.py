"""Synthetic, seeded request data shaped like KuaiRand-1K (numpy only, no torch).

KuaiRand-1K cannot be downloaded on these machines, so the workload draws data with the
same shape from a seeded generator. What it reproduces, and how:

* **History length per user** (interactions): a two-piece log-normal around the
  KuaiRand-1K median. ``log L = ln(3400) + z * s`` with ``z ~ N(0, 1)`` and
  ``s = SIGMA_LOW`` for ``z < 0``, ``SIGMA_HIGH`` for ``z >= 0``. The two spreads are
  fitted to KuaiRand-1K's per-user quantiles (median ≈ 3.4k, p10 ≈ 650, p90 ≈ 11.6k):
  ``SIGMA_LOW = ln(3400/650)/1.2816 = 1.291`` and ``SIGMA_HIGH = ln(11600/3400)/1.2816
  = 0.957``, so the three quantiles match exactly. One log-normal cannot match both
  tails (the data is skewed left in log space: a single σ fitted by least squares gives
  p10 ≈ 800 and p90 ≈ 14.4k). Lengths are rounded, at least 1, and capped by the
  preset's ``max_history_items`` (the model keeps the most recent items).
* **Item ids**: Zipf popularity over the preset's vocabulary, ``P(rank r) ∝ r^-a`` with
  ``a = zipf_exponent`` (1.05 by default: an assumption typical of short-video
  popularity, not a fit), ranks mapped to ids through a seeded permutation so popular
  items are spread over the table.
* **Actions**: 8 binary feedback signals per interaction (click, long_view, like,
  follow, comment, forward, hate, profile_enter), independent Bernoulli draws with the
  sparse rates in ``ACTION_RATES`` (assumed, of the order seen in KuaiRand logs); the
  action id is the bit mask (0..255), mostly 0 or click-only.
* **Timestamps** (seconds, strictly increasing per user): gaps are log-normal within a
  session (median 20 s) with a 5 % chance of a session break (median 6 h); each user
  starts at a seeded offset from 2022-04-08 00:00 UTC.
* **Candidates**: ``nc`` Zipf-drawn item ids per user per request.

Everything is a pure function of ``(seed, user)``: a user's stream continues where it
stopped, and two generators with the same seed give the same numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MEDIAN_HISTORY = 3400
P10_HISTORY = 650
P90_HISTORY = 11600
Z90 = 1.2815515655446004  # standard normal 90 % quantile
SIGMA_LOW = math.log(MEDIAN_HISTORY / P10_HISTORY) / Z90
SIGMA_HIGH = math.log(P90_HISTORY / MEDIAN_HISTORY) / Z90
ACTION_NAMES = ("click", "long_view", "like", "follow", "comment", "forward", "hate",
                "profile_enter")
ACTION_RATES = (0.30, 0.20, 0.015, 0.002, 0.003, 0.002, 0.0005, 0.01)
EPOCH_S = 1_649_376_000  # 2022-04-08 00:00:00 UTC
SESSION_GAP_MEDIAN_S = 20.0
SESSION_BREAK_P = 0.05
SESSION_BREAK_MEDIAN_S = 6 * 3600.0


def history_length_quantile(q: float | np.ndarray) -> np.ndarray:
    """Quantile function of the (uncapped) history-length distribution."""
    from statistics import NormalDist

    z = np.vectorize(NormalDist().inv_cdf)(np.asarray(q, dtype=float))
    sigma = np.where(z < 0, SIGMA_LOW, SIGMA_HIGH)
    return MEDIAN_HISTORY * np.exp(z * sigma)


def sample_history_lengths(n: int, seed: int, cap: int | None = None) -> np.ndarray:
    """``n`` per-user history lengths (interactions), capped at ``cap`` when given."""
    rng = np.random.default_rng([seed, 0x1E5])
    z = rng.standard_normal(n)
    sigma = np.where(z < 0, SIGMA_LOW, SIGMA_HIGH)
    lengths = np.maximum(np.rint(MEDIAN_HISTORY * np.exp(z * sigma)), 1).astype(np.int64)
    if cap is not None:
        lengths = np.minimum(lengths, cap)
    return lengths


class ZipfItems:
    """Zipf-distributed item ids over ``num_items``, ranks permuted by ``seed``."""

    def __init__(self, num_items: int, exponent: float, seed: int):
        self.num_items = num_items
        self.exponent = exponent
        weights = np.arange(1, num_items + 1, dtype=np.float64) ** -exponent
        cdf = np.cumsum(weights)
        self._cdf = cdf / cdf[-1]
        self._perm = np.random.default_rng([seed, 0x21BF]).permutation(num_items)

    def ranks(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Popularity ranks (0 = most popular)."""
        idx = np.searchsorted(self._cdf, rng.random(n), side="right")
        return np.minimum(idx, self.num_items - 1)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return self._perm[self.ranks(rng, n)]


def sample_actions(rng: np.random.Generator, n: int) -> np.ndarray:
    """Action bit masks (0..255), one per interaction."""
    bits = rng.random((n, len(ACTION_RATES))) < np.asarray(ACTION_RATES)
    return (bits * (1 << np.arange(len(ACTION_RATES)))).sum(axis=1).astype(np.int64)


def sample_gaps(rng: np.random.Generator, n: int) -> np.ndarray:
    """Seconds between consecutive interactions (>= 1)."""
    within = rng.lognormal(math.log(SESSION_GAP_MEDIAN_S), 1.0, n)
    breaks = rng.lognormal(math.log(SESSION_BREAK_MEDIAN_S), 1.0, n)
    gaps = np.where(rng.random(n) < SESSION_BREAK_P, breaks, within)
    return np.maximum(np.rint(gaps), 1).astype(np.int64)


def time_buckets(gaps_s: np.ndarray, num_buckets: int) -> np.ndarray:
    """``floor(log2(1 + gap))`` clipped to ``num_buckets - 1``."""
    return np.minimum(np.floor(np.log2(1.0 + gaps_s)), num_buckets - 1).astype(np.int64)


@dataclass
class Interactions:
    items: np.ndarray  # int64 item ids
    actions: np.ndarray  # int64 action masks
    timestamps: np.ndarray  # int64 seconds, strictly increasing
    gaps: np.ndarray  # int64 seconds since the previous interaction

    def __len__(self) -> int:
        return len(self.items)


class UserStream:
    """One user's endless interaction stream; ``take(n)`` continues where it stopped."""

    def __init__(self, user: int, seed: int, items: ZipfItems):
        self.user = user
        self._rng = np.random.default_rng([seed, 0x5EED, user])
        self._items = items
        self._last_ts = EPOCH_S + int(self._rng.integers(0, 30 * 86400))

    def take(self, n: int) -> Interactions:
        gaps = sample_gaps(self._rng, n)
        ts = self._last_ts + np.cumsum(gaps)
        if n:
            self._last_ts = int(ts[-1])
        return Interactions(self._items.sample(self._rng, n), sample_actions(self._rng, n), ts, gaps)

    def candidates(self, n: int) -> np.ndarray:
        return self._items.sample(self._rng, n)


class SyntheticKuaiRand:
    """The request data source: per-user history lengths, streams and candidates."""

    def __init__(self, num_items: int, max_history_items: int, seed: int = 0,
                 zipf_exponent: float = 1.05):
        self.seed = seed
        self.max_history_items = max_history_items
        self.items = ZipfItems(num_items, zipf_exponent, seed)
        self._streams: dict[int, UserStream] = {}

    def history_length(self, user: int) -> int:
        """The user's initial history length (interactions), capped by the preset."""
        z = np.random.default_rng([self.seed, 0x1E5, user]).standard_normal()
        sigma = SIGMA_LOW if z < 0 else SIGMA_HIGH
        length = max(int(round(MEDIAN_HISTORY * math.exp(z * sigma))), 1)
        return min(length, self.max_history_items)

    def stream(self, user: int) -> UserStream:
        if user not in self._streams:
            self._streams[user] = UserStream(user, self.seed, self.items)
        return self._streams[user]
