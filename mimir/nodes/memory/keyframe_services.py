"""The keyframe node's services that answer from the store alone (no camera frame needed):
``query_keyframes``, ``get_keyframe_image`` and ``add_keyframe_labels``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node

from mimir.nodes.memory.keyframe_messages import keyframe_to_msg, triggers_for_query
from mimir.nodes.memory.messages import MessageValueError
from mimir.ros.images import numpy_to_image
from mimir.ros.time import to_seconds
from mimir_memory.errors import MemoryStoreError, failure_class
from mimir_memory.keyframes import KeyframeLabel, KeyframeStore
from mimir_msgs.srv import AddKeyframeLabels, GetKeyframeImage, QueryKeyframes

#: Refuses a request: (response, failure class, message) -> the response with its error set.
Refuse = Callable[[Any, str, str], Any]


class StoreServices:
    """Serves ``query_keyframes``, ``get_keyframe_image`` and ``add_keyframe_labels``.

    Args:
        node: Node that owns the services.
        store: The keyframe store (the node's, written by it alone).
        query_limit: Frames a query returns when it names no limit.
        refuse: Sets a refused request's error code and message (counted by the node).
        group: Callback group of the services (the node's store group: one at a time).
    """

    def __init__(self, node: Node, store: KeyframeStore, *, query_limit: int, refuse: Refuse,
                 group: CallbackGroup) -> None:
        self.store = store
        self._query_limit = query_limit
        self._refuse = refuse
        node.create_service(QueryKeyframes, "query_keyframes", self._on_query,
                            callback_group=group)
        node.create_service(GetKeyframeImage, "get_keyframe_image", self._on_get_image,
                            callback_group=group)
        node.create_service(AddKeyframeLabels, "add_keyframe_labels", self._on_add_labels,
                            callback_group=group)

    def _on_query(self, request: QueryKeyframes.Request,
                  response: QueryKeyframes.Response) -> QueryKeyframes.Response:
        start = to_seconds(request.start) or None
        end = to_seconds(request.end) or None
        if start is not None and end is not None and start > end:
            return self._refuse(response, "INVALID_REQUEST", "start is after end")
        try:
            triggers = triggers_for_query(request.trigger)
        except MessageValueError as err:
            return self._refuse(response, "INVALID_REQUEST", str(err))
        too_many = self.store.config.bounds.max_items
        if len(request.node_ids) > too_many or len(request.labels) > too_many:
            return self._refuse(response, "INVALID_REQUEST",
                                f"at most {too_many} node ids and labels per query")
        limit = int(request.limit) or self._query_limit
        try:
            records = []
            labels = list(request.labels) or [None]
            seen: set[str] = set()
            for label in labels:
                for rec in self.store.query(node_ids=list(request.node_ids) or None, label=label,
                                            start=start, end=end,
                                            trigger=triggers, limit=limit):
                    if rec.frame_id not in seen:
                        seen.add(rec.frame_id)
                        records.append(rec)
        except MemoryStoreError as err:
            return self._refuse(response, failure_class(err), str(err))
        records.sort(key=lambda r: r.timestamp, reverse=True)
        response.keyframes = [keyframe_to_msg(r, self.store.root) for r in records[:limit]]
        return response

    def _on_get_image(self, request: GetKeyframeImage.Request,
                      response: GetKeyframeImage.Response) -> GetKeyframeImage.Response:
        try:
            record = self.store.get(request.keyframe_id)
            bgr = self.store.load_image(request.keyframe_id, thumbnail=request.thumbnail)
        except MemoryStoreError as err:
            return self._refuse(response, failure_class(err), str(err))
        rgb = np.ascontiguousarray(np.asarray(bgr)[:, :, ::-1]) if np.ndim(bgr) == 3 else bgr
        metadata = keyframe_to_msg(record, self.store.root)
        response.image = numpy_to_image(rgb, "rgb8" if np.ndim(rgb) == 3 else "mono8",
                                        metadata.header)
        response.metadata = metadata
        return response

    def _on_add_labels(self, request: AddKeyframeLabels.Request,
                       response: AddKeyframeLabels.Response) -> AddKeyframeLabels.Response:
        labels = [KeyframeLabel(lab.text, lab.source or "analyzer", 0.0) for lab in request.labels]
        if not labels or any(not lab.label.strip() for lab in labels):
            return self._refuse(response, "INVALID_REQUEST", "labels must be non-empty text")
        try:
            record = self.store.get(request.keyframe_id)
            self.store.add_labels(request.keyframe_id, [(lab.label, lab.source) for lab in labels],
                                  stamp=record.timestamp)
            record = self.store.get(request.keyframe_id)
        except MemoryStoreError as err:
            return self._refuse(response, failure_class(err), str(err))
        response.metadata = keyframe_to_msg(record, self.store.root)
        return response
