"""An open that stops short is pulled again from a fresh look at the handle, in lockstep with
the simulator.

On a Long Horizon layout the arm pulled a wall cabinet's door to about half its arc, where the
branch it gripped the handle with could not follow the arc any further and every other
solution would have swung the hand wide: the arm server refused the rest and the open ended
``PARTIAL_OPEN``. The door stood half open in front of the opening, and the look that came
next pushed it shut. Here the arm server refuses the same way during the first pull (every
target nearer the arm's base than :data:`BRANCH_END_X`); the executor lets go, finds the
handle where it now stands and pulls again, and the door ends wide open.
"""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from lockstep_helpers import lockstep_on, open_from_the_ordinary_stance

from mimir_robot import primitive_plans
from mimir_robot.executor import Executor, Outcome
from mimir_robot.requests import UnknownTargetError
from mimir_sim import robot_servers
from mimir_sim.layouts import generate_layout
from mimir_sim.scenario import load_scenario
from mimir_sim.sim import KitchenSim

#: Layout and cabinet of the case (a wall cabinet whose door swings its handle towards the
#: robot); from where a move puts the base its whole open fits when the arm follows the arc.
SEED, CABINET = 1000, "cab_6"
#: The first pull's targets nearer the arm base than this (m, along the arm base's x) are
#: refused as the arm server refuses a branch change: the door stops a quarter of the way.
BRANCH_END_X = 0.42


@contextmanager
def opened_cabinet(tidybot_dir: Path) -> Iterator[tuple[KitchenSim, Outcome]]:
    """The layout's simulator after the robot opened the cabinet from the ordinary stance."""
    sim = KitchenSim.from_scenario(generate_layout(load_scenario("long_horizon"), SEED),
                                   tidybot_dir)
    with lockstep_on(sim) as robot:
        yield sim, open_from_the_ordinary_stance(sim, robot, CABINET, "cabinet_6")


@pytest.fixture
def first_pull_stops_half_way(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """The arm server refuses the first open's pull targets past :data:`BRANCH_END_X`; counts
    the opens and the refused targets."""
    counts = {"opens": 0, "refused": 0, "pulling": 0, "every_pull": 0}
    solve, open_, phase = robot_servers._ArmDrive.solve, Executor.open, Executor._phase

    def refusing(self: robot_servers._ArmDrive, pos: np.ndarray, quat: np.ndarray) -> Any:
        if (counts["opens"] == 1 or counts["every_pull"]) and counts["pulling"] \
                and float(pos[0]) < BRANCH_END_X:
            counts["refused"] += 1
            self.swings_refused += 1
            return None
        return solve(self, pos, quat)

    def counted(self: Executor, *args: Any, **kwargs: Any) -> Outcome:
        counts["opens"] += 1
        return open_(self, *args, **kwargs)

    def phased(self: Executor, name: str) -> None:
        counts["pulling"] = int(name == "pull")
        phase(self, name)

    monkeypatch.setattr(robot_servers._ArmDrive, "solve", refusing)
    monkeypatch.setattr(Executor, "_phase", phased)
    monkeypatch.setattr(Executor, "open", counted)
    return counts


def test_an_open_the_arm_stopped_short_is_pulled_again_and_opens_wide(
        tidybot_dir: Path, first_pull_stops_half_way: dict[str, int]) -> None:
    with opened_cabinet(tidybot_dir) as (sim, outcome):
        counts = first_pull_stops_half_way
        assert counts["opens"] == 2 and counts["refused"] > 0
        assert outcome.measurements["second_pull"] == 1.0
        first = outcome.measurements["first_pull_fraction"]
        assert 0.15 <= first < 0.8  # the first pull moved the door, not far enough
        assert outcome.code in ("OPENED", "PARTIAL_OPEN"), outcome
        # wide open: the first pull alone leaves it a quarter of the way (about 0.35 rad)
        assert sim.fixture_opening(CABINET) > 1.0  # rad


def test_no_second_pull_when_the_handle_is_not_found_again(
        tidybot_dir: Path, first_pull_stops_half_way: dict[str, int],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The first pull's outcome stands when the handle cannot be found again (a door half
    open may hide it from every camera), with a measurement saying no second pull was made."""
    real = primitive_plans.look_until

    def blind_after_the_pull(*args: Any, **kwargs: Any) -> Any:
        if first_pull_stops_half_way["opens"] >= 1:
            raise UnknownTargetError("no handle seen on the target in the pole camera")
        return real(*args, **kwargs)

    monkeypatch.setattr(primitive_plans, "look_until", blind_after_the_pull)
    with opened_cabinet(tidybot_dir) as (sim, outcome):
        assert first_pull_stops_half_way["opens"] == 1
        assert outcome.code == "PARTIAL_OPEN" and not outcome.success, outcome
        assert outcome.measurements["second_pull"] == 0.0
        assert 0.15 <= outcome.measurements["path_fraction"] < 0.8
        assert 0.2 < sim.fixture_opening(CABINET) < 0.6


def test_a_second_pull_that_cannot_move_it_leaves_the_first_outcome(
        tidybot_dir: Path, first_pull_stops_half_way: dict[str, int]) -> None:
    """When the second pull gets no further (here the arm refuses it too), the first pull's
    PARTIAL_OPEN stands: a door that moved is no lock, whatever the second pull reported."""
    first_pull_stops_half_way["every_pull"] = 1
    with opened_cabinet(tidybot_dir) as (sim, outcome):
        assert first_pull_stops_half_way["opens"] == 2
        assert outcome.code == "PARTIAL_OPEN" and not outcome.success, outcome
        assert outcome.measurements["second_pull"] == 1.0
        assert outcome.measurements["second_pull_fraction"] < 0.15
        assert 0.15 <= outcome.measurements["path_fraction"] < 0.8
        assert 0.2 < sim.fixture_opening(CABINET) < 0.6
