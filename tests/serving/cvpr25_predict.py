"""A CVPR 2025 challenge ``predict.sh`` around a real IntraBench model, for the tests: reads
every ``.npz`` of $INPUTS, segments it with the model named in $WRAPPED_MODEL from the
challenge's box and clicks, and writes ``segs`` into $OUTPUTS (class 1). $FAULT makes it fail
on purpose: ``nothing`` writes no file, ``shape`` a wrong shape, ``exit`` exits with 4."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

from intrabench import registry
from intrabench.io.geometry import ImageGeometry
from intrabench.io.volume import Volume
from intrabench.types import Box3D, Prompt


def prompt_of(data) -> Prompt:
    """The challenge's box and clicks back as an IntraBench prompt (clicks in their order)."""
    clicks, order = data["clicks"][0], list(data["clicks_order"][0])
    queues = {"fg": list(clicks["fg"]), "bg": list(clicks["bg"])}
    points = [queues[kind].pop(0) for kind in order]
    labels = [1 if kind == "fg" else 0 for kind in order]
    box = None
    if "boxes" in data.files:
        b = data["boxes"][0]
        box = Box3D(
            b["z_min"],
            b["z_mid_y_min"],
            b["z_mid_x_min"],
            b["z_max"],
            b["z_mid_y_max"],
            b["z_mid_x_max"],
        )
    return Prompt(
        points=np.asarray(points, dtype=np.int64).reshape(-1, 3), point_labels=labels, box3d=box
    )


def main() -> int:
    fault = os.environ.get("FAULT", "")
    if fault == "exit":
        print("no GPU found", file=sys.stderr)
        return 4
    model = registry.models.create(os.environ["WRAPPED_MODEL"], {})
    for path in sorted(Path(os.environ["INPUTS"]).glob("*.npz")):
        data = np.load(path, allow_pickle=True)
        image = data["imgs"]
        spacing = tuple(float(v) for v in data["spacing"])
        grid = ImageGeometry(
            size=image.shape[::-1],
            spacing=spacing[::-1],
            origin=(0, 0, 0),
            direction=(1, 0, 0, 0, 1, 0, 0, 0, 1),
        )
        model.set_case(Volume(array=image, spacing=spacing, geometry=grid))
        segs = model.predict(prompt_of(data)).mask.astype(np.uint8)
        if fault == "nothing":
            continue
        if fault == "shape":
            segs = segs[:, :-1]
        np.savez_compressed(Path(os.environ["OUTPUTS"]) / path.name, segs=segs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
