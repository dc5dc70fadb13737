"""intrabench.masks is the lowest package: it imports nothing of IntraBench but its errors, and
types, protocols, the components and evaluation take their mask geometry from it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _intrabench_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {name for name in names if name.split(".")[0] == "intrabench"}


def test_masks_imports_only_itself_and_the_errors():
    found = {
        f"{path.name} -> {name}"
        for path in (ROOT / "intrabench" / "masks").glob("*.py")
        for name in _intrabench_imports(path)
        if not (name.startswith("intrabench.masks") or name == "intrabench.errors")
    }
    assert found == set()


def test_no_mask_geometry_is_taken_from_the_metrics_module():
    geometry = {"bounding_box", "bounding_box_within", "union_of_boxes", "masks_equal"}
    found = []
    for folder in ("intrabench", "models", "prompters", "datasets"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if (
                    isinstance(node, ast.ImportFrom)
                    and node.module == "intrabench.evaluation.metrics"
                ):
                    taken = {alias.name for alias in node.names} & (
                        geometry | {"freeze_with_box", "union_bbox"}
                    )
                    if taken:
                        found.append(f"{path.relative_to(ROOT)}: {sorted(taken)}")
    assert found == []
