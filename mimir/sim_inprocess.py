"""``mimir sim --in-process``: the simulation graph's work in one process, in simulation time.

The node mode (:func:`mimir.sim_job.run_sim_job`) is the reference: eight processes talking over
DDS, paced by the wall clock. This mode runs the same cores with function calls in place of
messages, so an evaluation can run many generated layouts on a small machine:

* the simulator advances only while the robot waits: the executor's streamed motions step the
  physics by their control periods (:class:`~mimir_sim.lockstep.LockstepRobot`); while the
  planner and the analyzer think, simulated time stands still;
* every ``1 / camera_rate`` s of simulated time the bridge's cameras are rendered, given the
  noise profile's sensor noise and turned into the messages the bridge publishes (colour,
  registered depth, camera info, segmentation); every ``1 / state_rate`` s the transforms and
  the robot contract's signals are made as the executor node makes them (odometry, achieved
  hand pose, gripper); commanded hand poses come from the streamed targets;
* the fiducial localiser reads every frame of its camera with the localization node's
  standing-still rule, and its ``map -> odom`` goes into the transforms;
* :class:`~mimir.replay.MemoryPipeline` (live) does what the deprojection, scene graph,
  keyframe and analyzer nodes do with those messages;
* the planner core serves each instruction (:meth:`PlannerSession.run_instruction`) through
  :class:`LockstepExecutor`, which builds each step's goal as the planner node does, runs it on
  the lockstep robot, announces it as the executor node does, lets the simulation run on until
  the frames after it are in, and reads the analyzer's verdict;
* the judge binds the answers and grades the instructions as the bridge does; memory's verdicts
  are graded into ``audit.jsonl`` and the localisation into ``localisation.json``.

The run folder holds what a node-mode run's holds (``trace.jsonl``, ``report.md``,
``results.json``, ``memory/`` with the planner trace, the audits) except the node logs.
What differs from the node mode by construction: no message is lost, late or reordered; the
robot stands still while the planner plans; the world does not move on while the analyzer
thinks; pointing views are rendered when the executor asks for them rather than taken from the
last published frame. The node mode remains the reference; an evaluation runs a subsample of
its trials that way to compare (``mimir eval --nodes``).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import resource
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from std_msgs.msg import Float64

from mimir import transforms as tfm
from mimir.nodes.memory.messages import event_to_msg
from mimir.nodes.perception.localization_node import LocalizationNodeConfig
from mimir.nodes.perception.messages import segmentation_to_msg
from mimir.nodes.planner.analyzer_params import AnalyzerNodeConfig
from mimir.nodes.planner.planner_params import PlannerNodeConfig
from mimir.nodes.planner.primitive_messages import primitive_goal, settle_result
from mimir.nodes.planner.run_task_server import call_messages, step_trace
from mimir.nodes.robot import messages as rconv
from mimir.nodes.robot.executor_params import ExecutorNodeConfig
from mimir.nodes.sim import messages as sconv
from mimir.nodes.sim.bridge_node import SEGMENTATION_BACKEND
from mimir.paths import config_file
from mimir.replay import MemoryPipeline, node_config
from mimir.ros.time import to_seconds
from mimir.sim_report import (
    SHOWN_KINDS,
    InstructionReport,
    SimJobError,
    close_report,
    memory_record,
    primitive_record,
    step_line,
)
from mimir_memory.config import load_memory_config
from mimir_memory.errors import MemoryStoreError
from mimir_memory.representation import load_representations
from mimir_memory.task import TaskMemory
from mimir_perception.camera import Intrinsics
from mimir_perception.fiducials import stood_still
from mimir_planner.config import GateConfig, load_planner_config
from mimir_planner.errors import PlannerError
from mimir_planner.hosting import RecordingPolicy, TrackedGate
from mimir_planner.memory_readers import (
    MemoryReaders,
    make_retriever,
    memory_view,
    open_keyframe_reader,
    open_world_reader,
)
from mimir_planner.outcomes import Verification, fixture_opens, step_outcome
from mimir_planner.planner import PlannerSession
from mimir_planner.primitives import ExecutableStep
from mimir_planner.recall import PackagedMiniLM
from mimir_planner.runs import ExecutionOutcome, Observation, RunHooks, StepRecord
from mimir_planner.trace import PlannerTrace
from mimir_robot.contract import TOPIC_EE_ACHIEVED, TOPIC_EE_COMMANDED, TOPIC_GRIPPER
from mimir_robot.executor import Outcome
from mimir_robot.motion import Sample
from mimir_robot.primitive_plans import REFUSALS, refused
from mimir_robot.profile import ProfileError
from mimir_robot.requests import RequestError
from mimir_robot.tag_search import search_for_tags
from mimir_sim.answer_binding import EntityResolver
from mimir_sim.audit import GRADED_KINDS, LocalisationAudit, MemoryAuditor
from mimir_sim.bridge_config import (
    BridgeStartupError,
    SimBridgeConfig,
    build_sim,
    label_map_for,
    noise_for,
    resolve_vocabulary,
)
from mimir_sim.errors import PhysicsUnstableError, RenderError
from mimir_sim.instruction_desk import NONE, InstructionDesk, NamedEntity
from mimir_sim.lockstep import LockstepRobot
from mimir_sim.noise import SensorNoise
from mimir_sim.physics import save_unstable
from mimir_sim.rendering import Frame
from mimir_sim.robot_signals import camera_in_base
from mimir_sim.truth_segmentation import TruthSegmenter

__all__ = ["InProcessRun", "LockstepExecutor"]

#: Step of simulated time while waiting for memory or for frames (s).
_WAIT_STEP_S = 0.25


class InProcessRun:
    """One scenario run in one process; see the module docstring.

    Args:
        run_dir: The run folder (its ``memory/`` is made).
        params: The run's node parameters as ``mimir sim`` writes them
            (``/**/<node>: {ros__parameters: {...}}``).
        trace: Where the run reports (the job's trace).

    Raises:
        SimJobError: a node section the node's parameters refuse, or a scenario or robot
            model the simulation cannot build.
    """

    def __init__(self, run_dir: Path, params: Mapping[str, Any], trace: Any) -> None:
        sections = {str(key).rsplit("/", 1)[-1]: {
            k: v for k, v in entry.get("ros__parameters", {}).items() if k != "use_sim_time"}
            for key, entry in params.items()}
        hint = "check the parameter file's node sections"
        try:
            self.bridge = node_config(SimBridgeConfig, sections, "sim_bridge")
            self.executor_config = node_config(ExecutorNodeConfig, sections, "executor")
            self.localization = node_config(LocalizationNodeConfig, sections, "localization")
            self.planner_config_node = node_config(PlannerNodeConfig, sections, "planner")
            self.analyzer_config = node_config(AnalyzerNodeConfig, sections, "analyzer")
        except (ValueError, TypeError, ProfileError) as err:
            raise SimJobError(f"the run's parameters are not usable: {err}", hint) from err
        self.trace = trace
        self.run_dir = run_dir
        self.instruction = -1
        bridge = self.bridge
        try:
            self.sim = build_sim(bridge)
        except BridgeStartupError as err:
            raise SimJobError(str(err), "check --scenario and --tidybot-dir") from err
        self._listeners: list[int] = []
        try:
            self._build(run_dir, sections, hint)
        except BaseException:
            self._release()  # what was built before the failure
            raise

    def _build(self, run_dir: Path, sections: Mapping[str, Mapping[str, Any]],
               hint: str) -> None:
        """Everything the run needs around the simulator (see :meth:`__init__`)."""
        bridge = self.bridge
        label_map = label_map_for(resolve_vocabulary(bridge.vocabulary))
        noise = noise_for(bridge)
        seed = self.sim.scene.seed
        self.profile = self.executor_config.profile()
        self._noise = SensorNoise(noise, seed)
        self._segmenter = TruthSegmenter(self.sim.scene.entities, label_map,
                                         bridge.min_segment_pixels)
        self._optical = {cam: cam + bridge.optical_frame_suffix for cam in bridge.cameras}
        trace_file = self.executor_config.trace_file
        # closed by close(): the file lives as long as the run
        self._robot_trace = (open(trace_file, "a", encoding="utf-8")  # noqa: SIM115
                             if trace_file else None)
        self.robot = LockstepRobot(
            self.sim, self.profile, label_map=label_map,
            cameras=tuple(self.executor_config.pointing_cameras),
            image_size=(bridge.image_width, bridge.image_height),
            min_segment_pixels=bridge.min_segment_pixels, noise=noise, noise_seed=seed,
            localization_camera=self.localization.camera,
            localization=self.localization.localization(), localize_on_view=False,
            on_sample=self._on_sample)
        self.resolver = EntityResolver(self.sim, bridge.target_tolerance, label_map)
        self.desk = InstructionDesk(self.sim, self.resolver, bridge.discover_min_pixels,
                                    self.robot.drives.teleport_base)
        self.auditor = MemoryAuditor(self.resolver)
        self.localisation_audit = LocalisationAudit()
        self._unlocalised = 0
        memory_dir = run_dir / "memory"
        try:
            self.pipeline = MemoryPipeline(
                memory_dir, bridge.cameras, sections=sections,
                session=f"sim-{self.sim.scene.scenario.name}",
                tf_cache_s=self.analyzer_config.buffer_seconds + 10.0, live=True)
            analysis = self.pipeline.start_analysis()
        except (ValueError, MemoryStoreError) as err:
            raise SimJobError(f"cannot set up memory and the analyzer: {err}", hint) from err
        self.analysis = analysis
        self._last_tf = -math.inf
        self._last_audit = -math.inf
        self._seen_seq = 0
        self.events = 0
        self._planner_view: tuple[Frame, Any] | None = None
        self.primitives: list[str] = []
        self.planner = PlannerHost(self, memory_dir)
        self._listeners = [
            self.sim.add_step_listener(self._on_state, 1.0 / bridge.state_rate),
            self.sim.add_step_listener(self._on_cameras, 1.0 / bridge.camera_rate)]

    # ------------------------------------------------------------------ lifetime
    def close(self) -> None:
        """Release the robot, the renderers and the databases; write the localisation audit."""
        self._release()
        if self.bridge.localisation_file:
            self.localisation_audit_write(Path(self.bridge.localisation_file))

    def _release(self) -> None:
        """Unhook and close whatever of the run exists (a failed start leaves some out)."""
        listeners, self._listeners = self._listeners, []
        for handle in listeners:
            self.sim.remove_step_listener(handle)
        for part in ("robot", "planner", "pipeline", "_robot_trace"):
            held = self.__dict__.pop(part, None)  # closed once, even if called again
            if held is not None:
                held.close()
        self.sim.shutdown()

    def localisation_audit_write(self, path: Path) -> None:
        """Write the localisation comparison as the bridge's audit sink does."""
        summary = self.localisation_audit.record(self._unlocalised)
        path.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")

    def start(self) -> None:
        """Reset the robot where the scenario puts it and let the arm settle; without a tag
        fix by then, search for one as the executor node does (``search_tags_on_start``); then
        wait (in simulated time) until perception has filled memory."""
        self.robot.reset()  # the arm settles while the cameras see the kitchen
        self._events()
        exe = self.executor_config
        if exe.search_tags_on_start:
            found = search_for_tags(self.robot.executor, exe.tag_search_turns,
                                    self._wait_for_fix, exe.tag_search_dwell_s)
            self.trace.record("status", f"tag search: {found.describe()}", echo=False)
        cfg = self.planner_config_node
        waited = 0.0
        last_count, quiet = -1, 0.0
        while waited < cfg.memory_wait_s and quiet < cfg.memory_settle_s:
            self.advance(_WAIT_STEP_S)
            waited += _WAIT_STEP_S
            count = len(self.pipeline.world.state.nodes)
            quiet = quiet + _WAIT_STEP_S if count == last_count and count > 0 else 0.0
            last_count = count
        if self.robot.map_from_odom is None:
            self.trace.record("status", "the localisation camera has seen no fiducial tag yet; "
                              "the robot plans without a map pose until it does")

    def _wait_for_fix(self, seconds: float) -> bool:
        """Whether the localiser has a ``map -> odom`` within ``seconds`` of simulated time."""
        deadline = self.now + seconds
        while self.robot.map_from_odom is None and self.now < deadline:
            self.advance(min(_WAIT_STEP_S, deadline - self.now))
        return self.robot.map_from_odom is not None

    # ------------------------------------------------------------------ time
    @property
    def now(self) -> float:
        """Simulated time (s), the clock of every stamp of the run."""
        return float(self.sim.time)

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` of simulated time pass with the robot holding still (cameras and
        signals keep coming), then analyse what is due."""
        self.robot.drives.advance(seconds)
        self.pipeline.advance(self.now)
        self._events()

    # ------------------------------------------------------------------ the bridge's signals
    def _publish_transforms(self, stamp: float) -> None:
        """``odom -> base`` (odometry), ``base -> optical`` of every camera and the localiser's
        ``map -> odom`` at ``stamp`` into the pipeline's transforms."""
        if stamp <= self._last_tf:
            return
        self._last_tf = stamp
        tf = self.pipeline.transforms
        cfg = self.executor_config
        base = self.robot.robot.base_state()
        tf.set_transform(cfg.odom_frame, cfg.base_frame, stamp, (base.x, base.y, 0.0),
                         rconv.base_quat(base.theta))
        for cam, optical in self._optical.items():
            translation, quat = tfm.decompose(camera_in_base(self.sim, cam))
            tf.set_transform(cfg.base_frame, optical, stamp, translation, quat)
        held = self.robot.map_from_odom
        if held is not None:
            translation, quat = tfm.decompose(held)
            tf.set_transform(cfg.map_frame, cfg.odom_frame, stamp, translation, quat)

    def _on_state(self, stamp: float) -> None:
        """The executor node's contract signals and transforms, every ``1 / state_rate`` s."""
        self._publish_transforms(stamp)
        cfg = self.executor_config
        arm = self.robot.robot.arm_state()
        hand = self.profile.from_arm(np.asarray(arm.pos))
        self.pipeline.on_signal(TOPIC_EE_ACHIEVED, rconv.pose_stamped(
            stamp, cfg.base_frame, tuple(float(v) for v in hand), arm.quat))
        self.pipeline.on_signal(TOPIC_GRIPPER, Float64(data=float(arm.gripper)))
        if stamp - self._last_audit >= self.localisation_audit.period_s:
            self._last_audit = stamp
            self._audit_localisation(stamp)

    def _on_sample(self, sample: Sample) -> None:
        """A streamed target: the commanded hand pose (and the robot trace line)."""
        stamp = self.now
        if sample.part == "arm":
            self.pipeline.on_signal(TOPIC_EE_COMMANDED, rconv.pose_stamped(
                stamp, self.executor_config.base_frame, sample.commanded[:3],
                sample.commanded[3:7]))
        if self._robot_trace is not None:
            self._robot_trace.write(json.dumps({
                "t": round(stamp, 4), "part": sample.part,
                "commanded": [round(v, 5) for v in sample.commanded],
                "achieved": [round(v, 5) for v in sample.achieved]}) + "\n")

    def _on_cameras(self, stamp: float) -> None:
        """Every camera rendered, noised and fed as the bridge publishes it."""
        self._publish_transforms(stamp)
        cfg = self.bridge
        for cam in cfg.cameras:
            try:
                frame = self.sim.render(cam, cfg.image_width, cfg.image_height,
                                        segmentation=True)
            except RenderError as err:
                self.trace.record("warning", f"{cam}: render failed: {err}", echo=False)
                continue
            try:
                self.desk.record_frame(frame)
            except ValueError as err:
                self.trace.record("warning", f"{cam}: visibility not recorded: {err}",
                                  echo=False)
            self._feed_camera(cam, frame)

    def _feed_camera(self, cam: str, frame: Frame) -> None:
        view = self._noise.view(frame)
        if cam == self.localization.camera and self._stood_still(view.stamp):
            self.robot.localize_frame(view)
            self._publish_transforms(view.stamp + 1e-6)
        header = sconv.header(frame.stamp, self._optical[cam])
        color, depth, info = sconv.frame_messages(view, header)
        pipeline = self.pipeline
        pipeline.on_camera(cam, "camera_info", info)
        if depth is not None:
            pipeline.on_camera(cam, "depth", depth)
        if color is not None:
            pipeline.on_camera(cam, "color", color)
        least = self.bridge.min_segment_pixels
        objects = self._segmenter.segment(frame, cam)
        if objects is not None:
            objects = self._noise.segmentation(objects, frame, min_pixels=least)
            pipeline.on_camera(cam, "segmentation",
                               segmentation_to_msg(objects, header, SEGMENTATION_BACKEND, cam))
        if cam == self.planner_config_node.planner_camera and color is not None:
            self._planner_view = (view, info)

    def _stood_still(self, stamp: float) -> bool:
        """The localization node's rule: a fix counts only when odometry moved the base at most
        the still limits over the window before the image."""
        cfg = self.localization
        if cfg.still_window_s <= 0.0:
            return True
        tf = self.pipeline.transforms
        try:
            now = tf.lookup(cfg.odom_frame, cfg.base_frame, stamp)
            before = tf.lookup(cfg.odom_frame, cfg.base_frame, stamp - cfg.still_window_s)
        except tfm.TransformError:
            return True
        return stood_still(before, now, translation_m=cfg.still_translation_m,
                           rotation_rad=cfg.still_rotation_rad)

    def _audit_localisation(self, stamp: float) -> None:
        """Compare the localised base pose with the true one (the judge's instrument)."""
        cfg = self.executor_config
        try:
            pose = self.pipeline.transforms.lookup(cfg.map_frame, cfg.base_frame, stamp)
        except tfm.TransformError:
            self._unlocalised += 1  # no localisation yet: counted, not an error
            return
        body = self.sim.body
        yaw = math.atan2(float(pose[1, 0]), float(pose[0, 0]))
        self.localisation_audit.add((float(pose[0, 3]), float(pose[1, 3]), yaw),
                                    body.base_pose(), body.base_speed(), stamp)

    def observation(self) -> Observation | None:
        """The planner camera's latest frame with its intrinsics and pose (Set-of-Mark)."""
        if self._planner_view is None:
            return None
        view, _info = self._planner_view
        if view.color is None:
            return None
        info = view.info

        intrinsics = Intrinsics(info.fx, info.fy, info.cx, info.cy, info.width, info.height)
        cam = self.planner_config_node.planner_camera
        try:
            pose = self.pipeline.transforms.lookup(self.executor_config.map_frame,
                                                   self._optical[cam], view.stamp)
        except tfm.TransformError:
            pose = None
        return Observation(rgb=view.color, intrinsics=intrinsics, camera_to_map=pose,
                           stamp=view.stamp)

    # ------------------------------------------------------------------ memory events
    def _events(self) -> None:
        """New memory events: counted, shown in the trace and graded by the judge."""
        world = self.pipeline.world
        state = world.state
        for event in world.log.iter_events(after_seq=self._seen_seq):
            self._seen_seq = max(self._seen_seq, int(event.seq or 0))
            self.events += 1
            if event.kind not in SHOWN_KINDS:  # fusion: counted only (the graded kinds are shown)
                continue
            msg = event_to_msg(event)
            record = memory_record(msg)
            if record is not None:
                text, data = record
                self.trace.record("memory", text, instruction=self.instruction, **data)
            if msg.kind not in GRADED_KINDS or not msg.verdict:
                continue
            node = state.nodes.get(msg.subject_id)
            label = node.label if node is not None else ""
            position = tuple(float(v) for v in node.centroid) if node is not None else None
            grade = self.auditor.grade(msg.kind, msg.subject_id, msg.verdict,
                                       json.loads(msg.payload_json or "{}"), label=label,
                                       position=position)
            if grade is not None and self.bridge.audit_file:
                with Path(self.bridge.audit_file).open("a", encoding="utf-8") as out:
                    out.write(json.dumps({"event_id": msg.event_id, "kind": msg.kind,
                                          "subject": msg.subject_id, **grade.as_dict()}) + "\n")

    # ------------------------------------------------------------------ primitives
    def execute(self, goal: Any) -> tuple[Any, Outcome | None, Any]:
        """Run one ExecutePrimitive goal as the executor node serves it.

        Returns (result message, outcome or None when refused, ENDED interaction event or
        None when refused)."""
        cfg = self.executor_config
        try:
            request = rconv.goal_to_request(goal, cfg.map_frame)
        except RequestError as err:
            return rconv.refusal(err), None, None
        iid = uuid.uuid4().hex[:12]
        start = self.now
        self.pipeline.on_interaction(rconv.interaction_event(goal, iid, start,
                                                             frame=cfg.map_frame))
        try:
            out = self.robot.run(request)
        except REFUSALS as err:
            out = refused(request.primitive, err)
        end = self.now
        ended = rconv.interaction_event(goal, iid, start, end=end, out=out, frame=cfg.map_frame)
        self.pipeline.on_interaction(ended)
        name, text, data = primitive_record(ended)
        self.primitives.append(name)
        self.trace.record("primitive", text, instruction=self.instruction, **data)
        self._events()
        return rconv.outcome_result(out, iid, start, end), out, ended

    def verdict(self, ended: Any) -> Verification:
        """The analyzer's verdict on an ended interaction (``analyze_interaction``): simulated
        time runs on (the robot holding) until its window and margin are past, as the node
        mode's analyzer waits for the frames after an action."""
        if self.analysis is None:
            return Verification(False, reason="the interaction analyzer is not running")
        iid = ended.interaction_id
        if not self.analyzer_config.auto_analyze:
            self.analysis.on_ended(ended)  # asked for, not analysed on its own
        end = to_seconds(ended.window_end)
        due = end + self.analyzer_config.window_margin_s + 1.0 / self.bridge.camera_rate
        while self.now < due and iid not in self.analysis.verdicts:
            self.advance(min(_WAIT_STEP_S, max(due - self.now, 1e-3)))
        return self.analysis.verdicts.get(iid) or Verification(
            False, reason=f"the analyzer gave no verdict on {iid}")


class LockstepExecutor:
    """The planner's executor in process: the planner node's goal, the executor node's run and
    events, the analyzer's verdict (see :class:`~mimir.nodes.planner.ros_executor.
    ActionPrimitiveExecutor` for the node mode's)."""

    def __init__(self, run: InProcessRun, host: PlannerHost) -> None:
        self.run = run
        self.host = host

    def execute(self, step: ExecutableStep) -> ExecutionOutcome:
        """Run ``step`` on the lockstep robot and return the verified outcome."""
        host, run = self.host, self.run
        world = host.world
        world.refresh()
        cfg = host.node_config
        try:
            goal = primitive_goal(step, world.state, holding=host.task.hand,
                                  task=host.instruction, map_frame=cfg.map_frame, stamp=run.now)
        except ValueError as err:
            return self._outcome(step, False, f"not sent: {err}", None, code="NOT_SENT")
        result, _, ended = run.execute(goal)

        def verdict() -> Verification:
            seen = run.verdict(ended)
            world.refresh()
            return seen

        return settle_result(
            step, result, functools.partial(self._outcome, step),
            analysed=cfg.analyzed_primitives if cfg.analyze else (), verdict=verdict,
            require_verification=cfg.require_verification)

    def _outcome(self, step: ExecutableStep, success: bool, detail: str, stamp: float | None,
                 *, code: str = "", reported: bool | None = None) -> ExecutionOutcome:
        host = self.host
        return step_outcome(step, success, detail, stamp, world=host.world.state,
                            holding=host.task.hand,
                            opens=lambda n: fixture_opens(n, host.planner_config),
                            observation=self.run.observation(), code=code, reported=reported)


class PlannerHost:
    """The planner node's session in process: task memory, the read-only memory readers, the
    planning session and its trace (offline policy; no operator gate)."""

    def __init__(self, run: InProcessRun, memory_dir: Path) -> None:
        cfg = self.node_config = run.planner_config_node
        self.run = run
        try:
            base = load_planner_config(cfg.planner_config or None)
            self.memory_config = load_memory_config(
                config_file("memory.yaml", cfg.memory_config))
            representations = load_representations(config_file("representations.yaml"))
        except (PlannerError, MemoryStoreError, OSError) as err:
            raise SimJobError(f"cannot load the planner's configuration: {err}") from err
        if cfg.representation not in representations:
            raise SimJobError(f"unknown representation {cfg.representation!r}; "
                              f"config/representations.yaml defines {sorted(representations)}")
        self.representation = representations[cfg.representation]
        if cfg.vlm_backend != "offline":
            raise SimJobError(f"an in-process run plans with the offline reasoner only, not "
                              f"{cfg.vlm_backend!r}", "leave --in-process out to use a model")
        gate = GateConfig(enabled=False, timeout_s=cfg.gate_timeout_s)
        self.planner_config = dataclasses.replace(base, gate=gate)
        self.embodiment = cfg.embodiment or self.planner_config.loop.embodiment
        self.task = TaskMemory.open(memory_dir / "task.db", config=self.memory_config)
        self.memory_dir = memory_dir
        self.instruction = ""
        view = memory_view(self.representation, memory_dir, self.memory_config,
                           self.planner_config, pinned=lambda: [self.task.hand or ""])
        self.world = open_world_reader(memory_dir, self.memory_config,
                                       map_frame=cfg.map_frame, view=view)
        keyframes = (open_keyframe_reader(memory_dir, self.memory_config)
                     if cfg.use_keyframes else None)
        self.readers = MemoryReaders(self.world, keyframes)
        self.gate = TrackedGate(self.planner_config.gate, on_submit=lambda _r: None)
        self.session = PlannerSession(
            self.world, self.task, self.planner_config, keyframes=keyframes, policy=None,
            retriever=make_retriever(keyframes, self.planner_config, None) if keyframes else None,
            gate=self.gate,
            embedder=PackagedMiniLM() if self.planner_config.recall.use_embedder else None,
            embodiment=self.embodiment, clock=lambda: run.now)
        self.recorder = RecordingPolicy(self.session.policy)
        self.session.policy = self.recorder
        self.trace = PlannerTrace(memory_dir, cfg.trace_max_bytes)
        self.executor = LockstepExecutor(run, self)

    def close(self) -> None:
        """Close the memory readers and task memory."""
        self.readers.close()
        self.task.close()

    def run_instruction(self, text: str, budget: int) -> Any:
        """Serve one instruction through the core loop; its report."""
        self.instruction = text
        self.world.refresh()
        try:
            return self.session.run_instruction(text, self.executor, budget=budget,
                                                hooks=_Hooks(self))
        finally:
            self.instruction = ""


class _Hooks(RunHooks):
    """What the in-process run plugs into the core loop: the planner camera's view, one trace
    line per planner call and the planner trace record (as the run_task server writes it)."""

    def __init__(self, host: PlannerHost) -> None:
        self.host = host
        self.started = 0.0
        self.seen: Observation | None = None

    def observation(self) -> Observation | None:
        self.seen = self.host.run.observation()
        return self.seen

    def before_step(self, call: int) -> None:
        self.host.recorder.reset()
        self.started = self.host.run.now

    def after_step(self, record: StepRecord) -> None:
        host = self.host
        ctx = host.recorder.context
        plan, grounding, retrieved, status = call_messages(host.session, host.recorder, record)
        run = host.run
        run.trace.record(
            "step", step_line(record.call, status, [(p.primitive, p.target_id) for p in plan],
                              [c.node_id for c in grounding], len(retrieved)),
            instruction=run.instruction, step=record.call, status=status,
            plan=[(p.primitive, p.target_id, p.reasoning) for p in plan])
        host.trace.append(step_trace(
            host.instruction, record, plan, grounding, retrieved, start=self.started,
            end=run.now, retrieval_s=ctx.retrieval_s if ctx is not None else None))


def run_instructions(run: InProcessRun, instructions: list[str], step_budget: int,
                     timeout_s: float) -> list[InstructionReport]:
    """Begin, serve and judge every instruction in order (the job's client, in process).

    Raises:
        SimJobError: the judge refused an instruction, or one ran past ``timeout_s`` of wall
            time.
    """
    reports: list[InstructionReport] = []
    for index, text in enumerate(instructions):
        run.instruction = index
        report = InstructionReport(index=index, instruction=text)
        started = time.monotonic()
        run.trace.record("instruction", f"\n[{index + 1}] {text}", instruction=index)
        begun = run.desk.begin(index, text, False)
        if begun.code != NONE:
            raise SimJobError(f"the judge refused instruction {index}: {begun.message}")
        first = len(run.primitives)
        result = run.planner.run_instruction(text, step_budget)
        if time.monotonic() - started > timeout_s:
            raise SimJobError(f"instruction {index + 1} ran {time.monotonic() - started:.0f} s, "
                              f"past the {timeout_s:.0f} s limit")
        report.steps = result.calls
        report.planner_progress = float(result.progress)
        report.answer = "; ".join(result.answers())
        report.error = result.reason
        entities = [NamedEntity(e.node_id, e.label, e.position) for e in result.entities()]
        judged = run.desk.judge(index, entities)
        close_report(
            report, run.trace, judged=bool(judged.success),
            judged_progress=float(judged.progress), details_json=judged.details_json,
            named=", ".join(e.node_id or f"{e.label} (listed)" for e in entities),
            goals="; ".join(f"{g.description}: {g.status.value}" for g in result.goals),
            primitives=run.primitives[first:], started=started)
        reports.append(report)
    return reports


def physics_failure(run: InProcessRun, err: PhysicsUnstableError) -> SimJobError:
    """The job error of a blow-up, with the state saved for a replay where the run names a
    file for it (``unstable_state_file``, as the bridge saves it)."""
    where = ""
    path = run.bridge.unstable_state_file
    if path:
        try:
            where = f"; state saved for a replay: {save_unstable(err, run.sim.model, path)}"
        except (OSError, ValueError) as save_err:
            where = f"; the state could not be saved: {save_err}"
    return SimJobError(f"{err}{where}", "a physics blow-up is the simulator's failure, not the "
                       "robot's; the same seed may run through on another commit")


def memory_figures(run: InProcessRun) -> dict[str, Any]:
    """Sizes of the memory after the run (the figures the node mode reads over ROS)."""
    world = run.pipeline.world
    nodes = world.state.nodes
    props = sum(1 for n in nodes.values() for p in n.properties.values()
                if getattr(p, "source", "") == "interaction")
    return {
        "scene graph nodes": len(nodes),
        "graph revision": world.revision,
        "interaction-derived properties": props,
        "memory events seen": run.events,
        "keyframes stored": run.pipeline.keyframes.count(),
    }


def process_cpu_s() -> float:
    """User and system CPU this process has used (s)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return float(usage.ru_utime + usage.ru_stime)
