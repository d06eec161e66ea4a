"""Evidence images for the analyzer: size-capped endpoints and the time x camera collage."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from mimir_planner.reasoning.errors import EvidenceError
from mimir_planner.reasoning.evidence import ActionWindow, CameraFrame

_FONT = cv2.FONT_HERSHEY_SIMPLEX
_BACKGROUND = (24, 24, 24)
_TEXT = (240, 240, 240)


def fit_max_side(rgb: np.ndarray, max_side: int) -> np.ndarray:
    """The image scaled down (never up) so that its longer side is at most ``max_side``."""
    h, w = rgb.shape[:2]
    scale = max_side / max(h, w)
    if scale >= 1.0:
        return rgb
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    return cv2.resize(rgb, size, interpolation=cv2.INTER_AREA)


def column_times(start: float, end: float, columns: int) -> list[float]:
    """``columns`` stamps evenly spread over [start, end] (one stamp if the span is zero)."""
    if columns < 1:
        raise EvidenceError("a collage needs at least one column")
    if columns == 1 or end <= start:
        return [start]
    return [float(t) for t in np.linspace(start, end, columns)]


def nearest_frame(frames: Sequence[CameraFrame], stamp: float) -> CameraFrame:
    """The frame whose stamp is closest to ``stamp`` (frames sorted by stamp)."""
    stamps = np.fromiter((f.stamp for f in frames), dtype=np.float64, count=len(frames))
    idx = int(np.searchsorted(stamps, stamp))
    if idx <= 0:
        return frames[0]
    if idx >= len(frames):
        return frames[-1]
    return frames[idx] if stamps[idx] - stamp < stamp - stamps[idx - 1] else frames[idx - 1]


@dataclass(frozen=True)
class Collage:
    """The collage image with the layout used to build it."""

    image: np.ndarray
    cameras: tuple[str, ...]
    times: tuple[float, ...]
    frame_refs: tuple[tuple[str, ...], ...]


def column_label(index: int, count: int, offset_s: float) -> str:
    """Header text of a column: BEFORE, +t s, AFTER."""
    if index == 0:
        return "BEFORE"
    if index == count - 1:
        return "AFTER"
    return f"+{offset_s:.1f}s"


def build_collage(
    window: ActionWindow,
    *,
    start: float,
    end: float,
    columns: int,
    tile_width: int,
    label_width: int = 96,
    header_height: int = 24,
) -> Collage:
    """One row per camera, one column per time step, labelled with camera names and times.

    Args:
        window: the buffered frames.
        start: first column stamp, s.
        end: last column stamp, s.
        columns: number of time steps.
        tile_width: width of each tile, pixels; tile height follows each camera's aspect.
        label_width: width of the left strip holding camera names, pixels.
        header_height: height of the top strip holding column times, pixels.
    """
    cameras = window.cameras()
    times = column_times(start, end, columns)
    rows: list[np.ndarray] = []
    refs: list[tuple[str, ...]] = []
    width = label_width + tile_width * len(times)
    if header_height > 0:
        header = np.full((header_height, width, 3), _BACKGROUND, dtype=np.uint8)
        for i, t in enumerate(times):
            text = column_label(i, len(times), t - times[0])
            x = label_width + i * tile_width + 4
            cv2.putText(header, text, (x, header_height - 7), _FONT, 0.45, _TEXT, 1, cv2.LINE_AA)
        rows.append(header)
    for camera in cameras:
        frames = window.frames_of(camera)
        first = frames[0].rgb
        tile_h = max(1, round(tile_width * first.shape[0] / first.shape[1]))
        row = np.full((tile_h, width, 3), _BACKGROUND, dtype=np.uint8)
        if label_width > 0:
            cv2.putText(row, camera[:12], (4, tile_h // 2), _FONT, 0.45, _TEXT, 1, cv2.LINE_AA)
        row_refs: list[str] = []
        for i, t in enumerate(times):
            frame = nearest_frame(frames, t)
            tile = cv2.resize(frame.rgb, (tile_width, tile_h), interpolation=cv2.INTER_AREA)
            x = label_width + i * tile_width
            row[:, x : x + tile_width] = tile
            cv2.rectangle(row, (x, 0), (x + tile_width - 1, tile_h - 1), _BACKGROUND, 1)
            row_refs.append(frame.ref)
        rows.append(row)
        refs.append(tuple(row_refs))
    return Collage(
        image=np.ascontiguousarray(np.vstack(rows)),
        cameras=tuple(cameras),
        times=tuple(times),
        frame_refs=tuple(refs),
    )
