"""A checkpoint from a Hugging Face model repository (``intrabench models download``), with
``huggingface_hub``: the card's pinned revision, the announced size compared with the pinned
one before anything is transferred, an interrupted transfer resumed, the file's size and
SHA-256 checked before it is put into the checkpoint directory.

``$HF_ENDPOINT`` names another Hub endpoint (a mirror, or the tests' loopback server); it is
read at each download, not only when ``huggingface_hub`` is imported.

Files are fetched into ``<checkpoint dir>/.intrabench-partial/<key>/`` (huggingface_hub's
``local_dir``, where it keeps what an interrupted transfer had received and resumes from it
with an HTTP ``Range`` request), then moved to their place. A file that does not match its
pin is deleted with the staging folder, and nothing reaches the checkpoint directory.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from intrabench.io import download as dl
from intrabench.io.checkpoints import CheckpointInfo, HuggingFaceFile
from intrabench.io.file_digests import fresh_sha256

ENDPOINT_VARIABLE = "HF_ENDPOINT"
STAGING = ".intrabench-partial"


def hub_files(
    info: CheckpointInfo, source: HuggingFaceFile
) -> list[tuple[str, str, int | None, str | None]]:
    """(path in the repository, path in the checkpoint directory, pinned size, pinned sha256)
    of the checkpoint and its companions (which sit at their own path in both).

    Args:
        info: The checkpoint, with its companions.
        source: The hub repository and the checkpoint's path in it.

    Returns:
        One tuple per file, the checkpoint first; size in bytes and SHA-256 may be None (not
        pinned).
    """
    return [(source.path, info.filename, info.size, info.sha256)] + [
        (c.filename, c.filename, c.size, c.sha256) for c in info.companions
    ]


def download_from_hub(
    info: CheckpointInfo, source: HuggingFaceFile, directory: Path, progress: bool = True
) -> None:
    """Every file of ``info`` from ``source`` into ``directory``.

    Files already in place that match their pins are kept; the others are fetched into a
    staging folder and moved into place once checked.

    Args:
        info: The checkpoint, with its companions.
        source: The hub repository, revision and the checkpoint's path in it.
        directory: The checkpoint directory.
        progress: Whether to show the hub's progress bars.

    Raises:
        DownloadError: The hub cannot be reached or answers for another revision.
        ChecksumError: A file is not the pinned one (the staging folder is removed).
    """
    from huggingface_hub.utils import disable_progress_bars

    if not progress:
        disable_progress_bars()
    staging = directory / STAGING / info.key
    for repo_path, local, size, sha256 in hub_files(info, source):
        target = directory / local
        if target.is_file() and _matches(target, size, sha256):
            continue
        try:
            fetched = _fetch(source, repo_path, staging, size)
            _check(info.key, fetched, size, sha256)
        except dl.ChecksumError:
            _remove_staging(staging)
            raise
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(fetched, target)
    _remove_staging(staging)


def _remove_staging(staging: Path) -> None:
    """The key's staging folder, and the staging root once no other key's is left."""
    shutil.rmtree(staging, ignore_errors=True)
    with contextlib.suppress(OSError):
        staging.parent.rmdir()


def _fetch(source: HuggingFaceFile, repo_path: str, staging: Path, size: int | None) -> Path:
    """hf_hub_download of one file at the pinned revision into ``staging``, after its
    metadata: the revision the hub answers for and the size it announces."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url

    endpoint = os.environ.get(ENDPOINT_VARIABLE) or None
    revision = source.revision or "main"
    try:
        meta = get_hf_file_metadata(
            hf_hub_url(source.repo, repo_path, revision=revision, endpoint=endpoint),
            endpoint=endpoint,
        )
    except Exception as error:  # noqa: BLE001 - httpx, OSError and the hub's own errors
        raise dl.DownloadError(
            f"{source.repo}: {repo_path} at {revision}: {_first_line(error)}"
        ) from None
    if source.revision and meta.commit_hash and meta.commit_hash != source.revision:
        raise dl.DownloadError(
            f"{source.repo} answers for revision {meta.commit_hash}, not the "
            f"pinned {source.revision}"
        )
    if size is not None and meta.size is not None and meta.size != size:
        raise dl.ChecksumError(
            f"{source.repo}: {repo_path} is announced as {meta.size} bytes, "
            f"expected {size}; nothing downloaded"
        )
    try:
        return Path(
            hf_hub_download(
                source.repo, repo_path, revision=revision, local_dir=staging, endpoint=endpoint
            )
        )
    except Exception as error:  # noqa: BLE001 - as above; what came stays for a resume
        raise dl.DownloadError(
            f"{source.repo}: {repo_path}: {_first_line(error)} (run the "
            "same command again to resume)"
        ) from None


def _matches(path: Path, size: int | None, sha256: str | None) -> bool:
    if size is not None and path.stat().st_size != size:
        return False
    return sha256 is None or fresh_sha256(path) == sha256


def _check(key: str, path: Path, size: int | None, sha256: str | None) -> None:
    actual_size = path.stat().st_size
    if size is not None and actual_size != size:
        raise dl.ChecksumError(f"{key}: {path.name} is {actual_size} bytes, expected {size}")
    if sha256 is not None:
        actual = fresh_sha256(path)
        if actual != sha256:
            raise dl.ChecksumError(
                f"{key}: {path.name}: sha256 mismatch: expected {sha256}, got {actual}"
            )


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return (text.splitlines()[0] if text else type(error).__name__)[:300]
