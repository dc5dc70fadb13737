"""Deterministic random streams.

Every random choice in IntraBench draws from a generator derived from the run seed and the
identity of the work (dataset, case, target, prompter, step, ...), never from global state. Two
runs with the same config therefore produce the same prompts whatever the execution order,
worker count or executor.
"""

from __future__ import annotations

import hashlib

import numpy as np


def _key_words(key: object) -> list[int]:
    digest = hashlib.blake2b(repr(key).encode("utf-8"), digest_size=8).digest()
    return [int.from_bytes(digest[:4], "little"), int.from_bytes(digest[4:], "little")]


def derive_rng(seed: int, *keys: object) -> np.random.Generator:
    """A numpy Generator that depends only on ``seed`` and the ordered ``keys``.

    Keys may be any objects with a stable ``repr`` (strings, ints, tuples of those).
    """
    words: list[int] = [int(seed) & 0xFFFFFFFF]
    for key in keys:
        words.extend(_key_words(key))
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(words)))
