"""The registered prompters and refiners that simulate a user: the properties tested here
(clicks on the error, seeded draws, no correction of a perfect mask) are theirs. The
``recorded`` components replay a person's session instead (tests/people/test_replay.py)."""

from __future__ import annotations


def simulated(group) -> list[str]:
    """The names in registry ``group`` whose components do not replay people's sessions."""
    return [name for name in group.names() if not getattr(group.get(name), "replays_people", False)]
