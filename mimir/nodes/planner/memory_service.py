"""The ``retrieve_memory`` service: what memory holds for a task text, as messages.

The answer itself comes from the core (:func:`mimir_planner.memory_query.query_memory`): recall
candidates with their evidence, the scene graph rendered around them and the retrieved keyframes.
The service keeps its own read-only memory readers, apart from the planning session's, so a
query never waits for a running task.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node

from mimir.nodes.planner.planner_messages import recall_candidate_msgs, retrieved_msgs
from mimir.ros.floatfix import coerced
from mimir_memory.keyframes import KeyframeStore
from mimir_memory.task import TaskMemory
from mimir_msgs.srv import RetrieveMemory
from mimir_planner.config import PlannerConfig
from mimir_planner.errors import InstructionError
from mimir_planner.instructions import parse_instruction
from mimir_planner.memory_query import MemoryQueryError, query_memory
from mimir_planner.memory_readers import MemoryReaders, MemoryUnavailableError
from mimir_planner.retrieval import KeyframeRetriever


class MemoryService:
    """Serves ``retrieve_memory``.

    Args:
        node: Node that owns the service.
        config: Planner settings (recall, rendering).
        task: Task memory (its failed bindings steer recall).
        open_readers: Opens world memory and the keyframe store read-only.
        open_keyframes: Opens the keyframe store, None while it is unavailable.
        make_retriever: The retriever of a keyframe store.
        group: Callback group of the service.
    """

    def __init__(self, node: Node, config: PlannerConfig, task: TaskMemory, *,
                 open_readers: Callable[[], MemoryReaders],
                 open_keyframes: Callable[[], KeyframeStore | None],
                 make_retriever: Callable[[KeyframeStore], KeyframeRetriever],
                 group: CallbackGroup) -> None:
        self.config = config
        self.task = task
        self._open_readers = open_readers
        self._open_keyframes = open_keyframes
        self._make_retriever = make_retriever
        self.readers: MemoryReaders | None = None
        self._retriever: KeyframeRetriever | None = None
        self._lock = threading.Lock()
        node.create_service(RetrieveMemory, "retrieve_memory", coerced(self._on_retrieve),
                            callback_group=group)

    def close(self) -> None:
        """Close the readers."""
        with self._lock:
            if self.readers is not None:
                self.readers.close()

    def _readers(self) -> tuple[MemoryReaders, KeyframeRetriever | None]:
        with self._lock:
            if self.readers is None:
                self.readers = self._open_readers()
                self._retriever = (self._make_retriever(self.readers.keyframes)
                                   if self.readers.keyframes else None)
            elif self.readers.keyframes is None:
                store = self._open_keyframes()
                if store is not None:
                    self.readers.keyframes = store
                    self._retriever = self._make_retriever(store)
            return self.readers, self._retriever

    def _on_retrieve(self, request: RetrieveMemory.Request,
                     response: RetrieveMemory.Response) -> RetrieveMemory.Response:
        text = request.task.strip()
        try:
            parsed = parse_instruction(text)
        except InstructionError as err:
            response.error_code = RetrieveMemory.Response.INVALID_REQUEST
            response.error_msg = f"task not usable: {err}"
            return response
        try:
            readers, retriever = self._readers()
        except MemoryUnavailableError as err:
            response.error_code = RetrieveMemory.Response.BACKEND_ERROR
            response.error_msg = str(err)
            return response
        try:
            answer = query_memory(parsed, text, readers.world, self.config,
                                  self.task.failed_bindings,
                                  focus_ids=list(request.focus_node_ids), retriever=retriever,
                                  max_keyframes=int(request.max_keyframes))
        except MemoryQueryError as err:
            response.error_code = RetrieveMemory.Response.INVALID_REQUEST
            response.error_msg = str(err)
            return response
        response.candidates = recall_candidate_msgs(answer.candidates)
        response.scene_graph_summary = answer.summary
        if answer.retrieval_error:
            response.error_code = RetrieveMemory.Response.BACKEND_ERROR
            response.error_msg = answer.retrieval_error
            return response
        if retriever is not None:
            response.keyframes = retrieved_msgs(answer.frames, readers.keyframes)
        response.error_code = RetrieveMemory.Response.NONE
        return response
