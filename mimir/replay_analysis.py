"""The interaction analyzer inside ``mimir replay --fast``.

When a bag holds the executor's interaction events, the replay runs the analyzer the live
graph runs (:class:`~mimir_planner.reasoning.InteractionAnalyzer` with the deployment's
reasoning settings and backend, the offline reasoner in the simulation's deployment): the
analyzer node's window recorder buffers the cameras, the robot contract's signals (gripper,
achieved and commanded hand pose) and the detections from the bag's messages, and each ended
interaction is analysed once the bag has passed its window and margin, so the frames after it
are in. The writes the harness admits go straight into world memory
(:meth:`~mimir_memory.world.WorldMemory.apply_update`) with the analyzer's update ids, so a
replay writes what the analyzer node would have sent to ``update_node``. Interaction keyframes
are not saved (the keyframe node's part of an analysis).

Message time is the only clock: nothing waits for late frames or transforms, since the bag
already holds everything it will ever hold.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping
from typing import Any

from mimir import transforms as tfm
from mimir.nodes.planner.analyzer_inputs import WindowRecorder, detections_from_msg
from mimir.nodes.planner.analyzer_params import AnalyzerNodeConfig
from mimir.paths import config_file
from mimir_memory.errors import MemoryStoreError
from mimir_memory.world import WorldMemory
from mimir_planner.reasoning import (
    InteractionAnalyzer,
    PrimitiveRecord,
    load_reasoning_config,
    make_backend,
    with_model,
)
from mimir_planner.reasoning.config import with_verifiers_off
from mimir_planner.reasoning.errors import EvidenceError, ReasoningError
from mimir_planner.reasoning.world_view import InMemoryWorld, memory_snapshot
from mimir_planner.reasoning.writes import WriteContext, plan_writes
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


class ReplayAnalyzer:
    """Buffers an action window's streams from bag messages and analyses each interaction.

    Args:
        world: World memory the replay builds (read for the analyzer, written with verdicts).
        tf: The replay's transform buffer (the whole bag).
        sections: The deployment's node sections (``analyzer`` applies).

    Raises:
        ValueError: the analyzer section or the reasoning settings are invalid.
    """

    def __init__(self, world: WorldMemory, tf: tfm.TransformBuffer,
                 sections: Mapping[str, Mapping[str, Any]]) -> None:
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
        except (OSError, ReasoningError) as err:
            raise ValueError(f"cannot set up the analyzer: {err}") from err
        self.world = world
        self.view: InMemoryWorld = InMemoryWorld()
        self.analyzer = InteractionAnalyzer(self.backend, self.view, reasoning)
        self.counts: Counter[str] = Counter()
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
            for detection in found:
                self.inputs.detections.add(detection.stamp, detection)

    def on_ended(self, event: Any) -> None:
        """An interaction ended: analyse it once the bag has passed its window."""
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

    def _analyze(self, event: Any) -> None:
        iid = event.interaction_id or (
            f"{event.primitive}:{event.target_id}:{_seconds(event.window_end):.3f}")
        if iid in self._done:
            return
        self._done.add(iid)
        if not event.target_id:
            self.counts["analyses.no_target"] += 1
            return
        start, end = _seconds(event.window_start), _seconds(event.window_end)
        try:
            primitive = PrimitiveRecord(
                name=event.primitive, target_id=self.world.state.resolve(event.target_id),
                start_stamp=start, end_stamp=end, reported_success=bool(event.success),
                reported_message=event.message, task=event.task,
                reported_outcome=event.outcome)
        except EvidenceError:
            self.counts["analyses.bad_window"] += 1
            return
        if primitive.target_id not in self.world.state.nodes:
            self.counts["analyses.unknown_target"] += 1
            return
        margin = self.config.window_margin_s
        window, detections = self.inputs.window(start - margin, end + margin)
        if window is None:
            self.counts["analyses.no_frames"] += 1
            return
        self.view.replace_all(memory_snapshot(self.world.state.nodes.values()))
        try:
            prepared = self.analyzer.prepare(window, primitive, detections, iid)
            response, answer, attempts = self.analyzer.ask(prepared)
            result = self.analyzer.verify(prepared, response, answer, attempts)
        except (EvidenceError, ReasoningError) as err:
            self.counts[f"analyses.{type(err).__name__}"] += 1
            return
        ctx = WriteContext(
            interaction_id=iid, primitive=primitive.name, task=primitive.task, stamp=end,
            keyframe_ids=(), frame_keyframes={},
            detection_refs=frozenset(d.ref for d in detections),
            known=lambda node_id: node_id in self.world.state.nodes,
            event_prefix=f"analyzer:{iid}")
        plans = plan_writes(result.harness, ctx,
                            where=self.analyzer.whereabouts(prepared, detections))
        self.counts["analyses"] += 1
        for plan in plans:
            if plan.update is None:
                continue
            try:
                events = self.world.apply_update(plan.update, stamp=end)
            except MemoryStoreError:
                self.counts["analyses.write_refused"] += 1
                continue
            self.counts["analyses.events_written"] += len(events)
