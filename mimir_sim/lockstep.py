"""The executor in process, in lockstep with the simulation: no RPC, no DDS, no wall clock.

For fast evaluation the same robot-side code that runs in the executor node
(:func:`mimir_robot.primitive_plans.plan_and_run` over :class:`mimir_robot.executor.Executor`)
drives the simulated robot's controller objects directly (:class:`mimir_robot.direct.DirectRobot`
over :class:`~mimir_sim.robot_servers.SimRobotDrives`). Time is simulation time: the executor's
wait for the next control period advances the physics by that much. Camera views are rendered on
demand and segmented as the bridge segments them; the poses in a view are what the robot has in
the node mode (camera mounts from the robot's kinematics, ``odom -> base_link`` from odometry,
``map -> odom`` from the fiducial localiser of the localization node run on a rendered frame of
the localisation camera, which sees the kitchen's wall tags; the last estimate is held while no
tag is in view). The executor still sees no entity id and no true pose. The node mode (executor
node + bridge over RPC and DDS) is the reference; this mode exists to run many layouts quickly.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mimir.transforms import TransformError, planar_pose
from mimir_perception.camera import Intrinsics
from mimir_perception.fiducials import (
    FiducialLocalizer,
    LocalizationConfig,
    LocalizationResult,
    map_to_odom,
)
from mimir_robot.direct import DirectRobot
from mimir_robot.executor import Executor, Outcome
from mimir_robot.motion import Motion, Sample
from mimir_robot.primitive_plans import PlanContext, plan_and_run
from mimir_robot.profile import FloatArray, RobotProfile
from mimir_robot.requests import PrimitiveRequest
from mimir_robot.targeting import CameraView
from mimir_sim.entity_labels import LabelMap
from mimir_sim.noise import NoiseProfile, SensorNoise
from mimir_sim.rendering import Frame
from mimir_sim.robot_servers import SimRobotDrives
from mimir_sim.robot_signals import camera_in_base
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
        noise: sensor and actuation noise (as the bridge applies it); None is exact.
        noise_seed: seed of the noise streams.
        localization_camera: camera whose frames the fiducial localiser reads (the node mode's
            ``/**/localization`` ``camera``).
        localization: settings of the fiducial localiser.
        localize_on_view: whether each pointing view renders a frame of the localisation camera
            for a fresh fix; False when the owner feeds the localiser its stream of frames
            (:meth:`localize_frame`), as the localization node does in the node mode.
        on_sample: called with every streamed target and what the robot achieved.
    """

    def __init__(self, sim: KitchenSim, profile: RobotProfile | None = None, *,
                 label_map: LabelMap | None = None,
                 cameras: tuple[str, ...] = ("pole", "base", "wrist"),
                 image_size: tuple[int, int] = (320, 240), min_segment_pixels: int = 20,
                 noise: NoiseProfile | None = None, noise_seed: int = 0,
                 localization_camera: str = "pole",
                 localization: LocalizationConfig | None = None,
                 localize_on_view: bool = True,
                 on_sample: Callable[[Sample], None] | None = None) -> None:
        self.sim = sim
        self.profile = profile or RobotProfile()
        self.drives = SimRobotDrives(sim, noise=noise, noise_seed=noise_seed)
        self._noise = SensorNoise(noise or NoiseProfile(), noise_seed)
        self._min_pixels = min_segment_pixels
        self.robot = DirectRobot(self.drives.new_base(), self.drives.new_arm())
        self.samples: list[Sample] = []
        self._on_sample = on_sample
        self.localize_on_view = localize_on_view
        self.motion = Motion(self.robot, self.profile, clock=lambda: sim.time,
                             sleep=self._sleep, on_sample=self._sampled)
        self.executor = Executor(self.motion)
        self.cameras = cameras
        self.image_size = image_size
        self._segmenter = TruthSegmenter(sim.scene.entities, label_map or LabelMap(),
                                         min_segment_pixels)
        tags = sim.scene.fiducials
        if tags is None:
            raise TransformError("the scene has no fiducial tags to localise the robot with")
        self.localization_camera = localization_camera
        self._localizer = FiducialLocalizer(tags.fiducial_map(),
                                            camera_in_base(sim, localization_camera), localization)
        self._map_from_odom: FloatArray | None = None

    def _sampled(self, sample: Sample) -> None:
        self.samples.append(sample)
        if self._on_sample is not None:
            self._on_sample(sample)

    def _sleep(self, seconds: float) -> None:
        self.drives.advance(max(seconds, self.sim.model.opt.timestep))

    def reset(self, settle_s: float = 3.0) -> None:
        """Reset base and arm (odometry zero here, arm retracted) and let the arm get there."""
        self.robot.reset_base()
        self.robot.reset_arm()
        self._map_from_odom = None  # a new odometry frame: the held estimate no longer applies
        self.drives.advance(settle_s)
        self.localize()

    def localize(self) -> LocalizationResult | None:
        """Run the fiducial localiser on a frame of the localisation camera rendered now.

        A fresh estimate of the base replaces the held ``map -> odom`` (with odometry at the
        same instant); without a usable tag the held transform stays and None is returned.
        """
        width, height = self.image_size
        truth = self.sim.render(self.localization_camera, width, height, depth=False,
                                segmentation=False)
        return self.localize_frame(self._noise.view(truth))

    def localize_frame(self, frame: Frame) -> LocalizationResult | None:
        """Run the fiducial localiser on a (noisy) frame of the localisation camera taken now.

        A fresh estimate replaces the held ``map -> odom`` (with odometry at this instant);
        without a usable tag the held transform stays and None is returned.

        Raises:
            ValueError: the frame has no colour image.
        """
        if frame.color is None:
            raise ValueError("the localiser needs a colour image")
        info = frame.info
        intrinsics = Intrinsics(info.fx, info.fy, info.cx, info.cy, info.width, info.height)
        result = self._localizer.localize(frame.color, intrinsics, frame.stamp)
        if result is None or result.held:
            return None
        base = self.robot.base_state()
        self._map_from_odom = map_to_odom(result.map_from_base,
                                          planar_pose(base.x, base.y, base.theta))
        return result

    @property
    def map_from_odom(self) -> FloatArray | None:
        """The held ``map -> odom`` estimate (None before the first fix after a reset)."""
        return self._map_from_odom

    def odom_from_map(self) -> FloatArray:
        """The localiser's map -> odom, inverted (what TF gives the node): refreshed from a new
        frame when a tag is in view, else the last estimate.

        Raises:
            TransformError: no tag has been seen since the last odometry reset.
        """
        if self.localize_on_view:
            self.localize()
        if self._map_from_odom is None:
            raise TransformError(f"no map -> odom: the {self.localization_camera} camera has seen "
                                 "no fiducial tag since the odometry reset")
        return np.asarray(np.linalg.inv(self._map_from_odom))

    def view(self, camera: str, after: float = 0.0) -> CameraView | None:
        """Render and segment ``camera`` now (``after`` is met by construction)."""
        width, height = self.image_size
        truth = self.sim.render(camera, width, height, segmentation=True)
        objects = self._segmenter.segment(truth, camera)
        parts = self._segmenter.segment_parts(truth, camera)
        if truth.depth is None or objects is None:
            return None
        least = self._min_pixels
        objects = self._noise.segmentation(objects, truth, min_pixels=least)
        if parts is not None:
            parts = self._noise.segmentation(parts, truth, min_pixels=max(1, least // 4))
        frame = self._noise.view(truth)
        assert frame.depth is not None
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
