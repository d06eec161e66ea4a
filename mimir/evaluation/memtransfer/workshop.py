"""What one process needs to run MemTransfer episodes: the warehouse, the cases, and for model
policies a renderer, the reasoning backend and the memory representations."""

from __future__ import annotations

import atexit
import shutil
import tempfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from mimir.evaluation.memtransfer.memories import (
    Document,
    Episodic,
    FullContext,
    Memory,
    NoHistory,
    Record,
    document_path,
    read_document,
    record,
    write_semantic,
    write_summary,
)
from mimir.evaluation.memtransfer.model_policy import ModelPolicy
from mimir.evaluation.memtransfer.names import DOCUMENT_KINDS, POLICIES, REPRESENTATIONS
from mimir.evaluation.memtransfer.policies import Brief, NoMemoryPolicy, OraclePolicy, Policy
from mimir.evaluation.memtransfer.protocol import History, Setting, plan_episode
from mimir_planner.reasoning.config import load_reasoning_config, with_model
from mimir_planner.reasoning.vlm import VlmBackend
from mimir_sim.warehouse.cases import Case, read_cases
from mimir_sim.warehouse.episode import Image
from mimir_sim.warehouse.layout import Layout, Pose, load_layout

if TYPE_CHECKING:
    from mimir.evaluation.memtransfer.scene_memory import SceneMemory
    from mimir_sim.warehouse.render import WarehouseRenderer


@dataclass(frozen=True)
class ModelSettings:
    """How model policies are served: the backend (``openai`` or ``transformers``; empty: the
    reasoning config's), its endpoint and model, the rendered view's size, the working window,
    the answer budget, the folder that keeps the written documents, and the sensor noise
    mimir's own memory is built through."""

    backend: str = ""
    reasoning_config: str = ""
    base_url: str = ""
    model: str = ""
    image_size: int = 256
    window: int = 6
    max_tokens: int = 30
    folder: str = ""
    noise_profile: str = "realistic"


@dataclass
class Workshop:
    """Per-process resources, made when first needed."""

    layout_path: str = ""
    cases_path: str = ""
    model: ModelSettings = field(default_factory=ModelSettings)
    _records: dict[History, Record] = field(default_factory=dict)
    _backend: VlmBackend | None = None
    _scene: tuple[SceneMemory, Path] | None = None

    @cached_property
    def layout(self) -> Layout:
        """The warehouse."""
        return load_layout(self.layout_path)

    @cached_property
    def cases(self) -> list[Case]:
        """Every case."""
        return read_cases(self.cases_path, self.layout)

    @cached_property
    def by_id(self) -> dict[str, Case]:
        """Cases by id."""
        return {case.id: case for case in self.cases}

    @cached_property
    def renderer(self) -> WarehouseRenderer:
        """The MuJoCo renderer of views (MuJoCo is imported only when a policy looks)."""
        from mimir_sim.warehouse.render import WarehouseRenderer  # noqa: PLC0415

        size = self.model.image_size
        return WarehouseRenderer(self.layout, size, size)

    def render(self, pose: Pose, blocked: frozenset[tuple[int, int]] = frozenset()) -> Image:
        """The view from ``pose``."""
        return self.renderer.render(pose, blocked)

    def backend(self) -> VlmBackend:
        """The reasoning backend model policies ask."""
        if self._backend is None:
            from mimir_planner.reasoning.backends import make_backend  # noqa: PLC0415

            config = load_reasoning_config(self.model.reasoning_config or None)
            config = with_model(config, backend=self.model.backend,
                                base_url=self.model.base_url, model=self.model.model)
            if config.vlm.backend == "transformers" and self.model.model:
                # a local model is named by its folder
                config = replace(config, vlm=replace(config.vlm, model_path=self.model.model))
            self._backend = make_backend(config)
        return self._backend

    def records(self, histories: tuple[History, ...]) -> list[Record]:
        """The demonstrations replayed (each once per process)."""
        for history in histories:
            if history not in self._records:
                self._records[history] = record(self.layout, history)
        return [self._records[h] for h in histories]

    def looks(self, policy: str) -> bool:
        """Whether episodes of ``policy`` need rendered views."""
        return policy in REPRESENTATIONS

    def policy(self, name: str) -> Policy:
        """The policy called ``name``: a reference policy or a representation's model policy.

        Raises:
            ValueError: an unknown name.
        """
        if name == "oracle":
            return OraclePolicy(self.layout)
        if name == "no_memory":
            return NoMemoryPolicy()
        if name in REPRESENTATIONS:
            return ModelPolicy(name, self.backend(), lambda brief: self.memory(name, brief),
                               window=self.model.window, max_tokens=self.model.max_tokens)
        raise ValueError(f"unknown policy {name!r}; one of "
                         f"{', '.join(POLICIES + REPRESENTATIONS)}")

    def memory(self, representation: str, brief: Brief) -> Memory:
        """The memory ``representation`` builds for an episode.

        Raises:
            DocumentError: a document the representation reads has not been written.
        """
        plan = brief.plan
        if representation == "working":
            return NoHistory()
        if representation in DOCUMENT_KINDS:
            folder = Path(self.model.folder)
            return Document("\n\n".join(read_document(folder, kind, plan.setting.key)
                                        for kind in DOCUMENT_KINDS[representation]))
        records = self.records(plan.histories)
        if representation == "full_context":
            return FullContext(records, self.render)
        if representation == "episodic":
            return Episodic(records, self.render)
        return self.scene_memory(brief, records)

    def scene_memory(self, brief: Brief, records: list[Record]) -> Memory:
        """mimir's memory of the episode's demonstrations, in a folder of its own that lasts
        until the next episode's (the segmentation noise is seeded by case and setting, so every
        run of an episode builds the same memory)."""
        from mimir.evaluation.memtransfer.scene_memory import (  # noqa: PLC0415
            SceneMemory,
            SceneRecall,
        )
        from mimir_sim.noise import load_noise_profile  # noqa: PLC0415

        if self._scene is not None:
            self._scene[0].close()
            shutil.rmtree(self._scene[1], ignore_errors=True)
            self._scene = None
        plan = brief.plan
        folder = Path(tempfile.mkdtemp(prefix="mimir-memtransfer-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)  # the last one of a process
        seed = zlib.crc32(f"{plan.case.id}/{plan.setting.key}".encode())
        memory = SceneMemory(folder, self.layout, records, self.renderer.frame,
                             load_noise_profile(self.model.noise_profile), seed=seed)
        self._scene = (memory, folder)
        return SceneRecall(memory, plan.case.task.instruction)

    def write_documents(self, representations: Sequence[str], settings: Sequence[Setting]
                        ) -> list[Path]:
        """Write the documents the text representations read, per setting, from the
        demonstrations that setting puts in memory across all cases (those written already are
        kept); returns the paths written now.

        Raises:
            DocumentError: an answer cannot serve as a document.
            BackendError: the backend fails.
        """
        kinds = sorted({k for r in representations for k in DOCUMENT_KINDS.get(r, ())})
        written = []
        for setting in settings:
            for kind in kinds:
                path = document_path(Path(self.model.folder), kind, setting.key)
                if path.is_file():
                    continue
                histories: dict[History, None] = {}
                for case in self.cases:
                    plan = plan_episode(self.layout, case, setting, self.cases)
                    histories.update(dict.fromkeys(plan.histories))
                records = self.records(tuple(histories))
                text = (write_summary(self.backend(), records, self.render) if kind == "summary"
                        else write_semantic(self.backend(), records))
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text + "\n", encoding="utf-8")
                written.append(path)
        return written
