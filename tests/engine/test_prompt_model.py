"""Prompt contents, slices, merging and computed effort."""

import numpy as np

from intrabench.types import Box2D, Box3D, Prompt, Scribble, interactions


def test_effort_is_computed_from_interactions():
    prompt = Prompt(
        points=[[1, 2, 3], [4, 5, 6]],
        point_labels=[1, 0],
        boxes={2: Box2D(0, 0, 3, 3)},
        interactions=interactions("click", 2)
        + interactions("box2d", 1)
        + interactions("boundary_slice", 2),
    )
    assert prompt.effort == 2 + 2 + 2
    assert Prompt(box3d=Box3D(0, 0, 0, 1, 1, 1), interactions=interactions("box3d", 1)).effort == 3
    assert Prompt(interactions=interactions("scribble", 1)).effort == 3


def test_slices_and_on_slice_with_3d_box_and_scribbles():
    scribble = Scribble(points=np.array([[5, 1, 1], [6, 1, 2]]), label=1)
    prompt = Prompt(
        points=[[2, 7, 8]],
        point_labels=[0],
        box3d=Box3D(3, 10, 11, 4, 20, 21),
        scribbles=(scribble,),
    )
    assert prompt.slices() == [2, 3, 4, 5, 6]
    on_three = prompt.on_slice(3)
    assert on_three.box == Box2D(10, 11, 20, 21) and len(on_three.points) == 0
    on_two = prompt.on_slice(2)
    assert (
        on_two.box is None and on_two.points.tolist() == [[7, 8]] and on_two.labels.tolist() == [0]
    )
    assert prompt.on_slice(6).points.tolist() == [[1, 2]]
    points, labels = prompt.model_points()
    assert points.shape == (3, 3) and labels.tolist() == [0, 1, 1]
    assert prompt.kinds == frozenset({"point", "box3d", "scribble"})


def test_merge_keeps_both_and_newer_boxes_win():
    first = Prompt(
        points=[[1, 1, 1]],
        point_labels=[1],
        boxes={1: Box2D(0, 0, 2, 2)},
        interactions=interactions("click", 1),
        effort_label="1",
    )
    second = Prompt(
        points=[[2, 2, 2]],
        point_labels=[0],
        boxes={1: Box2D(1, 1, 3, 3)},
        interactions=interactions("scribble", 1),
        effort_label="3",
    )
    merged = first.merged_with(second)
    assert merged.points.tolist() == [[1, 1, 1], [2, 2, 2]]
    assert merged.point_labels.tolist() == [1, 0]
    assert merged.boxes[1] == Box2D(1, 1, 3, 3)
    assert merged.effort == 4


def test_slice_prompt_key_distinguishes_contents():
    a = Prompt(points=[[1, 2, 3]], point_labels=[1]).on_slice(1)
    b = Prompt(points=[[1, 2, 3]], point_labels=[0]).on_slice(1)
    assert a.key() != b.key()
    assert a.key() == Prompt(points=[[1, 2, 3]], point_labels=[1]).on_slice(1).key()


def test_prompt_outside_names_the_first_element_off_the_grid():
    import numpy as np

    from intrabench.types import Box2D, Box3D, Lasso, Prompt, Scribble

    shape = (4, 8, 8)
    assert (
        Prompt(points=np.array([[3, 7, 7], [0, 0, 0]]), point_labels=[1, 0]).outside(shape) is None
    )
    assert (
        Prompt(points=np.array([[3, 7, 7], [0, 8, 0]]), point_labels=[1, 0]).outside(shape)
        == "point 1 at (0, 8, 0)"
    )
    assert (
        Prompt(boxes={2: Box2D(1, 1, 7, 8)}).outside(shape) == "the box on slice 2 ((1, 1, 7, 8))"
    )
    assert (
        Prompt(boxes={4: Box2D(1, 1, 2, 2)}).outside(shape) == "the box on slice 4 ((1, 1, 2, 2))"
    )
    assert Prompt(boxes={1: Box2D(3, 1, 2, 2)}).outside(shape) is not None  # min > max
    assert Prompt(box3d=Box3D(0, 0, 0, 3, 7, 7)).outside(shape) is None
    assert Prompt(box3d=Box3D(-1, 0, 0, 3, 7, 7)).outside(shape) == "the 3D box (-1, 0, 0, 3, 7, 7)"
    assert (
        Prompt(scribbles=(Scribble(np.array([[0, 0, 0], [1, 2, -1]]), 0),)).outside(shape)
        == "scribble 0's voxel (1, 2, -1)"
    )
    assert (
        Prompt(lassos=(Lasso(5, np.array([[1, 1], [2, 2], [1, 3]])),)).outside(shape)
        == "lasso 0 on slice 5"
    )
