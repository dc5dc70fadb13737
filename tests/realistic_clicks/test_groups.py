"""Clicking groups: equal masses, sampling inside the region and towards likely voxels."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from intrabench.clicks.groups import (
    clicking_groups,
    group_masses,
    group_shares,
    sample_from_group,
    sorted_candidates,
)


def test_shares_by_hand():
    # sorted 0.1, 0.2, 0.3, 0.4 on [0, 1]: cumulative 0.1, 0.3, 0.6, 1.0; the cut at 0.5 splits
    # the 0.3 voxel into 0.2 (lower half) and 0.1 (upper half)
    values = np.array([0.1, 0.2, 0.3, 0.4])
    np.testing.assert_allclose(group_shares(values, 1, 2), [0.1, 0.2, 0.2, 0.0], atol=1e-15)
    np.testing.assert_allclose(group_shares(values, 2, 2), [0.0, 0.0, 0.1, 0.4], atol=1e-15)
    # four groups of 0.25: [0.1, 0.15 of 0.2], [0.05 of 0.2, 0.2 of 0.3], ...
    np.testing.assert_allclose(group_shares(values, 1, 4), [0.1, 0.15, 0, 0], atol=1e-15)
    np.testing.assert_allclose(group_shares(values, 2, 4), [0, 0.05, 0.2, 0], atol=1e-15)
    np.testing.assert_allclose(group_shares(values, 3, 4), [0, 0, 0.1, 0.15], atol=1e-15)
    np.testing.assert_allclose(group_shares(values, 4, 4), [0, 0, 0, 0.25], atol=1e-15)
    with pytest.raises(ValueError, match="group must be in 1..4"):
        group_shares(values, 5, 4)


@settings(max_examples=60, deadline=None)
@given(
    arrays(np.float64, st.integers(1, 400), elements=st.floats(0, 1e3)),
    st.sampled_from([2, 4, 10, 20]),
    st.integers(0, 2**31),
)
def test_every_group_holds_the_same_mass(weights, n_groups, seed):
    if not (weights > 0).any():
        weights[0] = 1.0
    probabilities = weights / weights.sum()
    masses = group_masses(probabilities, n_groups, np.random.default_rng(seed))
    np.testing.assert_allclose(masses, np.full(n_groups, 1.0 / n_groups), atol=1e-9)


@settings(max_examples=60, deadline=None)
@given(
    arrays(bool, (6, 7, 8), elements=st.booleans()),
    st.integers(1, 10),
    st.integers(1, 3),
    st.integers(0, 2**31),
)
def test_every_sampled_click_lies_in_its_region(region, group, n, seed):
    if not region.any():
        region[3, 3, 3] = True
    rng = np.random.default_rng(seed)
    weights = region * rng.random(region.shape)
    weights[region & (weights == 0)] = 0.5
    probabilities = weights / weights.sum()
    flat = sample_from_group(probabilities, group, 10, n, rng)
    assert 1 <= len(flat) <= n and len(set(flat.tolist())) == len(flat)
    assert region.ravel()[flat].all()


def test_likely_groups_click_likely_voxels():
    """G10's clicks have a higher mean probability than G1's (the paper's Figure 6)."""
    rng = np.random.default_rng(0)
    weights = np.arange(1, 1001, dtype=np.float64)
    probabilities = weights / weights.sum()
    g1 = [probabilities[sample_from_group(probabilities, 1, 10, 1, rng)[0]] for _ in range(300)]
    g10 = [probabilities[sample_from_group(probabilities, 10, 10, 1, rng)[0]] for _ in range(300)]
    assert np.mean(g10) > 2 * np.mean(g1)
    # G10 = the top 10% of the mass (50050 of 500500): weights 1000..950 sum to 49725, so
    # the group is those 51 voxels and 325 of the 949 voxel's mass
    assert min(g10) >= probabilities[948]
    shares = group_shares(probabilities, 10, 10)
    assert np.flatnonzero(shares).tolist() == list(range(948, 1000))
    assert shares[948] * 500500 == pytest.approx(325)


def test_groups_map_and_ties():
    probabilities = np.full((4, 5), 1 / 20)
    groups = clicking_groups(probabilities, 10, np.random.default_rng(1))
    assert sorted(np.bincount(groups.ravel())[1:]) == [2] * 10  # two voxels per group
    # without a generator, ties keep raster (C) order; with one, a drawn order
    indices, _ = sorted_candidates(probabilities)
    assert indices.tolist() == list(range(20))
    shuffled, _ = sorted_candidates(probabilities, np.random.default_rng(1))
    assert sorted(shuffled.tolist()) == list(range(20)) and shuffled.tolist() != list(range(20))
    # zero-probability voxels are in no group
    probabilities = np.array([0.0, 0.5, 0.5])
    assert clicking_groups(probabilities, 2).tolist() == [0, 1, 2]
