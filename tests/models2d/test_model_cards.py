"""The model cards (#66 item 1): every built-in model has one, it agrees with its adapter, the
checkpoint table and training-data registry come from them, and a damaged card is one line."""

from __future__ import annotations

import pytest

from intrabench import registry
from intrabench.errors import ConfigError
from intrabench.io.checkpoints import CHECKPOINTS
from intrabench.model_cards import builtin_cards, parse_card, read_card


def _builtin_classes():
    """The models whose cards come with IntraBench: the built-in ones and the benchmark
    doubles of intrabench.testing (not built in, registered here by tests/conftest.py)."""
    return {
        name: cls
        for name, cls in registry.models.items()
        if cls.__module__.startswith(("intrabench.models.", "intrabench.testing."))
    }


def test_every_built_in_model_has_a_card_that_agrees_with_its_adapter():
    cards = builtin_cards()
    classes = _builtin_classes()
    assert set(cards) <= set(classes)  # no card without its adapter
    # every adapter with a checkpoint has a card (one without may still list from its class)
    assert {
        name
        for name, cls in classes.items()
        if getattr(cls, "VARIANTS", None) or getattr(cls, "checkpoint_key", "")
    } <= set(cards)
    assert len(cards) == 18
    for name in cards:
        cls, card = classes[name], cards[name]
        assert card.dimension == cls.dimension, name
        assert card.prompts == cls.accepts, name
        variants = dict(getattr(cls, "VARIANTS", {}) or {})
        key = getattr(cls, "checkpoint_key", "")
        if variants:
            assert card.variants == variants and card.default_variant == cls.DEFAULT_VARIANT
        elif key:
            assert card.default_checkpoint == key, name
        if getattr(cls, "licence", ""):
            assert (
                card.licence.split("; code ")[0].removeprefix("weights ") in cls.licence
                or card.code_licence in cls.licence
            ), name


def test_the_checkpoint_table_is_the_cards_checkpoints():
    from_cards = {info.key: info for card in builtin_cards().values() for info in card.checkpoints}
    assert {key: CHECKPOINTS[key] for key in from_cards} == from_cards
    assert CHECKPOINTS["mobilesam"].card == "mobilesam"
    # every file is pinned, or its card says why not
    for info in from_cards.values():
        assert info.sha256 or info.unpinned, info.key


GOOD = {
    "card": 1,
    "name": "m",
    "description": "d",
    "dimension": 3,
    "prompts": ["point"],
    "licence": {"code": "MIT", "weights": "MIT"},
    "packages": [],
    "default_variant": "default",
    "variants": {"default": "m-weights"},
    "checkpoints": [
        {
            "key": "m-weights",
            "file": "m.pt",
            "sha256": "a" * 64,
            "sources": [{"url": "https://example.org/m.pt"}],
        }
    ],
    "training_data": {"trained_on": [], "checked": "all", "source": "s"},
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"dimension": 4}, "dimension must be 2 or 3, not 4"),
        ({"prompts": ["telepathy"]}, "prompts must be a list of point"),
        ({"card": 2}, "'card: 1' (the card format) is missing or another version"),
        (
            {
                "checkpoints": [
                    {"key": "m-weights", "file": "m.pt", "sha256": "abc", "sources": [{"url": "u"}]}
                ]
            },
            "sha256 must be 64 lower-case hex digits",
        ),
        (
            {"checkpoints": [{"key": "m-weights", "file": "m.pt", "sources": [{"url": "u"}]}]},
            "pin its sha256, or say why not",
        ),
        (
            {
                "checkpoints": [
                    {
                        "key": "m-weights",
                        "file": "../../etc/passwd",
                        "sha256": "a" * 64,
                        "sources": [{"url": "u"}],
                    }
                ]
            },
            "must be a path inside the checkpoint",
        ),
        (
            {
                "checkpoints": [
                    {
                        "key": "m-weights",
                        "file": "m.pt",
                        "sha256": "a" * 64,
                        "sources": [
                            {"huggingface": {"repo": "o/r", "file": "m.pt", "revision": "main"}}
                        ],
                    }
                ]
            },
            "a Hugging Face revision is pinned as a 40-hex commit id",
        ),
        (
            {
                "checkpoints": [
                    {
                        "key": "m-weights",
                        "file": "m.pt",
                        "sha256": "a" * 64,
                        "sources": [{"ftp": "x"}],
                    }
                ]
            },
            "unknown source kind 'ftp'",
        ),
        ({"variants": {"default": "other"}}, "variants map each variant name to one of its"),
        ({"training_data": {"trained_on": []}}, "training_data needs trained_on, checked and a"),
    ],
)
def test_a_damaged_card_is_one_line(change, message):
    assert parse_card(GOOD, "good.yaml").checkpoints[0].url == "https://example.org/m.pt"
    with pytest.raises(ConfigError, match="model card bad.yaml: ") as raised:
        parse_card({**GOOD, **change}, "bad.yaml")
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_a_card_file_that_is_no_yaml_or_huge_is_refused(tmp_path):
    bad = tmp_path / "m.yaml"
    bad.write_text("card: [1\n")
    with pytest.raises(ConfigError, match="not readable YAML"):
        read_card(bad)
    bad.write_bytes(b"#" * (300 * 1024))
    with pytest.raises(ConfigError, match="more than a card holds"):
        read_card(bad)
