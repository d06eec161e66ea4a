"""Keyframe retriever (messymem.md §3.4, B.3): candidate pool, text catalog, two stages.

The candidate pool merges three sources, each capped: keyframes linked to the relevant scene
graph nodes, keyframes whose labels, tags or caption mention a task term, and the most recent
interaction keyframes. Stage one sends a compact text catalog (one row per pool frame) and gets
a shortlist; stage two shows the shortlisted thumbnails and gets a small final set, each with a
reason. Both stages run through a :class:`RetrievalReasoner`: a VLM backend with the prompts in
``config/prompts/``, or the offline reasoner, which ranks by linked-node relevance, label match,
trigger and recency (stage one) and keeps sharp, mutually distinct thumbnails, reporting each
thumbnail's edge density as a clutter cue (stage two). Every answer, also the offline one, goes
through the same strict parser.

The pool queries read the keyframe database read-only through the store's handle (indexed SQL
for node links and recent interaction frames; an in-process token index, followed
incrementally by rowid, for label matches), so the cost does not grow with the frame count.
"""

from __future__ import annotations

import heapq
import json
import logging
import re
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import cv2
import numpy as np

from mimir_memory.errors import MemoryStoreError
from mimir_memory.keyframes import KeyframeStore, dhash
from mimir_planner.config import RetrievalConfig
from mimir_planner.errors import PlanAnswerError, RetrievalError
from mimir_planner.prompted import PromptedVlm
from mimir_planner.reasoning.answer_schema import extract_json
from mimir_planner.reasoning.errors import ReasoningError
from mimir_planner.reasoning.prompts import PromptLibrary
from mimir_planner.reasoning.vlm import ImagePart, TextPart, VlmBackend
from mimir_planner.recall import canon

LOG = logging.getLogger(__name__)

OFFLINE_RETRIEVER_NAME = "offline-reasoner"
SOURCES = ("node", "label", "recent")
_STOP = frozenset({
    "the", "a", "an", "and", "or", "of", "in", "on", "into", "to", "from", "with", "for", "at",
    "by", "is", "are", "was", "it", "its", "this", "that", "find", "locate", "where", "what",
    "which", "how", "many", "look", "pick", "place", "put", "bring", "go", "open", "close", "up",
    "me", "please",
})
_WORD = re.compile(r"[a-z0-9]+")
MAX_REASON_CHARS = 300


def task_terms(texts: Iterable[str | None]) -> tuple[str, ...]:
    """Canonical content words of task mentions (stop words removed), in first-seen order."""
    out: dict[str, None] = {}
    for text in texts:
        if not text:
            continue
        for word in _WORD.findall(canon(text)):
            if word not in _STOP and not word.isdigit():
                out[word] = None
    return tuple(out)


@dataclass(frozen=True)
class RetrievalQuery:
    """What the retriever searches for.

    Attributes:
        task: Task text shown to the model.
        node_ids: Relevant scene graph nodes, most relevant first (recalled object, its
            parent, explicit source/target, exploration fixture).
        terms: Canonical task words matched against keyframe labels, tags and captions.
    """

    task: str
    node_ids: tuple[str, ...] = ()
    terms: tuple[str, ...] = ()


@dataclass(frozen=True)
class PoolEntry:
    """One candidate keyframe with the metadata the catalog shows."""

    frame_id: str
    timestamp: float
    trigger: str
    camera: str
    action: str | None
    node_ids: tuple[str, ...]
    labels: tuple[str, ...]
    caption: str
    sources: tuple[str, ...]
    linked: tuple[str, ...] = ()
    matched: tuple[str, ...] = ()

    def catalog_line(self, idx: int, max_labels: int) -> str:
        """``idx|frame_id|trigger|camera|action|graph_nodes|labels`` row."""
        labels = ",".join(self.labels[:max_labels])
        nodes = ",".join(self.node_ids[:6])
        return (
            f"{idx}|{self.frame_id[:12]}|{self.trigger}|{self.camera}|{self.action or '-'}|"
            f"{nodes or '-'}|{labels or '-'}"
        )


@dataclass(frozen=True)
class Choice:
    """A frame chosen by a stage: 1-based catalog index and the reason."""

    idx: int
    reason: str


@dataclass(frozen=True)
class RetrievedFrame:
    """A keyframe handed to the planner with why it was selected.

    Attributes:
        frame_id: Keyframe id.
        reason: Why the frame helps (from stage two, else stage one).
        entry: Its catalog metadata.
        edge_density: Share of edge pixels in the thumbnail (clutter cue), when measured.
    """

    frame_id: str
    reason: str
    entry: PoolEntry
    edge_density: float | None = None


@dataclass(frozen=True)
class RetrievalResult:
    """Outcome of one retrieval."""

    frames: tuple[RetrievedFrame, ...]
    pool: tuple[PoolEntry, ...]
    catalog: str
    shortlist: tuple[Choice, ...]
    reasoner: str


# ---------------------------------------------------------------- strict answer parsing
def _fields(obj: Mapping[str, object], path: str, required: Sequence[str]) -> None:
    for key in required:
        if key not in obj:
            raise PlanAnswerError("missing field", f"{path}.{key}")
    extra = sorted(set(obj) - set(required))
    if extra:
        raise PlanAnswerError(f"field outside the schema: {extra[0]}", path)


def _index(value: object, path: str, count: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlanAnswerError("expected an integer index", path)
    if not 1 <= value <= count:
        raise PlanAnswerError(f"index {value} outside 1..{count}", path)
    return value


def _reason(value: object, path: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise PlanAnswerError("expected a non-empty reason", path)
    if len(value) > MAX_REASON_CHARS:
        raise PlanAnswerError("reason too long", path)
    return value.strip()


def _json(text: object) -> dict[str, object]:
    try:
        return extract_json(text)
    except ReasoningError as err:
        raise PlanAnswerError(str(err)) from err


def _frame_items(
    text: object, key: str, max_k: int, fields: Sequence[str]
) -> Iterator[tuple[str, dict[str, object]]]:
    """The items of the answer's one list ``key`` (at most ``max_k`` frames), with their paths.

    Each item must be an object with exactly ``fields``; items are checked as they are taken.
    """
    obj = _json(text)
    _fields(obj, "$", (key,))
    items = obj[key]
    if not isinstance(items, list):
        raise PlanAnswerError("expected a list", f"$.{key}")
    if len(items) > max_k:
        raise PlanAnswerError(f"more than {max_k} frames {key}", f"$.{key}")
    for i, item in enumerate(items):
        path = f"$.{key}[{i}]"
        if not isinstance(item, dict):
            raise PlanAnswerError("expected an object", path)
        _fields(item, path, fields)
        yield path, item


def parse_shortlist_answer(
    text: object, pool: Sequence[PoolEntry], max_k: int
) -> tuple[Choice, ...]:
    """Parse ``{"chosen": [{"idx", "frame_id", "reason"}]}`` against the catalog.

    The frame id prefix must match the row's id, so a model cannot point at a frame that is
    not in the catalog by a shifted index.

    Raises:
        PlanAnswerError: Malformed answer, unknown index, mismatched id, duplicates, too many.
    """
    out: list[Choice] = []
    seen: set[int] = set()
    for path, item in _frame_items(text, "chosen", max_k, ("idx", "frame_id", "reason")):
        idx = _index(item["idx"], f"{path}.idx", len(pool))
        fid = item["frame_id"]
        if not isinstance(fid, str) or len(fid) < 6 or not pool[idx - 1].frame_id.startswith(fid):
            raise PlanAnswerError("frame_id does not match the catalog row", f"{path}.frame_id")
        if idx in seen:
            raise PlanAnswerError("frame chosen twice", f"{path}.idx")
        seen.add(idx)
        out.append(Choice(idx, _reason(item["reason"], f"{path}.reason")))
    return tuple(out)


def parse_selection_answer(
    text: object, shortlist: Sequence[Choice], max_k: int
) -> tuple[Choice, ...]:
    """Parse ``{"selected": [{"idx", "reason"}]}``; indices must come from the shortlist.

    Raises:
        PlanAnswerError: Malformed answer, index outside the shortlist, duplicates, too many.
    """
    allowed = {c.idx for c in shortlist}
    out: list[Choice] = []
    for path, item in _frame_items(text, "selected", max_k, ("idx", "reason")):
        idx = item["idx"]
        if isinstance(idx, bool) or not isinstance(idx, int) or idx not in allowed:
            raise PlanAnswerError("index is not in the shortlist", f"{path}.idx")
        if any(c.idx == idx for c in out):
            raise PlanAnswerError("frame selected twice", f"{path}.idx")
        out.append(Choice(idx, _reason(item["reason"], f"{path}.reason")))
    return tuple(out)


# ------------------------------------------------------------------------ reasoners
@dataclass(frozen=True)
class StageOneRequest:
    """Inputs of stage one (text catalog)."""

    query: RetrievalQuery
    graph_summary: str
    pool: tuple[PoolEntry, ...]
    catalog: str
    max_k: int


@dataclass(frozen=True)
class StageTwoRequest:
    """Inputs of stage two (thumbnails of the shortlist, RGB)."""

    query: RetrievalQuery
    pool: tuple[PoolEntry, ...]
    shortlist: tuple[Choice, ...]
    thumbnails: Mapping[int, np.ndarray]
    max_k: int


class RetrievalReasoner(Protocol):
    """Answers the two retrieval stages as JSON text."""

    @property
    def name(self) -> str:
        """Name for logs."""
        ...

    def stage_one(self, request: StageOneRequest) -> str:
        """``{"chosen": [...]}`` answer text."""
        ...

    def stage_two(self, request: StageTwoRequest) -> str:
        """``{"selected": [...]}`` answer text."""
        ...


def edge_density(rgb: np.ndarray) -> float:
    """Share of Canny edge pixels in an image (a simple clutter measure)."""
    grey = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2GRAY)
    edges = cv2.Canny(grey, 80, 160)
    return float(np.count_nonzero(edges)) / float(edges.size)


class FrameView(Protocol):
    """What a keyframe shows of a node (see :class:`mimir_planner.looks.FrameLook`)."""

    @property
    def size_px(self) -> tuple[int, int]: ...

    @property
    def words(self) -> frozenset[str]: ...


#: (frame id, node id) -> what the frame shows of the node, or why it shows nothing.
FrameViewer = Callable[[str, str], "FrameView | str"]


class OfflineRetrievalReasoner:
    """Model-free stages: metadata ranking, then what the thumbnails and frames show.

    Stage one scores each catalog row by links to the relevant nodes (earlier nodes weigh more),
    matched task words, interaction triggers (peak and after frames first) and recency. Stage two
    drops thumbnails whose difference hash is within ``duplicate_bits`` of an already kept one
    and states each kept frame's edge density. With a ``viewer`` (the planner's keyframe looks)
    it first puts the frames that show the most relevant node measurably (its remembered box in
    view and its crop standing out) ahead of the others, those whose crop carries a colour or
    pattern word of the task first, and says what each shows.
    """

    def __init__(self, duplicate_bits: int = 5, viewer: FrameViewer | None = None) -> None:
        self.duplicate_bits = duplicate_bits
        self.viewer = viewer

    @property
    def name(self) -> str:
        return OFFLINE_RETRIEVER_NAME

    @staticmethod
    def score(entry: PoolEntry, query: RetrievalQuery, rank: int, size: int) -> float:
        """Stage-one score of a pool entry (rank 0 is the newest frame)."""
        value = 0.0
        weights = {nid: 3.0 if i == 0 else 2.0 for i, nid in enumerate(query.node_ids)}
        value += sum(weights.get(n, 0.0) for n in entry.linked)
        value += 2.0 * len(entry.matched)
        if entry.trigger in ("interaction_peak", "interaction_post"):
            value += 1.0
        elif entry.trigger.startswith("interaction"):
            value += 0.5
        return value + (1.0 - rank / max(size, 1))

    def stage_one(self, request: StageOneRequest) -> str:
        pool = request.pool
        order = sorted(range(len(pool)), key=lambda i: -pool[i].timestamp)
        recency = {i: r for r, i in enumerate(order)}
        scored = sorted(
            ((self.score(e, request.query, recency[i], len(pool)), i) for i, e in enumerate(pool)),
            key=lambda t: (-t[0], t[1]),
        )
        chosen = []
        for value, i in scored[: request.max_k]:
            entry = pool[i]
            if value < 1.0 and (entry.linked or entry.matched):
                continue
            parts = []
            if entry.linked:
                parts.append("shows " + ", ".join(entry.linked))
            if entry.matched:
                parts.append("labels mention " + ", ".join(entry.matched))
            parts.append(f"{entry.trigger} frame")
            chosen.append({
                "idx": i + 1,
                "frame_id": entry.frame_id[:12],
                "reason": f"{OFFLINE_RETRIEVER_NAME}: " + "; ".join(parts),
            })
        return json.dumps({"chosen": chosen})

    def _seen(self, request: StageTwoRequest) -> dict[int, tuple[int, str]]:
        """Per shortlisted frame: its rank key (0: shows the target with a task word, 1: shows
        it, 2: does not) and what it shows."""
        target = request.query.node_ids[0] if request.query.node_ids else None
        if self.viewer is None or target is None:
            return {}
        terms = set(request.query.terms)
        out: dict[int, tuple[int, str]] = {}
        for choice in request.shortlist:
            view = self.viewer(request.pool[choice.idx - 1].frame_id, target)
            if isinstance(view, str):
                out[choice.idx] = (2, f"{target} not measurable here ({view})")
                continue
            wanted = sorted(view.words & terms)
            width, height = view.size_px
            said = f"shows {target} at {width}x{height} px"
            if view.words:
                said += f", looking {', '.join(sorted(view.words))}"
            out[choice.idx] = (0 if wanted else 1, said)
        return out

    def stage_two(self, request: StageTwoRequest) -> str:
        seen = self._seen(request)
        shortlist = sorted(request.shortlist, key=lambda c: seen.get(c.idx, (1, ""))[0])
        kept: list[tuple[int, int]] = []
        selected: list[dict[str, object]] = []
        for choice in shortlist:
            if len(selected) >= request.max_k:
                break
            thumb = request.thumbnails.get(choice.idx)
            if thumb is None:
                continue
            grey = cv2.cvtColor(np.ascontiguousarray(thumb), cv2.COLOR_RGB2GRAY)
            frame_hash = dhash(grey)
            if any((frame_hash ^ h).bit_count() <= self.duplicate_bits for _, h in kept):
                continue
            kept.append((choice.idx, frame_hash))
            density = edge_density(thumb)
            shows = f"; {seen[choice.idx][1]}" if choice.idx in seen else ""
            selected.append({
                "idx": choice.idx,
                "reason": f"{choice.reason}; distinct thumbnail, edge density {density:.3f}"
                          f"{shows}",
            })
        return json.dumps({"selected": selected})


class VlmRetrievalReasoner(PromptedVlm):
    """Both stages through a VLM backend and the retrieval prompt templates."""

    def __init__(
        self, backend: VlmBackend, prompts: PromptLibrary, config: RetrievalConfig
    ) -> None:
        super().__init__(backend, prompts)
        self.config = config

    def stage_one(self, request: StageOneRequest) -> str:
        text = self.prompts.render(self.config.stage1_prompt, {
            "goal": request.query.task,
            "scene_graph_summary": request.graph_summary,
            "catalog": request.catalog,
            "max_k": request.max_k,
        })
        return self.ask([TextPart(text)], "retrieval_stage1")

    def stage_two(self, request: StageTwoRequest) -> str:
        listing = []
        parts: list[TextPart | ImagePart] = []
        for choice in request.shortlist:
            entry = request.pool[choice.idx - 1]
            listing.append(f"{choice.idx}: {entry.trigger} {entry.camera} - {choice.reason}")
        text = self.prompts.render(self.config.stage2_prompt, {
            "goal": request.query.task,
            "shortlist": "\n".join(listing),
            "max_k": request.max_k,
        })
        parts.append(TextPart(text))
        for choice in request.shortlist:
            thumb = request.thumbnails.get(choice.idx)
            if thumb is not None:
                parts.append(TextPart(f"frame {choice.idx}:"))
                parts.append(ImagePart(thumb, name=f"frame_{choice.idx}"))
        return self.ask(parts, "retrieval_stage2")


# ---------------------------------------------------------------------- label index
def _grouped(rows: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """``(frame_id, value)`` rows as each frame's values, in row order."""
    out: dict[str, list[str]] = {}
    for fid, value in rows:
        out.setdefault(fid, []).append(value)
    return out


@dataclass
class _LabelIndex:
    """Token -> frame ids over labels, tags and captions, followed by rowid."""

    words: dict[str, set[str]] = field(default_factory=dict)
    stamps: dict[str, float] = field(default_factory=dict)
    frames_rowid: int = 0
    labels_rowid: int = 0

    def add(self, frame_id: str, text: str) -> None:
        for word in set(_WORD.findall(canon(text))):
            self.words.setdefault(word, set()).add(frame_id)


class KeyframeRetriever:
    """Candidate pool, catalog and the two retrieval stages over a :class:`KeyframeStore`."""

    def __init__(
        self,
        store: KeyframeStore,
        config: RetrievalConfig,
        reasoner: RetrievalReasoner | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.reasoner: RetrievalReasoner = reasoner or OfflineRetrievalReasoner()
        self._index = _LabelIndex()
        self._lock = threading.Lock()

    def _db(self) -> sqlite3.Connection:
        conn: sqlite3.Connection = self.store.handle.db.conn
        return conn

    def refresh_index(self) -> int:
        """Fold keyframes and labels stored since the last call into the label index.

        Returns:
            Number of rows read.

        Raises:
            RetrievalError: The keyframe database cannot be read.
        """
        idx = self._index
        try:
            with self._lock:
                db = self._db()
                rows = db.execute(
                    "SELECT rowid, frame_id, timestamp, tags, caption FROM keyframes"
                    " WHERE rowid > ? ORDER BY rowid", [idx.frames_rowid]
                ).fetchall()
                for rowid, frame_id, stamp, tags, caption in rows:
                    idx.stamps[frame_id] = float(stamp)
                    for tag in json.loads(tags):
                        idx.add(frame_id, str(tag))
                    if caption:
                        idx.add(frame_id, caption)
                    idx.frames_rowid = max(idx.frames_rowid, int(rowid))
                labels = db.execute(
                    "SELECT rowid, frame_id, label FROM keyframe_labels WHERE rowid > ?"
                    " ORDER BY rowid", [idx.labels_rowid]
                ).fetchall()
                for rowid, frame_id, label in labels:
                    idx.add(frame_id, label)
                    idx.labels_rowid = max(idx.labels_rowid, int(rowid))
        except (sqlite3.Error, json.JSONDecodeError) as err:
            raise RetrievalError(f"cannot read the keyframe index: {err}") from err
        return len(rows) + len(labels)

    def _label_matches(self, terms: Sequence[str], limit: int) -> list[str]:
        found: set[str] = set()
        for term in terms:
            found |= self._index.words.get(term, set())
        stamps = self._index.stamps
        return heapq.nlargest(limit, found, key=lambda f: (stamps.get(f, 0.0), f))

    def candidate_pool(self, query: RetrievalQuery) -> list[PoolEntry]:
        """Merged, deduplicated pool from the three capped sources.

        Raises:
            RetrievalError: Malformed query or unreadable database.
        """
        if not isinstance(query, RetrievalQuery):
            raise RetrievalError("query must be a RetrievalQuery")
        cfg = self.config
        self.refresh_index()
        sources: dict[str, list[str]] = {}
        node_ids = [n for n in query.node_ids if isinstance(n, str) and n]
        try:
            db = self._db()
            # Newest links per node from the node index (rowid order is save order), merged
            # by timestamp; avoids sorting every frame of a much-seen node.
            linked: set[str] = set()
            for node_id in dict.fromkeys(node_ids):
                linked.update(r[0] for r in db.execute(
                    "SELECT frame_id FROM keyframe_nodes WHERE node_id = ?"
                    " ORDER BY rowid DESC LIMIT ?", [node_id, cfg.node_cap]
                ).fetchall())
            stamps = self._index.stamps
            by_node = heapq.nlargest(cfg.node_cap, linked,
                                     key=lambda f: (stamps.get(f, 0.0), f))
            recent = [r[0] for r in db.execute(
                "SELECT frame_id FROM keyframes WHERE trigger LIKE 'interaction%'"
                " ORDER BY timestamp DESC LIMIT ?", [cfg.recent_cap]
            ).fetchall()]
            labelled = self._label_matches(query.terms, cfg.label_cap * 2)
            sources = {"node": by_node, "label": labelled, "recent": recent}
            order: dict[str, list[str]] = {}
            for name in SOURCES:
                for fid in sources[name]:
                    order.setdefault(fid, []).append(name)
            entries = self._entries(list(order), query)
        except sqlite3.Error as err:
            raise RetrievalError(f"cannot query the keyframe index: {err}") from err
        label_kept = 0
        out: list[PoolEntry] = []
        for fid, names in order.items():
            entry = entries.get(fid)
            if entry is None:
                continue
            if names == ["label"]:
                if label_kept >= cfg.label_cap:
                    continue
                label_kept += 1
            out.append(PoolEntry(**{**entry.__dict__, "sources": tuple(names)}))
        return out

    def _entries(self, frame_ids: list[str], query: RetrievalQuery) -> dict[str, PoolEntry]:
        if not frame_ids:
            return {}
        db = self._db()
        marks = ",".join("?" * len(frame_ids))
        nodes = _grouped(db.execute(
            f"SELECT frame_id, node_id FROM keyframe_nodes WHERE frame_id IN ({marks})"
            " ORDER BY rowid", frame_ids
        ))
        labels = _grouped(db.execute(
            f"SELECT frame_id, label FROM keyframe_labels WHERE frame_id IN ({marks})"
            " ORDER BY frame_id, position", frame_ids
        ))
        relevant = set(query.node_ids)
        out: dict[str, PoolEntry] = {}
        for fid, stamp, trigger, camera, action, tags, caption in db.execute(
            "SELECT frame_id, timestamp, trigger, camera, action, tags, caption FROM keyframes"
            f" WHERE frame_id IN ({marks})", frame_ids
        ).fetchall():
            frame_nodes = tuple(nodes.get(fid, ()))
            frame_labels = tuple(dict.fromkeys([*labels.get(fid, ()), *json.loads(tags)]))
            words = set(_WORD.findall(canon(" ".join([*frame_labels, caption]))))
            out[fid] = PoolEntry(
                frame_id=fid,
                timestamp=float(stamp),
                trigger=trigger,
                camera=camera,
                action=action,
                node_ids=frame_nodes,
                labels=frame_labels,
                caption=caption,
                sources=(),
                linked=tuple(n for n in query.node_ids if n in frame_nodes and n in relevant),
                matched=tuple(t for t in query.terms if t in words),
            )
        return out

    def catalog(self, pool: Sequence[PoolEntry]) -> str:
        """The stage-one catalog text, one row per pool entry (1-based index)."""
        header = "idx|frame_id|trigger|camera|action|graph_nodes|labels"
        rows = [e.catalog_line(i + 1, self.config.catalog_max_labels) for i, e in enumerate(pool)]
        return "\n".join([header, *rows])

    def _thumbnails(self, pool: Sequence[PoolEntry], shortlist: Sequence[Choice]) -> dict[int, Any]:
        out: dict[int, Any] = {}
        for choice in shortlist:
            frame_id = pool[choice.idx - 1].frame_id
            try:
                image = self.store.load_image(frame_id, thumbnail=True)
            except MemoryStoreError as err:
                LOG.warning("thumbnail of %s unavailable: %s", frame_id, err)
                continue
            if image.ndim == 2:
                out[choice.idx] = cv2.cvtColor(image, cv2.COLOR_GRAY2RGB)
            else:
                out[choice.idx] = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        return out

    def _ask(self, call: Any, parse: Any) -> tuple[Choice, ...]:
        last: PlanAnswerError | None = None
        for attempt in range(self.config.stage_attempts):
            try:
                text = call()
            except ReasoningError as err:
                raise RetrievalError(f"retrieval model failed: {err}") from err
            try:
                result: tuple[Choice, ...] = parse(text)
                return result
            except PlanAnswerError as err:
                LOG.warning("retrieval answer rejected (attempt %d): %s", attempt + 1, err)
                last = err
        raise RetrievalError(f"no valid retrieval answer: {last}") from last

    def retrieve(self, query: RetrievalQuery, graph_summary: str = "") -> RetrievalResult:
        """Pool, catalog, stage one, stage two.

        Raises:
            RetrievalError: Unreadable database or no valid answer within the attempts.
        """
        pool = tuple(self.candidate_pool(query))
        catalog = self.catalog(pool)
        cfg = self.config
        if not pool:
            return RetrievalResult((), (), catalog, (), self.reasoner.name)
        one = StageOneRequest(query, graph_summary, pool, catalog, cfg.shortlist_k)
        shortlist = self._ask(
            lambda: self.reasoner.stage_one(one),
            lambda t: parse_shortlist_answer(t, pool, cfg.shortlist_k),
        )
        if not shortlist:
            return RetrievalResult((), pool, catalog, (), self.reasoner.name)
        thumbs = self._thumbnails(pool, shortlist)
        two = StageTwoRequest(query, pool, shortlist, thumbs, cfg.final_k)
        selected = self._ask(
            lambda: self.reasoner.stage_two(two),
            lambda t: parse_selection_answer(t, shortlist, cfg.final_k),
        )
        frames = []
        for choice in selected:
            thumb = thumbs.get(choice.idx)
            frames.append(RetrievedFrame(
                frame_id=pool[choice.idx - 1].frame_id,
                reason=choice.reason,
                entry=pool[choice.idx - 1],
                edge_density=edge_density(thumb) if thumb is not None else None,
            ))
        return RetrievalResult(tuple(frames), pool, catalog, shortlist, self.reasoner.name)
