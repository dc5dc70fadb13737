"""The CPU proxy's calibration from a card run's figures (benchmarks/proxy_calibration.py)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from intrabench import registry
from intrabench.config import parse_config

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import proxy_calibration  # noqa: E402

calibration_entry, card_figures = (
    proxy_calibration.calibration_entry,
    proxy_calibration.card_figures,
)
card_of, entry_text = proxy_calibration.card_of, proxy_calibration.entry_text
per_model_ms, read_calibration = proxy_calibration.per_model_ms, proxy_calibration.read_calibration

MODELS = [
    ("sam-med3d(device=cuda,weights=random)", "sam-med3d"),
    ("segvol(device=cuda,weights=random)", "segvol"),
]


def _card_result() -> dict:
    """bench_gpu_run.measure's result of a made-up card run (seconds)."""
    return {
        "wall": 100.0,
        "before": 6.0,
        "after": 0.5,
        "model": 70.0,
        "model_steady": 0.75,
        "per_model": {MODELS[0][0]: (68, 20.4), MODELS[1][0]: (17, 49.6)},
        "loop_phases": {"forward passes": 70.0, "model set_case": 1.234, "untracked": 0.1},
    }


def test_a_card_run_gives_its_figures_by_model_name():
    figures = card_figures(_card_result(), MODELS, "NVIDIA H200", "gpu-3d-refine.yaml")
    assert figures["card"] == "NVIDIA H200"
    assert figures["forward_by_model"] == {"sam-med3d": 20.4, "segvol": 49.6}
    assert figures["steps_by_model"] == {"sam-med3d": 68, "segvol": 17}
    assert figures["start"] == 6.0 and figures["forward"] == 70.0
    assert figures["between"] == pytest.approx(100.0 - 6.0 - 0.5 - 70.0)  # 23.5
    assert figures["model_whole"] == pytest.approx(0.70)


def test_two_entries_of_one_model_add_up_under_its_name():
    result = _card_result()
    result["per_model"] = {"sam-med3d": (10, 1.5), "sam-med3d(variant=turbo)": (6, 0.5)}
    figures = card_figures(
        result, [("sam-med3d", "sam-med3d"), ("sam-med3d(variant=turbo)", "sam-med3d")], "card", "c"
    )
    assert figures["forward_by_model"] == {"sam-med3d": 2.0}
    assert figures["steps_by_model"] == {"sam-med3d": 16}


def test_the_entry_gives_each_model_its_card_seconds_over_the_proxys_passes():
    figures = card_figures(_card_result(), MODELS, "NVIDIA H200", "gpu-3d-refine.yaml")
    entry = calibration_entry(figures, {"sam-med3d": 68, "segvol": 17})
    # 20.4 s / 68 = 300.0 ms; 49.6 s / 17 = 2917.647... ms, to 0.1 ms
    assert entry["proxy_ms"] == {"sam-med3d": 300.0, "segvol": 2917.6}
    assert entry["card"] == {
        "name": "NVIDIA H200",
        "wall": 100.0,
        "start": 6.0,
        "forward": 70.0,
        "between": 23.5,
        "model_steady": 0.75,
        "model_whole": 0.7,
        "phases": {"forward passes": 70.0, "model set_case": 1.23, "untracked": 0.1},
    }
    # the proxy then runs each stand-in at its model's time
    assert per_model_ms(entry["proxy_ms"], MODELS) == {MODELS[0][0]: 300.0, MODELS[1][0]: 2917.6}


def test_the_printed_entry_reads_back_as_the_calibration_file(tmp_path):
    figures = card_figures(_card_result(), MODELS, "NVIDIA H200", "gpu-3d-refine.yaml")
    entry = calibration_entry(figures, {"sam-med3d": 68, "segvol": 17})
    text = entry_text("gpu-3d-refine.yaml", entry, "NVIDIA H200: gpu-3d-refine.json")
    assert text.splitlines()[1] == "  # NVIDIA H200: gpu-3d-refine.json"
    assert yaml.safe_load(text) == {"gpu-3d-refine.yaml": entry}
    table = tmp_path / "calibration.yaml"
    table.write_text("# header\n" + text)
    read = read_calibration(Path("benchmarks/configs/gpu-3d-refine.yaml"), table)
    assert read == entry
    assert card_of(read) == ("NVIDIA H200", entry["card"])


def test_the_repositorys_calibration_names_its_card():
    for config in ("gpu-2d-refine.yaml", "gpu-3d-refine.yaml"):
        name, card = card_of(read_calibration(Path(config)))
        assert name == "NVIDIA H100 80GB"
        assert 0 < card["model_steady"] <= 1 and card["forward"] < card["wall"]
    # entries written before the card had a name
    assert card_of({"h100": {"wall": 1.0}}) == ("H100", {"wall": 1.0})
    assert card_of({"proxy_ms": 3}) == ("", {})


@pytest.mark.parametrize("passes", [{"sam-med3d": 68}, {"sam-med3d": 68, "segvol": 0}])
def test_a_model_the_proxy_never_ran_is_one_line(passes):
    figures = card_figures(_card_result(), MODELS, "card", "c")
    with pytest.raises(ValueError, match="made no forward pass of segvol"):
        calibration_entry(figures, passes)


@pytest.mark.parametrize(
    "value", [math.nan, math.inf, 1e400, -1.0, "12", True, None, {"s": 1.0}, [1.0]]
)
@pytest.mark.parametrize("where", ["between", "a phase"])
def test_a_card_figure_that_is_no_finite_number_is_one_line(value, where):
    figures = card_figures(_card_result(), MODELS, "card", "c")
    if where == "between":
        figures["between"] = value
    else:
        figures["phases"]["model set_case"] = value
    name = "between" if where == "between" else "phases.model set_case"
    with pytest.raises(ValueError, match=f"figure {name} must be a finite number") as raised:
        calibration_entry(figures, {"sam-med3d": 68, "segvol": 17})
    assert "\n" not in str(raised.value)


def test_phases_that_are_no_table_are_one_line():
    figures = card_figures(_card_result(), MODELS, "card", "c")
    figures["phases"] = [1, 2]
    with pytest.raises(ValueError, match="phases must be a mapping"):
        calibration_entry(figures, {"sam-med3d": 68, "segvol": 17})


def test_figures_without_forward_seconds_are_one_line():
    with pytest.raises(ValueError, match="no forward seconds per model"):
        calibration_entry({"card": "x"}, {"sam-med3d": 1})


@pytest.mark.parametrize(
    "table",
    [
        "fast",
        -3,
        math.nan,
        math.inf,
        1e400,
        True,
        [1],
        {"sam-med3d": {"ms": 3}, "segvol": 1},
        "x" * 10_000,
    ],
)
def test_a_proxy_time_that_is_no_duration_is_one_line(table):
    with pytest.raises(ValueError, match="proxy_ms must be a number of milliseconds") as raised:
        per_model_ms(table, MODELS)
    assert "\n" not in str(raised.value) and len(str(raised.value)) < 200


def test_a_model_without_a_proxy_time_is_named():
    with pytest.raises(ValueError, match="proxy_ms has no time for segvol"):
        per_model_ms({"sam-med3d": 300}, MODELS)


@pytest.mark.parametrize("text", ["[1, 2]", "gpu-3d-refine.yaml: 5"])
def test_a_calibration_file_that_is_no_table_is_one_line(tmp_path, text):
    table = tmp_path / "calibration.yaml"
    table.write_text(text)
    with pytest.raises(ValueError, match="not a mapping"):
        read_calibration(Path("gpu-3d-refine.yaml"), table)


def test_the_stand_ins_count_their_passes_by_the_model_they_stand_for(tmp_path):
    """The proxy's passes per model, which the card's seconds are divided by: one per target
    for a 3D model's single click, one per prompted slice for a 2D model (its boxes on each
    slice of a target, and the one slice of its centre click)."""
    from bench_gpu_run import measure, stand_in_config

    config = parse_config(
        {
            "name": "count",
            "datasets": [{"name": "demo-phantoms", "n_cases": 1}],
            "models": [
                {"name": "sam-med3d", "weights": "random"},
                {"name": "sam", "weights": "random"},
            ],
            "prompters": ["center-points-per-volume", "box-per-slice"],
        }
    )
    dataset = registry.datasets.create("demo-phantoms", {"n_cases": 1})
    case = dataset.load(dataset.case_ids()[0])
    slices = sum(
        int(np.any(case.label == target.label_value, axis=(1, 2)).sum()) for target in case.targets
    )
    result = measure(stand_in_config(config, 0.0, set_up=False), {"background": "inline"})
    assert slices == 7 + 5 + 6  # lesions on slices 18-24, 23-27 and 4-9
    assert result["forwards_by_model"] == {
        "sam-med3d": len(case.targets),
        "sam": slices + len(case.targets),
    }
    # the loop's phases go into a card run's figures; 3 + 21 passes timed by the loop clock
    assert {"forward passes", "model set_case", "untracked"} <= set(result["loop_phases"])
    figures = card_figures(result, [(spec.key, spec.name) for spec in config.models], "c", "c")
    assert figures["phases"] == result["loop_phases"]


def test_a_run_without_rows_is_one_line_not_a_traceback(tmp_path):
    """A proxy whose real model cannot be built (its checkpoint is missing) gives no rows:
    bench_gpu_run says why in one line instead of failing on the empty table."""
    from bench_gpu_run import NoRows, measure, stand_in_config

    config = parse_config(
        {
            "name": "no-rows",
            "datasets": [{"name": "demo-phantoms", "n_cases": 1}],
            "models": [{"name": "sam-med3d", "checkpoint_dir": str(tmp_path)}],
            "prompters": ["center-points-per-volume"],
        }
    )
    with pytest.raises(NoRows, match="checkpoint for sam-med3d not found"):
        measure(stand_in_config(config, 0.0), {"background": "inline"})


@pytest.mark.parametrize("seconds", [math.nan, -2.0, "fast", {"s": 1}, [3.0], None])
def test_a_models_card_seconds_that_are_no_duration_are_one_line(seconds):
    figures = card_figures(_card_result(), MODELS, "card", "c")
    figures["forward_by_model"]["segvol"] = seconds
    with pytest.raises(ValueError, match="figure segvol must be a finite number") as raised:
        calibration_entry(figures, {"sam-med3d": 68, "segvol": 17})
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    "text",
    [
        "not json {",
        "[1, 2]",
        "null",
        '"a string"',
        '{"forward_by_model": {"sam-med3d": 1.0}}',  # not the configuration's models
        '{"forward_by_model": [1, 2]}',
        '{"forward_by_model": {"a": {"b": {"c": 1}}}}',
        '{"forward_by_model": {"' + "x" * 100_000 + '": 1}}',
    ],
)
def test_a_card_figures_file_that_is_garbage_is_refused_in_one_line(
    tmp_path, capsys, monkeypatch, text
):
    """bench_gpu_run --calibrate-from reads a file the card run wrote: garbage in it stops the
    command with one line (argparse's exit 2), before any run."""
    from bench_gpu_run import main

    figures = tmp_path / "figures.json"
    figures.write_text(text)
    config = Path(__file__).resolve().parents[2] / "benchmarks/configs/gpu-3d-refine.yaml"
    monkeypatch.setattr(
        sys,
        "argv",
        ["bench_gpu_run.py", "--proxy-of", str(config), "--calibrate-from", str(figures)],
    )
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("bench_gpu_run.py: error: --calibrate-from")
    assert len(error) < 600
