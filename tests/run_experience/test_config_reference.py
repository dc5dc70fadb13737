"""docs/configuration.md is the config schema's reference, generated, and complete."""

from __future__ import annotations

from pathlib import Path

from intrabench.config import DatasetSpec, RobustnessSpec, RunConfig
from intrabench.config_reference import field_docs, render_reference, type_name
from intrabench.timing.human import TimeModel

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_the_committed_reference_is_the_generated_one():
    assert DOC.read_text() == render_reference(), (
        "regenerate: python -m intrabench.config_reference > docs/configuration.md"
    )


def test_every_key_is_documented():
    for cls in (RunConfig, DatasetSpec, RobustnessSpec, TimeModel):
        missing = set(cls.model_fields) - set(field_docs(cls))
        assert not missing, f"{cls.__name__}: add a '#:' comment above {sorted(missing)}"
    text = DOC.read_text()
    for key in (
        "`cases`",
        "`max_cases`",
        "`surface_metrics_at`",
        "`imports`",
        "`robustness.groups`",
        "`time_model.max_interactions`",
    ):
        assert key in text


def test_type_names_read_like_the_yaml():
    assert (
        type_name(RunConfig.model_fields["surface_metrics_at"].annotation)
        == "'all' | 'final' | 'initial-and-final' | list[int]"
    )
    assert type_name(RunConfig.model_fields["save_predictions"].annotation) == "bool | 'all'"
