"""OpenVINO's compiled exports kept on disk (models/runtime/_openvino_compiled.py): the second open
imports what the first compiled, with the same outputs to the bit and the same thread count;
a kept model that is not of this very ONNX file, version, configuration and machine, or whose
bytes are not those recorded, is never imported: the ONNX file is compiled again."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
openvino = pytest.importorskip("openvino")

from intrabench.models.runtime import _encoder_backends as backends  # noqa: E402
from intrabench.models.runtime import _openvino_compiled as kept  # noqa: E402

CONFIG = {
    "INFERENCE_NUM_THREADS": 2,
    "PERFORMANCE_HINT": "LATENCY",
    "INFERENCE_PRECISION_HINT": "f32",
}


@pytest.fixture
def onnx_file(tmp_path) -> Path:
    """A small convolutional network exported as the encoders are (seeded weights)."""
    torch.manual_seed(0)
    module = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.GELU(), torch.nn.Conv2d(8, 4, 3, stride=2)
    ).eval()
    path = tmp_path / "tiny-encoder.onnx"
    backends.export_onnx(
        module, (backends.probe_batch((1, 3, 32, 32)),), ["image"], "embedding", path
    )
    return path


@pytest.fixture
def compiles(monkeypatch) -> list[str]:
    """The ONNX files OpenVINO compiles (each call recorded, then done)."""
    calls: list[str] = []
    original = openvino.Core.compile_model

    def compile_model(self, model, *args, **kwargs):
        calls.append(str(model))
        return original(self, model, *args, **kwargs)

    monkeypatch.setattr(openvino.Core, "compile_model", compile_model)
    return calls


def _output(compiled) -> np.ndarray:
    probe = backends.probe_batch((1, 3, 32, 32)).numpy()
    return np.asarray(compiled.create_infer_request().infer({0: probe})[0])


def _blob(onnx_file: Path) -> Path:
    return kept.blob_path(onnx_file, openvino.__version__, CONFIG["INFERENCE_NUM_THREADS"])


def _record(blob: Path) -> Path:
    return blob.with_name(blob.name + ".json")


def test_the_second_open_imports_the_same_model(onnx_file, compiles):
    sha = backends.file_sha256(onnx_file)
    first = kept.compile_or_import(onnx_file, CONFIG, sha)
    assert compiles == [str(onnx_file)]
    blob = _blob(onnx_file)
    record = json.loads(_record(blob).read_text())
    assert record["onnx_sha256"] == sha and record["openvino"] == openvino.__version__
    assert record["blob_sha256"] == backends.file_sha256(blob)
    assert record["config"]["INFERENCE_NUM_THREADS"] == "2"
    second = kept.compile_or_import(onnx_file, CONFIG, sha)
    assert compiles == [str(onnx_file)]  # imported, not compiled
    assert int(second.get_property("INFERENCE_NUM_THREADS")) == 2
    expected = _output(first)
    assert np.array_equal(_output(second).view(np.uint32), expected.view(np.uint32))
    fresh = openvino.Core().compile_model(str(onnx_file), "CPU", CONFIG)
    assert np.array_equal(_output(fresh).view(np.uint32), expected.view(np.uint32))


def test_open_backend_imports_when_it_knows_the_files_hash(onnx_file, compiles):
    sha = backends.file_sha256(onnx_file)
    probe = backends.probe_batch((1, 3, 32, 32)).numpy()
    outputs = [
        backends.open_backend("openvino", onnx_file, 2, ("image",), sha)(probe) for _ in range(2)
    ]
    assert len(compiles) == 1
    assert np.array_equal(outputs[0], outputs[1])
    backends.open_backend("openvino", onnx_file, 2, ("image",))  # no hash known: compiled
    assert len(compiles) == 2


def _damage_blob(blob: Path) -> None:
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0xFF
    blob.write_bytes(bytes(data))


def _truncate_blob(blob: Path) -> None:
    blob.write_bytes(blob.read_bytes()[:1000])


def _record_of_another_file(blob: Path) -> None:
    record = json.loads(_record(blob).read_text())
    _record(blob).write_text(json.dumps({**record, "onnx_sha256": "0" * 64}))


def _record_of_another_configuration(blob: Path) -> None:
    record = json.loads(_record(blob).read_text())
    record["config"]["INFERENCE_PRECISION_HINT"] = "bf16"
    _record(blob).write_text(json.dumps(record))


@pytest.mark.parametrize(
    "damage",
    [
        _damage_blob,
        _truncate_blob,
        _record_of_another_file,
        _record_of_another_configuration,
        lambda blob: blob.unlink(),
        lambda blob: _record(blob).unlink(),
        lambda blob: _record(blob).write_text("not json"),
        lambda blob: _record(blob).write_text("[]"),
        lambda blob: _record(blob).write_text(json.dumps({"blob_sha256": None})),
        lambda blob: _record(blob).write_text("[" * 100000 + "]" * 100000),
    ],
    ids=[
        "flipped-byte",
        "truncated",
        "another-onnx",
        "another-config",
        "no-blob",
        "no-record",
        "not-json",
        "a-list",
        "no-hash",
        "deep-nesting",
    ],
)
def test_a_kept_model_that_is_not_this_ones_is_compiled_again(damage, onnx_file, compiles):
    sha = backends.file_sha256(onnx_file)
    expected = _output(kept.compile_or_import(onnx_file, CONFIG, sha))
    damage(_blob(onnx_file))
    again = kept.compile_or_import(onnx_file, CONFIG, sha)
    assert len(compiles) == 2  # compiled again, never imported
    assert np.array_equal(_output(again), expected)
    record = json.loads(_record(_blob(onnx_file)).read_text())  # and kept again, whole
    assert record["onnx_sha256"] == sha
    assert record["blob_sha256"] == backends.file_sha256(_blob(onnx_file))
    kept.compile_or_import(onnx_file, CONFIG, sha)
    assert len(compiles) == 2  # the repaired one is imported


def test_each_machine_and_thread_count_keeps_its_own(onnx_file, compiles, monkeypatch):
    sha = backends.file_sha256(onnx_file)
    kept.compile_or_import(onnx_file, CONFIG, sha)
    kept.compile_or_import(onnx_file, {**CONFIG, "INFERENCE_NUM_THREADS": 1}, sha)
    assert len(compiles) == 2
    monkeypatch.setattr(kept, "machine_digest", lambda: "another-cpu")
    kept.compile_or_import(onnx_file, CONFIG, sha)  # a node with other instructions
    assert len(compiles) == 3
    assert len(list(onnx_file.parent.glob("*.blob"))) == 3


def test_another_versions_kept_models_are_removed(onnx_file, compiles):
    stale = kept.blob_path(onnx_file, "2020.1.0-old", 2)
    stale.write_bytes(b"compiled by an old version")
    _record(stale).write_text("{}")
    other = onnx_file.with_name("other-encoder.openvino-2020.1.0-old-t2-x.blob")
    other.write_bytes(b"another file's")
    kept.compile_or_import(onnx_file, CONFIG, backends.file_sha256(onnx_file))
    assert not stale.exists() and not _record(stale).exists()
    assert other.exists()  # not of this ONNX file: left alone
    assert _blob(onnx_file).is_file()


def test_a_folder_that_cannot_be_written_only_costs_the_compile(onnx_file, compiles, monkeypatch):
    def refuse(path, data):
        raise PermissionError(f"read-only: {path}")

    monkeypatch.setattr(kept, "_write_atomically", refuse)
    sha = backends.file_sha256(onnx_file)
    compiled = kept.compile_or_import(onnx_file, CONFIG, sha)
    assert _output(compiled).shape == (1, 4, 15, 15)
    assert not list(onnx_file.parent.glob("*.blob*"))
    kept.compile_or_import(onnx_file, CONFIG, sha)
    assert len(compiles) == 2


def test_the_machine_digest_is_stable_and_short():
    assert kept.machine_digest() == kept.machine_digest()
    assert len(kept.machine_digest()) == 12
    assert "/" not in _blob(Path("/x/a.onnx")).name
