"""The CPU proxy's calibration on a card: ``benchmarks/configs/gpu-calibration.yaml``.

For each GPU configuration the file holds the stand-ins' forward time (``proxy_ms``: one number,
or one per model name) and the card's figures that the proxy is compared with (``card``: name,
wall, start, forward, between, model_steady, model_whole in seconds or shares of the wall time,
and ``phases``, the card's model loop by phase in seconds; entries written before 2026-11-29
call it ``h100``). A card run writes its figures (``bench_gpu_run.py CONFIG --figures-out
F.json``); the proxy then turns them into an entry (``bench_gpu_run.py --proxy-of CONFIG
--calibrate-from F.json``): each model's forward seconds on the card over the proxy's forward
passes of that model (per predicted slice for a 2D model, as its stand-in takes ``forward_ms``
per slice).
"""

from __future__ import annotations

import math
from pathlib import Path

import yaml

CALIBRATION_FILE = Path(__file__).resolve().parent / "configs" / "gpu-calibration.yaml"

#: the card's figures an entry holds (seconds, or shares of the wall time for model_*)
FIGURES = ("wall", "start", "forward", "between", "model_steady", "model_whole")


def read_calibration(config_path: Path, table_file: Path = CALIBRATION_FILE) -> dict:
    """The calibration entry of a GPU config (by its file name), or {} when there is none;
    ValueError (one line) when the file or the entry is not a mapping."""
    table = yaml.safe_load(table_file.read_text()) or {}
    if not isinstance(table, dict):
        raise ValueError(f"{table_file.name} is not a mapping of configuration files")
    entry = table.get(config_path.name, {})
    if not isinstance(entry, dict):
        raise ValueError(f"{table_file.name}: the entry of {config_path.name} is not a mapping")
    return entry


def card_of(entry: dict) -> tuple[str, dict]:
    """(the card's name, its figures) of a calibration entry; ("", {}) without any."""
    card = entry.get("card", entry.get("h100"))
    if not isinstance(card, dict):
        return "", {}
    name = card.get("name", "H100" if "h100" in entry else "card")
    return str(name), card


def _duration(value: object) -> float | None:
    """``value`` as a float when it is a finite number >= 0 (not a boolean), else None."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        return None
    return float(value)


def milliseconds(value: object) -> float:
    """A calibrated forward time: a finite number >= 0, else ValueError (one line)."""
    checked = _duration(value)
    if checked is None:
        raise ValueError(f"proxy_ms must be a number of milliseconds >= 0, not {value!r:.60}")
    return checked


def between_passes(result: dict) -> float:
    """Seconds of a run (``bench_gpu_run.measure``'s result) from its first forward pass to
    its last that no forward pass took."""
    return result["wall"] - result["before"] - result["after"] - result["model"]


def per_model_ms(table: object, models: list[tuple[str, str]]) -> float | dict[str, float]:
    """A calibration's ``proxy_ms`` for ``models`` ((key, name) pairs of a config): one number
    for every model, or a mapping of model names (``sam-med3d``) to numbers, returned by model
    key; ValueError (one line) for a model without a time or a time that is not one."""
    if not isinstance(table, dict):
        return milliseconds(table)
    missing = sorted({name for _, name in models} - set(table))
    if missing:
        raise ValueError(f"proxy_ms has no time for {', '.join(missing)}")
    return {key: milliseconds(table[name]) for key, name in models}


def card_figures(result: dict, models: list[tuple[str, str]], card: str, config: str) -> dict:
    """What a card run of ``config`` gives the calibration, from ``bench_gpu_run.measure``'s
    ``result``: the figures of :data:`FIGURES` and each model name's forward seconds and steps
    with a forward pass (rows' ``latency_seconds``, keyed in ``result`` by model key)."""
    names = dict(models)
    forward_by_model: dict[str, float] = {}
    steps_by_model: dict[str, int] = {}
    for key, (steps, seconds) in result["per_model"].items():
        name = names.get(key, key)
        forward_by_model[name] = forward_by_model.get(name, 0.0) + float(seconds)
        steps_by_model[name] = steps_by_model.get(name, 0) + int(steps)
    return {
        "card": card,
        "config": config,
        "wall": result["wall"],
        "start": result["before"],
        "forward": result["model"],
        "between": between_passes(result),
        "model_steady": result["model_steady"],
        "model_whole": result["model"] / result["wall"],
        "forward_by_model": forward_by_model,
        "steps_by_model": steps_by_model,
        "phases": dict(result.get("loop_phases", {})),
    }


def calibration_entry(figures: dict, proxy_passes: dict[str, int]) -> dict:
    """The ``gpu-calibration.yaml`` entry from a card run's ``figures`` (:func:`card_figures`)
    and the proxy's forward passes per model name (its stand-ins' count, per predicted slice
    in 2D): ``proxy_ms`` per model = the card's forward seconds of that model over the proxy's
    passes. ValueError (one line) when a model of the card run has no pass in the proxy or
    a figure is missing or not a finite number."""
    card_seconds = figures.get("forward_by_model")
    if not isinstance(card_seconds, dict) or not card_seconds:
        raise ValueError("the card's figures have no forward seconds per model (forward_by_model)")
    proxy_ms = {}
    for name, seconds in sorted(card_seconds.items()):
        passes = proxy_passes.get(name, 0)
        if passes <= 0:
            raise ValueError(
                f"the proxy made no forward pass of {name}: it does not run the "
                "card's configuration"
            )
        proxy_ms[name] = round(1000.0 * _figure(name, seconds) / passes, 1)
    card: dict = {"name": str(figures.get("card") or "card")}
    for name in FIGURES:
        card[name] = round(_figure(name, figures.get(name)), 3)
    phases = figures.get("phases") or {}
    if not isinstance(phases, dict):
        raise ValueError(
            "the card's figures' phases must be a mapping of the model loop's phases to seconds"
        )
    if phases:  # the card's model loop by phase, printed beside the proxy's
        card["phases"] = {
            str(name): round(_figure(f"phases.{name}", seconds), 2)
            for name, seconds in phases.items()
        }
    return {"proxy_ms": proxy_ms, "card": card}


def _figure(name: str, value: object) -> float:
    checked = _duration(value)
    if checked is None:
        raise ValueError(
            f"the card's figure {name} must be a finite number >= 0, not {value!r:.60}"
        )
    return checked


def entry_text(config_name: str, entry: dict, source: str) -> str:
    """``entry`` as YAML lines for ``gpu-calibration.yaml`` under ``config_name``, with a
    comment naming where its figures come from."""
    body = yaml.safe_dump({config_name: entry}, default_flow_style=None, sort_keys=False, width=96)
    lines = body.splitlines()
    return "\n".join([lines[0], f"  # {source}", *lines[1:]]) + "\n"
