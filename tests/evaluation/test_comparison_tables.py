"""The comparison and rank tables that ``intrabench tables`` writes, the report's figures, and
``intrabench compare`` on the same code (issue 70, items 1, 2, 4) on a real run."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
from scipy.stats import wilcoxon

from intrabench.cli import main
from intrabench.evaluation.aggregate import per_dataset
from intrabench.execution.runner import Runner
from intrabench.io.results import load_results
from tests.evaluation.conftest import narrowed_demo


@pytest.fixture(scope="module")
def six_case_run(tmp_path_factory):
    """Region growing on 6 phantoms with two prompters (one pair of configurations)."""
    config = narrowed_demo("six", save_predictions=False, steps=1)
    data = config.model_dump(mode="json")
    data["datasets"][0]["params"]["n_cases"] = 6
    data["prompters"] = [
        {"name": "box-3d"},
        {"name": "center-points-per-volume", "n_points": 1, "label": "click"},
    ]
    from intrabench.config import RunConfig

    run_dir = tmp_path_factory.mktemp("runs") / "six"
    Runner(RunConfig.model_validate(data), run_dir).run()
    return run_dir


def test_tables_writes_the_comparison_and_rank_tables(six_case_run, tmp_path, capsys):
    out = tmp_path / "tables"
    assert main(["tables", str(six_case_run), "--out", str(out), "--n-boot", "300"]) == 0
    printed = capsys.readouterr().out
    assert "## Paired comparisons: 1 pairs x datasets, 1 with a test" in printed
    rows = load_results(six_case_run)
    last = rows.groupby(["model", "prompter", "refiner"])["step"].transform("max")
    final = rows[rows["step"] == last]
    scores = per_dataset(final).set_index("prompter")["dice"] * 100
    numbers = pd.read_csv(out / "comparisons.csv").iloc[0]
    assert numbers["A"] == "region-growing-3d / box-3d / scribble"
    assert numbers["B"] == "region-growing-3d / click / scribble"
    assert numbers["B - A x100"] == pytest.approx(scores["click"] - scores["box-3d"], abs=1e-4)
    assert numbers["n_cases"] == 6
    case = final.groupby(["prompter", "case"])["dice"].mean().unstack(0)
    assert numbers["p"] == pytest.approx(wilcoxon(case["click"] - case["box-3d"]).pvalue, rel=1e-5)
    assert numbers["ci_low"] <= numbers["B - A x100"] <= numbers["ci_high"]
    markdown = (out / "comparisons.md").read_text()
    assert "| Dataset | A | B | A x100 | B x100 | B - A x100 | 95% CI | n cases |" in markdown
    assert "INCOMPLETE" not in markdown
    latex = (out / "comparisons.tex").read_text()
    assert r"\begin{tabular}" in latex and "region-growing-3d / click / scribble" in latex
    ranks = pd.read_csv(out / "ranks.csv")
    assert ranks["rank"].tolist() == [1, 2] and (ranks["n_boot"] == 300).all()
    assert ranks["rank1_share"].sum() == pytest.approx(1.0)
    assert "median rank" in (out / "ranks.md").read_text()
    per_class = pd.read_csv(out / "per-class.csv").set_index("prompter")
    assert per_class.loc["click", "dice x100"] == pytest.approx(scores["click"], abs=1e-4)
    assert per_class.loc["click", "n cases"] == 6
    assert (
        len(pd.read_csv(out / "per-target.csv"))
        == len(rows[["case", "target"]].drop_duplicates()) * 2
    )


def test_an_incomplete_run_is_marked_in_the_files(six_case_run, tmp_path):
    run = tmp_path / "cut"
    shutil.copytree(six_case_run, run)
    record = json.loads((run / "run.json").read_text())
    record["units"] = int(record["units"]) + 1  # one unit planned that never finished
    (run / "run.json").write_text(json.dumps(record))
    out = tmp_path / "tables"
    assert main(["tables", str(run), "--out", str(out), "--n-boot", "50"]) == 0
    for name in ("comparisons.md", "comparisons.tex", "ranks.md", "ranks.tex"):
        assert "INCOMPLETE RUN" in (out / name).read_text(), name
    note = pd.read_csv(out / "comparisons.csv")["note"].iloc[0]
    assert note.startswith("INCOMPLETE RUN") and "1 not run yet" in note
    # the paper-style tables too: the title, the caption and a column of the CSV
    assert (out / "refinement.md").read_text().startswith("**INCOMPLETE RUN")
    assert "INCOMPLETE RUN" in (out / "refinement.tex").read_text()
    refinement = pd.read_csv(out / "refinement.csv")
    assert (refinement["note"] == note).all() and "Model" in refinement


def test_too_few_cases_say_so_with_the_minimum(tiny_run, tmp_path):
    rows = load_results(tiny_run)
    other = rows.assign(model="other", dice=(rows["dice"] * 0.5))
    from intrabench.reports.comparisons import comparison_display, comparison_results

    comparisons, _ = comparison_results(pd.concat([rows, other]), n_boot=50)
    shown = comparison_display(comparisons).iloc[0]
    assert shown["n cases"] == 2
    assert shown["95% CI"] == "n too small (at least 5)"
    assert shown["p (Wilcoxon)"] == "n too small (at least 6)"
    assert shown["r (rank-biserial)"] == "n too small (at least 6)"


def test_report_has_the_significance_matrix_and_rank_plot(six_case_run, tmp_path):
    from intrabench.reports.html import build_report

    path = build_report(six_case_run, tmp_path / "report", n_boot=100, max_overlays=0)
    page = path.read_text()
    assert "<h2>Which configuration is better, and how sure</h2>" in page
    assert "1 comparisons, 1 with enough cases for a Wilcoxon signed-rank test" in page
    for name in ("significance-matrix.png", "rank-stability.png"):
        assert (tmp_path / "report" / name).read_bytes()[:4] == b"\x89PNG"


def test_compare_two_configurations_of_one_run_x100(six_case_run, tmp_path, capsys):
    assert (
        main(
            [
                "compare",
                str(six_case_run),
                "--a",
                "region-growing-3d/box-3d/scribble",
                "--b",
                "region-growing-3d/click/scribble",
                "--n-boot",
                "300",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "A / region-growing-3d / box-3d / scribble" in printed
    line = pd.read_csv(tmp_path / "compare-summary.csv").iloc[0]
    # the same numbers as the comparison table of tables (the same code, same seeds)
    assert main(["tables", str(six_case_run), "--out", str(tmp_path / "t"), "--n-boot", "300"]) == 0
    table = pd.read_csv(tmp_path / "t" / "comparisons.csv").iloc[0]
    for column in ("A x100", "B x100", "B - A x100", "ci_low", "ci_high", "p"):
        assert line[column] == pytest.approx(table[column], rel=1e-5), column
    assert 0 < line["A x100"] <= 100  # x100, as every table (it printed 0-1 before)
    cases = pd.read_csv(tmp_path / "compare-per-case.csv")
    assert len(cases) == 6
    assert cases["B - A x100"].mean() == pytest.approx(line["B - A x100"], rel=1e-5)


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ([], "comparing two configurations of one run needs --a and --b"),
        (["--a", "region-growing-3d/box-3d"], "give both --a and --b"),
        (
            ["--a", "region-growing-3d/box", "--b", "region-growing-3d/click/scribble"],
            "--a region-growing-3d/box: not a configuration",
        ),
    ],
)
def test_compare_refuses_in_one_line(six_case_run, capsys, extra, words):
    assert main(["compare", str(six_case_run), *extra]) == 2
    error = capsys.readouterr().err
    assert words in error and "Traceback" not in error
