"""Kitchen simulation with primitive controllers that act through the robot's actuators.

The base follows interpolated set-points of its position actuators; the arm follows joint
set-points from damped least-squares IK on ``pinch_site``; the gripper closes through its tendon
actuator. Door and drawer outcomes are measured from the joints after the physics ran: a locked
fixture has a joint range of a few milli-units, so a pull produces contact force and actuator
effort but no motion. Picking uses an assist weld that engages only after both fingers touch the
object (see :class:`SimConfig.pick_assist`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import mujoco
import numpy as np
import numpy.typing as npt

from mimir_sim.config import SimConfig
from mimir_sim.errors import (
    PrimitiveError,
    StepListenerError,
    UnknownEntityError,
    UnreachablePoseError,
)
from mimir_sim.ik import solve_site_ik
from mimir_sim.render import CAMERAS, Frame, SceneRenderer
from mimir_sim.scenario import CategorySpec, Scenario
from mimir_sim.scene import (
    DOOR_T,
    FixtureLayout,
    KitchenScene,
    build_scene,
    start_pose_for,
)

LOG = logging.getLogger(__name__)
FloatArray = npt.NDArray[np.float64]

ARM_JOINTS = tuple(f"joint_{i}" for i in range(1, 8))
BASE_JOINTS = ("joint_x", "joint_y", "joint_th")
HOME_ARM = (0.0, -0.34906585, 3.14159265, -2.54818071, 0.0, -0.87266463, 1.57079633)
READY_ARM = (0.0, 0.6, 3.14159265, -1.6, 0.0, -0.9, 1.57079633)
ROBOT_RADIUS = 0.33  # circle that contains the base footprint (m)
GRIPPER_OPEN, GRIPPER_CLOSED = 0.0, 255.0
PAD_THICKNESS = 0.008  # both pad half-thicknesses together (m)
GRIP_DEPTH = 0.022  # pad centres lie this far ahead of pinch_site when closing on a bar (m)


@dataclass(frozen=True)
class FingerContact:
    """A contact of one finger with something in the scene."""

    finger: str  # left | right
    entity: str | None
    geom: str
    force: float  # magnitude of the contact force (N)


@dataclass(frozen=True)
class RobotState:
    """Robot state at one simulation time."""

    stamp: float
    base_pose: tuple[float, float, float]
    arm_q: tuple[float, ...]
    arm_effort: tuple[float, ...]  # actuator forces (N m)
    gripper_opening: float  # distance between pad surfaces (m)
    finger_contacts: tuple[FingerContact, ...]
    holding: str | None

    def touching(self, entity: str) -> set[str]:
        """Fingers that touch ``entity``."""
        return {c.finger for c in self.finger_contacts if c.entity == entity}


@dataclass(frozen=True)
class Sample:
    """One sample of a primitive window."""

    stamp: float
    state: RobotState
    fixture_opening: dict[str, float]
    frames: dict[str, Frame] = field(default_factory=dict)


@dataclass
class PrimitiveRecord:
    """What a primitive did: arguments, outcome measured from the physics, recorded window."""

    name: str
    target: str
    start: float
    end: float = 0.0
    success: bool = False
    outcome: str = ""
    measurements: dict[str, float] = field(default_factory=dict)
    samples: list[Sample] = field(default_factory=list)
    frames: list[Frame] = field(default_factory=list)  # inspect views
    instruction: int | None = None


@dataclass(frozen=True)
class MoveResult:
    """Outcome of a base motion."""

    reached: bool
    target: tuple[float, float, float]
    final: tuple[float, float, float]
    position_error: float
    yaw_error: float


@dataclass(frozen=True)
class EntityState:
    """Where a fixture, fixture part or object is now (world frame = ``map``, metres).

    Attributes:
        id: stable entity id (``cab_1``, ``cab_1_door``, ``ketchup_1``).
        kind: ``fixture``, ``door``, ``drawer``, ``handle`` or ``object``.
        label: human label (``upper cabinet``, ``ketchup bottle``).
        category: object category (``ketchup``) or fixture type (``upper_cabinet``).
        fixture: owning fixture of a part; for an object the fixture that contains it now
            (``None`` while it is held or lies elsewhere).
        position: object body origin; box centre for fixtures and parts.
        box_low: lower corner of the axis-aligned box around the entity's geoms.
        box_high: upper corner of that box. A fixture's box covers its carcass (or counter
            block) only; its door, drawer and handle are entities of their own.
    """

    id: str
    kind: str
    label: str
    category: str
    fixture: str | None
    position: tuple[float, float, float]
    box_low: tuple[float, float, float]
    box_high: tuple[float, float, float]

    def distance_to(self, point: Sequence[float] | FloatArray) -> float:
        """Euclidean distance from ``point`` to the box (0 inside it)."""
        p = np.asarray(point, dtype=np.float64)
        gap = np.maximum(np.maximum(np.asarray(self.box_low) - p, 0.0), p - self.box_high)
        return float(np.linalg.norm(gap))


BOXED_KINDS = ("fixture", "door", "drawer", "handle", "object")


@dataclass
class _StepListener:
    callback: Callable[[float], None]
    period: float
    last: float


def _wrap(angle: float) -> float:
    return (angle + math.pi) % (2 * math.pi) - math.pi


def _rot_z(angle: float) -> FloatArray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _slerp_matrix(q0: FloatArray, q1: FloatArray, s: float) -> FloatArray:
    """Rotation matrix between two unit quaternions at fraction ``s``."""
    a, b = np.array(q0, dtype=np.float64), np.array(q1, dtype=np.float64)
    dot = float(a @ b)
    if dot < 0.0:
        b, dot = -b, -dot
    if dot > 0.9995:
        q = a + s * (b - a)
    else:
        theta = math.acos(min(1.0, dot))
        q = (math.sin((1 - s) * theta) * a + math.sin(s * theta) * b) / math.sin(theta)
    q /= np.linalg.norm(q)
    mat = np.zeros(9)
    mujoco.mju_quat2Mat(mat, q)
    return mat.reshape(3, 3)


def _half_height(cat: CategorySpec) -> float:
    """Half of an object's standing height as the scene builder places it (m)."""
    if cat.shape in ("sphere", "capsule"):
        return cat.size[0]
    return cat.size[-1] if cat.shape in ("box", "ellipsoid") else cat.size[1]


def _grip_rotation(approach: FloatArray, finger_axis: FloatArray) -> FloatArray:
    """Site rotation whose z is the approach direction and x the finger closing axis."""
    z = approach / np.linalg.norm(approach)
    x = finger_axis - z * float(finger_axis @ z)
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    return np.column_stack([x, y, z])


class KitchenSim:
    """A kitchen scenario running in MuJoCo with the TidyBot++ and its primitives.

    Args:
        scene: compiled scene from :func:`mimir_sim.scene.build_scene`.
        config: controller and recording settings.
    """

    def __init__(self, scene: KitchenScene, config: SimConfig | None = None) -> None:
        self.scene = scene
        self.config = config or SimConfig()
        self.model = scene.model
        self.data = mujoco.MjData(self.model)
        self.log: list[PrimitiveRecord] = []
        self.instruction: int | None = None
        self._rng = np.random.default_rng(self.config.seed)
        m = self.model
        self._base_act = [m.actuator(n).id for n in BASE_JOINTS]
        self._arm_act = [m.actuator(n).id for n in ARM_JOINTS]
        self._grip_act = m.actuator("fingers_actuator").id
        self._base_qadr = np.array([m.joint(n).qposadr[0] for n in BASE_JOINTS])
        self._arm_qadr = np.array([m.joint(n).qposadr[0] for n in ARM_JOINTS])
        self._arm_dadr = np.array([m.joint(n).dofadr[0] for n in ARM_JOINTS])
        self._site = m.site("pinch_site").id
        self._gripper_body = m.body("base").id
        self._pads = {
            "left": (m.body("left_pad").id, m.body("left_follower").id),
            "right": (m.body("right_pad").id, m.body("right_follower").id),
        }
        self._pad_geoms = (m.geom("left_pad1").id, m.geom("right_pad1").id)
        self._finger_of_body: dict[int, str] = {}
        for finger, bodies in self._pads.items():
            for b in bodies:
                self._finger_of_body[b] = finger
        self._weld: dict[str, int] = {}
        for oid in scene.objects:
            eq = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_EQUALITY, f"grasp_{oid}")
            if eq >= 0:
                self._weld[oid] = eq
        self._handle_eq: dict[str, int] = {}
        for fid in scene.fixtures:
            eq = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_EQUALITY, f"grip_{fid}")
            if eq >= 0:
                self._handle_eq[fid] = eq
        # the Gen3 compensates gravity internally; model that on the arm and gripper bodies
        base_link = m.body("base_link").id
        for b in range(m.nbody):
            if m.body_rootid[b] == base_link and b != base_link:
                m.body_gravcomp[b] = 1.0
        self._scratch = mujoco.MjData(m)
        self.holding: str | None = None
        self._renderers: dict[tuple[int, int], SceneRenderer] = {}
        self._record: PrimitiveRecord | None = None
        self._next_sample = 0.0
        self._next_frame = 0.0
        self.max_opening: dict[str, float] = {}
        self._listeners: dict[int, _StepListener] = {}
        self._next_listener_handle = 1
        self._listener_due = math.inf
        self._in_listener = False
        self._listener_eps = 0.5 * float(m.opt.timestep)
        entity_geoms: dict[str, list[int]] = {}
        for g, eid in enumerate(scene.geom_entity):
            if eid is not None and scene.entities[eid].kind in BOXED_KINDS:
                entity_geoms.setdefault(eid, []).append(g)
        self._entity_geoms = {e: np.array(g, dtype=np.int64) for e, g in entity_geoms.items()}
        self.reset()

    # ------------------------------------------------------------------ construction helpers

    @classmethod
    def from_scenario(
        cls,
        scenario: Scenario,
        tidybot_dir: Path | None = None,
        seed: int | None = None,
        config: SimConfig | None = None,
    ) -> KitchenSim:
        """Build the scene of a scenario and wrap it in a simulator."""
        return cls(build_scene(scenario, tidybot_dir, seed), config)

    def shutdown(self) -> None:
        """Release renderers."""
        for renderer in self._renderers.values():
            renderer.close()
        self._renderers.clear()

    # ------------------------------------------------------------------ state

    @property
    def time(self) -> float:
        """Simulation time (s)."""
        return float(self.data.time)

    def reset(self, start: str | tuple[float, float, float] | None = None) -> None:
        """Reset physics to the initial layout with the robot at ``start`` (fixture id or pose).

        Simulation time restarts at 0; step listeners stay registered and count their periods
        from 0 again (they are called while the objects settle).
        """
        if self._in_listener:
            raise StepListenerError("a step listener must not reset the simulation")
        mujoco.mj_resetData(self.model, self.data)
        for listener in self._listeners.values():
            listener.last = 0.0
        self._refresh_listener_due()
        for eq in [*self._weld.values(), *self._handle_eq.values()]:
            self.data.eq_active[eq] = 0
        self.holding = None
        pose = (0.0, 0.0, 0.0)
        if start is None:
            start = self.scene.scenario.start_at
        if isinstance(start, str):
            pose = start_pose_for(self._fixture(start))
        elif start is not None:
            pose = (float(start[0]), float(start[1]), float(start[2]))
        self.data.qpos[self._base_qadr] = pose
        self.data.qpos[self._arm_qadr] = HOME_ARM
        self.data.ctrl[self._base_act] = pose
        self.data.ctrl[self._arm_act] = HOME_ARM
        self.data.ctrl[self._grip_act] = GRIPPER_OPEN
        mujoco.mj_forward(self.model, self.data)
        self.max_opening = {fid: 0.0 for fid, f in self.scene.fixtures.items() if f.is_openable}
        # let objects settle on their shelves
        self.step(int(0.3 / self.model.opt.timestep))

    def step(self, n: int = 1) -> None:
        """Advance the physics ``n`` steps, sampling into the active primitive window.

        Every stepping path (``step_seconds``, ``reset`` and all primitive controllers) goes
        through here, so step listeners run after each physics step whose time is due.

        Raises:
            StepListenerError: called from inside a step listener, or a listener changed the
                controls.
        """
        if self._in_listener:
            raise StepListenerError("a step listener must not step the simulation")
        for _ in range(n):
            mujoco.mj_step(self.model, self.data)
            if self._record is not None:
                self._maybe_sample()
            if self.data.time + self._listener_eps >= self._listener_due:
                self._call_listeners()
        for fid in self.max_opening:
            self.max_opening[fid] = max(self.max_opening[fid], self.fixture_opening(fid))

    def step_seconds(self, seconds: float) -> None:
        """Advance the physics by ``seconds`` of simulated time."""
        self.step(max(1, round(seconds / self.model.opt.timestep)))

    # ------------------------------------------------------------------ step listeners

    def add_step_listener(self, callback: Callable[[float], None], period_s: float) -> int:
        """Call ``callback(sim_time)`` after physics steps, at most once per ``period_s``.

        The listener is first called once ``period_s`` of simulation time has passed since
        registration, then each time another ``period_s`` has passed since its last call
        (0 means after every step). It may read state and render (``sim.render``) but must not
        step, reset or change controls. Exceptions raised by the callback propagate to the
        caller of the stepping method.

        Returns:
            A handle for :meth:`remove_step_listener`.

        Raises:
            StepListenerError: ``callback`` is not callable or ``period_s`` is negative or not
                finite.
        """
        if not callable(callback):
            raise StepListenerError(f"step listener must be callable, got {callback!r}")
        if (
            isinstance(period_s, bool)
            or not isinstance(period_s, int | float)
            or not math.isfinite(period_s)
            or period_s < 0.0
        ):
            raise StepListenerError(
                f"step listener period must be a finite number >= 0 s, got {period_s!r}"
            )
        handle = self._next_listener_handle
        self._next_listener_handle += 1
        self._listeners[handle] = _StepListener(callback, float(period_s), self.time)
        self._refresh_listener_due()
        return handle

    def remove_step_listener(self, handle: int) -> None:
        """Stop calling a listener (also allowed from inside a listener).

        Raises:
            StepListenerError: no listener has this handle.
        """
        if handle not in self._listeners:
            raise StepListenerError(f"no step listener with handle {handle!r}")
        del self._listeners[handle]
        self._refresh_listener_due()

    @property
    def step_listener_count(self) -> int:
        """Number of registered step listeners."""
        return len(self._listeners)

    def _refresh_listener_due(self) -> None:
        self._listener_due = min(
            (lst.last + lst.period for lst in self._listeners.values()), default=math.inf
        )

    def _call_listeners(self) -> None:
        now = self.time
        ctrl = np.array(self.data.ctrl, dtype=np.float64)
        self._in_listener = True
        try:
            for handle, listener in list(self._listeners.items()):
                if handle not in self._listeners:
                    continue  # removed by a listener called before it
                if now + self._listener_eps >= listener.last + listener.period:
                    listener.last = now
                    listener.callback(now)
        finally:
            self._in_listener = False
            self._refresh_listener_due()
        if not np.array_equal(ctrl, self.data.ctrl):
            self.data.ctrl[:] = ctrl
            raise StepListenerError("a step listener changed the controls; they were restored")

    # ------------------------------------------------------------------ entities

    def entity_ids(self, kinds: Sequence[str] = ("fixture", "object")) -> list[str]:
        """Ids of the scene's entities of the given kinds, sorted."""
        return sorted(e for e, ent in self.scene.entities.items() if ent.kind in kinds)

    def entity_box(self, entity_id: str) -> tuple[FloatArray, FloatArray]:
        """Current world-frame axis-aligned box (low, high corners) around an entity's geoms.

        Raises:
            UnknownEntityError: not a fixture, fixture part or object of the scene.
        """
        geoms = self._entity_geoms.get(entity_id)
        if geoms is None:
            raise UnknownEntityError(
                f"unknown entity {entity_id!r} (boxes exist for {', '.join(BOXED_KINDS)})"
            )
        m, d = self.model, self.data
        rot = d.geom_xmat[geoms].reshape(-1, 3, 3)
        local = m.geom_aabb[geoms]
        centre = d.geom_xpos[geoms] + np.einsum("gij,gj->gi", rot, local[:, :3])
        half = np.einsum("gij,gj->gi", np.abs(rot), local[:, 3:])
        low = np.min(centre - half, axis=0)
        high = np.max(centre + half, axis=0)
        return np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)

    def entity_position(self, entity_id: str) -> FloatArray:
        """Object body origin, or the centre of a fixture's (or part's) current box."""
        if entity_id in self.scene.objects:
            return self.object_position(entity_id)
        low, high = self.entity_box(entity_id)
        return np.asarray((low + high) / 2.0, dtype=np.float64)

    def entity_state(self, entity_id: str) -> EntityState:
        """Label, kind and current position and box of a fixture, fixture part or object.

        Raises:
            UnknownEntityError: not a fixture, fixture part or object of the scene.
        """
        low, high = self.entity_box(entity_id)
        entity = self.scene.entities[entity_id]
        if entity.kind == "object":
            category = self.scene.objects[entity_id].category
            parent = self.object_fixture(entity_id)
            pos = self.object_position(entity_id)
        else:
            fid = entity.fixture or entity_id
            category = self.scene.fixtures[fid].type
            parent = entity.fixture
            pos = (low + high) / 2.0
        return EntityState(
            id=entity_id,
            kind=entity.kind,
            label=entity.label,
            category=category,
            fixture=parent,
            position=(float(pos[0]), float(pos[1]), float(pos[2])),
            box_low=(float(low[0]), float(low[1]), float(low[2])),
            box_high=(float(high[0]), float(high[1]), float(high[2])),
        )

    def entity_states(self, kinds: Sequence[str] = ("fixture", "object")) -> dict[str, EntityState]:
        """Current :class:`EntityState` of every entity of the given kinds."""
        bad = sorted(set(kinds) - set(BOXED_KINDS))
        if bad:
            raise UnknownEntityError(f"no entity kind {bad[0]!r}; known: {', '.join(BOXED_KINDS)}")
        return {e: self.entity_state(e) for e in self.entity_ids(kinds)}

    def nearest_entity(
        self,
        point: Sequence[float] | FloatArray,
        *,
        labels: Sequence[str] | None = None,
        kinds: Sequence[str] = ("fixture", "object"),
        max_distance: float = math.inf,
    ) -> EntityState | None:
        """The entity whose current box lies nearest to a world point.

        Args:
            point: (x, y, z) in the world (``map``) frame.
            labels: accepted labels or categories (``ketchup``, ``ketchup bottle``,
                ``upper_cabinet``); ``None`` accepts any.
            kinds: entity kinds to consider.
            max_distance: ignore entities farther than this from ``point`` (m).

        Returns:
            The nearest entity (ties broken by distance to its position), or ``None``.

        Raises:
            UnknownEntityError: ``point`` is not three finite numbers or a kind is unknown.
        """
        p = np.asarray(point, dtype=np.float64)
        if p.shape != (3,) or not np.all(np.isfinite(p)):
            raise UnknownEntityError(f"expected a finite (x, y, z) point, got {point!r}")
        accepted = None if labels is None else set(labels)
        best: tuple[float, float, EntityState] | None = None
        for state in self.entity_states(kinds).values():
            if accepted is not None and not ({state.label, state.category} & accepted):
                continue
            gap = state.distance_to(p)
            if gap > max_distance:
                continue
            key = (gap, float(np.linalg.norm(p - np.asarray(state.position))))
            if best is None or key < best[:2]:
                best = (key[0], key[1], state)
        return None if best is None else best[2]

    # ------------------------------------------------------------------ robot and fixture state

    def base_pose(self) -> tuple[float, float, float]:
        """(x, y, yaw) of the base in the world frame."""
        q = self.data.qpos[self._base_qadr]
        return (float(q[0]), float(q[1]), _wrap(float(q[2])))

    def fixture_opening(self, fixture_id: str) -> float:
        """Door angle (rad) or drawer displacement (m); 0 for fixtures that do not open."""
        fx = self._fixture(fixture_id)
        if fx.joint is None:
            return 0.0
        return float(self.data.qpos[self.model.joint(fx.joint).qposadr[0]])

    def is_open(self, fixture_id: str) -> bool:
        """Whether the door or drawer is open past the configured threshold."""
        fx = self._fixture(fixture_id)
        if fx.joint is None:
            return True
        thr = self.config.open_threshold_drawer if fx.is_drawer else self.config.open_threshold_door
        return self.fixture_opening(fixture_id) >= thr

    def object_position(self, object_id: str) -> FloatArray:
        """World position of an object's body."""
        if object_id not in self.scene.objects:
            raise UnknownEntityError(f"unknown object {object_id!r}")
        return np.array(self.data.xpos[self.model.body(object_id).id], dtype=np.float64)

    def object_fixture(self, object_id: str) -> str | None:
        """The fixture whose interior (or top, for counters) contains the object, if any."""
        pos = self.object_position(object_id)
        ordered = sorted(self.scene.fixtures.items(), key=lambda item: item[1].type == "counter")
        for fid, fx in ordered:
            lo = np.array(fx.interior_low) - np.array([0.0, 0.0, 0.02])
            hi = np.array(fx.interior_high)
            if fx.is_drawer:
                shift = self.fixture_opening(fid)
                lo = lo - np.array([shift, 0.0, 0.0])
                hi = hi - np.array([shift, 0.0, 0.0])
            if np.all(pos >= lo) and np.all(pos <= hi):
                return fid
        return None

    def gripper_opening(self) -> float:
        """Distance between the pad surfaces (m)."""
        left = self.data.geom_xpos[self._pad_geoms[0]]
        right = self.data.geom_xpos[self._pad_geoms[1]]
        return max(0.0, float(np.linalg.norm(left - right)) - PAD_THICKNESS)

    def finger_contacts(self) -> tuple[FingerContact, ...]:
        """Contacts of the finger links with other geoms, with force magnitudes."""
        m, d = self.model, self.data
        out: list[FingerContact] = []
        force = np.zeros(6)
        for i in range(d.ncon):
            con = d.contact[i]
            b1, b2 = m.geom_bodyid[con.geom1], m.geom_bodyid[con.geom2]
            for mine, other_geom, other_body in ((b1, con.geom2, b2), (b2, con.geom1, b1)):
                finger = self._finger_of_body.get(int(mine))
                if finger is None or int(other_body) in self._finger_of_body:
                    continue
                mujoco.mj_contactForce(m, d, i, force)
                out.append(
                    FingerContact(
                        finger=finger,
                        entity=self.scene.entity_of_geom(int(other_geom)),
                        geom=m.geom(int(other_geom)).name,
                        force=float(np.linalg.norm(force[:3])),
                    )
                )
        return tuple(out)

    def state(self) -> RobotState:
        """Current robot state."""
        return RobotState(
            stamp=self.time,
            base_pose=self.base_pose(),
            arm_q=tuple(float(v) for v in self.data.qpos[self._arm_qadr]),
            arm_effort=tuple(float(self.data.actuator_force[a]) for a in self._arm_act),
            gripper_opening=self.gripper_opening(),
            finger_contacts=self.finger_contacts(),
            holding=self.holding,
        )

    # ------------------------------------------------------------------ rendering

    def renderer(self, width: int, height: int) -> SceneRenderer:
        """A cached renderer for one image size."""
        key = (width, height)
        if key not in self._renderers:
            self._renderers[key] = SceneRenderer(self.scene, width, height)
        return self._renderers[key]

    def render(
        self,
        camera: str,
        width: int = 640,
        height: int = 480,
        *,
        color: bool = True,
        depth: bool = True,
        segmentation: bool = True,
    ) -> Frame:
        """Render ``camera`` (base, wrist or pole) from the current state."""
        if camera not in CAMERAS:
            raise UnknownEntityError(f"unknown camera {camera!r}; known: {', '.join(CAMERAS)}")
        return self.renderer(width, height).render(
            self.data, camera, color=color, depth=depth, segmentation=segmentation
        )

    # ------------------------------------------------------------------ recording

    def begin_instruction(self, index: int) -> None:
        """Mark later primitives as belonging to instruction ``index`` (for judging)."""
        self.instruction = index

    def _begin(self, name: str, target: str) -> PrimitiveRecord:
        record = PrimitiveRecord(
            name=name, target=target, start=self.time, instruction=self.instruction
        )
        self._record = record
        self._next_sample = self.time
        self._next_frame = self.time
        self._maybe_sample()
        return record

    def _end(self, record: PrimitiveRecord) -> PrimitiveRecord:
        self._next_sample = self.time
        self._next_frame = self.time
        self._maybe_sample()
        record.end = self.time
        self._record = None
        self.log.append(record)
        LOG.debug("%s(%s): %s %s", record.name, record.target, record.success, record.outcome)
        return record

    def _maybe_sample(self) -> None:
        record = self._record
        if record is None or self.time + 1e-9 < self._next_sample:
            return
        cfg = self.config
        frames: dict[str, Frame] = {}
        if cfg.frame_rate_hz > 0 and self.time + 1e-9 >= self._next_frame:
            width, height = cfg.frame_size
            for cam in cfg.frame_cameras:
                frames[cam] = self.render(cam, width, height, depth=False, segmentation=False)
            self._next_frame = self.time + 1.0 / cfg.frame_rate_hz
        openings = {fid: self.fixture_opening(fid) for fid in self.max_opening}
        record.samples.append(Sample(self.time, self.state(), openings, frames))
        self._next_sample = self.time + 1.0 / max(cfg.sample_rate_hz, 1e-6)

    # ------------------------------------------------------------------ low-level motion

    def _fixture(self, fixture_id: str) -> FixtureLayout:
        try:
            return self.scene.fixtures[fixture_id]
        except KeyError as err:
            raise UnknownEntityError(f"unknown fixture {fixture_id!r}") from err

    def check_base_pose(self, pose: tuple[float, float, float]) -> None:
        """Raise :class:`UnreachablePoseError` if the base cannot stand at ``pose``."""
        x, y, yaw = pose
        if not all(math.isfinite(v) for v in (x, y, yaw)):
            raise UnreachablePoseError(f"pose {pose} is not finite")
        k = self.scene.scenario.kitchen
        if not (
            k.room_x[0] + ROBOT_RADIUS <= x <= k.room_x[1] - ROBOT_RADIUS
            and k.room_y[0] + ROBOT_RADIUS <= y <= k.room_y[1] - ROBOT_RADIUS
        ):
            raise UnreachablePoseError(
                f"pose ({x:.2f}, {y:.2f}) lies outside the room x {k.room_x}, y {k.room_y}"
            )
        for fid, fx in self.scene.fixtures.items():
            if fx.type == "upper_cabinet":
                continue  # above the base
            y0, y1 = fx.center_y - fx.width / 2, fx.center_y + fx.width / 2
            dx = max(fx.front_x - DOOR_T - x, 0.0, x - (fx.front_x + fx.depth))
            dy = max(y0 - y, 0.0, y - y1)
            if math.hypot(dx, dy) < ROBOT_RADIUS:
                raise UnreachablePoseError(f"pose ({x:.2f}, {y:.2f}) collides with fixture {fid}")

    def _set_arm_target(self, q: FloatArray) -> None:
        self.data.ctrl[self._arm_act] = q

    def _drive_arm(self, q_target: FloatArray, duration: float) -> None:
        """Move the arm set-point to ``q_target`` along a smooth ramp, stepping the physics."""
        q0 = np.array(self.data.ctrl[self._arm_act], dtype=np.float64)
        steps = max(1, round(duration / self.model.opt.timestep))
        for i in range(1, steps + 1):
            s = i / steps
            blend = s * s * (3 - 2 * s)
            self._set_arm_target(q0 + blend * (q_target - q0))
            self.step()

    def _ik(
        self, pos: FloatArray, rot: FloatArray | None, q_seed: FloatArray | None = None
    ) -> FloatArray | None:
        self._scratch.qpos[:] = self.data.qpos
        if q_seed is not None:
            self._scratch.qpos[self._arm_qadr] = q_seed
        result = solve_site_ik(
            self.model,
            self._scratch,
            self._site,
            qpos_adr=self._arm_qadr,
            dof_adr=self._arm_dadr,
            target_pos=pos,
            target_rot=rot,
        )
        if not result.converged(self.config.ik_pos_tol, self.config.ik_rot_tol):
            LOG.debug(
                "IK miss: pos %.3f m rot %.3f rad", result.position_error, result.rotation_error
            )
            return None
        return result.q

    def _site_pose(self) -> tuple[FloatArray, FloatArray]:
        return (
            np.array(self.data.site_xpos[self._site], dtype=np.float64),
            np.array(self.data.site_xmat[self._site], dtype=np.float64).reshape(3, 3),
        )

    def _move_gripper_to(
        self,
        pos: FloatArray,
        rot: FloatArray | None,
        speed: float | None = None,
        *,
        straight: bool = True,
    ) -> bool:
        """Move the pinch site to (pos, rot); False if no IK solution.

        ``straight`` follows a Cartesian line (orientation interpolated); otherwise the arm moves
        in joint space to one IK solution, trying a few seeds. ``rot=None`` leaves the hand's
        orientation free.
        """
        start, start_rot = self._site_pose()
        dist = float(np.linalg.norm(pos - start))
        v = speed or self.config.arm_speed
        if not straight:
            q = None
            for seed in (None, np.array(HOME_ARM), np.array(READY_ARM)):
                q = self._ik(pos, rot, seed)
                if q is not None:
                    break
            if q is None:
                return False
            joint_dist = float(np.max(np.abs(q - self.data.qpos[self._arm_qadr])))
            self._drive_arm(q, max(dist / v, joint_dist / 1.2, 0.4))
            self.step_seconds(0.3)
            return True
        n = max(2, math.ceil(dist / 0.02))
        q_start = np.zeros(4)
        q_goal = np.zeros(4)
        mujoco.mju_mat2Quat(q_start, start_rot.reshape(9))
        if rot is not None:
            mujoco.mju_mat2Quat(q_goal, np.ascontiguousarray(rot).reshape(9))
        q_seed: FloatArray | None = None
        for i in range(1, n + 1):
            s = i / n
            waypoint = start + (pos - start) * s
            w_rot = _slerp_matrix(q_start, q_goal, s) if rot is not None else None
            q = self._ik(waypoint, w_rot, q_seed)
            if q is None:
                return False
            q_seed = q
            self._drive_arm(q, dist / n / v)
        self.step_seconds(0.3)
        return True

    def _home_arm(self) -> None:
        self._drive_arm(np.array(HOME_ARM), 1.2)
        self.step_seconds(0.2)

    def _gripper(self, closed: bool) -> None:
        self.data.ctrl[self._grip_act] = GRIPPER_CLOSED if closed else GRIPPER_OPEN
        self.step_seconds(self.config.grip_close_s)

    def _check_reach(self, point: FloatArray) -> float:
        x, y, _ = self.base_pose()
        return math.hypot(float(point[0]) - x, float(point[1]) - y)

    # ------------------------------------------------------------------ primitives

    def move_to(self, target: str | Sequence[float]) -> MoveResult:
        """Drive the base to a fixture's approach pose or to an explicit (x, y, yaw) pose.

        Raises:
            UnknownEntityError: unknown fixture id.
            UnreachablePoseError: the pose is outside the room or inside a fixture.
        """
        if isinstance(target, str):
            goal = start_pose_for(self._fixture(target))
            name = target
        else:
            values = tuple(float(v) for v in target)
            if len(values) != 3:
                raise UnreachablePoseError(f"a base pose needs x, y, yaw; got {values}")
            goal = (values[0], values[1], values[2])
            name = f"pose({goal[0]:.2f},{goal[1]:.2f},{goal[2]:.2f})"
        self.check_base_pose(goal)
        record = self._begin("move_to", name)
        if self.holding is None:
            self._home_arm()
        pos_err, yaw_err = self._drive_base(goal)
        reached = pos_err <= self.config.base_pos_tol and yaw_err <= self.config.base_yaw_tol
        record.success = reached
        record.outcome = "reached" if reached else "not reached within tolerance"
        record.measurements = {"position_error": pos_err, "yaw_error": yaw_err}
        self._end(record)
        return MoveResult(reached, goal, self.base_pose(), pos_err, yaw_err)

    def _drive_base(self, goal: tuple[float, float, float]) -> tuple[float, float]:
        """Ramp the base set-points to ``goal`` and let it settle; (position, yaw) errors."""
        start = np.array(self.data.ctrl[self._base_act], dtype=np.float64)
        delta = np.array([goal[0] - start[0], goal[1] - start[1], _wrap(goal[2] - start[2])])
        duration = max(
            float(np.linalg.norm(delta[:2])) / self.config.base_speed,
            abs(float(delta[2])) / self.config.base_turn_speed,
            0.2,
        )
        steps = max(1, round(duration / self.model.opt.timestep))
        for i in range(1, steps + 1):
            s = i / steps
            blend = s * s * (3 - 2 * s)
            self.data.ctrl[self._base_act] = start + blend * delta
            self.step()
        settle_steps = round(self.config.base_settle_s / self.model.opt.timestep)
        pos_err = yaw_err = float("inf")
        for _ in range(0, settle_steps, 25):
            self.step(25)
            x, y, yaw = self.base_pose()
            pos_err = math.hypot(goal[0] - x, goal[1] - y)
            yaw_err = abs(_wrap(goal[2] - yaw))
            if pos_err <= self.config.base_pos_tol and yaw_err <= self.config.base_yaw_tol:
                break
        return pos_err, yaw_err

    def _handle_grip(self, fx: FixtureLayout) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Handle point, approach direction and grip rotation for the handle's current pose."""
        assert fx.handle_site is not None
        site = self.model.site(fx.handle_site).id
        point = np.array(self.data.site_xpos[site], dtype=np.float64)
        door_rot = self.data.site_xmat[site].reshape(3, 3)
        approach = door_rot @ np.array([1.0, 0.0, 0.0])  # into the door face
        if fx.is_drawer:
            return point, approach, _grip_rotation(approach, door_rot @ np.array([0.0, 0.0, 1.0]))
        if self.fixture_opening(fx.id) > self.config.door_via_angle:
            # the bar is vertical: the hand may take it from any side within a skew of the
            # door's normal; turn towards the base so a swung-away handle stays reachable
            x, y, _ = self.base_pose()
            normal_yaw = math.atan2(float(approach[1]), float(approach[0]))
            to_handle = math.atan2(float(point[1]) - y, float(point[0]) - x)
            skew = float(
                np.clip(
                    _wrap(to_handle - normal_yaw),
                    -self.config.handle_max_skew,
                    self.config.handle_max_skew,
                )
            )
            yaw = normal_yaw + skew
            approach = np.array([math.cos(yaw), math.sin(yaw), 0.0])
        finger_axis = np.array([-approach[1], approach[0], 0.0])
        return point, approach, _grip_rotation(approach, finger_axis)

    def _grasp_handle(
        self, fx: FixtureLayout, record: PrimitiveRecord
    ) -> tuple[bool, FloatArray, FloatArray]:
        point, approach, rot = self._handle_grip(fx)
        noise = (
            self._rng.normal(0.0, self.config.grasp_noise, 3) if self.config.grasp_noise else 0.0
        )
        target = point + noise - GRIP_DEPTH * approach
        record.measurements["grasp_offset"] = float(np.linalg.norm(noise))
        self._gripper(False)
        pre = target - 0.12 * approach
        if not fx.is_drawer and self.fixture_opening(fx.id) > self.config.door_via_angle:
            # the handle faces away from the base: come round the door's free edge to it
            z = float(point[2])
            inside = self._door_point(fx, fx.width + 0.12, 0.15, z)
            past = self._door_point(fx, fx.width + 0.12, -0.12, z)
            if not self._move_gripper_to(inside, rot, speed=0.5, straight=False):
                return False, target, rot
            for goal in (past, pre):
                if not self._move_gripper_to(goal, rot, speed=0.3) and not self._move_gripper_to(
                    goal, None, speed=0.3
                ):
                    return False, target, rot
            if not self._move_gripper_to(pre, rot, speed=0.3, straight=False):
                return False, target, rot
        elif not self._move_gripper_to(pre, rot, speed=0.5, straight=False):
            return False, target, rot
        if not self._move_gripper_to(target, rot, speed=0.15):
            return False, target, rot
        handle = f"{fx.id}_handle"
        grasped = self._close_on(handle, lambda: self._engage_handle(fx))
        record.measurements["fingers_on_handle"] = float(len(self.state().touching(handle)))
        return grasped, target, rot

    def _door_point(self, fx: FixtureLayout, along: float, off: float, z: float) -> FloatArray:
        """World point ``along`` m from the hinge on the door and ``off`` m off its inner face."""
        assert fx.hinge_point is not None
        theta = self.fixture_opening(fx.id)
        towards_free = -1.0 if fx.hinge_sign < 0 else 1.0  # closed door: hinge -> free edge on y
        local = np.array([DOOR_T + off, towards_free * along, 0.0])
        world = _rot_z(fx.hinge_sign * theta) @ local
        return np.array([fx.hinge_point[0] + world[0], fx.hinge_point[1] + world[1], z])

    def _push_door_back(self, fx: FixtureLayout, angle: float) -> bool:
        """Swing a wide-open door back to ``angle`` by pushing its outer face.

        The hand comes round the free edge to the outer side, between the hinge and the
        handle, and follows the hinge arc with its orientation left free.
        """
        assert fx.hinge_point is not None and fx.handle_site is not None
        z = float(self.data.site_xpos[self.model.site(fx.handle_site).id][2])
        self._gripper(True)
        inside = self._door_point(fx, fx.width + 0.12, 0.15, z)
        past = self._door_point(fx, fx.width + 0.12, -0.14, z)
        start = self._door_point(fx, fx.width * 0.45, -DOOR_T - 0.05, z)
        if not self._move_gripper_to(inside, None, speed=0.5, straight=False):
            return False
        for goal in (past, start):
            if not self._move_gripper_to(goal, None, speed=0.3):
                self._home_arm()
                return False
        theta0 = self.fixture_opening(fx.id)
        hinge = np.array([fx.hinge_point[0], fx.hinge_point[1], z])
        arm = self._site_pose()[0] - hinge
        sweep = angle - theta0
        n = max(2, math.ceil(abs(sweep) / 0.03))
        q_seed: FloatArray | None = None
        for i in range(1, n + 1):
            turn = _rot_z(fx.hinge_sign * sweep * (i / n))
            q = self._ik(hinge + turn @ arm, None, q_seed)
            if q is None:
                break
            q_seed = q
            self._drive_arm(q, max(abs(sweep) / n * float(np.linalg.norm(arm)) / 0.15, 0.03))
        self.step_seconds(0.2)
        outer = _rot_z(fx.hinge_sign * self.fixture_opening(fx.id)) @ np.array([-1.0, 0.0, 0.0])
        pos = self._site_pose()[0]
        self._move_gripper_to(pos + 0.08 * outer, None, speed=0.3)
        self._gripper(False)
        self._home_arm()
        return self.fixture_opening(fx.id) < theta0 - 0.1

    def _door_via(self, fx: FixtureLayout, pre: FloatArray) -> FloatArray | None:
        """Waypoint below (upper units) or above (lower units) an open door, under ``pre``.

        ``None`` for drawers and for doors that are (nearly) closed, where the direct joint-space
        approach is clear.
        """
        if fx.is_drawer or self.fixture_opening(fx.id) < self.config.door_via_angle:
            return None
        via = np.array(pre, dtype=np.float64)
        if fx.type == "upper_cabinet":
            via[2] = fx.z_low - self.config.door_via_clearance
        else:
            via[2] = self.scene.scenario.kitchen.counter_height + self.config.door_via_clearance
        return via

    def _close_on(self, entity: str, engage: Callable[[], None]) -> bool:
        """Close the gripper; call ``engage`` as soon as both fingers touch ``entity``."""
        self.data.ctrl[self._grip_act] = GRIPPER_CLOSED
        engaged = False
        for _ in range(max(1, round(self.config.grip_close_s / 0.01))):
            self.step_seconds(0.01)
            if not engaged and self.state().touching(entity) == {"left", "right"}:
                if self.config.pick_assist:
                    engage()
                engaged = True
        return engaged and bool(self.state().touching(entity))

    def _engage_handle(self, fx: FixtureLayout) -> None:
        eq = self._handle_eq.get(fx.id)
        if eq is None or fx.moving_body is None or fx.handle_site is None:
            return
        m, d = self.model, self.data
        point = d.site_xpos[m.site(fx.handle_site).id]
        b1, b2 = self._gripper_body, m.body(fx.moving_body).id
        m.eq_data[eq, 0:3] = d.xmat[b1].reshape(3, 3).T @ (point - d.xpos[b1])
        m.eq_data[eq, 3:6] = d.xmat[b2].reshape(3, 3).T @ (point - d.xpos[b2])
        d.eq_active[eq] = 1

    def _assist_force(self, fixture_id: str) -> float:
        """Force (N) carried by the grasp-assist constraint of a fixture's handle."""
        eq = self._handle_eq.get(fixture_id)
        d = self.data
        if eq is None or not d.eq_active[eq]:
            return 0.0
        rows = np.where(
            (d.efc_type[: d.nefc] == int(mujoco.mjtConstraint.mjCNSTR_EQUALITY))
            & (d.efc_id[: d.nefc] == eq)
        )[0]
        return float(np.linalg.norm(d.efc_force[rows])) if rows.size else 0.0

    def _release_handles(self) -> None:
        for eq in self._handle_eq.values():
            self.data.eq_active[eq] = 0

    def _release_and_retreat(self, rot: FloatArray, fx: FixtureLayout | None = None) -> None:
        """Open the fingers, back away and fold the arm home.

        Beside an open door the hand first backs off the door's outer face and then drops below
        (upper units) or rises above (lower units) the door, so folding the arm does not sweep
        the door shut again.
        """
        self._release_handles()
        self._gripper(False)
        pos, cur_rot = self._site_pose()
        if fx is not None and fx.handle_site is not None and not fx.is_drawer:
            door_rot = self.data.site_xmat[self.model.site(fx.handle_site).id].reshape(3, 3)
            away = door_rot @ np.array([-1.0, 0.0, 0.0])
            back = pos + 0.06 * away
            if not self._move_gripper_to(back, cur_rot, speed=0.4):
                self._move_gripper_to(back, None, speed=0.4)
            if self.fixture_opening(fx.id) > self.config.door_via_angle:
                # round the free edge to the inner side of the door before folding the arm
                assert fx.hinge_point is not None
                z = float(self._site_pose()[0][2])
                past = self._door_point(fx, fx.width + 0.12, -0.12, z)
                inside = self._door_point(fx, fx.width + 0.12, 0.15, z)
                for goal in (past, inside):
                    if not self._move_gripper_to(goal, cur_rot, speed=0.4):
                        self._move_gripper_to(goal, None, speed=0.4)
        else:
            self._move_gripper_to(pos - 0.12 * rot[:, 2], rot, speed=0.4)
        self._home_arm()

    def _actuate(self, fixture_id: str, opening: bool) -> PrimitiveRecord:
        fx = self._fixture(fixture_id)
        if not fx.is_openable:
            raise PrimitiveError(f"fixture {fixture_id!r} has no door or drawer")
        if self.holding is not None:
            raise PrimitiveError(f"the gripper holds {self.holding}; place it first")
        record = self._begin("open" if opening else "close", fixture_id)
        before = self.fixture_opening(fixture_id)
        record.measurements["opening_before"] = before
        if opening and self.is_open(fixture_id):
            # nothing to pull: the door or drawer already stands open
            record.success = True
            record.outcome = "already open"
            record.measurements["opening_after"] = before
            return self._end(record)
        point, _, _ = self._handle_grip(fx)
        if self._check_reach(point) > self.config.reach_radius:
            record.outcome = "handle out of reach; move closer first"
            record.measurements["opening_after"] = before
            return self._end(record)
        if (
            not opening
            and not fx.is_drawer
            and self.fixture_opening(fixture_id) > self.config.door_push_back_angle + 0.3
        ):
            record.measurements["pushed_partly_shut"] = (
                1.0 if self._push_door_back(fx, self.config.door_push_back_angle) else 0.0
            )
            before = self.fixture_opening(fixture_id)
        stance = start_pose_for(fx)
        if fx.is_drawer and before > 0.0:
            # an open drawer's handle sticks out towards the base: stand back by as much
            stance = (stance[0] - before, stance[1], stance[2])
        x, y, yaw = self.base_pose()
        if math.hypot(stance[0] - x, stance[1] - y) > 0.03 or abs(_wrap(stance[2] - yaw)) > 0.05:
            # square up at the fixture's approach pose (a pick may have shifted the base)
            self.check_base_pose(stance)
            self._home_arm()
            self._drive_base(stance)
        grasped, grip_point, rot = self._grasp_handle(fx, record)
        if not grasped:
            record.outcome = "missed grasp: fingers did not close on the handle"
            self._release_and_retreat(rot, fx)
            record.measurements["opening_after"] = self.fixture_opening(fixture_id)
            return self._end(record)
        peak_force = 0.0
        peak_effort = 0.0
        peak_pull = 0.0
        cfg = self.config
        if fx.is_drawer:
            goal = cfg.drawer_open_dist if opening else -cfg.close_overdrive_drawer
            travel = goal - before
            n = max(2, math.ceil(abs(travel) / 0.01))
            pull_dir = np.array([-1.0, 0.0, 0.0])
            waypoints = [(grip_point + pull_dir * travel * (i / n), rot) for i in range(1, n + 1)]
            if not opening:
                # ease off the overdrive before letting go, or the squeezed stop springs it open
                waypoints.append((grip_point - pull_dir * before, rot))
        else:
            assert fx.hinge_point is not None
            goal = cfg.door_open_angle if opening else (-cfg.close_overdrive_door)
            hinge = np.array([fx.hinge_point[0], fx.hinge_point[1], grip_point[2]])
            arm = grip_point - hinge
            n = max(2, math.ceil(abs(goal - before) / 0.03))
            waypoints = []
            for i in range(1, n + 1):
                turn = _rot_z(fx.hinge_sign * (goal - before) * (i / n))
                waypoints.append((hinge + turn @ arm, turn @ rot))
        q_seed: FloatArray | None = None
        seg_len = float(np.linalg.norm(waypoints[0][0] - grip_point)) if waypoints else 0.0
        for wp, wrot in waypoints:
            q = self._ik(wp, wrot, q_seed)
            if q is None and not fx.is_drawer:
                # the fingers may turn about the vertical bar: lag the hand's yaw behind the door's
                grip_rot = self._site_pose()[1]
                q = self._ik(wp, grip_rot, q_seed)
                if q is None:
                    q = self._ik(wp, None, q_seed)
            if q is None:
                break
            q_seed = q
            self._drive_arm(q, max(seg_len / cfg.arm_speed, 0.03))
            lag = float(np.linalg.norm(wp - self._site_pose()[0]))
            record.measurements["max_tracking_error"] = max(
                record.measurements.get("max_tracking_error", 0.0), lag
            )
            if lag > 0.06:
                record.measurements["stalled"] = 1.0
                break
            contacts = self.finger_contacts()
            on_handle = [c.force for c in contacts if c.entity == f"{fx.id}_handle"]
            peak_force = max(peak_force, sum(on_handle))
            peak_pull = max(peak_pull, self._assist_force(fx.id))
            effort = float(np.linalg.norm(self.data.actuator_force[self._arm_act]))
            peak_effort = max(peak_effort, effort)
            eq = self._handle_eq.get(fx.id)
            held = eq is not None and bool(self.data.eq_active[eq])
            if not on_handle and not held:
                record.measurements["slipped"] = 1.0
                break
        self.step_seconds(0.3)
        after = self.fixture_opening(fixture_id)
        record.measurements.update(
            {
                "opening_after": after,
                "opening_held": after,
                "peak_handle_force": peak_force,
                "peak_arm_effort": peak_effort,
                "peak_pull_force": peak_pull,
                "pull_duration": self.time - record.start,
            }
        )
        self._release_and_retreat(rot, fx)
        after = self.fixture_opening(fixture_id)
        record.measurements["opening_after"] = after
        if opening:
            record.success = self.is_open(fixture_id)
            if record.success:
                record.outcome = "opened"
            elif abs(after - before) < 0.02 and max(peak_force, peak_pull) > 1.0:
                record.outcome = "pulled with contact but the fixture did not move"
            else:
                record.outcome = "fixture did not open far enough"
        else:
            thr = cfg.close_threshold_drawer if fx.is_drawer else cfg.close_threshold_door
            record.success = after <= thr
            if record.success:
                record.outcome = "closed"
            elif abs(after - before) < 0.02 and max(peak_force, peak_pull) > 1.0:
                record.outcome = "pushed with contact but the fixture did not move"
            else:
                record.outcome = "fixture still open"
        return self._end(record)

    def open(self, fixture_id: str) -> PrimitiveRecord:
        """Grasp the handle and pull the door along its hinge arc or the drawer along its slide."""
        return self._actuate(fixture_id, opening=True)

    def close_fixture(self, fixture_id: str) -> PrimitiveRecord:
        """Grasp the handle and push the door or drawer back to its closed position."""
        return self._actuate(fixture_id, opening=False)

    def inspect(self, fixture_id: str) -> PrimitiveRecord:
        """Sweep the wrist camera across the fixture's opening, recording wrist frames."""
        fx = self._fixture(fixture_id)
        if self.holding is not None:
            raise PrimitiveError(f"the gripper holds {self.holding}; place it first")
        record = self._begin("inspect", fixture_id)
        opening = self.fixture_opening(fixture_id)
        record.measurements["opening"] = opening
        record.measurements["was_open"] = 1.0 if self.is_open(fixture_id) else 0.0
        z = fx.interior_low[2] + (0.12 if fx.type != "counter" else 0.25)
        x = fx.front_x - (opening if fx.is_drawer else 0.0) - 0.15
        if fx.is_drawer:
            z = fx.interior_high[2] + 0.25
        centre = np.array([x, fx.center_y, z])
        if self._check_reach(centre) > self.config.reach_radius:
            record.outcome = "fixture out of reach; move closer first"
            return self._end(record)
        pitch = 0.9 if fx.is_drawer else 0.2
        approach = np.array([math.cos(pitch), 0.0, -math.sin(pitch)])
        rot = _grip_rotation(approach, np.array([0.0, 1.0, 0.0]))
        count = max(1, self.config.inspect_frames)
        half = fx.width * 0.3
        offsets = np.linspace(-half, half, count) if count > 1 else np.zeros(1)
        visible: set[str] = set()
        width, height = self.config.frame_size
        reached = 0
        for off in offsets:
            if not self._move_gripper_to(
                centre + np.array([0.0, off, 0.0]), rot, speed=0.4, straight=reached > 0
            ):
                continue
            reached += 1
            frame = self.render("wrist", width, height)
            record.frames.append(frame)
            visible |= frame.visible_entities()
        self._home_arm()
        seen = sorted(
            e for e in visible if e in self.scene.objects and self.object_fixture(e) == fixture_id
        )
        record.measurements["views"] = float(reached)
        record.success = reached > 0
        record.outcome = f"saw {len(seen)} objects: {', '.join(seen)}" if reached else "no view"
        record.measurements["objects_seen"] = float(len(seen))
        return self._end(record)

    def _pick_stance(self, pos: FloatArray, source: str | None) -> float:
        """Drive the base square in front of an object at ``pick_base_distance``.

        Backs off in 5 cm steps where that pose would collide with a fixture; stays put when
        no pose is free or the current one is already within 3 cm. Returns the distance moved.
        """
        cfg = self.config
        x0, y0, heading = self.base_pose()
        if cfg.pick_base_distance <= 0.0:
            return 0.0
        y = float(pos[1])
        if source is not None:
            fx = self._fixture(source)
            if fx.hinge_point is not None:
                # keep the arm clear of the swung-open door on the hinge side
                side = -1.0 if fx.hinge_sign < 0 else 1.0  # hinge -> free edge along y
                limit = fx.hinge_point[1] + side * cfg.pick_hinge_clearance
                y = min(y, limit) if side < 0 else max(y, limit)
        for k in range(6):
            goal = (float(pos[0]) - cfg.pick_base_distance - 0.05 * k, y, heading)
            try:
                self.check_base_pose(goal)
            except UnreachablePoseError:
                continue
            shift = math.hypot(goal[0] - x0, goal[1] - y0)
            if shift > 0.03:
                self._drive_base(goal)
            return shift
        return 0.0

    def _pick_approach(
        self, pos: FloatArray, cat: CategorySpec
    ) -> tuple[FloatArray, FloatArray, float]:
        """Approach direction, grip rotation and pitch (rad, down from level) for an object.

        The hand points from the base towards the object (yaw limited to
        ``pick_max_yaw``). Objects lower than ``pick_tilt_below`` (half height) are taken with the
        hand pitched down by ``pick_pitch`` so the finger links clear the shelf they lie on; the
        fingers always close horizontally.
        """
        cfg = self.config
        x, y, heading = self.base_pose()
        rel = _wrap(math.atan2(float(pos[1]) - y, float(pos[0]) - x) - heading)
        yaw = heading + float(np.clip(rel, -cfg.pick_max_yaw, cfg.pick_max_yaw))
        pitch = cfg.pick_pitch if _half_height(cat) < cfg.pick_tilt_below else 0.0
        approach = np.array(
            [
                math.cos(pitch) * math.cos(yaw),
                math.cos(pitch) * math.sin(yaw),
                -math.sin(pitch),
            ]
        )
        finger_axis = np.array([-math.sin(yaw), math.cos(yaw), 0.0])
        return approach, _grip_rotation(approach, finger_axis), pitch

    def pick(self, object_id: str) -> PrimitiveRecord:
        """Grasp an object from the side, lift it and pull it out of its fixture."""
        if object_id not in self.scene.objects:
            raise UnknownEntityError(f"unknown object {object_id!r}")
        if self.holding is not None:
            raise PrimitiveError(f"the gripper already holds {self.holding}")
        record = self._begin("pick", object_id)
        source = self.object_fixture(object_id)
        pos = self.object_position(object_id)
        if self._check_reach(pos) > self.config.reach_radius:
            record.outcome = "object out of reach; move closer first"
            return self._end(record)
        if source is not None and not self.is_open(source):
            record.outcome = f"{source} is closed"
            return self._end(record)
        cat = self.scene.scenario.catalog[self.scene.objects[object_id].category]
        record.measurements["base_shift"] = self._pick_stance(pos, source)
        approach, rot, pitch = self._pick_approach(pos, cat)
        record.measurements["approach_pitch"] = pitch
        noise = (
            self._rng.normal(0.0, self.config.grasp_noise, 3) if self.config.grasp_noise else 0.0
        )
        flat = np.array([approach[0], approach[1], 0.0])
        flat /= np.linalg.norm(flat)
        # capsules lie along the shelf depth: close on their near half, not round their middle
        reach_in = cat.size[0] + cat.size[1] - 0.03 if cat.shape == "capsule" else 0.0
        grip_point = pos + noise - max(0.0, reach_in) * flat
        grip_point[2] += self.config.pick_grip_height if pitch > 0.0 else 0.0
        target = grip_point - 0.018 * approach
        self._gripper(False)
        pre = target - self.config.pick_pre_distance * approach
        ok = self._move_gripper_to(pre, rot, speed=0.5, straight=False) and self._move_gripper_to(
            target, rot, speed=0.15
        )
        grasped = ok and self._close_on(object_id, lambda: self._engage_weld(object_id))
        fingers = self.state().touching(object_id)
        record.measurements["fingers_on_object"] = float(len(fingers))
        if not grasped:
            record.outcome = "missed grasp" if ok else "grasp pose not reachable"
            self._release_and_retreat(rot)
            return self._end(record)
        self.holding = object_id
        cur, _ = self._site_pose()
        self._move_gripper_to(cur + np.array([0.0, 0.0, 0.03]), rot, speed=0.1)
        cur, _ = self._site_pose()
        self._move_gripper_to(cur - 0.3 * flat, rot, speed=0.2)
        self.step_seconds(0.3)
        now_in = self.object_fixture(object_id)
        still = self.state().touching(object_id)
        record.measurements["fingers_after_lift"] = float(len(still))
        record.success = still == {"left", "right"} and now_in != source
        if not record.success:
            self._drop()
        record.outcome = (
            f"picked from {source}" if record.success else "object slipped or stayed in place"
        )
        return self._end(record)

    def place(
        self, object_id: str, fixture_id: str, slot: tuple[float, float] = (0.5, 0.4)
    ) -> PrimitiveRecord:
        """Put the held object on a fixture's surface at ``slot`` (u across, v in depth)."""
        fx = self._fixture(fixture_id)
        if self.holding != object_id:
            raise PrimitiveError(f"the gripper does not hold {object_id!r}")
        record = self._begin("place", f"{object_id}->{fixture_id}")
        if fx.is_openable and not self.is_open(fixture_id):
            record.outcome = f"{fixture_id} is closed"
            return self._end(record)
        lo, hi = np.array(fx.interior_low), np.array(fx.interior_high)
        cat = self.scene.scenario.catalog[self.scene.objects[object_id].category]
        body = self.model.body(object_id).id
        site_pos, rot = self._site_pose()
        offset = site_pos - self.data.xpos[body]
        half_h = float(
            cat.size[-1] if cat.shape in ("cylinder", "box", "ellipsoid") else cat.size[0]
        )
        goal = np.array(
            [
                lo[0] + 0.06 + slot[1] * max(0.0, hi[0] - lo[0] - 0.12),
                hi[1] - 0.06 - slot[0] * max(0.0, hi[1] - lo[1] - 0.12),
                lo[2] + half_h + 0.015,
            ]
        )
        if self._check_reach(goal) > self.config.reach_radius:
            record.outcome = "target out of reach; move closer first"
            return self._end(record)
        above = goal + offset + np.array([0.0, 0.0, 0.12])
        ok = self._move_gripper_to(above, rot, speed=0.3, straight=False) and self._move_gripper_to(
            goal + offset, rot, speed=0.1
        )
        self._drop()
        self._gripper(False)
        cur, _ = self._site_pose()
        self._move_gripper_to(cur - 0.12 * rot[:, 2], rot, speed=0.3)
        self._home_arm()
        self.step_seconds(0.5)
        where = self.object_fixture(object_id)
        record.success = ok and where == fixture_id
        record.outcome = f"object now on {where}" if where else "object not on a fixture"
        return self._end(record)

    def _engage_weld(self, object_id: str) -> None:
        eq = self._weld.get(object_id)
        if eq is None:
            return
        m, d = self.model, self.data
        b1 = self._gripper_body
        b2 = m.body(object_id).id
        r1 = d.xmat[b1].reshape(3, 3)
        rel_pos = r1.T @ (d.xpos[b2] - d.xpos[b1])
        q1_inv = np.zeros(4)
        mujoco.mju_negQuat(q1_inv, d.xquat[b1])
        rel_quat = np.zeros(4)
        mujoco.mju_mulQuat(rel_quat, q1_inv, d.xquat[b2])
        m.eq_data[eq, 0:3] = 0.0
        m.eq_data[eq, 3:6] = rel_pos
        m.eq_data[eq, 6:10] = rel_quat
        m.eq_data[eq, 10] = 1.0
        d.eq_active[eq] = 1

    def _drop(self) -> None:
        if self.holding is not None and self.holding in self._weld:
            self.data.eq_active[self._weld[self.holding]] = 0
        self.holding = None
