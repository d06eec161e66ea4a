"""Builders shared by the memory tests."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import image_helpers
import numpy as np

from mimir_memory.observations import ObjectObservation


def obs(
    label: str,
    centre: Sequence[float] | np.ndarray,
    stamp: float = 1.0,
    *,
    half: float = 0.05,
    detection_id: str = "",
    frame_id: str = "map",
) -> ObjectObservation:
    """An observation with a cubic box of half side ``half`` around ``centre``."""
    c = np.asarray(centre, dtype=np.float64)
    return ObjectObservation(
        label=label,
        centroid=c,
        bbox_min=c - half,
        bbox_max=c + half,
        stamp=stamp,
        detection_id=detection_id,
        frame_id=frame_id,
    )


def textured(seed: int, height: int = 120, width: int = 160) -> np.ndarray:
    """A sharp, non-blank BGR test image that differs strongly between seeds."""
    return image_helpers.textured(seed, height, width)


def as_older_keyframe_schema(root: Path, version: int, *dropped: str) -> None:
    """Turn the keyframe database under ``root`` back into one of schema ``version``: the
    columns later versions added are dropped and the recorded version is set back."""
    with sqlite3.connect(root / "keyframes.db") as conn:
        for column in dropped:
            conn.execute(f"ALTER TABLE keyframes DROP COLUMN {column}")
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(version)])
