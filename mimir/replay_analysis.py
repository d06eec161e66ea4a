"""The interaction analyzer inside ``mimir replay --fast``.

When a bag holds the executor's interaction events, the replay runs the analyzer the live
graph runs (:class:`~mimir_planner.reasoning.InteractionAnalyzer` with the deployment's
reasoning settings and backend, the offline reasoner in the simulation's deployment): the
analyzer node's window recorder buffers the cameras, the robot contract's signals (gripper,
achieved and commanded hand pose) and the detections from the bag's messages, and each ended
interaction is analysed once the bag has passed its window and margin, so the frames after it
are in. The writes the harness admits go straight into world memory
(:meth:`~mimir_memory.world.WorldMemory.apply_update`) with the analyzer's update ids, so a
replay writes what the analyzer node would have sent to ``update_node``. As in the node, each
analysis first re-judges the claims deferred earlier with its new evidence, and
:meth:`ReplayAnalyzer.recheck` re-judges them on fresh detections. Interaction keyframes are saved
only where the owner gives a saver (the in-process simulation does; a bag replay does not).
Every analysis leaves its verdict for the interaction (:attr:`ReplayAnalyzer.verdicts`), which a
planner acting in the same process reads as the node's ``analyze_interaction`` answer.

Message time is the only clock: nothing waits for late frames or transforms, since the input
already holds everything it will ever hold up to the time it has reached.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mimir import transforms as tfm
from mimir.nodes.planner.analyzer_inputs import WindowRecorder, detections_from_msg
from mimir.nodes.planner.analyzer_params import AnalyzerNodeConfig
from mimir.paths import config_file
from mimir_memory.errors import MemoryStoreError
from mimir_memory.events import MemoryEvent
from mimir_memory.observations import ObjectObservation
from mimir_memory.world import WorldMemory
from mimir_planner.outcomes import Verification
from mimir_planner.reasoning import (
    AnalysisResult,
    Detection3D,
    HarnessResult,
    InteractionAnalyzer,
    PrimitiveRecord,
    load_reasoning_config,
    make_backend,
    with_model,
)
from mimir_planner.reasoning.config import with_verifiers_off
from mimir_planner.reasoning.errors import EvidenceError, ReasoningError
from mimir_planner.reasoning.faults import Corruption, FaultyBackend
from mimir_planner.reasoning.provenance import evidence_record
from mimir_planner.reasoning.window import recheck_evidence
from mimir_planner.reasoning.world_view import InMemoryWorld, memory_snapshot
from mimir_planner.reasoning.writes import WriteContext, outcome_answer, plan_writes
from mimir_robot.contract import TOPIC_EE_ACHIEVED, TOPIC_EE_COMMANDED, TOPIC_GRIPPER

#: Bag topics (no leading slash) of the robot contract's signals the analyzer reads, with types.
SIGNALS: dict[str, str] = {
    TOPIC_GRIPPER: "std_msgs/msg/Float64",
    TOPIC_EE_ACHIEVED: "geometry_msgs/msg/PoseStamped",
    TOPIC_EE_COMMANDED: "geometry_msgs/msg/PoseStamped",
    "observations": "mimir_msgs/msg/ObjectObservationArray",
}


class _BagTransforms:
    """The replay's transform buffer as the window recorder's transform source."""

    backend = "bag"

    def __init__(self, buffer: tfm.TransformBuffer) -> None:
        self.buffer = buffer

    def lookup(self, target: str, source: str, stamp: float) -> tfm.Matrix4:
        return self.buffer.lookup(target, source, stamp)


def _seconds(stamp: Any) -> float:
    return float(stamp.sec) + float(stamp.nanosec) * 1e-9


#: Saves an analysis's keyframes: (result, interaction id) -> (ids, frame reference -> id).
KeyframeSaver = Callable[[AnalysisResult, str], tuple[list[str], dict[str, str]]]


def detections_from_observations(observations: Sequence[ObjectObservation]
                                 ) -> list[Detection3D]:
    """Deprojected observations as the analyzer's detections (what the deprojection node
    publishes and the analyzer node reads, without the message in between)."""
    found: list[Detection3D] = []
    for obs in observations:
        try:
            found.append(Detection3D(
                label=obs.label, position=np.asarray(obs.centroid, dtype=np.float64),
                score=min(max(float(obs.score), 0.0), 1.0), stamp=obs.stamp,
                camera=obs.camera, ref=obs.detection_id))
        except EvidenceError:
            continue  # the memory core refuses the same observation
    return found


class ReplayAnalyzer:
    """Buffers an action window's streams from bag messages and analyses each interaction.

    Args:
        world: World memory the replay builds (read for the analyzer, written with verdicts).
        tf: The replay's transform buffer (the whole bag).
        sections: The deployment's node sections (``analyzer`` applies: with ``fault_log`` and
            ``evidence_log`` set, reasoner faults and the evidence of each analysis are
            appended there as in the node).
        save_keyframes: Saves each analysis's keyframes (None: none are saved).

    Raises:
        ValueError: the analyzer section or the reasoning settings are invalid.
    """

    def __init__(self, world: WorldMemory, tf: tfm.TransformBuffer,
                 sections: Mapping[str, Mapping[str, Any]], *,
                 save_keyframes: KeyframeSaver | None = None) -> None:
        values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v
                                  for k, v in sections.get("analyzer", {}).items()}
        config = AnalyzerNodeConfig(**values)
        # message time is the only clock: nothing is worth waiting for in a bag
        self.config = dataclasses.replace(config, tf_wait_s=0.0, frame_wait_s=0.0)
        try:
            reasoning = load_reasoning_config(
                config_file("reasoning.yaml", config.reasoning_config))
            reasoning = with_model(reasoning, backend=config.vlm_backend,
                                   base_url=config.vlm_endpoint, model=config.vlm_model)
            reasoning = with_verifiers_off(reasoning, config.verifiers_off)
            self.backend = make_backend(reasoning)
            if config.reasoner_faults > 0.0:
                self.backend = FaultyBackend(self.backend, config.reasoner_faults,
                                             config.reasoner_fault_seed, self._log_fault)
        except (OSError, ReasoningError) as err:
            raise ValueError(f"cannot set up the analyzer: {err}") from err
        self.reasoning = reasoning
        self.world = world
        self.view: InMemoryWorld = InMemoryWorld()
        self.analyzer = InteractionAnalyzer(self.backend, self.view, reasoning)
        self.counts: Counter[str] = Counter()
        self.verdicts: dict[str, Verification] = {}
        """Each analysed interaction's verdict, as ``analyze_interaction`` answers it."""
        self.written: list[MemoryEvent] = []
        """Events the admitted writes appended, in order (the owner may drain it)."""
        self._save_keyframes = save_keyframes
        self._fresh: list[Detection3D] = []
        self.inputs = WindowRecorder(self.config, _BagTransforms(tf), self._warn,
                                     lambda _key: None)
        self._pending: list[tuple[float, Any]] = []
        self._done: set[str] = set()

    @property
    def cameras(self) -> tuple[str, ...]:
        """Cameras whose frames the analyzer reads."""
        return tuple(self.inputs.streams)

    def _warn(self, key: str, _text: str) -> None:
        self.counts[f"analyzer.{key}"] += 1

    def _log_fault(self, fault: Corruption) -> None:
        self._append(self.config.fault_log, fault.as_dict())

    @staticmethod
    def _append(path: str, record: Mapping[str, Any]) -> None:
        if path:
            with Path(path).open("a", encoding="utf-8") as out:
                out.write(json.dumps(record) + "\n")

    # ------------------------------------------------------------------ inputs
    def on_camera(self, camera: str, stream: str, msg: Any) -> None:
        """A camera message of the replay (colour, depth, camera info)."""
        frames = self.inputs.streams.get(camera)
        if frames is None:
            return
        if stream == "color" and not hasattr(msg, "format"):
            self.inputs.on_color(camera, msg)
        elif stream == "depth" and not hasattr(msg, "format"):
            self.inputs.on_depth(camera, msg)
        elif stream == "camera_info":
            frames.set_info(msg)

    def on_signal(self, topic: str, msg: Any, received: float) -> None:
        """A robot-contract signal or an observation array (``received``: its bag time)."""
        if topic == TOPIC_GRIPPER:
            self.inputs.on_gripper(received, float(msg.data))
        elif topic == TOPIC_EE_ACHIEVED:
            self.inputs.on_hand(msg)
        elif topic == TOPIC_EE_COMMANDED:
            self.inputs.on_hand_command(msg)
        else:
            found, skipped = detections_from_msg(msg)
            if skipped:
                self.counts["analyzer.bad_observation"] += skipped
            self.add_detections(found)

    def add_detections(self, found: Sequence[Detection3D]) -> None:
        """3D detections of perception (kept for windows and for re-checks)."""
        for detection in found:
            self.inputs.detections.add(detection.stamp, detection)
        self._fresh.extend(found)

    def on_ended(self, event: Any) -> None:
        """An interaction ended: analyse it once the input has passed its window (a second
        request for the same interaction is answered by the first analysis)."""
        end = _seconds(event.window_end) or _seconds(event.header.stamp)
        self._pending.append((end + self.config.window_margin_s, event))

    # ---------------------------------------------------------------- analyses
    def run_due(self, now: float) -> None:
        """Analyse every ended interaction whose window lies before bag time ``now``."""
        due = [p for p in self._pending if p[0] <= now]
        self._pending = [p for p in self._pending if p[0] > now]
        for _, event in sorted(due, key=lambda p: p[0]):
            self._analyze(event)

    def finish(self) -> None:
        """Analyse what is still pending at the end of the bag."""
        self.run_due(float("inf"))

    def _fail(self, iid: str, key: str, reason: str) -> None:
        self.counts[f"analyses.{key}"] += 1
        self.verdicts[iid] = Verification(False, reason=reason)

    def _analyze(self, event: Any) -> None:
        iid = event.interaction_id or (
            f"{event.primitive}:{event.target_id}:{_seconds(event.window_end):.3f}")
        if iid in self._done:
            return
        self._done.add(iid)
        if not event.target_id:
            self._fail(iid, "no_target", "the interaction names no target id")
            return
        start, end = _seconds(event.window_start), _seconds(event.window_end)
        try:
            primitive = PrimitiveRecord(
                name=event.primitive, target_id=self.world.state.resolve(event.target_id),
                start_stamp=start, end_stamp=end, reported_success=bool(event.success),
                reported_message=event.message, task=event.task,
                reported_outcome=event.outcome)
        except EvidenceError as err:
            self._fail(iid, "bad_window", f"invalid interaction window: {err}")
            return
        if primitive.target_id not in self.world.state.nodes:
            self._fail(iid, "unknown_target", f"target '{primitive.target_id}' is not in memory")
            return
        margin = self.config.window_margin_s
        window, detections = self.inputs.window(start - margin, end + margin)
        if window is None:
            self._fail(iid, "no_frames", f"no camera frame between {start - margin:.3f} and "
                       f"{end + margin:.3f} s")
            return
        self.view.replace_all(memory_snapshot(self.world.state.nodes.values()))
        try:
            prepared = self.analyzer.prepare(window, primitive, detections, iid)
            self._append(self.config.evidence_log, evidence_record(
                prepared.ctx, prepared.window, prepared.evidence, start, end))
            response, answer, attempts = self.analyzer.ask(prepared)
            recheck = (self.analyzer.harness.recheck(prepared.evidence)
                       if len(self.analyzer.harness.pending) else None)
            result = self.analyzer.verify(prepared, response, answer, attempts)
        except (EvidenceError, ReasoningError) as err:
            self._fail(iid, type(err).__name__, f"analysis failed: {type(err).__name__}: {err}")
            return
        keyframe_ids: list[str] = []
        by_frame: dict[str, str] = {}
        if self._save_keyframes is not None:
            keyframe_ids, by_frame = self._save_keyframes(
                result, event.interaction_id or result.interaction_id)
        ctx = WriteContext(
            interaction_id=iid, primitive=primitive.name, task=primitive.task, stamp=end,
            keyframe_ids=tuple(keyframe_ids), frame_keyframes=by_frame,
            detection_refs=frozenset(d.ref for d in detections),
            known=lambda node_id: node_id in self.world.state.nodes,
            event_prefix=f"analyzer:{iid}")
        plans = plan_writes(result.harness, ctx,
                            where=self.analyzer.whereabouts(prepared, detections))
        if recheck is not None:
            plans += plan_writes(recheck, ctx.rechecked(f"analyzer:{iid}:recheck"),
                                 skip_deferred=True)
        self.counts["analyses"] += 1
        self._write(plans, end)
        success, reason = outcome_answer(result.harness)
        self.verdicts[iid] = Verification(True, success, reason, tuple(keyframe_ids))

    def _write(self, plans: Sequence[Any], stamp: float) -> None:
        for plan in plans:
            if plan.update is None:
                continue
            try:
                events = self.world.apply_update(plan.update, stamp=stamp)
            except MemoryStoreError:
                self.counts["analyses.write_refused"] += 1
                continue
            self.counts["analyses.events_written"] += len(events)
            self.written.extend(events)

    def recheck(self) -> int:
        """Re-judge the deferred claims on the detections that came since the last call (the
        node's timer does this every ``recheck_period_s``; the pipeline calls it as often in
        its input's time); returns the events written."""
        fresh, self._fresh = self._fresh, []
        if not len(self.analyzer.harness.pending):
            return 0
        self.view.replace_all(memory_snapshot(self.world.state.nodes.values()))
        evidence = recheck_evidence(self.analyzer.harness.pending, self.view, fresh,
                                    self.reasoning.percepts.box_margin_m)
        if evidence is None:
            return 0
        result: HarnessResult = self.analyzer.harness.recheck(evidence)
        ctx = WriteContext.recheck(uuid.uuid4().hex[:12],
                                   max(d.stamp for d in evidence.detections), evidence.refs,
                                   lambda node_id: node_id in self.world.state.nodes)
        before = len(self.written)
        self._write(plan_writes(result, ctx, skip_deferred=True), ctx.stamp)
        return len(self.written) - before
