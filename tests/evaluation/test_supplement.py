"""Per-class and per-target tables for a supplement (issue 70, item 4)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from intrabench.reports.supplement import per_class_table, write_supplement
from tests.evaluation.test_paired import A, B, rows_of


def test_per_class_hand_computed_and_too_few_cases():
    rows = rows_of({"m1": A, "m2": B}, classes=["x"] * 5 + ["y"], steps=2)
    table = per_class_table(rows, n_boot=200).set_index(["model", "class"])
    assert table.loc[("m1", "x"), "dice x100"] == pytest.approx(100 * sum(A[:5]) / 5)
    assert table.loc[("m1", "y"), "dice x100"] == pytest.approx(100 * A[5])
    assert table.loc[("m1", "x"), "n cases"] == 5 and table.loc[("m1", "y"), "n cases"] == 1
    low, high = table.loc[("m1", "x"), ["ci_low", "ci_high"]]
    assert 100 * min(A[:5]) <= low < high <= 100 * max(A[:5])
    assert np.isnan(table.loc[("m1", "y"), "ci_low"])  # one case: no interval


def test_written_files_say_n_too_small_and_mark_incomplete(tmp_path):
    rows = rows_of({"m1": A, "m2": B}, classes=["x"] * 5 + ["y"])
    rows = rows.assign(
        run="r",
        effort_label="1",
        initial_effort=1,
        cumulative_effort=1,
        nsd=rows["dice"],
        iou=rows["dice"],
        hd95=1.0,
        model_seconds=0.1,
    )
    paths = write_supplement(rows, tmp_path, n_boot=100, note="INCOMPLETE RUN: r")
    assert [p.name for p in paths] == [
        "per-class.md",
        "per-class.tex",
        "per-class.csv",
        "per-target.tex",
        "per-target.csv",
    ]
    markdown = (tmp_path / "per-class.md").read_text()
    assert markdown.startswith("**INCOMPLETE RUN: r Final dice x100 per class")
    assert "| m1 | p | none | D | y | 12.50 | n too small (at least 5) | 1 | 1 |" in markdown
    targets = pd.read_csv(tmp_path / "per-target.csv")
    assert len(targets) == 12 and targets["dice final x100"].iloc[0] == pytest.approx(50.0)
    assert (targets["note"] == "INCOMPLETE RUN: r").all()
    assert "INCOMPLETE RUN: r" in (tmp_path / "per-target.tex").read_text()
