"""Answers to the recognised question forms, read from world memory only.

Each function returns the literal answer text, or None when memory does not hold what the
question needs (the planner then explores or blocks; it never invents an answer).
"""

from __future__ import annotations

from mimir_memory.graph import SceneGraphState, SceneNode
from mimir_planner.instructions import GoalSpec
from mimir_planner.recall import GoalRecall, RecallQuery, canon


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


def answer_question(spec: GoalSpec, world: SceneGraphState, recall: GoalRecall) -> str | None:
    """The literal answer of a question goal from memory, or None when memory lacks it."""
    kind = spec.question_kind
    if kind == "where" and spec.obj:
        found = recall.recall(world, RecallQuery(obj=spec.obj))
        if not found:
            return None
        places = []
        for cand in found:
            if cand.content_item is not None:
                places.append(f"inside {cand.node_id} ({cand.label})")
            else:
                places.append(f"{cand.node_id} is " + _where(world.nodes[cand.node_id], world))
        return f"The {spec.obj}: " + "; ".join(dict.fromkeys(places)) + "."
    if kind == "what" and spec.source:
        holders = _resolve(recall, world, spec.source)
        known = [h for h in holders if h.contents or h.contents_empty is not None]
        if not known:
            return None
        parts = []
        for node in known:
            items = [str(i.get("name")) for i in node.contents]
            parts.append(f"{node.node_id}: " + (", ".join(items) if items else "empty"))
        return "; ".join(parts) + "."
    if kind == "what_with" and spec.obj:
        mention = spec.obj
        holders = [n for n in world.nodes.values()
                   if any(recall.synonyms.same(str(i.get("name", "")), mention)
                          for i in n.contents)]
        if not holders:
            return None
        parts = []
        for node in sorted(holders, key=lambda n: n.node_id):
            others = [str(i.get("name")) for i in node.contents
                      if not recall.synonyms.same(str(i.get("name", "")), mention)]
            parts.append(f"in {node.node_id}: " + (", ".join(others) if others else "nothing else"))
        return f"With the {mention}: " + "; ".join(parts) + "."
    if kind == "which" and spec.obj:
        found = recall.recall(world, RecallQuery(obj=spec.obj))
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
    if kind == "how_many" and spec.obj:
        found = recall.recall(world, RecallQuery(obj=spec.obj, source=spec.source))
        if spec.source is not None:
            found = [c for c in found if any(e.kind == "parent" for e in c.evidence)]
        if not found:
            return None if spec.source is None else f"0 {spec.obj} remembered in {spec.source}."
        return f"{len(found)} {spec.obj} remembered: " + ", ".join(
            c.node_id if c.content_item is None else f"one in {c.node_id}" for c in found) + "."
    if kind == "yes_no" and spec.obj and spec.target:
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
