"""Writing MuJoCo MJCF text: number formatting and an accumulator of assets and bodies."""

from __future__ import annotations

import numpy as np


def floats(values: tuple[float, ...] | list[float] | np.ndarray) -> str:
    """Numbers as MJCF attribute text (5 significant digits)."""
    return " ".join(f"{float(v):.5g}" for v in values)


def rgba(color: tuple[float, float, float], alpha: float = 1.0) -> str:
    """An rgba attribute value."""
    return floats((*color, alpha))


class MjcfWriter:
    """Accumulates kitchen MJCF elements."""

    def __init__(self) -> None:
        self.assets: list[str] = []
        self.world: list[str] = []
        self.contact: list[str] = []

    def box(
        self,
        out: list[str],
        name: str,
        pos: tuple[float, float, float],
        half: tuple[float, float, float],
        color: tuple[float, float, float],
        *,
        collide: bool = True,
        material: str | None = None,
        extra: str = "",
    ) -> None:
        """Append a box geom to ``out``."""
        flags = "" if collide else ' contype="0" conaffinity="0"'
        mat = f' material="{material}"' if material else f' rgba="{rgba(color)}"'
        out.append(
            f'<geom name="{name}" type="box" pos="{floats(pos)}" size="{floats(half)}"'
            f"{mat}{flags}{extra}/>"
        )
