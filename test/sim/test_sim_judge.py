"""Judging "discovered" (inspected while open, or clearly in view in rendered segmentation) and
the open attempts the physics side notes when the hand takes hold of a handle."""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np
import pytest

from mimir_sim.judge import VisibilityLog, check_criterion, judge_instruction, object_discovered
from mimir_sim.recording import PrimitiveRecord
from mimir_sim.scenario import load_scenario
from mimir_sim.sim import KitchenSim

IDS = ("wall", "cab_2", "banana_1", "apple_1")
OBJECTS = frozenset({"banana_1", "apple_1"})


def _frame(counts: dict[int, int], shape: tuple[int, int] = (20, 30)) -> np.ndarray:
    """A segmentation image with ``counts[index]`` pixels of each index, -1 elsewhere."""
    seg = np.full(shape[0] * shape[1], -1, dtype=np.int32)
    at = 0
    for index, n in counts.items():
        seg[at : at + n] = index
        at += n
    return seg.reshape(shape)


def test_visibility_log_keeps_the_peak_per_object_and_instruction() -> None:
    log = VisibilityLog()
    log.add_frame(0, _frame({0: 300, 1: 200, 2: 40}), IDS, OBJECTS)
    log.add_frame(0, _frame({2: 160, 3: 10}), IDS, OBJECTS)
    log.add_frame(0, _frame({2: 90}), IDS, OBJECTS)  # a smaller view later keeps the peak
    log.add_frame(1, _frame({3: 500}), IDS, OBJECTS)
    log.add_frame(None, _frame({3: 550, 2: 550}), IDS, OBJECTS)  # between instructions
    log.add_frame(0, _frame({}), IDS, OBJECTS)  # nothing in view
    # fixtures and walls are never "discovered"; pixels of two frames are not summed
    assert log.peak_pixels(0) == {"banana_1": 160, "apple_1": 10}
    assert log.peak_pixels(1) == {"apple_1": 500}
    assert log.peak_pixels(2) == {}
    assert log.peak_pixels(None) == {"banana_1": 160, "apple_1": 500}
    assert log.visible(0, 150) == {"banana_1": 160}
    assert log.visible(0, 161) == {}
    assert log.visible(1, 150) == {"apple_1": 500}


@pytest.mark.parametrize(
    "bad",
    [
        np.zeros((4, 4, 3), dtype=np.int32),  # not a single-channel image
        np.zeros((4, 4), dtype=np.float32),  # not entity indices
        np.full((4, 4), 7, dtype=np.int32),  # an index with no entity id
    ],
)
def test_visibility_log_refuses_bad_segmentation(bad: np.ndarray) -> None:
    log = VisibilityLog()
    with pytest.raises(ValueError):
        log.add_frame(0, bad, IDS, OBJECTS)
    assert log.peak_pixels(0) == {}  # nothing half-recorded
    with pytest.raises(ValueError, match="min_pixels"):
        log.visible(0, 0)


@pytest.fixture(scope="module")
def opened_sim(tidybot_dir):  # type: ignore[no-untyped-def]
    """locked_unlocked with cab_2 opened during instruction 0 and nothing inspected."""
    sim = KitchenSim.from_scenario(load_scenario("locked_unlocked"), tidybot_dir)
    sim.begin_instruction(0)
    assert sim.move_to("cab_2").reached
    assert sim.open("cab_2").success
    try:
        yield sim
    finally:
        sim.shutdown()


def test_rendered_view_of_the_banana_counts_as_discovered(opened_sim: KitchenSim) -> None:
    sim = opened_sim
    instruction = sim.scene.scenario.instructions[0]
    assert not object_discovered(sim, "banana_1", 0)  # never inspected
    assert not judge_instruction(sim, instruction, 0).success
    log = VisibilityLog()
    objects = frozenset(sim.scene.objects)
    for cam in ("base", "pole", "wrist"):
        frame = sim.render(cam, 320, 240, segmentation=True)
        assert frame.segmentation is not None
        log.add_frame(sim.instruction, frame.segmentation, frame.entity_ids, objects)
    peak = log.peak_pixels(0)
    # the pole camera looks into the open cabinet: the fruit is in view, the ketchup is not
    assert {"banana_1", "apple_1"} <= set(peak) and "ketchup_1" not in peak
    assert peak["banana_1"] > 50
    visible = log.visible(0, 40)
    named = ["banana_1"]
    assert judge_instruction(sim, instruction, 0, named, visible=visible).success
    hit, reason = check_criterion(sim, instruction.success[0], 0, named, visible=visible)
    assert hit and "in view with" in reason and "named in the answer" in reason
    # seen but not named in the answer, or named without being seen, is no discovery
    assert not judge_instruction(sim, instruction, 0, visible=visible).success
    assert not judge_instruction(sim, instruction, 0, ["apple_1"], visible=visible).success
    assert not judge_instruction(sim, instruction, 0, named).success
    # a threshold above the peak, or another instruction's view, does not count
    assert not judge_instruction(sim, instruction, 0, named, visible=log.visible(0, 5000)).success
    assert not judge_instruction(sim, instruction, 0, named, visible=log.visible(1, 40)).success
    # an inspection of the open cabinet still counts on its own
    assert sim.inspect("cab_2").success
    assert judge_instruction(sim, instruction, 0, named).success
    hit, reason = check_criterion(sim, instruction.success[0], 0, named)
    assert hit and "inspected while open" in reason


def _handle_grasp(name: str, fixture: str, start: float, instruction: int | None,
                  success: bool = False) -> PrimitiveRecord:
    """A record as :class:`~mimir_sim.robot_servers.SimRobotDrives` logs a handle grasp."""
    record = PrimitiveRecord(name, fixture, start, end=start + 2.0, success=success,
                             outcome="handle released", instruction=instruction)
    record.measurements.update(opening_before=0.0, opening_after=0.0)
    return record


def test_open_attempted_reads_the_handle_grasps(opened_sim: KitchenSim) -> None:
    sim = opened_sim
    instruction = sim.scene.scenario.instructions[1]  # find the ketchup; never try cab_1
    attempted = instruction.failure[0]
    assert (attempted.type, attempted.fixture) == ("open_attempted", "cab_1")
    before = len(sim.log)
    try:
        assert not check_criterion(sim, attempted, 1)[0]
        # grasping the open cab_2's handle (a close attempt) or cab_1's in another
        # instruction is no open attempt on cab_1 in instruction 1
        sim.log.append(_handle_grasp("close", "cab_2", sim.time, 1))
        sim.log.append(_handle_grasp("open", "cab_1", sim.time, 0))
        sim.log.append(_handle_grasp("close", "cab_1", sim.time, 1))
        assert not check_criterion(sim, attempted, 1)[0]
        assert not judge_instruction(sim, instruction, 1).success  # the ketchup is not found
        # the hand took hold of the locked cab_1's handle during instruction 1: the failure
        sim.log.append(_handle_grasp("open", "cab_1", sim.time + 1.0, 1))
        hit, reason = check_criterion(sim, attempted, 1)
        assert hit and reason == "open attempted on cab_1: True"
        assert check_criterion(sim, attempted, None)[0]  # over all instructions
        verdict = judge_instruction(sim, instruction, 1, ["ketchup_1"],
                                    visible={"ketchup_1": 500})
        assert not verdict.success  # found, but cab_1 was tried
        assert any(r.startswith("failure condition open attempted") for r in verdict.reasons)
        # judged over instruction 3's records (none), no attempt counts
        assert judge_instruction(sim, instruction, 3, ["ketchup_1"],
                                 visible={"ketchup_1": 500}).success
    finally:
        del sim.log[before:]
    # without the grasp the same view succeeds
    assert judge_instruction(sim, instruction, 1, ["ketchup_1"], visible={"ketchup_1": 500}).success


def test_reopening_a_fixture_tried_in_an_earlier_instruction_is_the_failure() -> None:
    from types import SimpleNamespace

    from mimir_sim.recording import PrimitiveRecord
    from mimir_sim.scenario import CriterionSpec

    crit = CriterionSpec(type="reopen_attempted", fixture="cab_5")
    first = SimpleNamespace(log=[PrimitiveRecord("open", "cab_5", 1.0, instruction=1)])
    # the first try ever, in instruction 1, is how the robot learns the door is locked
    assert check_criterion(first, crit, 1)[0] is False  # type: ignore[arg-type]
    again = SimpleNamespace(log=[*first.log, PrimitiveRecord("open", "cab_5", 9.0, instruction=4),
                                 PrimitiveRecord("open", "cab_2", 9.5, instruction=4)])
    hit, why = check_criterion(again, crit, 4)  # type: ignore[arg-type]
    assert hit and "tried again" in why
    # another instruction that leaves cab_5 alone is not hit
    assert check_criterion(again, crit, 3)[0] is False  # type: ignore[arg-type]
