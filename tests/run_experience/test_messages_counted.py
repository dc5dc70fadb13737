"""Issue 69 item 4: messages that count and list say it right (every unknown name at once,
left-out pairs apart from incompatible ones, singular counts, cut lists say how many more)."""

from __future__ import annotations

import pytest

from intrabench.config import parse_config
from intrabench.errors import ConfigError

BASE = {"datasets": ["demo-phantoms"], "models": ["region-growing-3d"], "prompters": ["box-3d"]}


def test_every_unknown_name_is_reported_in_one_line():
    with pytest.raises(ConfigError) as raised:
        parse_config({"datasets": ["demo-phantom"],
                      "models": ["region-growing3d", "no-such-model"],
                      "prompters": ["box3d"], "refiners": ["scribles"]})
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(
        "5 unknown names: dataset 'demo-phantom' (did you mean 'demo-phantoms'?), "
        "model 'region-growing3d' (did you mean 'region-growing-3d'?), model 'no-such-model', "
        "prompter 'box3d' (did you mean 'box-3d'?), refiner 'scribles' (did you mean "
        "'scribble'?); ")


def test_one_unknown_name_keeps_its_list_of_valid_names():
    with pytest.raises(ConfigError, match="unknown model 'no-such-model'.*Valid models: .*"
                                          "region-growing-3d"):
        parse_config({**BASE, "models": ["region-growing-3d", "no-such-model"]})
