"""The robot-side signal contract, written down once.

Everything downstream of the executor (analyzer, memory, planner) reads the robot only through
these topics and frames. Topic names are relative (they follow the node's namespace) except
``/tf``. Units are SI throughout: metres, radians, seconds; quaternions are (x, y, z, w).
This module holds names and numbers only; the ROS layer picks the message classes by the type
names given here.
"""

from __future__ import annotations

from dataclasses import dataclass

# --- Frames -------------------------------------------------------------------------------------
FRAME_MAP = "map"              # fixed world frame (fiducials on the robot, truth in sim)
FRAME_ODOM = "odom"            # odometry frame; coincides with base_link at the last base reset
FRAME_BASE = "base_link"       # robot base: x forward, z up, origin under the base centre

CAMERAS: tuple[str, ...] = ("base", "pole", "wrist")


def camera_optical_frame(camera: str) -> str:
    """Optical frame of a camera (REP-103 optical axes: z forward, x right, y down)."""
    return f"{camera}_color_optical_frame"


# --- Topics -------------------------------------------------------------------------------------
TOPIC_TF = "/tf"                                    # tf2_msgs/TFMessage; carries odom -> base_link
TOPIC_ODOM = "odom"                                 # nav_msgs/Odometry, frame odom, child base_link
TOPIC_EE_COMMANDED = "robot/ee_pose/commanded"      # geometry_msgs/PoseStamped in base_link (m)
TOPIC_EE_ACHIEVED = "robot/ee_pose/achieved"        # geometry_msgs/PoseStamped in base_link (m)
TOPIC_GRIPPER = "robot/gripper"  # std_msgs/Float64: 0 open .. 1 closed, as reported
TOPIC_INTERACTION_EVENTS = "interaction_events"     # mimir_msgs/InteractionEvent (STARTED / ENDED)
TOPIC_DIAGNOSTICS = "/diagnostics"                  # diagnostic_msgs/DiagnosticArray (link state)

TYPE_ODOM = "nav_msgs/msg/Odometry"
TYPE_TF = "tf2_msgs/msg/TFMessage"
TYPE_POSE_STAMPED = "geometry_msgs/msg/PoseStamped"
TYPE_GRIPPER = "std_msgs/msg/Float64"
TYPE_INTERACTION_EVENT = "mimir_msgs/msg/InteractionEvent"
TYPE_IMAGE = "sensor_msgs/msg/Image"
TYPE_CAMERA_INFO = "sensor_msgs/msg/CameraInfo"


@dataclass(frozen=True)
class CameraTopics:
    """The three topics of one camera; depth is registered to the colour image."""

    color: str          # sensor_msgs/Image, rgb8 or bgr8/bgra8, frame <cam>_color_optical_frame
    depth: str          # sensor_msgs/Image 32FC1 (m) or 16UC1 (mm), registered to color
    camera_info: str    # sensor_msgs/CameraInfo of the colour image (intrinsics in pixels)


def camera_topics(camera: str) -> CameraTopics:
    """Topic names of camera ``camera`` (``base``, ``pole`` or ``wrist``)."""
    root = f"cameras/{camera}"
    return CameraTopics(
        color=f"{root}/color/image_raw",
        depth=f"{root}/depth/image_raw",
        camera_info=f"{root}/color/camera_info",
    )


# --- Control ------------------------------------------------------------------------------------
CONTROL_PERIOD_S = 0.1          # s; targets are streamed to the servers at 10 Hz
GRIPPER_OPEN = 0.0              # gripper_pos of a fully open gripper (dimensionless)
GRIPPER_CLOSED = 1.0            # gripper_pos of a fully closed gripper (dimensionless)

# --- RPC servers (TidyBot++ base_server / arm_server) -------------------------------------------
BASE_RPC_PORT = 50000           # TCP port of the base manager server
ARM_RPC_PORT = 50001            # TCP port of the arm manager server
BASE_TYPEID = "Base"            # manager typeid that creates a base controller
ARM_TYPEID = "Arm"              # manager typeid that creates an arm controller
# The authkey is never defined in code: it comes from a parameter (bytes) given by the caller.

# Keys of the dictionaries exchanged with the servers.
KEY_BASE_POSE = "base_pose"     # (3,) x (m), y (m), theta (rad); odometry zeroed at Base.reset()
KEY_ARM_POS = "arm_pos"         # (3,) end-effector position (m) in the arm base frame
KEY_ARM_QUAT = "arm_quat"       # (4,) end-effector orientation x, y, z, w; reported with w >= 0
KEY_GRIPPER_POS = "gripper_pos" # (1,) gripper 0 open .. 1 closed
BASE_STATE_KEYS = frozenset({KEY_BASE_POSE})
ARM_STATE_KEYS = frozenset({KEY_ARM_POS, KEY_ARM_QUAT, KEY_GRIPPER_POS})
