"""The runner end to end: demo results, resume, interruption, determinism, bad input."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import SimpleITK as sitk

from intrabench import registry
from intrabench.cli import main
from intrabench.config import RunConfig, builtin_demo_path, load_config, parse_config
from intrabench.engine.episode import run_episode
from intrabench.execution.runner import Runner
from intrabench.interfaces import Model
from intrabench.io.checkpoints import CheckpointError
from intrabench.io.results import measured_columns
from intrabench.io.volume import ImageGeometry, Volume
from intrabench.types import Case, Target


def _measurements(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.drop(columns=measured_columns(frame)).reset_index(drop=True)


def test_box_prompt_on_a_clean_cube_is_perfect():
    image = np.zeros((10, 20, 20), dtype=np.float32)
    label = np.zeros(image.shape, dtype=np.int32)
    image[3:7, 5:12, 6:15] = 100.0
    label[3:7, 5:12, 6:15] = 1
    geometry = ImageGeometry(
        (20, 20, 10), (1.0, 1.0, 2.0), (0.0, 0.0, 0.0), (-1, 0, 0, 0, -1, 0, 0, 0, 1)
    )
    case = Case(
        "hand",
        "cube",
        Volume(image, (2.0, 1.0, 1.0), geometry),
        label,
        (Target("cube", 1, "cube"),),
    )
    model = registry.models.create("region-growing-3d")
    model.set_case(case.image)
    prompter = registry.prompters.create("box-3d")
    [result] = run_episode(case, case.targets[0], model, prompter, "box-3d")
    assert result.prompt.box3d.as_tuple() == (3, 5, 6, 6, 11, 14)
    assert result.metrics["dice"] == 1.0
    assert result.effort == 3


def test_demo_run_resume_and_determinism(tmp_path):
    config = load_config(builtin_demo_path())
    first = Runner(config, tmp_path / "a")
    plan, problems = first.run()
    assert not problems and len(plan.units) > 0
    rows = pd.read_parquet(tmp_path / "a" / "results.parquet")
    assert len(pd.read_csv(tmp_path / "a" / "results.csv")) == len(rows)
    # every configured (model, prompter) pair that is compatible produced rows for all targets;
    # the trained models run on the real cases only, LiteMedSAM without refinement (it takes
    # boxes only), MobileSAM with one prompter and two refiners
    sizes = rows.groupby(["model", "prompter"]).size()
    assert sizes.drop(["litemedsam", "mobilesam"], level=0).nunique() == 1
    assert sizes.loc["litemedsam"].nunique() == 1
    assert sizes.loc["mobilesam"].to_dict() == {"1-point-per-slice": 2 * 4 * 4}
    for trained in ("litemedsam", "mobilesam"):
        assert set(rows.loc[rows.model == trained, "dataset"]) == {"demo-real"}
    assert rows.dice.between(0, 1).all() and rows.dice.mean() > 0.5

    unit_files = sorted((tmp_path / "a" / "units").glob("*.parquet"))
    stamps = {p: p.stat().st_mtime_ns for p in unit_files}
    Runner(config, tmp_path / "a").run()  # resume: nothing is recomputed
    assert {p: p.stat().st_mtime_ns for p in unit_files} == stamps

    Runner(config, tmp_path / "b").run()  # same config and seed: same rows
    again = pd.read_parquet(tmp_path / "b" / "results.parquet")
    pd.testing.assert_frame_equal(_measurements(rows), _measurements(again))


class _Interrupting(Model):
    """Region growing that raises KeyboardInterrupt on the n-th call (simulates Ctrl-C)."""

    name = "test-interrupting"
    dimension = 3
    accepts = frozenset({"point", "box3d", "mask"})
    calls = 0

    def __init__(self, interrupt_at: int = 0) -> None:
        self.inner = registry.models.create("region-growing-3d")
        self.interrupt_at = interrupt_at

    def set_case(self, image):
        self.inner.set_case(image)

    def predict(self, prompt, previous=None, update_slices=None):
        type(self).calls += 1
        if self.interrupt_at and type(self).calls == self.interrupt_at:
            raise KeyboardInterrupt
        return self.inner.predict(prompt, previous, update_slices)


registry.models.register(_Interrupting)


def test_interrupted_run_loses_nothing_and_resumes_to_the_same_rows(tmp_path):
    spec = {
        "name": "interrupt",
        "datasets": [{"name": "demo-phantoms", "n_cases": 4}],
        "prompters": ["box-3d"],
    }
    interrupted = parse_config(
        {**spec, "models": [{"name": "test-interrupting", "interrupt_at": 7, "label": "m"}]}
    )
    _Interrupting.calls = 0
    with pytest.raises(KeyboardInterrupt):
        Runner(interrupted, tmp_path / "run").run()
    done = list((tmp_path / "run" / "units").glob("*.parquet"))
    assert 0 < len(done) < 4
    assert not list((tmp_path / "run" / "units").glob(".*partial"))
    finished = {p: p.read_bytes() for p in done}

    resumed = parse_config({**spec, "models": [{"name": "test-interrupting", "label": "m"}]})
    _Interrupting.calls = 0
    Runner(resumed, tmp_path / "run", extend=True).run()
    assert all(p.read_bytes() == content for p, content in finished.items())
    assert (
        _Interrupting.calls
        == sum(  # only the unfinished cases were recomputed
            len(c.targets)
            for c in (
                registry.datasets.create("demo-phantoms", {"n_cases": 4}).load(i)
                for i in ["phantom_000", "phantom_001", "phantom_002", "phantom_003"][len(done) :]
            )
        )
    )
    Runner(resumed, tmp_path / "fresh").run()
    pd.testing.assert_frame_equal(
        _measurements(pd.read_parquet(tmp_path / "run" / "results.parquet")),
        _measurements(pd.read_parquet(tmp_path / "fresh" / "results.parquet")),
    )


# -- bad input through the CLI: one line, non-zero exit, nothing damaged -----------------------


def _own_dataset(
    root: Path, image: np.ndarray, label: np.ndarray, label_spacing=(1.0, 1.0, 1.0)
) -> Path:
    (root / "imagesTr").mkdir(parents=True)
    (root / "labelsTr").mkdir()
    sitk.WriteImage(sitk.GetImageFromArray(image), str(root / "imagesTr" / "c1_0000.nii.gz"))
    label_image = sitk.GetImageFromArray(label)
    label_image.SetSpacing(label_spacing)
    sitk.WriteImage(label_image, str(root / "labelsTr" / "c1.nii.gz"))
    (root / "dataset.json").write_text(json.dumps({"labels": {"background": 0, "lesion": 1}}))
    return root


def _run_cli(tmp_path: Path, dataset_root: Path, capsys) -> tuple[int, str]:
    config = tmp_path / "own.yaml"
    config.write_text(
        json.dumps(
            {
                "name": "own",
                "datasets": [{"name": "nnunet-folder", "path": str(dataset_root)}],
                "models": ["region-growing-3d"],
                "prompters": ["box-3d"],
            }
        )
    )
    code = main(["run", str(config), "--out", str(tmp_path / "out")])
    return code, capsys.readouterr().err


GOOD_LABEL = np.zeros((6, 8, 8), dtype=np.uint8)
GOOD_LABEL[2:4, 2:5, 2:5] = 1


@pytest.mark.parametrize(
    ("image", "label", "spacing", "message"),
    [
        (np.full((6, 8, 8), np.nan, np.float32), GOOD_LABEL, (1.0, 1.0, 1.0), "NaN or infinite"),
        (
            np.zeros((6, 8, 8), np.float32),
            np.zeros((6, 8, 8), np.uint8),
            (1.0, 1.0, 1.0),
            "label is empty",
        ),
        (np.zeros((6, 8, 8), np.float32), GOOD_LABEL, (2.0, 1.0, 1.0), "does not match image grid"),
    ],
)
def test_bad_cases_are_named_and_fail_the_run(tmp_path, capsys, image, label, spacing, message):
    root = _own_dataset(tmp_path / "data", image, label, spacing)
    code, err = _run_cli(tmp_path, root, capsys)
    assert code == 1
    assert message in err and "c1" in err
    assert "Traceback" not in err


def test_work_skipped_for_a_bad_case_is_kept_in_the_run_folder_and_named_later(tmp_path, capsys):
    """The problems of a run were printed at its end and nowhere else: `tables` later called
    the run interrupted. problems.csv keeps them (once per case in the run's own output)."""
    root = _own_dataset(tmp_path / "data", np.zeros((6, 8, 8), np.float32), GOOD_LABEL)
    image = np.zeros((6, 8, 8), np.float32)
    image[0, 0, 0] = np.nan
    sitk.WriteImage(sitk.GetImageFromArray(image), str(root / "imagesTr" / "c2_0000.nii.gz"))
    sitk.WriteImage(sitk.GetImageFromArray(GOOD_LABEL), str(root / "labelsTr" / "c2.nii.gz"))
    config = tmp_path / "own.yaml"
    config.write_text(
        json.dumps(
            {
                "name": "own",
                "datasets": [{"name": "nnunet-folder", "path": str(root)}],
                "models": ["region-growing-3d", "random-walker-3d"],
                "prompters": ["box-3d", "center-points-per-volume"],
            }
        )
    )
    out = tmp_path / "out"
    assert main(["run", str(config), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.count("c2: skipped: ") == 1 and "1 problem(s)" in err
    problems = pd.read_csv(out / "problems.csv")
    assert problems[["case", "model", "units"]].values.tolist() == [
        ["c2", "region-growing-3d", 2],
        ["c2", "random-walker-3d", 2],
    ]
    assert (
        problems["problem"]
        .str.endswith("1 voxels are NaN or infinite; clean the image before benchmarking")
        .all()
    )
    assert main(["tables", str(out), "--out", str(tmp_path / "tables")]) == 0
    assert (
        f"is incomplete: 4 of 8 work units finished; 4 skipped for a problem with their "
        f"case or model (see {out / 'problems.csv'}). What follows covers only the finished "
        "ones; fix what they name, then re-run the same command."
    ) in capsys.readouterr().err
    # fixed: the same command runs the skipped units and empties the list
    sitk.WriteImage(
        sitk.GetImageFromArray(np.zeros((6, 8, 8), np.float32)),
        str(root / "imagesTr" / "c2_0000.nii.gz"),
    )
    assert main(["run", str(config), "--out", str(out)]) == 0
    assert pd.read_csv(out / "problems.csv").empty
    assert main(["tables", str(out), "--out", str(tmp_path / "tables")]) == 0
    assert "incomplete" not in capsys.readouterr().err


def test_report_of_a_run_with_no_rows_says_so(tmp_path, capsys):
    root = _own_dataset(tmp_path / "data", np.full((6, 8, 8), np.nan, np.float32), GOOD_LABEL)
    assert _run_cli(tmp_path, root, capsys)[0] == 1
    assert main(["report", str(tmp_path / "out"), "--out", str(tmp_path / "report")]) == 1
    err = capsys.readouterr().err
    assert "0 of 1 work units finished; 1 skipped for a problem" in err
    assert f"no result rows in {tmp_path / 'out'}: nothing finished, no report to build" in err


def test_missing_image_and_config_errors_exit_2(tmp_path, capsys):
    root = _own_dataset(tmp_path / "data", np.zeros((6, 8, 8), np.float32), GOOD_LABEL)
    (root / "imagesTr" / "c1_0000.nii.gz").unlink()
    code, err = _run_cli(tmp_path, root, capsys)
    assert code == 1 and "image not found" in err
    assert main(["run", str(tmp_path / "missing.yaml")]) == 2
    assert "config file not found" in capsys.readouterr().err


@pytest.mark.parametrize(
    "options, message",
    [
        (["--gpus", "0"], "--gpus: only used with --executor dask"),
        (
            ["--workers", "4", "--memory-limit", "8GB"],
            "--workers, --memory-limit: only used with --executor dask",
        ),
        (
            ["--executor", "dask", "--workers-per-gpu", "2"],
            "--workers-per-gpu: only used with --gpus",
        ),
    ],
)
def test_executor_options_that_would_be_ignored_are_errors(tmp_path, capsys, options, message):
    assert main(["run", "--out", str(tmp_path / "run"), *options]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()  # refused before anything ran


def test_unwritable_output_directory(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("I am a file, not a directory")
    code = main(["run", "--out", str(blocker / "run")])
    assert code == 2
    assert "not writable" in capsys.readouterr().err
    assert blocker.read_text() == "I am a file, not a directory"


def test_an_unusable_model_is_reported_once_and_the_others_still_run(tmp_path, capsys):
    config = tmp_path / "missing-checkpoint.yaml"
    config.write_text(
        json.dumps(
            {
                "name": "missing",
                "datasets": [{"name": "demo-phantoms", "n_cases": 2}],
                "models": [
                    {"name": "sam", "checkpoint_dir": str(tmp_path / "empty")},
                    "region-growing-3d",
                ],
                "prompters": ["box-3d"],
            }
        )
    )
    code = main(["run", str(config), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("model 'sam(checkpoint_dir=") == 1 and "sam_vit_h_4b8939.pth" in err
    rows = pd.read_csv(tmp_path / "out" / "results.csv")
    assert set(rows.model) == {"region-growing-3d"} and len(rows) > 0


def test_unit_keys_name_every_metric_setting():
    """A changed NSD tolerance or protocol is a different unit, never a stale row; with the
    defaults the key is what it was before these settings entered it (old runs resume)."""
    import hashlib
    import json
    from dataclasses import replace

    from intrabench.config import ComponentSpec, DatasetSpec
    from intrabench.engine.plan import WorkUnit

    unit = WorkUnit(
        dataset=DatasetSpec(name="demo-phantoms"),
        case_id="c1",
        model=ComponentSpec(name="m"),
        prompter=ComponentSpec(name="p"),
        refiner=ComponentSpec(name="r"),
        seed=0,
        steps=5,
        keep_previous_prompts=True,
    )
    before = json.dumps(["demo-phantoms", "c1", "m", "p", "r", 0, 5, True], sort_keys=True)
    assert unit.key == hashlib.sha256(before.encode()).hexdigest()[:24]
    keys = {
        unit.key,
        replace(unit, nsd_tolerance_mm=5.0).key,
        replace(unit, protocol="cvpr25").key,
        replace(unit, protocol="cvpr25", nsd_tolerance_mm=5.0).key,
        replace(unit, surface_metrics_at="final").key,
        replace(unit, surface_metrics_at=(0, 2)).key,
    }
    assert len(keys) == 6


@pytest.mark.parametrize("damaged", ["labelsTr/lung1.nii.gz", "imagesTr/lung1_0000.nii.gz"])
def test_a_truncated_file_skips_its_case_with_one_line(tmp_path, capsys, damaged):
    """A cut .nii.gz is refused (it used to be read as zeros, scoring Dice 0.06 instead of
    0.99, or crashed the run with EOFError); the other cases are scored."""
    import shutil

    from intrabench.config import builtin_demo_path

    root = tmp_path / "data"
    shutil.copytree(builtin_demo_path().parent / "demo_real", root)
    for case in ("breast1",):  # two cases are enough
        (root / "imagesTr" / f"{case}_0000.nii.gz").unlink()
        (root / "labelsTr" / f"{case}.nii.gz").unlink()
    data = (root / damaged).read_bytes()
    (root / damaged).write_bytes(data[: len(data) // 2])
    code, err = _run_cli(tmp_path, root, capsys)
    assert code == 1
    problem_lines = [line for line in err.splitlines() if "re-download" in line]
    assert len(problem_lines) == 1 and "lung1" in problem_lines[0]
    assert "Traceback" not in err and "EOFError" not in err
    rows = pd.read_parquet(tmp_path / "out" / "results.parquet")
    assert set(rows["case"]) == {"brain1"}


def test_a_grid_mismatch_names_what_differs(tmp_path, capsys):
    root = tmp_path / "data"
    (root / "imagesTr").mkdir(parents=True)
    (root / "labelsTr").mkdir()
    image = sitk.GetImageFromArray(np.zeros((6, 8, 8), np.float32))
    sitk.WriteImage(image, str(root / "imagesTr" / "c1_0000.nii.gz"))
    label = sitk.GetImageFromArray(GOOD_LABEL)
    label.SetOrigin((0.0, 0.0, 12.5))  # same size and spacing, shifted
    sitk.WriteImage(label, str(root / "labelsTr" / "c1.nii.gz"))
    (root / "dataset.json").write_text(json.dumps({"labels": {"background": 0, "lesion": 1}}))
    code, err = _run_cli(tmp_path, root, capsys)
    assert (
        code == 1
        and "origin (0, 0, 12.5) vs (0, 0, 0)" in err
        and "size" not in err.split("origin")[0].split("does not match")[-1]
    )


def test_a_looping_link_is_named_as_such(tmp_path):
    from intrabench.errors import DataError
    from intrabench.io.volume import read_volume

    loop = tmp_path / "loop.nii.gz"
    loop.symlink_to(tmp_path / "loop.nii.gz")
    with pytest.raises(DataError, match="link that leads nowhere"):
        read_volume(loop)


# -- the first model is built while the first case is read -----------------------------------


class _SlowToRead(registry.datasets.get("demo-phantoms")):
    """Phantoms whose reading waits (up to 5 s) for the model's ``prepare`` to have started."""

    name = "test-slow-to-read"
    overlapped: list[bool] = []

    def load(self, case_id):
        type(self).overlapped.append(_LazyNetwork.building.wait(timeout=5.0))
        return super().load(case_id)


class _LazyNetwork(Model):
    """Region growing behind a 'network' built by ``prepare`` or at the first ``set_case``;
    ``broken``: building it fails, as a corrupt checkpoint would."""

    name = "test-lazy-network"
    dimension = 3
    accepts = frozenset({"point", "box3d", "mask"})
    building = threading.Event()
    threads: list[str] = []

    def __init__(self, broken: bool = False) -> None:
        self.inner = registry.models.create("region-growing-3d")
        self.broken = broken
        self.built = False

    def prepare(self):
        type(self).threads.append(threading.current_thread().name)
        type(self).building.set()
        self._build()

    def _build(self):
        if self.broken:
            raise CheckpointError("test-lazy-network: the checkpoint is corrupt")
        self.built = True

    def set_case(self, image):
        if not self.built:
            self._build()
        self.inner.set_case(image)

    def predict(self, prompt, previous=None, update_slices=None):
        return self.inner.predict(prompt, previous, update_slices)


registry.datasets.register(_SlowToRead)
registry.models.register(_LazyNetwork)


def _lazy_network_run(tmp_path: Path, broken: bool) -> tuple[RunConfig, Runner]:
    _LazyNetwork.building.clear()
    _LazyNetwork.threads.clear()
    _SlowToRead.overlapped.clear()
    config = parse_config(
        {
            "name": "lazy",
            "datasets": [{"name": "test-slow-to-read", "n_cases": 2}],
            "models": [{"name": "test-lazy-network", "broken": broken}, "region-growing-3d"],
            "prompters": ["box-3d"],
        }
    )
    return config, Runner(config, tmp_path / "run", background="inline")


def test_the_first_model_is_built_while_the_first_case_is_read(tmp_path):
    config, runner = _lazy_network_run(tmp_path, broken=False)
    plan, problems = runner.run()
    assert not problems
    # the first read waited for prepare() to start: they ran at the same time, in two threads
    assert _SlowToRead.overlapped[0] is True
    assert _LazyNetwork.threads == ["intrabench-model_0"]  # once, for the run's first model
    rows = pd.read_parquet(tmp_path / "run" / "results.parquet")
    assert set(rows.model) == {"test-lazy-network(broken=False)", "region-growing-3d"}
    # where the model loop's time went: each model built once, each (case, model) group set
    # up once, each row's forward pass counted
    entries = runner.loop_clock.entries
    assert entries["building models"] == 2
    assert entries["model set_case"] == 4
    assert entries["forward passes"] == len(rows)
    assert entries["waiting for cases"] == 2 + 4  # each case read, each group's reading ahead
    assert entries["handing episodes to the metrics"] == len(rows)
    assert sum(runner.loop_clock.seconds.values()) <= runner.loop_clock.wall + 1e-9
    Runner(config, tmp_path / "again", background="inline").run()  # and the rows are the same
    pd.testing.assert_frame_equal(
        _measurements(rows), _measurements(pd.read_parquet(tmp_path / "again" / "results.parquet"))
    )


def test_a_model_that_fails_to_build_beside_the_first_case_is_reported_once(tmp_path):
    _, runner = _lazy_network_run(tmp_path, broken=True)
    plan, problems = runner.run()
    assert problems == [
        "model 'test-lazy-network(broken=True)' skipped: test-lazy-network: "
        "the checkpoint is corrupt"
    ]
    rows = pd.read_parquet(tmp_path / "run" / "results.parquet")
    assert set(rows.model) == {"region-growing-3d"} and len(rows) > 0


@pytest.mark.parametrize(
    "options, message",
    [
        (
            ["--workers", "0"],
            r"--workers 0: a local Dask cluster takes 1 to \d+ worker processes on "
            r"this machine \(\d+ cores\)",
        ),
        (["--workers", "-3"], "--workers -3: a local Dask cluster takes 1 to"),  # waited forever
        (["--workers", "100000"], "--workers 100000: a local Dask cluster takes"),  # a traceback
        (
            ["--memory-limit", "lots"],
            "--memory-limit 'lots': not a size; give e.g. 8GB, 512MiB or auto",
        ),  # a traceback
        (["--memory-limit", "1KB"], "--memory-limit 1KB: a worker needs at least 512 MiB"),
        (["--gpus", "0", "--workers-per-gpu", "999"], "--workers-per-gpu 999: give 1 to"),
        # tasks that no local worker could start waited forever
        (
            ["--task-resources", "GPU"],
            "--task-resources GPU=1: the local cluster's workers offer "
            "none, so no task could start",
        ),
        (
            ["--gpus", "0", "--task-resources", "GPU=2"],
            "--task-resources GPU=2: the local cluster's workers offer GPU=1",
        ),
        # a cluster config that is not one was a traceback
        (["--cluster-config", "{tmp}/bad.yaml"], r"bad\.yaml: line 2 invalid YAML"),
        (
            ["--cluster-config", "{tmp}/list.yaml"],
            r"list\.yaml: expected a mapping like \{kind: "
            "slurm",
        ),
        (
            ["--cluster-config", "{tmp}/jobs.yaml"],
            r"jobs\.yaml: jobs must be a whole number >= 1, "
            "got 0",
        ),
        (["--cluster-config", "{tmp}/kind.yaml"], r"kind\.yaml: kind must be one of slurm, pbs"),
    ],
)
def test_a_local_cluster_the_machine_cannot_hold_is_refused_in_one_line(
    tmp_path, capsys, options, message
):
    import re

    for name, text in (
        ("bad", "kind: [\n"),
        ("list", "[1, 2]\n"),
        ("jobs", "kind: slurm\njobs: 0\n"),
        ("kind", "kind: kubernetes\n"),
    ):
        (tmp_path / f"{name}.yaml").write_text(text)
    options = [option.replace("{tmp}", str(tmp_path)) for option in options]
    assert main(["run", "--out", str(tmp_path / "run"), "--executor", "dask", *options]) == 2
    err = capsys.readouterr().err
    assert re.search(message, err) and "Traceback" not in err
    assert not (tmp_path / "run").exists()
