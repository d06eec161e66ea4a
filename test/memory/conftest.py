"""Fixtures shared by the memory tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mimir_memory.config import AssociationConfig, MemoryConfig
from mimir_memory.world import WorldMemory


@pytest.fixture
def world(tmp_path: Path) -> Iterator[WorldMemory]:
    """World memory in tmp_path; cabinets associate within 0.6 m, everything else 0.3 m."""
    config = MemoryConfig(association=AssociationConfig(0.3, {"cabinet": 0.6}))
    memory = WorldMemory.open(tmp_path / "world.db", config=config)
    yield memory
    memory.close()
