"""Work on large volumes reads bounding boxes, not whole volumes: the parts that make it so."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from intrabench import registry
from intrabench.execution.user_worker import PackedMask
from intrabench.masks import bounding_box, known_box
from intrabench.masks import measure_box as _measure_box
from intrabench.types import Box2D, Case, Prompt, Target

small_masks = arrays(
    bool, st.tuples(st.integers(1, 6), st.integers(1, 7), st.integers(1, 7)), elements=st.booleans()
)


@settings(max_examples=100, deadline=None)
@given(small_masks)
def test_a_packed_mask_unpacks_frozen_with_its_true_box(mask):
    unpacked = PackedMask.pack(mask).unpack()
    np.testing.assert_array_equal(unpacked, mask)
    assert not unpacked.flags.writeable
    assert known_box(unpacked) == _measure_box(mask)  # carried, not measured
    assert bounding_box(unpacked) == _measure_box(mask)


def test_case_target_masks_come_from_the_label_boxes():
    label = np.zeros((6, 8, 9), dtype=np.int32)
    label[1:3, 2:5, 1:2] = 2
    label[4, 6, 7] = 5
    targets = (Target("a", 2, "lesion"), Target("b", 5, "lesion"), Target("c", 3, "lesion"))
    case = Case("d", "c", None, label, targets)  # type: ignore[arg-type]
    for target in targets:
        np.testing.assert_array_equal(case.target_mask(target), label == target.label_value)
    assert case.target_box(targets[0]) == (slice(1, 3), slice(2, 5), slice(1, 2))
    assert case.target_box(targets[2]) is None


def test_a_slice_models_prediction_carries_its_tight_box():
    case = next(iter(registry.datasets.create("demo-phantoms", {"n_cases": 1})))
    model = registry.models.create("synthetic-network-2d", {"forward_ms": 0})
    model.set_case(case.image)
    box = case.target_box(case.targets[0])
    z = (box[0].start + box[0].stop) // 2
    first = model.predict(
        Prompt(boxes={z: Box2D(box[1].start, box[2].start, box[1].stop - 1, box[2].stop - 1)})
    )
    assert not first.mask.flags.writeable
    assert known_box(first.mask) == _measure_box(first.mask.copy())
    # refining another slice keeps the first one and re-derives the tight box
    second = model.predict(
        Prompt(
            points=np.array(
                [[z + 1, (box[1].start + box[1].stop) // 2, (box[2].start + box[2].stop) // 2]]
            ),
            point_labels=np.array([1], np.int8),
        ),
        previous=first,
    )
    np.testing.assert_array_equal(second.mask[z], first.mask[z])
    assert second.mask[z + 1].any()
    assert known_box(second.mask) == _measure_box(second.mask.copy())


def test_the_synthetic_network_is_a_function_of_the_prompt():
    case = next(iter(registry.datasets.create("demo-phantoms", {"n_cases": 1})))
    model = registry.models.create("synthetic-network", {"forward_ms": 0, "leak_probability": 0.5})
    model.set_case(case.image)
    masks = []
    for target in case.targets:
        centre = [(s.start + s.stop) // 2 for s in case.target_box(target)]
        prompt = Prompt(points=np.array([centre]), point_labels=np.array([1], np.int8))
        one, two = model.predict(prompt).mask, model.predict(prompt).mask
        np.testing.assert_array_equal(one, two)
        assert one[tuple(centre)] or one.any()
        assert known_box(one) == _measure_box(one.copy())
        masks.append(one)
    dice = [
        2 * (m & case.target_mask(t)).sum() / (m.sum() + case.target_mask(t).sum())
        for m, t in zip(masks, case.targets)
    ]
    assert max(dice) > 0.5  # it segments the structure under the click, imperfectly


def test_cases_that_come_back_for_the_next_model_are_read_ahead(tmp_path):
    """Groups are model-major (case 0, case 1 for one model, then again for the next): every
    case after the first is read ahead, none by the model loop (a regression: a case coming
    back after another one was read again in the loop)."""
    from intrabench.config import RunConfig
    from intrabench.execution.runner import Runner

    config = RunConfig.model_validate(
        {
            "name": "t",
            "datasets": [{"name": "demo-phantoms", "n_cases": 2}],
            "models": [
                {"name": "synthetic-network", "forward_ms": 0},
                {"name": "synthetic-network-2d", "forward_ms": 0},
            ],
            "prompters": ["box-3d", "box-per-slice"],
            "refinement_steps": 0,
        }
    )
    runner = Runner(config, tmp_path / "run", background="inline")
    (dataset,) = runner.datasets.values()
    loads_here = []
    original = dataset.load
    dataset.load = lambda case_id: loads_here.append(case_id) or original(case_id)
    runner.run()
    assert loads_here == ["phantom_000"]
