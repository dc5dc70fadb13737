"""The recipe framework: where data lives, sources (Zenodo, TCIA, manual), preparation into the
nnU-Net layout, verification, and the Dataset class that loads a prepared recipe.

Layout under the data root (config param ``root``, else ``$INTRABENCH_DATA``, else
``~/.intrabench/data``)::

    <root>/raw/<recipe>/...            downloads (archives, DICOM series, manual files)
    <root>/<dataset name>/imagesTr/<case>_0000.nii.gz
    <root>/<dataset name>/labelsTr/<case>.nii.gz
    <root>/<dataset name>/dataset.json  labels, target_types, name, licence, source, skipped
    <root>/<dataset name>/.intrabench-prepared.json  what prepare wrote there (OutputFolder)

``prepare`` writes only into an output folder it created and deletes only files it wrote
(:class:`OutputFolder`); anything else there is refused in one line naming it.

Label conventions of prepared datasets: organ datasets store class values as listed in
``dataset.json["labels"]``; instance datasets have one instance class and store instance ids
1..K (``"instance_ids": true``), consecutive, every id present.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
import SimpleITK as sitk

from intrabench.errors import DataError, UserError
from intrabench.io import download as dl
from intrabench.registry import datasets as dataset_registry
from intrabench.wording import listed

from ._convert import label_image, write_image
from .nnunet_folder import NnUNetFolder

PREPARED_MARKER = ".intrabench-prepared.json"
FORMAT_VERSION = 2


def data_root(root: str | Path | None = None) -> Path:
    """The data root: ``root`` if given, else ``$INTRABENCH_DATA``, else ~/.intrabench/data."""
    value = root or os.environ.get("INTRABENCH_DATA") or "~/.intrabench/data"
    return Path(value).expanduser()


def say(message: str) -> None:
    print(message, file=sys.stderr)


# -- sources --------------------------------------------------------------------------------
@dataclass(frozen=True)
class FileInfo:
    """An expected file: sha256 (None = not known yet, see docs/datasets.md) and size."""

    sha256: str | None = None
    size: int | None = None


@dataclass
class Urls:
    """Service base URLs (None = public default or environment override)."""

    zenodo: str | None = None
    tcia: str | None = None


@dataclass(frozen=True)
class ZenodoSource:
    record: str
    files: dict[str, FileInfo]

    def where(self) -> str:
        return f"Zenodo record {self.record} (https://zenodo.org/records/{self.record})"

    def missing(self, raw: Path) -> list[str]:
        return [name for name in self.files if not (raw / name).is_file()]

    def partial(self, raw: Path) -> bool:
        return any((raw / f"{name}.partial").exists() for name in self.files)

    def download(self, raw: Path, urls: Urls, progress: bool) -> None:
        offered = {f.name: f for f in dl.zenodo_record_files(self.record, urls.zenodo)}
        for name, info in self.files.items():
            remote = offered.get(name)
            if remote is None:
                raise dl.DownloadError(
                    f"Zenodo record {self.record} has no file '{name}' (it offers: "
                    f"{', '.join(sorted(offered)) or 'nothing'}); the record changed, update "
                    "the recipe"
                )
            if info.size is not None and remote.size is not None and remote.size != info.size:
                raise dl.ChecksumError(
                    f"{name}: the record lists {remote.size} bytes, the recipe expects {info.size}"
                )
            md5 = remote.checksums.get("md5")
            if info.sha256 is None and not md5:
                raise dl.ChecksumError(
                    f"{name}: neither the recipe nor Zenodo record {self.record} gives a "
                    "checksum, so the download cannot be verified (a login or error page would "
                    f"be saved as the archive); download it yourself into {raw} after checking "
                    "it, then run prepare"
                )
            say(f"  {name} ({_size(remote.size)})")
            path = dl.download(
                remote.url,
                raw / name,
                sha256=info.sha256,
                md5=md5,
                size=remote.size or info.size,
                progress=progress,
            )
            if info.sha256 is None:
                digest = dl.file_digest(path)
                (raw / f"{name}.sha256").write_text(f"{digest}  {name}\n")
                say(
                    f"  note: no sha256 for {name} in the recipe yet; verified against the "
                    f"record's md5. sha256 = {digest}"
                )


@dataclass(frozen=True)
class TciaSource:
    """A TCIA collection read through the NBIA REST API (getSeries / getImage)."""

    collection: str
    modalities: tuple[str, ...] = ("CT", "SEG")

    def where(self) -> str:
        return f"TCIA collection '{self.collection}' (https://www.cancerimagingarchive.net)"

    def missing(self, raw: Path) -> list[str]:
        if not (raw / "series.json").is_file():
            return ["series.json"]
        return [
            s["SeriesInstanceUID"]
            for s in read_series_listing(raw)
            if not (series_folder(raw, s["SeriesInstanceUID"]) / ".complete").exists()
        ]

    def partial(self, raw: Path) -> bool:
        return (raw / "series.json").is_file() or (raw / "series").is_dir()

    def download(self, raw: Path, urls: Urls, progress: bool) -> None:
        """Download the label series (SEG/RTSTRUCT) first, then only the image series they
        reference (or, for a label without a usable reference, the image series of its
        study): unannotated scans of a collection are never fetched."""
        from ._dicom_series import LABEL_MODALITIES, referenced_image_series

        listing = [
            s
            for s in dl.tcia_series(self.collection, urls.tcia)
            if str(s.get("Modality", "")) in self.modalities
        ]
        labels = [s for s in listing if s.get("Modality") in LABEL_MODALITIES]
        images = {
            s["SeriesInstanceUID"]: s for s in listing if s.get("Modality") not in LABEL_MODALITIES
        }
        if not labels or not images:
            raise dl.DownloadError(
                f"TCIA collection {self.collection}: no {'/'.join(self.modalities)} series listed"
            )
        raw.mkdir(parents=True, exist_ok=True)
        from tqdm import tqdm

        def fetch(entries: list[dict], what: str) -> None:
            for entry in tqdm(
                entries,
                desc=f"{self.collection} {what}",
                unit="series",
                file=sys.stderr,
                disable=not progress,
                leave=False,
            ):
                uid = entry["SeriesInstanceUID"]
                dl.tcia_download_series(
                    uid, series_folder(raw, uid), urls.tcia, entry["ImageCount"], progress=False
                )

        fetch(labels, "labels")
        needed: set[str] = set()
        for entry in labels:
            reference = referenced_image_series(series_folder(raw, entry["SeriesInstanceUID"]))
            if reference in images:
                needed.add(reference)
            else:
                needed |= {
                    u
                    for u, s in images.items()
                    if s.get("StudyInstanceUID") == entry.get("StudyInstanceUID")
                }
        kept = labels + [images[u] for u in sorted(needed)]
        (raw / "series.json").write_text(json.dumps(kept, indent=1))
        fetch([images[u] for u in sorted(needed)], "images")


def series_folder(raw: Path, uid: str) -> Path:
    """``raw/series/<uid>``: where one downloaded TCIA series lives, after checking that the
    UID (a name a server sent) is one safe path component and the folder stays in ``raw``."""
    return dl.inside(raw, "series", dl.server_name(uid, "the SeriesInstanceUID"))


def read_series_listing(raw: Path) -> list[dict]:
    """``raw/series.json`` (written by the download, but a file on disk is input too), checked
    as the server's answer is (:func:`intrabench.io.download.checked_series_listing`)."""
    path = raw / "series.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise UserError(
            f"{path}: cannot be read as a series listing "
            f"({type(error).__name__}); delete it and download again"
        ) from None
    return dl.checked_series_listing(data, str(path))


@dataclass(frozen=True)
class ManualSource:
    """A host that needs a login or a browser: we tell the user what to fetch and where."""

    url: str
    instructions: str
    expected: tuple[str, ...]  # glob patterns; the download is present if any matches

    def where(self) -> str:
        return f"manual download from {self.url}"

    def missing(self, raw: Path) -> list[str]:
        if raw.is_dir() and any(any(raw.glob(pattern)) for pattern in self.expected):
            return []
        return [" or ".join(self.expected)]

    def partial(self, raw: Path) -> bool:
        return raw.is_dir() and any(raw.iterdir())

    def download(self, raw: Path, urls: Urls, progress: bool, name: str = "<name>") -> None:
        raw.mkdir(parents=True, exist_ok=True)
        print(
            f"{name}: manual download needed from {self.url}\n{self.instructions}\n"
            f"Put the file(s) into: {raw}\nExpected there: {' or '.join(self.expected)}\n"
            f"Then run: intrabench datasets prepare {name}"
        )


Source = ZenodoSource | TciaSource | ManualSource


def _size(n: int | None) -> str:
    if n is None:
        return "size unknown"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


# -- what a recipe may write: the folders it created, the files it wrote -----------------------
#: the subfolders of a prepared output a recipe writes cases into
CASE_FOLDERS = ("imagesTr", "labelsTr")


def _temporary(relative: str) -> str:
    """Where :func:`~intrabench.datasets._convert.write_image` writes ``relative`` first."""
    parent, _, name = relative.rpartition("/")
    return f"{parent}/.{name}.partial.nii.gz" if parent else f".{name}.partial.nii.gz"


def _case_files(case_id: str) -> tuple[str, str]:
    return f"imagesTr/{case_id}_0000.nii.gz", f"labelsTr/{case_id}.nii.gz"


class OutputFolder:
    """A recipe's output folder and the files the recipe wrote there (its marker,
    :data:`PREPARED_MARKER`, lists them, each recorded before it is written): the recipe
    writes and deletes only those, refuses a folder it did not create and any file in
    ``imagesTr``/``labelsTr`` it did not write (:class:`~intrabench.errors.UserError` naming
    it), and never deletes through a link."""

    def __init__(self, folder: Path, recipe: str) -> None:
        self.folder, self.recipe = folder, recipe
        self.state: dict = {
            "format": FORMAT_VERSION,
            "recipe": recipe,
            "complete": False,
            "files": [],
            "cases": [],
            "skipped": {},
        }

    # -- claiming ---------------------------------------------------------------------------
    def claim(self) -> OutputFolder:
        """Create the folder with its marker, or check that the existing one is ours."""
        if self.folder.exists() and not self.folder.is_dir():
            raise UserError(
                f"{self.folder} is a file, not a folder; move it away, then run prepare again"
            )
        marker = self.folder / PREPARED_MARKER
        if marker.is_symlink() or (self.folder.is_dir() and not marker.exists()):
            self._refuse_foreign_entries()
        elif marker.exists():
            self.state = self._read_marker(marker)
        for sub in CASE_FOLDERS:
            self._check_case_folder(self.folder / sub)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._save()
        return self

    def _refuse(self, path: Path, why: str) -> None:
        raise UserError(
            f"{self.recipe}: {path} {why}; prepare writes only into a folder it "
            f"created ({PREPARED_MARKER} lists what it wrote) and keeps your files: "
            "move it out (or prepare under another --root), then run prepare again"
        )

    def _refuse_foreign_entries(self) -> None:
        """A folder without our marker may hold nothing but empty case folders."""
        for path in sorted(self.folder.iterdir()):
            empty = (
                path.name in CASE_FOLDERS
                and path.is_dir()
                and not path.is_symlink()
                and not any(path.iterdir())
            )
            if not empty:
                self._refuse(
                    path, f"was not written by intrabench (the folder has no {PREPARED_MARKER})"
                )

    def _read_marker(self, marker: Path) -> dict:
        try:
            state = json.loads(marker.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            state = None
        cases = state.get("cases") if isinstance(state, dict) else None
        files = state.get("files", []) if isinstance(state, dict) else None
        if (
            not isinstance(cases, list)
            or not isinstance(files, list)
            or not all(isinstance(v, str) for v in [*cases, *files])
            or state.get("recipe", self.recipe) != self.recipe
        ):
            self._refuse(marker, "cannot be read as this recipe's record of what it wrote")
        if "files" not in state:  # format 1 (written at the end): the cases and dataset.json
            state["files"] = ["dataset.json", *[f for c in cases for f in _case_files(c)]]
            state.setdefault("complete", True)
        return {**self.state, **state, "format": FORMAT_VERSION, "recipe": self.recipe}

    def _check_case_folder(self, directory: Path) -> None:
        if directory.is_symlink():
            self._refuse(directory, f"is a link (to {os.readlink(directory)})")
        if not directory.exists():
            return
        if not directory.is_dir():
            self._refuse(directory, "is a file where a folder belongs")
        owned = self.owned()
        for path in sorted(directory.iterdir()):
            relative = f"{directory.name}/{path.name}"
            if path.is_symlink() or not path.is_file():
                self._refuse(path, "is not a file that prepare wrote (a link or a folder)")
            if relative not in owned:
                self._refuse(path, "was not written by prepare")

    # -- the record -------------------------------------------------------------------------
    def owned(self) -> set[str]:
        """The paths (relative, ``/``-separated) this recipe wrote, with their temporary names."""
        files = set(self.state["files"])
        return files | {_temporary(f) for f in files}

    def _save(self) -> None:
        """Write the marker atomically (a cut write leaves the previous one)."""
        marker = self.folder / PREPARED_MARKER
        text = json.dumps(self.state, indent=1) + "\n"
        if marker.is_file() and not marker.is_symlink() and marker.read_text() == text:
            return  # unchanged: an up-to-date folder is not touched
        temporary = marker.with_name(marker.name + ".partial")
        temporary.write_text(text)
        temporary.replace(marker)

    def will_write(self, relative: str) -> Path:
        """Record ``relative`` as ours (before it is written); returns its path."""
        if relative not in self.state["files"]:
            self.state["files"].append(relative)
            self.state["complete"] = False
            self._save()
        return self.folder / relative

    def write_json(self, relative: str, data: dict) -> None:
        path = self.will_write(relative)
        temporary = path.with_name(f".{path.name}.partial")
        temporary.write_text(json.dumps(data, indent=2) + "\n")
        temporary.replace(path)

    def keep_only(self, cases: set[str]) -> None:
        """Delete the case files this recipe wrote for cases not in ``cases`` (and every
        temporary file it left): regular files only, never through a link."""
        keep = {f for c in cases for f in _case_files(c)} | {"dataset.json"}
        for relative in sorted(self.owned()):
            if relative in keep:
                continue
            path = self.folder / relative
            if os.path.islink(path.parent) or not path.parent.is_dir():
                continue
            if path.is_file() and not path.is_symlink():
                path.unlink()
        self.state["files"] = sorted(f for f in self.state["files"] if f in keep)
        self._save()

    def finish(self, cases: list[str], skipped: dict[str, str]) -> None:
        self.state.update(complete=True, cases=sorted(cases), skipped=skipped)
        self._save()


# -- outputs and reports --------------------------------------------------------------------
@dataclass(frozen=True)
class Output:
    """One prepared dataset produced by a recipe."""

    name: str
    labels: dict[str, int]
    target_types: dict[str, str]
    description: str = ""

    @property
    def instance_ids(self) -> bool:
        foreground = [k for k, v in self.labels.items() if v != 0]
        return len(foreground) == 1 and self.target_types.get(foreground[0]) == "instance"


@dataclass
class PrepareReport:
    recipe: str
    written: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    up_to_date: bool = False


class Recipe:
    """Download and conversion of one source into one or more nnU-Net folders.

    Subclasses set the class attributes and implement ``raw_cases`` and ``convert``.
    ``convert`` returns the image and ``{output name: label (k, j, i) array or None}`` on the
    image grid (None = the case is not part of that output, with a reason in ``excluded``).
    """

    key: ClassVar[str] = ""
    source: ClassVar[Source]
    outputs: ClassVar[tuple[Output, ...]] = ()
    licence: ClassVar[str] = ""
    citation: ClassVar[str] = ""
    archive_password_env: ClassVar[str | None] = None

    def __init__(self) -> None:
        #: per-output reasons why the case being converted is left out (set by ``convert``)
        self.excluded: dict[str, str] = {}

    # -- locations ----------------------------------------------------------------------
    def raw_dir(self, root: str | Path | None = None) -> Path:
        return data_root(root) / "raw" / self.key

    def out_dir(self, output: str, root: str | Path | None = None) -> Path:
        return data_root(root) / output

    # -- download -----------------------------------------------------------------------
    def download(
        self, root: str | Path | None = None, urls: Urls | None = None, progress: bool = True
    ) -> str:
        """Fetch the raw files (resumable). Returns 'downloaded', 'present' or 'manual'."""
        raw = self.raw_dir(root)
        if not self.source.missing(raw):
            return "present"
        if isinstance(self.source, ManualSource):
            self.source.download(raw, urls or Urls(), progress, self.outputs[0].name)
            return "manual"
        raw.mkdir(parents=True, exist_ok=True)
        say(f"{self.key}: downloading from {self.source.where()} into {raw}")
        self.source.download(raw, urls or Urls(), progress)
        return "downloaded"

    # -- preparation --------------------------------------------------------------------
    def unpack(self, raw: Path) -> Path:
        """Extract every archive in ``raw`` (once, safely) into ``raw/extracted``."""
        target = raw / "extracted"
        # the markers live beside the extraction, never in it: a member named
        # ".b.zip.extracted" once stopped b.zip from being extracted
        markers = raw / ".extracted-archives"
        archives = sorted(
            p
            for p in raw.iterdir()
            if p.is_file()
            and p.name.lower().endswith((".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz"))
        )
        for archive in archives:
            marker = markers / archive.name
            if marker.exists():
                continue
            password = (
                os.environ.get(self.archive_password_env) if self.archive_password_env else None
            )
            if self.archive_password_env and password is None and _encrypted(archive):
                raise UserError(
                    f"{archive.name} is password-protected: set "
                    f"{self.archive_password_env} (see docs/datasets.md for where "
                    "the password is published), or unzip it into "
                    f"{target} yourself"
                )
            say(f"{self.key}: extracting {archive.name}")
            # an archive replaces only what an archive wrote, never a file of yours there
            files = dl.safe_extract(
                archive, target, password=password, replaceable=_extracted_before(markers)
            )
            markers.mkdir(exist_ok=True)
            marker.write_text(
                json.dumps(sorted(f.relative_to(target).as_posix() for f in files)) + "\n"
            )
        return target if target.is_dir() else raw

    def raw_cases(self, raw: Path) -> list[str]:
        raise NotImplementedError

    def labels_for(self, output: Output, raw: Path) -> dict[str, int]:
        """The label classes of an output (fixed unless a recipe reads them from the data)."""
        return output.labels

    def target_types_for(self, output: Output, raw: Path) -> dict[str, str]:
        """Organ/instance type per class (organ datasets with data-defined classes override)."""
        return output.target_types

    def convert(self, raw: Path, case_id: str) -> tuple[sitk.Image, dict[str, np.ndarray | None]]:
        raise NotImplementedError

    def prepare(
        self, root: str | Path | None = None, progress: bool = True, force: bool = False
    ) -> PrepareReport:
        """Convert the raw download into the nnU-Net folders (idempotent).

        A case that fails (corrupt DICOM, grid mismatch, empty label...) is skipped and named
        in the report and in ``dataset.json["skipped"]``; the others are written.
        """
        raw = self.raw_dir(root)
        missing = self.source.missing(raw)
        if missing:
            raise UserError(
                f"{self.key}: not downloaded yet ({len(missing)} missing: "
                f"{', '.join(missing[:3])}); run: intrabench datasets download "
                f"{self.outputs[0].name}"
            )
        report = PrepareReport(self.key)
        folders = {o.name: self.out_dir(o.name, root) for o in self.outputs}
        owners = {o.name: OutputFolder(folders[o.name], self.key).claim() for o in self.outputs}
        if not force and all(_complete(folders[o.name]) for o in self.outputs):
            report.up_to_date = True
            return report
        cases = self.raw_cases(raw)
        if not cases:
            raise UserError(f"{self.key}: no cases found in {raw}; is the download complete?")
        written: dict[str, list[str]] = {o.name: [] for o in self.outputs}
        skipped: dict[str, dict[str, str]] = {o.name: {} for o in self.outputs}
        from tqdm import tqdm

        for case_id in tqdm(
            cases, desc=self.key, unit="case", file=sys.stderr, disable=not progress, leave=False
        ):
            done = all(
                (folders[o.name] / "labelsTr" / f"{case_id}.nii.gz").exists()
                and (folders[o.name] / "imagesTr" / f"{case_id}_0000.nii.gz").exists()
                for o in self.outputs
            )
            if done and not force:
                for o in self.outputs:
                    written[o.name].append(case_id)
                continue
            self.excluded = {}
            try:
                image, labels = self.convert(raw, case_id)
            except (
                DataError,
                RuntimeError,
                ValueError,
                OSError,
                KeyError,
                AttributeError,
                IndexError,
            ) as error:
                reason = (
                    str(error).strip().splitlines()[0]
                    if str(error).strip()
                    else type(error).__name__
                )
                for o in self.outputs:
                    skipped[o.name][case_id] = reason
                say(f"  skipped {case_id}: {reason}")
                continue
            for o in self.outputs:
                label = labels.get(o.name)
                reason = self.excluded.get(o.name)
                if label is None:
                    skipped[o.name][case_id] = reason or "no label for this dataset"
                    continue
                problem = _check_label(label, image, o, self.labels_for(o, raw))
                if problem:
                    skipped[o.name][case_id] = problem
                    say(f"  skipped {case_id} ({o.name}): {problem}")
                    continue
                image_file, label_file = _case_files(case_id)
                write_image(image, owners[o.name].will_write(image_file))
                write_image(label_image(label, image), owners[o.name].will_write(label_file))
                written[o.name].append(case_id)
        for o in self.outputs:
            owner = owners[o.name]
            owner.keep_only(set(written[o.name]))
            meta = {
                "name": o.name,
                "description": o.description,
                "channel_names": {"0": self.modality_of(o)},
                "labels": self.labels_for(o, raw),
                "target_types": self.target_types_for(o, raw),
                "instance_ids": o.instance_ids,
                "numTraining": len(written[o.name]),
                "file_ending": ".nii.gz",
                "licence": self.licence,
                "source": self.source.where(),
                "citation": self.citation,
                "skipped": skipped[o.name],
            }
            owner.write_json("dataset.json", meta)
            owner.finish(written[o.name], skipped[o.name])
        report.written = sorted(set().union(*written.values()))
        report.skipped = {c: r for s in skipped.values() for c, r in s.items()}
        return report

    def modality_of(self, output: Output) -> str:
        cls = dataset_registry.get(output.name)
        return cls.modality


def _complete(folder: Path) -> bool:
    marker = folder / PREPARED_MARKER
    if not marker.is_file() or not (folder / "dataset.json").is_file():
        return False
    try:
        state = json.loads(marker.read_text())
        cases = state["cases"]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError, KeyError, TypeError):
        return False
    if not isinstance(cases, list) or state.get("complete", True) is not True:
        return False  # "complete" is False while a prepare runs (format 1 had none)
    return all(
        (folder / "labelsTr" / f"{c}.nii.gz").is_file()
        and (folder / "imagesTr" / f"{c}_0000.nii.gz").is_file()
        for c in cases
    )


def _extracted_before(markers: Path) -> set[str]:
    """The files (relative to the extraction folder) earlier extractions wrote, as their
    markers list them (markers of the first format, ``ok``, list none)."""
    files: set[str] = set()
    for marker in sorted(markers.iterdir()) if markers.is_dir() else []:
        try:
            listed = json.loads(marker.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            continue
        if isinstance(listed, list):
            files |= {name for name in listed if isinstance(name, str)}
    return files


def _encrypted(archive: Path) -> bool:
    import zipfile

    if not zipfile.is_zipfile(archive):
        return False
    with zipfile.ZipFile(archive) as bundle:
        return any(info.flag_bits & 0x1 for info in bundle.infolist())


def _check_label(
    label: np.ndarray, image: sitk.Image, output: Output, labels: dict[str, int]
) -> str | None:
    size = image.GetSize()
    if tuple(label.shape) != (size[2], size[1], size[0]):
        return f"label grid {tuple(label.shape)[::-1]} does not match image grid {size}"
    values = set(np.unique(label).tolist()) - {0}
    if not values:
        return "empty label (no foreground voxels)"
    if output.instance_ids:
        if values != set(range(1, len(values) + 1)):
            return f"instance ids are not consecutive: [{listed(sorted(values))}]"
    else:
        allowed = {v for v in labels.values() if v != 0}
        if not values <= allowed:
            return f"label values {sorted(values - allowed)} are not in dataset.json"
    return None


# -- the Dataset class of a prepared recipe -------------------------------------------------
class PreparedDataset(NnUNetFolder):
    """A recipe's prepared nnU-Net folder under the data root (see ``intrabench datasets``)."""

    recipe: ClassVar[Recipe]
    targets: ClassVar[str] = ""
    size: ClassVar[str] = ""
    licence: ClassVar[str] = ""
    cases_in_paper: ClassVar[int] = 0

    def __init__(self, root: str | None = None) -> None:
        folder = self.recipe.out_dir(self.name, root)
        if not _complete(folder):
            raise UserError(
                f"dataset '{self.name}' is not prepared in {folder}; run: "
                f"intrabench datasets download {self.name} && "
                f"intrabench datasets prepare {self.name}"
            )
        super().__init__(str(folder), dataset_name=self.name)

    @classmethod
    def availability(cls, root: str | None = None) -> str:
        """Status on disk: ready (N cases) / downloaded, not prepared / not downloaded..."""
        folder = cls.recipe.out_dir(cls.name, root)
        if _complete(folder):
            cases = json.loads((folder / PREPARED_MARKER).read_text())["cases"]
            return f"ready ({len(cases)} cases)"
        raw = cls.recipe.raw_dir(root)
        source = cls.recipe.source
        if not source.missing(raw):
            return "downloaded, not prepared"
        if isinstance(source, ManualSource):
            return "manual download needed"
        if raw.is_dir() and source.partial(raw):
            return "partially downloaded"
        return "not downloaded"


def register_outputs(recipe: Recipe, classes: Iterable[type[PreparedDataset]]) -> None:
    for cls in classes:
        cls.recipe = recipe
        dataset_registry.register(cls)
