"""Rank stability (issue 70, item 2): hand-computed ranks, and the vectorised bootstrap ranks
against a loop over the resamples of aggregate's own bootstrap."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from intrabench.evaluation.aggregate import bootstrap_replicates, seed_case_class_matrices
from intrabench.evaluation.paired import MIN_CASES_INTERVAL
from intrabench.evaluation.ranking import rank_distributions, rank_table, ranks_of
from tests.evaluation.test_paired import rows_of


def test_ranks_ties_share_the_best_rank():
    assert ranks_of(np.array([0.5, 0.7, 0.7])).tolist() == [3, 1, 1]
    assert ranks_of(np.array([0.5, np.nan, 0.7])).tolist() == [2, 3, 1]
    assert ranks_of(np.array([3.0, 1.0, 2.0]), higher_is_better=False).tolist() == [3, 1, 2]


def test_a_configuration_better_on_every_case_is_always_first():
    base = np.linspace(0.1, 0.6, 6)
    rows = rows_of({"best": list(base + 0.3), "mid": list(base + 0.1), "low": list(base)})
    table = rank_table(rank_distributions(rows, n_boot=400)).set_index("configuration")
    best = table.loc["best / p / none"]
    assert best["rank"] == 1 and best["median_rank"] == 1
    assert best["rank1_share"] == 1.0 and (best["rank_low"], best["rank_high"]) == (1, 1)
    assert table.loc["low / p / none", "rank1_share"] == 0.0
    assert table.loc["low / p / none", "median_rank"] == 3
    assert best["score"] == pytest.approx(float(np.mean(base + 0.3)))
    assert (table["n_boot"] == 400).all() and (table["n_cases"] == 6).all()


def test_rank_shares_equal_a_loop_over_aggregates_bootstrap():
    rng = np.random.default_rng(5)
    scores = {m: list(rng.random(9)) for m in ("a", "b", "c", "d")}
    rows = rows_of(scores, classes=["x", "y", "z"] * 3)
    table = rank_table(rank_distributions(rows, n_boot=300, seed=7)).set_index("configuration")
    replicates = np.stack(
        [
            bootstrap_replicates(
                seed_case_class_matrices(
                    rows[rows["model"] == m], "dice", cases=sorted(rows["case"].unique())
                ),
                n_boot=300,
                seed=7,
            )
            for m in scores
        ]
    )  # dataset 0 is resampled with seed 7 + 0
    first = np.argmax(replicates, axis=0)
    for i, model in enumerate(scores):
        assert table.loc[f"{model} / p / none", "rank1_share"] == pytest.approx(
            float(np.mean(first == i)), abs=1e-15
        )
        ranks = 1 + (replicates > replicates[i]).sum(axis=0)
        assert table.loc[f"{model} / p / none", "median_rank"] == float(np.median(ranks))


def test_overall_ranks_only_configurations_on_every_dataset():
    first = rows_of({"a": [0.9] * 5, "b": [0.5] * 5, "only-here": [1.0] * 5}, dataset="D1")
    second = rows_of({"a": [0.2] * 5, "b": [0.4] * 5}, dataset="D2")
    table = rank_table(rank_distributions(pd.concat([first, second]), n_boot=50))
    overall = table[table["dataset"] == "Overall"].set_index("configuration")
    assert list(overall.index) == ["a / p / none", "b / p / none"]
    assert overall.loc["a / p / none", "score"] == pytest.approx(0.55)
    assert overall.loc["b / p / none", "score"] == pytest.approx(0.45)
    assert overall.loc["a / p / none", "rank"] == 1 and overall["n_cases"].tolist() == [10, 10]


def test_too_few_cases_no_rank_distribution():
    rows = rows_of({"a": [0.9, 0.5, 0.4], "b": [0.5, 0.6, 0.3]})
    table = rank_table(rank_distributions(rows, n_boot=50))
    assert table["n_cases"].tolist() == [3, 3] and MIN_CASES_INTERVAL > 3
    assert table["rank"].tolist() == [1, 2]
    assert table["median_rank"].isna().all() and table["rank1_share"].isna().all()
    assert (table["n_boot"] == 0).all()
