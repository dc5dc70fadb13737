"""Faster CPU inference for a 2D model's image encoder (and box decoder): ONNX Runtime or OpenVINO.

The encoder (a torch module whose forward maps a float (B, 3, S, S) batch to one tensor) is
exported with ``torch.onnx.export`` (opset 17, static shape: TinyViT bakes its batch size into
reshapes) at first use, and cached beside the checkpoints, in the checkpoint directory's
``exported/`` (``$INTRABENCH_EXPORTS`` overrides the folder; the tests use it), under a name
that holds the model, the name of the exported graph when it is not the network's own (the
adapter's ``ENCODER_GRAPH``: TinyViT's with split query, key and value projections is ``qkv3``),
the SHA-256 of the encoder's weights (of the loaded tensors, so a checkpoint file and random
weights alike), the input shape and the opset. Each backend is
**verified** once against torch on a seeded probe batch: the largest absolute difference of
the embeddings must stay within :data:`TOLERANCE`; the result is kept beside the export (a
``.json`` file that also holds the exported file's SHA-256, checked at every load: a replaced
file is exported again), so the check runs once per machine, backend version and weights.

``backend`` (a model parameter of the adapters that declare ``EXPORTABLE_ENCODER``):

* ``torch``: PyTorch eager (the reference);
* ``onnxruntime`` / ``openvino``: that backend (an error when it is not installed or fails its
  check);
* ``auto`` (default): on the CPU, in float32, the fastest installed backend that passes its
  check, in the order of :data:`AUTO_ORDER` (measured, docs/performance.md); else torch.

The same machinery exports a **box decoder** (:class:`DecoderExports`): a module mapping a
slice embedding (1, C, h, w) and one box (1, 1, 4) to low-resolution logits, for the adapters
that declare ``EXPORTABLE_DECODER`` (LiteMedSAM: its prompt encoder and mask decoder, box
only, single mask: OpenVINO runs it in less than half PyTorch's time, docs/performance.md). It runs
on the encoder's backend, checked on a seeded probe within :data:`DECODER_TOLERANCE` of
torch's logits, and cached and recorded as the encoder is.

Array conventions: batches are float32 (B, 3, S, S) tensors on the CPU; embeddings come back
as float32 torch tensors of the shape torch gives.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from intrabench.errors import UserError
from intrabench.models.runtime import _exports_ahead, _openvino_compiled

BACKENDS = ("auto", "torch", "onnxruntime", "openvino")
#: fastest first (LiteMedSAM's encoder, measured: docs/performance.md)
AUTO_ORDER = ("openvino", "onnxruntime")
#: the largest |embedding difference| to torch's that a backend may show on the probe
TOLERANCE = 1e-4
#: the largest |logits difference| to torch's that an exported decoder may show on its probe
#: (measured: 1.5e-5 to 3e-5; the adapters' agreement goal is logits within 1e-3)
DECODER_TOLERANCE = 1e-3
OPSET = 17
#: the Python module of each backend
MODULES = {"onnxruntime": "onnxruntime", "openvino": "openvino"}


def exports_dir(checkpoints: Path) -> Path:
    """Where exports are cached: ``$INTRABENCH_EXPORTS``, else ``<checkpoints>/exported``."""
    explicit = os.environ.get("INTRABENCH_EXPORTS")
    return Path(explicit).expanduser() if explicit else Path(checkpoints) / "exported"


def installed(backend: str) -> bool:
    """Whether ``backend``'s package (and ``onnx``, for the export) can be imported."""
    if backend == "torch":
        return True
    return all(importlib.util.find_spec(name) is not None for name in (MODULES[backend], "onnx"))


def backend_version(backend: str) -> str:
    from importlib.metadata import version

    return f"{backend}-{version(MODULES[backend])}"


def weights_digest(module: Any) -> str:
    """SHA-256 of a module's state dict: every tensor's name, dtype, shape and bytes."""
    return tensors_digest(module.state_dict())


def tensors_digest(tensors: dict[str, Any]) -> str:
    """:func:`weights_digest` of named tensors (a state dict, or a checkpoint's part of one)."""
    import torch

    digest = hashlib.sha256()
    for name, tensor in sorted(tensors.items()):
        array = tensor.detach().cpu().contiguous()
        digest.update(f"{name}|{array.dtype}|{tuple(array.shape)}".encode())
        digest.update(array.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def probe_batch(shape: tuple[int, ...]) -> Any:
    """A seeded uniform [0, 1) batch of ``shape`` (the same on every machine)."""
    import torch

    generator = torch.Generator().manual_seed(0)
    return torch.rand(shape, generator=generator, dtype=torch.float32)


def export_onnx(
    module: Any, probes: tuple[Any, ...], input_names: list[str], output_name: str, path: Path
) -> Any:
    """``module`` (called on ``probes``) to ONNX at ``path``, static shapes (written beside it
    first, then renamed).

    Returns:
        The module's output on ``probes`` (a float32 NumPy array), as the export's trace
        computed it (a forward hook keeps it), so the check against torch need not run the
        module again; None when the trace did not call the module's forward.
    """
    import warnings

    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".onnx.part")
    os.close(handle)
    outputs: list[Any] = []
    hook = module.register_forward_hook(
        lambda _module, _inputs, output: outputs.append(output.detach().float().numpy().copy())
    )
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                module,
                probes,
                temporary,
                opset_version=OPSET,
                input_names=input_names,
                output_names=[output_name],
                dynamo=False,
            )
        os.replace(temporary, path)
    finally:
        hook.remove()
        Path(temporary).unlink(missing_ok=True)
    return outputs[0] if len(outputs) == 1 else None


def open_backend(
    backend: str,
    path: Path,
    threads: int,
    input_names: tuple[str, ...] = ("image",),
    onnx_sha256: str | None = None,
) -> Callable[..., np.ndarray]:
    """A function running the exported module at ``path`` on float32 arrays, one per input
    (in the order of ``input_names``). ``onnx_sha256``: the file's verified SHA-256, which lets
    OpenVINO import the model it compiled for this file before
    (:mod:`._openvino_compiled`) instead of compiling it again."""
    if backend == "onnxruntime":
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        session = onnxruntime.InferenceSession(
            str(path), options, providers=["CPUExecutionProvider"]
        )
        return lambda *arrays: session.run(None, dict(zip(input_names, arrays)))[0]
    if backend == "openvino":
        config = {
            "INFERENCE_NUM_THREADS": threads,
            "PERFORMANCE_HINT": "LATENCY",
            "INFERENCE_PRECISION_HINT": "f32",
        }
        if onnx_sha256 is None:
            import openvino

            compiled = openvino.Core().compile_model(str(path), "CPU", config)
        else:
            compiled = _openvino_compiled.compile_or_import(Path(path), config, onnx_sha256)
        request = compiled.create_infer_request()
        return lambda *arrays: np.asarray(request.infer(dict(enumerate(arrays)))[0])
    raise ValueError(f"unknown backend '{backend}'")


@dataclass
class ExportedEncoder:
    """An encoder run by ``backend`` from the ONNX file at ``path``."""

    backend: str
    path: Path
    run: Callable[[np.ndarray], np.ndarray]
    #: its largest |difference| to torch on the probe batch
    difference: float

    #: the batch size it was exported for (static)
    batch_size: int = 1

    def __call__(self, batch: Any) -> Any:
        """Embeddings of a (b, 3, S, S) batch, b <= the exported batch size: a shorter batch
        (a volume's last block) is padded with zeros and the padding's outputs dropped. A
        NumPy batch gives a float32 NumPy array, a torch tensor a CPU tensor."""
        array = as_float32_array(batch)
        count = array.shape[0]
        if count < self.batch_size:
            padding = np.zeros((self.batch_size - count, *array.shape[1:]), np.float32)
            array = np.concatenate([array, padding])
        return like_input(np.ascontiguousarray(self.run(array)[:count]), batch)


#: the record's layout; a record of another layout is replaced (its export made again)
RECORD_FORMAT = 2


class EncoderExports:
    """The exports of one encoder (its weights and input shape) and their checks.

    The ``.json`` record beside the ``.onnx`` binds the exported file's own SHA-256 to the
    weights' SHA-256, the input shape and opset, and to each backend's check result
    (``checked: {backend-version: {onnx_sha256, difference}}``). At every load the file's hash
    is computed again (tens of MB) and compared: a file that was replaced, corrupted or
    has no valid record is exported again (one line says so), and a check result that is not a
    finite number for this very file is computed again. A record is never obeyed on its word.
    """

    #: what is exported, in messages
    KIND = "encoder"
    #: the kind as the file name says it ("": an encoder's name has none)
    NAME_KIND = ""
    INPUT_NAMES: tuple[str, ...] = ("image",)
    OUTPUT_NAME = "embedding"
    #: the largest |difference| to torch's output on the probe
    TOLERANCE = TOLERANCE

    def __init__(
        self,
        encoder: Any,
        model_name: str,
        shape: tuple[int, ...],
        directory: Path,
        threads: int,
        log: Callable[[str], None] | None = None,
        *,
        build: Callable[[], Any] | None = None,
        weights: str | None = None,
        graph: str = "",
    ) -> None:
        """``encoder``: the torch module; or None with ``build`` (makes it when an export or a
        check needs it) and ``weights`` (its :func:`weights_digest`, known without building
        it: from the checkpoint's tensors), so that a recorded export opens without torch's
        network. ``graph``: the name of the module's graph when it is not the network's own
        (the adapter's ``ENCODER_GRAPH`` or ``DECODER_GRAPH``), part of the file name, so that
        an export of another graph of the same weights is never opened for this one."""
        if encoder is None and (build is None or weights is None):
            raise ValueError("EncoderExports needs the module, or build= and weights=")
        self.graph = graph
        self._module = encoder
        self._build = build
        self.shape = tuple(int(s) for s in shape)
        self.threads = int(threads)
        self.weights = weights if encoder is None else weights_digest(encoder)
        self.path = Path(directory) / f"{self.file_stem(model_name)}-opset{OPSET}.onnx"
        self.record_path = self.path.with_suffix(".json")
        self.log = log or (lambda message: None)
        #: the module's output on the probe as the export's trace computed it (exported now)
        self._traced_output: np.ndarray | None = None

    @property
    def module(self) -> Any:
        """The torch module (built now when it was given as ``build``)."""
        if self._module is None:
            self._module = self._build()
        return self._module

    def file_stem(self, model_name: str) -> str:
        parts = (
            model_name,
            self.NAME_KIND,
            self.graph,
            self.weights[:16],
            "x".join(str(s) for s in self.shape),
        )
        return "-".join(part for part in parts if part)

    def shape_record(self) -> list[Any]:
        """The input shape(s) as the record keeps them."""
        return list(self.shape)

    def probes(self) -> tuple[Any, ...]:
        """The seeded inputs of the export and of the check (the same on every machine)."""
        return (probe_batch(self.shape),)

    def _record(self) -> dict[str, Any]:
        """The record, or {} when it is missing, unreadable or not of this export."""
        try:
            record = json.loads(self.record_path.read_text())
        except (OSError, ValueError, RecursionError):
            return {}
        if not (
            isinstance(record, dict)
            and record.get("format") == RECORD_FORMAT
            and record.get("weights_sha256") == self.weights
            and record.get("shape") == self.shape_record()
            and record.get("opset") == OPSET
            and isinstance(record.get("onnx_sha256"), str)
            and isinstance(record.get("checked"), dict)
        ):
            return {}
        return record

    def _save_record(self, record: dict[str, Any]) -> None:
        handle, temporary = tempfile.mkstemp(dir=self.path.parent, suffix=".json.part")
        with os.fdopen(handle, "w") as stream:
            json.dump(record, stream, indent=1, sort_keys=True)
        os.replace(temporary, self.record_path)

    def _export(self) -> dict[str, Any]:
        self._traced_output = export_onnx(
            self.module, self.probes(), list(self.INPUT_NAMES), self.OUTPUT_NAME, self.path
        )
        record = {
            "format": RECORD_FORMAT,
            "weights_sha256": self.weights,
            "shape": self.shape_record(),
            "opset": OPSET,
            "onnx_sha256": file_sha256(self.path),
            "checked": {},
        }
        self._save_record(record)
        return record

    def ensure_exported(self) -> float:
        """Export if needed (no file, no valid record, or a file whose hash is not the
        record's); the seconds it took (0 when the recorded file was there)."""
        started = time.perf_counter()
        _, exported = self._verified_record()
        return time.perf_counter() - started if exported else 0.0

    def _verified_record(self) -> tuple[dict[str, Any], bool]:
        """The record of the file now at :attr:`path`, and whether it was exported now (the
        file was missing or did not match its record)."""
        record = self._record()
        if self.path.is_file() and record and file_sha256(self.path) == record["onnx_sha256"]:
            return record, False
        if self.path.is_file():
            self.log(
                f"the exported {self.KIND} {self.path.name} does not match its record "
                "(replaced, corrupted or recorded by an older version); exporting it again"
            )
            self.path.unlink()
        return self._export(), True

    def checked_run(self, backend: str) -> tuple[Callable[..., np.ndarray], float]:
        """``backend`` running this module, and its largest difference to torch on the probe
        (checked once per machine, backend version and exported file); UserError when it
        disagrees beyond :attr:`TOLERANCE`."""
        record, _ = self._verified_record()
        run = _exports_ahead.take(
            backend, self.path, self.threads, self.INPUT_NAMES, record["onnx_sha256"]
        ) or open_backend(backend, self.path, self.threads, self.INPUT_NAMES, record["onnx_sha256"])
        key = backend_version(backend)
        entry = record["checked"].get(key)
        difference = entry.get("difference") if isinstance(entry, dict) else None
        if not (
            isinstance(entry, dict)
            and entry.get("onnx_sha256") == record["onnx_sha256"]
            and isinstance(difference, float)
            and difference >= 0
            and np.isfinite(difference)
        ):
            import torch

            probes = self.probes()
            expected = self._traced_output  # exported in this process: the trace's output
            if expected is None:
                with torch.no_grad():
                    expected = self.module(*probes).float().numpy()
            got = np.asarray(run(*(probe.numpy() for probe in probes)), dtype=np.float32)
            difference = (
                float(np.abs(got - expected).max()) if got.shape == expected.shape else float("nan")
            )
            record["checked"][key] = {
                "onnx_sha256": record["onnx_sha256"],  # NaN: not JSON
                "difference": difference if np.isfinite(difference) else None,
            }
            record["torch"] = torch.__version__
            self._save_record(record)
        if not difference <= self.TOLERANCE:  # NaN too
            raise UserError(
                f"{self.KIND} backend {backend} disagrees with torch by "
                f"{difference:.3g} (more than {self.TOLERANCE:g}) on "
                f"{self.path.name}; use backend: torch"
            )
        return run, difference

    def load(self, backend: str) -> ExportedEncoder:
        """``backend`` running this encoder, checked against torch (:meth:`checked_run`)."""
        run, difference = self.checked_run(backend)
        return ExportedEncoder(backend, self.path, run, difference, self.shape[0])


class DecoderExports(EncoderExports):
    """The exports of one box decoder: ``module(embedding, box)`` with ``embedding`` a float32
    (1, C, h, w) slice embedding and ``box`` a float32 (1, 1, 4) box (x_min, y_min, x_max,
    y_max) in the network's input pixels, returning low-resolution logits. Probe: a seeded
    standard-normal embedding and a fixed box."""

    KIND = "decoder"
    NAME_KIND = "decoder"
    INPUT_NAMES = ("embedding", "box")
    OUTPUT_NAME = "logits"
    TOLERANCE = DECODER_TOLERANCE
    #: the probe's box, in the input frame of a 256-pixel network (a lesion-sized box)
    PROBE_BOX = (37.0, 52.0, 141.0, 118.0)

    def shape_record(self) -> list[Any]:
        return [list(self.shape), [1, 1, 4]]

    def probes(self) -> tuple[Any, ...]:
        import torch

        generator = torch.Generator().manual_seed(0)
        embedding = torch.randn(self.shape, generator=generator, dtype=torch.float32)
        return embedding, torch.tensor([[self.PROBE_BOX]], dtype=torch.float32)

    def load(self, backend: str) -> ExportedDecoder:  # type: ignore[override]
        run, difference = self.checked_run(backend)
        return ExportedDecoder(backend, self.path, run, difference)


@dataclass
class ExportedDecoder:
    """A box decoder run by ``backend`` from the ONNX file at ``path``."""

    backend: str
    path: Path
    run: Callable[..., np.ndarray]
    #: its largest |difference| to torch's logits on the probe
    difference: float

    def __call__(self, embedding: Any, box: Any) -> Any:
        """Low-resolution logits (1, 1, H, W) of a (1, C, h, w) embedding and a (1, 1, 4) box:
        float32, a NumPy array for a NumPy embedding, a CPU tensor for a tensor."""
        arrays = (as_float32_array(embedding), as_float32_array(box))
        return like_input(np.ascontiguousarray(self.run(*arrays)), embedding)


def as_float32_array(values: Any) -> np.ndarray:
    """A C-contiguous float32 NumPy array of a NumPy array or a torch tensor (any device)."""
    if not isinstance(values, np.ndarray):
        values = values.detach().cpu().numpy()
    return np.ascontiguousarray(values, dtype=np.float32)


def like_input(array: np.ndarray, given: Any) -> Any:
    """``array`` as the kind of value the caller gave: NumPy for NumPy (torch not imported),
    else a CPU torch tensor."""
    if isinstance(given, np.ndarray):
        return array
    import torch

    return torch.from_numpy(array)


def open_ahead(backend: str, path: Path, threads: int, input_names: tuple[str, ...]) -> None:
    """Start hashing and opening (compiling) the export at ``path`` in the background
    (:mod:`._exports_ahead`); :meth:`EncoderExports.checked_run` takes it when it is of the
    file that the record check verified."""

    def work() -> tuple[str, Callable[..., np.ndarray]]:
        sha256 = file_sha256(Path(path))
        return sha256, open_backend(backend, Path(path), threads, input_names, sha256)

    _exports_ahead.start(backend, path, threads, input_names, work)


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def choose_backend(
    requested: str, exports: EncoderExports, log: Callable[[str], None]
) -> ExportedEncoder | None:
    """The exported encoder to use for ``requested`` ('auto', 'onnxruntime', 'openvino'), or
    None for torch. 'auto' tries :data:`AUTO_ORDER` and falls back to torch (saying why)."""
    if requested == "torch":
        return None
    candidates = AUTO_ORDER if requested == "auto" else (requested,)
    for backend in candidates:
        if not installed(backend):
            if requested != "auto":
                raise UserError(
                    f"encoder backend {backend} is not installed (pip install "
                    f"{MODULES[backend]} onnx), or use backend: torch"
                )
            continue
        try:
            return exports.load(backend)
        except UserError:
            if requested != "auto":
                raise
            log(f"encoder backend {backend} failed its check against torch; trying the next")
        except Exception as error:  # noqa: BLE001 - an export or a backend can fail many ways
            if requested != "auto":
                raise UserError(
                    f"encoder backend {backend}: {type(error).__name__}: "
                    f"{str(error).splitlines()[0] if str(error) else ''}"
                ) from None
            log(f"encoder backend {backend} unavailable ({type(error).__name__}); trying the next")
    return None
