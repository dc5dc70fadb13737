"""The code in the contributor guides runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from intrabench import registry
from intrabench.datasets.phantoms import Phantoms
from intrabench.engine.episode import run_episode

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.DOTALL)


def test_adding_a_prompter_guide_runs():
    from intrabench.prompt_elements import ELEMENT_KINDS, unregister_element

    before = set(ELEMENT_KINDS)
    namespace: dict = {"__name__": "adding_a_prompter_guide"}
    try:
        for block in _python_blocks(DOCS / "adding-a-prompter.md"):
            # dont_inherit: the guide's code runs as a reader's module would, without this
            # module's `from __future__ import annotations` (a dataclass's ClassVar stays one)
            code = compile(block, "adding-a-prompter.md", "exec", dont_inherit=True)
            exec(code, namespace)  # noqa: S102
    finally:
        for kind in set(ELEMENT_KINDS) - before:  # the guide's kind is its own, not the run's
            unregister_element(kind)
    case = Phantoms(n_cases=1).load("phantom_000")
    target = case.targets[0]
    model = registry.models.create("region-growing-3d")
    model.set_case(case.image)
    results = run_episode(
        case,
        target,
        model,
        registry.prompters.create("deepest-click"),
        "deepest-click",
        refiner=registry.refiners.create("first-error-click"),
        refiner_key="first-error-click",
        steps=2,
    )
    click = results[0].prompt.points[0]
    assert case.target_mask(target)[tuple(click)]  # the deepest voxel is inside the target
    assert [r.cumulative_effort for r in results] == [1, 2, 3] or results[-1].converged
    assert 0.0 < results[0].metrics["dice"] <= 1.0
    assert np.isfinite([r.metrics["dice"] for r in results]).all()
