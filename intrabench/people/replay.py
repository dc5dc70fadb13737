"""Replaying people's sessions on any model: the same human interactions, another model.

A session (:mod:`intrabench.people.session_log`) holds what one person did on one target: its
effective interactions (undo applied) in order. Replaying it on a model gives the model the
session's first interaction exactly (the initial prompt, step 0), then its corrections as
recorded, one per step, for the first ``k`` of them (``k=None``: all). A correction the model
cannot take (LiteMedSAM takes boxes only, a person clicked) ends the replay there; what was
replayed is said in every row (``replayed``: ``initial + 2 of 3 corrections``, and why it
stopped).

Masks are boolean (z, y, x) arrays on the case's canonical grid; prompts are voxel indices
(z, y, x), boxes inclusive, as everywhere in IntraBench.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from intrabench.errors import DataError, UserError
from intrabench.people.session_log import Session, read_session

if TYPE_CHECKING:
    import pandas as pd

    from intrabench.interfaces import Model
    from intrabench.types import Case, Prompt

#: a target as sessions and runs name it: (dataset, case id, target id)
Identity = tuple[str, str, str]


def identity_of(session: Session) -> Identity:
    """(dataset, case id, target id) of a session's target.

    Args:
        session: A recorded session (its header names the target).

    Returns:
        The three ids as text.
    """
    header = session.header
    return (str(header["dataset"]), str(header["case_id"]), str(header["target"]))


@dataclass
class SessionLibrary:
    """The sessions read from files or folders, by target; ``problems``: one line per file
    that was not read (not a session log) or per line skipped in one that was."""

    sessions: list[Session] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @classmethod
    def read(cls, paths: Iterable[str | Path]) -> SessionLibrary:
        """Every ``*.jsonl`` session log in ``paths`` (files, or folders read one level
        deep, in name order).

        Args:
            paths: Session log files and folders holding them (``~`` expanded).

        Returns:
            The library, its sessions sorted by target identity then session id; a file that is
            not a session log, a log without an interaction left and its lines that are not
            valid are kept as its problems (one line each), not raised.

        Raises:
            UserError: A folder without logs or a missing path.
        """
        library = cls()
        for given in paths:
            path = Path(given).expanduser()
            if path.is_dir():
                files = sorted(path.glob("*.jsonl"))
                if not files:
                    raise UserError(f"{path}: no session logs (*.jsonl) in this folder")
            elif path.is_file():
                files = [path]
            else:
                raise UserError(f"{path}: no such session log or folder")
            for file in files:
                library._add(file)
        library.sessions.sort(key=lambda s: (identity_of(s), str(s.header["session_id"])))
        return library

    def _add(self, file: Path) -> None:
        try:
            session = read_session(file)
        except DataError as error:
            self.problems.append(str(error))
            return
        self.problems.extend(f"{file}: {problem}" for problem in session.problems)
        if not session.effective_interactions():
            self.problems.append(f"{file}: no interaction left once undos are applied; not used")
            return
        self.sessions.append(session)

    def targets(self) -> set[Identity]:
        """The targets that have at least one session.

        Returns:
            Their (dataset, case id, target id) identities.
        """
        return {identity_of(session) for session in self.sessions}

    def find(
        self, identity: Identity, rater: str | None = None, session_id: str | None = None
    ) -> Session | None:
        """The session of ``identity`` (by ``rater`` or ``session_id`` when given; else the
        first by session id), None when there is none.

        Args:
            identity: (dataset, case id, target id).
            rater: Only this rater's session; None: any rater.
            session_id: Only this session; None: any.

        Returns:
            The first matching session in the library's order, or None.
        """
        for session in self.sessions:
            if identity_of(session) != tuple(identity):
                continue
            if rater is not None and session.header["rater"] != rater:
                continue
            if session_id is not None and session.header["session_id"] != session_id:
                continue
            return session
        return None


# -- what a model can replay --------------------------------------------------------------
def unaccepted(prompt: Prompt, accepts: frozenset[str]) -> set[str]:
    """The kinds of ``prompt`` a model that accepts ``accepts`` cannot take (a scribble
    reaches a point model as points, as in a run).

    Args:
        prompt: One recorded interaction.
        accepts: The model's accepted prompt kinds (``"points"``, ``"box2d"``, ...).

    Returns:
        The kinds it cannot take; empty when it takes them all.
    """
    from intrabench.interfaces import _unaccepted

    return _unaccepted(prompt.kinds, frozenset(accepts))


@dataclass(frozen=True)
class ReplayPlan:
    """What of a session a model replays: the initial prompt (or not: ``reason``) and the
    first ``corrections`` of the session's ``recorded`` corrections."""

    replays_initial: bool
    corrections: int
    recorded: int
    reason: str = ""

    @property
    def text(self) -> str:
        """``initial + 2 of 3 corrections`` [``; stopped: ...``], or ``nothing; ...``."""
        if not self.replays_initial:
            return f"nothing; {self.reason}"
        said = f"initial + {self.corrections} of {self.recorded} corrections"
        return f"{said}; {self.reason}" if self.reason else said


def replay_plan(
    prompts: Sequence[Prompt], accepts: frozenset[str], model: str, k: int | None = None
) -> ReplayPlan:
    """Which of ``prompts`` (a session's, initial first) a model replays: the initial prompt
    when it takes its kinds, then the corrections in order up to ``k`` (None: all), stopping
    at the first the model cannot take.

    Args:
        prompts: The session's interactions, the initial prompt first.
        accepts: The model's accepted prompt kinds.
        model: The model's key, for the reason's text.
        k: The most corrections to replay (0 or more); None: all recorded.

    Returns:
        Whether the initial prompt is replayed, how many corrections, of how many recorded, and
        why fewer (empty when all).

    Raises:
        UserError: ``k`` is negative.
    """
    if k is not None and k < 0:
        raise UserError(f"k (the corrections replayed) must be 0 or more, not {k}")
    recorded = max(0, len(prompts) - 1)
    if not prompts:
        return ReplayPlan(False, 0, 0, "the session has no interaction")
    missing = unaccepted(prompts[0], accepts)
    if missing:
        return ReplayPlan(False, 0, recorded, f"{model} does not take {_kinds(missing)}")
    wanted = recorded if k is None else min(k, recorded)
    for index in range(1, wanted + 1):
        missing = unaccepted(prompts[index], accepts)
        if missing:
            return ReplayPlan(
                True,
                index - 1,
                recorded,
                f"stopped at correction {index}: {model} does not take {_kinds(missing)}",
            )
    reason = f"k={k}" if wanted < recorded else ""
    return ReplayPlan(True, wanted, recorded, reason)


def _kinds(kinds: set[str]) -> str:
    return ", ".join(sorted(kinds))


# -- replaying ------------------------------------------------------------------------------
def replay_session(
    session: Session, case: Case, model: Model, model_key: str, k: int | None = None
) -> list[dict[str, Any]]:
    """The rows of ``session`` replayed on ``model`` (its case already set to ``case``): one
    per step, with the Dice against the case's reference; one row with ``replayed`` saying
    why when the model takes nothing of it.

    Args:
        session: A recorded session.
        case: Its case, loaded.
        model: A built model whose case is already ``case``.
        model_key: The model's key in the rows.
        k: The most corrections to replay; None: all the model can take.

    Returns:
        One dict per step: session id, rater, the target's ids, model, ``step``, ``dice`` (0-1;
        NaN when nothing is replayed), cumulative ``effort``, the step's prompt ``kind``, and
        what was replayed (``replayed``, ``replayed_corrections``, ``recorded_corrections``).

    Raises:
        DataError: The case has no target of the session's id.
    """
    from intrabench import registry
    from intrabench.engine.episode import run_episode

    identity = identity_of(session)
    target = next((t for t in case.targets if t.target_id == identity[2]), None)
    if target is None:
        raise DataError(
            f"{session.path}: case {identity[1]} of {identity[0]} has no target "
            f"{identity[2]!r} (its targets: {', '.join(t.target_id for t in case.targets)})"
        )
    prompts = session.prompts()
    plan = replay_plan(prompts, frozenset(model.accepts), model_key, k)
    base = {
        "session_id": session.header["session_id"],
        "rater": session.header["rater"],
        "dataset": identity[0],
        "case": identity[1],
        "target": identity[2],
        "model": model_key,
        "replayed": plan.text,
        "replayed_corrections": plan.corrections,
        "recorded_corrections": plan.recorded,
    }
    if not plan.replays_initial:
        return [{**base, "step": 0, "dice": float("nan"), "effort": 0, "kind": ""}]
    library = SessionLibrary(sessions=[session])
    results = run_episode(
        case,
        target,
        model,
        registry.prompters.get("recorded").of(library),  # type: ignore[attr-defined]
        "recorded",
        (
            registry.refiners.get("recorded").of(library, plan.corrections)  # type: ignore[attr-defined]
            if plan.corrections
            else None
        ),
        f"recorded(k={plan.corrections})",
        steps=plan.corrections,
        keep_previous_prompts=True,
    )
    return [
        {
            **base,
            "step": result.step,
            "dice": float(result.metrics["dice"]),
            "effort": int(result.cumulative_effort),
            "kind": _kind(prompts[result.step]) if result.step < len(prompts) else "",
        }
        for result in results
    ]


def _kind(prompt: Prompt) -> str:
    return ",".join(sorted(prompt.kinds))


@dataclass
class ReplayResult:
    """The replay's rows, and the targets of the replayed cases that had no session
    (``skipped_targets``: skipped, counted), and ``problems`` (lines)."""

    rows: pd.DataFrame
    skipped_targets: int
    problems: list[str]


def replay_library(
    library: SessionLibrary,
    cases: Mapping[tuple[str, str], Case],
    models: Mapping[str, Model],
    k: int | None = None,
) -> ReplayResult:
    """Every session of ``library`` on every model; targets of those cases without a session
    are not run, and are counted.

    Args:
        library: The recorded sessions.
        cases: The sessions' cases by (dataset, case id).
        models: Built models by key, each ready for ``set_case``.
        k: The most corrections replayed per session; None: all the model can take.

    Returns:
        The rows of :func:`replay_session` for every session and model, the count of targets
        without a session (``skipped_targets``) and the problems (one line each: logs' lines
        refused, sessions without a case).

    Raises:
        DataError: A session's target is not in its case, or its grid differs from the case's.
    """
    import pandas as pd

    from intrabench.engine.resources import timed_set_case

    rows: list[dict[str, Any]] = []
    problems = list(library.problems)
    by_case: dict[tuple[str, str], list[Session]] = {}
    for session in library.sessions:
        by_case.setdefault(identity_of(session)[:2], []).append(session)
    skipped = 0
    for key, sessions in by_case.items():
        case = cases.get(key)
        if case is None:
            problems.append(f"{len(sessions)} session(s) of {key[0]}/{key[1]}: no such case")
            continue
        _check_grid(sessions, case)
        covered = {identity_of(session)[2] for session in sessions}
        skipped += sum(1 for target in case.targets if target.target_id not in covered)
        for model_key, model in models.items():
            timed_set_case(model, case)
            for session in sessions:
                rows.extend(replay_session(session, case, model, model_key, k))
    return ReplayResult(pd.DataFrame(rows), skipped, problems)


def _check_grid(sessions: Sequence[Session], case: Case) -> None:
    """A session made on another grid is another case's: refused, one line."""
    shape = tuple(int(v) for v in case.label.shape)
    for session in sessions:
        if tuple(session.header["shape"]) != shape:
            raise DataError(
                f"{session.path}: the session's grid {list(session.header['shape'])} is not "
                f"case {case.case_id}'s {list(shape)} (a session of another case?)"
            )
