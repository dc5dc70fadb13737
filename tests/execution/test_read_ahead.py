"""Cases are read ahead by one or several reader processes, the next groups' first."""

from __future__ import annotations

import pandas as pd
import pytest

from intrabench.config import RunConfig
from intrabench.execution.runner import Runner, default_reader_workers
from intrabench.io.results import measured_columns


@pytest.mark.parametrize(
    "readers, before_group_0, before_group_1",
    [
        (1, ["phantom_001"], ["phantom_002"]),
        (
            3,
            ["phantom_001", "phantom_002", "phantom_003"],
            ["phantom_002", "phantom_003", "phantom_004"],
        ),
    ],
)
def test_several_readers_read_the_next_groups_cases_ahead(
    tmp_path, readers, before_group_0, before_group_1
):
    """With three readers the next three groups' cases are read while a group runs; with one,
    the next group's only (as before). A case read and not yet used holds its reader's place."""
    config = RunConfig.model_validate(
        {
            "name": "t",
            "datasets": [{"name": "demo-phantoms", "n_cases": 5}],
            "models": [{"name": "synthetic-network", "forward_ms": 0}],
            "prompters": ["box-3d"],
            "refinement_steps": 0,
        }
    )
    runner = Runner(config, tmp_path / "run", background="thread", reader_workers=readers)
    try:
        _, groups = runner.prepare()
        runner.executor._case(groups[0][0])  # the first group's case, in memory
        runner.executor._read_ahead.read_ahead_of(groups, 0)
        assert sorted(case for _, case in runner.executor._read_ahead) == before_group_0
        runner.executor._case(
            groups[1][0]
        )  # group 1 takes its case: its place goes to the next one
        runner.executor._read_ahead.read_ahead_of(groups, 1)
        assert sorted(case for _, case in runner.executor._read_ahead) == before_group_1
    finally:
        runner.close()


def test_runs_with_several_readers_give_the_same_rows(tmp_path):
    config = RunConfig.model_validate(
        {
            "name": "t",
            "datasets": [{"name": "demo-phantoms", "n_cases": 4}],
            "models": [{"name": "synthetic-network", "forward_ms": 0}, "region-growing-3d"],
            "prompters": ["center-points-per-volume"],
            "refiners": ["center-error-click"],
            "refinement_steps": 1,
        }
    )
    frames = []
    for readers in (1, 3):
        Runner(config, tmp_path / f"r{readers}", reader_workers=readers, user_workers=0).run()
        frame = pd.read_parquet(tmp_path / f"r{readers}" / "results.parquet")
        frames.append(frame.drop(columns=measured_columns(frame)).reset_index(drop=True))
    pd.testing.assert_frame_equal(*frames)


@pytest.mark.parametrize(
    "cores, sharing, expected",
    [(2, 1, 1), (4, 1, 1), (8, 1, 2), (16, 1, 4), (64, 1, 4), (16, 2, 2)],
)
def test_reader_workers_follow_the_core_count(monkeypatch, cores, sharing, expected):
    monkeypatch.setattr("os.sched_getaffinity", lambda _: set(range(cores)), raising=False)
    assert default_reader_workers(sharing) == expected


def test_no_reader_is_refused(tmp_path):
    config = RunConfig.model_validate(
        {
            "name": "t",
            "datasets": [{"name": "demo-phantoms", "n_cases": 1}],
            "models": ["region-growing-3d"],
            "prompters": ["box-3d"],
        }
    )
    with pytest.raises(ValueError, match="reader_workers must be >= 1"):
        Runner(config, tmp_path / "run", reader_workers=0)


def test_with_several_readers_the_next_cases_are_read_from_the_start(tmp_path, monkeypatch):
    """Before the first case is read in the loop, the readers already have the next ones."""
    config = RunConfig.model_validate(
        {
            "name": "t",
            "datasets": [{"name": "demo-phantoms", "n_cases": 3}],
            "models": [{"name": "synthetic-network", "forward_ms": 0}],
            "prompters": ["box-3d"],
            "refinement_steps": 0,
        }
    )
    runner = Runner(config, tmp_path / "run", background="thread", reader_workers=2, user_workers=0)
    submitted_when_first_read: list[list[str]] = []
    first_case = runner.executor._first_case

    def noting(unit):
        submitted_when_first_read.append(sorted(case for _, case in runner.executor._read_ahead))
        first_case(unit)

    monkeypatch.setattr(runner.executor, "_first_case", noting)
    runner.run()
    assert submitted_when_first_read == [["phantom_001", "phantom_002"]]
