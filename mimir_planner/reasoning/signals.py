"""Words for the robot signals behind a verdict: gripper, end effector, depth.

A verdict's reason names the signals that decided it and their values, so that an operator
reading memory's provenance can check the decision against the robot's own recordings.
"""

from __future__ import annotations

from mimir_planner.reasoning.config import PerceptConfig
from mimir_planner.reasoning.evidence import Evidence
from mimir_planner.reasoning.percepts import contact_summary


def gripper_words(ev: Evidence, cfg: PerceptConfig) -> str:
    """The gripper's part: whether and how long the jaws closed on something."""
    summary = contact_summary(ev.gripper, cfg)
    if summary is None:
        return "gripper: no readings"
    if not summary.contact:
        return (f"gripper: never closed on anything in {len(ev.gripper)} readings "
                f"({summary.end_opening_m:.3f} m apart at the end)")
    return (f"gripper: closed on something in {summary.engaged_samples} of "
            f"{len(ev.gripper)} readings ({summary.end_opening_m:.3f} m apart at the end)")


def hand_words(ev: Evidence) -> str:
    """The end effector's part: how far it followed the commanded pull."""
    pull = ev.pull
    if pull is None:
        return "end effector: no held pull recorded"
    return (f"end effector: moved {pull.achieved_m:.3f} m of {pull.commanded_m:.3f} m commanded "
            f"while holding (held back {pull.held_back_m:.3f} m)")


def depth_words(fixture_id: str, ev: Evidence) -> str:
    """The depth part: how much the fixture's image region changed."""
    change = ev.depth_changes.get(fixture_id)
    if change is None:
        why = ev.depth_unmeasured.get(fixture_id)
        return "depth: region not measured" + (f" ({why})" if why else "")
    return f"depth: the region of '{fixture_id}' changed {change.magnitude:.3f} m"


def signals_text(fixture_id: str, ev: Evidence, cfg: PerceptConfig) -> str:
    """All three, joined: what the gripper, the end effector and depth showed."""
    return "; ".join((gripper_words(ev, cfg), hand_words(ev), depth_words(fixture_id, ev)))
