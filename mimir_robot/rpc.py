"""Client of the TidyBot++ base and arm RPC servers, and the manager classes they share.

The robot runs two ``multiprocessing.managers.BaseManager`` servers, one for the base and one for
the arm. Asking a server for its typeid (``Base`` or ``Arm``) builds a fresh controller object
inside the server and hands back a proxy; the controllers answer ``reset()``,
``execute_action(action)``, ``get_state()`` and ``close()`` with small dictionaries of numpy arrays
(keys in :mod:`mimir_robot.contract`).

:class:`RobotLink` wraps both servers for the executor:

* One controller per connection. A channel asks its server for a controller exactly once, right
  after it connects; every later call goes through that proxy. A new controller is only ever
  created after the old connection is known to be gone (a call failed with EOF, a reset or broken
  pipe, a refused connection). A call that merely times out does not count as gone: the channel
  waits for the stuck call to finish instead of opening a second controller next to it.
* Bounded calls. Every call (connect, controller creation, method call) runs on the channel's own
  worker thread and the caller waits at most its deadline. Running all calls of a connection on
  one thread also keeps the proxy on one socket (proxies open one socket per calling thread).
* Reconnects with exponential backoff, without sleeping in the caller: after a failed attempt the
  next one is allowed only once the delay has passed (doubling up to a maximum); calls in between
  fail at once with a typed error. :meth:`RobotLink.connect` waits and retries for start-up.
* Reset is never implicit. A fresh controller (first connection or after a reconnect) refuses
  targets until the caller has called :meth:`RobotLink.reset_base` / :meth:`RobotLink.reset_arm`;
  on the real robot a reset moves the arm and re-zeroes odometry, so only the caller may decide it.
* Limits. A server whose stuck call never returns keeps its channel down until the server is
  restarted (that breaks the connection, and the next call reconnects). If only the network
  drops while the server lives on, the server keeps the old controller (upstream servers never
  reap them) next to the new one; on the real robot, restart the servers after such a loss. A
  connect that outlives its deadline is abandoned; if the server answers in the short moment
  between the handshake and the creation check, that late controller is left unused.
* Targets are checked before anything is sent (finite, right shape, gripper within 0..1, non-zero
  quaternion); a bad one raises :class:`RobotTargetRefusedError`.
"""

from __future__ import annotations

import math
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
from multiprocessing import AuthenticationError, get_context
from multiprocessing.managers import BaseManager
from typing import Any

import numpy as np

from mimir_robot import contract as c

# Errors of a proxy call that mean the connection to the server is gone.
LOST_CONNECTION_ERRORS: tuple[type[BaseException], ...] = (EOFError, ConnectionError, OSError)


# --- Errors ---------------------------------------------------------------------------------------
class RobotLinkError(Exception):
    """Base class of every error raised by the robot link."""


class RobotUnreachableError(RobotLinkError):
    """The server could not be reached (refused, no answer within the connect timeout)."""


class RobotAuthError(RobotUnreachableError):
    """The server refused the authkey."""


class RobotLinkLostError(RobotLinkError):
    """The connection broke during a call, or is down and waiting for its next reconnect."""


class RobotCallTimeoutError(RobotLinkLostError):
    """A call got no answer within its deadline; the channel stays blocked until it returns."""


class RobotTargetRefusedError(RobotLinkError, ValueError):
    """A target that is malformed (not finite, wrong shape, out of range); nothing was sent."""


class RobotNotResetError(RobotLinkError):
    """A target for a controller that has not been reset since it was created."""


class RobotRemoteError(RobotLinkError):
    """The server raised while handling a call (the connection itself is fine)."""


class RobotStateError(RobotLinkError):
    """A state reply with missing keys, wrong shapes or non-finite values."""


# --- Manager classes ------------------------------------------------------------------------------
class BaseRpcManager(BaseManager):
    """Manager of the base server: typeid ``Base`` creates a base controller."""


class ArmRpcManager(BaseManager):
    """Manager of the arm server: typeid ``Arm`` creates an arm controller."""


BaseRpcManager.register(c.BASE_TYPEID)
ArmRpcManager.register(c.ARM_TYPEID)


# --- States ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BaseState:
    """Base odometry since the last base reset: x, y (m) and heading theta (rad), in ``odom``."""

    x: float
    y: float
    theta: float

    def __post_init__(self) -> None:
        _require_finite("base_pose", (self.x, self.y, self.theta), RobotStateError)


@dataclass(frozen=True)
class ArmState:
    """End-effector pose in the arm base frame (m; quaternion x, y, z, w; w >= 0) and gripper."""

    pos: tuple[float, float, float]
    quat: tuple[float, float, float, float]
    gripper: float  # 0 open .. 1 closed

    def __post_init__(self) -> None:
        _require_finite("arm_pos", self.pos, RobotStateError)
        _require_finite("arm_quat", self.quat, RobotStateError)
        _require_finite("gripper_pos", (self.gripper,), RobotStateError)
        if len(self.pos) != 3 or len(self.quat) != 4:
            raise RobotStateError("arm state needs a 3-vector position and a 4-vector quaternion")
        if abs(math.sqrt(sum(q * q for q in self.quat)) - 1.0) > 1e-3:
            raise RobotStateError(f"arm_quat {self.quat} is not a unit quaternion")
        if self.quat[3] < 0.0:
            raise RobotStateError(f"arm_quat {self.quat} has w < 0")
        if not 0.0 <= self.gripper <= 1.0:
            raise RobotStateError(f"gripper_pos {self.gripper} outside 0..1")


@dataclass(frozen=True)
class LinkStatus:
    """Diagnostics of one server channel."""

    name: str
    address: tuple[str, int]
    connected: bool
    needs_reset: bool
    reconnects: int  # controllers created after the first one (one per successful reconnect)
    last_error: str
    retry_in_s: float  # until the next connect attempt is allowed (0 when allowed now)
    backoff_s: float  # the delay set after the last failed attempt (0 while connected)


@dataclass(frozen=True)
class Backoff:
    """Delays between connect attempts: ``initial_s`` doubling (``factor``) up to ``max_s``."""

    initial_s: float = 0.2
    max_s: float = 5.0
    factor: float = 2.0


def _require_finite(name: str, values: Sequence[float], error: type[Exception]) -> None:
    if not all(math.isfinite(v) for v in values):
        raise error(f"{name} has non-finite values: {tuple(values)}")


def _vector(name: str, value: object, size: int, error: type[Exception]) -> np.ndarray:
    """``value`` as a finite float vector of ``size`` entries, else ``error``."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise error(f"{name} is not numeric: {value!r}") from exc
    if arr.shape != (size,):
        raise error(f"{name} must have shape ({size},), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise error(f"{name} has non-finite values: {arr.tolist()}")
    return arr


def base_action(x: float, y: float, theta: float) -> dict[str, np.ndarray]:
    """The ``execute_action`` dictionary of a base pose target, checked."""
    pose = _vector("base_pose", (x, y, theta), 3, RobotTargetRefusedError)
    return {c.KEY_BASE_POSE: pose}


def arm_action(pos: Sequence[float] | np.ndarray, quat: Sequence[float] | np.ndarray,
               gripper: float) -> dict[str, np.ndarray]:
    """The ``execute_action`` dictionary of an end-effector target, checked; quat is normalised."""
    p = _vector("arm_pos", pos, 3, RobotTargetRefusedError)
    q = _vector("arm_quat", quat, 4, RobotTargetRefusedError)
    g = _vector("gripper_pos", np.ravel(np.asarray(gripper, dtype=object)), 1,
                RobotTargetRefusedError)
    norm = float(np.linalg.norm(q))
    if norm < 1e-6:
        raise RobotTargetRefusedError("arm_quat is (close to) zero")
    if not c.GRIPPER_OPEN <= float(g[0]) <= c.GRIPPER_CLOSED:
        raise RobotTargetRefusedError(f"gripper_pos {float(g[0])} outside 0..1")
    return {c.KEY_ARM_POS: p, c.KEY_ARM_QUAT: q / norm, c.KEY_GRIPPER_POS: g}


def parse_base_state(state: object) -> BaseState:
    """A :class:`BaseState` from a ``Base.get_state()`` reply."""
    if not isinstance(state, Mapping) or c.KEY_BASE_POSE not in state:
        raise RobotStateError(f"base state without {c.KEY_BASE_POSE!r}: {state!r}")
    pose = _vector(c.KEY_BASE_POSE, state[c.KEY_BASE_POSE], 3, RobotStateError)
    return BaseState(float(pose[0]), float(pose[1]), float(pose[2]))


def parse_arm_state(state: object, gripper_tolerance: float = 0.02) -> ArmState:
    """An :class:`ArmState` from an ``Arm.get_state()`` reply.

    The quaternion is normalised and given w >= 0; a gripper reading up to ``gripper_tolerance``
    outside 0..1 (sensor noise) is clipped, anything further is refused.
    """
    if not isinstance(state, Mapping) or not set(state) >= c.ARM_STATE_KEYS:
        raise RobotStateError(f"arm state needs {sorted(c.ARM_STATE_KEYS)}: {state!r}")
    pos = _vector(c.KEY_ARM_POS, state[c.KEY_ARM_POS], 3, RobotStateError)
    quat = _vector(c.KEY_ARM_QUAT, state[c.KEY_ARM_QUAT], 4, RobotStateError)
    grip = _vector(c.KEY_GRIPPER_POS, np.ravel(np.asarray(state[c.KEY_GRIPPER_POS])), 1,
                   RobotStateError)
    norm = float(np.linalg.norm(quat))
    if norm < 1e-6:
        raise RobotStateError("arm_quat is zero")
    quat = quat / norm * (1.0 if quat[3] >= 0.0 else -1.0)
    g = float(grip[0])
    if not -gripper_tolerance <= g <= 1.0 + gripper_tolerance:
        raise RobotStateError(f"gripper_pos {g} outside 0..1")
    return ArmState(
        pos=(float(pos[0]), float(pos[1]), float(pos[2])),
        quat=(float(quat[0]), float(quat[1]), float(quat[2]), float(quat[3])),
        gripper=min(max(g, 0.0), 1.0),
    )


# --- Worker thread --------------------------------------------------------------------------------
class _Worker:
    """One daemon thread that runs submitted calls in order (a stuck call never blocks exit)."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]] | None] = (
            queue.SimpleQueue())
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        fut: Future[Any] = Future()
        self._jobs.put((fn, fut))
        return fut

    def stop(self) -> None:
        self._jobs.put(None)

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, fut = job
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
                fut.set_exception(exc)


@dataclass
class _Session:
    """One live connection: its manager, its single controller proxy and its worker thread."""

    manager: BaseManager | None
    proxy: Any
    worker: _Worker
    pending: Future[Any] | None = None  # a call that outlived its deadline


@dataclass
class _Channel:
    """The link to one server (base or arm)."""

    name: str
    typeid: str
    manager_cls: type[BaseManager]
    address: tuple[str, int]
    authkey: bytes
    create_kwargs: dict[str, Any]
    connect_timeout_s: float
    backoff: Backoff
    session: _Session | None = None
    needs_reset: bool = True
    ever_connected: bool = False
    reconnects: int = 0
    last_error: str = ""
    next_attempt_at: float = 0.0
    delay_s: float = 0.0
    lock: threading.RLock = field(default_factory=threading.RLock)

    # -- connection --------------------------------------------------------------------------
    def status(self) -> LinkStatus:
        """A snapshot for diagnostics; takes no lock, so it never waits behind a slow call."""
        s = self.session
        pending = s.pending if s is not None else None
        connected = s is not None and (pending is None or (
            pending.done() and not _is_lost(pending.exception())))
        return LinkStatus(self.name, self.address, connected, self.needs_reset,
                          self.reconnects, self.last_error,
                          max(0.0, self.next_attempt_at - time.monotonic()), self.delay_s)

    def live_session(self) -> _Session:
        """The current session, reconnecting when allowed; raises when there is none."""
        s = self.session
        if s is not None and s.pending is not None:
            if not s.pending.done():
                raise RobotLinkLostError(
                    f"{self.name}: an earlier call is still unanswered; not opening a second "
                    "controller while its connection lives")
            exc = s.pending.exception()
            s.pending = None
            if _is_lost(exc):
                self._drop(f"connection lost: {exc!r}")
                s = None
        if s is not None:
            return s
        wait = self.next_attempt_at - time.monotonic()
        if wait > 0.0:
            kind = RobotLinkLostError if self.ever_connected else RobotUnreachableError
            raise kind(f"{self.name}: not connected ({self.last_error}); next attempt in "
                       f"{wait:.2f} s")
        return self._open()

    def _open(self) -> _Session:
        worker = _Worker(f"robot-link-{self.name}")
        abandoned = threading.Event()

        def open_session() -> tuple[BaseManager, Any]:
            manager = self.manager_cls(address=self.address, authkey=self.authkey)
            manager.connect()
            if abandoned.is_set():  # the caller gave up: create no controller nobody will use
                raise RobotUnreachableError("connect finished after its deadline")
            return manager, getattr(manager, self.typeid)(**self.create_kwargs)

        fut = worker.submit(open_session)
        try:
            manager, proxy = fut.result(timeout=self.connect_timeout_s)
        except Exception as exc:
            abandoned.set()  # after a timeout the connect may still finish: it must build nothing
            worker.stop()
            note, error = self._open_failure(exc)
            self._failed(note)
            if isinstance(exc, FutureTimeout):
                raise error from None
            raise error from exc
        self.session = _Session(manager, proxy, worker)
        if self.ever_connected:
            self.reconnects += 1
        self.ever_connected = True
        self.needs_reset = True
        self.delay_s = 0.0
        self.next_attempt_at = 0.0
        return self.session

    def _open_failure(self, exc: Exception) -> tuple[str, RobotLinkError]:
        """Why opening a session failed: the note kept for diagnostics and the error to raise."""
        server = f"{self.name} server at {self.address}"
        if isinstance(exc, FutureTimeout):
            within = f"within {self.connect_timeout_s:.2f} s"
            return f"no answer {within}", RobotUnreachableError(f"{server} did not answer {within}")
        if isinstance(exc, AuthenticationError):
            return f"authkey refused: {exc}", RobotAuthError(f"{server} refused the authkey")
        if isinstance(exc, LOST_CONNECTION_ERRORS):
            return f"unreachable: {exc!r}", RobotUnreachableError(f"{server} unreachable: {exc!r}")
        return (f"controller creation failed: {exc!r}",
                RobotRemoteError(f"{self.name}: creating the controller failed: {exc!r}"))

    def _failed(self, error: str) -> None:
        self.last_error = error
        self.delay_s = (self.backoff.initial_s if self.delay_s <= 0.0
                        else min(self.backoff.max_s, self.delay_s * self.backoff.factor))
        self.next_attempt_at = time.monotonic() + self.delay_s

    def _drop(self, error: str) -> None:
        s = self.session
        self.session = None
        if s is not None:
            _retire(s)
        self._failed(error)

    # -- calls -------------------------------------------------------------------------------
    def call(self, method: str, args: tuple[Any, ...], timeout_s: float) -> Any:
        with self.lock:
            s = self.live_session()
            fut = s.worker.submit(lambda: getattr(s.proxy, method)(*args))
            try:
                return fut.result(timeout=timeout_s)
            except FutureTimeout:
                s.pending = fut
                self.last_error = f"{method}() unanswered after {timeout_s:.2f} s"
                raise RobotCallTimeoutError(f"{self.name}: {self.last_error}") from None
            except LOST_CONNECTION_ERRORS as exc:
                self._drop(f"connection lost during {method}(): {exc!r}")
                raise RobotLinkLostError(f"{self.name}: {self.last_error}") from exc
            except Exception as exc:
                self.last_error = f"{method}() raised on the server: {exc!r}"
                raise RobotRemoteError(f"{self.name}: {self.last_error}") from exc

    def close(self, stop_control: bool, timeout_s: float) -> None:
        with self.lock:
            s = self.session
            if s is None:
                return
            if stop_control and (s.pending is None or s.pending.done()):
                fut = s.worker.submit(s.proxy.close)
                try:
                    fut.result(timeout=timeout_s)
                except Exception as exc:  # noqa: BLE001 - closing is best effort
                    self.last_error = f"close() failed: {exc!r}"
            self.session = None
            _retire(s)


def _retire(s: _Session) -> None:
    """Stop a session's worker and let the proxy and manager die on that worker's thread.

    A dropped proxy tells its server to release the controller, opening a fresh connection to do
    so; handing the last references to the worker keeps that (possibly slow) goodbye off the
    caller's thread.
    """
    held = (s.proxy, s.manager)
    s.proxy = s.manager = None
    s.worker.submit(lambda: held and None)
    s.worker.stop()


def _is_lost(exc: BaseException | None) -> bool:
    return isinstance(exc, LOST_CONNECTION_ERRORS)


# --- Client ---------------------------------------------------------------------------------------
class RobotLink:
    """Client of a TidyBot++ (or a simulated or fake one): base and arm servers.

    Nothing connects at construction; :meth:`connect` waits for both servers at start-up, and
    every call connects (or reconnects, subject to the backoff) when needed. The link never resets
    the robot by itself: after each new controller (see :attr:`LinkStatus.needs_reset`) targets are
    refused with :class:`RobotNotResetError` until :meth:`reset_base` / :meth:`reset_arm`.

    Thread-safe: each server has a lock; calls to one server are serialised.
    """

    def __init__(
        self,
        host: str,
        authkey: bytes,
        *,
        base_port: int = c.BASE_RPC_PORT,
        arm_port: int = c.ARM_RPC_PORT,
        connect_timeout_s: float = 2.0,
        call_timeout_s: float = 1.0,
        reset_timeout_s: float = 60.0,
        backoff: Backoff | None = None,
        base_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(authkey, bytes) or not authkey:
            raise ValueError("authkey must be non-empty bytes (it comes from a parameter)")
        if min(connect_timeout_s, call_timeout_s, reset_timeout_s) <= 0.0:
            raise ValueError("timeouts must be positive")
        self.call_timeout_s = call_timeout_s
        self.reset_timeout_s = reset_timeout_s
        bo = backoff or Backoff()
        self._base = _Channel("base", c.BASE_TYPEID, BaseRpcManager, (host, base_port), authkey,
                              dict(base_kwargs or {}), connect_timeout_s, bo)
        self._arm = _Channel("arm", c.ARM_TYPEID, ArmRpcManager, (host, arm_port), authkey, {},
                             connect_timeout_s, bo)

    # -- connection --------------------------------------------------------------------------
    def connect(self, timeout_s: float = 10.0) -> None:
        """Connect both servers, retrying with the backoff for up to ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        for ch in (self._base, self._arm):
            while True:
                with ch.lock:
                    try:
                        ch.live_session()
                        break
                    except RobotLinkError:
                        wait = ch.next_attempt_at - time.monotonic()
                        if time.monotonic() + max(wait, 0.0) > deadline:
                            raise
                time.sleep(max(wait, 0.0))

    def settle(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for calls that outlived their deadline to be answered.

        A server that stalls (a loaded computer) answers late; until it does, every call on its
        channel is refused at once (no second controller is opened beside the stuck one). A
        caller about to start something long (a primitive) waits here first, instead of
        failing at once on a link that is about to come back. Makes no call and takes no
        channel lock. True when no call is outstanding any more.
        """
        deadline = time.monotonic() + max(0.0, timeout_s)
        for ch in (self._base, self._arm):
            s = ch.session
            pending = s.pending if s is not None else None
            if pending is not None and not pending.done():
                wait_futures([pending], timeout=max(0.0, deadline - time.monotonic()))
        return all(s is None or s.pending is None or s.pending.done()
                   for s in (self._base.session, self._arm.session))

    def status(self) -> tuple[LinkStatus, LinkStatus]:
        """Diagnostics of the (base, arm) channels."""
        return self._base.status(), self._arm.status()

    @property
    def connected(self) -> bool:
        return all(s.connected for s in self.status())

    @property
    def reconnects(self) -> int:
        return sum(s.reconnects for s in self.status())

    def close(self, stop_control: bool = True) -> None:
        """Stop both controllers (``close()`` on the servers, unless not asked) and disconnect."""
        self._base.close(stop_control, self.call_timeout_s)
        self._arm.close(stop_control, self.call_timeout_s)

    # -- resets ------------------------------------------------------------------------------
    def reset_base(self) -> None:
        """Restart base control; odometry is zero afterwards. Only ever called explicitly."""
        self._reset(self._base)

    def reset_arm(self) -> None:
        """Open the gripper and retract the arm (the arm moves!). Only ever called explicitly."""
        self._reset(self._arm)

    def _reset(self, ch: _Channel) -> None:
        with ch.lock:
            ch.call("reset", (), self.reset_timeout_s)
            ch.needs_reset = False

    # -- targets -----------------------------------------------------------------------------
    def send_base_pose(self, x: float, y: float, theta: float) -> None:
        """Base position target in ``odom`` (m, m, rad); non-blocking on the server."""
        self._send(self._base, base_action(x, y, theta))

    def send_arm(self, pos: Sequence[float] | np.ndarray, quat: Sequence[float] | np.ndarray,
                 gripper: float) -> None:
        """End-effector target (m; x, y, z, w) and gripper (0 open .. 1 closed); stream it."""
        self._send(self._arm, arm_action(pos, quat, gripper))

    def _send(self, ch: _Channel, action: dict[str, np.ndarray]) -> None:
        with ch.lock:
            ch.live_session()
            if ch.needs_reset:
                raise RobotNotResetError(
                    f"{ch.name}: the controller has not been reset since it was created; "
                    "call reset explicitly first")
            ch.call("execute_action", (action,), self.call_timeout_s)

    # -- states ------------------------------------------------------------------------------
    def base_state(self) -> BaseState:
        return parse_base_state(self._base.call("get_state", (), self.call_timeout_s))

    def arm_state(self) -> ArmState:
        return parse_arm_state(self._arm.call("get_state", (), self.call_timeout_s))


# --- Serving --------------------------------------------------------------------------------------
def _serve(typeids: dict[str, Callable[..., Any]], host: str, port: int, authkey: bytes,
           report: Any) -> None:
    """Child process body: register ``typeids`` on a fresh manager class and serve forever."""

    class _Served(BaseManager):
        pass

    for typeid, factory in typeids.items():
        _Served.register(typeid, callable=factory)
    server = _Served(address=(host, port), authkey=authkey).get_server()
    report.send(server.address)
    report.close()
    server.serve_forever()


def start_controller_server(
    typeids: dict[str, Callable[..., Any]],
    authkey: bytes,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    context: str = "spawn",
    start_timeout_s: float = 20.0,
) -> tuple[tuple[str, int], Callable[..., None]]:
    """Serve controller factories under their typeids in a separate process.

    ``typeids`` maps typeid to a picklable factory (a module-level class or a ``functools.partial``
    of one), e.g. ``{"Base": FakeBase}``. Port 0 picks a free port. Returns the bound address and
    ``stop(kill=False)``, which terminates (or kills) the server process and waits for it.
    """
    ctx = get_context(context)
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(  # type: ignore[attr-defined]  # typeshed: BaseContext lacks Process
        target=_serve, args=(typeids, host, port, authkey, send), daemon=True)
    proc.start()
    send.close()
    try:
        if not recv.poll(start_timeout_s):
            raise RuntimeError(f"controller server did not start within {start_timeout_s} s")
        address = recv.recv()
    except (EOFError, OSError) as exc:
        proc.kill()
        proc.join(5.0)
        raise RuntimeError(f"controller server exited at start (code {proc.exitcode})") from exc
    except RuntimeError:
        proc.kill()
        proc.join(5.0)
        raise
    finally:
        recv.close()

    def stop(kill: bool = False) -> None:
        if proc.is_alive():
            if kill:
                proc.kill()
            else:
                proc.terminate()
        proc.join(5.0)

    return (str(address[0]), int(address[1])), stop
