"""Synthetic images shared by the tests (keyframe gates, camera streams, retrieval)."""

from __future__ import annotations

import numpy as np


def textured(seed: int, height: int, width: int, block: int = 8) -> np.ndarray:
    """A sharp, non-blank 3-channel image of random ``block``-pixel cells; seeds differ strongly."""
    rng = np.random.default_rng(seed)
    cells = rng.integers(0, 256, size=(height // block, width // block, 3), dtype=np.uint8)
    return np.repeat(np.repeat(cells, block, axis=0), block, axis=1)
