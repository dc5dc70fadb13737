"""Tables, HTML report and run comparison on a tiny real run (the demo, narrowed)."""

from __future__ import annotations

import base64
import json
import re

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from intrabench.cli import main
from intrabench.config import RunConfig
from intrabench.evaluation.aggregate import per_dataset
from intrabench.io.results import load_results
from intrabench.reports.compare import compare_runs
from intrabench.reports.tables import Layout, build_table, to_latex


def test_results_store_schema_and_metadata(tiny_run):
    rows = load_results(tiny_run)
    csv = pd.read_csv(tiny_run / "results.csv")
    assert len(rows) == len(csv) > 0
    for column in (
        "dice",
        "iou",
        "nsd",
        "hd95",
        "nsd_tolerance_mm",
        "cumulative_effort",
        "model_seconds",
        "target_class",
        "effort_label",
    ):
        assert column in rows and column in csv
    assert set(rows["step"]) == {0, 1, 2}
    assert (rows["nsd_tolerance_mm"] == 2.0).all()
    assert rows["dice"].between(0, 1).all() and rows["nsd"].between(0, 1).all()
    metadata = pq.read_schema(tiny_run / "results.parquet").metadata
    config = yaml.safe_load(metadata[b"intrabench.config"])
    assert config["name"] == "tiny"
    assert "numpy" in json.loads(metadata[b"intrabench.run"])["versions"]


def test_tables_command_on_a_real_run(tiny_run, tmp_path, capsys):
    out = tmp_path / "tables"
    assert main(["tables", str(tiny_run), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| Iterations | Prompter | Model | Interactions | phantoms | Average |" in printed
    # one configuration: no comparison table, but its rank, per-class and per-target tables
    assert {p.name for p in out.iterdir()} == {
        "refinement.md",
        "refinement.tex",
        "refinement.csv",
        "statistics.csv",
        "time.md",
        "time.csv",
        "latency.md",
        "latency.csv",
        "ranks.md",
        "ranks.tex",
        "ranks.csv",
        "per-class.md",
        "per-class.tex",
        "per-class.csv",
        "per-target.tex",
        "per-target.csv",
    }
    statistics = pd.read_csv(out / "statistics.csv")
    assert len(statistics) == 3  # one per step
    # the tiny run has fewer cases than an interval needs (5): none, and the file says why
    assert statistics["ci_low"].isna().all() and statistics["ci_high"].isna().all()
    assert set(statistics["ci_note"]) == {"n too small (at least 5 cases)"}
    table = pd.read_csv(out / "refinement.csv")
    assert list(table["Iterations"]) == [0, 1, 2]
    assert set(table["Interactions"]) == {"3/3"}
    rows = load_results(tiny_run)
    expected = per_dataset(rows).sort_values("step")["dice"].to_numpy() * 100
    np.testing.assert_allclose(table["phantoms"], expected, atol=1e-4)
    np.testing.assert_allclose(table["Average"], table["phantoms"])
    latex = (out / "refinement.tex").read_text()
    assert r"\begin{tabular}{rlllrr}" in latex or r"\begin{tabular}{llllrr}" in latex
    assert "box-3d + scribble Refine" in latex


def test_layout_renames_and_merges_columns(tiny_run, tmp_path):
    rows = load_results(tiny_run)
    extra = rows.assign(dataset="other", dice=0.5)
    layout = Layout(
        columns={"D1": ["phantoms", "other"]},
        models={"region-growing-3d": "RG 3D"},
        prompters={"box-3d": "3D Box"},
        refiners={"scribble": "Scribble"},
    )
    table = build_table(pd.concat([rows, extra]), layout, iterations=False)
    assert list(table.columns) == ["Prompter", "Model", "Interactions", "D1", "Average"]
    assert (
        table.loc[0, "Prompter"] == "3D Box + Scribble Refine" and table.loc[0, "Model"] == "RG 3D"
    )
    final = rows[rows["step"] == rows["step"].max()]
    phantoms = per_dataset(final)["dice"].iloc[0]
    # classes phantoms/<class> and other/<class> are averaged as classes of one dataset
    assert table.loc[0, "D1"] == pytest.approx(100 * (phantoms + 0.5) / 2)


def test_latex_escaping():
    table = pd.DataFrame({"Prompter": ["5P_Inter & 10%"], "D1": [12.345]})
    latex = to_latex(table)
    assert r"5P\_Inter \& 10\%" in latex and "12.35" in latex


def test_report_has_its_parts(tiny_run, tmp_path):
    out = tmp_path / "report"
    assert main(["report", str(tiny_run), "--out", str(out)]) == 0
    page = (out / "report.html").read_text()
    for heading in (
        "How to read this page",
        "Summary",
        "Figures",
        "Per-case results",
        "Failure gallery: the worst targets per model",
        "Run details",
    ):
        assert f"<h2>{heading}</h2>" in page
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) >= 4  # iteration curve, effort curve, dataset bars, >= 1 overlay
    assert all(base64.b64decode(i)[:8] == b"\x89PNG\r\n\x1a\n" for i in images)
    assert "http://" not in page and "https://" not in page  # self-contained
    pngs = {p.name for p in out.glob("*.png")}
    assert {"dice-vs-iteration.png", "dice-vs-effort.png", "dice-per-dataset.png"} <= pngs
    assert any(name.startswith("overlay-") for name in pngs)
    # the per-case table lists every case with its final Dice
    rows = load_results(tiny_run)
    # the header counts targets as targets, episodes apart (#51 item 4: "72 segmented targets"
    # for 8 targets)
    targets = len(rows[["dataset", "case", "target"]].drop_duplicates())
    episodes = len(
        rows[
            ["dataset", "case", "target", "model", "prompter", "refiner", "seed"]
        ].drop_duplicates()
    )
    assert (
        f"{targets} targets in {rows['case'].nunique()} images, segmented in {episodes} episodes"
    ) in page
    for case in rows["case"].unique():
        assert f"<td>{case}</td>" in page
    assert "final dice" in page
    assert "<h3>Per configuration</h3>" in page and "Dice AUC (norm.)" in page


def test_report_without_predictions_says_so(tiny_run_without_predictions, tmp_path):
    path = tmp_path / "r"
    assert main(["report", str(tiny_run_without_predictions), "--out", str(path)]) == 0
    page = (path / "report.html").read_text()
    assert "did not save its predictions" in page
    assert "<h2>Per-case results</h2>" in page


def test_compare_paired_differences(tiny_run, tmp_path, capsys):
    rows = load_results(tiny_run)
    better = rows.assign(dice=(rows["dice"] + 0.1).clip(upper=1.0))
    summary, per_case = compare_runs(rows, better, n_boot=500)
    assert len(summary) == 1
    line = summary.iloc[0]
    assert line["B - A"] == pytest.approx(line["B"] - line["A"])
    assert 0 < line["ci_low"] <= line["B - A"] <= line["ci_high"] <= 0.1 + 1e-12
    assert len(per_case) == rows["case"].nunique()
    assert (
        main(
            [
                "compare",
                str(tiny_run),
                str(tiny_run),
                "--out",
                str(tmp_path / "c"),
                "--n-boot",
                "200",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out  # the comparison table of tables, x100 (#70 item 4)
    assert "| Dataset | A | B | A x100 | B x100 | B - A x100 | 95% CI |" in printed
    assert "n too small (at least 5)" in printed  # 2 cases: no interval
    same = pd.read_csv(tmp_path / "c" / "compare-summary.csv")
    assert (same["B - A x100"] == 0).all() and same["ci_low"].isna().all()


def test_paper_configs_parse():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "configs" / "paper"
    configs = sorted(p for p in root.glob("*.yaml") if p.name != "tables.yaml")
    assert len(configs) >= 5
    names = set()
    for path in configs:
        config = RunConfig.model_validate(yaml.safe_load(path.read_text()))
        names.add(config.name)
    layout = Layout.load(root / "tables.yaml")
    assert [t.key for t in layout.tables] == ["table2", "table3", "table4", "table5", "table6"]
    assert {run for t in layout.tables for run in t.runs} <= names
    assert list(layout.columns) == [f"D{i}" for i in range(1, 11)]


@pytest.mark.slow
def test_full_builtin_demo_tables_and_report(tmp_path, capsys):
    from intrabench.config import builtin_demo_path, load_config
    from intrabench.execution.runner import Runner

    config = load_config(builtin_demo_path())
    Runner(config, tmp_path / "demo").run()
    assert main(["tables", str(tmp_path / "demo"), "--out", str(tmp_path / "t")]) == 0
    table = pd.read_csv(tmp_path / "t" / "refinement.csv")
    rows = load_results(tmp_path / "demo")
    # the refinement table: a row per refined configuration and step (steps 0-3); LiteMedSAM
    # (boxes only, no refiner it accepts) runs step 0 only, in the initial table
    steps = rows.groupby(["model", "prompter", "refiner"])["step"].nunique()
    refined = steps.index.get_level_values("refiner") != "none"
    assert (steps[refined] == config.refinement_steps + 1).all() and (steps[~refined] == 1).all()
    assert len(table) == steps[refined].sum() == 8 * 4
    assert set(table["Model"]) == {"random-walker-2d", "region-growing-3d"}
    initial = pd.read_csv(tmp_path / "t" / "initial.csv")
    assert len(initial[initial["Model"] == "litemedsam"]) == (~refined).sum() == 4
    assert (
        table[
            [
                c
                for c in table.columns
                if c not in ("Iterations", "Prompter", "Model", "Interactions")
            ]
        ]
        .notna()
        .all()
        .all()
    )
    assert main(["report", str(tmp_path / "demo")]) == 0
    page = (tmp_path / "demo" / "report" / "report.html").read_text()
    assert "<h2>Which targets are hard, for which model</h2>" in page
    capsys.readouterr()
    assert main(["attributes", str(tmp_path / "demo"), "--n-boot", "100"]) == 0
    printed = capsys.readouterr().out
    for model in ("random-walker-2d", "region-growing-3d"):
        assert f"| {model} | volume_ml | ml |" in printed


def test_paper_layout_builds_table5_from_named_runs(tiny_run):
    from pathlib import Path

    from intrabench.reports.tables import tables_for_runs

    rows = load_results(tiny_run).assign(run="paper-table5-pps")
    liver = rows.assign(dataset="hcc-tace-liver", target_class="liver")
    lesion = rows.assign(dataset="hcc-tace-lesion", dice=rows["dice"] / 2)
    ms = rows.assign(dataset="ms-lesions")
    unrelated = rows.assign(run="some-other-run")
    layout = Layout.load(Path(__file__).resolve().parents[2] / "configs" / "paper" / "tables.yaml")
    built = tables_for_runs(pd.concat([liver, lesion, ms, unrelated]), layout)
    assert [name for name, _, _ in built] == ["table5"]
    table = built[0][2]
    assert list(table.columns) == [
        "Iterations",
        "Prompter",
        "Model",
        "Interactions",
        "D1",
        "D8",
        "Average",
    ]
    d1 = table["D1"].to_numpy()
    # D8 = mean of the liver class (= D1 values) and the lesion class (half of them)
    np.testing.assert_allclose(table["D8"], 0.75 * d1)
    np.testing.assert_allclose(table["Average"], (d1 + 0.75 * d1) / 2)


@pytest.mark.parametrize(
    "text, message",
    [
        ("kind: [\n", r"line 2 invalid YAML"),  # was a traceback
        (
            "name: x\ndatasets: [demo-phantoms]\nmodels: [a, b]\n",
            r"models: Input should be a valid dictionary \(this looks like a run config; --layout "
            r"takes a table layout\)",
        ),  # was a ValueError traceback
        ("columns: {D1: 5}\n", r"columns\.D1: Input should be a valid list"),
        ("tables: {t1: {runs: r}}\n", r"tables\.t1\.runs: Input should be a valid list"),
        (
            "rows: {}\n",
            r"rows: not a key of a table layout \(columns, models, prompters, refiners, "
            r"tables\)",
        ),
    ],
)
def test_a_file_that_is_no_table_layout_is_one_line(tiny_run, tmp_path, capsys, text, message):
    layout = tmp_path / "layout.yaml"
    layout.write_text(text)
    assert (
        main(["tables", str(tiny_run), "--layout", str(layout), "--out", str(tmp_path / "t")]) == 2
    )
    err = capsys.readouterr().err
    assert re.search(re.escape(str(layout)) + ": " + message, err) and "Traceback" not in err
    # a single dataset key is still a column of one key
    layout.write_text("columns: {Phantoms: demo-phantoms}\n")
    assert Layout.load(layout).columns == {"Phantoms": ["demo-phantoms"]}


@pytest.mark.parametrize(
    "command",
    [
        ["tables", "{run}", "--scale", "-1"],
        ["tables", "{run}", "--scale", "nan"],
        ["report", "{run}", "--max-overlays", "-1"],
        ["compare", "{run}", "{run}", "--n-boot", "0"],  # was a TypeError
        ["compare", "{run}", "{run}", "--seed", "-1"],  # was a ValueError
        ["compare", "{run}", "{run}", "--n-boot", "100000000"],  # ran for minutes
        ["attributes", "{run}", "--n-boot", "0"],
        ["review", "build", "{run}", "--seed", "-1"],
    ],
)
def test_numbers_no_command_can_use_are_usage_errors(tiny_run, capsys, command):
    with pytest.raises(SystemExit) as raised:
        main([part.replace("{run}", str(tiny_run)) for part in command])
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert re.search(r"error: argument --[a-z-]+: must be", err) and "Traceback" not in err


def test_report_names_a_case_the_run_does_not_have(tiny_run, tmp_path, capsys):
    """The report was written without it and without a word."""
    with pytest.raises(Exception, match=r"--case nothere: not a case of .* \(its cases: "):
        from intrabench.commands.reports import _check_cases

        _check_cases(str(tiny_run), ["nothere"])
    assert (
        main(["report", str(tiny_run), "--case", "nothere", "--out", str(tmp_path / "report")]) == 2
    )
    assert "--case nothere: not a case of" in capsys.readouterr().err
    assert not (tmp_path / "report").exists()
