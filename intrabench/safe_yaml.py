"""YAML read under the config rules (the run's config, a dataset's folder spec): safe
loading, a key given twice refused, bounded size, expansion and nesting.

It sits below :mod:`intrabench.config` so that components (a folder dataset reading its spec)
read YAML the same way without importing the config.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from intrabench.errors import ConfigError

#: libyaml's safe loader where PyYAML has it (9x faster than the Python one on a long list)
_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _UniqueKeyLoader(_FAST_LOADER):  # type: ignore[misc, valid-type]
    """yaml.safe_load that refuses a key given twice in one mapping (PyYAML keeps the last,
    silently: ``refinement_steps: 5`` then ``refinement_steps: 1`` ran 1 step)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key '{key}' is given twice", key_node.start_mark
                )
            seen[key] = True
        return super().construct_mapping(node, deep=deep)


#: the most values a config's YAML may expand to (aliases included): a real config has a few
#: hundred; a 375-byte alias bomb expanded to 6.8 GB before this bound
MAX_YAML_VALUES = 100_000


def _expanded_values(root: yaml.Node) -> int:
    """How many values the YAML graph under ``root`` holds once its aliases are expanded
    (each alias counted as a full copy), computed without expanding it: each node's count once
    (iteratively: deep nesting does not exhaust Python's recursion), capped just above
    :data:`MAX_YAML_VALUES`."""
    counts: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in counts:
            continue
        if isinstance(node, yaml.ScalarNode):
            counts[id(node)] = 1
            continue
        children = (
            [v for pair in node.value for v in pair]
            if isinstance(node, yaml.MappingNode)
            else list(node.value)
        )
        if children_done:
            counts[id(node)] = min(
                MAX_YAML_VALUES + 1, 1 + sum(counts[id(child)] for child in children)
            )
        else:
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in counts)
    return counts[id(root)]


#: the largest config file read (a real one has a few kilobytes; a 10 MB list of seeds took
#: minutes and gigabytes before the value bound refused it: docs/refusals.md)
MAX_CONFIG_BYTES = 1_000_000


#: the deepest nesting a config may have (a real one has 4 levels); deeper is refused before
#: a node is built, so that no parser recurses that deep
MAX_YAML_DEPTH = 100


def _check_expansion(text: str, source: str) -> None:
    """ConfigError when the YAML ``text`` expands to more than :data:`MAX_YAML_VALUES` values
    (each alias counting as the values of its anchor; the message says whether aliases did it)
    or nests deeper than :data:`MAX_YAML_DEPTH`. Counted on libyaml's parser events, stopping
    at the bound, before any node is built; text that does not parse is left to the loader,
    which says where."""
    sizes: dict[str, int] = {}
    starts: list[tuple[int, str | None]] = []
    seen, aliased = 0, False
    try:
        for event in yaml.parse(text, Loader=_FAST_LOADER):
            if isinstance(event, yaml.ScalarEvent):
                seen += 1
                if event.anchor:
                    sizes[event.anchor] = 1
            elif isinstance(event, yaml.AliasEvent):
                seen += sizes.get(event.anchor, 1)
                aliased = True
            elif isinstance(event, yaml.CollectionStartEvent):
                starts.append((seen, event.anchor))
                seen += 1
                if len(starts) > MAX_YAML_DEPTH:
                    raise ConfigError(
                        f"{source}: the YAML is nested too deeply to read (more "
                        f"than {MAX_YAML_DEPTH} levels)"
                    )
            elif isinstance(event, yaml.CollectionEndEvent):
                begin, anchor = starts.pop()
                if anchor:
                    sizes[anchor] = seen - begin
            if seen > MAX_YAML_VALUES:
                why = (
                    "aliases repeated inside aliases?); write it out plainly"
                    if aliased
                    else "a list of seeds or cases this long?); a config has a few hundred"
                )
                raise ConfigError(
                    f"{source}: the YAML expands to more than {MAX_YAML_VALUES:,} values ({why}"
                )
    except yaml.YAMLError as error:
        if "nesting depth" in str(error):  # libyaml's own bound (1,000 levels)
            raise ConfigError(f"{source}: the YAML is nested too deeply to read") from None


def read_yaml(text: str, source: str) -> Any:
    """Safe YAML with the config rules: at most :data:`MAX_CONFIG_BYTES` of text, a key given
    twice is refused, the document may expand to at most :data:`MAX_YAML_VALUES` values (alias
    bombs, long lists) and nest :data:`MAX_YAML_DEPTH` levels deep (ConfigError, never a
    RecursionError).

    Args:
        text: The YAML text.
        source: What the messages call it (a file name).

    Returns:
        The document (dicts, lists, scalars), or None for an empty one.

    Raises:
        ConfigError: One of the rules is broken.
        yaml.YAMLError: The text is not YAML (:func:`read_yaml_file` turns it into one line).
    """
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"{source}: {len(text) / 1e6:.1f} MB of YAML is more than a config "
            f"may hold ({MAX_CONFIG_BYTES / 1e6:g} MB); a config has a few "
            "kilobytes: is this the right file?"
        )
    _check_expansion(text, source)
    loader = _UniqueKeyLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_values(node) > MAX_YAML_VALUES:
            raise ConfigError(
                f"{source}: the YAML expands to more than {MAX_YAML_VALUES:,} "
                "values (aliases repeated inside aliases?); write it out plainly"
            )
        return loader.construct_document(node)
    except RecursionError:
        raise ConfigError(f"{source}: the YAML is nested too deeply to read") from None
    finally:
        loader.dispose()


def read_yaml_file(path: Path, what: str = "config file") -> Any:
    """The YAML document in ``path`` (:func:`read_yaml`'s rules), or ConfigError in one line:
    a folder, a missing file, not UTF-8, not YAML (with the line).

    Args:
        path: The YAML file.
        what: What the messages call the file (``"config file"``).

    Returns:
        The document, or None for an empty file.

    Raises:
        ConfigError: In one line, for each of the cases above and :func:`read_yaml`'s rules.
    """
    if path.is_dir():
        raise ConfigError(f"{path} is a folder, not a {what}: give the YAML file")
    if not path.is_file():
        raise ConfigError(f"{what} not found: {path}")
    size = path.stat().st_size
    if size > MAX_CONFIG_BYTES:  # before it is read
        raise ConfigError(
            f"{path}: {size / 1e6:.1f} MB is more than a {what} may hold "
            f"({MAX_CONFIG_BYTES / 1e6:g} MB); a config has a few kilobytes: is "
            "this the right file?"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte {error.start}); save the {what} as UTF-8"
        ) from None
    try:
        return read_yaml(text, str(path))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(
            f"{path}:{where} invalid YAML: {getattr(error, 'problem', error)}"
        ) from None
