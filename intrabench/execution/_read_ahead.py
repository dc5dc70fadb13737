"""The next groups' cases, read by reader workers while the model loop runs the current group.

Reading a case (decoding its files, finding its targets, measuring their attributes) takes
seconds for a CT volume, and the model loop would wait for it between two groups.
:class:`ReadAhead` hands the next group's case to the reader workers before the current group
runs, and, with several readers, the cases of the groups after it, as long as fewer cases are
read and not yet used than there are readers (so a reader never waits, and memory holds at
most that many unused cases). A case kept in memory (:mod:`._case_cache`) is not read again.

The readers are processes (CPU-bound decoding: a thread would hold the GIL) that import the
run's dataset modules only. A case whose reading kills a reader process (a file that crashes
the image library, memory running out) fails alone, in one line, and is not read again; a case
a reader cannot read for another reason (a plugin dataset the worker cannot import) is read in
the model loop instead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from concurrent.futures import Future

from intrabench import registry
from intrabench.config import RunConfig
from intrabench.engine.case_reader import load_case
from intrabench.engine.plan import WorkUnit
from intrabench.errors import DataError
from intrabench.execution._case_cache import CaseCache, CaseIdentity
from intrabench.execution.lanes import LaneMode, LanePool
from intrabench.execution.sizing import BACKGROUND_NICENESS, default_reader_workers
from intrabench.execution.subprocess_worker import WorkerDied
from intrabench.types import Case

#: the executor's logger: its warning names the executor, as the line always did
log = logging.getLogger("intrabench.execution.pipelined")


def identity_of(unit: WorkUnit) -> CaseIdentity:
    """The (dataset key, case id) of ``unit``'s case."""
    return (unit.dataset.key, unit.case_id)


def reader_pool(config: RunConfig, workers: int | None, background: LaneMode) -> LanePool:
    """The reader workers of a run of ``config``, each preloading its dataset modules only.

    Args:
        config: the run's config (its datasets name the modules to preload).
        workers: how many readers; None: the machine's default (:mod:`.sizing`).
        background: how the readers run (processes, threads or inline).

    Returns:
        The pool, not started yet.

    Raises:
        ValueError: ``workers`` is below 1.
    """
    workers = default_reader_workers() if workers is None else workers
    if workers < 1:
        raise ValueError("reader_workers must be >= 1")
    dataset_modules = sorted(
        {registry.datasets.get(spec.name).__module__ for spec in config.datasets}
    )
    return LanePool(
        workers,
        background,
        max_pending=1,
        name="intrabench-reader",
        preload=("intrabench.engine.case_reader", *dataset_modules),
        raise_failures=False,
        niceness=BACKGROUND_NICENESS,
        restarts=True,
    )


class ReadAhead:
    """The cases being read by the reader workers, by identity, and their consumption.

    ``cases`` is the executor's cache of cases in memory: a case kept there is not read again,
    and the one the next group will use (:attr:`wanted_next`) is not evicted for another.
    Iterating gives the identities of the cases being read and not yet taken.
    """

    def __init__(self, config: RunConfig, readers: LanePool, cases: CaseCache) -> None:
        self.config = config
        self.readers = readers
        self._cases = cases
        self._reading: dict[CaseIdentity, Future] = {}
        #: cases whose reading killed a reader process: why (they are not read again)
        self._deaths: dict[CaseIdentity, str] = {}
        #: a case kept in memory that the next group will use
        self.wanted_next: CaseIdentity | None = None

    def __iter__(self) -> Iterator[CaseIdentity]:
        return iter(list(self._reading))

    def __len__(self) -> int:
        return len(self._reading)

    def reading(self, identity: CaseIdentity) -> Future | None:
        """The read of the case ``identity`` under way, or None when it is not being read."""
        return self._reading.get(identity)

    def start(self, groups: list[list[WorkUnit]]) -> None:
        """At the start of a run: reader processes take the first group's case too (the loop
        then waits for it, see :meth:`take`); with several readers, the next groups' cases
        start now, beside the first case's reading and the first model's build (on small
        machines that took cores from the start: the 2-core demo was longer)."""
        if self.readers.mode == "process":
            self._submit(groups[0][0])
        if len(self.readers) > 1:
            self.read_ahead_of(groups, 0)

    def read_ahead(self, unit: WorkUnit, current: WorkUnit | None = None) -> None:
        """Start reading ``unit``'s case, unless it is the case of ``current`` (the group about
        to run) or a case kept in memory, which is reused."""
        identity = identity_of(unit)
        if current is not None and identity_of(current) == identity:
            return
        if identity in self._cases:
            self.wanted_next = identity  # not evicted by the case about to be read
            return
        if identity not in self._reading:
            self._submit(unit)

    def read_ahead_of(self, groups: list[list[WorkUnit]], index: int) -> None:
        """Before group ``index`` runs: read the next group's case ahead (:meth:`read_ahead`),
        then the cases of the groups after it, while fewer cases are read and not yet used
        than there are readers. Cases kept in memory are not read again."""
        if index + 1 >= len(groups):
            return
        current = groups[index][0]
        self.read_ahead(groups[index + 1][0], current=current)
        for group in groups[index + 2 :]:
            if len(self._reading) >= len(self.readers):
                return
            identity = identity_of(group[0])
            if (
                identity == identity_of(current)
                or identity in self._cases
                or identity in self._reading
            ):
                continue
            self._submit(group[0])

    def _submit(self, unit: WorkUnit) -> None:
        spec = unit.dataset
        self._reading[identity_of(unit)] = self.readers.submit(
            load_case,
            list(self.config.imports),
            spec.name,
            dict(spec.params),
            unit.case_id,
            self.config.target_attributes,
        )

    def used(self, identity: CaseIdentity) -> None:
        """The case ``identity`` is taken by its group: it is no longer the one wanted next."""
        if identity == self.wanted_next:
            self.wanted_next = None

    def take(self, unit: WorkUnit, read_here: Callable[[], Case]) -> Case:
        """``unit``'s case from a reader process (read ahead, or now), or ``read_here()`` when
        the readers are threads or could not read it.

        Raises:
            DataError: the case cannot be read, or its reading killed a reader process (now
                or before: it is not read again, it would take the run down).
        """
        identity = identity_of(unit)
        if identity in self._deaths:
            raise DataError(self._deaths[identity])
        if identity not in self._reading and self.readers.mode == "process":
            self._submit(unit)
        future = self._reading.pop(identity, None)
        if future is not None:
            try:
                return future.result()
            except DataError:
                raise
            except WorkerDied as error:
                death = self._deaths[identity] = (
                    f"the process reading this case died ({error}): a file of it crashes "
                    "the image reader, or memory ran out"
                )
                raise DataError(death) from None
            except Exception as error:  # e.g. a plugin dataset the worker cannot import
                log.warning(
                    "reading %s/%s ahead failed (%s: %s); reading it here",
                    unit.dataset.key,
                    unit.case_id,
                    type(error).__name__,
                    error,
                )
        return read_here()
