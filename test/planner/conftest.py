"""Fixtures of the planner tests (the kitchen helpers themselves are in planner_kitchen.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from planner_kitchen import seeded_world

from mimir_memory.world import WorldMemory


@pytest.fixture
def seed_world(tmp_path: Path) -> Iterator[Callable[..., WorldMemory]]:
    """``seed_world(nodes, parents=())``: world memory in the test's folder, seeded as
    ``planner_kitchen.seeded_world`` does and closed after the test."""
    with ExitStack() as stack:
        yield lambda *seeds: stack.enter_context(seeded_world(tmp_path / "world.db", *seeds))
