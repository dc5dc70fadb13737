"""The models' latency table: cold and warm forward passes, peak memory (docs/time-aware.md).

From the rows' ``latency_seconds`` (every forward pass, CUDA synchronised),
``latency_first_call`` (the first call of a (case, model) group), ``case_setup_seconds``
(``set_case``: weights read at first use, a 3D model's image encoding), ``peak_gpu_mb`` and
``peak_host_mb``:

* **cold**, once per case: set-up + the case's first forward pass: what the clinician waits
  for the first result on a new image;
* **warm**, per interaction kind of the step (the kind it used most: click, box2d, box3d,
  scribble, boundary_slice): every other forward pass. A 2D model encoding slices it has not
  seen yet does so in warm calls;
* p50 and p95 in ms; peak GPU memory (``torch.cuda.max_memory_allocated``, MiB, empty without
  CUDA) and peak host memory (resident, MiB) over the model's cases.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from intrabench.timing.human import step_kind

LATENCY_COLUMNS = ("latency_seconds", "latency_first_call", "case_setup_seconds")


def has_latency(rows: pd.DataFrame) -> bool:
    """Whether the rows carry latency columns with at least one measured value.

    Args:
        rows: Step rows (``results.parquet``).

    Returns:
        True when every latency column is there and ``latency_seconds`` has a value.
    """
    return all(c in rows for c in LATENCY_COLUMNS) and rows["latency_seconds"].notna().any()


def _stats(values: np.ndarray) -> dict[str, float]:
    return {
        "calls": int(len(values)),
        "p50_ms": float(np.percentile(values, 50)) * 1000 if len(values) else float("nan"),
        "p95_ms": float(np.percentile(values, 95)) * 1000 if len(values) else float("nan"),
    }


def latency_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per model and kind ("cold", then the warm interaction kinds): calls, p50_ms,
    p95_ms; with the model's peak GPU and host memory on every row of it.

    Args:
        rows: Step rows with the latency columns (converged steps, without a call, are left
            out).

    Returns:
        Columns model, kind, calls, p50_ms, p95_ms (milliseconds), peak_gpu_mb and
        peak_host_mb (MB, NaN where not measured); empty, with those columns, without
        latencies.
    """
    if not has_latency(rows):
        return pd.DataFrame(
            columns=["model", "kind", "calls", "p50_ms", "p95_ms", "peak_gpu_mb", "peak_host_mb"]
        )
    called = rows[~rows["converged"].astype(bool)] if "converged" in rows else rows
    called = called.assign(_kind=step_kind(called))
    records = []
    for model, part in called.groupby("model", sort=True):
        memory = {
            "peak_gpu_mb": float(part["peak_gpu_mb"].max())
            if "peak_gpu_mb" in part
            else float("nan"),
            "peak_host_mb": float(part["peak_host_mb"].max())
            if "peak_host_mb" in part
            else float("nan"),
        }
        first = part[part["latency_first_call"].astype(bool)]
        cold = (
            first["case_setup_seconds"].astype(float) + first["latency_seconds"].astype(float)
        ).to_numpy()
        records.append(
            {"model": model, "kind": "cold (set-up + first call)", **_stats(cold), **memory}
        )
        warm = part[~part["latency_first_call"].astype(bool)]
        for kind, calls in warm.groupby("_kind", sort=True):
            values = calls["latency_seconds"].astype(float).dropna().to_numpy()
            records.append({"model": model, "kind": f"warm {kind}", **_stats(values), **memory})
    return pd.DataFrame.from_records(records)
