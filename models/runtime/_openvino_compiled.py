"""OpenVINO's compiled exports kept on disk: a start imports a compiled model, not compiles it.

Compiling LiteMedSAM's exported encoder and box decoder takes OpenVINO a noticeable part of
every run's start, in series with nothing else to do before the first forward pass.
Importing what was compiled before takes about a third of that (docs/performance.md)
(``CompiledModel.export_model`` / ``Core.import_model``, the same compiled graph: the same
outputs to the bit, tested).

Beside the ONNX file, ``<onnx stem>.openvino-<version>-t<threads>-<machine>.blob`` holds the
compiled model and ``….blob.json`` what it was compiled from: the ONNX file's SHA-256, the
OpenVINO version, the compile configuration, this machine's CPU (its instruction-set flags:
a compiled model uses the instructions of the CPU it was compiled on, and a checkpoint folder
may be shared by the nodes of a cluster; the machine is part of the name, so each keeps its
own) and the blob's own SHA-256. A blob is imported only when all of these match and its bytes
hash to the recorded value; anything else (missing, replaced, truncated, of another ONNX file,
another version or machine, a failed import) compiles from the ONNX file and writes
the blob again. Nothing is obeyed on its word; a folder that cannot be written only costs the
compile time.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import platform
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any


@lru_cache(maxsize=1)
def machine_digest() -> str:
    """A short digest of this CPU's identity: its architecture and, on Linux, the flags of
    /proc/cpuinfo (the instruction sets a compiled model may use); else the processor name."""
    identity = [platform.machine(), platform.processor()]
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as stream:
            for line in stream:
                if line.startswith(("flags", "Features", "model name")):
                    identity.append(line.strip())
                if line.strip() == "":  # the first processor's block is enough
                    break
    except OSError:
        pass
    return hashlib.sha256("\n".join(identity).encode()).hexdigest()[:12]


def blob_path(onnx_path: Path, version: str, threads: int) -> Path:
    """Where the compiled model of ``onnx_path`` for this OpenVINO version, thread count and
    machine is kept."""
    return onnx_path.with_name(
        f"{onnx_path.stem}.openvino-{_in_name(version)}-t{int(threads)}-{machine_digest()}.blob"
    )


def _in_name(version: str) -> str:
    """``version`` as a file name may hold it (OpenVINO's hold '/')."""
    return "".join(c if c.isalnum() or c in ".-_" else "_" for c in version)


def _description(onnx_sha256: str, version: str, config: dict[str, Any]) -> dict[str, Any]:
    return {
        "onnx_sha256": onnx_sha256,
        "openvino": version,
        "machine": machine_digest(),
        "config": {str(k): str(v) for k, v in sorted(config.items())},
    }


def _write_atomically(path: Path, data: bytes) -> None:
    handle, temporary = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.", suffix=".partial"
    )
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.replace(temporary, path)
    finally:
        Path(temporary).unlink(missing_ok=True)


def _imported(
    core: Any, blob: Path, expected: dict[str, Any], config: dict[str, Any]
) -> Any | None:
    """The compiled model kept at ``blob`` when its record matches ``expected`` and its bytes
    their recorded SHA-256; else None."""
    try:
        record = json.loads(blob.with_name(blob.name + ".json").read_text())
        if not isinstance(record, dict) or record.get("blob_sha256") is None:
            return None
        if {k: record.get(k) for k in expected} != expected:
            return None
        data = blob.read_bytes()
        if hashlib.sha256(data).hexdigest() != record["blob_sha256"]:
            return None
        return core.import_model(data, "CPU", config)
    except Exception:  # noqa: BLE001 - unreadable, malformed or refused: compiled instead
        return None


def compile_or_import(onnx_path: Path, config: dict[str, Any], onnx_sha256: str) -> Any:
    """An OpenVINO ``CompiledModel`` of the ONNX file at ``onnx_path`` (whose bytes hash to
    ``onnx_sha256``: the caller has verified them) for the CPU with ``config``: imported from
    its kept blob when that is of this very file, version, configuration and machine, else
    compiled and kept for the next start."""
    import openvino

    core = openvino.Core()
    version = openvino.__version__
    threads = int(config.get("INFERENCE_NUM_THREADS", 0))
    blob = blob_path(Path(onnx_path), version, threads)
    expected = _description(onnx_sha256, version, config)
    compiled = _imported(core, blob, expected, config)
    if compiled is not None:
        return compiled
    compiled = core.compile_model(str(onnx_path), "CPU", config)
    with contextlib.suppress(Exception):  # a read-only folder, a full disk: compiled next time
        keep(compiled, blob, expected)
    return compiled


def keep(compiled: Any, blob: Path, description: dict[str, Any]) -> None:
    """Write ``compiled`` to ``blob`` and its record (``description`` and the blob's SHA-256)
    beside it, each whole or not at all; remove what other OpenVINO versions kept."""
    stream = io.BytesIO()
    compiled.export_model(stream)  # the form every recent version has (some return BytesIO)
    data = stream.getvalue()
    _write_atomically(blob, data)
    record = {**description, "blob_sha256": hashlib.sha256(data).hexdigest()}
    _write_atomically(
        blob.with_name(blob.name + ".json"), json.dumps(record, indent=1, sort_keys=True).encode()
    )
    _remove_other_versions(blob, description["openvino"])


def _remove_other_versions(blob: Path, version: str) -> None:
    """Blobs of the same ONNX file kept by other OpenVINO versions (never imported again once
    the version changed): removed with their records."""
    stem = blob.name.split(".openvino-", 1)[0]
    for other in blob.parent.glob(f"{stem}.openvino-*.blob"):
        if other.name.startswith(f"{stem}.openvino-{_in_name(version)}-"):
            continue
        for path in (other, other.with_name(other.name + ".json")):
            path.unlink(missing_ok=True)
