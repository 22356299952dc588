"""The synthetic KuaiRand-1K-shaped generator: distribution, determinism, caps."""

import math

import numpy as np
import pytest
from tracekit.capture import data


def test_history_lengths_match_kuairand_quantiles():
    lengths = data.sample_history_lengths(200_000, seed=1)
    p10, p50, p90 = np.percentile(lengths, [10, 50, 90])
    assert p50 == pytest.approx(3400, rel=0.02)
    assert p10 == pytest.approx(650, rel=0.03)
    assert p90 == pytest.approx(11600, rel=0.03)
    # the quantile function is the distribution the sampler draws from
    q = data.history_length_quantile([0.1, 0.5, 0.9])
    assert q == pytest.approx([650, 3400, 11600], rel=1e-9)


def test_history_lengths_capped_and_positive():
    lengths = data.sample_history_lengths(10_000, seed=2, cap=2048)
    assert lengths.max() == 2048
    assert lengths.min() >= 1
    # about 65 % of KuaiRand-1K-like users have more than 2048 interactions
    share_capped = (lengths == 2048).mean()
    expected = 1 - 0.5 * math.erfc(-math.log(2048 / 3400) / data.SIGMA_LOW / math.sqrt(2))
    assert share_capped == pytest.approx(expected, abs=0.02)
    src = data.SyntheticKuaiRand(num_items=1000, max_history_items=300, seed=0)
    per_user = [src.history_length(u) for u in range(200)]
    assert max(per_user) == 300 and min(per_user) >= 1


def test_zipf_items_follow_power_law_and_are_permuted():
    items = data.ZipfItems(10_000, exponent=1.05, seed=0)
    rng = np.random.default_rng(0)
    ranks = items.ranks(rng, 400_000)
    counts = np.bincount(ranks, minlength=10_000)
    assert counts[0] / counts[1] == pytest.approx(2 ** 1.05, rel=0.05)
    assert counts[0] / counts[9] == pytest.approx(10 ** 1.05, rel=0.1)
    ids = items.sample(np.random.default_rng(0), 1000)
    assert ids.min() >= 0 and ids.max() < 10_000
    assert not np.array_equal(np.sort(np.unique(ids))[:5], np.arange(5))  # not rank order


def test_actions_are_sparse_bit_masks():
    acts = data.sample_actions(np.random.default_rng(3), 100_000)
    assert acts.min() >= 0 and acts.max() < 256
    click_rate = (acts & 1).astype(bool).mean()
    assert click_rate == pytest.approx(data.ACTION_RATES[0], abs=0.01)
    zero_share = (acts == 0).mean()
    assert zero_share == pytest.approx(np.prod([1 - p for p in data.ACTION_RATES]), abs=0.01)


def test_streams_are_monotonic_continuing_and_seeded():
    a = data.SyntheticKuaiRand(num_items=5000, max_history_items=100, seed=7)
    b = data.SyntheticKuaiRand(num_items=5000, max_history_items=100, seed=7)
    first, second = a.stream(3).take(50), a.stream(3).take(50)
    ts = np.concatenate([first.timestamps, second.timestamps])
    assert (np.diff(ts) > 0).all()
    assert ts[0] >= data.EPOCH_S
    both = b.stream(3).take(50)
    np.testing.assert_array_equal(both.items, first.items)
    np.testing.assert_array_equal(both.timestamps, first.timestamps)
    other = data.SyntheticKuaiRand(num_items=5000, max_history_items=100, seed=8)
    assert not np.array_equal(other.stream(3).take(50).items, first.items)


def test_time_buckets_are_log2_and_clipped():
    gaps = np.array([1, 2, 3, 7, 1 << 40])
    np.testing.assert_array_equal(data.time_buckets(gaps, 32), [1, 1, 2, 3, 31])
