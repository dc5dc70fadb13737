"""The run config's reference, generated from its schema: every key, its type, default and
meaning (the ``#:`` comment above the field in the source).

``python -m intrabench.config_reference > docs/configuration.md`` writes it; a test checks that
the committed file is what this module generates, so the reference never drifts from the code.
"""

from __future__ import annotations

import inspect
import re
import typing
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from intrabench.config import (
    ComponentSpec,
    DatasetSpec,
    ModelSpec,
    RefinerSpec,
    RobustnessSpec,
    RunConfig,
)
from intrabench.timing.human import TimeModel

_FIELD = re.compile(r"^\s{4}(\w+)\s*:")

INTRO = """# Run configuration reference

Generated from the config schema by `python -m intrabench.config_reference` (a test keeps this
file equal to its output). A run config is a YAML file given to `intrabench run CONFIG`; any key
can be overridden on the command line with `--set KEY=VALUE` (YAML values, dotted keys for
nested ones: `--set refinement_steps=3 --set robustness.groups=4`), and
`intrabench run CONFIG --dry-run` prints the plan without running it.

Relative paths in component parameters (`spec`, `path`, `root`, `clicks_file`, `checkpoint`,
`checkpoint_dir`) are relative to the config file's folder. `imports` names Python modules
that register your own components (see docs/adding-a-model.md); an unknown component name's
error lists the registered ones and reminds of `imports`. Refiners need a model that accepts
`mask` (its previous prediction): other pairs are skipped with the reason in `skipped.csv`.
"""


def field_docs(cls: type[BaseModel]) -> dict[str, str]:
    """The ``#:`` comment lines right above each field of ``cls`` (or of the base class that
    declares it) in its source, joined.

    Args:
        cls: A pydantic model class.

    Returns:
        Field name -> its comment text; fields without one are absent.
    """
    docs: dict[str, str] = {}
    for owner in reversed(
        [c for c in cls.__mro__ if issubclass(c, BaseModel) and c is not BaseModel]
    ):
        pending: list[str] = []
        for line in inspect.getsource(owner).splitlines():
            stripped = line.strip()
            if stripped.startswith("#:"):
                pending.append(stripped[2:].strip())
                continue
            match = _FIELD.match(line)
            if match and match.group(1) in cls.model_fields and pending:
                docs[match.group(1)] = " ".join(pending)
            pending = []
    return docs


def type_name(annotation: Any) -> str:
    """A short readable type: ``int``, ``list[int]``, ``'all' | 'final' | list[int]``.

    Args:
        annotation: A field's type annotation.

    Returns:
        The type as the reference writes it (``null`` for None).
    """
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in typing.get_args(annotation))
    if origin is typing.Annotated:
        return type_name(typing.get_args(annotation)[0])
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return " | ".join(type_name(a) for a in typing.get_args(annotation))
    if origin is not None:
        args = ", ".join(type_name(a) for a in typing.get_args(annotation))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    if annotation is type(None):
        return "null"
    return getattr(annotation, "__name__", str(annotation))


def default_text(field: Any) -> str:
    """A pydantic field's default as shown in the reference: ``required``, or its value as Markdown
    code.

    Args:
        field: A pydantic ``FieldInfo``.

    Returns:
        ``required``, ``null``, ``see below`` (a nested model), or the value in backticks.
    """
    if field.default_factory is not None:
        value = field.default_factory()
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if isinstance(value, BaseModel):
        return "see below"
    return (
        "null" if value is None else f"`{value!r}`" if not isinstance(value, str) else f"`{value}`"
    )


def section(title: str, cls: type[BaseModel], prefix: str = "") -> str:
    """One Markdown table of a config model's keys: key, type, default, meaning.

    Args:
        title: The section's heading.
        cls: The pydantic model whose fields are listed.
        prefix: Written before each key (``dataset.`` for a nested model).

    Returns:
        The heading and the table, as Markdown.
    """
    docs = field_docs(cls)
    properties = cls.model_json_schema()["properties"]
    lines = [f"## {title}", "", "| key | type | default | meaning |", "|---|---|---|---|"]
    for name, field in cls.model_fields.items():
        meaning = docs.get(name, "").replace("|", "\\|")
        choices = properties.get(name, {}).get("enum") if field.annotation is str else None
        kind = " | ".join(map(repr, choices)) if choices else type_name(field.annotation)
        kind = kind.replace("|", "\\|")
        lines.append(f"| `{prefix}{name}` | {kind} | {default_text(field)} | {meaning} |")
    return "\n".join(lines)


def render_reference() -> str:
    """The whole configuration reference page (``docs/configuration.md``'s generated part) as
    Markdown.

    Returns:
        The page's text, ending in a newline.
    """
    parts = [
        INTRO,
        section("Top level", RunConfig),
        section("Components (`models`, `prompters`, `refiners`)", ComponentSpec),
        "A component is its registered `name` alone (`sam`) or a mapping; keys other than "
        "`name`, `params` and `label` are its parameters (`{name: sam, variant: vit_b}`).",
        section("Models (`models`): a component with three more keys", ModelSpec),
        section("Refiners (`refiners`): a component with one more key", RefinerSpec),
        section("Datasets (`datasets`)", DatasetSpec),
        section("Robustness runs (`robustness`)", RobustnessSpec, "robustness."),
        section("The time model (`time_model`)", TimeModel, "time_model."),
    ]
    return "\n\n".join(parts) + "\n"


if __name__ == "__main__":
    print(render_reference(), end="")
