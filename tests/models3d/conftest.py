"""Fixtures for the 3D model adapter tests (SAM-Med3D, SAM-Med3D Turbo, SegVol).

CPU, 2 torch threads, no checkpoints: the real architectures in tiny random-weight
configurations (``weights="random", tiny=True``), full-size ones only on the meta device.
Volumes: the real demo cases (anisotropic spacing) and an oblique-orientation volume written
with SimpleITK and read back through ``read_volume``.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(2)

import SimpleITK as sitk  # noqa: E402

from intrabench import registry  # noqa: E402
from intrabench.interfaces import PromptContext, Prompter  # noqa: E402
from intrabench.io.volume import read_volume  # noqa: E402
from intrabench.types import Case, Prompt, Target  # noqa: E402

MODELS_3D = ("sam-med3d", "sam-med3d-turbo", "segvol")


class FixedPrompter(Prompter):
    """Always the same prompt, whatever the ground truth (isolates the model from the user)."""

    name = "fixed-test"
    kinds = frozenset({"point"})

    def __init__(self, prompt: Prompt) -> None:
        self.prompt = prompt

    def initial(self, context: PromptContext) -> Prompt:
        return self.prompt


def tiny_model(name: str, seed: int = 0):
    return registry.models.create(
        name, {"weights": "random", "tiny": True, "device": "cpu", "seed": seed}
    )


@pytest.fixture(scope="session")
def demo_cases() -> dict[str, Case]:
    dataset = registry.datasets.create("demo-real")
    return {case_id: dataset.load(case_id) for case_id in dataset.case_ids()}


@pytest.fixture(scope="session")
def brain(demo_cases: dict[str, Case]) -> Case:
    return demo_cases["brain1"]


@pytest.fixture(scope="session")
def breast(demo_cases: dict[str, Case]) -> Case:
    return demo_cases["breast1"]


def _rotation_x(degrees: float) -> np.ndarray:
    a = np.deg2rad(degrees)
    return np.array([[1, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]])


@pytest.fixture(scope="session")
def oblique_case(tmp_path_factory: pytest.TempPathFactory) -> Case:
    """A bright ellipsoid in a volume rotated 75 degrees about x (voxel axes j and k swap
    roles in the canonical orientation), spacing (i, j, k) = (0.9, 3.0, 1.2) mm."""
    size_ijk = (48, 20, 40)
    k, j, i = np.meshgrid(*(np.arange(n) for n in size_ijk[::-1]), indexing="ij")
    spacing = np.array([0.9, 3.0, 1.2])
    centre = np.array([24, 10, 20])
    distance = (
        ((i - centre[0]) * spacing[0] / 12) ** 2
        + ((j - centre[1]) * spacing[1] / 12) ** 2
        + ((k - centre[2]) * spacing[2] / 12) ** 2
    )
    label = (distance <= 1.0).astype(np.uint8)
    rng = np.random.default_rng(0)
    image = (200.0 * label + rng.normal(50.0, 10.0, label.shape)).astype(np.float32)
    folder = tmp_path_factory.mktemp("oblique")
    for array, name in ((image, "image.nii.gz"), (label, "label.nii.gz")):
        itk = sitk.GetImageFromArray(array)
        itk.SetSpacing(tuple(spacing))
        itk.SetOrigin((10.0, -20.0, 5.0))
        itk.SetDirection(tuple(_rotation_x(75.0).ravel()))
        sitk.WriteImage(itk, str(folder / name))
    volume = read_volume(folder / "image.nii.gz")
    labels = read_volume(folder / "label.nii.gz", dtype=np.int32).array
    return Case("oblique", "oblique1", volume, labels, (Target("ball", 1, "ball", "organ"),))


def assert_strict_round_trip(make_net, load_weights, path, wrapped: bool) -> None:
    """A checkpoint saved from ``make_net()`` (as a plain state dict, or under "model" when
    ``wrapped``) loads into a fresh one with every tensor equal; one with a key missing is
    refused naming it."""
    from intrabench.io.checkpoints import CheckpointError

    with torch.random.fork_rng():
        torch.manual_seed(0)
        net = make_net()
    torch.save({"model": net.state_dict()} if wrapped else net.state_dict(), path)
    other = make_net()
    load_weights(other, str(path))
    assert all(
        torch.equal(a, b) for a, b in zip(net.state_dict().values(), other.state_dict().values())
    )
    state = net.state_dict()
    state.pop(next(iter(state)))
    torch.save({"model": state}, path)
    with pytest.raises(CheckpointError, match="missing"):
        load_weights(make_net(), str(path))
