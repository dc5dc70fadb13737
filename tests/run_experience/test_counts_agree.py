"""--dry-run and the run count skipped combinations the same way (#51 item 4)."""

from __future__ import annotations

from intrabench.cli import main


def test_dry_run_and_run_say_the_same_skipped_count(tmp_path, capsys):
    config = tmp_path / "two.yaml"
    config.write_text(
        "name: two\n"
        "datasets:\n"
        "  - {name: demo-phantoms, n_cases: 1, shape: [12, 32, 32], label: a}\n"
        "  - {name: demo-phantoms, n_cases: 1, shape: [12, 32, 32], label: b}\n"
        "models: [region-growing-3d]\n"
        "prompters: [box-3d, box-per-slice]\n"
    )
    assert main(["run", str(config), "--out", str(tmp_path / "run"), "--dry-run"]) == 0
    dry = capsys.readouterr().out
    line = "1 incompatible combination skipped (2 with each dataset counted)"
    assert line in dry
    main(["run", str(config), "--out", str(tmp_path / "run")])
    assert line in capsys.readouterr().err


def test_dry_run_estimates_the_time_from_this_machines_record(tmp_path, capsys, monkeypatch):
    """No record: no estimate, and the models are named; after a run has timed them, the dry
    run of another folder gives the estimate (#51 item 7)."""
    monkeypatch.setenv("INTRABENCH_CACHE", str(tmp_path / "cache"))
    config = tmp_path / "timed.yaml"
    config.write_text(
        "name: timed\ndatasets: [{name: demo-phantoms, n_cases: 2, "
        "shape: [12, 32, 32]}]\nmodels: [region-growing-3d]\n"
        "prompters: [box-3d]\n"
    )
    assert main(["run", str(config), "--out", str(tmp_path / "a"), "--dry-run"]) == 0
    assert (
        "time: no estimate yet: 1 model never ran this work on this machine (region-growing-3d)"
    ) in capsys.readouterr().out
    assert main(["run", str(config), "--out", str(tmp_path / "a")]) == 0
    capsys.readouterr()
    assert main(["run", str(config), "--out", str(tmp_path / "b"), "--dry-run"]) == 0
    assert "time: about " in capsys.readouterr().out


def test_tables_are_written_with_the_run(tmp_path, monkeypatch, capsys):
    """`intrabench tables RUN` writes RUN/tables, not ./intrabench-tables (#51 item 5); the run
    folder stays a run folder for a rerun."""
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "small.yaml"
    config.write_text(
        "name: small\ndatasets: [{name: demo-phantoms, n_cases: 1, "
        "shape: [12, 32, 32]}]\nmodels: [region-growing-3d]\nprompters: [box-3d]\n"
    )
    assert main(["run", str(config), "--out", str(tmp_path / "run")]) == 0
    assert main(["tables", str(tmp_path / "run")]) == 0
    assert (tmp_path / "run" / "tables" / "initial.md").is_file()
    assert not (tmp_path / "intrabench-tables").exists()
    assert main(["run", str(config), "--out", str(tmp_path / "run")]) == 0  # resumes, no refusal


def test_a_models_needs_are_checked_before_the_run(tmp_path, capsys):
    """#50 item 11: a case without a declared modality reached LiteMedSAM only after its build,
    then failed every unit, while --dry-run called it ok. Now --dry-run warns and the run
    refuses at once, naming the model, the dataset, the cases and the fix."""
    import numpy as np
    import SimpleITK as sitk

    for folder in ("images", "labels"):
        (tmp_path / folder).mkdir()
    label = np.zeros((6, 24, 24), np.uint8)
    label[2:4, 8:14, 8:14] = 1
    sitk.WriteImage(
        sitk.GetImageFromArray(label.astype(np.float32) * 100),
        str(tmp_path / "images" / "c1.nii.gz"),
    )
    sitk.WriteImage(sitk.GetImageFromArray(label), str(tmp_path / "labels" / "c1.nii.gz"))
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "images: images/{case}.nii.gz\nlabels: labels/{case}.nii.gz\nclasses: {lesion: 1}\n"
    )
    config = tmp_path / "lite.yaml"
    config.write_text(
        f"name: lite\ndatasets: [{{name: folder, spec: {spec}, label: mine}}]\n"
        "models: [litemedsam]\nprompters: [box-3d]\n"
    )
    assert main(["run", str(config), "--out", str(tmp_path / "run"), "--dry-run"]) == 0
    expected = (
        "litemedsam needs each case's modality (CT or MR), and dataset 'mine' declares "
        "none for 1 case(s) (c1)"
    )
    assert f"warning: the run would refuse to start: {expected}" in capsys.readouterr().out
    assert main(["run", str(config), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err
    assert not (tmp_path / "run" / "failures.csv").exists()
    assert main(["datasets", "verify", str(config)]) == 1  # verify of the config says it too
    out = capsys.readouterr().out
    assert expected in out and "PROBLEMS" in out
