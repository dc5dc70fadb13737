"""Small synthetic masks shared by the evaluation tests."""

from __future__ import annotations

import numpy as np


def sphere(
    shape: tuple[int, int, int],
    center: tuple[float, float, float],
    radius: float,
    spacing: tuple[float, float, float] = (1.0, 1.0, 1.0),
) -> np.ndarray:
    """Boolean (z, y, x) ball of ``radius`` mm around ``center`` (voxel coordinates)."""
    grid = np.indices(shape, dtype=np.float64)
    squared = sum(((grid[a] - center[a]) * spacing[a]) ** 2 for a in range(3))
    return squared <= radius**2
