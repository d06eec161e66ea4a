"""Fixtures of the planner tests (the kitchen helpers themselves are in planner_kitchen.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from planner_kitchen import build_kitchen, seeded_world

from mimir_memory.world import WorldMemory


@pytest.fixture
def seed_world(tmp_path: Path) -> Iterator[Callable[..., WorldMemory]]:
    """``seed_world(nodes, parents=())``: world memory in the test's folder, seeded as
    ``planner_kitchen.seeded_world`` does and closed after the test."""
    with ExitStack() as stack:
        yield lambda *seeds: stack.enter_context(seeded_world(tmp_path / "world.db", *seeds))


@pytest.fixture
def kitchen_of(tmp_path: Path) -> Iterator[Callable[..., tuple]]:
    """``kitchen_of(layout)``: ``build_kitchen`` in the test's folder; the world and task
    memories it opens are closed after the test."""
    opened: list[tuple] = []

    def build(layout: list) -> tuple:
        made = build_kitchen(tmp_path, layout)
        opened.append(made)
        return made

    yield build
    for world, task, _kit in opened:
        world.close()
        task.close()
