"""``intrabench run --dry-run``: what a run would do, without loading a model or an image.

Prints the work units per model and dataset (and how many are already done in the run folder),
the incompatible combinations that would be skipped with their reasons, and the cost in
forward passes per target (the initial prompt plus each refinement step; 2D models make one
decoder call per prompted slice within each), and the time the units left would take by this
machine's record of earlier runs (the progress line's ETA before the first unit: see
:mod:`intrabench.execution.eta`), saying which models have no record (no guess is made for them).
"""

from __future__ import annotations

from pathlib import Path

from intrabench import registry
from intrabench.config import RunConfig
from intrabench.engine.plan import make_plan
from intrabench.io.results import ResultsStore
from intrabench.wording import counted


def print_time_estimate(pending: list) -> None:
    """The time ``pending`` units would take on this machine, as the run's first progress line
    would estimate it (the record of earlier runs, builds and warm-ups included), or why there
    is none.

    Args:
        pending: The work units still to run; nothing is printed when there are none.
    """
    import io

    from intrabench.execution.eta import UnitCosts, read_record
    from intrabench.execution.progress import RunProgress, format_seconds

    if not pending:
        return
    costs = UnitCosts(read_record())
    progress = RunProgress(
        pending, stream=io.StringIO(), heartbeat=False, costs=costs, remember=False
    )
    eta, untimed = progress.eta(), progress.untimed()
    load = costs.recorded_load(sorted({key[0] for key in progress.remaining}))
    progress.close()
    names = ", ".join(untimed)
    if eta is None:
        print(
            f"\ntime: no estimate yet: {counted(len(untimed), 'model')} never ran this work "
            f"on this machine ({names}); the run times them, and later runs and dry runs use "
            "that"
        )
    elif untimed:
        print(
            f"\ntime: about {format_seconds(eta)} for the models this machine has timed, "
            f"plus {counted(len(untimed), 'model')} not timed yet ({names}): a lower bound; "
            f"{load_note(load)}"
        )
    else:
        print(
            f"\ntime: about {format_seconds(eta)} (estimated from this machine's record of "
            f"earlier runs; {load_note(load)})"
        )


#: a load average per core above this while a model ran means other work shared the machine
#: (a run's own processes load a 2-core machine to about 1-1.5 per core)
BUSY_LOAD_PER_CORE = 1.5


def load_note(recorded: float | None, now: float | None = None, cores: int | None = None) -> str:
    """What load the estimate comes from: the record's load average (per core, the highest of
    the models') against the machine's now. Never "an idle machine" unless it was one (a record
    made under a high load is said to be one).

    Args:
        recorded: The record's 1-minute load average per core, or None when it has none.
        now: The load average per core now; None reads it (``os.getloadavg``).
        cores: The machine's CPU cores; None counts them.

    Returns:
        The note, one clause: the recorded load and the load now, as whole-machine load
        averages.
    """
    import os

    cores = cores or os.cpu_count() or 1
    if now is None:
        try:
            now = os.getloadavg()[0] / cores
        except (AttributeError, OSError):
            now = None
    current = "" if now is None else f"; load now {now * cores:.1f}"
    if recorded is None:
        return f"the record does not say at what load it was measured{current}"
    if recorded > BUSY_LOAD_PER_CORE:
        return (
            f"measured on a busy machine, load {recorded * cores:.1f} on {cores} cores"
            f"{current}: a quieter machine runs it faster"
        )
    return f"measured at load {recorded * cores:.1f} on {cores} cores{current}"


def print_dry_run(config: RunConfig, out: Path, extend: bool = False) -> int:
    """Print the plan of ``config`` into run folder ``out``; returns 0 (2 if nothing to run).
    A refusal the real run would meet there (a folder with foreign files, another run's name,
    a changed config without ``extend``) is printed first, as a warning.

    Args:
        config: The run's config.
        out: The run folder the run would write (its finished units are counted as done).
        extend: Whether the run would be ``--extend``-ed (a changed config accepted).

    Returns:
        The exit status: 0, or 2 when every combination is skipped and nothing would run.
    """
    from intrabench.errors import UserError
    from intrabench.io.run_directory import check_output_directory, check_same_run

    try:
        check_output_directory(out)
        check_same_run(out, config.without_runtime(), extend=extend)
    except UserError as refusal:
        print(f"warning: the run would stop here: {refusal}")
    datasets = {
        spec.key: registry.datasets.create(spec.name, spec.params) for spec in config.datasets
    }
    plan = make_plan(config, datasets)
    store = ResultsStore(out)
    done = sum(store.is_done(unit.key) for unit in plan.units)
    print(f"run '{config.name}' -> {out}")
    refined = any(unit.refiner is not None for unit in plan.units)
    steps = f", {counted(config.refinement_steps, 'refinement step')}" if refined else ""
    print(
        f"{counted(len(plan.units), 'work unit')} ({done} already done there), "
        f"{counted(len(config.seeds), 'seed')}{steps}"
    )
    pairs: dict[tuple[str, str], dict] = {}  # (model, dataset) -> units, cases, refined
    for unit in plan.units:
        pair = pairs.setdefault(
            (unit.model.key, unit.dataset.key), {"units": 0, "cases": set(), "refined": False}
        )
        pair["units"] += 1
        pair["cases"].add(unit.case_id)
        pair["refined"] |= unit.refiner is not None
    print(f"\n{'model':28s} {'dataset':22s} {'units':>6s} {'cases':>6s} {'forwards/target':>16s}")
    for (model, dataset), pair in pairs.items():
        forwards = 1 + (config.refinement_steps if pair["refined"] else 0)
        print(
            f"{model:28s} {dataset:22s} {pair['units']:6d} {len(pair['cases']):6d} {forwards:16d}"
        )
    print_time_estimate([unit for unit in plan.units if not store.is_done(unit.key)])
    from intrabench.engine.model_needs import unmet_needs

    for line in unmet_needs(plan.units, datasets):
        print(f"\nwarning: the run would refuse to start: {line}")
    skipped = plan.skipped_combinations()  # once, not once per dataset
    if skipped:
        print(f"\n{plan.skipped_line()}:")
        for pair, reason in skipped:
            print(f"  {pair}: {reason}")
    if not plan.units:
        print("\nnothing to run: every combination is left out by the config or incompatible")
        return 2
    return 0
