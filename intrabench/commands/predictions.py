"""``intrabench predictions to-dicom-seg RUN OUT``: a run's saved predictions as DICOM-SEG over
the source series, for runs whose dataset reads DICOM series (a ``folder`` spec).

One SEG per (configuration, case): ``OUT/<dataset>/<model>/<prompter>/<refiner>/seed<N>/
<case>.dcm``, one segment per target (its label the target id), the model as algorithm name;
it references the series the dataset read, so a viewer opens it over the original images.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from intrabench.errors import UserError


def _datasets(run_dir: Path) -> list[tuple[str, Any]]:
    """(folder name of its predictions, dataset) of every dataset of the run's config."""
    from intrabench import registry
    from intrabench.config import load_config
    from intrabench.io.run_paths import safe_file_name

    config_path = run_dir / "config.yaml"
    if not config_path.is_file():
        raise UserError(f"{run_dir}: not a run directory (no config.yaml)")
    config = load_config(config_path)
    return [
        (safe_file_name(spec.key), registry.datasets.create(spec.name, spec.params))
        for spec in config.datasets
    ]


def _series_folders(dataset: Any) -> dict[str, Path]:
    """Case id -> DICOM series folder of a dataset that reads DICOM series (else empty)."""
    from intrabench.datasets.folder import FolderDataset

    if not isinstance(dataset, FolderDataset):
        return {}
    images = {case: dataset.image_path(case) for case in dataset.case_ids()}
    return {case: image for case, image in images.items() if image.is_dir()}


def _case_masks(folder: Path, case_id: str) -> dict[str, Path]:
    """Target id -> final prediction file of ``case_id`` in one configuration's folder."""
    from intrabench.io.run_paths import case_file_prefix

    prefix, suffix = case_file_prefix(case_id), ".nii.gz"
    return {
        path.name[len(prefix) : -len(suffix)]: path
        for path in sorted(folder.glob(f"{prefix}*{suffix}"))
        if "__step" not in path.name[len(prefix) :]
    }


def _configurations(predictions: Path, models: list[str] | None) -> list[Path]:
    """The seed folders (model/prompter/refiner/seed<N>) under one dataset's predictions."""
    found = sorted(p for p in predictions.glob("*/*/*/seed*") if p.is_dir())
    if models:
        found = [p for p in found if p.relative_to(predictions).parts[0] in models]
    return found


def export(
    run_dir: Path, out: Path, cases: list[str] | None = None, models: list[str] | None = None
) -> list[Path]:
    """Write the run's final predictions of DICOM cases as DICOM-SEG under ``out``; UserError
    (one line) for a run without DICOM datasets or saved predictions. Returns the files.

    Args:
        run_dir: The run directory (its ``config.yaml`` and ``predictions/`` are read).
        out: The folder the SEG files go under
            (``<dataset>/<model>/<prompter>/<refiner>/seed<N>/<case>.dcm``).
        cases: Only these case ids (None or empty: every case).
        models: Only these models, by their prediction folder name (None or empty: every
            model).

    Returns:
        The SEG files written, one per (configuration, case) with saved predictions.

    Raises:
        UserError: The run is not a run directory, reads no DICOM series, or has no saved
            predictions of its DICOM cases (matching ``cases`` and ``models``).
    """
    from intrabench.datasets.dicom_seg_out import write_prediction_seg
    from intrabench.io.volume import read_volume

    written: list[Path] = []
    dicom_seen = False
    for key, dataset in _datasets(run_dir):
        series = _series_folders(dataset)
        if not series:
            continue
        dicom_seen = True
        for configuration in _configurations(run_dir / "predictions" / key, models):
            parts = configuration.relative_to(run_dir / "predictions").parts
            for case_id in sorted(series):
                if cases and case_id not in cases:
                    continue
                files = _case_masks(configuration, case_id)
                if not files:
                    continue
                masks = {t: read_volume(p, dtype=bool).array for t, p in files.items()}
                path = out.joinpath(*parts, f"{case_id}.dcm")
                write_prediction_seg(
                    series[case_id],
                    masks,
                    path,
                    algorithm=parts[1],
                    series_description=f"IntraBench {parts[1]} {parts[2]}"[:64],
                )
                written.append(path)
    if not dicom_seen:
        raise UserError(
            f"{run_dir}: no dataset of this run is read from DICOM series; DICOM-SEG refers to "
            "a source series (a folder spec whose images are series folders)"
        )
    if not written:
        raise UserError(
            f"{run_dir}: no saved predictions of its DICOM cases"
            + (" matching --case/--model" if cases or models else "")
            + "; run with save_predictions: true"
        )
    return written


def cmd_to_dicom_seg(args: argparse.Namespace) -> int:
    """Write the run's predictions as DICOM-SEG and say where.

    Args:
        args: The parsed command line (``run_dir``, ``out``, and the repeatable ``case`` and
            ``model``).

    Returns:
        The exit status, 0.
    """
    written = export(Path(args.run_dir), Path(args.out), args.case, args.model)
    for path in written:
        print(path)
    print(f"{len(written)} DICOM-SEG file(s) written under {args.out}")
    return 0


def register(commands: argparse._SubParsersAction, groups: dict) -> None:
    """Add ``intrabench predictions to-dicom-seg``.

    Args:
        commands: The top-level subcommand parsers.
        groups: The command groups' subparsers by group name (unused).
    """
    predictions = commands.add_parser("predictions", help="a run's saved predictions, exported")
    actions = predictions.add_subparsers(dest="action", metavar="ACTION", required=True)
    seg = actions.add_parser(
        "to-dicom-seg",
        help="DICOM-SEG over the source series (runs on DICOM data), for 3D Slicer or OHIF",
    )
    seg.add_argument("run_dir", metavar="RUN_DIR")
    seg.add_argument("out", metavar="OUT", help="folder for the SEG files")
    seg.add_argument("--case", action="append", help="only this case (repeatable)")
    seg.add_argument(
        "--model", action="append", help="only this model (its folder name; repeatable)"
    )
    seg.set_defaults(func=cmd_to_dicom_seg)
