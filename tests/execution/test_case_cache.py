"""Cases kept in memory for the next model: each read once when they fit."""

from __future__ import annotations

import numpy as np

from intrabench.execution._case_cache import CaseCache, case_bytes
from intrabench.types import Case, Target
from tests.prompters.prompter_testkit import blank_volume


def _case(name: str, shape=(2, 10, 10)) -> Case:
    label = np.zeros(shape, dtype=np.uint8)
    return Case("d", name, blank_volume(shape), label, (Target("t", 1, "t", "instance"),))


def test_case_bytes_counts_image_and_label():
    assert case_bytes(_case("a")) == 200 * 4 + 200


def test_least_recently_used_cases_go_first_when_over_budget():
    cache = CaseCache(budget_bytes=2 * 1000)  # two cases of 1000 bytes
    a, b, c = _case("a"), _case("b"), _case("c")
    cache.put(("d", "a"), a)
    cache.put(("d", "b"), b)
    assert cache.get(("d", "a")) is a  # now b is the least recently used
    cache.put(("d", "c"), c)
    assert cache.identities() == [("d", "a"), ("d", "c")]
    assert cache.get(("d", "b")) is None


def test_the_newest_case_stays_even_over_budget_and_a_promised_one_is_kept():
    cache = CaseCache(budget_bytes=10)
    cache.put(("d", "a"), _case("a"))
    assert cache.identities() == [("d", "a")]
    cache.put(("d", "b"), _case("b"), keep=("d", "a"))
    assert cache.identities() == [("d", "a"), ("d", "b")]
    cache.put(("d", "c"), _case("c"))
    assert cache.identities() == [("d", "c")]
    cache.clear()
    assert cache.identities() == []


def _count_reads(tmp_path, name, budget):
    """Cases read in the whole run (the reader and the loop), with two models on 3 cases."""
    from intrabench.config import RunConfig
    from intrabench.execution.runner import Runner

    config = RunConfig.model_validate(
        {
            "name": "t",
            "datasets": [{"name": "demo-phantoms", "n_cases": 3, "shape": [8, 48, 48]}],
            "models": [
                {"name": "synthetic-network", "forward_ms": 0},
                {"name": "synthetic-network-2d", "forward_ms": 0},
            ],
            "prompters": ["box-3d", "box-per-slice"],
            "refinement_steps": 0,
        }
    )
    runner = Runner(config, tmp_path / name, background="inline", case_cache_bytes=budget)
    (dataset,) = runner.datasets.values()
    reads = []
    original = dataset.load
    dataset.load = lambda case_id: reads.append(case_id) or original(case_id)
    import intrabench.engine.case_reader as reader  # inline: the reader runs in this process

    reader._DATASETS.clear()
    original_create = reader.registry.datasets.get

    def counted(dataset_name):
        cls = original_create(dataset_name)

        class Counted(cls):
            def load(self, case_id):
                reads.append(case_id)
                return super().load(case_id)

        return Counted

    reader.registry.datasets.get = counted
    try:
        runner.run()
    finally:
        reader.registry.datasets.get = original_create
        reader._DATASETS.clear()
    return sorted(reads)


def test_a_run_whose_cases_fit_reads_each_once_and_a_tight_one_again(tmp_path):
    cases = ["phantom_000", "phantom_001", "phantom_002"]
    assert _count_reads(tmp_path, "fits", None) == cases
    # one byte: only the case in use (and the next, once read) stays; each is read per model
    assert _count_reads(tmp_path, "tight", 1) == sorted(cases * 2)
