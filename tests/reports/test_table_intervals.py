"""The written paper-style tables give every cell its n (cases, targets) and a 95% bootstrap
interval over the cases, the targets nested in their case; "n too small" below 5 cases
(#70 item 4). The intervals are recomputed here by hand from the seeded draws."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from intrabench.evaluation.aggregate import dataset_statistics
from intrabench.reports.tables import (
    build_table,
    cell_statistics,
    cells_csv_columns,
    tables_with_rows,
    write_table,
)


def _rows(values: dict[str, dict[str, list[float]]], model: str = "m") -> pd.DataFrame:
    """Final-step rows of one configuration: dataset -> case -> its targets' Dice values."""
    records = []
    for dataset, cases in values.items():
        for case, targets in cases.items():
            for t, dice in enumerate(targets):
                records.append(
                    {
                        "run": "r",
                        "dataset": dataset,
                        "case": case,
                        "target": f"t{t}",
                        "target_class": "lesion",
                        "model": model,
                        "prompter": "box-3d",
                        "refiner": "none",
                        "seed": 0,
                        "step": 0,
                        "dice": dice,
                        "effort_label": "1 box",
                        "cumulative_effort": 1,
                    }
                )
    return pd.DataFrame(records)


def _percentiles(case_means: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """Resampled means of ``case_means`` (cases drawn with replacement, numpy's generator)."""
    rng = np.random.default_rng(seed)
    drawn = rng.integers(0, case_means.size, size=(n_boot, case_means.size))
    return case_means[drawn].mean(axis=1)


#: dataset A: 5 cases, case c4 with two targets (0.5 and 0.7: its case mean is 0.6)
A = {"c0": [0.1], "c1": [0.2], "c2": [0.3], "c3": [0.4], "c4": [0.5, 0.7]}
#: dataset B: 5 cases of one target
B = {"d0": [0.9], "d1": [0.8], "d2": [0.6], "d3": [0.6], "d4": [0.1]}


def test_a_dataset_cell_is_the_bootstrap_over_its_cases_with_targets_nested():
    rows = _rows({"A": A})
    table = build_table(rows, iterations=False)
    cells = cell_statistics(table, rows, n_boot=400).set_index("column")
    case_means = np.array([0.1, 0.2, 0.3, 0.4, 0.6])
    low, high = np.quantile(_percentiles(case_means, 400, 0), [0.025, 0.975])
    assert table.loc[0, "A"] == pytest.approx(100 * case_means.mean())
    assert cells.loc["A", "ci_low"] == pytest.approx(100 * low, abs=1e-9)
    assert cells.loc["A", "ci_high"] == pytest.approx(100 * high, abs=1e-9)
    assert (cells.loc["A", "n_cases"], cells.loc["A", "n_targets"]) == (5, 6)
    assert cells.loc["A", "ci_note"] == ""
    # the interval is statistics.csv's (same draws, seed 0)
    stats = dataset_statistics(rows, "dice", n_boot=400).iloc[0]
    assert cells.loc["A", "ci_low"] == pytest.approx(100 * stats["ci_low"], abs=1e-9)
    assert cells.loc["A", "ci_high"] == pytest.approx(100 * stats["ci_high"], abs=1e-9)


def test_the_average_resamples_each_dataset_on_its_own():
    rows = _rows({"A": A, "B": B})
    table = build_table(rows, iterations=False)
    cells = cell_statistics(table, rows, n_boot=300, seed=7).set_index("column")
    a = _percentiles(np.array([0.1, 0.2, 0.3, 0.4, 0.6]), 300, 7)  # column 0: seed 7
    b = _percentiles(np.array([0.9, 0.8, 0.6, 0.6, 0.1]), 300, 8)  # column 1: seed 8
    low, high = np.quantile((a + b) / 2, [0.025, 0.975])
    assert cells.loc["Average", "ci_low"] == pytest.approx(100 * low, abs=1e-9)
    assert cells.loc["Average", "ci_high"] == pytest.approx(100 * high, abs=1e-9)
    assert (cells.loc["Average", "n_cases"], cells.loc["Average", "n_targets"]) == (10, 11)
    b_low, b_high = np.quantile(
        _percentiles(np.array([0.9, 0.8, 0.6, 0.6, 0.1]), 300, 7), [0.025, 0.975]
    )
    assert cells.loc["B", "ci_low"] == pytest.approx(100 * b_low, abs=1e-9)  # a cell: seed 7
    assert cells.loc["B", "ci_high"] == pytest.approx(100 * b_high, abs=1e-9)


def test_four_cases_give_no_interval_and_every_file_says_so(tmp_path):
    few = {"c0": [0.2], "c1": [0.4], "c2": [0.6], "c3": [0.8]}
    rows = pd.concat([_rows({"A": A, "B": few}), _rows({"A": A, "B": B}, model="n")])
    table = build_table(rows, iterations=False)
    cells = cell_statistics(table, rows, n_boot=200)
    m = cells[cells["row"] == int(table.index[table["Model"] == "m"][0])].set_index("column")
    assert np.isnan(m.loc["B", "ci_low"]) and m.loc["B", "ci_note"] == (
        "n too small (at least 5 cases)"
    )
    assert np.isnan(m.loc["Average", "ci_low"])
    assert m.loc["Average", "ci_note"] == "n too small (at least 5 cases in each dataset)"
    assert np.isfinite(m.loc["A", "ci_low"])  # A has 5 cases
    md, tex, csv = write_table(table, tmp_path, "initial", "dice x100", cells=cells)
    markdown = md.read_text()
    assert f"{table.loc[0, 'B']:.2f} [n too small (at least 5)]" in markdown
    assert "[n too small (at least 5 per dataset)]" in markdown
    # A's n is the same in every row: one line; B's differs (4 and 5 cases): in its cells
    assert markdown.endswith("n (cases / targets): A 5 / 6\n")
    assert "(n 4 / 4)" in markdown and "(n 5 / 5)" in markdown
    latex = tex.read_text()
    assert "[n too small (at least 5)]" in latex and "n (cases / targets): A 5 / 6" in latex
    written = pd.read_csv(csv, keep_default_na=False)
    assert {"A ci_low", "A ci_high", "A n cases", "A n targets", "A ci_note"} <= set(written)
    assert written["B n cases"].tolist() == [4, 5]
    assert written["B ci_note"].tolist() == ["n too small (at least 5 cases)", ""]
    assert written["B ci_low"].tolist()[0] == ""
    # the numbers themselves are unchanged
    assert written["A"].astype(float).tolist() == pytest.approx(table["A"].tolist(), abs=1e-4)


def test_the_interval_shows_in_both_written_files_and_the_csv_holds_the_numbers(tmp_path):
    rows = _rows({"A": A})
    table = build_table(rows, iterations=False)
    cells = cell_statistics(table, rows, n_boot=400)
    low, high = cells.set_index("column").loc["A", ["ci_low", "ci_high"]]
    md, tex, csv = write_table(table, tmp_path, "initial", "dice x100", cells=cells)
    text = f"32.00 [{low:.2f}, {high:.2f}]"
    assert text in md.read_text() and text in tex.read_text()
    assert "n (cases / targets): A 5 / 6; Average 5 / 6" in md.read_text()
    written = pd.read_csv(csv)
    assert written.loc[0, "A ci_low"] == pytest.approx(low, abs=1e-4)
    assert written.loc[0, "Average ci_high"] == pytest.approx(high, abs=1e-4)
    # without cells the files are as before: bare numbers
    plain = write_table(table, tmp_path / "plain", "initial", "dice x100")
    assert "32.00 |" in plain[0].read_text() and "ci_low" not in plain[2].read_text()
    assert list(cells_csv_columns(table, cells).columns[: len(table.columns)]) == list(
        table.columns
    )


def test_refinement_tables_get_an_interval_per_step():
    first = _rows({"A": A}).assign(refiner="scribble")
    second = first.assign(step=1, dice=lambda f: f["dice"] + 0.1)
    rows = pd.concat([first, second], ignore_index=True)
    ((name, _title, table, chosen),) = tables_with_rows(rows)
    assert name == "refinement" and table["Iterations"].tolist() == [0, 1]
    cells = cell_statistics(table, chosen, n_boot=200).set_index(["row", "column"])
    # the same draws on values shifted by 0.1: the interval shifts by 10 (x100)
    assert cells.loc[(1, "A"), "ci_low"] == pytest.approx(cells.loc[(0, "A"), "ci_low"] + 10)
    assert cells.loc[(1, "A"), "ci_high"] == pytest.approx(cells.loc[(0, "A"), "ci_high"] + 10)


def test_every_cell_is_statistics_csv_interval_with_seeds_and_a_missing_case():
    """Two seeds, a configuration without one case, two classes: each cell's interval is still
    statistics.csv's (the vectorised draws equal the per-configuration bootstrap)."""
    rng = np.random.default_rng(3)
    cases = {f"c{i}": [0.0, 0.0] for i in range(7)}
    frames = []
    for model, drop in (("m", None), ("n", "c6")):
        for seed in (0, 1):
            part = _rows({"A": {c: v for c, v in cases.items() if c != drop}}, model=model)
            part = part.assign(
                seed=seed,
                dice=rng.uniform(0.2, 0.9, len(part)),
                target_class=np.where(part["target"] == "t0", "lesion", "organ"),
            )
            frames.append(part)
    rows = pd.concat(frames, ignore_index=True)
    table = build_table(rows, iterations=False)
    cells = cell_statistics(table, rows, n_boot=300)
    stats = dataset_statistics(rows, "dice", n_boot=300).set_index("model")
    for position, model in enumerate(table["Model"]):
        cell = cells[(cells["row"] == position) & (cells["column"] == "A")].iloc[0]
        assert cell["n_cases"] == stats.loc[model, "n_cases"]
        assert cell["n_targets"] == stats.loc[model, "n_targets"]
        assert cell["ci_low"] == pytest.approx(100 * stats.loc[model, "ci_low"], abs=1e-9)
        assert cell["ci_high"] == pytest.approx(100 * stats.loc[model, "ci_high"], abs=1e-9)
    assert sorted(cells.loc[cells["column"] == "A", "n_cases"]) == [6, 7]
