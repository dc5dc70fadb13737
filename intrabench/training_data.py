"""Whether a case's dataset was in the model's training data: ``in_training_data``.

Its values are yes, no and unknown.

A model scored on data it was trained on is not being benchmarked. Each model's card
(:mod:`intrabench.model_cards`: ``training_data``, built-in and plugin cards alike) states, with
its source, which of the benchmark's datasets its published checkpoints were trained on and
which datasets that source vouches for; ``intrabench/resources/training_data.yaml`` names the
paper's datasets and the never-seen (synthetic) ones (see the file's header). Every result row
carries ``in_training_data`` for its (model, dataset); ``intrabench tables
--split-training-data`` builds each table once per value.

Names are registry names: a model key ``sam2(variant=...)`` counts as ``sam2``; the dataset is
the registered dataset's name (``pengwin``), not the label a run gives it. A model or dataset
the registry does not list is ``unknown``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

import pandas as pd
import yaml

Status = Literal["yes", "no", "unknown", "n/a"]
COLUMN = "in_training_data"
STATUSES: tuple[Status, ...] = ("no", "yes", "unknown", "n/a")


@dataclass(frozen=True)
class TrainingData:
    """One model's entry: datasets trained on, datasets the source vouches for, the source."""

    model: str
    trained_on: frozenset[str]
    checked: frozenset[str] | None  # None: every dataset (a model without training)
    source: str
    checkpoints: tuple[str, ...] = ()

    def status(self, dataset: str, never_seen: frozenset[str] = frozenset()) -> Status:
        """Whether the checkpoint saw ``dataset`` in training: ``yes``, ``no`` or ``unknown``.

        Args:
            dataset: The dataset's name.
            never_seen: Datasets known to be in no checkpoint's training data.

        Returns:
            ``yes`` when the entry lists it as trained on; ``no`` when it is never seen, the
            entry vouches for every dataset (a model without training) or for this one;
            ``unknown`` otherwise.
        """
        if dataset in self.trained_on:
            return "yes"
        if dataset in never_seen or self.checked is None or dataset in self.checked:
            return "no"
        return "unknown"


def parse_registry(data: dict[str, Any]) -> tuple[dict[str, TrainingData], frozenset[str]]:
    """Entries by model name and the never-seen datasets of a parsed registry file.

    Args:
        data: The parsed YAML: ``paper_datasets`` (names), ``never_seen`` (names) and
            ``models``: model name -> ``trained_on`` (names), ``checked`` (names, ``"paper"``
            for the paper's datasets or ``"all"``), ``source`` and ``checkpoints``.

    Returns:
        ``(entries, never_seen)``: a :class:`TrainingData` per model name, and the datasets
        no checkpoint was trained on.
    """
    paper = frozenset(data.get("paper_datasets", []))
    entries = {}
    for model, entry in (data.get("models") or {}).items():
        checked = entry.get("checked", [])
        if checked == "all":
            vouched = None
        elif checked == "paper":
            vouched = paper
        else:
            vouched = frozenset(checked)
        entries[str(model)] = TrainingData(
            str(model),
            frozenset(entry.get("trained_on", [])),
            vouched,
            str(entry.get("source", "")).strip(),
            tuple(entry.get("checkpoints", [])),
        )
    return entries, frozenset(data.get("never_seen", []))


@lru_cache(maxsize=1)
def registry() -> tuple[dict[str, TrainingData], frozenset[str]]:
    """The registry (read once): the cards' ``training_data`` with the dataset lists of
    ``resources/training_data.yaml``.

    Returns:
        ``(entries, never_seen)`` as :func:`parse_registry` gives them, one entry per model
        card (built-in and plugin cards registered by the first call).
    """
    from intrabench.model_cards import cards

    text = (
        resources.files("intrabench")
        .joinpath("resources/training_data.yaml")
        .read_text(encoding="utf-8")
    )
    data = yaml.safe_load(text)
    return parse_registry(
        {**data, "models": {name: card.training_data for name, card in cards().items()}}
    )


def status(model: str, dataset: str, params: dict[str, Any] | None = None) -> Status:
    """``in_training_data`` of a (model name or key, registered dataset name) pair.

    Args:
        model: The model's registry name or its key (``sam2(variant=...)`` counts as
            ``sam2``).
        dataset: The registered dataset's name (``pengwin``), not a run's label for it.
        params: The model's parameters, or None; ``weights: random`` or ``tiny`` means the
            published checkpoint is not used.

    Returns:
        ``"n/a"`` for random or tiny weights (the checkpoint's training data says nothing);
        for a model the registry does not list, ``"no"`` when the dataset is never seen,
        else ``"unknown"``; otherwise :meth:`TrainingData.status`.
    """
    if params and (params.get("weights") == "random" or params.get("tiny")):
        return "n/a"
    entries, never_seen = registry()
    entry = entries.get(str(model).split("(")[0])
    if entry is None:
        return "no" if dataset in never_seen else "unknown"
    return entry.status(dataset, never_seen)


def split_rows(rows: pd.DataFrame) -> list[tuple[Status, pd.DataFrame]]:
    """The rows of each ``in_training_data`` value present, in the order no, yes, unknown, n/a.

    Args:
        rows: Result rows; rows whose ``in_training_data`` is missing (or a table without
            the column) count as unknown.

    Returns:
        ``(value, rows with that value)`` for each value that has rows, in :data:`STATUSES`
        order.
    """
    values = (
        rows[COLUMN].fillna("unknown") if COLUMN in rows else pd.Series("unknown", index=rows.index)
    )
    return [(value, rows[values == value]) for value in STATUSES if (values == value).any()]
