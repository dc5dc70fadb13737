"""Configs and plugins written for the layout before the regrouping still run: an old module
path imports the module at its new path with one DeprecationWarning, and a benchmark double
named without its import is still found, with a warning naming the ``imports:`` line."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from intrabench.old_paths import MOVED, WARNED, new_path

ROOT = Path(__file__).resolve().parents[1]


def fresh_python(code: str, *flags: str) -> subprocess.CompletedProcess:
    """``code`` run by a new interpreter (nothing imported, nothing warned about yet)."""
    env = {k: v for k, v in os.environ.items() if k != WARNED}
    return subprocess.run(
        [sys.executable, *flags, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )


def test_an_old_model_path_gives_the_same_module_with_one_warning():
    result = fresh_python(
        """
        import intrabench.models.region_growing_3d as old
        import intrabench.models.classical.region_growing_3d as new
        from intrabench import registry
        print(old is new, old.__spec__.name, registry.models.get("region-growing-3d").__module__)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "True",
        "intrabench.models.classical.region_growing_3d",
        "intrabench.models.classical.region_growing_3d",
    ]
    # one line, shown without -W (Python hides other DeprecationWarnings outside __main__)
    assert result.stderr.splitlines() == [
        "intrabench:0: DeprecationWarning: intrabench.models.region_growing_3d moved to "
        "intrabench.models.classical.region_growing_3d; import "
        "intrabench.models.classical.region_growing_3d instead (the old path will be removed)"
    ]


def test_a_worker_started_after_the_warning_does_not_repeat_it():
    """The run's workers import the config's imports: again; the user reads the line once."""
    result = fresh_python(
        """
        import subprocess, sys
        import intrabench.models.sam2
        child = subprocess.run(
            [sys.executable, "-c", "import intrabench.models.sam2, intrabench.protocols"],
            capture_output=True, text=True,
        )
        print(child.returncode)
        sys.stderr.write(child.stderr)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0"]
    lines = result.stderr.splitlines()
    assert len(lines) == 2, lines
    assert "intrabench.models.sam2 moved to intrabench.models.sam_family.sam2" in lines[0]
    assert "intrabench.protocols moved to intrabench.interfaces" in lines[1]  # the child's own


def test_a_moved_package_takes_its_submodules_along():
    assert new_path("intrabench.clicks.maps.uniform") == "intrabench.prompters.clickability.uniform"
    assert new_path("intrabench.protocols") == "intrabench.interfaces"
    assert new_path("intrabench.models.sam2") == "intrabench.models.sam_family.sam2"
    assert new_path("intrabench.models.sam_family.sam2") is None  # a new path is not moved
    assert new_path("intrabench.clicks.base") is None
    result = fresh_python(
        """
        from intrabench.clicks.maps.uniform import UniformClickability
        from intrabench.protocols import Model
        from intrabench import interfaces, registry
        print(registry.clickability.get("uniform") is UniformClickability, Model is interfaces.Model)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True"]
    assert "intrabench.clicks.maps moved to intrabench.prompters.clickability" in result.stderr
    assert "intrabench.protocols moved to intrabench.interfaces" in result.stderr


@pytest.mark.parametrize("old", sorted(MOVED))
def test_every_old_path_leads_to_a_module_and_no_file_shadows_it(old):
    assert importlib.util.find_spec(MOVED[old]) is not None
    parts = old.split(".")[1:]
    folder = {"models": "models", "prompters": "prompters", "datasets": "datasets"}.get(parts[0])
    base = ROOT / folder / Path(*parts[1:]) if folder else ROOT / "intrabench" / Path(*parts)
    assert not base.with_suffix(".py").exists() and not base.is_dir()


def test_a_config_importing_an_old_path_loads():
    result = fresh_python(
        """
        from intrabench.config import parse_config
        config = parse_config({
            "imports": ["intrabench.models.random_walker_3d"],
            "datasets": ["demo-phantoms"], "models": ["random-walker-3d"],
            "prompters": ["box-3d"],
        })
        config.import_modules()
        from intrabench import registry
        print(registry.models.get("random-walker-3d").__module__)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["intrabench.models.classical.random_walker_3d"]
    assert "moved to intrabench.models.classical.random_walker_3d" in result.stderr


def test_the_benchmark_doubles_are_not_built_in_but_an_old_config_still_finds_them():
    result = fresh_python(
        """
        from intrabench import registry
        print("synthetic-network" in registry.models.names())
        print(registry.models.get("synthetic-network").__module__)
        print(registry.models.is_known("synthetic-network-2d"))
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "intrabench.testing.synthetic_network", "True"]
    assert (
        "model 'synthetic-network' is no longer built in: add "
        "'imports: [intrabench.testing.synthetic_network]' to the config" in result.stderr
    )


def test_importing_a_double_registers_it_without_a_warning():
    result = fresh_python(
        """
        import warnings
        warnings.simplefilter("error")
        import intrabench.testing.synthetic_network
        from intrabench import registry
        print(registry.models.get("synthetic-network-2d").dimension)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["2"]
