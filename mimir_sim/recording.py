"""The execution log: what each primitive did, with the robot and fixture states it went through.

While a primitive runs, the recorder samples the robot's state and every fixture's opening at
``SimConfig.sample_rate_hz`` and, when ``frame_rate_hz`` is set, renders low-resolution frames;
the judge and the tests read the finished records from :attr:`Recorder.log`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from mimir_sim.physics import PhysicsWorld
from mimir_sim.rendering import Cameras, Frame
from mimir_sim.robot import RobotState

LOG = logging.getLogger(__name__)


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


class Recorder:
    """Opens and closes primitive records and samples into the open one while the physics steps.

    Args:
        world: the physics world whose steps are sampled.
        cameras: renders the sampled frames.
        robot_state: the robot's state now.
        openings: the openings of the tracked fixtures now.
    """

    def __init__(
        self,
        world: PhysicsWorld,
        cameras: Cameras,
        robot_state: Callable[[], RobotState],
        openings: Callable[[], dict[str, float]],
    ) -> None:
        self.world = world
        self.cameras = cameras
        self._robot_state = robot_state
        self._openings = openings
        self.log: list[PrimitiveRecord] = []
        self.instruction: int | None = None
        self._record: PrimitiveRecord | None = None
        self._next_sample = 0.0
        self._next_frame = 0.0

    def begin(self, name: str, target: str) -> PrimitiveRecord:
        """Open the record of a primitive that starts now (belonging to the current instruction)."""
        now = self.world.time
        record = PrimitiveRecord(name=name, target=target, start=now, instruction=self.instruction)
        self._record = record
        self.world.sampler = self._maybe_sample
        self._next_sample = now
        self._next_frame = now
        self._maybe_sample()
        return record

    def end(self, record: PrimitiveRecord) -> PrimitiveRecord:
        """Close a record with a last sample and append it to the log."""
        self._next_sample = self.world.time
        self._next_frame = self.world.time
        self._maybe_sample()
        record.end = self.world.time
        self._record = None
        self.world.sampler = None
        self.log.append(record)
        LOG.debug("%s(%s): %s %s", record.name, record.target, record.success, record.outcome)
        return record

    def _maybe_sample(self) -> None:
        record = self._record
        now = self.world.time
        if record is None or now + 1e-9 < self._next_sample:
            return
        cfg = self.world.config
        frames: dict[str, Frame] = {}
        if cfg.frame_rate_hz > 0 and now + 1e-9 >= self._next_frame:
            width, height = cfg.frame_size
            for cam in cfg.frame_cameras:
                frames[cam] = self.cameras.render(
                    cam, width, height, depth=False, segmentation=False
                )
            self._next_frame = now + 1.0 / cfg.frame_rate_hz
        record.samples.append(Sample(now, self._robot_state(), self._openings(), frames))
        self._next_sample = now + 1.0 / max(cfg.sample_rate_hz, 1e-6)
