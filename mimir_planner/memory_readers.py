"""The planner's read-only view of the memories another process writes.

World memory belongs to the scene graph node and the keyframe store to the keyframe node; the
planner opens both READ-ONLY in the same memory folder (``world.db``, ``keyframes/``) and
refreshes them before it plans. These helpers open them with the errors a host can report, and
build the keyframe retriever a store needs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mimir_memory.config import MemoryConfig
from mimir_memory.errors import MemoryStoreError
from mimir_memory.keyframes import KeyframeStore
from mimir_memory.representation import (
    CandidateFrame,
    MemoryView,
    Representation,
    keyframe_source,
)
from mimir_memory.world import WorldMemory
from mimir_planner.config import PlannerConfig
from mimir_planner.errors import PlannerError
from mimir_planner.reasoning.prompts import PromptLibrary
from mimir_planner.reasoning.vlm import VlmBackend
from mimir_planner.retrieval import KeyframeRetriever, VlmRetrievalReasoner


class MemoryUnavailableError(PlannerError):
    """World memory (or the keyframe store) cannot be opened read-only yet."""


@dataclass
class MemoryReaders:
    """World memory and, when it could be opened, the keyframe store (both read-only)."""

    world: WorldMemory
    keyframes: KeyframeStore | None

    def close(self) -> None:
        """Close both."""
        self.world.close()
        if self.keyframes is not None:
            self.keyframes.close()


def open_world_reader(memory_dir: Path, config: MemoryConfig, *,
                      map_frame: str, view: MemoryView | None = None) -> WorldMemory:
    """World memory of ``memory_dir``, read-only (through ``view`` when given).

    Raises:
        MemoryUnavailableError: It does not exist yet or cannot be read.
    """
    path = memory_dir / "world.db"
    try:
        return WorldMemory.open(path, config=config, readonly=True, map_frame=map_frame,
                                view=view)
    except MemoryStoreError as err:
        raise MemoryUnavailableError(
            f"world memory {path} cannot be read (is the scene graph node running on this "
            f"memory_dir?): {err}") from err


class _KeyframesWhenThere:
    """Candidate frames of the keyframe store, opened read-only once it exists (none before)."""

    def __init__(self, memory_dir: Path, config: MemoryConfig) -> None:
        self.memory_dir, self.config = memory_dir, config
        self.store: KeyframeStore | None = None

    def __call__(self, limit: int) -> Sequence[CandidateFrame]:
        if self.store is None:
            try:
                self.store = open_keyframe_reader(self.memory_dir, self.config)
            except MemoryStoreError:
                return []
        return keyframe_source(self.store)(limit)


def memory_view(representation: Representation, memory_dir: Path, memory: MemoryConfig,
                planner: PlannerConfig, pinned: Callable[[], Iterable[str]]
                ) -> MemoryView | None:
    """The view a planner reads world memory through: None for the whole memory; an episodic
    representation reads its frames from the keyframe store of ``memory_dir``."""
    if representation.complete:
        return None
    frames = _KeyframesWhenThere(memory_dir, memory) if representation.episodic else None
    return MemoryView(representation, frames, is_fixture=planner.is_fixture_label,
                      pinned=pinned)


def open_keyframe_reader(memory_dir: Path, config: MemoryConfig) -> KeyframeStore:
    """The keyframe store of ``memory_dir``, read-only.

    Raises:
        MemoryStoreError: It does not exist yet or cannot be read.
    """
    return KeyframeStore.open(memory_dir / "keyframes", config=config, readonly=True)


def make_retriever(store: KeyframeStore, config: PlannerConfig,
                   backend: VlmBackend | None) -> KeyframeRetriever:
    """A retriever over ``store``: model-judged stages with a backend, offline ones without."""
    if backend is None:
        return KeyframeRetriever(store, config.retrieval)
    reasoner = VlmRetrievalReasoner(backend, PromptLibrary(config.prompt_dir), config.retrieval)
    return KeyframeRetriever(store, config.retrieval, reasoner)
