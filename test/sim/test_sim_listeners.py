"""Step listeners in every stepping path, and the entity position/box API used by the bridge."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np
import pytest
from scene_helpers import kitchen_sim

from mimir_sim.errors import StepListenerError, UnknownEntityError
from mimir_sim.sim import KitchenSim

PERIOD = 0.1


@pytest.fixture(scope="module")
def sim(tidybot_dir: Path) -> Iterator[KitchenSim]:
    with kitchen_sim(tidybot_dir) as s:
        yield s


def _spacing_ok(times: list[float], period: float, dt: float) -> bool:
    gaps = np.diff(times)
    return bool(np.all(gaps >= period - 1e-9) and np.all(gaps <= period + dt + 1e-9))


def test_listener_runs_inside_move_to_and_open_and_may_render(sim: KitchenSim) -> None:
    sim.reset("cab_1")
    dt = float(sim.model.opt.timestep)
    calls: list[tuple[float, float, float, tuple[float, ...], float]] = []

    def listener(now: float) -> None:
        frame = sim.render("wrist", 32, 24, depth=False, segmentation=False)
        assert frame.color is not None and frame.color.shape == (24, 32, 3)
        calls.append((now, sim.time, frame.stamp, sim.state().arm_q, sim.fixture_opening("cab_2")))

    registered = sim.time
    handle = sim.add_step_listener(listener, PERIOD)
    assert sim.step_listener_count == 1
    move = sim.move_to("cab_2")
    assert move.reached
    move_record = sim.log[-1]
    opened = sim.open("cab_2")
    assert opened.success, opened.outcome

    times = [c[0] for c in calls]
    # called with the current sim time, after the step, and the rendered frame carries it
    assert all(now == t_sim == stamp for now, t_sim, stamp, _, _ in calls)
    assert times[0] == pytest.approx(registered + PERIOD, abs=dt)
    assert _spacing_ok(times, PERIOD, dt)
    assert len(times) == pytest.approx((sim.time - registered) / PERIOD, abs=1.0)
    for record in (move_record, opened):
        inside = [t for t in times if record.start < t < record.end]
        expected = (record.end - record.start) / PERIOD
        assert len(inside) == pytest.approx(expected, abs=1.5)
    # the calls happen while the controllers run: the arm moves and the door swings between them
    during_open = [c for c in calls if opened.start < c[0] < opened.end]
    arm_paths = np.array([c[3] for c in during_open])
    assert float(np.ptp(arm_paths, axis=0).max()) > 0.3
    door = [c[4] for c in during_open]
    assert door[0] < 0.05 and max(door) > 0.5

    sim.remove_step_listener(handle)
    count = len(calls)
    sim.step_seconds(0.5)
    sim.inspect("cab_2")
    assert len(calls) == count
    assert sim.step_listener_count == 0


def test_listener_in_pick_and_reset(sim: KitchenSim) -> None:
    sim.reset("cab_3")
    dt = float(sim.model.opt.timestep)
    times: list[float] = []
    handle = sim.add_step_listener(times.append, 0.25)
    assert sim.open("cab_3").success
    picked = sim.pick("ketchup_1")
    assert picked.success, picked.outcome
    in_pick = [t for t in times if picked.start < t < picked.end]
    assert len(in_pick) == pytest.approx((picked.end - picked.start) / 0.25, abs=1.5)
    assert _spacing_ok(times, 0.25, dt)
    # reset restarts sim time; the listener's period counts from 0 again while objects settle
    times.clear()
    sim.reset("cab_3")
    assert times == [pytest.approx(0.25, abs=dt)]
    sim.remove_step_listener(handle)


def test_period_zero_runs_every_step_and_listeners_may_remove_themselves(
    sim: KitchenSim,
) -> None:
    seen: list[float] = []
    handles: list[int] = []

    def once(now: float) -> None:
        seen.append(now)
        sim.remove_step_listener(handles[0])

    every: list[float] = []
    handles.append(sim.add_step_listener(once, 0.0))
    other = sim.add_step_listener(every.append, 0)
    sim.step(5)
    assert len(seen) == 1 and len(every) == 5
    sim.remove_step_listener(other)


def test_listener_rules_and_bad_arguments(sim: KitchenSim) -> None:
    for bad in (-0.1, math.nan, math.inf, "fast", True):
        with pytest.raises(StepListenerError):
            sim.add_step_listener(lambda _t: None, bad)  # type: ignore[arg-type]
    with pytest.raises(StepListenerError):
        sim.add_step_listener("not callable", 0.1)  # type: ignore[arg-type]
    with pytest.raises(StepListenerError, match="handle"):
        sim.remove_step_listener(12345)

    stepper = sim.add_step_listener(lambda _t: sim.step(), 0.0)
    with pytest.raises(StepListenerError, match="must not step"):
        sim.step()
    sim.remove_step_listener(stepper)

    before = np.array(sim.data.ctrl)

    def meddle(_t: float) -> None:
        sim.data.ctrl[0] += 1.0

    meddler = sim.add_step_listener(meddle, 0.0)
    with pytest.raises(StepListenerError, match="controls"):
        sim.step()
    assert np.array_equal(sim.data.ctrl, before)
    sim.remove_step_listener(meddler)

    def boom(_t: float) -> None:
        raise RuntimeError("listener failed")

    failing = sim.add_step_listener(boom, 0.0)
    with pytest.raises(RuntimeError, match="listener failed"):
        sim.step()
    sim.remove_step_listener(failing)
    sim.step(3)  # stepping works again afterwards
    assert sim.step_listener_count == 0


# ------------------------------------------------------------------------------------ entities


def test_entity_labels_kinds_positions_and_boxes(sim: KitchenSim) -> None:
    sim.reset("cab_2")
    states = sim.entity_states()
    fixtures = {e for e, s in states.items() if s.kind == "fixture"}
    objects = {e for e, s in states.items() if s.kind == "object"}
    assert fixtures == {"counter_1", "cab_1", "cab_2", "cab_3"}
    assert objects == set(sim.scene.objects)
    assert states["cab_1"].label == "upper cabinet" and states["cab_1"].category == "upper_cabinet"
    assert states["ketchup_1"].category == "ketchup" and states["ketchup_1"].fixture == "cab_3"
    # a fixture's box is its carcass as laid out by the scene builder
    layout = sim.scene.fixtures["cab_2"]
    cab = states["cab_2"]
    assert cab.box_low[0] == pytest.approx(layout.front_x, abs=1e-6)
    assert cab.box_high[0] == pytest.approx(sim.scene.scenario.kitchen.wall_x, abs=1e-6)
    assert cab.box_low[1] == pytest.approx(layout.center_y - layout.width / 2, abs=1e-6)
    assert cab.box_low[2] == pytest.approx(layout.z_low, abs=1e-6)
    # objects: the position is the body origin, inside its box, inside its cabinet's box or
    # resting on the counter's top
    for oid in objects:
        st = states[oid]
        assert np.allclose(st.position, sim.object_position(oid))
        assert st.distance_to(st.position) == 0.0
        home = states[sim.scene.objects[oid].fixture]
        if home.category == "counter":
            assert st.box_low[2] == pytest.approx(home.box_high[2], abs=0.005)
        else:
            assert home.distance_to(st.position) == 0.0
    # parts move with the physics: the door's box swings open
    door_before = sim.entity_state("cab_2_door")
    assert door_before.fixture == "cab_2" and door_before.kind == "door"
    assert sim.open("cab_2").success
    door_after = sim.entity_state("cab_2_door")
    assert door_after.box_low[0] < door_before.box_low[0] - 0.2
    assert sim.entity_position("cab_2") == pytest.approx(np.array(cab.position))


def test_nearest_entity_resolves_label_and_position(sim: KitchenSim) -> None:
    sim.reset("cab_2")
    banana = sim.object_position("banana_1")
    near = sim.nearest_entity(banana + 0.05, labels=["banana"])
    assert near is not None and near.id == "banana_1"
    # compatible labels: either the label or the category name
    assert sim.nearest_entity(banana, labels=["upper cabinet"]).id == "cab_2"  # type: ignore[union-attr]
    assert sim.nearest_entity(banana, labels=["upper_cabinet"]).id == "cab_2"  # type: ignore[union-attr]
    ketchup = sim.nearest_entity(banana, labels=["ketchup bottle"])
    assert ketchup is not None and ketchup.id == "ketchup_1"
    assert sim.nearest_entity(banana, labels=["ketchup"], max_distance=0.1) is None
    assert sim.nearest_entity(banana, labels=["dragonfruit"]) is None
    parts = sim.nearest_entity(banana, kinds=("door", "handle"))
    assert parts is not None and parts.fixture == "cab_2"


def test_entity_api_bad_input(sim: KitchenSim) -> None:
    for bad in ("cab_99", "floor", "robot"):
        with pytest.raises(UnknownEntityError):
            sim.entity_state(bad)
    with pytest.raises(UnknownEntityError):
        sim.entity_states(kinds=("spaceship",))
    with pytest.raises(UnknownEntityError):
        sim.nearest_entity((float("nan"), 0.0, 0.0))
    with pytest.raises(UnknownEntityError):
        sim.nearest_entity((1.0, 2.0))
