"""``recorded``: a person's session replayed as the prompts of an episode (docs/measuring-people.md).

The ``recorded`` prompter gives the first effective interaction of the target's session
(:mod:`intrabench.people.session_log`) exactly; the ``recorded`` refiner gives its
corrections as recorded, one per step, for the first ``k`` (None: all), then nothing (the
episode stops, as a simulated user with nothing left to correct). Both find the session by the
episode's (dataset, case, target); a target without a session is refused in one line, so
replay with ``intrabench people replay``, which runs only the targets that have one and
counts the others. Effort is counted from the recorded interactions (click 1, 2D box 2, 3D box
3, scribble 3, lasso 3). Voxel indices (z, y, x), boxes inclusive.
"""

from __future__ import annotations

from typing import ClassVar

from intrabench.errors import UserError
from intrabench.interfaces import PromptContext, Prompter, RefineContext, Refiner
from intrabench.people.replay import SessionLibrary
from intrabench.people.session_log import Session
from intrabench.registry import prompters, refiners
from intrabench.types import Prompt


class _SessionsOf:
    """The session of an episode's target, from a library read once."""

    def __init__(
        self, sessions: str | list[str] | None, rater: str | None, session_id: str | None
    ) -> None:
        self.rater = rater
        self.session_id = session_id
        self.library: SessionLibrary | None = None
        if sessions is not None:
            self.library = SessionLibrary.read(
                [sessions] if isinstance(sessions, str) else sessions
            )

    def session(self, identity: tuple[str, str, str]) -> Session:
        found = None
        if self.library is not None:
            found = self.library.find(identity, self.rater, self.session_id)
        if found is None:
            who = f" by rater {self.rater!r}" if self.rater else ""
            raise UserError(
                f"no recorded session{who} for {'/'.join(identity)}; replay with "
                "`intrabench people replay`, which runs only the targets that have one"
            )
        return found


@prompters.register
class RecordedPrompter(Prompter):
    """The session's first interaction, exactly (see the module docstring)."""

    name: ClassVar[str] = "recorded"
    dimensions: ClassVar[frozenset[int]] = frozenset({2, 3})
    kinds: ClassVar[frozenset[str]] = frozenset()  # whatever the person did
    #: it replays what a person did: a simulated user's properties (clicks on the error,
    #: seeded draws) are not promised, and it needs a session file
    replays_people: ClassVar[bool] = True
    effort_rule: ClassVar[str] = "as recorded: click=1, box2d=2, box3d=3, scribble=3, lasso=3"

    def __init__(
        self,
        sessions: str | list[str] | None = None,
        rater: str | None = None,
        session_id: str | None = None,
    ) -> None:
        self._sessions = _SessionsOf(sessions, rater, session_id)

    @classmethod
    def of(cls, library: SessionLibrary) -> RecordedPrompter:
        """The prompter replaying the sessions of ``library`` (already read).

        Args:
            library: The recorded sessions, read.

        Returns:
            The prompter, using ``library`` instead of reading a folder.
        """
        prompter = cls()
        prompter._sessions.library = library
        return prompter

    def initial(self, context: PromptContext) -> Prompt:
        """The first interaction of the target's recorded session, as recorded.

        Args:
            context: The episode's target; only ``context.ground_truth`` (bool (z, y, x)) and its
                spacing (mm, (z, y, x)) are read, never the image.

        Returns:
            The prompt in canonical (z, y, x) voxels; an empty prompt for an empty target.
        """
        return _labelled(self._sessions.session(context.identity).prompts()[0])


@refiners.register
class RecordedCorrections(Refiner):
    """The session's corrections as recorded, the first ``k`` (see the module docstring)."""

    name: ClassVar[str] = "recorded"
    dimensions: ClassVar[frozenset[int]] = frozenset({2, 3})
    kinds: ClassVar[frozenset[str]] = frozenset()
    #: it replays what a person did: a simulated user's properties (clicks on the error,
    #: seeded draws) are not promised, and it needs a session file
    replays_people: ClassVar[bool] = True
    effort_rule: ClassVar[str] = "as recorded: click=1, box2d=2, box3d=3, scribble=3, lasso=3"

    def __init__(
        self,
        sessions: str | list[str] | None = None,
        k: int | None = None,
        rater: str | None = None,
        session_id: str | None = None,
    ) -> None:
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 0):
            raise UserError(f"k (the corrections replayed) must be a whole number >= 0, not {k!r}")
        self.k = k
        self._sessions = _SessionsOf(sessions, rater, session_id)

    @classmethod
    def of(cls, library: SessionLibrary, k: int | None = None) -> RecordedCorrections:
        """The refiner replaying the first ``k`` corrections of the sessions of ``library``.

        Args:
            library: The recorded sessions, read.
            k: How many corrections to replay; None for all of them.

        Returns:
            The refiner, using ``library`` instead of reading a folder.
        """
        refiner = cls(k=k)
        refiner._sessions.library = library
        return refiner

    def refine(self, context: RefineContext) -> Prompt | None:
        """The session's next recorded correction.

        Args:
            context: The step's ground truth and prediction (bool (z, y, x)), spacing (mm) and rng.

        Returns:
            The new interactions in canonical (z, y, x) voxels, or None when nothing is left to
            correct.
        """
        if self.k is not None and context.step > self.k:
            return None
        prompts = self._sessions.session(context.identity).prompts()
        return _labelled(prompts[context.step]) if context.step < len(prompts) else None


def _labelled(prompt: Prompt) -> Prompt:
    from dataclasses import replace

    return replace(prompt, effort_label=str(prompt.effort))
