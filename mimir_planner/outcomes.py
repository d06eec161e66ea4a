"""What an executed step means for the planner: its verdict and its effects on task memory.

An executor (the ROS action client in the robot stack) learns two things about a primitive: what
the robot reported (success, an outcome code) and, for the primitives the interaction analyzer
judges, whether the analyzer could confirm it. :func:`judge` combines the two into the success
task memory may rely on, with a detail text for the history; :func:`step_outcome` turns that into
the :class:`~mimir_planner.planner.ExecutionOutcome` the planning loop consumes, carrying
:func:`step_effects`, the change a successful step makes to task memory (mimir.md Delta_t).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mimir_memory.graph import SceneGraphState, SceneNode
from mimir_memory.task import Effect, EffectKind, Feedback
from mimir_planner.config import PlannerConfig
from mimir_planner.primitives import ExecutableStep
from mimir_planner.runs import ExecutionOutcome, Observation

Opens = Callable[[SceneNode], bool]
"""Whether a scene node is a fixture that opens (so that an object placed on it goes inside)."""


def fixture_opens(node: SceneNode, config: PlannerConfig) -> bool:
    """Whether a node opens: memory's ``openable`` when it is known, else the label's kind."""
    openable = node.properties.get("openable")
    if openable is not None and isinstance(openable.value, bool):
        return openable.value
    return config.is_openable_label(node.label)


def place_relation(world: SceneGraphState, obj: str, target: str, opens: Opens) -> str:
    """Relation of a placed object to its destination: memory's, else by the destination kind.

    Memory's relation counts when it already names the destination as the object's parent with
    ``container`` or ``surface``; otherwise a destination that opens holds the object inside
    (``container``) and anything else carries it (``surface``).
    """
    node = world.nodes.get(obj)
    if node is not None and node.parent == target and node.parent_relation in (
            "container", "surface"):
        return str(node.parent_relation)
    dest = world.nodes.get(target)
    return "container" if dest is not None and opens(dest) else "surface"


def step_effects(step: ExecutableStep, world: SceneGraphState, holding: str | None,
                 opens: Opens) -> tuple[Effect, ...]:
    """The effects task memory records for a step that succeeded.

    ``move_to`` arrives at its target, ``open``/``close`` set the target's ``is_open``, ``pick``
    grasps the target, ``place`` puts the held object on or into the target (nothing when the
    hand is empty); ``inspect`` and any other primitive change nothing task memory tracks (what
    an inspection reveals reaches world memory through the analyzer).
    """
    target = step.target
    if step.primitive == "move_to":
        return (Effect(EffectKind.ARRIVE, target),)
    if step.primitive in ("open", "close"):
        return (Effect(EffectKind.STATE, target, target="is_open",
                       value=step.primitive == "open"),)
    if step.primitive == "pick":
        return (Effect(EffectKind.GRASP, target),)
    if step.primitive == "place" and holding is not None:
        relation = place_relation(world, holding, target, opens)
        return (Effect(EffectKind.PLACE, holding, target=target, value=relation),)
    return ()


@dataclass(frozen=True)
class Verification:
    """What the analyzer said about one interaction.

    Attributes:
        verified: False when the analyzer could not judge it (down, timed out, failed).
        success: The analyzer's verdict on the step (meaningful when verified).
        reason: Its failure reason, or why there is no verdict.
        keyframe_ids: Keyframes the analysis stored.
    """

    verified: bool
    success: bool = False
    reason: str = ""
    keyframe_ids: tuple[str, ...] = ()


def judge(said: bool, reported: str, verdict: Verification, *,
          require_verification: bool) -> tuple[bool, str]:
    """The success memory may rely on, and the history's detail, for an analysed step.

    Args:
        said: The executor's own success report.
        reported: The executor's outcome text (code and message).
        verdict: The analyzer's answer.
        require_verification: Whether a step the analyzer could not judge counts as failed
            (otherwise the executor's word stands).
    """
    if not verdict.verified:
        trusted = said and not require_verification
        return trusted, f"{reported}; not verified: {verdict.reason}"
    if said and verdict.success:
        return True, f"{reported}; verified by the analyzer"
    if said:
        return False, f"{reported}; the analyzer found it failed: {verdict.reason}"
    return False, f"{reported}; analyzer: {verdict.reason or 'failure confirmed'}"


def step_outcome(step: ExecutableStep, success: bool, detail: str, stamp: float | None, *,
                 world: SceneGraphState, holding: str | None, opens: Opens,
                 observation: Observation | None = None, code: str = "",
                 reported: bool | None = None) -> ExecutionOutcome:
    """The outcome the planning loop consumes, with the effects of a successful step.

    ``reported`` is the executor's own word; None (it gave none) is passed on as False. A place
    the executor reported done that failed all the same (the analyzer saw the thing fall) still
    opened the jaws: its only effect is the release, so task memory does not go on believing
    the hand holds the thing.
    """
    if success:
        effects = step_effects(step, world, holding, opens)
    elif step.primitive == "place" and reported and holding is not None:
        effects = (Effect(EffectKind.RELEASE, holding),)
    else:
        effects = ()
    return ExecutionOutcome(Feedback(success, effects), detail, stamp, observation, code=code,
                            reported=False if reported is None else reported)
