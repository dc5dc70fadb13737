"""The slice-embedding cache of the 2D SAM-family adapters: embeddings (any tensor structure)
keyed by axial slice, least-recently-used eviction by bytes and optionally by entry count."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any


def tensor_bytes(value: Any) -> int:
    """Bytes held by a tensor or NumPy array, or a (nested) tuple/list/dict of them."""
    if isinstance(value, dict):
        return sum(tensor_bytes(v) for v in value.values())
    if isinstance(value, (tuple, list)):
        return sum(tensor_bytes(v) for v in value)
    if hasattr(value, "element_size") and hasattr(value, "nelement"):
        return int(value.element_size() * value.nelement())
    if hasattr(value, "nbytes"):  # a NumPy array (adapters that run without torch)
        return int(value.nbytes)
    return 0


class EmbeddingCache:
    """Slice embeddings (any tensor structure) keyed by slice, LRU-evicted by bytes.

    ``max_bytes`` bounds the memory held (an entry larger than the bound is not kept);
    ``max_entries`` optionally bounds the number of slices.
    """

    def __init__(self, max_bytes: int, max_entries: int | None = None) -> None:
        self.max_bytes = int(max_bytes)
        self.max_entries = None if max_entries is None else int(max_entries)
        self._items: OrderedDict[Any, tuple[Any, int]] = OrderedDict()
        self.bytes = 0
        self.evictions = 0

    def __contains__(self, key: Any) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: Any) -> Any | None:
        item = self._items.get(key)
        if item is None:
            return None
        self._items.move_to_end(key)
        return item[0]

    def put(self, key: Any, value: Any) -> None:
        size = tensor_bytes(value)
        if key in self._items:
            self.bytes -= self._items.pop(key)[1]
        if size > self.max_bytes or self.max_entries == 0:
            return
        self._items[key] = (value, size)
        self.bytes += size
        while self.bytes > self.max_bytes or (
            self.max_entries is not None and len(self._items) > self.max_entries
        ):
            _, (_, evicted) = self._items.popitem(last=False)
            self.bytes -= evicted
            self.evictions += 1

    def clear(self) -> None:
        self._items.clear()
        self.bytes = 0
