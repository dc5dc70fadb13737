"""Running a small config through the CLI, for tests that check what a whole run writes."""

from __future__ import annotations

from pathlib import Path

from intrabench.cli import main


def run_config(folder: Path, text: str) -> Path:
    """Write ``text`` to ``folder/run.yaml``, run it with ``intrabench run`` (it must succeed)
    and return its run directory ``folder/run``."""
    config = Path(folder) / "run.yaml"
    config.write_text(text)
    out = Path(folder) / "run"
    assert main(["run", str(config), "--out", str(out)]) == 0
    return out


def one_bit_flipped_copy(path, folder, offset: int):
    """A copy of ``path`` in ``folder`` with the same size and one bit of byte ``offset``
    flipped (a checkpoint whose pinned hash must now fail)."""
    import shutil
    from pathlib import Path

    altered = Path(folder) / Path(path).name
    shutil.copy(path, altered)
    with altered.open("r+b") as stream:
        stream.seek(offset)
        byte = stream.read(1)
        stream.seek(offset)
        stream.write(bytes([byte[0] ^ 1]))
    return altered
