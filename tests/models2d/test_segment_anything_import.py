"""segment_anything's network modules without its package ``__init__`` (which imports
torchvision and torch._dynamo, 1.4 s before a run's first forward pass)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _fresh(code: str) -> str:
    """``code``'s output in a fresh interpreter (this one has imported segment_anything)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], check=True, capture_output=True, text=True
    ).stdout.strip()


def test_a_sam_network_is_built_without_torchvision_and_the_package_still_works_after():
    out = _fresh("""
        import sys
        from intrabench import registry
        model = registry.models.create("sam", {"weights": "random", "tiny": True,
                                               "device": "cpu", "attention": "fused"})
        model.prepare()
        print("torchvision" in sys.modules, "torch._dynamo" in sys.modules)
        from segment_anything import SamPredictor, sam_model_registry  # the __init__ runs now
        import segment_anything.predictor as predictor
        print("torchvision" in sys.modules, type(model.net) is predictor.Sam,
              sorted(sam_model_registry)[0], SamPredictor(model.net).model is model.net)
        try:
            __import__("segment_anything").no_such_name
        except AttributeError as error:
            print(error)
    """)
    assert out.splitlines() == [
        "False False",
        "True True default True",
        "module 'segment_anything' has no attribute 'no_such_name'",
    ]


def test_a_package_imported_first_is_used_as_it_is():
    out = _fresh("""
        import segment_anything
        from intrabench.models.sam_family._segment_anything import modeling
        print(modeling() is segment_anything.modeling,
              modeling().Sam is segment_anything.predictor.Sam)
    """)
    assert out == "True True"
