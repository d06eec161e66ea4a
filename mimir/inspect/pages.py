"""The inspector's pages as HTML with inline SVG. Every text that came from memory (labels,
model reasoning, operator text, ids) goes through :func:`esc` or :func:`q`; links carry ids,
never file paths."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import quote, urlencode

from mimir.inspect.folder import HISTORY_FIELDS, MemoryFolder, NodeState, PathPoint
from mimir_memory.display import STATE_COLOURS, display_state
from mimir_memory.events import MemoryEvent
from mimir_memory.graph import SceneGraphState, SceneNode
from mimir_memory.keyframes import KeyframeRecord, Trigger

VERDICT_CLASSES = {"admit": "ok", "correct": "ok", "defer": "wait", "reject": "bad"}

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#263238;color:#fff;padding:8px 16px;display:flex;gap:18px;align-items:center}
header a{color:#cfd8dc;text-decoration:none}header a.here{color:#fff;font-weight:600}
header .folder{margin-left:auto;font-size:12px;color:#90a4ae}
main{padding:12px 16px}h1{font-size:20px;margin:4px 0 10px}h2{font-size:16px;margin:16px 0 6px}
table{border-collapse:collapse;background:#fff}td,th{border:1px solid #ddd;padding:3px 6px;
text-align:left;vertical-align:top}th{background:#eceff1}
.ok{color:#2e7d32}.wait{color:#ef6c00}.bad{color:#c62828}.muted{color:#78909c;font-size:12px}
.chip{display:inline-block;padding:0 6px;border-radius:8px;color:#fff;font-size:12px}
.gallery{display:flex;flex-wrap:wrap;gap:8px}.gallery figure{margin:0;background:#fff;
border:1px solid #ddd;padding:4px;width:170px;font-size:12px}.gallery img{width:160px}
.events li{margin-bottom:6px}form.filters{margin:6px 0 10px}form.filters *{margin-right:6px}
svg text{font:11px system-ui,sans-serif}
.frame{position:relative;display:inline-block;max-width:100%;line-height:0;
outline:1px solid #ccc}.frame img{max-width:100%;height:auto}
.frame svg{position:absolute;left:0;top:0;width:100%;height:100%;pointer-events:none}
.frame svg path{paint-order:stroke;filter:drop-shadow(0 0 1px #000)}
.frame svg text{font:bold 14px system-ui,sans-serif;paint-order:stroke;stroke:#000;
stroke-width:3px;fill:#fff}
"""

_LIVE_SCRIPT = """
<script>
(function(){var changed=document.body.dataset.changed;
 function poll(){fetch('/api/state').then(function(r){return r.json();}).then(function(s){
   if(String(s.changed)!==changed||String(s.task_mtime)!==document.body.dataset.task){
     location.reload();}}).catch(function(){});}
 setInterval(poll,2000);})();
</script>
"""

_SLIDER_SCRIPT = """
<script>
(function(){var s=document.getElementById('t');var o=document.getElementById('t-shown');
 if(!s)return;
 s.addEventListener('input',function(){o.textContent=Number(s.value).toFixed(1)+' s';});
 s.addEventListener('change',function(){s.form.submit();});})();
</script>
"""

NAV = (("/", "Map"), ("/timeline", "Timeline"), ("/keyframes", "Keyframes"),
       ("/planner", "Planner"), ("/agenda", "Agenda"))


def esc(value: Any) -> str:
    """Text for HTML (element content or a quoted attribute)."""
    return html.escape("" if value is None else str(value), quote=True)


def q(value: str) -> str:
    """One URL path segment."""
    return quote(str(value), safe="")


def link(path: str, text: str, **query: Any) -> str:
    params = {k: v for k, v in query.items() if v not in (None, "")}
    href = path + (f"?{urlencode(params)}" if params else "")
    return f'<a href="{esc(href)}">{esc(text)}</a>'


def node_link(node_id: str, at: float | None = None, text: str | None = None) -> str:
    return link(f"/node/{q(node_id)}", text or node_id, t=_fmt_t(at))


def _fmt_t(at: float | None) -> str | None:
    return None if at is None else f"{at:.3f}"


def page(title: str, body: str, *, here: str, folder: MemoryFolder, revision: int,
         changed: int, task_mtime: float, live: bool) -> str:
    """A whole page: navigation, ``body`` and (when ``live``) the poll that reloads it once
    memory changes (``changed``: the newest event that is not a fusion of a view) or the task
    memory does."""
    nav = "".join(f'<a href="{p}"{" class=here" if p == here else ""}>{esc(n)}</a>'
                  for p, n in NAV)
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{esc(title)} - "
            f"mimir inspect</title><style>{_STYLE}</style></head>"
            f'<body data-revision="{revision}" data-changed="{changed}" '
            f'data-task="{task_mtime}">'
            f"<header><strong>mimir inspect</strong>{nav}"
            f'<span class=folder>{esc(folder.root.name)} · revision {revision}'
            f'{" · live" if live else ""}</span></header><main>{body}</main>'
            f"{_LIVE_SCRIPT if live else ''}</body></html>")


def _stamp(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def _chip(state: str) -> str:
    return f'<span class=chip style="background:{STATE_COLOURS[state]}">{esc(state)}</span>'


def _value(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return esc(json.dumps(value, sort_keys=True))
    return esc(value)


# ---------------------------------------------------------------------------- map
def time_slider(start: float, end: float, at: float | None) -> str:
    shown = end if at is None else at
    step = max((end - start) / 400.0, 0.01)
    return (f'<form class=filters method=get action="/" id=time-form>'
            f'<label for=t>memory as of</label> <input type=range id=t name=t '
            f'min="{start:.3f}" max="{end:.3f}" step="{step:.3f}" value="{shown:.3f}" '
            f'style="width:420px"> <output id=t-shown>{shown:.1f} s</output> '
            f'<button type=submit>show</button> <a href="/" id=now>now</a></form>'
            f"{_SLIDER_SCRIPT}")


def map_svg(states: Sequence[NodeState], path: Sequence[PathPoint], at: float | None,
            width: int = 900, height: int = 560) -> str:
    """Top-down map: holders as boxes coloured by state, what they hold as dots inside, the
    robot's path and its last pose. x of the map runs up the page, y to the left (as a robot
    facing +x sees it)."""
    xs: list[float] = []
    ys: list[float] = []
    for s in states:
        xs += [s.node.bbox_min[0], s.node.bbox_max[0]]
        ys += [s.node.bbox_min[1], s.node.bbox_max[1]]
    xs += [p.x for p in path]
    ys += [p.y for p in path]
    if not xs:
        return "<p class=muted>memory holds no node at this time</p>"
    pad = 0.3
    x0, x1, y0, y1 = min(xs) - pad, max(xs) + pad, min(ys) - pad, max(ys) + pad
    scale = min(width / max(y1 - y0, 0.1), height / max(x1 - x0, 0.1))

    def px(x: float, y: float) -> tuple[float, float]:
        return (y1 - y) * scale, (x1 - x) * scale

    parts = [f'<svg id=map xmlns="http://www.w3.org/2000/svg" width="{width}" '
             f'height="{height}" style="background:#fff;border:1px solid #ddd">']
    # seen from above, what stands higher covers what is lower (a cabinet over its counter);
    # the things held come last, on top of their holders
    order = sorted(states, key=lambda s: (s.node.parent is not None, s.node.bbox_max[2]))
    for s in order:
        n = s.node
        colour = STATE_COLOURS[s.state]
        href = esc(f"/node/{q(n.node_id)}" + (f"?t={at:.3f}" if at is not None else ""))
        if n.parent is None:
            ax, ay = px(n.bbox_max[0], n.bbox_max[1])
            bx, by = px(n.bbox_min[0], n.bbox_min[1])
            w, h = max(bx - ax, 4.0), max(by - ay, 4.0)
            parts.append(f'<a href="{href}" class=node data-node="{esc(n.node_id)}">'
                         f'<rect x="{ax:.1f}" y="{ay:.1f}" width="{w:.1f}" height="{h:.1f}" '
                         f'fill="{colour}" fill-opacity="0.45" stroke="{colour}"/>'
                         f'<text x="{ax + 2:.1f}" y="{ay - 3:.1f}">{esc(n.node_id)}</text></a>')
        else:
            cx, cy = px(n.centroid[0], n.centroid[1])
            parts.append(f'<a href="{href}" class=node data-node="{esc(n.node_id)}">'
                         f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="5" fill="{colour}" '
                         f'stroke="#333"/><text x="{cx + 7:.1f}" y="{cy + 4:.1f}">'
                         f"{esc(n.label)}</text></a>")
    if path:
        points = " ".join(f"{a:.1f},{b:.1f}" for a, b in (px(p.x, p.y) for p in path))
        parts.append(f'<polyline points="{points}" fill="none" stroke="#37474f" '
                     'stroke-dasharray="4 3"/>')
        last = path[-1]
        cx, cy = px(last.x, last.y)
        tip = px(last.x + 0.25 * math.cos(last.yaw), last.y + 0.25 * math.sin(last.yaw))
        parts.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="7" fill="#37474f"/>'
                     f'<line x1="{cx:.1f}" y1="{cy:.1f}" x2="{tip[0]:.1f}" y2="{tip[1]:.1f}" '
                     'stroke="#37474f" stroke-width="3"/>'
                     f'<text x="{cx + 9:.1f}" y="{cy + 14:.1f}">robot at {last.stamp:.1f} s'
                     "</text>")
    parts.append("</svg>")
    return "".join(parts)


def legend() -> str:
    return " ".join(_chip(s) for s in STATE_COLOURS) + \
        " <span class=muted>boxes: fixtures and other holders; dots: what they hold; dashed: " \
        "the robot's path from its keyframes</span>"


def map_page(folder: MemoryFolder, graph: SceneGraphState, at: float | None) -> tuple[str, str]:
    states = folder.map_nodes(graph)
    start, end = folder.time_range()
    rows = "".join(
        f"<tr><td>{node_link(s.node.node_id, at)}</td><td>{esc(s.node.label)}</td>"
        f"<td>{_chip(s.state)}</td><td>{node_link(s.node.parent, at) if s.node.parent else ''}"
        f"</td><td>{_stamp(s.node.last_seen)}</td></tr>" for s in states)
    when = "now" if at is None else f"as of {at:.1f} s"
    body = (f"<h1>Map <span class=muted>{esc(when)}</span></h1>{time_slider(start, end, at)}"
            f"{map_svg(states, folder.robot_path(at), at)}<p>{legend()}</p>"
            f"<h2>Nodes ({len(states)})</h2><table id=nodes><tr><th>node</th><th>label</th>"
            f"<th>state</th><th>in / on</th><th>last seen</th></tr>{rows}</table>")
    return "Map", body


# ---------------------------------------------------------------------------- node
def evidence_html(event: MemoryEvent) -> str:
    ev = event.evidence
    parts = []
    if ev.keyframe_ids:
        parts.append("keyframes: " + " ".join(
            f'<a class=evidence-keyframe href="/keyframe/{q(k)}">'
            f'<img src="/thumb/{q(k)}" alt="keyframe {esc(k)}" width=96></a>'
            for k in ev.keyframe_ids))
    traces = [e for e in ev.event_ids if not e.startswith("interaction:")]
    actions = [e.split(":", 1)[1] for e in ev.event_ids if e.startswith("interaction:")]
    if actions:
        parts.append("interaction " + ", ".join(esc(a) for a in actions))
    if traces:
        parts.append("robot traces: " + ", ".join(esc(t) for t in traces))
    if ev.detection_ids:
        shown = ", ".join(esc(d) for d in ev.detection_ids[:6])
        more = f" and {len(ev.detection_ids) - 6} more" if len(ev.detection_ids) > 6 else ""
        parts.append(f"{len(ev.detection_ids)} detection(s): {shown}{more}")
    return "<br>".join(parts) or "<span class=muted>no evidence recorded</span>"


def event_item(event: MemoryEvent) -> str:
    payload = event.payload
    reason = payload.get("verdict_reason") or payload.get("reasoning") or \
        payload.get("reason") or ""
    verdict = event.verdict.value
    return (f"<li><b>{esc(event.kind.value)}</b> at {_stamp(event.stamp)} from "
            f"{esc(event.source.value)}: <span class={VERDICT_CLASSES.get(verdict, '')}>"
            f"{esc(verdict)}</span> <span class=muted>#{event.seq}</span>"
            f"{'<br>' + esc(reason) if reason else ''}<br>{evidence_html(event)}</li>")


def node_page(folder: MemoryFolder, node: SceneNode, graph: SceneGraphState,
              at: float | None) -> tuple[str, str]:
    prop_rows = []
    for name in sorted(node.properties):
        p = node.properties[name]
        chain = "".join(event_item(e) for e in folder.why(node, name))
        prop_rows.append(
            f"<tr data-property=\"{esc(name)}\"><td><b>{esc(name)}</b></td><td>{_value(p.value)}"
            f"</td><td>{p.confidence:.2f}</td><td>{esc(p.source)}</td><td>{_stamp(p.stamp)}</td>"
            f"<td><ul class=events>{chain}</ul></td></tr>")
    props = ("<table id=properties><tr><th>property</th><th>value</th><th>confidence</th>"
             "<th>source</th><th>since</th><th>why (events and evidence)</th></tr>"
             + "".join(prop_rows) + "</table>") if prop_rows else \
        "<p class=muted>no property learned yet</p>"
    contents = []
    for item in node.contents:
        child = str(item.get("node_id") or "")
        name = esc(item.get("name") or child)
        shown = node_link(child, at, str(item.get("name") or child)) \
            if child in graph.nodes else name
        contents.append(f"<li>{shown} <span class=muted>{esc(item.get('description'))}</span>"
                        "</li>")
    held = "".join(f"<li>{node_link(c.node_id, at)} ({esc(c.parent_relation)})</li>"
                   for c in folder.children(graph, node.node_id))
    if node.contents_empty:
        contents.append("<li>empty</li>")
    history = "".join(
        f"<h2>{esc(field)}</h2><ul class=events>"
        + "".join(event_item(e) for e in folder.why(node, field)[-12:]) + "</ul>"
        for field in HISTORY_FIELDS if node.history.get(field))
    tasks = "".join(
        f"<tr><td>{_stamp(_float(t.get('stamp')))}</td><td>{esc(t.get('primitive'))}</td>"
        f"<td class={'ok' if t.get('success') else 'bad'}>"
        f"{'success' if t.get('success') else 'failed'}</td><td>{esc(t.get('failure_reason'))}"
        f"</td><td>{esc(t.get('task'))}</td></tr>" for t in node.task_history)
    frames = folder.keyframe_list(node_id=node.node_id, end=at, limit=24)
    state = folder.map_nodes(graph)
    chip = next((_chip(s.state) for s in state if s.node.node_id == node.node_id), "")
    when = "now" if at is None else f"as of {at:.1f} s"
    body = (
        f"<h1>{esc(node.label)} <span class=muted>{esc(node.node_id)} · {esc(when)}</span> "
        f"{chip}</h1><p>at ({', '.join(f'{v:.2f}' for v in node.centroid)}) m; seen "
        f"{node.observation_count} times from {_stamp(node.first_seen)} to "
        f"{_stamp(node.last_seen)}; misses since: {node.misses}"
        + (f"; in/on {node_link(node.parent, at)} ({esc(node.parent_relation)})"
           if node.parent else "")
        + (f"; other hypotheses: {', '.join(node_link(a, at) for a in sorted(node.alternatives))}"
           if node.alternatives else "")
        + f"</p><h2>Properties</h2>{props}"
        f"<h2>Contents</h2><ul id=contents>{''.join(contents) or '<li class=muted>unknown</li>'}"
        f"</ul>" + (f"<h2>Holds now</h2><ul>{held}</ul>" if held else "")
        + (f"<h2>Task history</h2><table id=task-history><tr><th>at</th><th>primitive</th>"
           f"<th>outcome</th><th>why it failed</th><th>task</th></tr>{tasks}</table>"
           if tasks else "")
        + f"<h2>Keyframes</h2>{gallery(frames)}{history}")
    return node.node_id, body


# ---------------------------------------------------------------------------- keyframes
def gallery(frames: Iterable[KeyframeRecord]) -> str:
    cells = "".join(
        f'<figure data-frame="{esc(f.frame_id)}"><a href="/keyframe/{q(f.frame_id)}">'
        f'<img src="/thumb/{q(f.frame_id)}" alt="{esc(f.caption or f.frame_id)}"></a>'
        f"<figcaption>{esc(f.camera)} · {esc(f.trigger.value)} · {f.timestamp:.1f} s<br>"
        f"{esc(', '.join(f.node_ids))}</figcaption></figure>" for f in frames)
    return f"<div class=gallery>{cells}</div>" if cells else "<p class=muted>no keyframes</p>"


def _select(name: str, options: Sequence[str], chosen: str) -> str:
    opts = "".join(f'<option value="{esc(o)}"{" selected" if o == chosen else ""}>{esc(o)}'
                   "</option>" for o in options)
    return f'<select name={name} id=filter-{name}><option value="">any {name}</option>{opts}' \
        "</select>"


def keyframes_page(folder: MemoryFolder, *, node_id: str, trigger: str, camera: str,
                   start: float | None, end: float | None) -> tuple[str, str]:
    frames = folder.keyframe_list(node_id=node_id, trigger=trigger, camera=camera, start=start,
                                  end=end, limit=120)
    form = (f'<form class=filters method=get action="/keyframes">'
            f'<input name=node id=filter-node placeholder="node id" value="{esc(node_id)}">'
            f"{_select('trigger', [t.value for t in Trigger], trigger)}"
            f"{_select('camera', folder.cameras(), camera)}"
            f'<input name=start placeholder="from (s)" size=7 value="{esc(_fmt_t(start))}">'
            f'<input name=end placeholder="to (s)" size=7 value="{esc(_fmt_t(end))}">'
            f"<button type=submit id=filter-apply>filter</button></form>")
    return "Keyframes", f"<h1>Keyframes ({len(frames)} shown)</h1>{form}{gallery(frames)}"


def keyframe_overlay(record: KeyframeRecord, graph: SceneGraphState) -> tuple[str, str]:
    """The boxes of the keyframe's nodes, as memory held them when it was taken, projected
    through the keyframe's camera view: (SVG drawn over the image, a line saying what was
    drawn)."""
    view = record.camera_view
    if view is None:
        return "", ("no camera view was recorded with this keyframe, so its nodes cannot be "
                    "drawn on it")
    groups, drawn, missing = [], [], []
    for node_id in record.node_ids:
        node = graph.nodes.get(node_id)
        if node is None:
            missing.append(node_id)
            continue
        edges = view.box_edges(node.bbox_min, node.bbox_max)
        if not edges:
            missing.append(node_id)
            continue
        colour = STATE_COLOURS[display_state(node)]
        path = " ".join(f"M{a[0]:.1f} {a[1]:.1f}L{b[0]:.1f} {b[1]:.1f}" for a, b in edges)
        corner = min((p for seg in edges for p in seg), key=lambda p: (p[1], p[0]))
        x = min(max(corner[0], 4.0), record.width - 4.0)
        y = min(max(corner[1] - 6.0, 16.0), record.height - 4.0)
        groups.append(f'<g class=node-box data-node="{esc(node_id)}"><path d="{path}" '
                      f'stroke="{colour}" stroke-width=3 fill=none /><text x="{x:.1f}" '
                      f'y="{y:.1f}">{esc(node_id)}</text></g>')
        drawn.append(node_id)
    svg = (f'<svg class=keyframe-overlay viewBox="0 0 {record.width} {record.height}" '
           f'preserveAspectRatio="none" aria-hidden=true>{"".join(groups)}</svg>'
           if groups else "")
    said = []
    if drawn:
        said.append("boxes of " + ", ".join(esc(n) for n in drawn)
                    + " as memory held them when the frame was taken")
    if missing:
        said.append("not in view or not in memory then: " + ", ".join(esc(n) for n in missing))
    return svg, "; ".join(said) or "no nodes are linked to this keyframe"


def keyframe_page(record: KeyframeRecord, graph: SceneGraphState) -> tuple[str, str]:
    """A keyframe: the full image with its nodes' boxes drawn on it, and its metadata."""
    nodes = ", ".join(node_link(n, record.timestamp) for n in record.node_ids) or "none"
    labels = "".join(f"<li>{esc(lab.label)} <span class=muted>({esc(lab.source)}, "
                     f"{lab.stamp:.1f} s)</span></li>" for lab in record.labels)
    pose = ", ".join(f"{v:.2f}" for v in record.robot_pose) if record.robot_pose else "unknown"
    view = record.camera_view
    camera = ("unknown" if view is None else
              "at " + ", ".join(f"{v:.2f}" for v in view.position)
              + f" m; f {view.fx:.0f}/{view.fy:.0f} px, centre {view.cx:.0f}, {view.cy:.0f} px")
    overlay, overlay_note = keyframe_overlay(record, graph)
    parent = ""
    if record.parent_frame:
        up = link("/keyframe/" + q(record.parent_frame), record.parent_frame)
        parent = f"<tr><th>part of</th><td>{up}</td></tr>"
    body = (f"<h1>Keyframe <span class=muted>{esc(record.frame_id)}</span></h1>"
            f'<div class=frame><img id=full src="/image/{q(record.frame_id)}" alt="keyframe" '
            f'width={record.width} height={record.height}>{overlay}</div>'
            f"<p class=muted id=overlay-note>{overlay_note}</p><table>"
            f"<tr><th>time</th><td>{_stamp(record.timestamp)}</td></tr>"
            f"<tr><th>camera</th><td>{esc(record.camera)}</td></tr>"
            f"<tr><th>camera view (map)</th><td>{esc(camera)}</td></tr>"
            f"<tr><th>trigger</th><td>{esc(record.trigger.value)}</td></tr>"
            f"<tr><th>action</th><td>{esc(record.action or '-')}</td></tr>"
            f"<tr><th>robot pose (x, y, yaw)</th><td>{esc(pose)}</td></tr>"
            f"<tr><th>nodes</th><td>{nodes}</td></tr>{parent}"
            f"<tr><th>caption</th><td>{esc(record.caption)}</td></tr>"
            f"<tr><th>tags</th><td>{esc(', '.join(record.tags))}</td></tr></table>"
            + (f"<h2>Labels</h2><ul>{labels}</ul>" if labels else ""))
    return record.frame_id, body


# ---------------------------------------------------------------------------- timeline
def _subject(event: MemoryEvent) -> str:
    p = event.payload
    subject = p.get("node_id") or p.get("kept_id") or p.get("subject") or ""
    return node_link(str(subject)) if subject else ""


def timeline_page(folder: MemoryFolder, *, kind: str, verdict: str, node_id: str,
                  fusion: bool) -> tuple[str, str]:
    events = folder.timeline(kind=kind, verdict=verdict, node_id=node_id, limit=300,
                             skip_fusion=not fusion)
    rows = "".join(
        f"<tr class={VERDICT_CLASSES.get(e.verdict.value, '')}><td>{e.seq}</td>"
        f"<td>{_stamp(e.stamp)}</td><td>{esc(e.kind.value)}</td><td>{_subject(e)}</td>"
        f"<td>{esc(e.source.value)}</td><td>{esc(e.verdict.value)}</td>"
        f"<td>{esc(str(e.payload.get('verdict_reason') or e.payload.get('reason') or ''))}</td>"
        "</tr>" for e in reversed(events))
    form = (f'<form class=filters method=get action="/timeline">'
            f"{_select('kind', folder.event_kinds(), kind)}"
            f"{_select('verdict', folder.verdicts(), verdict)}"
            f'<input name=node placeholder="node id" value="{esc(node_id)}">'
            f'<label><input type=checkbox name=fusion value=1{" checked" if fusion else ""}> '
            f"perception fusion</label><button type=submit>filter</button></form>")
    body = (f"<h1>Memory events <span class=muted>newest first, {len(events)} shown</span></h1>"
            f"{form}<table id=timeline><tr><th>#</th><th>stamp</th><th>kind</th><th>node</th>"
            f"<th>source</th><th>verdict</th><th>reason</th></tr>{rows}</table>")
    return "Timeline", body


# ---------------------------------------------------------------------------- planner, agenda
def planner_page(folder: MemoryFolder) -> tuple[str, str]:
    steps = folder.planner_trace()
    if not steps:
        return "Planner", ("<h1>Planner trace</h1><p class=muted>the planner has written no "
                           "trace into this memory folder yet</p>")
    blocks = []
    for s in reversed(steps[-200:]):
        start, end = s.get("start"), s.get("end")
        writes = folder.writes_between(float(start), float(end)) \
            if isinstance(start, (int, float)) and isinstance(end, (int, float)) else []
        cands = "".join(f"<li>{node_link(str(c.get('node_id', '')))} score "
                        f"{_num(c.get('score'))}: {esc('; '.join(map(str, c.get('evidence', []))))}"
                        "</li>" for c in s.get("candidates", []) if isinstance(c, dict))
        frames = "".join(f"<li><a href=\"/keyframe/{q(str(r.get('frame_id', '')))}\">"
                         f"<img src=\"/thumb/{q(str(r.get('frame_id', '')))}\" width=96 alt=''>"
                         f"</a> {esc(r.get('reason'))} <span class=muted>{esc(r.get('pool'))}"
                         "</span></li>" for r in s.get("retrieved", []) if isinstance(r, dict))
        plan = "".join(f"<li>{esc(p.get('primitive'))}({esc(p.get('target'))}): "
                       f"{esc(p.get('reasoning'))}</li>" for p in s.get("plan", [])
                       if isinstance(p, dict))
        outcome = esc(s.get("outcome"))
        ok = s.get("success")
        cls = "ok" if ok is True else "bad" if ok is False else ""
        blocks.append(
            f"<section class=step><h2>{esc(s.get('instruction'))} · call {esc(s.get('call'))}"
            f" <span class=muted>goal {esc(s.get('goal_id'))}, {_stamp(_float(start))} to "
            f"{_stamp(_float(end))}</span></h2><p class={cls}>{outcome} "
            f"<b>{esc(s.get('primitive'))}({esc(s.get('target'))})</b> {esc(s.get('detail'))}"
            f"</p><table><tr><th>recall candidates</th><th>retrieved keyframes (why)</th>"
            f"<th>plan</th><th>memory writes during the step</th></tr><tr>"
            f"<td><ul>{cands}</ul></td><td><ul>{frames}</ul></td><td><ol>{plan}</ol></td>"
            f"<td><ul class=events>{''.join(_write(e) for e in writes)}</ul></td></tr></table>"
            "</section>")
    return "Planner", "<h1>Planner trace <span class=muted>newest first</span></h1>" \
        + "".join(blocks)


def _write(event: MemoryEvent) -> str:
    return (f"<li>{esc(event.kind.value)} {_subject(event)} <span class="
            f"{VERDICT_CLASSES.get(event.verdict.value, '')}>{esc(event.verdict.value)}</span>"
            "</li>")


def _num(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, (int, float)) else esc(value)


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


def agenda_page(task: dict[str, Any] | None) -> tuple[str, str]:
    if task is None:
        return "Agenda", "<h1>Task agenda</h1><p class=muted>no task memory in this folder</p>"
    rows = "".join(
        f"<tr><td>{esc(g['goal_id'])}</td><td>{esc(g['description'])}</td>"
        f"<td>{esc(g['postcondition'])}</td><td>{esc(g['status'])}</td>"
        f"<td>{esc(g['reason'])}</td></tr>" for g in task.get("agenda", []))
    failed = "".join(f"<li>{esc(goal)}: {esc(obj)} in {esc(src or 'anywhere')} - "
                     f"{esc(reason)}</li>" for goal, obj, src, reason in
                     task.get("failed_bindings", []))
    answers = "".join(f"<li>{esc(k)}: {esc(v)}</li>" for k, v in task.get("answers", {}).items())
    body = (f"<h1>Task agenda</h1><p>active goal: {esc(task.get('active_goal') or 'none')}; "
            f"in the hand: {esc(task.get('hand') or 'nothing')}; robot at: "
            f"{esc(task.get('robot_at') or 'unknown')}</p><table id=agenda><tr><th>goal</th>"
            f"<th>description</th><th>postcondition</th><th>status</th><th>reason</th></tr>"
            f"{rows}</table><h2>Failed bindings</h2><ul>{failed or '<li>none</li>'}</ul>"
            f"<h2>Answers</h2><ul>{answers or '<li>none</li>'}</ul>")
    return "Agenda", body


def error_page(status: int, message: str) -> str:
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{status}</title>"
            f"<style>{_STYLE}</style></head><body><main><h1>{status}</h1><p>{esc(message)}</p>"
            f'<p><a href="/">back to the map</a></p></main></body></html>')

