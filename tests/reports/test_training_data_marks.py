"""Cells of a (model, dataset) pair the model was trained on are marked in every table
``tables`` writes, by default; ``--exclude-training-data`` leaves them out (#70 item 3)."""

from __future__ import annotations

import pandas as pd
import pytest

from intrabench.cli import main
from intrabench.reports.tables import build_table, to_latex, trained_cells, write_table
from tests.run_helpers import run_config


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A run of two models on two datasets; synthetic-network's rows on 'real' then say its
    card lists that dataset as trained on (as SegVol's does HanSeg)."""
    tmp = tmp_path_factory.mktemp("trained")
    run = run_config(
        tmp,
        "name: t\ndatasets: [{name: demo-phantoms, n_cases: 1, label: phantoms},\n"
        "  {name: demo-real, label: real}]\nmodels: [region-growing-3d, synthetic-network]\n"
        "prompters: [box-3d]\nrefinement_steps: 0\n",
    )
    rows = pd.read_parquet(run / "results.parquet")
    trained = (rows["dataset"] == "real") & (rows["model"] == "synthetic-network")
    assert trained.any() and not trained.all()
    rows.loc[trained, "in_training_data"] = "yes"
    rows.to_parquet(run / "results.parquet")
    return run


def test_the_trained_cell_is_found_and_drawn_in_all_three_files(run, tmp_path):
    rows = pd.read_parquet(run / "results.parquet")
    table = build_table(rows, iterations=False)
    marked = trained_cells(table, rows)
    row = table.index[table["Model"] == "synthetic-network"][0]
    assert marked == frozenset({(int(row), "real")})
    md, tex, csv = write_table(table, tmp_path, "initial", "dice", marked)
    value = f"{table.loc[row, 'real']:.2f}"
    assert f"{value}\u2020" in md.read_text()
    assert "(1 cell(s))" in md.read_text()
    assert f"{value}$^\\dagger$" in tex.read_text() and "\\textdagger{}" in tex.read_text()
    written = pd.read_csv(csv, keep_default_na=False)
    assert written["Trained on"].tolist() == [
        "real" if m == "synthetic-network" else "" for m in table["Model"]
    ]
    assert "dagger" not in to_latex(table)  # nothing marked: as before


def test_tables_mark_by_default_and_exclude_on_request(run, tmp_path, capsys):
    out = tmp_path / "marked"
    assert main(["tables", str(run), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "training data: 1 table cell(s) marked \u2020" in printed
    assert "\u2020" in (out / "initial.md").read_text()
    left = tmp_path / "left-out"
    assert main(["tables", str(run), "--out", str(left), "--exclude-training-data"]) == 0
    printed = capsys.readouterr().out
    assert "training data: 1 (model, dataset) pair(s) the model was trained on left out" in printed
    table = pd.read_csv(left / "initial.csv")
    assert "Trained on" not in table
    cell = table.loc[table["Model"] == "synthetic-network", "real"]
    assert cell.isna().all()  # left out, not scored
    kept = table.loc[table["Model"] == "region-growing-3d", "real"]
    assert kept.notna().all()


def test_the_report_marks_the_cells_and_says_how_many(run, tmp_path):
    import html as html_text
    import re

    from intrabench.reports.html import build_report

    page = build_report(run, tmp_path / "report", n_boot=10).read_text()
    said = re.search(r"training data: (\d+) table cell\(s\) marked \u2020", page)
    assert said is not None
    # each marked cell: its value, the dagger, then its interval (or why it has none)
    cells = re.findall(r"<td>([0-9.]+)\u2020 \[[^]]+\]</td>", html_text.unescape(page))
    assert int(said.group(1)) == len(cells) >= 1
    assert "n (cases / targets): " in page
