"""Answering "what does memory hold for this task?" without planning (``retrieve_memory``).

For a task text, :func:`query_memory` recalls the candidate nodes its goals mention (the whole text
when it is not a symbolic instruction), renders the scene graph focused on them and, with a
retriever, picks the keyframes that matter. It is what the planner node's ``retrieve_memory``
service returns, before conversion to messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mimir_memory.errors import MemoryStoreError
from mimir_memory.task import FailedBinding
from mimir_memory.world import WorldMemory
from mimir_planner.config import PlannerConfig
from mimir_planner.errors import PlannerError, RecallError, RetrievalError
from mimir_planner.instructions import ParsedInstruction
from mimir_planner.recall import (
    AttributeTable,
    Candidate,
    CategoryTable,
    GoalRecall,
    RecallQuery,
    SynonymTable,
)
from mimir_planner.retrieval import KeyframeRetriever, RetrievalQuery, RetrievedFrame, task_terms


class MemoryQueryError(PlannerError):
    """The query names something memory does not hold, or recall refused it."""


@dataclass(frozen=True)
class MemoryAnswer:
    """What memory holds for a task.

    Attributes:
        candidates: Recalled nodes in recall order, each once.
        summary: The scene graph rendered around the focus nodes and the candidates.
        frames: Retrieved keyframes (empty without a retriever or when retrieval failed).
        retrieval_error: Why keyframe retrieval failed, empty when it did not.
    """

    candidates: tuple[Candidate, ...]
    summary: str
    frames: tuple[RetrievedFrame, ...] = ()
    retrieval_error: str = ""


def _queries(parsed: ParsedInstruction, text: str) -> list[RecallQuery]:
    queries = [RecallQuery(obj=g.obj or g.source or "", source=g.source if g.obj else None)
               for g in parsed.goals if (g.obj or g.source)] if parsed.symbolic else []
    return queries or [RecallQuery(obj=text)]


def query_memory(parsed: ParsedInstruction, text: str, world: WorldMemory,
                 config: PlannerConfig, failed: Iterable[FailedBinding], *,
                 focus_ids: Sequence[str] = (), retriever: KeyframeRetriever | None = None,
                 max_keyframes: int = 0) -> MemoryAnswer:
    """Recall, render and retrieve for a task (``max_keyframes`` 0 keeps every frame).

    Raises:
        MemoryQueryError: A focus id is not in memory, or recall refused a query.
    """
    world.refresh()
    unknown = [i for i in focus_ids if i not in world.state.nodes]
    if unknown:
        raise MemoryQueryError(f"unknown focus node ids: {', '.join(unknown)}")
    recall = GoalRecall(config.recall, SynonymTable(config.synonyms),
                        is_fixture=config.is_fixture_label,
                        categories=CategoryTable(config.categories),
                        attributes=AttributeTable(config.attributes))
    failed = list(failed)
    candidates: list[Candidate] = []
    seen: set[str] = set()
    try:
        for query in _queries(parsed, text):
            for cand in recall.recall(world.state, query, failed):
                if cand.node_id not in seen:
                    seen.add(cand.node_id)
                    candidates.append(cand)
    except RecallError as err:
        raise MemoryQueryError(str(err)) from err
    focus = list(dict.fromkeys([*focus_ids, *(c.node_id for c in candidates)]))
    summary = world.render(config.loop.scene_graph_chars, focus=focus)
    if retriever is None:
        return MemoryAnswer(tuple(candidates), summary)
    mentions = [m for g in parsed.goals for m in (g.obj, g.source, g.target)] \
        if parsed.symbolic else [text]
    try:
        result = retriever.retrieve(RetrievalQuery(text, tuple(focus), task_terms(mentions)),
                                    summary)
    except (RetrievalError, MemoryStoreError) as err:
        return MemoryAnswer(tuple(candidates), summary,
                            retrieval_error=f"keyframe retrieval failed: {err}")
    frames = list(result.frames)
    if max_keyframes > 0:
        frames = frames[:max_keyframes]
    return MemoryAnswer(tuple(candidates), summary, tuple(frames))
