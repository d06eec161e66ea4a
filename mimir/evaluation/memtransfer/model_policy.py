"""The policy a reasoning backend serves: one prompt per step, one action per answer.

Each prompt holds the rules of the interface, the instruction, the agent's pose, what its last
action did and what stands in front of it, its working window (the last ``window`` steps with
the views they led to), what the memory representation recalls for the current view, and the
current view; at most ``max_images`` images in all (memory images are dropped from the end when
the budget runs out). The answer is read leniently (a bare action name, the name in a sentence
or in a JSON object ``{"action": ...}``, spaces or hyphens for underscores); an answer naming no
action, an unknown one or several is :class:`InvalidAnswerError`, and the episode spends the step
without moving and tells the agent so.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Callable

from mimir.evaluation.memtransfer.memories import Memory, Recall, pose_text
from mimir.evaluation.memtransfer.policies import Brief, Cost
from mimir.paths import config_dir
from mimir_planner.reasoning.prompts import PromptLibrary
from mimir_planner.reasoning.vlm import ChatMessage, ImagePart, TextPart, VlmBackend, VlmRequest
from mimir_sim.warehouse.episode import Image, Observation
from mimir_sim.warehouse.layout import ACTIONS, WarehouseError

_WORD = re.compile(r"[a-z_]+")


class InvalidAnswerError(WarehouseError):
    """An answer that names no single valid action."""


def parse_action(text: str) -> str:
    """The action an answer names.

    Raises:
        InvalidAnswerError: none, an unknown one, or several different ones.
    """
    candidate = text.strip()
    try:
        data = json.loads(candidate)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("action"), str):
        candidate = data["action"]
    flat = candidate.lower().replace("-", "_")
    for action in ACTIONS:
        if "_" in action:
            flat = flat.replace(action.replace("_", " "), action)
    named = {word for word in _WORD.findall(flat) if word in ACTIONS}
    if len(named) == 1:
        return named.pop()
    if not named:
        shown = " ".join(candidate.split())[:40]
        raise InvalidAnswerError(f"the answer {shown!r} names no action")
    raise InvalidAnswerError(f"the answer names several actions: {', '.join(sorted(named))}")


class ModelPolicy:
    """Acts on a reasoning backend's answers, with a memory representation."""

    def __init__(self, name: str, backend: VlmBackend, memory_for: Callable[[Brief], Memory],
                 *, window: int = 6, max_images: int = 50, max_tokens: int = 30) -> None:
        self.name = name
        self.cost = Cost()
        self._backend = backend
        self._memory_for = memory_for
        self._memory: Memory | None = None
        self._window: deque[tuple[Observation, Image]] = deque(maxlen=window)
        self._max_images = max_images
        self._max_tokens = max_tokens
        self._instruction = ""
        self.last_answer: str | None = None
        self._rules = (PromptLibrary(config_dir() / "prompts").get("memtransfer_step")
                       .render({}).strip())

    def begin(self, brief: Brief) -> None:
        """Build the memory of this episode and clear the window."""
        self.cost = Cost()
        self._memory = self._memory_for(brief)
        self._window.clear()
        self._instruction = brief.plan.case.task.instruction

    def act(self, observation: Observation) -> str:
        """Ask the backend for the next action.

        Raises:
            InvalidAnswerError: the answer names no single action (the step is spent).
            BackendError: the backend fails.
            WarehouseError: the observation carries no view.
        """
        if observation.image is None:
            raise WarehouseError("the model policy needs episodes that render views")
        if self._memory is None:
            raise WarehouseError("begin() was not called")
        view = observation.image()
        recall = self._memory.recall(view)
        parts, images = self._prompt(observation, view, recall)
        response = self._backend.complete(VlmRequest(
            (ChatMessage.text("system", self._rules), ChatMessage("user", tuple(parts))),
            json_mode=False, temperature=0.0, max_tokens=self._max_tokens,
            purpose="memtransfer_step"))
        self.cost.prompts += 1
        self.cost.images += images
        self.cost.tokens += response.prompt_tokens or 0
        self.last_answer = response.text
        self._window.append((observation, view))
        return parse_action(response.text)

    def _prompt(self, observation: Observation, view: Image, recall: Recall
                ) -> tuple[list[TextPart | ImagePart], int]:
        parts: list[TextPart | ImagePart] = [TextPart(f"Task: {self._instruction}")]
        budget = self._max_images - 1 - len(self._window)
        if recall.text or recall.images:
            parts.append(TextPart("From memory of earlier runs:\n" + recall.text))
            for caption, image in recall.images[:max(0, budget)]:
                parts += [TextPart(caption), ImagePart(image)]
        used = 1 + min(len(recall.images), max(0, budget))
        if self._window:
            parts.append(TextPart("Your last steps in this run:"))
            for seen, image in self._window:
                parts += [TextPart(f"step {seen.step}: {seen.feedback}; at "
                                   f"{pose_text(seen.pose)}"), ImagePart(image)]
                used += 1
        front = ", ".join(observation.in_front) or "nothing"
        parts += [TextPart(f"Now: step {observation.step} of the run, at "
                           f"{pose_text(observation.pose)}; last action: {observation.feedback}; "
                           f"in front of you: {front}; stages done: {observation.stages_done} "
                           f"of {observation.stages}. Your current view:"),
                  ImagePart(view), TextPart("Your action:")]
        return parts, used
