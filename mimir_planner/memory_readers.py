"""The planner's read-only view of the memories another process writes.

World memory belongs to the scene graph node and the keyframe store to the keyframe node; the
planner opens both READ-ONLY in the same memory folder (``world.db``, ``keyframes/``) and
refreshes them before it plans. These helpers open them with the errors a host can report, and
build the keyframe retriever a store needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mimir_memory.config import MemoryConfig
from mimir_memory.errors import MemoryStoreError
from mimir_memory.keyframes import KeyframeStore
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
                      map_frame: str) -> WorldMemory:
    """World memory of ``memory_dir``, read-only.

    Raises:
        MemoryUnavailableError: It does not exist yet or cannot be read.
    """
    path = memory_dir / "world.db"
    try:
        return WorldMemory.open(path, config=config, readonly=True, map_frame=map_frame)
    except MemoryStoreError as err:
        raise MemoryUnavailableError(
            f"world memory {path} cannot be read (is the scene graph node running on this "
            f"memory_dir?): {err}") from err


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
