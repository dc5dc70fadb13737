"""A run naming nnInteractive, MedSAM2 and VISTA3D without their weights (issue #18): the config
validates, and each missing checkpoint is reported in one line naming the file to get."""

from __future__ import annotations

from intrabench.cli import main


def test_missing_weights_of_the_three_are_one_line_each(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("INTRABENCH_CHECKPOINTS", str(tmp_path / "empty"))
    config = tmp_path / "three.yaml"
    config.write_text(
        "name: three\ndatasets: [{name: demo-phantoms, n_cases: 1}]\n"
        "models: [nninteractive, medsam2, vista3d]\n"
        "prompters: [box-3d, {name: points-per-volume, n_points: 1}]\nrefinement_steps: 0\n"
    )
    assert main(["run", str(config), "--dry-run", "--out", str(tmp_path / "plan")]) == 0
    capsys.readouterr()
    assert main(["run", str(config), "--out", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "skipped:" in line and "model '" in line]
    assert len(lines) == 3
    expected = {
        "nninteractive": "nnInteractive_v1.0",
        "medsam2": "MedSAM2_latest.pt",
        "vista3d": "model_vista3d.pt",
    }
    for model, file in expected.items():
        line = next(x for x in lines if f"model '{model}'" in x)
        assert file in line
    assert "Traceback" not in err
