"""Prompt elements registered by kind: the built-in five keep their JSON, cost and drawing, and
a kind added here (one class) works end to end: JSON, cost, slices, drawing, human seconds, and
a run with a model that accepts it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pytest

from intrabench import prompt_elements, registry
from intrabench.interfaces import Model, Prompter
from intrabench.prompt_elements import Click, PromptElement, Stroke, register_element
from intrabench.types import (
    INTERACTION_COST,
    Box2D,
    Box3D,
    Interaction,
    Lasso,
    Point,
    Prediction,
    Prompt,
    Scribble,
    SliceBox,
)


@dataclass(frozen=True)
class Circle(PromptElement):
    """A disc of ``radius`` voxels around (z, y, x) on axial slice z (the test's new kind)."""

    kind: ClassVar[str] = "circle"
    interaction: ClassVar[str] = "circle"
    cost: ClassVar[int] = 2
    seconds: ClassVar[float] = 4.5
    z: int
    y: int
    x: int
    radius: int
    label: int = 1

    def slices(self) -> set[int]:
        return {self.z}

    def marks(self) -> list:
        angles = np.linspace(0, 2 * np.pi, 8, endpoint=False)
        ys = np.round(self.y + self.radius * np.sin(angles)).astype(int)
        xs = np.round(self.x + self.radius * np.cos(angles)).astype(int)
        return [Stroke(np.column_stack([np.full(8, self.z), ys, xs]), self.label, closed=True)]

    def to_json(self) -> dict[str, Any]:
        return {"zyx": [self.z, self.y, self.x], "radius": self.radius, "label": self.label}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Circle:
        return cls(*data["zyx"], data["radius"], data["label"])

    def outside(self, shape: tuple[int, ...]) -> str | None:
        return None if 0 <= self.z < shape[0] else f"on slice {self.z}"


class CircleModel(Model):
    """Segments the disc it is given, on its slice: a model that takes the new kind."""

    name = "test-circle-model"
    dimension = 3
    accepts = frozenset({"circle"})

    def set_case(self, image):
        self.shape = image.shape

    def predict(self, prompt, previous=None, update_slices=None):
        mask = np.zeros(self.shape, dtype=bool)
        zz, yy, xx = np.indices(self.shape)
        for circle in prompt.elements_of("circle"):
            mask |= (zz == circle.z) & (
                (yy - circle.y) ** 2 + (xx - circle.x) ** 2 <= circle.radius**2
            )
        return Prediction(mask)


class CirclePrompter(Prompter):
    """One circle on the target's middle slice, around its centre."""

    name = "test-circle"
    dimensions = frozenset({3})
    kinds = frozenset({"circle"})
    effort_rule = "1 circle = 2"

    def initial(self, context):
        z, y, x = (int(np.median(a)) for a in np.nonzero(context.ground_truth))
        return Prompt(
            extras=(Circle(z, y, x, 3),),
            interactions=(Interaction("circle"),),  # type: ignore[arg-type]
            effort_label="2",
        )


@pytest.fixture
def circle_kind():
    register_element(Circle)
    registry.models.register(CircleModel)
    registry.prompters.register(CirclePrompter)
    yield
    registry.models.unregister(CircleModel.name)
    registry.prompters.unregister(CirclePrompter.name)
    prompt_elements.unregister_element("circle")


def test_the_built_in_kinds_and_their_costs_and_seconds_are_registered_in_order():
    from intrabench.timing.human import DEFAULT_SECONDS

    assert list(prompt_elements.ELEMENT_KINDS) == ["point", "box2d", "box3d", "scribble", "lasso"]
    assert INTERACTION_COST == {
        "click": 1,
        "box2d": 2,
        "box3d": 3,
        "scribble": 3,
        "boundary_slice": 1,
        "lasso": 3,
    }
    assert DEFAULT_SECONDS == {
        "click": 2.4,
        "box2d": 7.0,
        "box3d": 13.0,
        "scribble": 10.9,
        "boundary_slice": 3.0,
        "lasso": 10.9,
    }


def test_saved_prompt_json_reads_back_identically():
    """The JSON of a prompt with every built-in kind, as runs have saved it: read and written
    back byte for byte; its elements are typed, in the user's order."""
    saved = (
        '{"points":[[1,2,3],[4,5,6]],"labels":[1,0],"boxes":{"2":[1,1,5,6]},'
        '"box3d":[0,1,2,3,4,5],"scribbles":[{"label":1,"points":[[1,1,1],[1,1,2]]}],'
        '"lassos":[{"z":3,"label":0,"contour":[[1,1],[1,4],[4,4]]}],'
        '"order":[["box3d",0],["point",1],["point",0],["box2d",2],["scribble",0],["lasso",0]]}'
    )
    prompt = Prompt.from_json(saved)
    assert prompt.to_json() == saved
    elements = prompt.typed_elements()
    assert [e.kind for e in elements] == ["box3d", "point", "point", "box2d", "scribble", "lasso"]
    assert elements[1] == Point((4, 5, 6), 0)
    assert elements[3] == SliceBox(2, Box2D(1, 1, 5, 6))
    assert prompt.slices() == [0, 1, 2, 3, 4]
    assert prompt.kinds == {"point", "box2d", "box3d", "scribble", "lasso"}


@pytest.mark.parametrize(
    "element",
    [
        Point((1, 2, 3), 0),
        SliceBox(4, Box2D(1, 2, 3, 4)),
        Box3D(0, 1, 2, 3, 4, 5),
        Scribble(np.array([[1, 2, 3], [1, 2, 4]]), 1),
        Lasso(2, np.array([[1, 1], [1, 5], [5, 5]]), 0),
    ],
)
def test_each_built_in_element_round_trips_its_own_json(element):
    back = type(element).from_json(json.loads(json.dumps(element.to_json())))
    assert back.to_json() == element.to_json()
    assert back.slices() == element.slices()


def test_a_new_kind_is_one_class_json_cost_slices_and_seconds(circle_kind):
    from intrabench.timing.human import TimeModel, human_seconds

    circle = Circle(3, 10, 12, 2)
    prompt = Prompt(
        points=[[1, 1, 1]],
        point_labels=[1],
        extras=(circle,),
        interactions=(Interaction("click"), Interaction("circle")),  # type: ignore[arg-type]
    )
    assert prompt.effort == 1 + 2
    assert prompt.kinds == {"point", "circle"}
    assert prompt.slices() == [1, 3]
    text = prompt.to_json()
    assert json.loads(text)["elements"] == [
        {"kind": "circle", "zyx": [3, 10, 12], "radius": 2, "label": 1}
    ]
    back = Prompt.from_json(text)
    assert back.elements_of("circle") == (circle,)
    assert back.to_json() == text
    merged = back.merged_with(Prompt(extras=(Circle(5, 1, 1, 1),)))
    assert [e.kind for e in merged.typed_elements()] == ["point", "circle", "circle"]
    assert merged.element_order()[-1] == ("circle", 1)
    assert Prompt(extras=(Circle(40, 1, 1, 1),)).outside((8, 20, 20)) == "circle on slice 40"
    # a 2D model gets the extras of each slice
    assert prompt.on_slice(3).extras == (circle,) and not prompt.on_slice(3).is_empty
    assert prompt.on_slice(2).is_empty
    from intrabench.engine.finishing import slices_scrolled

    assert slices_scrolled(prompt, []) == (2, [1, 3])  # the click's slice, then the circle's
    assert prompt.on_slice(3).key() != Prompt(extras=(Circle(3, 10, 12, 3),)).on_slice(3).key()
    # human seconds: the registered kind's own default
    model = TimeModel()
    assert model.seconds["circle"] == 4.5
    rows = pd.DataFrame(
        {"interactions_click": [1], "interactions_circle": [1], "slices_scrolled": [0]}
    )
    assert human_seconds(rows, model).tolist() == pytest.approx([2.4 + 4.5])


def test_an_unknown_kind_in_saved_json_is_one_clear_error():
    with pytest.raises(ValueError, match="unknown prompt element kind 'circle' \\(registered: "):
        Prompt.from_json(
            '{"points":[],"labels":[],"boxes":{},"box3d":null,"scribbles":[],'
            '"elements":[{"kind":"circle","zyx":[1,1,1],"radius":1,"label":1}]}'
        )


def test_a_new_kind_is_drawn_in_the_gallery_and_on_the_review_page(circle_kind):
    from intrabench.reports.overlays import StepPanel, draw_overlay, prompt_slices
    from intrabench.review.render import prompt_marks

    prompt = Prompt(points=[[3, 10, 10]], point_labels=[0], extras=(Circle(3, 10, 12, 2),))
    assert isinstance(prompt.marks()[0], Click)
    assert prompt_slices(prompt) == {3: 2}
    marks = prompt_marks(prompt, 3, (20, 24))
    assert marks["clicks"] == [[9, 13, 0]]
    (stroke,) = marks["strokes"]
    assert stroke["label"] == 1 and len(stroke["points"]) == 9  # closed: back to its start
    assert stroke["points"][0] == [19 - 10, 23 - 14]
    truth = np.zeros((6, 20, 24), dtype=bool)
    truth[3, 8:13, 10:15] = True
    png = draw_overlay(
        np.zeros(truth.shape, np.float32),
        truth,
        [StepPanel("step 0", truth, prompt, 1.0)],
        (1.0, 1.0, 1.0),
    )
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_run_with_the_new_kind_and_a_model_that_takes_it(circle_kind, tmp_path):
    from intrabench.config import RunConfig
    from intrabench.execution.runner import Runner

    config = RunConfig.model_validate(
        {
            "name": "circles",
            "datasets": [{"name": "demo-phantoms", "n_cases": 1}],
            "models": [{"name": "test-circle-model"}],
            "prompters": ["test-circle"],
            "refinement_steps": 0,
        }
    )
    Runner(config, tmp_path / "run", background="inline").run()
    rows = pd.read_parquet(tmp_path / "run" / "results.parquet")
    assert len(rows) >= 1
    assert set(rows["interactions_circle"]) == {1}
    assert set(rows["initial_effort"]) == {2}
    assert (rows["dice"] > 0).all()
    saved = Prompt.from_json(rows["prompt_json"].iloc[0])
    assert [e.kind for e in saved.typed_elements()] == ["circle"]


def test_prompt_names_no_kind_its_methods_ask_each_registered_class():
    """Prompt's methods hold no kind's name and read no kind's field: the per-kind behaviour is
    the element classes'."""
    import ast
    from pathlib import Path

    import intrabench.types as types_module

    tree = ast.parse(Path(types_module.__file__).read_text(encoding="utf-8"))
    (prompt_class,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Prompt"]
    kind_names = set(prompt_elements.ELEMENT_KINDS) | {"click", "mask"}
    kind_fields = {"points", "point_labels", "boxes", "box3d", "scribbles", "lassos"}
    found = []
    for method in prompt_class.body:
        if not isinstance(method, ast.FunctionDef):
            continue
        body = method.body[1:] if ast.get_docstring(method) else method.body
        for node in (inner for statement in body for inner in ast.walk(statement)):
            if isinstance(node, ast.Constant) and node.value in kind_names:
                found.append(f"{method.name}: {node.value!r}")
            if isinstance(node, ast.Attribute) and node.attr in kind_fields:
                found.append(f"{method.name}: .{node.attr}")
    assert found == []


def test_a_prompt_from_typed_elements_in_the_users_order():
    scribble = Scribble(np.array([[2, 1, 1], [2, 1, 2]]), 0)
    elements = [
        Box3D(0, 1, 2, 3, 4, 5),
        Point((4, 5, 6), 0),
        SliceBox(2, Box2D(1, 1, 5, 6)),
        Point((1, 2, 3), 1),
        scribble,
    ]
    prompt = Prompt.from_elements(elements, effort_label="5")
    assert prompt.points.tolist() == [[4, 5, 6], [1, 2, 3]]
    assert prompt.point_labels.tolist() == [0, 1] and prompt.point_labels.dtype == np.int8
    assert prompt.boxes == {2: Box2D(1, 1, 5, 6)} and prompt.box3d == Box3D(0, 1, 2, 3, 4, 5)
    assert prompt.element_order() == (
        ("box3d", 0),
        ("point", 0),
        ("box2d", 2),
        ("point", 1),
        ("scribble", 0),
    )
    assert prompt.typed_elements() == elements[:4] + [scribble]
    assert prompt.effort_label == "5"
    assert prompt.elements_of("point") == (Point((4, 5, 6), 0), Point((1, 2, 3), 1))
    assert prompt.elements_of("box2d") == (SliceBox(2, Box2D(1, 1, 5, 6)),)
    assert prompt.elements_of("nothing") == ()
    # the clicks' slices 4 and 1, the box's 2, the scribble's 2; not the 3D box's 0..3
    assert prompt.visited_slices() == [1, 2, 4]
    assert prompt.slices() == [0, 1, 2, 3, 4]
    assert Prompt.from_json(prompt.to_json()).element_order() == prompt.element_order()


def test_merging_replaces_a_box_by_its_key_and_shifts_indexed_kinds():
    first = Prompt.from_elements([Point((1, 1, 1), 1), SliceBox(3, Box2D(0, 0, 2, 2))])
    second = Prompt.from_elements([SliceBox(3, Box2D(1, 1, 4, 4)), Point((2, 2, 2), 0)])
    merged = first.merged_with(second)
    assert merged.element_order() == (("point", 0), ("box2d", 3), ("point", 1))
    assert merged.boxes == {3: Box2D(1, 1, 4, 4)}
    assert merged.points.tolist() == [[1, 1, 1], [2, 2, 2]]
    assert merged.outside((4, 4, 4)) == "the box on slice 3 ((1, 1, 4, 4))"


def test_a_new_kind_through_typed_elements_and_its_default_class_methods(circle_kind):
    circle = Circle(3, 10, 12, 2)
    prompt = Prompt.from_elements([circle, Point((1, 1, 1), 1), Circle(5, 1, 1, 1)])
    assert prompt.extras == (circle, Circle(5, 1, 1, 1))
    assert prompt.element_order() == (("circle", 0), ("point", 0), ("circle", 1))
    assert [kind for kind, _ in prompt.elements()] == ["circle", "point", "circle"]
    assert prompt.elements()[1] == ("point", ((1, 1, 1), 1))
    assert Circle.stored(prompt) == prompt.elements_of("circle") == prompt.extras
    assert prompt.visited_slices() == [1, 3, 5]
    assert prompt.summary()["n_points"] == 1  # an added kind adds no summary column
    assert Prompt.from_json(prompt.to_json()).typed_elements() == prompt.typed_elements()
