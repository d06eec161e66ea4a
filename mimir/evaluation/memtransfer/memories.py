"""The memory representations MemTransfer compares: what each keeps of the demonstrations and
what it hands the policy at a step.

Every representation supplements the policy's own working window (its last steps in the
current episode, kept by the policy):

- ``working``: nothing more;
- ``full_context``: every demonstration in memory as a chronological record of poses and
  actions, with keyframes: the start, each stage done, each pose before a turn, the end, and
  evenly spread frames up to the image budget (40 over all demonstrations);
- ``summary``: one document of item locations, landmarks and routes, written by the reasoning
  backend one demonstration after another, each time rewriting the document so far;
- ``semantic``: one document of general knowledge of the warehouse and of getting about in it,
  extracted by the backend from each demonstration and then merged and refined into one;
- ``hybrid``: both documents;
- ``episodic``: every demonstration frame with what the expert did next; at each step the frame
  that looks most like the current view is found (a small CIELAB thumbnail as the code, the
  closest by Euclidean distance) and the next ``horizon`` actions from it are handed over with
  the views they led to.

Trajectory memories (full context, episodic) hold the case's own demonstrations; the documents
are written once per setting from the demonstrations that setting puts in memory across all
cases, as the paper does, and kept in files so that a stopped benchmark does not write them
again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import cv2
import numpy as np
import numpy.typing as npt

from mimir.evaluation.memtransfer.protocol import History
from mimir.paths import config_dir
from mimir_planner.reasoning.prompts import PromptLibrary
from mimir_planner.reasoning.vlm import ChatMessage, ImagePart, TextPart, VlmBackend, VlmRequest
from mimir_sim.warehouse.episode import Episode, Image
from mimir_sim.warehouse.layout import HEADINGS, TURNS, Layout, Pose, WarehouseError

DOCUMENTS = ("summary", "semantic")

Views = Callable[[Pose], Image]


class DocumentError(WarehouseError):
    """The backend's answer cannot serve as a memory document (empty, or cut off)."""


@dataclass(frozen=True)
class Recall:
    """What a representation hands the policy at one step: text and captioned images."""

    text: str = ""
    images: tuple[tuple[str, Image], ...] = ()


class Memory(Protocol):
    """A memory representation at decision time."""

    def recall(self, view: Image) -> Recall:
        """What the policy gets at a step whose current view is ``view``."""


@dataclass(frozen=True)
class Record:
    """A demonstration replayed: its poses (the start first), actions, feedback lines and the
    number of stages done after each action."""

    history: History
    poses: tuple[Pose, ...]
    actions: tuple[str, ...]
    feedback: tuple[str, ...]
    stages: tuple[int, ...]


def record(layout: Layout, history: History) -> Record:
    """Replay a demonstration on the unchanged map, keeping what the agent was told."""
    trajectory = history.trajectory
    episode = Episode(layout, history.task, trajectory.start,
                      max_steps=max(1, len(trajectory.actions)))
    feedback, stages = [], []
    for action in trajectory.actions:
        observation = episode.step(action)
        feedback.append(observation.feedback)
        stages.append(observation.stages_done)
    return Record(history, tuple(episode.poses), trajectory.actions, tuple(feedback),
                  tuple(stages))


def pose_text(pose: Pose) -> str:
    """``(x, y) facing N``."""
    return f"({pose.x}, {pose.y}) facing {HEADINGS[pose.heading]}"


def describe(rec: Record, number: int) -> str:
    """A demonstration as text: its task, start and each action with the pose it led to."""
    lines = [f"Demonstration {number}: task '{rec.history.task.instruction}', start "
             f"{pose_text(rec.poses[0])}."]
    for n, (action, pose, said) in enumerate(zip(rec.actions, rec.poses[1:], rec.feedback,
                                                 strict=True), start=1):
        note = said.split("; ", 1)[1] if "; " in said else ""
        lines.append(f"  {n}. {action} -> {pose_text(pose)}" + (f" ({note})" if note else ""))
    return "\n".join(lines)


def keyframe_steps(rec: Record, budget: int) -> list[int]:
    """The pose indices a full-context memory keeps of ``rec``: the start, each stage done,
    each pose before a turn and the end, then evenly spread ones up to ``budget`` (the must-keep
    ones evenly thinned when they alone exceed it)."""
    last = len(rec.poses) - 1
    must = {0, last}
    for n, action in enumerate(rec.actions):
        if action in TURNS:
            must.add(n)
        if rec.stages[n] > (rec.stages[n - 1] if n else 0):
            must.add(n + 1)
    chosen = sorted(must)
    if budget <= 0:
        return []
    if len(chosen) > budget:
        return _spread(chosen, budget)
    rest = [i for i in range(last + 1) if i not in must]
    return sorted(chosen + _spread(rest, budget - len(chosen)))


def _spread(values: Sequence[int], count: int) -> list[int]:
    if count <= 0 or not values:
        return []
    if count >= len(values):
        return list(values)
    return [values[round(i * (len(values) - 1) / max(1, count - 1))] for i in range(count)]


class NoHistory:
    """Working memory: the policy's own window and nothing else."""

    def recall(self, view: Image) -> Recall:
        """Nothing."""
        return Recall()


class FullContext:
    """Every demonstration's record with its keyframes, the same at every step."""

    def __init__(self, records: Sequence[Record], views: Views, max_images: int = 40) -> None:
        total = sum(len(r.poses) for r in records) or 1
        texts, images = [], []
        for number, rec in enumerate(records, start=1):
            texts.append(describe(rec, number))
            share = max(1, math.floor(max_images * len(rec.poses) / total))
            for step in keyframe_steps(rec, share):
                caption = f"demonstration {number}, after step {step}: {pose_text(rec.poses[step])}"
                images.append((caption, views(rec.poses[step])))
        self._recall = Recall("\n".join(texts), tuple(images[:max_images]))

    def recall(self, view: Image) -> Recall:
        """All records and keyframes."""
        return self._recall


def view_code(image: Image) -> npt.NDArray[np.float32]:
    """The code episodic memory matches views by: a 16x16 CIELAB thumbnail, centred and scaled
    to unit length."""
    small = cv2.resize(image, (16, 16), interpolation=cv2.INTER_AREA)
    lab = cv2.cvtColor(small, cv2.COLOR_RGB2LAB).astype(np.float32).ravel()
    lab -= lab.mean()
    norm = float(np.linalg.norm(lab))
    return lab / norm if norm > 0 else lab


class Episodic:
    """Frames linked to what the expert did next; the view-matched continuation at each step."""

    def __init__(self, records: Sequence[Record], views: Views, horizon: int = 6) -> None:
        if not records:
            raise WarehouseError("episodic memory needs at least one demonstration")
        self.horizon = horizon
        self._records = list(records)
        self._views = views
        self._index: list[tuple[int, int]] = []
        codes = []
        for r, rec in enumerate(records):
            for u in range(len(rec.actions)):
                self._index.append((r, u))
                codes.append(view_code(views(rec.poses[u])))
        if not codes:
            raise WarehouseError("episodic memory needs a demonstration with an action")
        self._codes = np.stack(codes)

    def match(self, view: Image) -> tuple[int, int]:
        """The demonstration and step whose frame is closest to ``view``."""
        distances = np.linalg.norm(self._codes - view_code(view)[None, :], axis=1)
        return self._index[int(np.argmin(distances))]

    def recall(self, view: Image) -> Recall:
        """The continuation from the closest frame: its next actions and their views."""
        r, u = self.match(view)
        rec = self._records[r]
        end = min(len(rec.actions), u + self.horizon)
        lines = [f"The most similar remembered view: demonstration of task "
                 f"'{rec.history.task.instruction}', at {pose_text(rec.poses[u])}. "
                 "The expert went on:"]
        images = [(f"remembered view at {pose_text(rec.poses[u])}", self._views(rec.poses[u]))]
        for n in range(u, end):
            lines.append(f"  {rec.actions[n]} -> {pose_text(rec.poses[n + 1])}")
            images.append((f"after {rec.actions[n]}: {pose_text(rec.poses[n + 1])}",
                           self._views(rec.poses[n + 1])))
        return Recall("\n".join(lines), tuple(images))


class Document:
    """A fixed document (summary, semantic knowledge, or both)."""

    def __init__(self, text: str) -> None:
        self._recall = Recall(text)

    def recall(self, view: Image) -> Recall:
        """The document."""
        return self._recall




@dataclass(frozen=True)
class DocumentSettings:
    """Limits of the written documents."""

    max_words: int = 600
    max_tokens: int = 1200
    merge_every: int = 10


def _prompt(name: str, **values: object) -> str:
    """A MemTransfer prompt from ``config/prompts/`` filled with ``values``."""
    return PromptLibrary(config_dir() / "prompts").get(name).render(values).strip()


def _ask(backend: VlmBackend, parts: Sequence[TextPart | ImagePart], purpose: str,
         settings: DocumentSettings) -> str:
    response = backend.complete(VlmRequest(
        (ChatMessage("user", tuple(parts)),), json_mode=False, temperature=0.0,
        max_tokens=settings.max_tokens, purpose=purpose))
    text = response.text.strip()
    if not text:
        raise DocumentError(f"the backend wrote an empty {purpose} document")
    if response.finish_reason == "length":
        raise DocumentError(f"the backend's {purpose} document was cut off at its token limit")
    return text


def write_summary(backend: VlmBackend, records: Iterable[Record], views: Views,
                  settings: DocumentSettings = DocumentSettings()) -> str:
    """The summary document, rewritten once per demonstration.

    Raises:
        DocumentError: an answer is empty or cut off.
        BackendError: the backend fails.
    """
    summary = "(empty)"
    for number, rec in enumerate(records, start=1):
        steps = sorted({0, len(rec.poses) - 1} | {
            n + 1 for n in range(len(rec.actions))
            if rec.stages[n] > (rec.stages[n - 1] if n else 0)})
        parts: list[TextPart | ImagePart] = [
            TextPart(_prompt("memtransfer_summary", limit=settings.max_words)),
            TextPart(f"Summary so far:\n{summary}"), TextPart(describe(rec, number))]
        for step in steps:
            parts += [TextPart(f"View at {pose_text(rec.poses[step])}:"),
                      ImagePart(views(rec.poses[step]))]
        summary = _ask(backend, parts, "summary", settings)
    return summary


def write_semantic(backend: VlmBackend, records: Iterable[Record],
                   settings: DocumentSettings = DocumentSettings()) -> str:
    """The semantic document: points extracted from each demonstration, merged every
    ``merge_every`` demonstrations into the knowledge so far.

    Raises:
        DocumentError: an answer is empty or cut off.
        BackendError: the backend fails.
    """
    knowledge, pending = "", []
    for number, rec in enumerate(records, start=1):
        parts = [TextPart(_prompt("memtransfer_extract")), TextPart(describe(rec, number))]
        pending.append(_ask(backend, parts, "semantic", settings))
        if len(pending) >= settings.merge_every:
            knowledge = _merge(backend, knowledge, pending, settings)
            pending = []
    if pending:
        knowledge = _merge(backend, knowledge, pending, settings)
    return knowledge


def _merge(backend: VlmBackend, knowledge: str, pending: Sequence[str],
           settings: DocumentSettings) -> str:
    points = "\n\n".join(([knowledge] if knowledge else []) + list(pending))
    return _ask(backend, [TextPart(_prompt("memtransfer_merge", limit=settings.max_words)),
                          TextPart(points)], "semantic", settings)


def document_path(folder: Path, kind: str, setting_key: str) -> Path:
    """Where the ``kind`` document of a setting is kept."""
    safe = setting_key.replace("/", "-").replace(":", "-")
    return folder / "documents" / kind / f"{safe}.md"


def read_document(folder: Path, kind: str, setting_key: str) -> str:
    """A written document.

    Raises:
        DocumentError: it has not been written.
    """
    path = document_path(folder, kind, setting_key)
    if not path.is_file():
        raise DocumentError(f"no {kind} document for {setting_key} in {path.parent}")
    return path.read_text(encoding="utf-8")
