"""Embodiment-independent primitives, their preconditions, and the adapter to legal actions.

The planner speaks in six abstract primitives (``move_to``, ``open``, ``close``, ``inspect``,
``pick``, ``place``). :class:`EmbodimentAdapter` maps each to the legal action of one embodiment
(rho_e in mimir.md eq. 11); :class:`PrimitiveRegistry` refuses a step, with a reason the planner
can read, when it names an unregistered primitive or a target absent from memory, or breaks a
precondition: the robot interacts only with what it last moved to, pick needs a free hand,
place needs a held object, and a fixture remembered as locked or not openable is not opened.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mimir_memory.graph import SceneGraphState, SceneNode
from mimir_planner.config import ABSTRACT_PRIMITIVES, PlannerConfig
from mimir_planner.errors import ActionRefusedError, PlannerConfigError

INTERACTIONS = ("open", "close", "inspect", "pick", "place")


def _key(name: str) -> str:
    return name.strip().lower().replace("-", "_").replace(" ", "_")


@dataclass(frozen=True)
class PlanStep:
    """One step of a planner answer (messymem.md B.3 schema)."""

    step: int
    action: str
    target_object: str | None
    reasoning: str
    pointing_description: str | None = None
    grounded_by_keyframe_idx: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form with optional fields left out when unset."""
        out: dict[str, Any] = {
            "step": self.step,
            "action": self.action,
            "target_object": self.target_object,
        }
        if self.pointing_description is not None:
            out["pointing_description"] = self.pointing_description
        if self.grounded_by_keyframe_idx is not None:
            out["grounded_by_keyframe_idx"] = self.grounded_by_keyframe_idx
        out["reasoning"] = self.reasoning
        return out


@dataclass(frozen=True)
class RobotContext:
    """What the preconditions and exploration read about the robot.

    Attributes:
        last_moved_to: Node the robot last moved to (where it stands, as far as the task knows).
        holding: Node of the held object.
        position: Where the robot is in the map (x, y, m), from its own localisation (the
            planner camera's pose); None when unknown. It can differ from ``last_moved_to``:
            someone may have moved the robot since.
    """

    last_moved_to: str | None = None
    holding: str | None = None
    position: tuple[float, float] | None = None


@dataclass(frozen=True)
class ExecutableStep:
    """A validated step in the embodiment's legal action space (a_t).

    Attributes:
        primitive: Abstract primitive.
        action: Legal action name of the embodiment.
        target: Scene graph node id.
        embodiment: Embodiment name.
        goal_id: Goal the step serves (None for exploration of no goal).
        reasoning: The planner's reasoning for the step.
        pointing_description: Where on the target to engage (pointing primitives).
        keyframe_ids: Keyframes that grounded the target.
        step_id: Sequence number of the step within the session.
    """

    primitive: str
    action: str
    target: str
    embodiment: str
    goal_id: str | None = None
    reasoning: str = ""
    pointing_description: str | None = None
    keyframe_ids: tuple[str, ...] = ()
    step_id: int = 0

    def describe(self) -> str:
        """One line for logs, the operator and the history."""
        return f"{self.primitive}({self.target}) as {self.embodiment}:{self.action}"


class EmbodimentAdapter:
    """rho_e: abstract primitive -> legal action of one embodiment."""

    def __init__(
        self,
        name: str,
        table: Mapping[str, str],
        aliases: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        missing = sorted(set(ABSTRACT_PRIMITIVES) - set(table))
        if missing:
            raise PlannerConfigError(f"embodiment {name!r} lacks primitives {missing}")
        self.name = name
        self.table = dict(table)
        self._names: dict[str, str] = {}
        for prim in ABSTRACT_PRIMITIVES:
            self._names[_key(prim)] = prim
        for prim, legal in self.table.items():
            self._names.setdefault(_key(legal), prim)
        for prim, names in (aliases or {}).items():
            for alias in names:
                self._names.setdefault(_key(alias), prim)

    def canonical(self, action: str) -> str | None:
        """Abstract primitive named by ``action`` (abstract, alias or legal name), or None."""
        if not isinstance(action, str):
            return None
        return self._names.get(_key(action))

    def legal(self, primitive: str) -> str:
        """Legal action of the embodiment for an abstract primitive.

        Raises:
            ActionRefusedError: The primitive is not registered.
        """
        if primitive not in self.table:
            raise ActionRefusedError(f"primitive {primitive!r} is not registered")
        return self.table[primitive]


@dataclass
class PrimitiveRegistry:
    """Registered primitives of one embodiment and their preconditions."""

    config: PlannerConfig
    embodiment: str = ""
    adapter: EmbodimentAdapter = field(init=False)

    def __post_init__(self) -> None:
        name = self.embodiment or self.config.loop.embodiment
        if name not in self.config.embodiments:
            raise PlannerConfigError(
                f"unknown embodiment {name!r}; known: {sorted(self.config.embodiments)}"
            )
        self.embodiment = name
        self.adapter = EmbodimentAdapter(
            name, self.config.embodiments[name], self.config.aliases
        )

    def describe(self) -> str:
        """The primitive list shown to the planner (name: description)."""
        lines = []
        for prim in ABSTRACT_PRIMITIVES:
            text = self.config.primitive_descriptions.get(prim, "")
            lines.append(f"- {prim}: {text}".rstrip(": "))
        return "\n".join(lines)

    def is_fixture(self, node: SceneNode) -> bool:
        """Whether a node is a fixture (by label, or by a known openable property)."""
        openable = node.properties.get("openable")
        return self.config.is_fixture_label(node.label) or (
            openable is not None and openable.value is True
        )

    def validate(
        self,
        step: PlanStep,
        world: SceneGraphState,
        robot: RobotContext,
        *,
        goal_id: str | None = None,
        keyframe_ids: Sequence[str] = (),
        step_id: int = 0,
    ) -> ExecutableStep:
        """Map a plan step to a legal action, checking it against memory and preconditions.

        Raises:
            ActionRefusedError: With the reason, when the step cannot be executed.
        """
        primitive = self.adapter.canonical(step.action)
        if primitive is None:
            raise ActionRefusedError(
                f"'{step.action}' is not a registered primitive; use one of "
                f"{', '.join(ABSTRACT_PRIMITIVES)}"
            )
        target = step.target_object
        if not isinstance(target, str) or not target.strip():
            raise ActionRefusedError(f"{primitive} needs a target_object from the scene graph")
        node = world.nodes.get(target)
        if node is None:
            raise ActionRefusedError(f"target '{target}' is not in the scene graph")
        if primitive in INTERACTIONS:
            self._check_reach(primitive, node, world, robot)
        if primitive in ("open", "close"):
            self._check_openable(primitive, node)
        if primitive == "inspect" and not self.is_fixture(node):
            raise ActionRefusedError(f"inspect needs a fixture, '{target}' is a {node.label}")
        if primitive == "pick":
            if robot.holding is not None:
                raise ActionRefusedError(
                    f"pick needs a free hand, the robot holds '{robot.holding}'"
                )
            if self.is_fixture(node):
                raise ActionRefusedError(f"'{target}' is a fixture and cannot be picked")
            pickable = node.properties.get("pickable")
            if pickable is not None and pickable.value is False:
                raise ActionRefusedError(f"'{target}' is remembered as not pickable")
        if primitive == "place":
            if robot.holding is None:
                raise ActionRefusedError("place needs a held object, the hand is empty")
            if target == robot.holding:
                raise ActionRefusedError("cannot place an object onto itself")
        return ExecutableStep(
            primitive=primitive,
            action=self.adapter.legal(primitive),
            target=target,
            embodiment=self.embodiment,
            goal_id=goal_id,
            reasoning=step.reasoning,
            pointing_description=step.pointing_description,
            keyframe_ids=tuple(keyframe_ids),
            step_id=step_id,
        )

    @staticmethod
    def _check_reach(
        primitive: str, node: SceneNode, world: SceneGraphState, robot: RobotContext
    ) -> None:
        last = robot.last_moved_to
        if last is None:
            raise ActionRefusedError(
                f"{primitive} needs a move_to first: the robot has not moved to anything yet"
            )
        if node.node_id == last:
            return
        if primitive in ("pick", "place") and last in world.ancestors(node.node_id):
            return
        raise ActionRefusedError(
            f"the robot can only {primitive} what it last moved to ('{last}'); "
            f"move_to '{node.node_id}' first"
        )

    def _check_openable(self, primitive: str, node: SceneNode) -> None:
        openable = node.properties.get("openable")
        value = openable.value if openable is not None else None
        if value is False:
            raise ActionRefusedError(f"'{node.node_id}' is remembered as not openable")
        if value is not True and not self.config.is_openable_label(node.label):
            raise ActionRefusedError(f"'{node.node_id}' ({node.label}) is not a fixture that opens")
        locked = node.properties.get("locked")
        if primitive == "open" and locked is not None and locked.value is True:
            why = f": {locked.reasoning}" if locked.reasoning else ""
            raise ActionRefusedError(f"'{node.node_id}' is remembered as locked{why}")
