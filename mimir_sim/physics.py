"""The physics world: MuJoCo model and state, stepping, and listeners called while it steps.

Every part of the simulation that advances time (the idle loop, reset, the robot's controllers)
goes through :meth:`PhysicsWorld.step`, so step listeners (publishers of a bridge) and the
primitive recorder see every physics step, whoever caused it.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from mimir_sim.config import SimConfig
from mimir_sim.errors import PhysicsUnstableError, StepListenerError
from mimir_sim.scene_layout import KitchenScene

#: MuJoCo's warnings for a state it gave up on (it resets the data after each)
_UNSTABLE = (mujoco.mjtWarning.mjWARN_BADQPOS, mujoco.mjtWarning.mjWARN_BADQVEL,
             mujoco.mjtWarning.mjWARN_BADQACC)
_UNSTABLE_INDEX = np.array([int(w) for w in _UNSTABLE])


#: What :class:`PhysicsUnstableError` carries of the state before the step that blew up: all
#: of it (positions, velocities, controls, warm start, mocap, equality switches, user data)
UNSTABLE_STATE_SPEC = int(mujoco.mjtState.mjSTATE_INTEGRATION)


def save_unstable(err: PhysicsUnstableError, model: mujoco.MjModel, path: str | Path) -> Path:
    """Write what a blow-up needs to be replayed: the compiled model (MuJoCo's binary form,
    assets included), the state before the step that blew up and its time (``.npz``).
    :func:`load_unstable` reads it back.

    Raises:
        ValueError: the error carries no state, or one that does not fit ``model``.
        OSError: the file cannot be written.
    """
    if err.state is None:
        raise ValueError("this PhysicsUnstableError carries no state to save")
    state = np.asarray(err.state, dtype=np.float64)
    if state.shape != (mujoco.mj_stateSize(model, UNSTABLE_STATE_SPEC),):
        raise ValueError(f"a state of shape {state.shape} does not fit this model")
    binary = np.zeros(mujoco.mj_sizeModel(model), dtype=np.uint8)
    mujoco.mj_saveModel(model, None, binary)
    out = Path(path)
    with out.open("wb") as f:
        np.savez_compressed(f, state=state, spec=np.int64(UNSTABLE_STATE_SPEC),
                            time=np.float64(err.time), model=binary, message=np.str_(str(err)))
    return out


def load_unstable(path: str | Path) -> tuple[mujoco.MjModel, mujoco.MjData]:
    """The model and data of a saved blow-up, set to the state before the step that blew up
    (``mujoco.mj_step(model, data)`` then repeats it).

    Raises:
        ValueError: the file is not a saved blow-up, or its state does not fit its model.
        OSError: the file cannot be read.
    """
    with np.load(Path(path), allow_pickle=False) as saved:
        try:
            state, spec = np.asarray(saved["state"]), int(saved["spec"])
            binary = np.asarray(saved["model"], dtype=np.uint8)
        except KeyError as err:
            raise ValueError(f"{path} is not a saved physics blow-up: no {err}") from err
    with tempfile.TemporaryDirectory() as tmp:
        mjb = Path(tmp) / "model.mjb"
        mjb.write_bytes(binary.tobytes())
        model = mujoco.MjModel.from_binary_path(str(mjb))
    if state.shape != (mujoco.mj_stateSize(model, spec),):
        raise ValueError(f"{path}: a state of shape {state.shape} does not fit its model")
    data = mujoco.MjData(model)
    mujoco.mj_setState(model, data, state, spec)
    mujoco.mj_forward(model, data)
    return model, data


@dataclass
class _StepListener:
    callback: Callable[[float], None]
    period: float
    last: float


class PhysicsWorld:
    """MuJoCo model and data of one kitchen scene, stepped through one door.

    Args:
        scene: compiled scene from :func:`mimir_sim.scene.build_scene`.
        config: simulation settings (shared by every part of the simulator).

    Attributes:
        sampler: called after each physics step while set (the recorder of a running primitive).
        after_steps: called once after every :meth:`step` call, in order.
    """

    def __init__(self, scene: KitchenScene, config: SimConfig) -> None:
        self.scene = scene
        self.config = config
        self.model = scene.model
        # set before the data exists: MjData starts its sleep bookkeeping from the flag. The flag
        # lives in the scene's model, so simulators sharing one scene share the setting.
        sleep = int(mujoco.mjtEnableBit.mjENBL_SLEEP)
        if config.physics_sleep:
            self.model.opt.enableflags |= sleep
        else:
            self.model.opt.enableflags &= ~sleep
        self.data = mujoco.MjData(self.model)
        self.sampler: Callable[[], None] | None = None
        self.after_steps: list[Callable[[], None]] = []
        self._listeners: dict[int, _StepListener] = {}
        self._next_listener_handle = 1
        self._listener_due = math.inf
        self._in_listener = False
        self._listener_eps = 0.5 * float(self.model.opt.timestep)
        # the full state before the step being taken: what a blow-up is replayed from
        self._state_before = np.zeros(mujoco.mj_stateSize(self.model, UNSTABLE_STATE_SPEC))

    @property
    def time(self) -> float:
        """Simulation time (s)."""
        return float(self.data.time)

    def reset_data(self) -> None:
        """Reset MuJoCo's state; listeners count their periods from time 0 again.

        Raises:
            StepListenerError: called from inside a step listener.
        """
        if self._in_listener:
            raise StepListenerError("a step listener must not reset the simulation")
        mujoco.mj_resetData(self.model, self.data)
        for listener in self._listeners.values():
            listener.last = 0.0
        self._refresh_listener_due()

    def forward(self) -> None:
        """Recompute derived quantities (positions, contacts) without advancing time."""
        mujoco.mj_forward(self.model, self.data)

    def _instabilities(self) -> int:
        """How many times MuJoCo found a bad position, velocity or acceleration (each time it
        resets the whole state)."""
        return int(self.data.warning.number[_UNSTABLE_INDEX].sum())  # read twice a step

    def step(self, n: int = 1) -> None:
        """Advance the physics ``n`` steps.

        Raises:
            StepListenerError: called from inside a step listener, or a listener changed the
                controls.
            PhysicsUnstableError: the physics blew up (MuJoCo then resets the whole world, so
                nothing simulated from here on would mean anything).
        """
        if self._in_listener:
            raise StepListenerError("a step listener must not step the simulation")
        for _ in range(n):
            before, when = self._instabilities(), float(self.data.time)
            mujoco.mj_getState(self.model, self.data, self._state_before, UNSTABLE_STATE_SPEC)
            mujoco.mj_step(self.model, self.data)
            if self._instabilities() != before:
                raise PhysicsUnstableError(
                    f"the physics became unstable at t = {when:.3f} s (MuJoCo found a bad "
                    f"value at degree of freedom {self._unstable_dof()} and reset the world); "
                    "the run cannot go on", state=self._state_before.copy(), time=when)
            if self.sampler is not None:
                self.sampler()
            if self.data.time + self._listener_eps >= self._listener_due:
                self._call_listeners()
        for hook in self.after_steps:
            hook()

    def _unstable_dof(self) -> int:
        return max((int(self.data.warning[w].lastinfo) for w in _UNSTABLE
                    if self.data.warning[w].number), default=-1)

    def step_seconds(self, seconds: float) -> None:
        """Advance the physics by ``seconds`` of simulated time (at least one step)."""
        self.step(max(1, round(seconds / self.model.opt.timestep)))

    # ------------------------------------------------------------------ step listeners

    def add_step_listener(self, callback: Callable[[float], None], period_s: float) -> int:
        """Call ``callback(sim_time)`` after physics steps, at most once per ``period_s``.

        The first call comes once ``period_s`` of simulation time has passed since
        registration, later ones each time another ``period_s`` has passed since the previous
        call (0 means after every step). A listener may read state and render but must not
        step, reset or change controls. Its exceptions reach the caller of the stepping method.

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
