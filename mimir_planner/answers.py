"""Answers to the recognised question forms, read from world memory only.

Each function returns the literal answer text, or None when memory does not hold what the
question needs (the planner then explores or blocks; it never invents an answer).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from mimir_memory.graph import SceneGraphState, SceneNode
from mimir_planner.instructions import GoalSpec
from mimir_planner.recall import Candidate, EvidenceKind, GoalRecall, RecallQuery, canon


@dataclass(frozen=True)
class NamedEntity:
    """Something an answer names, with where memory places it.

    Attributes:
        node_id: Scene-graph id; empty for an item known only as listed contents.
        label: Label of the thing.
        position: Remembered position in the map frame (m): the node's centroid, or for a
            listed item the centroid of the fixture that lists it. None when unknown.
    """

    node_id: str
    label: str
    position: tuple[float, float, float] | None


def node_entity(node: SceneNode) -> NamedEntity:
    """The entity of a scene-graph node."""
    x, y, z = node.centroid
    return NamedEntity(node.node_id, node.label, (float(x), float(y), float(z)))


def item_entity(world: SceneGraphState, holder: SceneNode, name: str,
                node_id: str = "") -> NamedEntity:
    """The entity of an item a fixture lists (its own node when the listing names one)."""
    if node_id and node_id in world.nodes:
        return node_entity(world.nodes[node_id])
    x, y, z = holder.centroid
    return NamedEntity("", name, (float(x), float(y), float(z)))


def candidate_entity(world: SceneGraphState, cand: Candidate) -> NamedEntity:
    """The entity a recall candidate stands for (the listed item for a contents match)."""
    node = world.nodes[cand.node_id]
    if cand.content_item is None:
        return node_entity(node)
    listed = next((str(i.get("node_id") or "") for i in node.contents
                   if str(i.get("name", "")) == cand.content_item), "")
    return item_entity(world, node, cand.content_item, listed)


def mentioned_entities(text: str, world: SceneGraphState) -> list[NamedEntity]:
    """Nodes whose ids the text names, in the order they first appear."""
    found: list[tuple[int, str]] = []
    for node_id in world.nodes:
        match = re.search(rf"(?<![\w]){re.escape(node_id)}(?![\w])", text)
        if match:
            found.append((match.start(), node_id))
    return [node_entity(world.nodes[i]) for _, i in sorted(found)]


def _unique(entities: Iterable[NamedEntity]) -> list[NamedEntity]:
    return list(dict.fromkeys(entities))


def _where(node: SceneNode, world: SceneGraphState) -> str:
    if node.parent is None:
        x, y, z = node.centroid
        return f"at ({x:.2f}, {y:.2f}, {z:.2f}) m in the map"
    parent = world.nodes.get(node.parent)
    name = f"{node.parent} ({parent.label})" if parent is not None else node.parent
    rel = {"container": "inside", "surface": "on", "hand": "held in", "room": "in"}
    return f"{rel.get(node.parent_relation or '', 'in')} {name}"


def _resolve(recall: GoalRecall, world: SceneGraphState, mention: str) -> list[SceneNode]:
    return [world.nodes[i] for i in recall.resolve(world, mention)]


def _query(spec: GoalSpec) -> RecallQuery:
    """The recall of a question's object; attribute words fail closed (only instances memory
    knows to carry them, ``green`` of ``green apple``, are answered about)."""
    assert spec.obj is not None
    return RecallQuery(obj=spec.obj, source=spec.source if spec.question_kind == "how_many"
                       else None, near=spec.near, avoid=spec.avoid, require_attributes=True)


def _holders_of(world: SceneGraphState, recall: GoalRecall, mention: str) -> list[SceneNode]:
    """Nodes that list ``mention`` among their contents or hold a node it names."""
    holders = {n.node_id for n in world.nodes.values()
               if any(recall.describes(world, mention, n, str(i.get("name", "")))
                      for i in n.contents)}
    holders |= {n.parent for n in world.nodes.values()
                if n.parent in world.nodes and recall.describes(world, mention, n)}
    return [world.nodes[h] for h in sorted(h for h in holders if h is not None)]


def _names(recall: GoalRecall, mention: str, node: SceneNode) -> bool:
    """Whether ``mention`` names ``node`` by id, label or synonym (not by a partial label or
    a brand)."""
    match = recall.matches(mention, node)
    return match is not None and match.names_alone


def _in_state(world: SceneGraphState, recall: GoalRecall, label: str,
              state: str) -> list[SceneNode] | None:
    """Nodes of ``label`` remembered in ``state`` (None: memory knows no such node)."""
    nodes = [n for n in world.nodes.values() if _names(recall, label, n)]
    if not nodes:
        return None
    out = []
    for node in sorted(nodes, key=lambda n: n.node_id):
        if state == "locked":
            prop = node.properties.get("locked")
            hit = prop is not None and prop.value is True
        elif state in ("open", "opened", "closed"):
            openable = node.properties.get("openable")
            opened = openable.is_opened if openable is not None else None
            hit = opened is (state != "closed")
        else:
            hit = node.contents_empty is True and not node.contents
        if hit:
            out.append(node)
    return out


def _destination(world: SceneGraphState, recall: GoalRecall,
                 spec: GoalSpec) -> SceneNode | None:
    """The fixture where ``spec.obj`` belongs: the one holding the most of its kind.

    Fixtures of the asked kind (``spec.target``) that are not remembered locked are scored by
    what they hold (listed contents and nodes inside): two points per thing of the same name,
    one per thing of a shared category. None when no fixture scores or the best is tied.
    """
    assert spec.obj is not None and spec.target is not None
    obj = spec.obj
    kinds = recall.categories.of(obj)
    scored: list[tuple[int, str]] = []
    for node in world.nodes.values():
        if not _names(recall, spec.target, node):
            continue
        locked = node.properties.get("locked")
        if locked is not None and locked.value is True:
            continue
        held = [str(i.get("name", "")) for i in node.contents]
        held += [n.label for n in world.nodes.values() if n.parent == node.node_id]
        score = sum(2 if recall.names_thing(h, obj) else
                    int(bool(kinds & recall.categories.of(h))) for h in held if h)
        if score > 0:
            scored.append((score, node.node_id))
    scored.sort(reverse=True)
    if not scored or (len(scored) > 1 and scored[0][0] == scored[1][0]):
        return None
    return world.nodes[scored[0][1]]


def answer_question(spec: GoalSpec, world: SceneGraphState, recall: GoalRecall) -> str | None:
    """The literal answer of a question goal from memory, or None when memory lacks it."""
    answer = _ANSWERS.get(spec.question_kind or "")
    return None if answer is None else answer(spec, world, recall)


def _answer_where(spec: GoalSpec, world: SceneGraphState, recall: GoalRecall) -> str | None:
    if not (spec.obj):
        return None
    found = recall.recall(world, _query(spec))
    if not found:
        return None
    places = []
    for cand in found:
        if cand.content_item is not None:
            places.append(f"inside {cand.node_id} ({cand.label})")
        else:
            places.append(f"{cand.node_id} is " + _where(world.nodes[cand.node_id], world))
    return f"The {spec.obj}: " + "; ".join(dict.fromkeys(places)) + "."


def _answer_what(spec: GoalSpec, world: SceneGraphState, recall: GoalRecall) -> str | None:
    if not (spec.source):
        return None
    holders = _resolve(recall, world, spec.source)
    known = [h for h in holders if h.contents or h.contents_empty is not None]
    if not known:
        return None
    parts = []
    for node in known:
        items = [str(i.get("name")) for i in recall.listed(world, node)]
        parts.append(f"{node.node_id}: " + (", ".join(items) if items else "empty"))
    return "; ".join(parts) + "."


def _answer_what_with(spec: GoalSpec, world: SceneGraphState, recall: GoalRecall) -> str | None:
    if not (spec.obj):
        return None
    mention = spec.obj
    holders = _holders_of(world, recall, mention)
    if not holders:
        return None
    parts = []
    for node in holders:
        others = [str(i.get("name")) for i in recall.listed(world, node)
                  if not recall.same_thing(str(i.get("name", "")), mention)]
        parts.append(f"in {node.node_id}: " + (", ".join(others) if others else "nothing else"))
    return f"With the {mention}: " + "; ".join(parts) + "."


def _answer_which(spec: GoalSpec, world: SceneGraphState, recall: GoalRecall) -> str | None:
    if not (spec.obj):
        return None
    found = recall.recall(world, _query(spec))
    holder_ids: list[str] = []
    for cand in found:
        holder = cand.node_id if cand.content_item is not None else cand.parent
        if holder is None:
            continue
        held_by = world.nodes.get(holder)
        if held_by is not None and (spec.source is None or recall.synonyms.same(
                canon(spec.source), canon(held_by.label)) or spec.source == holder):
            holder_ids.append(holder)
    if not holder_ids:
        return None
    return f"{', '.join(dict.fromkeys(holder_ids))} holds the {spec.obj}."


def _answer_how_many(spec: GoalSpec, world: SceneGraphState, recall: GoalRecall) -> str | None:
    if not (spec.obj):
        return None
    found = recall.recall(world, _query(spec))
    if spec.source is not None:
        found = [c for c in found if any(e.kind is EvidenceKind.PARENT for e in c.evidence)]
    if not found:
        return None if spec.source is None else f"0 {spec.obj} remembered in {spec.source}."
    return f"{len(found)} {spec.obj} remembered: " + ", ".join(
        c.node_id if c.content_item is None else f"one in {c.node_id}" for c in found) + "."
    return None


def _answer_which_state(spec: GoalSpec, world: SceneGraphState, recall: GoalRecall) -> str | None:
    if not (spec.obj and spec.target):
        return None
    nodes = _in_state(world, recall, spec.obj, spec.target)
    if nodes is None:
        return None
    if not nodes:
        return f"No remembered {spec.obj} is known to be {spec.target}."
    ids = ", ".join(n.node_id for n in nodes)
    return f"{ids} {'is' if len(nodes) == 1 else 'are'} {spec.target}."


def _answer_belongs(spec: GoalSpec, world: SceneGraphState, recall: GoalRecall) -> str | None:
    if not (spec.obj and spec.target):
        return None
    chosen = _destination(world, recall, spec)
    if chosen is None:
        return None
    held = [str(i.get("name")) for i in chosen.contents]
    return f"{chosen.node_id}: the {spec.obj} belongs with what it holds ({', '.join(held)})."


def _answer_yes_no(spec: GoalSpec, world: SceneGraphState, recall: GoalRecall) -> str | None:
    if not (spec.obj and spec.target):
        return None
    nodes = _resolve(recall, world, spec.obj)
    if not nodes:
        return None
    node = nodes[0]
    state = spec.target
    if state == "locked":
        prop = node.properties.get("locked")
        if prop is None or prop.value not in (True, False):
            return None
        return f"{'Yes' if prop.value else 'No'}, {node.node_id} is " \
               f"{'' if prop.value else 'not '}locked ({prop.source})."
    if state in ("open", "opened", "closed"):
        openable = node.properties.get("openable")
        if openable is None or openable.is_opened is None:
            return None
        is_open = openable.is_opened
        yes = is_open if state != "closed" else not is_open
        return f"{'Yes' if yes else 'No'}, {node.node_id} is {'open' if is_open else 'closed'}."
    if state in ("empty", "full"):
        if node.contents_empty is None and not node.contents:
            return None
        empty = bool(node.contents_empty) and not node.contents
        yes = empty if state == "empty" else not empty
        return f"{'Yes' if yes else 'No'}, {node.node_id} holds {len(node.contents)} item(s)."
    return None


_ANSWERS: dict[str, Callable[[GoalSpec, SceneGraphState, GoalRecall], str | None]] = {
    "where": _answer_where,
    "what": _answer_what,
    "what_with": _answer_what_with,
    "which": _answer_which,
    "how_many": _answer_how_many,
    "which_state": _answer_which_state,
    "belongs": _answer_belongs,
    "yes_no": _answer_yes_no,
}
"""The memory answer of each question kind."""


def question_entities(spec: GoalSpec, world: SceneGraphState,
                      recall: GoalRecall) -> list[NamedEntity]:
    """What the memory answer of a question names (the entities behind :func:`answer_question`).

    ``where`` and ``which`` name holders (or the node itself when it has no holder), ``what``
    and ``what_with`` name the listed items, ``which_state`` the nodes in that state,
    ``belongs`` the chosen fixture, ``how_many`` the counted objects.
    """
    kind = spec.question_kind
    out: list[NamedEntity] = []
    if kind in ("where", "which") and spec.obj:
        for cand in recall.recall(world, _query(spec)):
            place = cand.node_id if cand.content_item is not None else (cand.parent or "")
            if place in world.nodes:
                out.append(node_entity(world.nodes[place]))
            elif kind == "where":
                out.append(node_entity(world.nodes[cand.node_id]))
    elif kind == "what" and spec.source:
        for fixture in _resolve(recall, world, spec.source):
            out.extend(item_entity(world, fixture, str(i.get("name")), str(i.get("node_id") or ""))
                       for i in recall.listed(world, fixture))
    elif kind == "what_with" and spec.obj:
        for fixture in _holders_of(world, recall, spec.obj):
            out.extend(item_entity(world, fixture, str(i.get("name")), str(i.get("node_id") or ""))
                       for i in recall.listed(world, fixture)
                       if not recall.same_thing(str(i.get("name", "")), spec.obj))
    elif kind == "which_state" and spec.obj and spec.target:
        out.extend(node_entity(n) for n in _in_state(world, recall, spec.obj, spec.target) or [])
    elif kind == "belongs" and spec.obj:
        chosen = _destination(world, recall, spec)
        if chosen is not None:
            out.append(node_entity(chosen))
    elif kind == "how_many" and spec.obj:
        out.extend(candidate_entity(world, c) for c in recall.recall(world, _query(spec)))
    return _unique(out)
