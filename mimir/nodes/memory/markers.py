"""RViz/Foxglove markers of the scene graph.

Per node a translucent box coloured by its display state (locked, open, stale, inspected,
unknown: :mod:`mimir_memory.display`) and a text label with its id and state; a line from each
thing to the fixture or surface memory keeps it in or on; and a thing memory holds in the hand
drawn in front of the hand's frame (the wrist camera's optical frame by default), joined to it by
a line, since its remembered position stops meaning anything once it is carried.

Keyframes whose camera view is known are drawn as small camera frustums where they were taken
(interaction frames orange, the others blue).
"""

from __future__ import annotations

from collections.abc import Sequence

from geometry_msgs.msg import Point
from visualization_msgs.msg import Marker, MarkerArray

from mimir_memory.display import display_state, state_rgb
from mimir_memory.graph import HAND_PARENT, SceneNode
from mimir_memory.keyframes import KeyframeRecord

#: Where a held thing is drawn in front of the hand frame (its z axis), m.
HELD_OFFSET_M = 0.15


def _marker(ns: str, index: int, kind: int, frame_id: str) -> Marker:
    marker = Marker(ns=ns, id=index, type=kind, action=Marker.ADD)
    marker.header.frame_id = frame_id
    marker.pose.orientation.w = 1.0
    return marker


def _point(xyz: tuple[float, float, float] | list[float] | Sequence[float]) -> Point:
    return Point(x=float(xyz[0]), y=float(xyz[1]), z=float(xyz[2]))


def markers_for(nodes: list[SceneNode], frame_id: str, hand_frame: str = "") -> MarkerArray:
    """Every marker of the graph, replacing every earlier one.

    Args:
        nodes: the graph's nodes (positions in ``frame_id``).
        frame_id: the fixed frame of memory.
        hand_frame: the frame held things are drawn in; empty draws them where memory last
            placed them.
    """
    array = MarkerArray(markers=[Marker(action=Marker.DELETEALL)])
    by_id = {n.node_id: n for n in nodes}
    links = _marker("contents", 0, Marker.LINE_LIST, frame_id)
    links.scale.x = 0.01
    links.color.r = links.color.g = links.color.b = 0.85
    links.color.a = 0.9
    held_index = 0
    for index, node in enumerate(sorted(nodes, key=lambda n: n.node_id)):
        state = display_state(node)
        r, g, b = state_rgb(state)
        lo, hi = node.bbox_min, node.bbox_max
        held = node.parent == HAND_PARENT and bool(hand_frame)
        box = _marker("nodes", index, Marker.CUBE, frame_id)
        box.pose.position.x, box.pose.position.y, box.pose.position.z = (
            (lo[i] + hi[i]) / 2.0 for i in range(3))
        box.scale.x, box.scale.y, box.scale.z = (max(hi[i] - lo[i], 0.01) for i in range(3))
        box.color.r, box.color.g, box.color.b, box.color.a = r, g, b, 0.35
        text = _marker("labels", index, Marker.TEXT_VIEW_FACING, frame_id)
        text.pose.position.x, text.pose.position.y = node.centroid[0], node.centroid[1]
        text.pose.position.z = hi[2] + 0.08
        text.scale.z = 0.08
        text.color.r = text.color.g = text.color.b = text.color.a = 1.0
        text.text = node.node_id + ("" if state == "unknown" else f" ({state})")
        if held:
            # in the hand: drawn at the hand, wherever it carries the thing
            box.header.frame_id = text.header.frame_id = hand_frame
            box.pose.position.x = box.pose.position.y = 0.0
            box.pose.position.z = HELD_OFFSET_M
            text.pose.position.x, text.pose.position.y = 0.0, -0.08
            text.pose.position.z = HELD_OFFSET_M
            text.text = f"{node.node_id} (in the hand)"
            grip = _marker("held", held_index, Marker.LINE_LIST, hand_frame)
            grip.scale.x = 0.012
            grip.color.r, grip.color.g, grip.color.b, grip.color.a = r, g, b, 1.0
            grip.points = [_point((0.0, 0.0, 0.0)), _point((0.0, 0.0, HELD_OFFSET_M))]
            held_index += 1
            array.markers.append(grip)
        array.markers.extend([box, text])
        holder = by_id.get(node.parent or "")
        if holder is not None:
            links.points += [_point(node.centroid), _point(holder.centroid)]
    if links.points:
        array.markers.append(links)
    return array


#: The edges of a frustum as indices into :meth:`CameraView.frustum`'s points.
_FRUSTUM_EDGES = ((0, 1), (0, 2), (0, 3), (0, 4), (1, 2), (2, 3), (3, 4), (4, 1))
_INTERACTION_RGB = (1.0, 0.55, 0.1)
_PERCEPTION_RGB = (0.25, 0.55, 1.0)


def frustum_markers(frames: Sequence[KeyframeRecord], frame_id: str,
                    depth: float = 0.12) -> MarkerArray:
    """Every keyframe with a known camera view as a frustum ``depth`` m deep, replacing the
    earlier ones: one line list per trigger family."""
    array = MarkerArray(markers=[Marker(action=Marker.DELETEALL)])
    for index, (interaction, rgb) in enumerate(((True, _INTERACTION_RGB),
                                                (False, _PERCEPTION_RGB))):
        lines = _marker("keyframe_frustums", index, Marker.LINE_LIST, frame_id)
        lines.scale.x = 0.004
        lines.color.r, lines.color.g, lines.color.b, lines.color.a = (*rgb, 0.9)
        for record in frames:
            if record.camera_view is None or record.trigger.interaction != interaction:
                continue
            corners = record.camera_view.frustum(record.width, record.height, depth)
            for a, b in _FRUSTUM_EDGES:
                lines.points += [_point(corners[a]), _point(corners[b])]
        if lines.points:
            array.markers.append(lines)
    return array
