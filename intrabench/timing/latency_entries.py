"""A latency table's entries, checked: per model, seconds for a case's first call, every later
one, or per interaction kind; each a finite number of seconds in a plausible range. Used where
a table is read (a file, :mod:`intrabench.timing.waiting`) and where a config writes one inline
(:class:`intrabench.timing.human.TimeModel`); it imports neither.
"""

from __future__ import annotations

from typing import Any

from intrabench.errors import UserError

#: the keys of a model's latency entry: a case's first call, every later one, per kind
LATENCY_KEYS = ("first", "warm", "click", "box2d", "box3d", "scribble", "boundary_slice", "lasso")
#: the longest latency a table may give (an hour): a larger one is a mistake, not a model
MAX_LATENCY_SECONDS = 3600.0


def checked_entries(models: Any, where: str) -> dict[str, dict[str, float]]:
    """``{model: {key: seconds}}`` with every key one of :data:`LATENCY_KEYS` and every value a
    finite number of seconds in 0..:data:`MAX_LATENCY_SECONDS`; UserError naming the first
    that is not (a negative latency would give negative waiting, NaN or infinity a waiting of 0
    and an AUC of 0, and a misspelt kind would be ignored).

    Args:
        models: The table's ``models`` mapping as read (from a file or a config).
        where: Where it came from, to start the error line (e.g. a file path).

    Returns:
        Model name to latency kind (``first``, ``warm`` or an interaction kind) to seconds.

    Raises:
        UserError: The mapping, a key or a value is not as above.
    """
    import math

    if not isinstance(models, dict):
        raise UserError(
            f"{where}: expected {{model: {{first: s, warm: s, ...}}}}, not {type(models).__name__}"
        )
    checked: dict[str, dict[str, float]] = {}
    for model, entry in models.items():
        if not isinstance(entry, dict):
            raise UserError(
                f"{where}: {model}: expected {{first: s, warm: s, ...}}, not {type(entry).__name__}"
            )
        checked[str(model)] = {}
        for key, value in entry.items():
            if key not in LATENCY_KEYS:
                raise UserError(
                    f"{where}: {model}: unknown key '{key}'; valid: {', '.join(LATENCY_KEYS)}"
                )
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not (math.isfinite(value) and 0 <= value <= MAX_LATENCY_SECONDS)
            ):
                shown = repr(value)[:40]
                raise UserError(
                    f"{where}: {model}.{key} = {shown}: a latency is a number of "
                    f"seconds from 0 to {MAX_LATENCY_SECONDS:g}"
                )
            checked[str(model)][key] = float(value)
    return checked
