"""Snapshot readers: a finished memory folder read without creating anything beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from mimir_memory.keyframes import KeyframeStore
from mimir_memory.schema import open_database
from mimir_memory.task import TaskMemory
from mimir_memory.world import WorldMemory


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_snapshot_reader_leaves_the_folder_as_it_was(tmp_path: Path) -> None:
    with WorldMemory.open(tmp_path / "world.db") as world:
        world.add_node("cabinet", [1.0, 0.0, 1.0], stamp=1.0)
    with TaskMemory.open(tmp_path / "task.db") as task:
        task.add_goal("g1", "found(banana)", stamp=1.0)
    KeyframeStore.open(tmp_path / "keyframes").close()
    before = _files(tmp_path)
    with WorldMemory.open(tmp_path / "world.db", readonly=True, snapshot=True) as world:
        assert list(world.state.nodes) == ["cabinet_1"]
        assert world.handle.snapshot
    with TaskMemory.open(tmp_path / "task.db", readonly=True, snapshot=True) as task:
        assert [g.goal_id for g in task.agenda()] == ["g1"]
    KeyframeStore.open(tmp_path / "keyframes", readonly=True, snapshot=True).close()
    assert _files(tmp_path) == before
    # a plain reader, made to follow a live writer, makes the files SQLite needs for that
    WorldMemory.open(tmp_path / "world.db", readonly=True).close()
    assert (tmp_path / "world.db-shm").exists()


def test_a_snapshot_is_for_readers_only(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="snapshot needs readonly"):
        open_database(tmp_path / "world.db", "world", snapshot=True)
