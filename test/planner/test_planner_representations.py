"""The planner reading memory through a narrower representation (the evaluation's baselines)."""

from __future__ import annotations

from pathlib import Path

from image_helpers import textured
from planner_kitchen import admit_property, build_kitchen, locked_unlocked_layout, see, session_for

from mimir.paths import config_file
from mimir_memory.keyframes import KeyframeStore
from mimir_memory.representation import MemoryView, keyframe_source, load_representations
from mimir_memory.task import GoalStatus
from mimir_memory.world import WorldMemory
from mimir_planner.config import load_planner_config

REPRESENTATIONS = load_representations(config_file("representations.yaml"))


def _steps(executed: list) -> list[tuple[str, str]]:
    return [(s.primitive, s.target) for s in executed]


def test_an_action_graph_planner_does_not_know_the_lock_and_tries_the_door(tmp_path: Path) -> None:
    opened = {}
    for name in ("scene_graph", "action_graph"):
        root = tmp_path / name
        root.mkdir()
        world, task, kit = build_kitchen(root, locked_unlocked_layout())
        admit_property(world, "cabinet_1", "locked", True, stamp=5.0)
        view = None if name == "scene_graph" else MemoryView(REPRESENTATIONS[name])
        reader = WorldMemory.open(root / "world.db", readonly=True, view=view)
        try:
            done = session_for(reader, task).run_instruction("open cabinet_1", kit)
            assert done.goals[0].status is GoalStatus.BLOCKED
            opened[name] = ("open", "cabinet_1") in _steps(kit.executed)
            reason = task.state.status_reason[done.goals[0].goal_id]
            assert ("remembered locked" in reason) is (name == "scene_graph"), reason
        finally:
            for memory in (reader, world, task):
                memory.close()
    # the whole memory blocks at once; the action graph has no lock to read and tries
    assert opened == {"scene_graph": False, "action_graph": True}


def _episodic_run(root: Path, representation: str, later_frames: int
                  ) -> tuple[GoalStatus, list[tuple[str, str]]]:
    world, task, kit = build_kitchen(root, locked_unlocked_layout())
    banana = see(world, "banana", (1.0, 0.0, 0.95), stamp=2.0)
    mug = see(world, "mug", (1.0, 0.3, 0.95), stamp=2.0)
    store = KeyframeStore.open(root / "keyframes")
    store.save(textured(0, 120, 160), timestamp=2.0, camera="pole", trigger="new_node",
               node_ids=[banana])
    for k in range(later_frames):  # each 3 s after the last: a group of its own
        store.save(textured(k + 1, 120, 160), timestamp=10.0 + 3.0 * k, camera="pole",
                   trigger="node_update", node_ids=[mug])
    config = load_planner_config()
    view = MemoryView(REPRESENTATIONS[representation], keyframe_source(store),
                      is_fixture=config.is_fixture_label, pinned=lambda: [task.hand or ""])
    reader = WorldMemory.open(root / "world.db", readonly=True, view=view)
    try:
        done = session_for(reader, task, config).run_instruction("find the banana", kit)
        return done.goals[0].status, _steps(kit.executed)
    finally:
        for memory in (reader, store, world, task):
            memory.close()


def test_an_episodic_planner_finds_what_its_frames_hold_and_forgets_the_rest(
        tmp_path: Path) -> None:
    # the banana's frame is the newest: found from memory without a step
    status, steps = _episodic_run(tmp_path / "recent", "episodic", 0)
    assert status is GoalStatus.COMPLETED and steps == []
    # twenty later groups push it out: no graph index to fall back on, no fixture known
    status, steps = _episodic_run(tmp_path / "old", "episodic", 20)
    assert status is GoalStatus.BLOCKED and steps == []
    # with the fixtures it searches them; no frame shows the banana again, so nothing ends it
    status, steps = _episodic_run(tmp_path / "fixtures", "episodic_fixtures", 20)
    assert ("inspect", "cabinet_2") in steps and ("inspect", "cabinet_3") in steps
