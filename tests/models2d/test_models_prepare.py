"""``intrabench models prepare``: the install step exports and checks the demo's CPU encoders,
so the first run does not; a model without an export, or an unknown one, is one line."""

from __future__ import annotations

import re

import pytest

from intrabench.cli import main
from intrabench.commands.models_prepare import exportable_demo_models
from intrabench.models.runtime import _encoder_backends as backends

needs_a_backend = pytest.mark.skipif(
    not any(backends.installed(b) for b in ("onnxruntime", "openvino")),
    reason="neither onnxruntime nor openvino",
)


def test_the_default_is_the_demos_models_that_run_from_an_export():
    assert exportable_demo_models() == ["litemedsam", "mobilesam"]


@needs_a_backend
def test_prepare_exports_and_checks_once_and_a_run_finds_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("INTRABENCH_EXPORTS", str(tmp_path))
    assert main(["models", "prepare", "litemedsam"]) == 0
    line = capsys.readouterr().out.strip()
    assert re.fullmatch(
        r"litemedsam: ready in \d+\.\d s \(encoder on (openvino|onnxruntime), "
        r"decoder on (openvino|onnxruntime)\)",
        line,
    ), line
    exported = sorted(tmp_path.glob("litemedsam-*.onnx"))
    assert len(exported) == 2  # the encoder and the box decoder
    stamps = [path.stat().st_mtime_ns for path in exported]
    assert main(["models", "prepare", "litemedsam"]) == 0  # the second time: found, not redone
    assert [path.stat().st_mtime_ns for path in exported] == stamps


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("random-walker-2d", "model 'random-walker-2d' has no exported encoder to prepare"),
        ("no-such-model", "unknown model 'no-such-model'"),
    ],
)
def test_a_model_without_an_export_or_unknown_is_one_line(name, message, capsys):
    assert main(["models", "prepare", name]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
