"""``intrabench clicks collect import``: people's click files, checked against the collection,
as the CSV that the ``recorded`` clickability map reads.

A click file is what the page exports (JSON)::

    {"format": "intrabench-clicks", "version": 1, "collection": "<id>", "rater": "...",
     "exported_at": "...", "clicks": [{"collection", "task", "dataset", "case", "target",
     "kind", "step", "z", "y", "x", "label", "seconds", "slices_visited", "window":
     {"centre", "width", "name"}, "windows_used", "input", "clicked_at", "rater"}, ...]}

``z, y, x`` are canonical voxel indices of the task's case. A file that cannot be read as one
(too large, not JSON, another collection) is refused whole, in one line; a click that does not
fit its task (a task this collection lacks, another case's or target's ids, coordinates that
are not whole numbers or lie off the grid, NaN, a label other than 0 or 1) is refused alone,
and the refusals are counted by reason. Nothing is attributed to another task: a click counts
only for the task it names, and only when its ids are that task's.
"""

from __future__ import annotations

import json
import math
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from intrabench.errors import UserError

CLICK_FORMAT = "intrabench-clicks"
CLICK_VERSION = 1
#: A click file larger than this is refused unread (a person's file of 1,000 tasks is ~0.5 MB).
MAX_FILE_BYTES = 16 * 2**20
#: The CSV's columns, in order (``recorded`` reads the first seven, and rater and seconds).
CSV_COLUMNS = [
    "dataset",
    "case",
    "target",
    "z",
    "y",
    "x",
    "step",
    "label",
    "rater",
    "seconds",
    "kind",
    "task",
    "collection",
    "window_centre",
    "window_width",
    "window_name",
    "slices_visited",
    "input",
    "clicked_at",
    "file",
]


@dataclass
class ReadClicks:
    """The clicks that fit their tasks (one row each, :data:`CSV_COLUMNS`), and what was not."""

    clicks: pd.DataFrame
    #: reason -> clicks refused for it
    refused: Counter = field(default_factory=Counter)
    #: reason -> the first few refused clicks ("file: click 3 (task-009)")
    examples: dict[str, list[str]] = field(default_factory=dict)
    #: one line per file refused whole
    files_refused: list[str] = field(default_factory=list)


def _whole(value: Any) -> int | None:
    """``value`` as an int when it is a finite whole number (not a bool, not text)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return None
    return int(value)


def _text(value: Any, most: int = 200) -> str | None:
    """``value`` when it is non-empty text of at most ``most`` characters without control
    characters."""
    if not isinstance(value, str) or not value.strip() or len(value) > most:
        return None
    if any(unicodedata.category(c) in ("Cc", "Cf", "Cs") for c in value):
        return None
    return value


def check_click(record: Any, tasks: dict[str, dict], collection: str) -> tuple[dict | None, str]:
    """(the CSV row, "") for a click that fits its task, else (None, the reason).

    A click fits when it names a task of the collection with the same ids, kind and step, has
    whole (z, y, x) coordinates on the case's grid, label 1 or 0, a finite time >= 0 and a
    rater's name.

    Args:
        record: One click as the page exported it (a JSON object).
        tasks: The collection's tasks by task name (the manifest's ``tasks``).
        collection: The collection's id.

    Returns:
        ``(row, "")`` with the :data:`CSV_COLUMNS` values (coordinates in canonical (z, y, x)
        voxels), or ``(None, reason)``.
    """
    if not isinstance(record, dict):
        return None, "not a click (a JSON object)"
    task = tasks.get(record.get("task")) if isinstance(record.get("task"), str) else None
    if record.get("collection") != collection:
        return None, "a click of another collection"
    if task is None:
        return None, "a task this collection does not have"
    if any(record.get(k) != task[k] for k in ("dataset", "case", "target")):
        return None, "another case's or target's ids than its task's"
    if record.get("kind") != task["kind"] or _whole(record.get("step")) != task["click_step"]:
        return None, "another kind or step than its task's"
    zyx = [_whole(record.get(k)) for k in ("z", "y", "x")]
    if None in zyx:
        return None, "coordinates that are not whole numbers (NaN, text, fractions)"
    if not all(0 <= v < n for v, n in zip(zyx, task["shape"])):
        return None, "coordinates off the case's grid"
    label = _whole(record.get("label"))
    if label not in (0, 1):
        return None, "a label other than 1 (positive) or 0 (negative)"
    seconds = record.get("seconds")
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        return None, "a time to the click that is not a number"
    if not (math.isfinite(seconds) and seconds >= 0):
        return None, "a time to the click that is not finite and >= 0"
    rater = _text(record.get("rater"))
    if rater is None:
        return None, "no rater's name (or one with control characters)"
    visited = record.get("slices_visited", [])
    if not isinstance(visited, list) or any(
        _whole(z) is None or not 0 <= _whole(z) < task["shape"][0] for z in visited
    ):
        return None, "slices visited that are not slices of the case"
    window = record.get("window") if isinstance(record.get("window"), dict) else {}
    centre, width = window.get("centre"), window.get("width")
    finite = all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        for v in (centre, width)
    )
    if not finite or width <= 0:
        return None, "a window that is not a finite centre and width > 0"
    row = {
        "dataset": task["dataset"],
        "case": task["case"],
        "target": task["target"],
        "z": zyx[0],
        "y": zyx[1],
        "x": zyx[2],
        "step": task["click_step"],
        "label": label,
        "rater": rater,
        "seconds": float(seconds),
        "kind": task["kind"],
        "task": task["task"],
        "collection": collection,
        "window_centre": float(centre),
        "window_width": float(width),
        "window_name": _text(window.get("name"), 60) or "",
        "slices_visited": " ".join(str(_whole(z)) for z in visited),
        "input": _text(record.get("input"), 20) or "",
        "clicked_at": _text(record.get("clicked_at"), 40) or "",
    }
    return row, ""


def _file_records(path: Path, collection: str) -> tuple[list, str]:
    """The click records of one file, or ([], why the whole file is refused)."""
    try:
        size = path.stat().st_size
    except OSError as error:
        return [], f"cannot be read ({error.strerror or error})"
    if size > MAX_FILE_BYTES:
        return (
            [],
            f"{size / 2**20:.1f} MB, more than the {MAX_FILE_BYTES // 2**20} MB a click file may be",
        )
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError:
        return [], "not text (UTF-8)"
    except json.JSONDecodeError as error:
        return [], f"not JSON (line {error.lineno}: {error.msg})"
    except RecursionError:
        return [], "not JSON a click file can be (nested too deep)"
    except ValueError as error:  # e.g. an integer of more digits than Python converts
        return [], f"not JSON a click file can be ({str(error)[:80]})"
    if not isinstance(data, dict) or data.get("format") != CLICK_FORMAT:
        return [], f'not a click file of the click page (no "format": "{CLICK_FORMAT}")'
    if data.get("version") != CLICK_VERSION:
        return (
            [],
            f"click file version {data.get('version')!r}; this IntraBench reads {CLICK_VERSION}",
        )
    if data.get("collection") != collection:
        shown = str(data.get("collection"))[:40]
        return [], f"clicks of collection '{shown}', not of this one ('{collection}')"
    if not isinstance(data.get("clicks"), list):
        return [], 'its "clicks" is not a list'
    return data["clicks"], ""


def read_click_files(paths: list[str | Path], manifest: dict) -> ReadClicks:
    """Every click of ``paths`` checked against ``manifest``'s tasks (:func:`check_click`);
    a rater's task clicked in more than one file keeps its newest click (``clicked_at``).

    Args:
        paths: The files the page exported (JSON).
        manifest: The collection's manifest (:func:`~intrabench.people.clicks.build.read_manifest`).

    Returns:
        The clicks that fit, one row per (rater, task), and the counts and examples of those
        refused (whole files and single clicks).
    """
    collection = str(manifest["collection"])
    tasks = {str(t["task"]): t for t in manifest["tasks"]}
    result = ReadClicks(pd.DataFrame(columns=CSV_COLUMNS))
    rows = []
    for path in map(Path, paths):
        records, problem = _file_records(path, collection)
        if problem:
            result.files_refused.append(f"{path}: refused: {problem}")
            continue
        for number, record in enumerate(records, start=1):
            row, reason = check_click(record, tasks, collection)
            if row is None:
                result.refused[reason] += 1
                task = record.get("task") if isinstance(record, dict) else None
                where = f"{path.name}: click {number}" + (
                    f" ({str(task)[:40]})" if isinstance(task, str) else ""
                )
                result.examples.setdefault(reason, []).append(where)
                continue
            rows.append({**row, "file": str(path)})
    if rows:
        result.clicks = newest_per_task(pd.DataFrame(rows, columns=CSV_COLUMNS))
    return result


def newest_per_task(clicks: pd.DataFrame) -> pd.DataFrame:
    """One click per (rater, task): the newest (``clicked_at``; the later file's of ties).

    Args:
        clicks: Clicks with the :data:`CSV_COLUMNS`, in file order.

    Returns:
        The kept clicks, in their original order, index reset.
    """
    ordered = clicks.reset_index(drop=True).reset_index(names="_order")
    ordered = ordered.sort_values(["clicked_at", "_order"], kind="stable")
    kept = ordered.drop_duplicates(["collection", "rater", "task"], keep="last")
    return kept.sort_values("_order").drop(columns="_order").reset_index(drop=True)


def merge_earlier(clicks: pd.DataFrame, to: Path, collection: str) -> tuple[pd.DataFrame, int]:
    """``clicks`` with those of an earlier import into ``to`` (kept, a newer click of a rater's
    task replacing theirs).

    Args:
        clicks: The clicks read now.
        to: The clicks CSV of earlier imports; absent: nothing to merge.
        collection: The collection's id, which every earlier click must have.

    Returns:
        ``(clicks, how many earlier ones were kept)``.

    Raises:
        UserError: ``to`` cannot be read, or holds anything but this collection's clicks.
    """
    if not to.exists():
        return clicks, 0
    try:
        earlier = pd.read_csv(to, dtype={"dataset": str, "case": str, "target": str, "rater": str})
    except (ValueError, OSError) as error:
        raise UserError(f"--to {to}: exists and cannot be read as a clicks CSV ({error})") from None
    if "collection" not in earlier or set(earlier["collection"].astype(str)) - {collection}:
        raise UserError(
            f"--to {to}: exists and holds clicks of another collection or a file of its own; "
            "give a new path (nothing was written)"
        )
    earlier = earlier.reindex(columns=CSV_COLUMNS).assign(_earlier=True)
    earlier["clicked_at"] = earlier["clicked_at"].fillna("").astype(str)
    merged = newest_per_task(pd.concat([earlier, clicks.assign(_earlier=False)], ignore_index=True))
    kept = int(merged.pop("_earlier").astype(bool).sum())
    return merged, kept


def regions_with_clicks(clicks: pd.DataFrame, manifest: dict) -> tuple[int, int]:
    """(regions with at least one click, regions): a region is a target at a step of the
    ``recorded`` map (the tasks' ``click_step``).

    Args:
        clicks: The imported clicks.
        manifest: The collection's manifest (its tasks define the regions).

    Returns:
        ``(regions clicked, regions)``.
    """
    keys = ["dataset", "case", "target", "click_step"]
    regions = {tuple(str(t[k]) for k in keys) for t in manifest["tasks"]}
    clicked = {
        (str(r.dataset), str(r.case), str(r.target), str(int(r.step)))
        for r in clicks.itertuples(index=False)
    }
    return len(regions & clicked), len(regions)
