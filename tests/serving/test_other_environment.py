"""A trained model (MobileSAM, with its corrective clicks fed back through its mask input)
served from an environment with another numpy major version gives the in-process rows, bit for
bit. The environment comes from scripts/make_numpy1_env.sh (.ci/run makes it); elsewhere the
test is skipped unless INTRABENCH_REQUIRE_SECOND_ENV=1."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from intrabench.config import RunConfig
from intrabench.execution.runner import Runner
from intrabench.io.results import load_results
from intrabench.serving.connection import ServerConnection
from intrabench.serving.spec import RunsIn

from .test_served_models import ROOT, comparable

SECOND = ROOT / ".venv-numpy1" / "bin" / "python"


@pytest.fixture(scope="module")
def second_python() -> str:
    if not SECOND.exists():
        if os.environ.get("INTRABENCH_REQUIRE_SECOND_ENV") == "1":
            pytest.fail("no .venv-numpy1: run scripts/make_numpy1_env.sh")
        pytest.skip("no .venv-numpy1 (scripts/make_numpy1_env.sh makes it)")
    return str(SECOND)


def run(tmp: Path, name: str, model: dict) -> pd.DataFrame:
    config = RunConfig.model_validate(
        {
            "name": "numpy1",
            "datasets": [{"name": "demo-real", "cases": ["lung1"]}],
            "models": [model],
            "prompters": [{"name": "center-point-per-slice", "label": "1-point-per-slice"}],
            "refiners": [{"name": "corrective-point-per-slice", "label": "click-per-slice"}],
            "refinement_steps": 2,
        }
    )
    config.validate_components()
    runner = Runner(config, tmp / name)
    runner.run()
    assert runner.failures == []
    return load_results(tmp / name)


def test_mobilesam_served_from_numpy_1_gives_the_in_process_rows(tmp_path, second_python):
    connection = ServerConnection("mobilesam", {}, RunsIn(python=second_python))
    try:
        served_numpy = connection.hello["server"]["numpy"]
    finally:
        connection.close()
    assert served_numpy.split(".")[0] == "1" and np.__version__.split(".")[0] == "2"
    local = run(tmp_path, "local", {"name": "mobilesam"})
    served = run(tmp_path, "served", {"name": "mobilesam", "runs_in": {"python": second_python}})
    assert len(local) == 3 and local["dice"].iloc[-1] > 0.5  # one lesion, 3 steps
    pd.testing.assert_frame_equal(comparable(served), comparable(local))
    assert sys.executable != second_python
