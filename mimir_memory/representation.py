"""What a reader of world memory may see: the memory representation an evaluated method keeps.

mimir keeps one world memory (an event log folded into a scene graph) and one keyframe store. The
methods ``mimir eval`` compares differ in what their planner may read from them, not in code paths:
a :class:`Representation` says what a read-only :class:`~mimir_memory.world.WorldMemory` shows
of each node and, for an episodic memory, which nodes it shows at all. The reader folds every
event as usual (a placement still moves a node whose parent it does not show) and narrows a copy
of the graph after each refresh.

* ``scene_graph``: everything (the full system and its SG ablations).
* an action-conditioned graph (RoboEXP-style): labels and positions, the parent tree (inside,
  on, in the hand), the contents an action revealed and whether a fixture opens; no locked
  state, no open-vocabulary properties, no recorded outcomes, no hypotheses.
* an episodic memory (MemER-style): no graph index. The keyframes perception saved are the
  candidate frames; candidates closer in time than ``merge_s`` to the previous one form one
  group, represented by its middle frame; memory holds the newest ``memory_length``
  representatives plus the ``recent_window`` newest frames. A node is visible only while one of
  those frames is linked to it in the keyframe store (fixtures too, unless ``fixtures`` is set;
  a frame is linked to the nodes that made it be saved, not to everything in view), with its
  label and position
  and nothing learned about it. Positions come from the scene graph's estimate of the node the
  frame shows, which is more than the frame alone would say; the README states this.

Task memory (goals, the hand, failed bindings) is not a representation matter: every method keeps
it, so a node in the hand or named by the caller stays visible (``pinned``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from mimir import settings
from mimir_memory.errors import ConfigError
from mimir_memory.graph import HAND_PARENT, SceneGraphState, SceneNode

ALL_PROPERTIES = "*"
"""In :attr:`Representation.properties`: every property name."""

@dataclass(frozen=True)
class Representation(settings.Checked, section="representations", error=ConfigError,
                     positive_int=("memory_length", "recent_window"),
                     non_negative=("merge_s",)):
    """One memory representation (``config/memory.yaml``, ``representations``).

    Attributes:
        name: key in the file; the planner's ``representation`` parameter names it.
        properties: property names a reader sees (``"*"``: all; empty: none).
        contents: show what inspections found inside fixtures.
        parents: show the parent tree (inside, on, in the hand).
        outcomes: show recorded task outcomes (success or failure and why).
        hypotheses: show links between nodes that may be one object.
        episodic: show only nodes the episodic frame memory holds (see the module text).
        fixtures: with ``episodic``, fixtures stay visible whether a frame shows them or not.
        memory_length: representative frames the episodic memory keeps.
        recent_window: newest frames it always holds besides them.
        merge_s: candidate frames closer than this to the previous one join its group (s).
    """

    name: str = "scene_graph"
    properties: tuple[str, ...] = (ALL_PROPERTIES,)
    contents: bool = True
    parents: bool = True
    outcomes: bool = True
    hypotheses: bool = True
    episodic: bool = False
    fixtures: bool = False
    memory_length: int = 8
    recent_window: int = 8
    merge_s: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.name.isidentifier():
            raise ConfigError(f"representation name {self.name!r} must be a plain identifier")
        if ALL_PROPERTIES in self.properties and len(self.properties) > 1:
            raise ConfigError(f"representation {self.name}: properties '*' means all; "
                              "list names or '*', not both")
        if self.fixtures and not self.episodic:
            raise ConfigError(f"representation {self.name}: fixtures applies to an episodic "
                              "memory only (a graph shows its fixtures anyway)")

    @property
    def complete(self) -> bool:
        """Whether a reader of this representation sees all of world memory."""
        return (self.properties == (ALL_PROPERTIES,) and self.contents and self.parents
                and self.outcomes and self.hypotheses and not self.episodic)

    def narrow(self, node: SceneNode) -> None:
        """Strip from ``node`` (a reader's copy) what this representation does not keep."""
        if ALL_PROPERTIES not in self.properties:
            node.properties = {k: v for k, v in node.properties.items()
                               if k in self.properties}
        if not self.contents:
            node.contents, node.contents_empty = [], None
            node.contents_source_action, node.contents_reasoning = None, ""
            node.contents_stamp = None
        if not self.parents:
            node.parent, node.parent_relation = None, None
        if not self.outcomes:
            node.task_history = []
        if not self.hypotheses:
            node.alternatives = set()


def representations_from_dict(data: object) -> dict[str, Representation]:
    """The ``representations`` section: name -> representation (``scene_graph`` always exists).

    Raises:
        ConfigError: not a mapping, an entry not a mapping, or a value the class refuses.
    """
    found = {"scene_graph": Representation()}
    if data is None:
        return found
    if not isinstance(data, Mapping):
        raise ConfigError("representations must be a mapping of name -> settings")
    for name, body in data.items():
        if body is not None and not isinstance(body, Mapping):
            raise ConfigError(f"representation {name!r} must be a mapping")
        found[str(name)] = settings.section(
            Representation, f"representations.{name}", {**(body or {}), "name": str(name)},
            ConfigError)
    if not found["scene_graph"].complete:
        raise ConfigError("representation scene_graph is the whole memory; it cannot be "
                          "narrowed (define another name)")
    return found


def load_representations(path: str | Path) -> dict[str, Representation]:
    """Read ``representations.yaml``.

    Raises:
        ConfigError: the file cannot be read or holds a bad entry.
    """
    return representations_from_dict(settings.read_mapping(path, "representations file",
                                                           ConfigError))


@dataclass(frozen=True)
class CandidateFrame:
    """A saved frame as the episodic memory sees it: id, stamp and the nodes it shows."""

    frame_id: str
    stamp: float
    node_ids: tuple[str, ...] = ()


def episodic_frames(frames: Sequence[CandidateFrame], rep: Representation) -> list[str]:
    """Ids of the frames an episodic memory holds (representatives, then the recent window).

    ``frames`` may come in any order; they are put in stamp order first.
    """
    ordered = sorted(frames, key=lambda f: (f.stamp, f.frame_id))
    groups: list[list[CandidateFrame]] = []
    for frame in ordered:
        if groups and frame.stamp - groups[-1][-1].stamp <= rep.merge_s:
            groups[-1].append(frame)
        else:
            groups.append([frame])
    representatives = [g[(len(g) - 1) // 2].frame_id for g in groups][-rep.memory_length:]
    recent = [f.frame_id for f in ordered[-rep.recent_window:]]
    return list(dict.fromkeys([*representatives, *recent]))


class FrameSource(Protocol):
    """Where an episodic view reads candidate frames (newest ``limit`` of them)."""

    def __call__(self, limit: int) -> Sequence[CandidateFrame]:
        """The newest ``limit`` saved frames."""
        ...


def keyframe_source(store: Any) -> FrameSource:
    """Candidate frames of a :class:`~mimir_memory.keyframes.KeyframeStore`."""

    def read(limit: int) -> list[CandidateFrame]:
        return [CandidateFrame(r.frame_id, r.timestamp, tuple(r.node_ids))
                for r in store.query(limit=limit)]
    return read


@dataclass
class MemoryView:
    """What a read-only world memory shows, for one representation.

    Attributes:
        representation: the representation.
        frames: candidate frames (needed when the representation is episodic).
        is_fixture: whether a label names a fixture (``fixtures``).
        pinned: node ids that stay visible whatever the frames show (task memory's hand).
        scan_limit: newest frames read for the episodic grouping.
        held: the frame ids the last projection held (for reports and tests).
    """

    representation: Representation
    frames: FrameSource | None = None
    is_fixture: Callable[[str], bool] = lambda _label: False
    pinned: Callable[[], Iterable[str]] = tuple
    scan_limit: int = 2000
    held: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.representation.episodic and self.frames is None:
            raise ConfigError(f"representation {self.representation.name} is episodic: its "
                              "view needs the keyframe store")

    def project(self, state: SceneGraphState) -> SceneGraphState:
        """The graph a reader sees: ``state`` itself for the whole memory, else a copy holding
        what the representation keeps of each node and, for an episodic memory, only the
        nodes its frames show (plus fixtures when asked, plus the pinned ones)."""
        rep = self.representation
        if rep.complete:
            return state
        visible = set(state.nodes)
        if rep.episodic:
            assert self.frames is not None
            candidates = self.frames(self.scan_limit)
            self.held = episodic_frames(candidates, rep)
            shows = {f.frame_id: f.node_ids for f in candidates}
            ids = [i for f in self.held for i in shows.get(f, ())]
            visible = {state.resolve(i) for i in [*ids, *self.pinned()]
                       if i in state.nodes or i in state.aliases}
            if rep.fixtures:
                visible |= {i for i, n in state.nodes.items() if self.is_fixture(n.label)}
        seen = hide_nodes(state, visible)
        for node in seen.nodes.values():
            rep.narrow(node)
        seen.children = {}
        for node in seen.nodes.values():
            if node.parent is not None:
                seen.children.setdefault(node.parent, set()).add(node.node_id)
        return seen


def hide_nodes(state: SceneGraphState, visible: set[str]) -> SceneGraphState:
    """A copy of ``state`` holding only the nodes in ``visible`` (links to others dropped)."""
    seen = copy.copy(state)
    seen.nodes = {i: copy.deepcopy(n) for i, n in state.nodes.items() if i in visible}
    for node in seen.nodes.values():
        if node.parent not in (None, HAND_PARENT) and node.parent not in seen.nodes:
            node.parent, node.parent_relation = None, None
        node.alternatives = {a for a in node.alternatives if a in seen.nodes}
    seen.children = {p: {c for c in kids if c in seen.nodes}
                     for p, kids in state.children.items()
                     if p in seen.nodes or p == HAND_PARENT}
    seen.keyframe_links = {f: [i for i in ids if i in seen.nodes]
                           for f, ids in state.keyframe_links.items()}
    seen.index = copy.deepcopy(state.index)
    for node_id in set(state.nodes) - visible:
        seen.index.remove(node_id)
    seen.aliases = {a: k for a, k in state.aliases.items() if k in seen.nodes}
    return seen


__all__ = ["ALL_PROPERTIES", "CandidateFrame", "FrameSource", "MemoryView", "Representation",
           "episodic_frames", "hide_nodes", "keyframe_source", "load_representations",
           "representations_from_dict"]
