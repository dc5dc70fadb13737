"""Plugin registration: by decorator, and by entry points of an installed third-party package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from intrabench import registry
from intrabench.errors import ConfigError
from intrabench.interfaces import Model
from intrabench.types import Box3D, Prompt

PLUGIN_SOURCE = Path(__file__).resolve().parents[1] / "plugin_package"


def test_decorator_registration_and_errors():
    @registry.models.register
    class EchoModel(Model):  # noqa: F841 - registered for the lookup below
        name = "test-echo-model"
        accepts = frozenset({"point"})

        def __init__(self, gain: float = 1.0) -> None:
            self.gain = gain

        def set_case(self, image):
            pass

        def predict(self, prompt, previous=None, update_slices=None):
            raise NotImplementedError

    assert registry.models.get("test-echo-model").name == "test-echo-model"
    with pytest.raises(ConfigError, match="has no parameter 'gian' \\(did you mean 'gain'\\?\\)"):
        registry.models.check_params("test-echo-model", {"gian": 2})
    with pytest.raises(ConfigError, match="Did you mean 'test-echo-model'"):
        registry.models.get("test-echo-modle")


@pytest.fixture(scope="module")
def installed_plugin(tmp_path_factory) -> Path:
    """pip-install the example plugin into a private site directory (no network, no deps)."""
    site = tmp_path_factory.mktemp("plugin-site")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(site),
            str(PLUGIN_SOURCE),
        ],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    return site


def _intrabench(site: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run(
        [sys.executable, "-m", "intrabench.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_entry_point_plugin_is_listed_and_runs(installed_plugin, tmp_path):
    listing = _intrabench(installed_plugin, "models", "list", cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    assert "box-threshold-3d" in listing.stdout
    prompters = _intrabench(installed_plugin, "prompters", "list", cwd=tmp_path)
    assert "two-center-clicks" in prompters.stdout

    config = tmp_path / "plugin.yaml"
    config.write_text(
        json.dumps(
            {
                "name": "plugin-run",
                "datasets": [{"name": "demo-phantoms", "n_cases": 2}],
                "models": ["box-threshold-3d", "region-growing-3d"],
                "prompters": ["box-3d", "two-center-clicks"],
            }
        )
    )
    run = _intrabench(
        installed_plugin, "run", str(config), "--out", str(tmp_path / "out"), cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr
    rows = pd.read_csv(tmp_path / "out" / "results.csv")
    plugin_rows = rows[rows.model == "box-threshold-3d"]
    # the plugin model takes boxes only: it runs with box-3d and is skipped for clicks
    assert set(plugin_rows.prompter) == {"box-3d"}
    assert plugin_rows.dice.mean() > 0.5
    clicks = rows[rows.prompter == "two-center-clicks"]
    assert set(clicks.model) == {"region-growing-3d"} and (clicks.effort == 2).all()
    skipped = pd.read_csv(tmp_path / "out" / "skipped.csv")
    assert "does not accept point" in skipped.reason.iloc[0]


def test_a_registered_name_is_found_without_importing_every_built_in_module():
    """Workers look up the run's components by name: one already imported (preloaded) is
    returned at once; an unknown one still loads everything and lists the valid names."""
    from intrabench.errors import ConfigError
    from intrabench.registry import Registry

    fresh = Registry("widget", "intrabench.widgets-test", ("intrabench.prompters",))

    @fresh.register
    class Widget:
        name = "widget-a"

    assert fresh.get("widget-a") is Widget
    assert not fresh._loaded
    with pytest.raises(ConfigError, match="unknown widget 'widget-b'"):
        fresh.get("widget-b")
    assert fresh._loaded


def test_the_component_index_names_the_module_of_every_built_in_component():
    """intrabench.component_index must match what the built-in modules register: a new
    component missing from it is still found (by importing everything), only slower."""
    from intrabench import registry
    from intrabench.component_index import BUILTIN_MODULES

    for kind in (
        registry.models,
        registry.prompters,
        registry.refiners,
        registry.datasets,
        registry.clickability,
    ):
        kind._ensure_loaded()
        built_in = {
            name: cls.__module__
            for name, cls in kind._classes.items()
            if cls.__module__.startswith(kind._builtin_packages)
        }
        missing = sorted(set(built_in) - set(BUILTIN_MODULES[kind.group]))
        assert not missing, (
            f"add to intrabench/component_index.py under '{kind.group}': "
            + ", ".join(f'"{n}": "{built_in[n]}"' for n in missing)
        )
        assert BUILTIN_MODULES[kind.group] == built_in


def test_asking_for_one_built_in_name_imports_only_its_module():
    import ast
    import subprocess
    import sys

    probe = (
        "import sys; from intrabench import registry; "
        "registry.datasets.get('folder'); registry.prompters.get('box-per-slice'); "
        "print(sorted(m for m in sys.modules if m.startswith(('intrabench.datasets.', "
        "'intrabench.prompters.'))))"
    )
    output = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    imported = ast.literal_eval(output)
    assert "intrabench.datasets.folder" in imported
    assert "intrabench.prompters.per_slice" in imported
    assert "intrabench.datasets.hanseg" not in imported  # not every dataset
    assert "intrabench.prompters.lasso" not in imported


def test_the_command_line_is_parsed_without_the_heavy_libraries():
    """Every command builds the whole parser first, and a run reads its config: pandas
    (0.45 s), torch and SimpleITK are imported only by the commands and parts that use them."""
    import subprocess
    import sys

    probe = (
        "import sys; from intrabench import cli, config; cli.build_parser(); "
        "print(sorted(m for m in ('pandas', 'torch', 'SimpleITK', 'nibabel', 'scipy') "
        "if m in sys.modules))"
    )
    output = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert output.strip() == "[]"


def test_a_plugin_cannot_take_a_built_in_name_even_before_the_built_in_is_imported():
    """Registered before the built-in module was imported, a plugin's 'region-growing-3d'
    replaced the built-in in silence (the built-in's own registration then failed)."""
    import textwrap

    code = textwrap.dedent("""
        from intrabench import registry
        from intrabench.interfaces import Model

        try:
            @registry.models.register
            class Mine(Model):
                name = "region-growing-3d"
                accepts = frozenset({"box3d"})
        except ValueError as error:
            print(error)
        print(registry.models.get("region-growing-3d").__module__)
        """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "model 'region-growing-3d' is the name of a built-in model "
        "(intrabench.models.classical.region_growing_3d); register Mine under another name",
        "intrabench.models.classical.region_growing_3d",
    ]


def test_a_plugin_module_that_fails_at_import_is_one_line(tmp_path, capsys, monkeypatch):
    from intrabench.cli import main

    (tmp_path / "broken_plugin.py").write_text("raise RuntimeError('boom at import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    config = tmp_path / "c.json"
    config.write_text(
        json.dumps(
            {
                "name": "p",
                "imports": ["broken_plugin"],
                "models": ["region-growing-3d"],
                "datasets": [{"name": "demo-phantoms", "n_cases": 1}],
                "prompters": ["box-3d"],
            }
        )
    )
    assert main(["run", str(config), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert (
        "imports: importing 'broken_plugin' failed: RuntimeError: boom at import "
        "(broken_plugin.py:1)"
    ) in err and "Traceback" not in err


@pytest.mark.parametrize(
    "returned, message",
    [
        (
            lambda shape: np.zeros((3, 3, 3), bool),
            r"returned a mask of shape \(3, 3, 3\) for a case of shape \(\d+, \d+, \d+\) \(z, y, x\)",
        ),
        (lambda shape: np.full(shape, 0.7), "returned a float64 mask; masks are boolean"),
        (lambda shape: np.ones(shape, np.uint8), "returned a uint8 mask; masks are boolean"),
        (lambda shape: [[0]], "returned Prediction with a list mask"),
    ],
)
def test_a_model_output_that_is_no_mask_of_the_case_fails_its_unit_in_one_line(
    tmp_path, monkeypatch, returned, message
):
    """A probability map was scored as if every voxel above 0 were foreground, and a mask of
    another shape failed deep in the metrics ("operands could not be broadcast together")."""
    from intrabench.config import parse_config
    from intrabench.execution.runner import Runner
    from intrabench.types import Prediction

    class Wrong(Model):
        name = "test-wrong-output"
        dimension = 3
        accepts = frozenset({"box3d"})

        def set_case(self, image):
            self.shape = image.shape

        def predict(self, prompt, previous=None, update_slices=None):
            return Prediction(mask=returned(self.shape))

    registry.models.register(Wrong)
    try:
        runner = Runner(
            parse_config(
                {
                    "name": "wrong",
                    "models": ["test-wrong-output"],
                    "prompters": ["box-3d"],
                    "datasets": [{"name": "demo-phantoms", "n_cases": 1}],
                }
            ),
            tmp_path / "run",
        )
        runner.run()
    finally:
        registry.models.unregister("test-wrong-output")
    assert runner.failures and all(
        f.cause.startswith("ModelOutputError: model 'test-wrong-output' ") for f in runner.failures
    )
    import re

    assert re.search(message, runner.failures[0].cause)


@pytest.mark.parametrize(
    "returned, message",
    [
        (
            lambda: Prompt(points=np.array([[999, 2, 3]]), point_labels=np.array([1])),
            r"prompter 'test-bad-prompt' put point 0 at \(999, 2, 3\) outside the case's grid "
            r"\(\d+, \d+, \d+\) \(z, y, x\)",
        ),
        # a negative index counted from the far end of the volume in numpy: a click elsewhere
        (
            lambda: Prompt(points=np.array([[1, -5, 3]]), point_labels=np.array([1])),
            r"point 0 at \(1, -5, 3\)",
        ),
        (lambda: Prompt(box3d=Box3D(0, 0, 0, 2, 500, 4)), r"the 3D box \(0, 0, 0, 2, 500, 4\)"),
        (lambda: Prompt(box3d=Box3D(2, 0, 0, 1, 4, 4)), r"the 3D box \(2, 0, 0, 1, 4, 4\)"),
        (lambda: {"points": [[1, 2, 3]]}, "prompter 'test-bad-prompt' returned dict, not a Prompt"),
        (
            lambda: Prompt(points=np.array([[2.5, 3.0, 4.0]]), point_labels=np.array([1])),
            r"points are voxel indices \(whole numbers\)",
        ),  # int() truncated 2.5 to 2
    ],
)
def test_a_prompt_that_is_no_prompt_on_the_case_fails_its_unit_in_one_line(
    tmp_path, returned, message
):
    import re

    from intrabench.config import parse_config
    from intrabench.execution.runner import Runner
    from intrabench.interfaces import Prompter

    class Bad(Prompter):
        name = "test-bad-prompt"
        dimensions = frozenset({2, 3})
        kinds = frozenset({"point", "box3d"})
        effort_rule = "1"

        def initial(self, context):
            return returned()

    registry.prompters.register(Bad)
    try:
        runner = Runner(
            parse_config(
                {
                    "name": "bad-prompt",
                    "models": ["region-growing-3d"],
                    "prompters": ["test-bad-prompt"],
                    "datasets": [{"name": "demo-phantoms", "n_cases": 1}],
                }
            ),
            tmp_path / "run",
        )
        runner.run()
    finally:
        registry.prompters.unregister("test-bad-prompt")
    assert runner.failures
    assert all(re.search(message, failure.cause) for failure in runner.failures), runner.failures[
        0
    ].cause
