"""The executor in process, in lockstep with the simulation: no RPC, no DDS, no wall clock.

For fast evaluation the same robot-side code that runs in the executor node
(:func:`mimir_robot.primitive_plans.plan_and_run` over :class:`mimir_robot.executor.Executor`)
drives the simulated robot's controller objects directly (:class:`mimir_robot.direct.DirectRobot`
over :class:`~mimir_sim.robot_servers.SimRobotDrives`). Time is simulation time: the executor's
wait for the next control period advances the physics by that much. Camera views are rendered on
demand and segmented as the bridge segments them; the poses in a view are what the robot has in
the node mode (camera mounts from the robot's kinematics, ``map -> odom`` from the localisation
stand-in, ``odom -> base_link`` from odometry). The executor still sees no entity id and no true
pose. The node mode (executor node + bridge over RPC and DDS) is the reference; this mode exists
to run many layouts quickly.
"""

from __future__ import annotations

import numpy as np

from mimir.transforms import planar_pose
from mimir_perception.camera import Intrinsics
from mimir_robot.direct import DirectRobot
from mimir_robot.executor import Executor, Outcome
from mimir_robot.motion import Motion, Sample
from mimir_robot.primitive_plans import PlanContext, plan_and_run
from mimir_robot.profile import FloatArray, RobotProfile
from mimir_robot.requests import PrimitiveRequest
from mimir_robot.targeting import CameraView
from mimir_sim.entity_labels import LabelMap
from mimir_sim.robot_servers import SimRobotDrives
from mimir_sim.robot_signals import camera_in_base, map_from_odom
from mimir_sim.sim import KitchenSim
from mimir_sim.truth_segmentation import TruthSegmenter


class LockstepRobot:
    """The executor bound to a simulator in the same process.

    Args:
        sim: the simulator (nothing else may step it meanwhile).
        profile: the robot profile.
        label_map: maps simulator labels to the vocabulary's, as the bridge's segmentation does.
        cameras: pointing cameras, tried in order.
        image_size: rendered width and height (px).
        min_segment_pixels: smaller instances are left out.
    """

    def __init__(self, sim: KitchenSim, profile: RobotProfile | None = None, *,
                 label_map: LabelMap | None = None,
                 cameras: tuple[str, ...] = ("pole", "base", "wrist"),
                 image_size: tuple[int, int] = (320, 240), min_segment_pixels: int = 20) -> None:
        self.sim = sim
        self.profile = profile or RobotProfile()
        self.drives = SimRobotDrives(sim)
        self.robot = DirectRobot(self.drives.new_base(), self.drives.new_arm())
        self.samples: list[Sample] = []
        self.motion = Motion(self.robot, self.profile, clock=lambda: sim.time,
                             sleep=self._sleep, on_sample=self.samples.append)
        self.executor = Executor(self.motion)
        self.cameras = cameras
        self.image_size = image_size
        self._segmenter = TruthSegmenter(sim.scene.entities, label_map or LabelMap(),
                                         min_segment_pixels)

    def _sleep(self, seconds: float) -> None:
        self.drives.advance(max(seconds, self.sim.model.opt.timestep))

    def reset(self, settle_s: float = 3.0) -> None:
        """Reset base and arm (odometry zero here, arm retracted) and let the arm get there."""
        self.robot.reset_base()
        self.robot.reset_arm()
        self.drives.advance(settle_s)

    def odom_from_map(self) -> FloatArray:
        """The localisation stand-in's map -> odom, inverted (what TF gives the node)."""
        return np.asarray(np.linalg.inv(map_from_odom(self.drives.odom_origin())))

    def view(self, camera: str, after: float = 0.0) -> CameraView | None:
        """Render and segment ``camera`` now (``after`` is met by construction)."""
        width, height = self.image_size
        frame = self.sim.render(camera, width, height, segmentation=True)
        objects = self._segmenter.segment(frame, camera)
        parts = self._segmenter.segment_parts(frame, camera)
        if frame.depth is None or objects is None:
            return None
        info = frame.info
        intrinsics = Intrinsics(info.fx, info.fy, info.cx, info.cy, info.width, info.height)
        base = self.robot.base_state()
        map_from_base = (np.linalg.inv(self.odom_from_map())
                         @ planar_pose(base.x, base.y, base.theta))
        return CameraView(camera, frame.stamp, frame.depth, intrinsics,
                          camera_in_base(self.sim, camera), map_from_base, objects, parts)

    def context(self) -> PlanContext:
        """What :func:`plan_and_run` needs, bound to this simulator."""
        return PlanContext(executor=self.executor, profile=self.profile, cameras=self.cameras,
                           view=self.view, odom_from_map=self.odom_from_map,
                           now=lambda: self.sim.time)

    def close(self) -> None:
        """Stop the controllers and unhook them from the simulator."""
        self.drives.detach()

    def run(self, request: PrimitiveRequest) -> Outcome:
        """Run one primitive request (refusals raise as in the node mode)."""
        return plan_and_run(request, self.context())
