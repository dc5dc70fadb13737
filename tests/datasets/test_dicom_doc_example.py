"""docs/datasets.md's "Your data as DICOM" worked example, executed as written: its spec and run
config blocks are written to the files they name, and every ``intrabench`` line of its command
blocks is run in that folder, on two synthetic CT series with RTSTRUCTs (ROIs ``GTV-1``, two
lesions, and ``BODY``); the outputs its comments show are checked. The doc cannot drift."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from pydicom.uid import generate_uid

from intrabench.cli import main

sys.path.insert(0, str(Path(__file__).parent))
from _dicom import write_ct, write_rtstruct  # noqa: E402

DOC = Path(__file__).resolve().parents[2] / "docs" / "datasets.md"
SHAPE = (6, 16, 20)  # (k, j, i)


def _section() -> str:
    text = DOC.read_text()
    start = text.index("### Your data as DICOM")
    return text[start : text.index("\n### ", start + 1)]


def _blocks(section: str) -> list[tuple[str, str]]:
    """(language, body) of each fenced code block, in order."""
    return re.findall(r"```(\w+)\n(.*?)```", section, flags=re.S)


def _clinic(root: Path) -> None:
    """The layout of the doc's text block: ``clinic/<case>/CT/*.dcm`` + ``<case>/RS.dcm``."""
    volume = np.random.default_rng(0).normal(-700, 50, SHAPE).astype(np.int16)
    volume[1:5, 4:12, 5:15] = 40
    for case in ("p1", "p2"):
        folder = root / "clinic" / case
        sources = write_ct(folder / "CT", volume, patient=case, study_uid=generate_uid())
        write_rtstruct(
            folder / "RS.dcm",
            sources,
            {
                "GTV-1": [(1, 2, 4, 2, 5), (2, 2, 4, 2, 5), (4, 9, 11, 12, 15)],
                "BODY": [(0, 0, 1, 0, 19)],
            },
        )


def test_the_dicom_worked_example_runs_as_written(tmp_path, monkeypatch, capsys):
    blocks = _blocks(_section())
    _clinic(tmp_path)
    monkeypatch.chdir(tmp_path)
    files = 0
    for language, body in blocks:  # the files the blocks name in their first line
        first = body.splitlines()[0]
        if language == "yaml" and first.startswith("# ") and first.endswith(".yaml"):
            (tmp_path / first[2:]).write_text(body)
            files += 1
    assert files == 2  # clinic/clinic.yaml and my-run.yaml
    commands = [
        (line.split("#", 1)[0].strip(), line.split("#", 1)[1].strip() if "#" in line else "")
        for language, body in blocks
        if language == "bash"
        for line in body.splitlines()
        if line.startswith("intrabench ")
    ]
    assert [c.split()[1] for c, _ in commands] == [
        "datasets",
        "run",
        "tables",
        "predictions",
        "predictions",
    ]
    for command, shown in commands:
        capsys.readouterr()
        assert main(shlex.split(command)[1:]) == 0, command
        out = capsys.readouterr().out
        if command.startswith("intrabench datasets verify"):
            assert shown.removesuffix(", ...") in out, (shown, out)  # the line the doc shows
            assert "2/2 cases ok, 4 targets" in out
        elif shown.startswith("runs/") or shown.startswith("seg-out/"):
            assert (tmp_path / shown.split(":")[0].split()[0]).exists(), shown
    rows = pd.read_csv(tmp_path / "runs" / "my-run" / "results.csv")
    assert set(rows.dataset) == {"clinic"}  # the spec's name: the tables' column
    assert rows[["case", "target"]].drop_duplicates().shape[0] == 4
    tables = sorted((tmp_path / "runs" / "my-run" / "tables").glob("*.md"))
    assert tables and any("clinic" in table.read_text() for table in tables)
    assert sorted(p.name for p in (tmp_path / "seg-out").rglob("*.dcm")) == ["p1.dcm", "p2.dcm"]
