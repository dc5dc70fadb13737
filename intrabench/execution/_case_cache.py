"""The cases a run keeps in memory after their group ends, so that the next model reuses them.

Units run model-major (one model in memory at a time), so with several models every case comes
back once per model. Reading a CT case again costs seconds of decoding, hashing and target
search, each read competing with the model loop for the CPU. :class:`CaseCache` keeps the most
recently used cases up to a byte budget: a run whose cases fit reads each once; a larger one
reads the cases that did not fit again. The case in use is always kept.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from intrabench.types import Case

CaseIdentity = tuple[str, str]  # (dataset key, case id)


def default_budget_bytes(share: int = 8) -> int:
    """One ``share``-th of the machine's physical memory (4 GiB where it cannot be read)."""
    from intrabench.io.machine import physical_memory_bytes

    total = physical_memory_bytes()
    return 4 << 30 if total is None else total // share


def case_bytes(case: Case) -> int:
    """The bytes of a case's image and label arrays."""
    return int(np.asarray(case.image.array).nbytes + np.asarray(case.label).nbytes)


class CaseCache:
    """Least-recently-used cases within ``budget_bytes`` (the newest one always kept)."""

    def __init__(self, budget_bytes: int | None = None) -> None:
        self.budget_bytes = default_budget_bytes() if budget_bytes is None else budget_bytes
        self._cases: OrderedDict[CaseIdentity, Case] = OrderedDict()
        self._bytes: dict[CaseIdentity, int] = {}

    def __contains__(self, identity: CaseIdentity) -> bool:
        return identity in self._cases

    def get(self, identity: CaseIdentity) -> Case | None:
        """The case, marked as most recently used, or None."""
        case = self._cases.get(identity)
        if case is not None:
            self._cases.move_to_end(identity)
        return case

    def put(self, identity: CaseIdentity, case: Case, keep: CaseIdentity | None = None) -> None:
        """Keep ``case`` as the most recently used; the least recently used others go while
        over the budget, except ``keep`` (a case the caller was told is here)."""
        self._cases[identity] = case
        self._cases.move_to_end(identity)
        self._bytes[identity] = case_bytes(case)
        for older in list(self._cases)[:-1]:
            if sum(self._bytes.values()) <= self.budget_bytes:
                break
            if older != keep:
                del self._cases[older], self._bytes[older]

    def clear(self) -> None:
        """Let every case go."""
        self._cases.clear()
        self._bytes.clear()

    def identities(self) -> list[CaseIdentity]:
        """The cases held, least recently used first."""
        return list(self._cases)
