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

    Args:
        seed: The run's seed (its low 32 bits are used).
        keys: The identity the stream belongs to, in order (dataset, case, target, component
            key, step...); any objects with a stable ``repr`` (strings, ints, tuples of those).

    Returns:
        A PCG64 Generator: the same seed and keys give the same stream in every process and on
        every machine.
    """
    words: list[int] = [int(seed) & 0xFFFFFFFF]
    for key in keys:
        words.extend(_key_words(key))
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(words)))
