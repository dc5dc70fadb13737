"""Where each checkpoint was trained (issue #18, item 4): the registry, the result column and
the split tables."""

from __future__ import annotations

import pandas as pd
import pytest

from intrabench import registry as components
from intrabench import training_data
from intrabench.cli import main
from intrabench.io.checkpoints import CHECKPOINTS
from tests.run_helpers import run_config


@pytest.mark.parametrize(
    ("model", "dataset", "expected"),
    [
        ("segvol", "hanseg", "yes"),  # the paper's Table 1 exception
        ("segvol", "pengwin", "no"),
        ("sam", "hanseg", "no"),
        ("sam2(variant=sam2.1-hiera-tiny)", "lnq", "no"),  # a model key counts by its name
        ("vista3d", "colorectal-liver-metastases", "yes"),  # CRLM-CT in VISTA3D's data lists
        ("vista3d", "hcc-tace-liver", "no"),  # only in its zero-shot evaluation
        ("vista3d", "pengwin", "unknown"),  # overlap with CTPelvic1K-CLINIC undocumented
        ("nninteractive", "segrap", "unknown"),  # its dataset list not compared here
        ("vista3d", "demo-phantoms", "no"),  # synthetic, made here
        ("region-growing-3d", "nnunet-folder", "no"),  # no training at all
        ("medsam", "folder", "unknown"),  # your own data: nobody vouches
        ("a-plugin-model", "hanseg", "unknown"),
    ],
)
def test_status_of_a_model_and_dataset(model, dataset, expected):
    assert training_data.status(model, dataset) == expected


@pytest.mark.parametrize(
    ("model", "commit"),
    [
        ("litemedsam", "b0fab476e54e631dd412b25e0db9fdf2a2b0f54c"),  # bowang-lab/MedSAM LiteMedSAM
        ("medsam2", "332f30d420f1d1b08e2a79b3ae6a602458808383"),  # bowang-lab/MedSAM2
        ("nninteractive", "154d9c6bdd887f1140419e26d7e8b173926cddd7"),  # MIC-DKFZ/nnInteractive
    ],
)
def test_cards_without_a_dataset_list_say_unknown_and_where_they_looked(model, commit):
    """No source read lists these models' training datasets: every benchmark dataset is
    "unknown" (none is invented), and the card quotes the repository commit it read."""
    entries, _ = training_data.registry()
    entry = entries[model]
    assert entry.trained_on == frozenset() and not entry.checked
    assert commit in entry.source and "unknown" in entry.source
    for dataset in ("hanseg", "segrap", "lnq", "adrenal-acc", "hcc-tace-liver", "pengwin"):
        assert training_data.status(model, dataset) == "unknown"


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"weights": "random"}, "n/a"),
        ({"tiny": True}, "n/a"),
        ({"weights": "random", "tiny": True}, "n/a"),
        ({"weights": "checkpoint"}, "yes"),
        ({"tiny": False}, "yes"),
        ({}, "yes"),
    ],
)
def test_random_or_tiny_weights_are_not_the_published_checkpoints(params, expected):
    """SegVol's published weights saw HanSeg; a random or tiny network saw nothing of it."""
    assert training_data.status("segvol", "hanseg", params) == expected


def test_the_registry_covers_every_model_checkpoint_and_dataset_it_names():
    entries, never_seen = training_data.registry()
    builtin = {
        name
        for name, cls in components.models.items()
        if cls.__module__.startswith("intrabench.models.")
    }  # not plugins or test ones
    assert builtin <= set(entries)  # a new built-in model must say
    covered = [key for entry in entries.values() for key in entry.checkpoints]
    assert sorted(covered) == sorted(CHECKPOINTS)  # each checkpoint exactly once
    datasets = set(components.datasets.names())
    for entry in entries.values():
        assert entry.source, entry.model
        assert entry.trained_on <= datasets, entry.model
        assert entry.checked is None or entry.checked <= datasets, entry.model
    assert never_seen <= datasets


def test_a_parsed_entry_follows_its_checked_list():
    entries, never_seen = training_data.parse_registry(
        {
            "paper_datasets": ["a", "b"],
            "never_seen": ["synthetic"],
            "models": {
                "m": {"trained_on": ["a"], "checked": "paper", "source": "s"},
                "n": {"trained_on": [], "checked": ["c"], "source": "t"},
            },
        }
    )
    assert [entries["m"].status(d, never_seen) for d in ("a", "b", "c", "synthetic")] == [
        "yes",
        "no",
        "unknown",
        "no",
    ]
    assert [entries["n"].status(d, never_seen) for d in ("a", "c")] == ["unknown", "no"]


def test_rows_carry_the_column_and_tables_split_on_it(tmp_path, capsys):
    run = run_config(
        tmp_path,
        "name: t\ndatasets: [{name: demo-phantoms, n_cases: 1, label: phantoms},\n"
        "  {name: demo-real, label: real}]\nmodels: [region-growing-3d, synthetic-network]\n"
        "prompters: [box-3d]\nrefinement_steps: 0\n",
    )
    rows = pd.read_csv(run / "results.csv")
    assert set(rows["in_training_data"]) == {"no"}
    # an entry that says "unknown" for demo-real splits the tables in two
    rows.loc[
        (rows["dataset"] == "real") & (rows["model"] == "synthetic-network"), "in_training_data"
    ] = "unknown"
    parts = dict(training_data.split_rows(rows))
    assert list(parts) == ["no", "unknown"]
    assert len(parts["no"]) + len(parts["unknown"]) == len(rows)
    assert (
        main(["tables", str(run), "--out", str(tmp_path / "tables"), "--split-training-data"]) == 0
    )
    out = capsys.readouterr().out
    assert "dataset in the model's training data: no" in out
    assert (tmp_path / "tables" / "initial-training-data-no.csv").exists()
