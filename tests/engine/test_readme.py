"""The README's example run configuration is valid against the registries."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from intrabench.config import parse_config

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_example_config_validates():
    [block] = re.findall(r"```yaml\n(.*?)```", README.read_text(), flags=re.DOTALL)
    config = parse_config(yaml.safe_load(block), source="README example")
    assert [m.name for m in config.models] == ["region-growing-3d", "sam2"]
    assert config.refiners[0].name == "scribble"


def test_performance_history_is_dated_not_by_session():
    """#49 item 11: docs/performance.md spoke of "Session 5" and "Sessions 10-11"; its
    history is written as dated changes of the project."""
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "performance.md").read_text()
    assert not re.search(
        r"\bsessions? \d|\bthis session\b|\bprevious session\b", page, re.IGNORECASE
    )
