"""Finding a fiducial at start-up: turn the base in place until the localiser has a fix.

The robot localises from tags it sees (:mod:`mimir_perception.fiducials`). A robot that starts
where no tag is in view has no map pose, so nothing it sees can be placed in memory. The search
turns the base in place through a list of headings (radians from the heading it started at),
stands still at each long enough for the localiser to take a fix, and stops at the first
heading where it has one. It then turns back to the starting heading, so what the robot looks
at first is what the operator (or a trial's protocol) put in front of it; the localiser holds
its fix while the base turns back.

The search knows nothing of ROS: the caller says how to wait for a fix
(``wait_for_fix(seconds) -> bool``, which blocks up to that long on its own clock).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mimir_robot.executor import Executor


class TagSearchError(ValueError):
    """The search's settings are unusable (no heading, a turn over half a revolution)."""


@dataclass(frozen=True)
class TagSearch:
    """How one search went.

    Attributes:
        found: whether the localiser had a fix before the search ended.
        turn: the heading (rad from the start) at which it had one; None when it had one
            without turning, or never.
        headings_tried: how many headings the base stood at, the starting one included.
        back_at_start: whether the base reached its starting heading again (True when it did
            not turn at all).
    """

    found: bool
    turn: float | None
    headings_tried: int
    back_at_start: bool

    def describe(self) -> str:
        """One line for the log."""
        if self.found and self.turn is None:
            return "localised where it started"
        if self.found:
            back = "" if self.back_at_start else "; did not get back to its starting heading"
            return (f"localised after turning {self.turn:+.2f} rad "
                    f"({self.headings_tried} headings){back}")
        return (f"no tag seen from {self.headings_tried} headings; memory stays empty until "
                "the robot sees one (turn it towards a tag or reset it where one is in view)")


def search_for_tags(executor: Executor, turns: Sequence[float],
                    wait_for_fix: Callable[[float], bool], dwell_s: float) -> TagSearch:
    """Stand, then turn through ``turns`` until ``wait_for_fix(dwell_s)`` says the localiser
    has a fix; turn back to the starting heading when the base turned.

    Raises:
        TagSearchError: ``turns`` is empty or holds a turn over pi, or ``dwell_s`` is not
            positive.
    """
    if not turns:
        raise TagSearchError("tag search: no heading to turn to")
    if any(not abs(t) <= math.pi for t in turns):
        raise TagSearchError(f"tag search: every turn must lie within half a revolution, "
                             f"got {list(turns)}")
    if not dwell_s > 0.0:
        raise TagSearchError(f"tag search: dwell_s {dwell_s} must be positive")
    if wait_for_fix(dwell_s):
        return TagSearch(True, None, 1, True)
    x, y, heading = executor.motion.base()
    found_at: float | None = None
    tried = 1
    for turn in turns:
        tried += 1
        if not executor.move_to((x, y, heading + turn)).success:
            continue  # a heading the base cannot hold: the next one may do
        if wait_for_fix(dwell_s):
            found_at = turn
            break
    back = executor.move_to((x, y, heading)).success
    return TagSearch(found_at is not None, found_at, tried, back)
