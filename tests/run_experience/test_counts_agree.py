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
        "prompters: [box-3d, box-per-slice]\n")
    assert main(["run", str(config), "--out", str(tmp_path / "run"), "--dry-run"]) == 0
    dry = capsys.readouterr().out
    line = "1 incompatible combination(s) skipped (2 with each dataset counted)"
    assert line in dry
    main(["run", str(config), "--out", str(tmp_path / "run")])
    assert line in capsys.readouterr().err
