"""Names from a user's data that would mislead where they are shown (#65 item 9): two long case
names stay two prediction files, reports do not fail on long names, a right-to-left override is
shown escaped on the terminal, in the HTML report and in tables, and text a spreadsheet would
run as a formula is quoted in CSVs (Parquet keeps every name exact)."""

from __future__ import annotations

import pandas as pd
import pytest

from intrabench.cli import main
from intrabench.display_text import escaped, spreadsheet_safe
from intrabench.evaluation.aggregate import to_markdown
from intrabench.reports.tables import to_latex
from tests.run_experience.test_names_as_paths import _folder_dataset

RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE: 'evil' after it reads 'live'
LONG_A, LONG_B = "c" * 280 + "A", "c" * 280 + "B"  # the same first 280 characters
MODEL = "=" + "m" * 200  # a formula in a spreadsheet, and a long name in every file name


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    """A run of two cases with long names, a dataset whose spec file name holds a right-to-left
    override, a target class that is a formula, a model label that is one too; predictions
    saved; its run folder, the run's terminal output and the report's exit status."""
    folder = tmp_path_factory.mktemp("hostile")
    spec = _folder_dataset(folder, [LONG_A, LONG_B], classes="{'=1+2': 1}")
    spec = spec.rename(folder / f"{RLO}evil.yaml")
    # no name of its own: the dataset is named after its spec file, RLO and all
    spec.write_text(spec.read_text().replace("name: mine\n", ""))
    config = folder / "run.yaml"
    config.write_text(
        f"name: hostile\nsave_predictions: true\n"
        f"datasets: [{{name: folder, spec: '{spec.name}'}}]\n"
        f"models: [{{name: region-growing-3d, label: '{MODEL}'}}]\n"
        "prompters: [box-3d]\n"
    )
    out = folder / "run"
    import contextlib
    import io

    terminal = io.StringIO()
    with contextlib.redirect_stdout(terminal):
        assert main(["run", str(config), "--out", str(out)]) == 0
        report = main(["report", str(out)])
        tables = main(["tables", str(out)])
    return out, terminal.getvalue(), report, tables


def test_two_long_case_names_write_two_prediction_files(hostile_run):
    out, _, _, _ = hostile_run
    files = sorted(p for p in (out / "predictions").rglob("*.nii.gz"))
    assert len(files) == 2  # before: one file, the second case overwrote the first
    assert all(len(p.name.encode()) <= 255 - len(".partial.") for p in files)
    assert all(len(part.encode()) <= 255 for p in files for part in p.parts)


def test_report_and_tables_work_on_long_names(hostile_run):
    out, _, report, tables = hostile_run
    assert report == 0 and tables == 0  # before: OSError "File name too long"
    overlays = list((out / "report").glob("overlay-*.png"))
    assert len(overlays) == 2 and all(len(p.name) <= 255 for p in overlays)
    assert len({p.name for p in overlays}) == 2


def test_a_right_to_left_override_is_shown_escaped(hostile_run):
    out, terminal, _, _ = hostile_run
    assert RLO not in terminal and "\\u202eevil.yaml" in terminal  # the run's and tables' table
    page = (out / "report" / "report.html").read_text(encoding="utf-8")
    assert RLO not in page and "\\u202eevil.yaml" in page
    for table in (out / "tables").iterdir():
        assert RLO not in table.read_text(encoding="utf-8"), table.name
    exact = pd.read_parquet(out / "results.parquet")
    assert set(exact["dataset"]) == {f"folder(spec={RLO}evil.yaml)"}  # parquet keeps it exact


def test_formulas_are_quoted_in_csvs_and_exact_in_parquet(hostile_run):
    out, _, _, _ = hostile_run
    exact = pd.read_parquet(out / "results.parquet")
    assert set(exact["model"]) == {MODEL} and set(exact["target"]) == {"=1+2_1"}
    csv = pd.read_csv(out / "results.csv", dtype=str)
    assert set(csv["model"]) == {"'" + MODEL} and set(csv["target"]) == {"'=1+2_1"}
    assert pd.to_numeric(csv["dice"]).equals(exact["dice"].astype(float))
    tables = [pd.read_csv(p, dtype=str) for p in (out / "tables").glob("*.csv")]
    models = [cell for t in tables if "Model" in t for cell in t["Model"]]
    assert models and all(cell == "'" + MODEL for cell in models)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (f"{RLO}evil", "\\u202eevil"),
        ("a\x1b[2Jb", "a\\x1b[2Jb"),
        ("zero\u200bwidth", "zero\\u200bwidth"),
        ("café 中文", "café 中文"),
        ("line\u2028break", "line\\u2028break"),
    ],
)
def test_escaped_shows_hidden_characters_and_keeps_scripts(text, shown):
    assert escaped(text) == shown


def test_tables_escape_names_and_csvs_quote_formulas():
    table = pd.DataFrame(
        {"Model": [f"{RLO}evil", "-2+3", "@SUM(A1)", "plain"], "Dice": [-0.5, 1.0, 2.0, 3.0]}
    )
    assert "\\u202eevil" in to_markdown(table) and RLO not in to_markdown(table)
    assert "\\textbackslash{}u202eevil" in to_latex(table) and RLO not in to_latex(table)
    safe = spreadsheet_safe(table)
    assert safe["Model"].tolist() == [f"{RLO}evil", "'-2+3", "'@SUM(A1)", "plain"]
    assert safe["Dice"].tolist() == [-0.5, 1.0, 2.0, 3.0]  # numbers stay numbers
