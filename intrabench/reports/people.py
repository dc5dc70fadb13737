"""People's sessions beside the simulated user, for ``intrabench tables`` and the report.

A run "has people's sessions" when its folder holds ``sessions/*.jsonl`` (session logs,
:mod:`intrabench.people.session_log`); replays of them on other models
(``intrabench people replay``) are read from ``people/replays.csv`` when it is there. The
statistics are :mod:`intrabench.people.versus`'s (defined in docs/measuring-people.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from intrabench.display_text import spreadsheet_safe

if TYPE_CHECKING:
    import pandas as pd

    from intrabench.people.versus import Comparison

#: where a run keeps people's sessions, and the replays of them
SESSIONS_FOLDER = "sessions"
REPLAYS_FILE = Path("people") / "replays.csv"


def has_sessions(run_dir: str | Path) -> bool:
    """Whether the run folder holds people's session logs.

    Args:
        run_dir: The run directory.

    Returns:
        True when its sessions folder holds a ``.jsonl`` log.
    """
    folder = Path(run_dir) / SESSIONS_FOLDER
    return folder.is_dir() and any(folder.glob("*.jsonl"))


def run_comparison(
    run_dir: str | Path, rows: pd.DataFrame, threshold: float = 0.8
) -> Comparison | None:
    """The comparison of the run's sessions with its simulated users and the replays.

    Args:
        run_dir: The run directory (its sessions, replays and time model are read).
        rows: The run's result rows.
        threshold: The Dice to reach (0-1).

    Returns:
        The comparison, or None when the run has no sessions.

    Raises:
        UserError: A session's dataset or case cannot be found.
    """
    import pandas as pd

    from intrabench.people.cases import references, session_cases
    from intrabench.people.replay import SessionLibrary
    from intrabench.people.versus import compare
    from intrabench.timing.table import run_time_model

    run_dir = Path(run_dir)
    if not has_sessions(run_dir):
        return None
    library = SessionLibrary.read([run_dir / SESSIONS_FOLDER])
    if not library.sessions:
        return None
    cases = session_cases(library, run_dir)
    replays = None
    if (run_dir / REPLAYS_FILE).is_file():
        replays = pd.read_csv(run_dir / REPLAYS_FILE, dtype={"case": str, "target": str})
    return compare(
        library, references(library, cases), rows, run_time_model(run_dir), replays, threshold
    )


def write_people_tables(comparison: Comparison, out: Path) -> list[Path]:
    """``people.md`` / ``people.csv`` (the table), ``people-shift.csv``,
    ``people-seconds.csv`` and ``people-clicks.csv`` in ``out``.

    Args:
        comparison: The comparison (:func:`run_comparison`).
        out: The tables folder (created).

    Returns:
        The paths written, ``people.md`` first.
    """
    from intrabench.evaluation.aggregate import to_markdown

    out.mkdir(parents=True, exist_ok=True)
    table = comparison.table()
    paths = [out / "people.md", out / "people.csv"]
    paths[0].write_text(f"{people_title(comparison)}\n\n{to_markdown(table)}\n", encoding="utf-8")
    for name, frame in (
        ("people.csv", table),
        ("people-shift.csv", comparison.shift),
        ("people-seconds.csv", comparison.seconds),
        ("people-clicks.csv", comparison.clicks),
    ):
        spreadsheet_safe(frame, escape=True).to_csv(out / name, index=False, float_format="%.6f")
        if out / name not in paths:
            paths.append(out / name)
    return paths


def people_title(comparison: Comparison) -> str:
    """The Markdown heading of the people-versus-simulated-user section, with its Dice threshold.

    Args:
        comparison: The comparison.

    Returns:
        The heading line (``## ...``).
    """
    return (
        f"## People beside the simulated user (Dice x100 per step on the targets with a "
        f"session; reach = Dice >= {comparison.threshold:g})"
    )


def dice_figure(comparison: Comparison) -> bytes:
    """Dice x100 per step, one panel per model: people (black, thick), each simulated user,
    the replays (dashed).

    Args:
        comparison: The comparison.

    Returns:
        The figure as PNG bytes.
    """
    from intrabench.people.versus import PEOPLE, REPLAYED
    from intrabench.plotting import panel_grid, png_bytes

    curves = comparison.curves
    models = sorted(set(curves["model"]))
    figure, axes = panel_grid(len(models), 3, 4.2, 3.2)
    for axis, model in zip(axes, models):
        part = curves[curves["model"] == model]
        for user in sorted(set(part["user"]), key=lambda u: (u != PEOPLE, u)):
            line = part[part["user"] == user]
            style = {"color": "black", "linewidth": 2.5} if user == PEOPLE else {}
            if user == REPLAYED:
                style = {"linestyle": "--", "color": "tab:gray"}
            axis.plot(line["step"], 100 * line["dice"], marker="o", label=user, **style)
        axis.set_title(model, fontsize=9)
        axis.set_xticks(range(comparison.n_steps))
        axis.set_xlabel("step (0: initial prompt)")
        axis.set_ylabel("Dice x100")
        axis.set_ylim(0, 100)
        axis.legend(fontsize=7)
    return png_bytes(figure)


def report_section(
    run_dir: str | Path, rows: pd.DataFrame
) -> tuple[list[tuple[str, str, bytes]], list[str]]:
    """The report's figures (name, caption, PNG) and HTML for people's sessions; nothing
    when the run has none.

    Args:
        run_dir: The run directory.
        rows: The run's result rows.

    Returns:
        ``(figures, html parts)``: each figure as (name, caption, PNG bytes); both empty
        without sessions.
    """
    import html

    comparison = run_comparison(run_dir, rows)
    if comparison is None:
        return [], []
    figure = (
        "people-vs-simulated",
        "Dice x100 per step on the targets people segmented: people with the model they "
        "used live (black), the run's simulated users on the same targets, and the "
        "sessions replayed on other models (dashed). A session that ended keeps its last "
        "Dice.",
        dice_figure(comparison),
    )
    seconds = comparison.seconds.round(2)
    parts = [
        "<h2>People beside the simulated user</h2>",
        "<p class='explain'>"
        + html.escape(people_title(comparison).removeprefix("## "))
        + ". Dice shift: mean simulated Dice minus mean people's Dice over the steps, on "
        "the same targets and model (positive: the simulation overestimates). Definitions: "
        "docs/measuring-people.md.</p>",
        comparison.table().to_html(index=False, na_rep="", border=0),
        "<h3>Seconds per interaction kind (people)</h3>",
        "<p class='explain'>Mean seconds from the mask on screen to the interaction, 95% "
        "t interval, beside the run's time model's seconds (time_model); "
        "<code>intrabench people seconds</code> writes them as the time model's "
        "<code>seconds:</code>.</p>",
        seconds.to_html(index=False, na_rep="", border=0),
    ]
    if not comparison.clicks.empty:
        from intrabench.people.versus import click_shift

        shift = click_shift(comparison.clicks)
        parts += [
            "<h3>Where correction clicks fall</h3>",
            "<p class='explain'>"
            + html.escape(
                f"{shift['clicks']} correction clicks. Distance to the error's border: people "
                f"{shift['people_border_mm']:.2f} mm, simulated {shift['simulated_border_mm']:.2f} "
                f"mm (W1 {shift['border_w1_mm']:.2f} mm); to its centre: people "
                f"{shift['people_centre_mm']:.2f} mm, simulated "
                f"{shift['simulated_centre_mm']:.2f} mm (W1 {shift['centre_w1_mm']:.2f} mm)."
            )
            + "</p>",
        ]
    return [figure], parts
