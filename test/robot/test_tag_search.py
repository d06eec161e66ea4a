"""The start-up search for a fiducial: the base turns in place until the localiser has a fix.

The localiser is played by a rule on the fake base's heading (a tag is in view only within some
headings), the way a wall tag beside the robot comes into the pole camera's view as it turns.
"""

from __future__ import annotations

import math

import pytest
from test_executor import make

from mimir.nodes.robot.executor_params import ExecutorNodeConfig
from mimir_robot.profile import ProfileError
from mimir_robot.tag_search import TagSearchError, search_for_tags

TURNS = (0.7, -0.7, 1.4, -1.4)  # any headings do


def seen_within(robot, low: float, high: float, waits: list[float]):
    """``wait_for_fix``: a fix while the base's heading lies in [low, high]."""
    def wait_for_fix(seconds: float) -> bool:
        waits.append(seconds)
        return low <= robot.base_state().theta <= high
    return wait_for_fix


def test_a_tag_in_view_at_the_start_needs_no_turn() -> None:
    ex, robot, _, samples = make()
    waits: list[float] = []
    result = search_for_tags(ex, TURNS, seen_within(robot, -0.1, 0.1, waits), dwell_s=3.0)
    assert result.found and result.turn is None and result.headings_tried == 1
    assert waits == [3.0]
    assert not [s for s in samples if s.part == "base"]  # the base never moved
    assert "where it started" in result.describe()


def test_the_base_turns_until_a_tag_is_seen_then_turns_back() -> None:
    ex, robot, _, _ = make()
    waits: list[float] = []
    # a tag to the robot's right comes into view beyond a right turn of about a radian
    result = search_for_tags(ex, TURNS, seen_within(robot, -2.0, -1.0, waits), dwell_s=2.0)
    assert result.found and result.turn == pytest.approx(-1.4)
    assert result.headings_tried == 5 and len(waits) == 5  # the start and four turns
    assert result.back_at_start
    s = robot.base_state()
    assert abs(s.theta) < 0.07 and math.hypot(s.x, s.y) < 0.05  # in place, facing as before
    assert "-1.40 rad" in result.describe()


def test_no_tag_from_any_heading_is_reported_and_the_base_turns_back() -> None:
    ex, robot, _, _ = make()
    waits: list[float] = []
    result = search_for_tags(ex, TURNS, seen_within(robot, 3.0, 4.0, waits), dwell_s=1.0)
    assert not result.found and result.turn is None
    assert result.headings_tried == 5 and result.back_at_start
    assert abs(robot.base_state().theta) < 0.07
    assert "no tag seen from 5 headings" in result.describe()


@pytest.mark.parametrize(("turns", "dwell", "why"), [
    ((), 3.0, "no heading"),
    ((0.5, 4.0), 3.0, "half a revolution"),
    ((0.5, float("nan")), 3.0, "half a revolution"),
    ((0.5,), 0.0, "dwell_s"),
    ((0.5,), float("nan"), "dwell_s"),
])
def test_bad_settings_are_refused_before_anything_moves(turns, dwell, why) -> None:
    ex, _, _, samples = make()
    with pytest.raises(TagSearchError, match=why):
        search_for_tags(ex, turns, lambda _s: False, dwell_s=dwell)
    assert not samples


@pytest.mark.parametrize(("change", "why"), [
    ({"tag_search_turns": ()}, "tag_search_turns"),
    ({"tag_search_turns": (0.7, -3.5)}, "tag_search_turns"),
    ({"tag_search_dwell_s": 0.0}, "tag_search_dwell_s"),
])
def test_the_executor_parameters_refuse_a_bad_search(change, why) -> None:
    with pytest.raises(ProfileError, match=why):
        ExecutorNodeConfig(authkey="k", **change)
    assert ExecutorNodeConfig(authkey="k").search_tags_on_start is False  # opt-in on the robot
