"""Config validation: precise one-line messages for every kind of mistake."""

from __future__ import annotations

import pytest

from intrabench.config import load_config, parse_config
from intrabench.errors import ConfigError

BASE = {"datasets": ["demo-phantoms"], "models": ["region-growing-3d"], "prompters": ["box-3d"]}


def test_valid_config_with_shorthand_and_params():
    config = parse_config({**BASE, "models": [{"name": "region-growing-3d", "multiplier": 2.0}],
                           "seeds": 3})
    assert config.models[0].params == {"multiplier": 2.0}
    assert config.models[0].key == "region-growing-3d(multiplier=2.0)"
    assert config.seeds == [3]


@pytest.mark.parametrize(("change", "message"), [
    ({"modles": ["x"]}, "unknown key 'modles' \\(did you mean 'models'\\?\\)"),
    ({"models": ["segment-everything"]}, "unknown model 'segment-everything'.*Valid models: .*region-growing-3d"),
    ({"prompters": ["box3d"]}, "unknown prompter 'box3d'. Did you mean 'box-3d'"),
    ({"models": [{"name": "region-growing-3d", "multplier": 2}]}, "no parameter 'multplier' \\(did you mean 'multiplier'\\?\\)"),
    ({"refinement_steps": -1}, "refinement_steps: Input should be greater than or equal to 0"),
    ({"datasets": []}, "datasets: List should have at least 1 item"),
    ({"prompters": ["box-3d", "box-3d"]}, "listed twice: box-3d"),
])
def test_mistakes_give_precise_messages(change, message):
    with pytest.raises(ConfigError, match=message):
        parse_config({**BASE, **change})


def test_yaml_file_errors(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("models: [a, b\nprompters: x\n")
    with pytest.raises(ConfigError, match="line 2 invalid YAML"):
        load_config(broken)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("just a string\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_config(scalar)
