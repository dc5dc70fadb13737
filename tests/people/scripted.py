"""A scripted person: a session on a real case with a live model, written with the session
log writer, as the live-session page writes it (each interaction's mask from the model)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from intrabench.people.session_log import SessionWriter, interaction_prompt, new_header


def person_click(prediction: np.ndarray, reference: np.ndarray) -> dict:
    """Where the scripted person clicks: the middle voxel (C order) of the largest error,
    positive on a missed voxel, negative on a wrong one (a person aims at the error, not at
    its distance-transform centre)."""
    import cc3d

    error = np.logical_xor(prediction, reference)
    components = cc3d.connected_components(error.astype(np.uint8), connectivity=26)
    counts = np.bincount(components.reshape(-1))
    counts[0] = 0
    voxels = np.argwhere(components == int(counts.argmax()))
    zyx = [int(v) for v in voxels[len(voxels) // 2]]
    return {"zyx": zyx, "positive": bool(reference[tuple(zyx)])}


def target_box(reference: np.ndarray, margin: int = 1) -> dict:
    """A 3D box around the reference, ``margin`` voxels larger in y and x (inclusive)."""
    where = np.argwhere(reference)
    low, high = where.min(axis=0), where.max(axis=0)
    shape = np.array(reference.shape) - 1
    low = np.maximum(low - [0, margin, margin], 0)
    high = np.minimum(high + [0, margin, margin], shape)
    return {"zyx0": [int(v) for v in low], "zyx1": [int(v) for v in high]}


def script_session(
    folder: Path, case, target, model, model_name: str, rater: str, clicks: int = 2
) -> Path:
    """Write ``folder/<id>.jsonl``: view the target's middle slice, draw a 3D box, click
    ``clicks`` corrections, undo the last and click it again, accept. ``model``'s case must be
    set. Times are scripted (seconds since the start) so the tests know them."""
    reference = case.target_mask(target)
    session_id = f"{rater}-{case.case_id}-{target.target_id}"
    header = new_header(
        session_id=session_id,
        rater=rater,
        dataset=case.dataset,
        case_id=case.case_id,
        target=target.target_id,
        shape=reference.shape,
        spacing=case.image.spacing,
        model=model_name,
    )
    path = Path(folder) / f"{session_id}.jsonl"
    writer = SessionWriter.create(path, header)
    middle = int(np.argwhere(reference)[:, 0].mean().round())
    writer.view(middle, (40.0, 400.0), t=1.0)
    t = 1.0
    stack: list[tuple[object, object]] = []  # (accumulated prompt, prediction)

    def interact(kind: str, geometry: dict, seconds: float) -> None:
        nonlocal t
        t += seconds
        new = interaction_prompt({"kind": kind, "geometry": geometry})
        if stack:
            accumulated, previous = stack[-1]
            prompt = accumulated.merged_with(new)
            prediction = model.predict(prompt, previous=previous, update_slices=new.slices())
        else:
            prompt, prediction = new, model.predict(new)
        stack.append((prompt, prediction))
        writer.interaction(kind, geometry, prediction.mask, latency_s=0.5, shown_at=1.0, t=t)
        t += 0.5

    interact("box3d", target_box(reference), 6.0)
    for index in range(clicks):
        click = person_click(stack[-1][1].mask, reference)
        interact("point", click, 3.0)
        if index == clicks - 1:
            t += 1.0
            writer.undo(t=t)
            stack.pop()
            interact("point", person_click(stack[-1][1].mask, reference), 2.0)
    t += 1.0
    writer.accept(t=t)
    writer.close()
    return path
