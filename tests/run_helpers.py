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
