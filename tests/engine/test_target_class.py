"""The engine tells a model each forward pass's target class (``Model.set_target_class``), in
the runner's interleaved episodes too, so class-prompted models (VISTA3D's ``class_map``) see
the right class for every call."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytest

from intrabench import registry
from intrabench.config import RunConfig
from intrabench.execution.runner import Runner
from intrabench.interfaces import Model
from intrabench.types import Prediction


class _RecordsClasses(Model):
    """Predicts the 3D box; records (class told, box) per call."""

    name = "test-records-classes"
    dimension = 3
    accepts = frozenset({"box3d", "point", "mask"})
    calls: ClassVar[list[tuple[str | None, tuple]]] = []

    def set_case(self, image):
        self.shape = image.shape
        self._class = None

    def set_target_class(self, class_name):
        self._class = class_name

    def predict(self, prompt, previous=None, update_slices=None):
        box = prompt.box3d
        mask = np.zeros(self.shape, bool)
        mask[box.z_min : box.z_max + 1, box.y_min : box.y_max + 1, box.x_min : box.x_max + 1] = True
        type(self).calls.append((self._class, box.as_tuple()))
        self._class = None  # told again before every call
        return Prediction(mask=mask)


@pytest.fixture(autouse=True)
def _recording_model():
    registry.models.register(_RecordsClasses)
    _RecordsClasses.calls.clear()
    yield
    registry.models.unregister(_RecordsClasses.name)


def _two_class_folder(folder):
    """nnU-Net folder, two cases: two lesions (instances) and a rim (organ) each."""
    import json

    import SimpleITK as sitk

    label = np.zeros((8, 16, 16), np.uint8)
    label[2:4, 2:6, 2:6] = 1
    label[5:7, 9:13, 9:13] = 1
    label[:, 14:, :] = 2
    for case in ("a", "b"):
        for sub, array in (
            ("imagesTr", np.random.default_rng(0).normal(0, 1, label.shape).astype(np.float32)),
            ("labelsTr", label),
        ):
            (folder / sub).mkdir(parents=True, exist_ok=True)
            name = f"{case}_0000.nii.gz" if sub == "imagesTr" else f"{case}.nii.gz"
            sitk.WriteImage(sitk.GetImageFromArray(array), str(folder / sub / name))
    (folder / "dataset.json").write_text(
        json.dumps(
            {
                "labels": {"background": 0, "lesion": 1, "rim": 2},
                "target_types": {"lesion": "instance", "rim": "organ"},
            }
        )
    )
    return folder


def test_every_forward_pass_is_told_its_targets_class(tmp_path):
    folder = _two_class_folder(tmp_path / "data")
    config = RunConfig.model_validate(
        {
            "name": "classes",
            "datasets": [{"name": "nnunet-folder", "path": str(folder)}],
            "models": [_RecordsClasses.name],
            "prompters": ["box-3d"],
            "refiners": ["center-error-click"],
            "refinement_steps": 2,
            "target_attributes": False,
        }
    )
    Runner(config, tmp_path / "run").run()
    dataset = registry.datasets.create("nnunet-folder", {"path": str(folder)})
    by_box = {}
    for case_id in dataset.case_ids():
        case = dataset.load(case_id)
        for target in case.targets:
            box = case.target_box(target)
            key = (
                box[0].start,
                box[1].start,
                box[2].start,
                box[0].stop - 1,
                box[1].stop - 1,
                box[2].stop - 1,
            )
            by_box[key] = target.class_name
    assert _RecordsClasses.calls
    told = [(cls, by_box.get(box)) for cls, box in _RecordsClasses.calls]
    assert all(cls is not None for cls, _ in told)
    matched = [(cls, expected) for cls, expected in told if expected is not None]
    assert len(matched) == len(told)  # the 3D box is the target's box: each call identified
    assert all(cls == expected for cls, expected in matched)
    assert {cls for cls, _ in told} == {"lesion", "rim"}
