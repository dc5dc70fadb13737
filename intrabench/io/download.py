"""Downloads for dataset recipes: resumable HTTP, checksums, Zenodo and TCIA APIs, safe unpacking.

Conventions
-----------
* A file is downloaded to ``<dest>.partial`` and only renamed to ``<dest>`` after its size and
  checksums were verified. An interrupted download leaves the ``.partial`` file, and the next
  call resumes it with an HTTP ``Range`` request; a server that ignores ``Range`` (answers 200)
  makes us start again from byte 0. A ``.partial`` file is never used as data.
* A checksum mismatch deletes the partial file and raises :class:`ChecksumError`, whose message
  names the expected and the actual hash. A file already at ``<dest>`` that does not verify is
  not a download's (one is renamed there only once verified): it is kept and named.
* A body is read up to the pinned size, else up to its Content-Length, never further (an
  endless body stops there); an announced size beyond the pinned one is refused before
  reading. A server that makes no progress (no answer, or fewer than
  :data:`STALL_MIN_BYTES` in :func:`stall_seconds`, ``$INTRABENCH_DOWNLOAD_STALL_S``, 60 s by
  default) is given up with one line; the partial file is kept for the rerun.
* Base URLs of the Zenodo and TCIA APIs are parameters (tests point them at a loopback server);
  the defaults are the public services. Environment variables ``INTRABENCH_ZENODO_URL`` and
  ``INTRABENCH_TCIA_URL`` override the defaults.
* Names that come from a server (TCIA series UIDs, record keys) become paths only through
  :func:`server_name`: one path component of safe characters, never ``..``, ``/`` or a leading
  dot, and :func:`inside` checks the resulting folder stays in the dataset's folder. A server
  that answers otherwise is refused with one line before anything is written or deleted.
* Archives (zip, tar, tar.gz, tar.bz2, tar.xz) are extracted by :func:`safe_extract`, which
  rejects absolute paths, ``..`` components, links leading outside the destination (also
  through chains of links: every path is resolved as it is written), hard links to anything
  but a file extracted before, and special files; a refused archive leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import math
import os
import re
import shutil
import stat
import sys
import tarfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from intrabench.errors import UserError

DEFAULT_ZENODO_URL = "https://zenodo.org"
DEFAULT_TCIA_URL = "https://services.cancerimagingarchive.net/nbia-api/services/v1"
_CHUNK = 1 << 20


class DownloadError(UserError):
    """A download failed (network, HTTP status, incomplete transfer)."""


class ChecksumError(DownloadError):
    """A downloaded file does not have the expected checksum or size."""


class UnsafeArchiveError(UserError):
    """An archive member would be written outside the destination (or is a special file)."""


class DamagedArchiveError(UserError):
    """An archive cannot be read to its end: a bad CRC, a corrupt or cut stream, overlapping
    zip entries, a compression method this Python cannot read, or more data than it may hold."""


#: the most bytes an archive may extract to, as a multiple of its own size (deflate's largest
#: expansion is 1032:1; a 1 MB zip wrote 1 GiB before this bound), and in all
#: (``$INTRABENCH_MAX_EXTRACT_RATIO`` and ``$INTRABENCH_MAX_EXTRACT_GB`` override them)
MAX_EXTRACT_RATIO = 1000
MAX_EXTRACT_GB = 500.0


def _extract_limits() -> tuple[float, float]:
    """(ratio, bytes): the extraction bounds, from the environment where set."""

    def number(name: str, default: float) -> float:
        text = os.environ.get(name, "").strip()
        try:
            value = float(text) if text else default
        except ValueError:
            raise UserError(f"{name}={text!r} is not a number") from None
        if not value > 0:
            raise UserError(f"{name} must be positive, not {text}")
        return value

    return (
        number("INTRABENCH_MAX_EXTRACT_RATIO", MAX_EXTRACT_RATIO),
        number("INTRABENCH_MAX_EXTRACT_GB", MAX_EXTRACT_GB) * 1e9,
    )


def check_extract_size(archive: Path, declared: int, dest: Path) -> None:
    """DamagedArchiveError when ``archive``'s members declare more bytes than the bounds (ratio
    to the archive's size, total) or than the destination's free space.

    Args:
        archive: The archive file (its size on disk is the ratio's base).
        declared: The bytes its members declare, summed.
        dest: Where it is to be extracted (it, or its nearest existing parent, gives the free
            space).

    Raises:
        DamagedArchiveError: Naming the bound exceeded and the variable that raises it
            (``INTRABENCH_MAX_EXTRACT_RATIO``, ``INTRABENCH_MAX_EXTRACT_GB``).
        UserError: One of those variables is not a positive number.
    """
    ratio, most = _extract_limits()
    size = max(1, archive.stat().st_size)
    if declared > ratio * size:
        raise DamagedArchiveError(
            f"{archive.name}: its members declare {declared:,} bytes, {declared / size:,.0f} "
            f"times the archive's {size:,} (more than {ratio:g}x: a zip bomb?); if it is "
            "real, set INTRABENCH_MAX_EXTRACT_RATIO higher"
        )
    if declared > most:
        raise DamagedArchiveError(
            f"{archive.name}: its members declare {declared:,} bytes, more than "
            f"{most / 1e9:g} GB; if it is real, set INTRABENCH_MAX_EXTRACT_GB higher"
        )
    probe = dest if dest.exists() else next((p for p in dest.parents if p.exists()), Path("."))
    free = shutil.disk_usage(probe).free
    if declared > free:
        raise DamagedArchiveError(
            f"{archive.name}: extracting it needs {declared:,} bytes, and {probe} has {free:,} free"
        )


def zenodo_url(base_url: str | None = None) -> str:
    """The Zenodo base URL: ``base_url``, else ``$INTRABENCH_ZENODO_URL``, else the default; no
    trailing slash.

    Args:
        base_url: A URL given on the command line (``--zenodo-url``); None: not given.

    Returns:
        The base URL without a trailing ``/``.
    """
    return (base_url or os.environ.get("INTRABENCH_ZENODO_URL") or DEFAULT_ZENODO_URL).rstrip("/")


def tcia_url(base_url: str | None = None) -> str:
    """The TCIA base URL: ``base_url``, else ``$INTRABENCH_TCIA_URL``, else the default; no trailing
    slash.

    Args:
        base_url: A URL given on the command line (``--tcia-url``); None: not given.

    Returns:
        The base URL without a trailing ``/``.
    """
    return (base_url or os.environ.get("INTRABENCH_TCIA_URL") or DEFAULT_TCIA_URL).rstrip("/")


# -- hashing --------------------------------------------------------------------------------
def file_digest(path: str | Path, algorithm: str = "sha256") -> str:
    """Hex digest of a file (streamed).

    Args:
        path: The file.
        algorithm: A :mod:`hashlib` name (``"sha256"``, ``"md5"``).

    Returns:
        The digest in lower-case hex.
    """
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def parse_checksum(text: str) -> tuple[str, str]:
    """``"md5:abc..."`` -> ("md5", "abc..."); a bare 64-hex string is sha256.

    Args:
        text: A checksum as a record gives it, ``algorithm:hex`` or bare hex (64 digits are
            taken as SHA-256, any other length as MD5).

    Returns:
        ``(algorithm, hex)``, both lower-case.
    """
    if ":" in text:
        algorithm, value = text.split(":", 1)
        return algorithm.strip().lower(), value.strip().lower()
    return ("sha256" if len(text) == 64 else "md5"), text.strip().lower()


def verify_file(path: str | Path, checksums: dict[str, str], size: int | None = None) -> None:
    """Raise ChecksumError unless ``path`` has ``size`` bytes and every ``{algorithm: hex}``.

    Args:
        path: The file to check.
        checksums: Algorithm (a :mod:`hashlib` name) -> expected hex digest; empty: none.
        size: The expected size in bytes; None: not checked.

    Raises:
        ChecksumError: Naming the size or the digest that differs.
    """
    path = Path(path)
    if size is not None and path.stat().st_size != size:
        raise ChecksumError(
            f"{path.name}: size mismatch: expected {size} bytes, got {path.stat().st_size} bytes"
        )
    for algorithm, expected in checksums.items():
        actual = file_digest(path, algorithm)
        if actual != expected.lower():
            raise ChecksumError(
                f"{path.name}: {algorithm} mismatch: expected {expected}, got {actual}"
            )


# -- names from servers ----------------------------------------------------------------------
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,199}")


def server_name(value: object, what: str) -> str:
    """``value`` (a name a server sent: a series UID, a file key) as one safe path component.

    Accepted: 1-200 characters of letters, digits, ``.``, ``_``, ``+``, ``-``, starting with a
    letter or digit, without ``..``. Anything else (``/abs/victim``, ``../../x``, ``a/b``, an
    empty string, a number where a name belongs) is refused; the text quoted is cut to 80
    characters.

    Args:
        value: What the server sent.
        what: What the message calls it (``"the series UID"``).

    Returns:
        ``value``, unchanged.

    Raises:
        DownloadError: ``value`` is not a safe name; nothing was written.
    """
    if not isinstance(value, str) or not _SAFE_NAME.fullmatch(value) or ".." in value:
        shown = repr(value)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        raise DownloadError(
            f"{what} {shown} is not a safe file name (letters, digits, '.', "
            "'_', '+', '-'); the server's answer is refused and nothing was "
            "written"
        )
    return value


def inside(folder: str | Path, *names: str) -> Path:
    """``folder / names...`` after checking that it resolves inside ``folder`` (links followed).

    Args:
        folder: The folder everything must stay in.
        names: Path components below it (names a server or an archive gave).

    Returns:
        The joined path, not resolved.

    Raises:
        DownloadError: The path would lie outside ``folder``.
    """
    base = Path(folder)
    path = base.joinpath(*names)
    root = os.path.realpath(base)
    real = os.path.realpath(path)
    if not real.startswith(root + os.sep):
        raise DownloadError(f"'{path}' would lie outside '{base}'; refusing to write there")
    return path


def _count(value: object, what: str) -> int | None:
    """A non-negative whole number a server sent (a size, an image count), or None when it
    sent none; anything else (``"many"``, ``"abc"``, ``2.5``, ``true``, ``-5``) raises
    :class:`DownloadError` naming ``what``."""
    if value is None:
        return None
    text = value.strip() if isinstance(value, str) else None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif text and text.lstrip("-").isdigit() and len(text) < 30:
        number = int(text)
    else:
        raise DownloadError(f"{what} is {repr(value)[:40]}, not a whole number")
    if number < 0:
        raise DownloadError(f"{what} is {number}, a negative number")
    return number


# -- HTTP -----------------------------------------------------------------------------------
#: ``$INTRABENCH_DOWNLOAD_STALL_S``: how long a download may go without progress (no answer,
#: no data, or fewer than :data:`STALL_MIN_BYTES` in that time) before it is given up
STALL_VARIABLE = "INTRABENCH_DOWNLOAD_STALL_S"
DEFAULT_STALL_S = 60.0
#: fewer bytes than this in one stall window is no progress (a server sending one byte every
#: 20 s would otherwise hold a download for days)
STALL_MIN_BYTES = 1024
#: the most bytes a JSON answer (a Zenodo record, a TCIA series listing) may have
MAX_JSON_BYTES = 256 << 20


def stall_seconds() -> float:
    """The stall timeout in seconds: ``$INTRABENCH_DOWNLOAD_STALL_S`` where set, else
    :data:`DEFAULT_STALL_S`.

    Returns:
        Seconds a transfer may go without progress before it is stopped.

    Raises:
        UserError: The variable is not a positive finite number.
    """
    text = os.environ.get(STALL_VARIABLE, "").strip()
    if not text:
        return DEFAULT_STALL_S
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"{STALL_VARIABLE}={text!r} is not a number of seconds") from None
    if not (value > 0 and math.isfinite(value)):
        raise UserError(f"{STALL_VARIABLE} must be a positive number of seconds, not {text}")
    return value


def _stalled(url: str, stall_s: float, what: str) -> DownloadError:
    return DownloadError(
        f"{url}: stalled: {what} in {stall_s:g} s; re-run to resume (a "
        f"partial file is kept), or set {STALL_VARIABLE} to wait longer"
    )


class _StallWatch:
    """Raises :class:`DownloadError` when a window of ``stall_s`` seconds passes with fewer
    than :data:`STALL_MIN_BYTES` received (checked as each block arrives; a silent socket is
    the socket timeout's, also ``stall_s``)."""

    def __init__(self, url: str, stall_s: float) -> None:
        self.url, self.stall_s = url, stall_s
        self.start, self.bytes = time.monotonic(), 0

    def update(self, received: int) -> None:
        self.bytes += received
        now = time.monotonic()
        if now - self.start < self.stall_s:
            return
        if self.bytes < STALL_MIN_BYTES:
            raise _stalled(self.url, self.stall_s, f"{self.bytes} bytes arrived")
        self.start, self.bytes = now, 0


def _open(url: str, headers: dict[str, str] | None = None, timeout: float | None = None):
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme not in ("http", "https") or not urllib.parse.urlsplit(url).netloc:
        raise DownloadError(
            f"'{url}' is not an http(s) address (check --zenodo-url / "
            "--tcia-url and the INTRABENCH_*_URL variables)"
        )
    timeout = stall_seconds() if timeout is None else timeout
    request = urllib.request.Request(url, headers={"User-Agent": "intrabench", **(headers or {})})
    try:
        return urllib.request.urlopen(request, timeout=timeout)  # noqa: S310 (http(s) only)
    except urllib.error.HTTPError as error:
        raise DownloadError(f"{url}: HTTP {error.code} {error.reason}") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as error:
        reason = getattr(error, "reason", error)
        if isinstance(reason, TimeoutError) or isinstance(error, TimeoutError):
            raise _stalled(url, timeout, "no answer") from None
        raise DownloadError(
            f"{url}: cannot connect ({reason}); check the network and retry, "
            "finished files are kept"
        ) from None


def _blocks(
    response, url: str, limit: int | None, stall_s: float, block: int = _CHUNK
) -> Iterator[bytes]:
    """The body of ``response`` block by block, at most ``limit`` bytes (None: to its end),
    each read one system call (``read1``) so that a trickle is seen; a stall
    (:class:`_StallWatch`, or no byte for ``stall_s``) or a broken connection raises
    :class:`DownloadError`."""
    watch = _StallWatch(url, stall_s)
    taken = 0
    while limit is None or taken < limit:
        want = block if limit is None else min(block, limit - taken)
        try:
            data = response.read1(want)
        except TimeoutError:
            raise _stalled(url, stall_s, "no data") from None
        except (OSError, http.client.HTTPException) as error:
            raise DownloadError(
                f"{url}: the connection broke after {taken} bytes "
                f"({type(error).__name__}); re-run to resume"
            ) from None
        if not data:
            return
        taken += len(data)
        watch.update(len(data))
        yield data


def get_json(url: str, params: dict[str, str] | None = None) -> Any:
    """GET a JSON document (at most :data:`MAX_JSON_BYTES`, under the stall timeout).

    Args:
        url: The address, without a query.
        params: Query parameters, URL-encoded and appended; None: none.

    Returns:
        The decoded JSON value (a dict or a list for the APIs used).

    Raises:
        DownloadError: The server cannot be reached, the answer is too long, not JSON, or
            nested too deeply.
    """
    if params:
        url = f"{url}?{urllib.parse.urlencode(params)}"
    stall_s = stall_seconds()
    with _open(url, {"Accept": "application/json"}, stall_s) as response:
        body = b"".join(_blocks(response, url, MAX_JSON_BYTES + 1, stall_s))
    if len(body) > MAX_JSON_BYTES:
        raise DownloadError(
            f"{url}: the answer is longer than {MAX_JSON_BYTES:,} bytes; it is "
            "not a record or a listing"
        )
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DownloadError(f"{url}: the answer is not JSON ({error})") from None
    except RecursionError:
        raise DownloadError(f"{url}: the answer is JSON nested too deeply to be a record") from None


def _progress_bar(total: int | None, initial: int, name: str, enabled: bool):
    from tqdm import tqdm

    return tqdm(
        total=total,
        initial=initial,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        desc=name[-40:],
        file=sys.stderr,
        disable=not enabled,
        dynamic_ncols=True,
        leave=False,
    )


def download(
    url: str,
    dest: str | Path,
    *,
    sha256: str | None = None,
    md5: str | None = None,
    size: int | None = None,
    progress: bool = True,
    max_bytes: int | None = None,
    stall_s: float | None = None,
) -> Path:
    """Download ``url`` to ``dest`` (resuming ``dest.partial``), verify, then rename.

    If ``dest`` already exists and verifies, nothing is downloaded; if it exists and does not
    verify, it is not ours (a download is renamed only once verified): ChecksumError, and it is
    kept. The body is read up to ``size`` (the pinned size), else up to the Content-Length, never
    past them (an endless body stops there).

    Args:
        url: The file's address.
        dest: The final file; ``dest.partial`` holds the transfer until it is verified.
        sha256: The expected SHA-256 in hex; None: not checked.
        md5: The expected MD5 in hex; None: not checked.
        size: The expected size in bytes; None: the Content-Length bounds the read.
        progress: Whether to show a progress bar.
        max_bytes: Stop after that many bytes of this call and raise DownloadError (to simulate
            an interrupted transfer in tests); the partial file is kept for resuming.
        stall_s: Seconds without progress before the transfer is stopped; None:
            :func:`stall_seconds`.

    Returns:
        ``dest``, complete and verified.

    Raises:
        DownloadError: The server cannot be reached, the transfer stalls or is cut.
        ChecksumError: The file (downloaded, or already there) is not the expected one.
    """
    dest = Path(dest)
    stall_s = stall_seconds() if stall_s is None else stall_s
    checksums = {k: v for k, v in (("sha256", sha256), ("md5", md5)) if v}
    if dest.exists() or dest.is_symlink():
        _check_present(dest, checksums, size)
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".partial")
    if partial.is_symlink() or (partial.exists() and not partial.is_file()):
        raise DownloadError(
            f"{partial} is not a file this download wrote (a link or a "
            "folder); move it away and run again"
        )
    have = partial.stat().st_size if partial.exists() else 0
    if size is not None and have > size:
        partial.unlink()
        have = 0
    if size is None or have < size:
        _fetch(url, partial, have, size, dest.name, progress, max_bytes, stall_s)
    try:
        verify_file(partial, checksums, size)
    except ChecksumError:
        partial.unlink()  # a corrupt partial is never reused
        raise
    partial.replace(dest)
    return dest


def _check_present(dest: Path, checksums: dict[str, str], size: int | None) -> None:
    """ChecksumError, the file kept, when ``dest`` is there but is not the expected file."""
    try:
        if not dest.is_file():
            raise ChecksumError(f"{dest.name}: not a file")
        verify_file(dest, checksums, size)
    except ChecksumError as error:
        raise ChecksumError(
            f"{dest} is already there and is not the expected file ({error}); "
            "a download is only put there once verified, so it is kept: move "
            "it away or delete it, then run again"
        ) from None


def _fetch(
    url: str,
    partial: Path,
    have: int,
    size: int | None,
    name: str,
    progress: bool,
    max_bytes: int | None,
    stall_s: float,
) -> None:
    """Append the rest of ``url`` (from byte ``have``) to ``partial``, at most up to ``size``
    (else the Content-Length); nothing to do when the server says there is nothing left."""
    headers = {"Range": f"bytes={have}-"} if have else {}
    try:
        response = _open(url, headers, stall_s)
    except DownloadError as error:
        if have and "HTTP 416" in str(error):  # nothing left to send: already complete
            return
        raise
    with response:
        status = getattr(response, "status", 200)
        if have and status != 206:
            have = 0  # the server ignored Range: start over
        elif have:
            content_range = response.headers.get("Content-Range", "")
            if not content_range.startswith(f"bytes {have}-"):
                raise DownloadError(
                    f"{url}: unexpected Content-Range '{content_range}' "
                    f"when resuming at byte {have}"
                )
        length = _count(response.headers.get("Content-Length"), f"{url}: the Content-Length header")
        if size is not None and length is not None and have + length > size:
            raise ChecksumError(
                f"{name}: the server announces {have + length:,} bytes, the "
                f"file is {size:,} bytes; it is not the expected file"
            )
        total = size if size is not None else (have + length if length is not None else None)
        limit = None if total is None else total - have
        if max_bytes is not None:
            limit = max_bytes if limit is None else min(limit, max_bytes)
        written = 0
        with (
            open(partial, "ab" if have else "wb") as handle,
            _progress_bar(total, have, name, progress) as bar,
        ):
            for block in _blocks(response, url, limit, stall_s):
                handle.write(block)
                written += len(block)
                bar.update(len(block))
        if max_bytes is not None and written >= max_bytes:
            raise DownloadError(
                f"{url}: interrupted after {written} bytes (partial file kept: {partial})"
            )
        if length is not None and written != length:
            raise DownloadError(
                f"{url}: connection closed after {written} of {length} bytes; re-run to resume"
            )


# -- Zenodo ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class RemoteFile:
    """A file offered by a record: name, URL, size in bytes and ``{algorithm: hex}``."""

    name: str
    url: str
    size: int | None
    checksums: dict[str, str]


def zenodo_record_files(record: str | int, base_url: str | None = None) -> list[RemoteFile]:
    """Files of a Zenodo record (``GET {base}/api/records/{id}``), with md5 checksums.

    Args:
        record: The record's id.
        base_url: The Zenodo base URL; None: :func:`zenodo_url`'s default.

    Returns:
        One :class:`RemoteFile` per file entry that has a name and a link, in the record's
        order.

    Raises:
        DownloadError: The answer is not a record, or a file entry is malformed.
    """
    base = zenodo_url(base_url)
    data = get_json(f"{base}/api/records/{record}")
    if not isinstance(data, dict):
        raise DownloadError(
            f"Zenodo record {record}: the answer is a {type(data).__name__}, "
            "not a record (check --zenodo-url)"
        )
    entries = data.get("files")
    if isinstance(entries, dict):  # older API: {"entries": {...}}
        entries = entries.get("entries", {})
        entries = list(entries.values()) if isinstance(entries, dict) else entries
    if not isinstance(entries, list):
        raise DownloadError(f"Zenodo record {record}: no file list in the answer")
    files = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise DownloadError(
                f"Zenodo record {record}: file entry {index} is a "
                f"{type(entry).__name__}, not a file description"
            )
        name = entry.get("key") or entry.get("filename")
        links = entry.get("links", {})
        links = links if isinstance(links, dict) else {}
        url = links.get("self") or links.get("content") or links.get("download")
        if not name or not url:
            continue
        checksums = {}
        if entry.get("checksum"):
            algorithm, value = parse_checksum(str(entry["checksum"]))
            checksums[algorithm] = value
        size = _count(
            entry.get("size", entry.get("filesize")),
            f"Zenodo record {record}: the size of file {str(name)[:80]!r}",
        )
        files.append(RemoteFile(str(name), str(url), size, checksums))
    return files


# -- TCIA (NBIA REST API) -------------------------------------------------------------------
def tcia_series(
    collection: str, base_url: str | None = None, modality: str | None = None
) -> list[dict[str, Any]]:
    """Series of a TCIA collection (``getSeries?Collection=...``).

    Args:
        collection: The TCIA collection's name.
        base_url: The TCIA base URL; None: :func:`tcia_url`'s default.
        modality: Only the series of this modality (``"CT"``, ``"MR"``, ``"SEG"``); None: all.

    Returns:
        Metadata dicts with at least SeriesInstanceUID, StudyInstanceUID, PatientID, Modality,
        ImageCount, checked by :func:`checked_series_listing`.

    Raises:
        DownloadError: The server cannot be reached or the listing is malformed.
    """
    params = {"Collection": collection}
    if modality:
        params["Modality"] = modality
    data = get_json(f"{tcia_url(base_url)}/getSeries", params)
    if not isinstance(data, list):
        raise DownloadError(f"TCIA collection {collection}: unexpected series listing")
    return checked_series_listing(data, f"TCIA collection {collection}")


def checked_series_listing(data: object, where: str) -> list[dict[str, Any]]:
    """A TCIA series listing (from the server, or the ``series.json`` kept beside a download)
    with every entry checked.

    Each entry must be a dict whose ``SeriesInstanceUID`` is a safe name (:func:`server_name`)
    and whose ``ImageCount``, when given, is a whole number >= 0.

    Args:
        data: The listing as decoded from JSON.
        where: What the messages call its source (``"TCIA collection X"``, a file).

    Returns:
        Copies of the entries, ``ImageCount`` as an int (or None when not given).

    Raises:
        DownloadError: Naming the entry that fails a check.
    """
    if not isinstance(data, list):
        raise DownloadError(f"{where}: the series listing is a {type(data).__name__}, not a list")
    checked = []
    for index, entry in enumerate(data):
        if not isinstance(entry, dict):
            raise DownloadError(
                f"{where}: series entry {index} is a {type(entry).__name__}, "
                "not a series description"
            )
        if "SeriesInstanceUID" not in entry:
            raise DownloadError(f"{where}: series entry {index} has no SeriesInstanceUID")
        server_name(entry["SeriesInstanceUID"], f"{where}: the SeriesInstanceUID of entry {index}")
        entry = dict(entry)
        entry["ImageCount"] = _count(
            entry.get("ImageCount"), f"{where}: the ImageCount of series entry {index}"
        )
        checked.append(entry)
    return checked


def tcia_download_series(
    series_uid: str,
    dest_dir: str | Path,
    base_url: str | None = None,
    expected_count: int | None = None,
    progress: bool = True,
) -> Path:
    """Download one series (``getImage?SeriesInstanceUID=...``, a zip of DICOM files) into
    ``dest_dir`` (created complete or not at all).

    A folder already marked complete (``.complete``) is kept as it is.

    Args:
        series_uid: The series' SeriesInstanceUID (a safe name, see :func:`server_name`).
        dest_dir: The series folder to create; its name must be a safe name too.
        base_url: The TCIA base URL; None: :func:`tcia_url`'s default.
        expected_count: The number of DICOM files the series must hold; None: not checked.
        progress: Whether to show a progress bar.

    Returns:
        ``dest_dir``.

    Raises:
        DownloadError: A name is unsafe, or the download is not a valid zip.
        ChecksumError: The file count differs from ``expected_count``.
    """
    server_name(series_uid, "the series UID")
    dest_dir = Path(dest_dir)
    server_name(dest_dir.name, "the series folder")
    if (dest_dir / ".complete").exists():
        return dest_dir
    url = (
        f"{tcia_url(base_url)}/getImage?{urllib.parse.urlencode({'SeriesInstanceUID': series_uid})}"
    )
    archive = dest_dir.with_name(dest_dir.name + ".zip")
    download(url, archive, progress=progress)
    staging = dest_dir.with_name(dest_dir.name + ".extracting")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        safe_extract(archive, staging)
    except (zipfile.BadZipFile, tarfile.TarError, DamagedArchiveError) as error:
        archive.unlink()
        raise DownloadError(
            f"series {series_uid}: the download is not a valid zip ({error}); "
            "re-run to download it again"
        ) from None
    count = sum(
        1
        for p in staging.rglob("*")
        if p.is_file() and p.suffix.lower() != ".csv" and not p.name.upper().startswith("LICENSE")
    )
    if expected_count is not None and count != expected_count:
        shutil.rmtree(staging, ignore_errors=True)
        archive.unlink()
        raise ChecksumError(
            f"series {series_uid}: expected {expected_count} DICOM files, got {count}"
        )
    shutil.rmtree(dest_dir, ignore_errors=True)
    staging.replace(dest_dir)
    (dest_dir / ".complete").write_text(f"{count}\n")
    archive.unlink()
    return dest_dir


# -- archives -------------------------------------------------------------------------------
def _check_member_name(name: str, archive: Path) -> PurePosixPath:
    normalized = name.replace("\\", "/")
    path = PurePosixPath(normalized)
    if (
        normalized.startswith("/")
        or (len(normalized) > 1 and normalized[1] == ":")
        or path.is_absolute()
    ):
        raise UnsafeArchiveError(
            f"{archive.name}: member '{name}' has an absolute path; refusing to extract"
        )
    if any(part == ".." for part in path.parts):
        raise UnsafeArchiveError(
            f"{archive.name}: member '{name}' leaves the destination ('..'); refusing to extract"
        )
    return path


def _check_link(member: PurePosixPath, target: str, archive: Path, hard: bool = False) -> None:
    if target.startswith("/") or (len(target) > 1 and target[1] == ":"):
        raise UnsafeArchiveError(
            f"{archive.name}: link '{member}' -> '{target}' points to an "
            "absolute path; refusing to extract"
        )
    base = PurePosixPath() if hard else member.parent
    depth = len(base.parts)
    for part in PurePosixPath(target.replace("\\", "/")).parts:
        if part == "..":
            depth -= 1
            if depth < 0:
                raise UnsafeArchiveError(
                    f"{archive.name}: link '{member}' -> '{target}' "
                    "escapes the destination; refusing to extract"
                )
        elif part != ".":
            depth += 1


class _GuardedTree:
    """Writes into ``dest`` only: every path is resolved (``os.path.realpath``, following the
    links made so far) and must stay inside ``dest`` before anything is created there; each
    symbolic link is checked the same way once it exists, and all links again at the end (a
    later link can change where an earlier one leads). On a refusal everything made so far is
    removed, and a file or link that was there before and that a member replaced is put back
    (it was set aside, renamed, until the extraction succeeded). Hard links are copies of a
    regular file already extracted inside ``dest``."""

    def __init__(self, dest: Path, archive: Path, replaceable: set[str] | None = None) -> None:
        self.dest = dest
        self.archive = archive
        #: the files (paths relative to ``dest``) a member may replace; None: any
        self.replaceable = replaceable
        self.existed = dest.exists()
        #: (the path, where its earlier file or link waits) for every replaced one
        self.set_aside: list[tuple[Path, Path]] = []
        dest.mkdir(parents=True, exist_ok=True)
        self.root = os.path.realpath(dest)
        self.created: list[Path] = []
        self.links: list[tuple[str, Path]] = []
        self.files: list[Path] = []

    def _inside(self, path: Path | str) -> bool:
        real = os.path.realpath(path)
        return real == self.root or real.startswith(self.root + os.sep)

    def _refuse(self, name: str, why: str) -> None:
        raise UnsafeArchiveError(f"{self.archive.name}: member '{name}' {why}; refusing to extract")

    def path(self, name: str) -> Path:
        """Where member ``name`` goes, after checking it (and its parents) lead inside."""
        member = _check_member_name(name, self.archive)
        out = self.dest.joinpath(*member.parts) if member.parts else self.dest
        if not self._inside(out):
            self._refuse(name, "would be written outside the destination through a link")
        return out

    def _parents(self, out: Path) -> None:
        for parent in out.parents:
            if parent.exists() and not parent.is_dir():
                raise UnsafeArchiveError(
                    f"{self.archive.name}: '{out.relative_to(self.dest)}' needs the folder "
                    f"'{parent.relative_to(self.dest)}', which is a file (the archive has both); "
                    "refusing to extract"
                )
        if out.is_dir() and not out.is_symlink():
            raise UnsafeArchiveError(
                f"{self.archive.name}: '{out.relative_to(self.dest)}' is a file in the archive "
                "and a folder too; refusing to extract"
            )
        missing = [p for p in reversed(out.parents) if not p.exists() and not p.is_symlink()]
        out.parent.mkdir(parents=True, exist_ok=True)
        self.created.extend(missing)

    def directory(self, name: str) -> None:
        out = self.path(name)
        if not out.exists():
            self._parents(out)
            out.mkdir(exist_ok=True)
            self.created.append(out)

    def _set_aside(self, out: Path) -> None:
        """Rename what is at ``out`` already (a file or a link, never followed) beside it, to
        put it back if the extraction is refused, or delete it once it succeeded."""
        if not (out.is_symlink() or out.is_file()) or any(out == p for p, _ in self.set_aside):
            return
        relative = out.relative_to(self.dest).as_posix()
        if (
            self.replaceable is not None
            and relative not in self.replaceable
            and out not in self.created
        ):  # a member given twice replaces itself
            raise UnsafeArchiveError(
                f"{self.archive.name}: member '{relative}' would replace {out}, which no "
                "extraction wrote (your file?); refusing to extract: move it out, then run "
                "again"
            )
        spare = out.with_name(f".{out.name}.intrabench-replaced-{len(self.set_aside)}")
        os.replace(out, spare)
        self.set_aside.append((out, spare))

    def file(self, name: str, source) -> Path:
        out = self.path(name)
        self._parents(out)
        self._set_aside(out)  # replace a file or link, never write through it
        with open(out, "wb") as target:
            shutil.copyfileobj(source, target, _CHUNK)
        self.created.append(out)
        self.files.append(out)
        return out

    def symlink(self, name: str, target: str) -> None:
        out = self.path(name)
        self._parents(out)
        self._set_aside(out)
        if out.is_symlink() or out.is_file():  # a member extracted earlier in this archive
            out.unlink()
        os.symlink(target, out)
        self.created.append(out)
        self.links.append((name, out))
        if not self._inside(out):
            self._refuse(name, f"is a link to '{target}', which resolves outside the destination")

    def hardlink(self, name: str, target: str) -> Path:
        source = self.path(target)
        if source.is_symlink() or not source.is_file() or source not in self.files:
            self._refuse(
                name, f"is a hard link to '{target}', which is not a file extracted before it"
            )
        out = self.path(name)
        self._parents(out)
        self._set_aside(out)
        if out.is_symlink():
            out.unlink()
        shutil.copyfile(source, out)
        self.created.append(out)
        self.files.append(out)
        return out

    def finish(self) -> None:
        for name, out in self.links:
            if not self._inside(out):
                self._refuse(name, "is a link that resolves outside the destination")
        for _path, spare in self.set_aside:  # extracted: the replaced versions go
            spare.unlink(missing_ok=True)
        self.set_aside = []

    def undo(self) -> None:
        for path in reversed(self.created):
            try:
                if path.is_symlink() or path.is_file():
                    path.unlink()
                elif path.is_dir():
                    path.rmdir()
            except OSError:
                pass
        for path, spare in reversed(self.set_aside):  # what was there before comes back
            try:
                if path.is_symlink() or path.is_file():
                    path.unlink()
                os.replace(spare, path)
            except OSError:
                pass
        if not self.existed:
            shutil.rmtree(self.dest, ignore_errors=True)


def safe_extract(
    archive: str | Path,
    dest: str | Path,
    password: str | bytes | None = None,
    replaceable: set[str] | None = None,
) -> list[Path]:
    """:func:`_extract` with every way an archive can be damaged (a bad CRC, a corrupt deflate,
    bz2 or xz stream, a cut ``.tar.gz``, overlapping zip entries) turned into one
    :class:`DamagedArchiveError` line; what was written is removed.

    Args:
        archive: A zip or tar archive (tar may be gzip, bz2 or xz compressed).
        dest: The folder to extract into.
        password: For encrypted (ZipCrypto) zip archives; None: none.
        replaceable: The files (``/``-separated paths relative to ``dest``) a member may
            replace; any other file already there is refused. None: every file may be replaced.

    Returns:
        The extracted file paths.

    Raises:
        DamagedArchiveError: The archive is damaged or declares more than the bounds.
        UnsafeArchiveError: A member would leave ``dest`` (absolute paths, ``..``, links out),
            is a device or FIFO, or would replace a file not in ``replaceable``.
    """
    import lzma
    import zlib

    archive = Path(archive)
    try:
        return _extract(archive, Path(dest), password, replaceable)
    except NotImplementedError as error:  # before RuntimeError: it is one
        raise DamagedArchiveError(
            f"{archive.name}: {error} (a compression method Python's "
            "zipfile cannot read); unpack it with another tool"
        ) from None
    except (
        zipfile.BadZipFile,
        tarfile.TarError,
        zlib.error,
        EOFError,
        lzma.LZMAError,
        OSError,
    ) as error:
        if isinstance(error, OSError) and not _damaged_stream(error):
            raise  # a full disk, permissions: not the archive's fault, and said as they are
        raise DamagedArchiveError(
            f"{archive.name} is damaged ({type(error).__name__}: "
            f"{str(error)[:120]}); re-download it"
        ) from None


def _damaged_stream(error: OSError) -> bool:
    """Whether an OSError is a compressed stream's complaint (gzip, bz2), not the system's."""
    import gzip

    return isinstance(error, gzip.BadGzipFile) or (error.errno is None and bool(str(error)))


def _extract(
    archive: Path,
    dest: Path,
    password: str | bytes | None = None,
    replaceable: set[str] | None = None,
) -> list[Path]:
    """Extract a zip or tar archive into ``dest`` after checking every member.

    Raises UnsafeArchiveError, and removes what it had written, for absolute paths, ``..``
    components, links whose target leaves ``dest`` (checked on the names first, then on the
    real path of every member and link as it is made, links followed, and of every link again
    at the end: chains of links cannot lead out), hard links to anything but a regular file
    extracted before them, and device/FIFO members. Returns the extracted file paths.
    ``password`` is for encrypted (ZipCrypto) zip archives. ``replaceable``: the files
    (``/``-separated paths relative to ``dest``) a member may replace, any other file already
    there is refused the same way (None: every file may be replaced).
    """
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as bundle:
            members = bundle.infolist()
            check_extract_size(archive, sum(int(m.file_size) for m in members), dest)
            links = {}
            for info in members:
                path = _check_member_name(info.filename, archive)
                mode = info.external_attr >> 16
                if stat.S_ISLNK(mode):
                    target = bundle.read(info, pwd=_pwd(password)).decode("utf-8")
                    _check_link(path, target, archive)
                    links[info.filename] = target
            tree = _GuardedTree(dest, archive, replaceable)
            try:
                for info in members:
                    if info.filename in links:
                        tree.symlink(info.filename, links[info.filename])
                    elif info.is_dir():
                        tree.directory(info.filename)
                    else:
                        try:
                            with bundle.open(info, pwd=_pwd(password)) as source:
                                tree.file(info.filename, source)
                        except NotImplementedError:
                            raise
                        except RuntimeError as error:  # encrypted without the right password
                            raise UserError(
                                f"{archive.name}: cannot decrypt '{info.filename}' "
                                f"({error}); give the archive's password"
                            ) from None
                tree.finish()
            except BaseException:
                tree.undo()
                raise
        return tree.files
    if not tarfile.is_tarfile(archive):
        raise UserError(f"{archive}: not a zip or tar archive")
    with tarfile.open(archive) as bundle:
        members = bundle.getmembers()
        check_extract_size(archive, sum(int(m.size) for m in members if m.isfile()), dest)
        for member in members:
            path = _check_member_name(member.name, archive)
            if member.issym():
                _check_link(path, member.linkname, archive)
            elif member.islnk():
                _check_member_name(member.linkname, archive)
                _check_link(path, member.linkname, archive, hard=True)
            elif not (member.isfile() or member.isdir()):
                raise UnsafeArchiveError(
                    f"{archive.name}: member '{member.name}' is a device "
                    "or FIFO; refusing to extract"
                )
        tree = _GuardedTree(dest, archive, replaceable)
        try:
            for member in members:
                if member.isdir():
                    tree.directory(member.name)
                elif member.issym():
                    tree.symlink(member.name, member.linkname)
                elif member.islnk():
                    tree.hardlink(member.name, member.linkname)
                else:
                    source = bundle.extractfile(member)
                    if source is None:
                        continue
                    with source:
                        tree.file(member.name, source)
            tree.finish()
        except BaseException:
            tree.undo()
            raise
    return tree.files


def _pwd(password: str | bytes | None) -> bytes | None:
    if password is None:
        return None
    return password.encode("utf-8") if isinstance(password, str) else password
