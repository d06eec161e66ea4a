"""The executor node over real DDS, against fake TidyBot++ servers and a synthetic pole camera.

The fake servers (:mod:`mimir_robot.fakes`) run in spawned processes, so the node talks to them
through the real RPC link. The arm's small world holds one thing (the handle) at the point where
the node's own targeting should put the grasp: the fingers stop on it only when the hand gets
there, so an open that succeeds proves that camera, TF, pointing and motion agree.

The camera ``pole`` sits 1.2 m up on the base, pitched down, and sees a vertical door (a
``cabinet``) with a thin vertical handle bar in front of it near its right edge; depth is ray
cast at every pixel. The test publishes depth, camera info, object and part segmentation stamped
with the current time at 5 Hz, and static TF ``map -> odom`` (identity) and ``base_link ->
pole_color_optical_frame``. Every rig runs in its own namespace, with ``/tf``, ``/tf_static`` and
``/diagnostics`` remapped into it, so rigs alive at the same time do not see each other.
"""

from __future__ import annotations

import math
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from multiprocessing.managers import BaseManager
from typing import Any

import numpy as np
import pytest
import rclpy
from diagnostic_msgs.msg import KeyValue
from geometry_msgs.msg import PoseStamped
from nav_msgs.msg import Odometry
from rclpy.context import Context
from rclpy.executors import MultiThreadedExecutor
from rclpy.parameter import Parameter
from ros_helpers import DiagnosticsCounters, call_service, spinning_executor, wait_until
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import Float64, Header
from std_srvs.srv import Trigger

from mimir.nodes.perception.messages import intrinsics_to_camera_info, segmentation_to_msg
from mimir.nodes.robot.executor_node import ExecutorNode, ExecutorStartupError
from mimir.ros import qos
from mimir.ros.actions import ActionClient
from mimir.ros.images import numpy_to_image
from mimir.ros.tf import TransformPublisher, matrix_to_transform
from mimir.ros.time import from_seconds
from mimir.transforms import TransformError
from mimir_msgs.action import ExecutePrimitive
from mimir_msgs.msg import InteractionEvent, Segmentation
from mimir_perception.camera import Intrinsics, make_transform
from mimir_perception.segmentation import InstanceInfo, SegmentationResult
from mimir_robot.fakes import RETRACT_POS, start_fake_server
from mimir_robot.profile import RobotProfile

try:
    from tf2_msgs.msg import TFMessage
except ImportError:  # pragma: no cover - tf2_msgs is built by scripts/setup.sh
    TFMessage = None

pytestmark = [pytest.mark.ros]

Result = ExecutePrimitive.Result
PROFILE = RobotProfile()
MOUNT = np.asarray(PROFILE.arm_mount)
FAST = {"max_ee_speed": 0.3, "max_ee_turn": 1.5}  # profile overrides: shorter primitives

# --------------------------------------------------------------------------- the synthetic scene
INTR = Intrinsics(200.0, 200.0, 159.5, 119.5, 320, 240)
CAMERA_FRAME = "pole_color_optical_frame"
_OPTICAL = np.column_stack([[0.0, -1.0, 0.0], [0.0, 0.0, -1.0], [1.0, 0.0, 0.0]])  # REP-103
_PITCH = math.radians(25.0)
_DOWN = np.array([[math.cos(_PITCH), 0.0, math.sin(_PITCH)], [0.0, 1.0, 0.0],
                  [-math.sin(_PITCH), 0.0, math.cos(_PITCH)]])
#: base_link <- camera: 1.2 m up, 10 cm behind the base centre, looking forward, pitched down 25°.
BASE_FROM_CAMERA = make_transform(_DOWN @ _OPTICAL, [-0.1, 0.0, 1.2])


@dataclass(frozen=True)
class Door:
    """A door panel in the plane x = ``x`` (base_link) with a handle bar standing in front."""

    x: float = 0.7
    y: tuple[float, float] = (-0.15, 0.35)
    z: tuple[float, float] = (0.45, 1.15)
    handle_y: float = -0.08  # near the right edge (seen from the robot): hinge on the left
    handle_z: float = 0.8
    handle_width: float = 0.025
    handle_height: float = 0.2
    handle_standoff: float = 0.04
    handle_depth: bool = True  # False: the depth camera gives no reading on the handle

    @property
    def centre(self) -> tuple[float, float, float]:
        """The door's centre: base_link, and map while odometry is zero."""
        return (self.x, 0.5 * (self.y[0] + self.y[1]), 0.5 * (self.z[0] + self.z[1]))

    @property
    def grasp_base(self) -> np.ndarray:
        """Where targeting should grip: ``grasp_depth`` past the handle's front face."""
        return np.array([self.x - self.handle_standoff + PROFILE.grasp_depth, self.handle_y,
                         self.handle_z])

    @property
    def hand_base(self) -> np.ndarray:
        """Where the tool point goes to grip there (the pads lie ``pad_offset`` ahead)."""
        return self.grasp_base - np.array([PROFILE.pad_offset, 0.0, 0.0])


NEAR = Door()
FAR = Door(x=3.0, handle_width=0.05, handle_height=0.3)  # 3 m away: out of the arm's reach
#: The fake arm's thing: the handle's grasp point in the arm base frame (the arm's finger pads lie
#: the profile's ``pad_offset`` ahead of its tool point, as the executor assumes).
THING = tuple(float(v) for v in NEAR.grasp_base - MOUNT)


def _plane_hits(dirs: np.ndarray, origin: np.ndarray, x: float, ys: tuple[float, float],
                zs: tuple[float, float]) -> np.ndarray:
    """Ray parameter (= optical depth) of each ray's hit on a rectangle in the plane x, else inf."""
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (x - origin[0]) / dirs[..., 0]
    y = origin[1] + t * dirs[..., 1]
    z = origin[2] + t * dirs[..., 2]
    hit = (t > 0) & (y >= ys[0]) & (y <= ys[1]) & (z >= zs[0]) & (z <= zs[1])
    return np.where(hit, t, np.inf)


@dataclass(frozen=True)
class Frame:
    """One camera frame's content: depth (m), object and part segmentation."""

    depth: np.ndarray
    objects: SegmentationResult
    parts: SegmentationResult


def _segmentation(mask: np.ndarray, label: str) -> SegmentationResult:
    rows, cols = np.nonzero(mask)
    box = (int(cols.min()), int(rows.min()), int(cols.max()) + 1, int(rows.max()) + 1)
    return SegmentationResult(mask.astype(np.uint16),
                              (InstanceInfo(1, label, 0.9, box, int(mask.sum())),), 0.0, "pole")


def render(door: Door) -> Frame:
    """Ray-cast depth of the door, its handle and a wall 0.6 m behind; the two masks."""
    v, u = np.mgrid[0:INTR.height, 0:INTR.width].astype(np.float64)
    rays = np.stack(((u - INTR.cx) / INTR.fx, (v - INTR.cy) / INTR.fy, np.ones_like(u)), -1)
    dirs, origin = rays @ BASE_FROM_CAMERA[:3, :3].T, BASE_FROM_CAMERA[:3, 3]
    wall = _plane_hits(dirs, origin, door.x + 0.6, (-10.0, 10.0), (-10.0, 10.0))
    panel = _plane_hits(dirs, origin, door.x, door.y, door.z)
    hw, hh = door.handle_width / 2, door.handle_height / 2
    bar = _plane_hits(dirs, origin, door.x - door.handle_standoff,
                      (door.handle_y - hw, door.handle_y + hw),
                      (door.handle_z - hh, door.handle_z + hh))
    depth = np.minimum(np.minimum(wall, panel), bar)
    on_bar = np.isfinite(bar) & (bar <= depth)
    on_door = (np.isfinite(panel) & (panel <= depth)) | on_bar
    depth = np.where(np.isfinite(depth), depth, 0.0).astype(np.float32)
    if not door.handle_depth:
        depth[on_bar] = 0.0
    return Frame(depth, _segmentation(on_door, "cabinet"), _segmentation(on_bar, "handle"))


# --------------------------------------------------------------------------- fake servers
class _ControlManager(BaseManager):
    pass


_ControlManager.register("FakeControl")


class Servers:
    """Fake base and arm servers of one rig (spawned processes), stopped at teardown."""

    def __init__(self, **arm_kwargs: Any) -> None:
        self.authkey = b"mimir-exec-" + secrets.token_hex(8).encode()
        self._stops: list[Callable[..., None]] = []
        self.base = self.start("Base", rate=8.0)
        self.arm_kwargs = {"rate": 12.0, "gripper_rate": 12.0, "thing": THING,
                           "pad_offset": PROFILE.pad_offset, **arm_kwargs}
        self.arm = self.start("Arm", **self.arm_kwargs)
        self.stop_arm = self._stops[-1]

    def start(self, typeid: str, port: int = 0, **kwargs: Any) -> tuple[str, int]:
        address, stop = start_fake_server(typeid, self.authkey, port=port, **kwargs)
        self._stops.append(stop)
        return address

    def control(self, address: tuple[str, int]) -> Any:
        manager = _ControlManager(address=address, authkey=self.authkey)
        manager.connect()
        return manager.FakeControl()  # type: ignore[attr-defined]

    def stop_all(self) -> None:
        for stop in self._stops:
            stop(kill=True)


# --------------------------------------------------------------------------- the rig
@dataclass
class Stamped:
    """A message with the monotonic time it arrived."""

    t: float
    msg: Any


class Rig:
    """Servers, the executor node, a driver node with the camera, recorders and clients."""

    def __init__(self, ctx: Context, ex: MultiThreadedExecutor, *,
                 arm_kwargs: dict[str, Any] | None = None, localised: bool = True,
                 **params: Any) -> None:
        self.ns = f"/exec_test_{uuid.uuid4().hex[:8]}"
        remaps = ["--ros-args"]
        for topic in ("/tf", "/tf_static", "/diagnostics"):
            remaps += ["-r", f"{topic}:={self.ns}{topic}"]
        self.servers = Servers(**(arm_kwargs or {}))
        self.ex = ex
        self._lock = threading.Lock()
        self.odom: list[Stamped] = []
        self.tf: list[Stamped] = []
        self.achieved: list[Stamped] = []
        self.commanded: list[Stamped] = []
        self.gripper: list[Stamped] = []
        self.events: list[InteractionEvent] = []
        self.frame = render(NEAR)
        self.driver = rclpy.create_node("executor_test_driver", context=ctx, namespace=self.ns,
                                        cli_args=remaps)
        ex.add_node(self.driver)
        self._subscribe()
        self.diag = DiagnosticsCounters(self.driver, "executor")
        self._start_camera(localised)
        overrides = {"host": "127.0.0.1", "base_port": self.servers.base[1],
                     "arm_port": self.servers.arm[1], "authkey": self.servers.authkey.decode(),
                     "reset_on_start": True, "pointing_cameras": ["pole"],
                     "call_timeout_s": 1.5, "connect_timeout_s": 2.0, "state_rate_hz": 10.0,
                     "diagnostics_period": 0.25, "view_timeout_s": 2.0, **FAST, **params}
        self.node = ExecutorNode(
            context=ctx, namespace=self.ns, cli_args=remaps,
            parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()])
        ex.add_node(self.node)
        self.client = ActionClient(self.driver, ExecutePrimitive, "execute_primitive")
        assert self.client.wait_for_server(timeout_sec=20.0), "execute_primitive not served"
        assert wait_until(self.node._ready.is_set, 20.0), "robot link never came up"
        # the node hears its own odom -> base_link (and the static TF) over DDS a moment later
        assert not localised or wait_until(self._node_has_tf, 10.0), \
            "the node never heard map -> base_link"

    def _node_has_tf(self) -> bool:
        try:
            self.node._tf.lookup("map", CAMERA_FRAME, 0.0)
        except TransformError:
            return False
        return True

    # -- recorders ---------------------------------------------------------------------------
    def _keep(self, table: list[Stamped]) -> Callable[[Any], None]:
        def keep(msg: Any) -> None:
            with self._lock:
                table.append(Stamped(time.monotonic(), msg))
        return keep

    def _subscribe(self) -> None:
        d = self.driver
        d.create_subscription(Odometry, "odom", self._keep(self.odom), qos.EVENTS)
        d.create_subscription(PoseStamped, "robot/ee_pose/achieved", self._keep(self.achieved),
                              qos.EVENTS)
        d.create_subscription(PoseStamped, "robot/ee_pose/commanded",
                              self._keep(self.commanded), qos.EVENTS)
        d.create_subscription(Float64, "robot/gripper", self._keep(self.gripper), qos.EVENTS)
        d.create_subscription(InteractionEvent, "interaction_events", self._on_event, qos.EVENTS)
        if TFMessage is not None:
            d.create_subscription(TFMessage, "/tf", self._keep(self.tf), qos.TF)

    def _on_event(self, msg: InteractionEvent) -> None:
        with self._lock:
            self.events.append(msg)

    def latest(self, table: list[Stamped]) -> Any:
        with self._lock:
            return table[-1].msg if table else None

    def count(self, table: list[Stamped]) -> int:
        with self._lock:
            return len(table)

    def since(self, table: list[Stamped], t: float) -> list[Any]:
        with self._lock:
            return [s.msg for s in table if s.t >= t]

    def events_of(self, interaction_id: str) -> list[InteractionEvent]:
        with self._lock:
            return [e for e in self.events if e.interaction_id == interaction_id]

    def odom_xy(self) -> tuple[float, float]:
        msg = self.latest(self.odom)
        assert msg is not None, "no odometry"
        return float(msg.pose.pose.position.x), float(msg.pose.pose.position.y)

    # -- camera ------------------------------------------------------------------------------
    def _start_camera(self, localised: bool) -> None:
        d = self.driver
        root = "cameras/pole"
        self._info_pub = d.create_publisher(CameraInfo, f"{root}/color/camera_info", qos.SENSOR)
        self._depth_pub = d.create_publisher(Image, f"{root}/depth/image_raw", qos.SENSOR)
        self._seg_pub = d.create_publisher(Segmentation, f"{root}/segmentation", qos.SENSOR)
        self._parts_pub = d.create_publisher(Segmentation, f"{root}/parts", qos.SENSOR)
        self._camera_lock = threading.Lock()
        static = TransformPublisher(d, static=True)
        now = self._now()
        static.send([matrix_to_transform(BASE_FROM_CAMERA, "base_link", CAMERA_FRAME, now)])
        self._static = static
        if localised:
            self.localise()
        d.create_timer(0.2, self._publish_frame)

    def localise(self) -> None:
        """From now on ``map -> odom`` is known (identity), as a localiser would send it."""
        self._static.send([matrix_to_transform(np.eye(4), "map", "odom", self._now())])

    def _now(self) -> float:
        return self.driver.get_clock().now().nanoseconds * 1e-9

    def _publish_frame(self) -> None:
        with self._camera_lock:
            frame = self.frame
            header = Header(frame_id=CAMERA_FRAME, stamp=from_seconds(self._now()))
            self._info_pub.publish(intrinsics_to_camera_info(INTR, header))
            self._depth_pub.publish(numpy_to_image(frame.depth, "32FC1", header))
            self._seg_pub.publish(segmentation_to_msg(frame.objects, header, "test", "pole"))
            self._parts_pub.publish(segmentation_to_msg(frame.parts, header, "test", "pole"))

    def show(self, door: Door) -> None:
        """From now on the camera sees ``door`` (every later stamp shows it)."""
        frame = render(door)
        with self._camera_lock:
            self.frame = frame

    # -- goals -------------------------------------------------------------------------------
    def send(self, goal: ExecutePrimitive.Goal) -> Any:
        future = self.client.send_goal_async(goal)
        assert wait_until(future.done, 15.0), "execute_primitive did not answer the goal"
        return future.result()

    def result(self, handle: Any, timeout: float = 120.0) -> Any:
        future = handle.get_result_async()
        assert wait_until(future.done, timeout), "execute_primitive did not finish"
        return future.result().result

    def run(self, goal: ExecutePrimitive.Goal, timeout: float = 120.0) -> Any:
        handle = self.send(goal)
        assert handle.accepted
        return self.result(handle, timeout)

    def reset(self) -> None:
        res = call_service(self.driver, Trigger, "robot/reset", Trigger.Request(), 20.0)
        assert res.success, res.message

    def close(self) -> None:
        for node in (self.node, self.driver):
            self.ex.remove_node(node)
            node.destroy_node()
        self.servers.stop_all()


def goal(primitive: str, target_id: str = "", *, position: tuple[float, ...] | None = None,
         frame: str = "map", yaw: float = 0.0, **params: str) -> ExecutePrimitive.Goal:
    msg = ExecutePrimitive.Goal(primitive=primitive, target_id=target_id, task="test")
    if position is not None:
        msg.use_target_pose = True
        msg.target_pose.header.frame_id = frame
        p = msg.target_pose.pose
        p.position.x, p.position.y, p.position.z = (float(v) for v in position)
        p.orientation.z, p.orientation.w = math.sin(yaw / 2.0), math.cos(yaw / 2.0)
    msg.parameters = [KeyValue(key=k, value=v) for k, v in params.items()]
    return msg


def open_cabinet(door: Door = NEAR) -> ExecutePrimitive.Goal:
    return goal("open", "cabinet_1", position=door.centre, label="cabinet")


# --------------------------------------------------------------------------- fixtures
@pytest.fixture
def ros() -> Iterator[tuple[Context, MultiThreadedExecutor]]:
    """An rclpy context and executor of the test's own (rigs add and remove their nodes).

    Not shared across tests: a callback a previous test left blocked (a reset waiting on a
    killed server, a stuck call) kept the next test's reset from being answered.
    """
    context = Context()
    rclpy.init(context=context)
    try:
        with spinning_executor(context, num_threads=12) as ex:
            yield context, ex
    finally:
        rclpy.try_shutdown(context=context)


@pytest.fixture
def shared_rig(ros: tuple[Context, MultiThreadedExecutor]) -> Iterator[Rig]:
    rig = Rig(*ros)
    try:
        yield rig
    finally:
        rig.close()


@pytest.fixture
def rig(shared_rig: Rig) -> Rig:
    """The shared rig, reset: odometry zero, arm retracted, the near door in view.

    A primitive the previous test left running (a canceled goal winding down, a call that
    was stuck until released) would refuse or delay the reset and move the base after it:
    the rig waits until the node is idle first.
    """
    assert wait_until(lambda: not shared_rig.node._busy.locked(), 60.0), \
        "a primitive of the previous test is still running"
    shared_rig.show(NEAR)
    shared_rig.reset()
    return shared_rig


@pytest.fixture
def make_rig(ros: tuple[Context, MultiThreadedExecutor]) -> Iterator[Callable[..., Rig]]:
    """Builds rigs of the test's own (another arm world, a server to kill)."""
    rigs: list[Rig] = []

    def make(**kwargs: Any) -> Rig:
        rigs.append(Rig(*ros, **kwargs))
        return rigs[-1]

    try:
        yield make
    finally:
        for r in rigs:
            r.close()


# --------------------------------------------------------------------------- the tests
def test_contract_signals_follow_the_fakes(rig: Rig) -> None:
    t0 = time.monotonic()
    tables = (rig.odom, rig.achieved, rig.gripper, *((rig.tf,) if TFMessage else ()))
    assert wait_until(lambda: all(rig.since(t, t0) for t in tables), 5.0), "signals missing"
    odom = rig.latest(rig.odom)
    assert (odom.header.frame_id, odom.child_frame_id) == ("odom", "base_link")
    assert abs(odom.pose.pose.position.x) < 1e-6 and abs(odom.pose.pose.position.y) < 1e-6
    assert abs(odom.pose.pose.orientation.w - 1.0) < 1e-6
    ee = rig.latest(rig.achieved)
    assert ee.header.frame_id == "base_link"
    p = ee.pose.position
    np.testing.assert_allclose([p.x, p.y, p.z], RETRACT_POS + MOUNT, atol=1e-3)
    assert rig.latest(rig.gripper).data == pytest.approx(0.0, abs=1e-3)
    if TFMessage is not None:
        pairs = {(t.header.frame_id, t.child_frame_id)
                 for m in rig.since(rig.tf, t0) for t in m.transforms}
        assert ("odom", "base_link") in pairs
    assert wait_until(lambda: all(rig.diag.count(f"{part}.connected") == 1
                                  and rig.diag.count(f"{part}.needs_reset") == 0
                                  for part in ("base", "arm")), 5.0), rig.diag.counters


def test_open_the_cabinet_end_to_end(rig: Rig) -> None:
    t0 = time.monotonic()
    result = rig.run(open_cabinet())
    assert result.success and result.outcome == "OPENED", result
    assert result.error_code == Result.NONE
    events = rig.events_of(result.interaction_id)
    assert wait_until(lambda: len(rig.events_of(result.interaction_id)) == 2, 5.0)
    events = rig.events_of(result.interaction_id)
    assert [e.phase for e in events] == [InteractionEvent.PHASE_STARTED,
                                         InteractionEvent.PHASE_ENDED]
    assert events[1].success and events[1].outcome == "OPENED"
    assert all(e.primitive == "open" and e.target_id == "cabinet_1" for e in events)
    commanded = rig.since(rig.commanded, t0)
    assert commanded and all(m.header.frame_id == "base_link" for m in commanded)
    hand = np.array([[m.pose.position.x, m.pose.position.y, m.pose.position.z]
                     for m in commanded])
    # the hand was sent to the handle the camera showed, then swung it towards the robot
    assert float(np.min(np.linalg.norm(hand - NEAR.hand_base, axis=1))) < 0.01
    assert float(hand[:, 0].min()) < NEAR.hand_base[0] - 0.2


def _yaw(msg: Odometry) -> float:
    q = msg.pose.pose.orientation
    return 2.0 * math.atan2(q.z, q.w)


def test_the_tag_search_turns_until_the_robot_is_localised(
        make_rig: Callable[..., Rig]) -> None:
    """No map pose at start: the base turns to the first heading and stands there; once
    ``map -> odom`` appears the search ends and the base faces where it started."""
    rig = make_rig(localised=False, search_tags_on_start=True, tag_search_turns=[0.5],
                   tag_search_dwell_s=6.0)
    assert wait_until(lambda: rig.latest(rig.odom) is not None
                      and abs(_yaw(rig.latest(rig.odom)) - 0.5) < 0.05, 20.0), "never turned"
    # busy meanwhile: a primitive is refused rather than run on a base that is turning
    assert not rig.send(open_cabinet()).accepted
    rig.localise()
    assert wait_until(lambda: rig.diag.count("tag_search.found") == 1, 20.0), rig.diag.counters
    assert wait_until(lambda: abs(_yaw(rig.latest(rig.odom))) < 0.05, 10.0)
    assert math.hypot(*rig.odom_xy()) < 0.05
    assert wait_until(lambda: not rig.node._busy.locked(), 5.0)


def test_a_localised_robot_does_not_turn(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(search_tags_on_start=True, tag_search_dwell_s=2.0)
    assert wait_until(lambda: rig.diag.count("tag_search.found") == 1, 20.0), rig.diag.counters
    # the search may end before the first odometry reaches this test: wait for some, then
    # every pose the base reported since it started must be the one it started at
    assert wait_until(lambda: rig.count(rig.odom) >= 3, 10.0), "no odometry"
    poses = rig.since(rig.odom, 0.0)
    assert all(abs(_yaw(m)) < 1e-3 for m in poses), [_yaw(m) for m in poses]
    assert math.hypot(*rig.odom_xy()) < 1e-3


def test_locked_cabinet_is_no_motion(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(arm_kwargs={"thing_locked": True})
    result = rig.run(open_cabinet())
    assert not result.success and result.outcome == "NO_MOTION", result
    assert result.error_code == Result.EXECUTION_FAILED
    assert "did not move" in result.error_msg


def test_lost_arm_server_fails_with_link_lost(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    t0 = time.monotonic()
    handle = rig.send(open_cabinet())
    assert handle.accepted
    assert wait_until(lambda: len(rig.since(rig.commanded, t0)) >= 3, 15.0), "arm never moved"
    rig.servers.stop_arm(kill=True)
    killed = time.monotonic()
    result = rig.result(handle, 15.0)
    assert not result.success and result.outcome == "LINK_LOST", result
    assert result.error_code == Result.EXECUTION_FAILED
    assert time.monotonic() - killed < 5.0
    assert wait_until(lambda: rig.diag.count("arm.connected") == 0, 5.0)
    assert rig.diag.count("base.connected") == 1
    # a new arm server on the same port: the node reconnects and resets when asked
    rig.servers.start("Arm", port=rig.servers.arm[1], **rig.servers.arm_kwargs)

    def reset_ok() -> bool:
        res = call_service(rig.driver, Trigger, "robot/reset", Trigger.Request(), 10.0)
        return bool(res.success)

    assert wait_until(reset_ok, 15.0), "reset never succeeded after the server came back"
    assert wait_until(lambda: rig.diag.count("arm.connected") == 1, 5.0)
    assert rig.diag.count("arm.reconnects") >= 1


def test_hung_arm_server_is_bounded_and_the_node_recovers(rig: Rig) -> None:
    control = rig.servers.control(rig.servers.arm)
    t0 = time.monotonic()
    handle = rig.send(open_cabinet())
    assert handle.accepted
    assert wait_until(lambda: len(rig.since(rig.commanded, t0)) >= 3, 10.0), "arm never moved"
    release = threading.Timer(1.5, control.set_hang, (False,))
    try:
        control.set_hang(True)
        hung = time.monotonic()
        result = rig.result(handle, 10.0)
        took = time.monotonic() - hung
        assert not result.success and result.outcome == "LINK_LOST", result
        assert "unanswered" in result.error_msg
        assert took < rig.node.config.call_timeout_s + 3.0, took
        # a goal that comes while the late call is still out waits for the stalled server to
        # answer (up to link_settle_s) instead of failing at once with "still unanswered"
        release.start()
        waited = rig.run(goal("move_to", position=(0.0, 0.0, 0.0)))
    finally:
        release.cancel()
        control.set_hang(False)
    released = time.monotonic()
    assert waited.success and waited.outcome == "REACHED", waited
    assert rig.node.counters.get("link_settled") == 1
    # the stuck call returns once released (the channel waits for it, it opens no second
    # controller); then the state comes back and the same controller serves the next goal
    assert wait_until(lambda: bool(rig.since(rig.achieved, released + 0.2)), 10.0)
    # a reset moves the arm behind the motion's back: the next targets start from where it is
    rig.reset()
    last = rig.node.motion._last_hand
    assert last is not None
    np.testing.assert_allclose(last[0], RETRACT_POS + MOUNT, atol=2e-3)
    assert rig.node.motion.gripper_command == 0.0
    after = rig.run(goal("move_to", position=(0.2, 0.0, 0.0)))
    assert after.success and after.outcome == "REACHED", after
    assert rig.diag.count("arm.reconnects") == 0


def test_target_out_of_reach_is_unreachable(rig: Rig) -> None:
    rig.show(FAR)
    t0 = time.monotonic()
    result = rig.run(open_cabinet(FAR))
    assert not result.success and result.outcome == "OUTSIDE_WORKSPACE", result
    assert result.error_code == Result.UNREACHABLE
    assert "workspace" in result.error_msg
    assert not rig.since(rig.commanded, t0)


def test_handle_without_depth_is_no_depth(rig: Rig) -> None:
    rig.show(replace(NEAR, handle_depth=False))
    t0 = time.monotonic()
    result = rig.run(open_cabinet())
    assert not result.success and result.outcome == "NO_DEPTH", result
    assert result.error_code == Result.EXECUTION_FAILED
    assert not rig.since(rig.commanded, t0)
    assert rig.odom_xy() == pytest.approx((0.0, 0.0), abs=1e-6)
    assert wait_until(lambda: len(rig.events_of(result.interaction_id)) == 2, 5.0)


def test_cancel_holds_and_a_second_goal_is_rejected(rig: Rig) -> None:
    handle = rig.send(goal("move_to", position=(3.0, 0.0, 0.0)))
    assert handle.accepted
    assert wait_until(lambda: rig.odom_xy()[0] > 0.1, 15.0), "the base never drove"
    second = rig.send(goal("move_to", position=(0.5, 0.0, 0.0)))
    assert not second.accepted
    cancel = handle.cancel_goal_async()
    assert wait_until(cancel.done, 5.0)
    result = rig.result(handle, 10.0)
    assert not result.success and result.outcome == "CANCELED", result
    assert result.error_code == Result.CANCELED
    stopped = rig.odom_xy()[0]
    time.sleep(0.8)
    held = rig.odom_xy()[0]
    assert 0.1 < held < 2.0
    assert abs(held - stopped) < 0.05, (stopped, held)


@pytest.mark.parametrize(("bad", "code"), [
    (goal("fly", "cabinet_1", position=NEAR.centre), Result.UNKNOWN_PRIMITIVE),
    (goal("open", "cabinet_1", position=(math.nan, 0.0, 0.8)), Result.UNKNOWN_TARGET),
    (goal("move_to", position=(1.0, 0.0, 0.0), frame="odom"), Result.UNKNOWN_TARGET),
    (goal("open", "cabinet_1", position=NEAR.centre, point_u="-3", point_v="4"),
     Result.UNKNOWN_TARGET),
])
def test_malformed_goals_are_refused(rig: Rig, bad: ExecutePrimitive.Goal, code: int) -> None:
    t0 = time.monotonic()
    events = len(rig.events)
    result = rig.run(bad)
    assert not result.success and result.outcome == "REFUSED", result
    assert result.error_code == code and result.error_msg
    time.sleep(0.3)
    assert not rig.since(rig.commanded, t0)
    assert len(rig.events) == events
    assert rig.odom_xy() == pytest.approx((0.0, 0.0), abs=1e-6)


def test_empty_authkey_refuses_to_start(ros: tuple[Context, MultiThreadedExecutor]) -> None:
    with pytest.raises(ExecutorStartupError, match="authkey"):
        ExecutorNode(context=ros[0], namespace=f"/exec_bad_{uuid.uuid4().hex[:6]}",
                     parameter_overrides=[Parameter("authkey", value="")])
    with pytest.raises(ExecutorStartupError, match="arm_port"):
        ExecutorNode(context=ros[0], namespace=f"/exec_bad_{uuid.uuid4().hex[:6]}",
                     parameter_overrides=[Parameter("authkey", value="k"),
                                          Parameter("arm_port", value=70000)])

