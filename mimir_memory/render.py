"""Compact, bounded text rendering of the scene graph for a planner prompt.

One JSON object per node, in id order. When the text would exceed the bound, detail is removed
in fixed steps (reasoning, then unknown properties and old history, then everything but
identity, position and parent); if that is still too long, the least relevant nodes are left
out. A final line says what was dropped, so the planner knows the view is partial.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from mimir_memory.errors import InvalidValueError
from mimir_memory.graph import SceneGraphState, SceneNode

MIN_RENDER_CHARS = 96
DETAIL_LEVELS = ("full", "no_reasoning", "known_only", "identity")


def _round(values: Iterable[float]) -> list[float]:
    return [round(v, 2) for v in values]


def _node_record(node: SceneNode, level: int) -> dict[str, Any]:
    record: dict[str, Any] = {"id": node.node_id, "label": node.label, "pos": _round(node.centroid)}
    if node.parent is not None:
        record["parent"] = node.parent
        record["rel"] = node.parent_relation
    if level >= 3:
        return record
    if level <= 1:
        record["size"] = _round(b - a for a, b in zip(node.bbox_min, node.bbox_max, strict=True))
    props: dict[str, Any] = {}
    for name in sorted(node.properties):
        prop = node.properties[name]
        if level >= 2 and prop.value == "unknown":
            continue
        entry: dict[str, Any] = {
            "v": prop.value,
            "c": round(prop.confidence, 2),
            "src": prop.source,
        }
        if prop.is_opened is not None:
            entry["opened"] = prop.is_opened
        if level == 0 and prop.reasoning:
            entry["why"] = prop.reasoning
        props[name] = entry
    if props:
        record["props"] = props
    if node.contents or node.contents_empty is not None:
        record["contents"] = [item.get("name") for item in node.contents]
        record["empty"] = node.contents_empty
        if level == 0 and node.contents_reasoning:
            record["contents_why"] = node.contents_reasoning
    history = node.task_history if level <= 1 else node.task_history[-2:]
    if history:
        record["tasks"] = [[h["task"], h["success"], h.get("failure_reason")] for h in history]
    if node.alternatives:
        record["alts"] = sorted(node.alternatives)
    if node.misses and level <= 1:
        record["missed"] = node.misses
    return record


def _relevance(state: SceneGraphState, node: SceneNode, focus: set[str]) -> tuple[Any, ...]:
    interacted = (
        any(p.source != "perception" for p in node.properties.values())
        or bool(node.contents)
        or node.contents_empty is not None
        or bool(node.task_history)
    )
    return (
        node.node_id not in focus,
        not interacted,
        node.parent is None and not state.children.get(node.node_id),
        -node.observation_count,
        -node.last_seen,
        node.node_id,
    )


def render_graph(state: SceneGraphState, max_chars: int, focus: Iterable[str] = ()) -> str:
    """Render the graph as JSON lines no longer than ``max_chars`` characters.

    Args:
        state: The scene graph.
        max_chars: Upper bound of the returned text's length.
        focus: Node ids to keep longest when nodes must be dropped (with their parents); the
            id of a merged node stands for the node it was merged into.

    Raises:
        InvalidValueError: ``max_chars`` is below :data:`MIN_RENDER_CHARS`.
    """
    if isinstance(max_chars, bool) or not isinstance(max_chars, int):
        raise InvalidValueError(f"max_chars must be an integer, got {max_chars!r}")
    if max_chars < MIN_RENDER_CHARS:
        raise InvalidValueError(f"max_chars must be at least {MIN_RENDER_CHARS}")
    focus_set = {state.resolve(f) for f in focus if isinstance(f, str)} & state.nodes.keys()
    for node_id in list(focus_set):
        focus_set.update(a for a in state.ancestors(node_id) if a in state.nodes)
    header = f"# scene graph revision {state.revision}, {len(state.nodes)} nodes"
    ids = sorted(state.nodes)
    for level, name in enumerate(DETAIL_LEVELS):
        lines = [
            json.dumps(_node_record(state.nodes[i], level), separators=(",", ":"), sort_keys=True)
            for i in ids
        ]
        note = "" if level == 0 else f"# detail reduced to '{name}' to fit {max_chars} chars"
        text = "\n".join([header, *lines, *([note] if note else [])])
        if len(text) <= max_chars:
            return text
    # Identity level still too long: keep the most relevant nodes that fit.
    ranked = sorted(state.nodes.values(), key=lambda n: _relevance(state, n, focus_set))
    line_of = dict(zip(ids, lines, strict=True))
    kept: set[str] = set()
    budget = max_chars - len(header) - 100
    used = 0
    for node in ranked:
        cost = len(line_of[node.node_id]) + 1
        if used + cost > budget:
            continue
        kept.add(node.node_id)
        used += cost
    omitted = len(ids) - len(kept)
    note = f"# detail 'identity'; {omitted} less relevant nodes omitted to fit {max_chars} chars"
    body = [line_of[i] for i in ids if i in kept]
    return "\n".join([header, *body, note])[:max_chars]
