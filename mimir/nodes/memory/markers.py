"""RViz/Foxglove markers of the scene graph: a translucent box and a text label per node."""

from __future__ import annotations

import colorsys
import hashlib

from visualization_msgs.msg import Marker, MarkerArray

from mimir_memory.graph import SceneNode


def _colour(label: str) -> tuple[float, float, float]:
    hue = int(hashlib.sha1(label.encode()).hexdigest()[:6], 16) / 0xFFFFFF
    return colorsys.hsv_to_rgb(hue, 0.65, 0.95)


def markers_for(nodes: list[SceneNode], frame_id: str) -> MarkerArray:
    """One box and one text label per node, replacing every earlier marker."""
    array = MarkerArray(markers=[Marker(action=Marker.DELETEALL)])
    for index, node in enumerate(sorted(nodes, key=lambda n: n.node_id)):
        r, g, b = _colour(node.label)
        box = Marker(ns="nodes", id=index, type=Marker.CUBE, action=Marker.ADD)
        box.header.frame_id = frame_id
        lo, hi = node.bbox_min, node.bbox_max
        box.pose.position.x, box.pose.position.y, box.pose.position.z = (
            (lo[i] + hi[i]) / 2.0 for i in range(3))
        box.pose.orientation.w = 1.0
        box.scale.x, box.scale.y, box.scale.z = (max(hi[i] - lo[i], 0.01) for i in range(3))
        box.color.r, box.color.g, box.color.b, box.color.a = r, g, b, 0.35
        text = Marker(ns="labels", id=index, type=Marker.TEXT_VIEW_FACING, action=Marker.ADD)
        text.header.frame_id = frame_id
        text.pose.position.x, text.pose.position.y = node.centroid[0], node.centroid[1]
        text.pose.position.z = hi[2] + 0.08
        text.pose.orientation.w = 1.0
        text.scale.z = 0.08
        text.color.r = text.color.g = text.color.b = text.color.a = 1.0
        locked = node.properties.get("locked")
        text.text = node.node_id + (" (locked)" if locked is not None and locked.value else "")
        array.markers.extend([box, text])
    return array
