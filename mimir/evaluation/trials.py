"""One trial: a method on one generated layout, run as ``mimir sim`` in a folder of its own.

A trial runs in process (``mimir sim --in-process``, the default) or as the node graph
(:data:`NODES`). The evaluation folder holds ``<method>/scale-<s>/seed-<seed>-in-process/`` per
in-process trial and ``<method>/scale-<s>/seed-<seed>/`` per node-graph trial. A trial folder is
the sim job's run folder plus ``trial.json`` (what was asked) and, when the job failed,
``error.json``. A trial is finished when its ``results.json`` (written by the sim job) can be
read; a resumed evaluation runs only the trials that are not.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mimir.evaluation.methods import EvalConfigError, Method
from mimir.sim_job import RESULTS_VERSION, SimJobOptions

#: How a trial runs: the node graph over DDS (the reference), or in one process.
NODES = "nodes"
IN_PROCESS = "in_process"
MODES = (NODES, IN_PROCESS)
#: Folders in a trial's key (:attr:`TrialSpec.key`): method, noise scale, seed.
KEY_DEPTH = 3


class TrialFileError(ValueError):
    """A trial folder whose files cannot be read (corrupt ``results.json`` or ``trial.json``)."""


@dataclass(frozen=True)
class TrialSpec:
    """What one trial runs.

    Attributes:
        scenario: scenario name or file.
        method: the method.
        seed: layout seed.
        profile: noise profile name or file.
        noise_scale: factor on every noise term.
        step_budget: planner calls per instruction.
        vlm_backend: reasoning backend.
        instruction_timeout_s: wall-clock limit per instruction.
        mode: :data:`NODES` or :data:`IN_PROCESS` (``trial.json`` files written before trials
            had a mode ran the node graph).
    """

    scenario: str
    method: Method
    seed: int
    profile: str = "realistic"
    noise_scale: float = 1.0
    step_budget: int = 12
    vlm_backend: str = "offline"
    instruction_timeout_s: float = 600.0
    mode: str = NODES

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise EvalConfigError(f"a trial runs as one of {', '.join(MODES)}, not "
                                  f"{self.mode!r}")
        if not (math.isfinite(self.noise_scale) and self.noise_scale >= 0.0):
            raise EvalConfigError(f"the noise scale must be a finite number >= 0, got "
                                  f"{self.noise_scale}")
        if self.seed < 0:
            raise EvalConfigError(f"a layout seed must be >= 0, got {self.seed}")

    @property
    def key(self) -> str:
        """``<method>/scale-<s>/seed-<seed>``: the trial's folder inside the evaluation."""
        suffix = "-in-process" if self.mode == IN_PROCESS else ""
        return f"{self.method.name}/scale-{self.noise_scale:g}/seed-{self.seed}{suffix}"

    def folder(self, root: Path) -> Path:
        """The trial's folder inside the evaluation folder ``root``."""
        return root / self.key

    def options(self, root: Path) -> SimJobOptions:
        """The sim job's options: the run folder is the trial folder."""
        folder = self.folder(root)
        return SimJobOptions(
            scenario=self.scenario, vlm_backend=self.vlm_backend, run_root=folder.parent,
            run_name=folder.name, seed=self.seed, step_budget=self.step_budget,
            instruction_timeout_s=self.instruction_timeout_s, quiet=True,
            extra_params=self.method.node_params(), verifiers_off=self.method.verifiers_off,
            noise_profile=self.profile, noise_scale=self.noise_scale,
            in_process=self.mode == IN_PROCESS)

    def to_json(self) -> dict[str, Any]:
        """``trial.json``'s content."""
        return {**asdict(self), "method": asdict(self.method)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TrialSpec:
        """The spec of ``trial.json``.

        Raises:
            TrialFileError: keys are missing or of the wrong type.
        """
        try:
            method = Method(**data["method"])
            body = {k: v for k, v in data.items() if k != "method"}
            return cls(method=method, **body)
        except (KeyError, TypeError, EvalConfigError) as err:
            raise TrialFileError(f"trial.json cannot be read: {err}") from err


@dataclass(frozen=True)
class TrialResult:
    """What a trial left behind.

    Attributes:
        spec: what was run.
        finished: the sim job wrote ``results.json``.
        results: its content (empty when not finished).
        error: the job's error when it failed (empty otherwise).
    """

    spec: TrialSpec
    finished: bool
    results: Mapping[str, Any] = field(default_factory=dict)
    error: str = ""

    @property
    def failed(self) -> bool:
        """The trial ran and failed (its error is known); an unfinished trial without one was
        not run yet or was stopped, and a resumed evaluation runs it."""
        return not self.finished and bool(self.error)

    @property
    def instructions(self) -> list[dict[str, Any]]:
        """The judged instructions of a finished trial."""
        return list(self.results.get("instructions", []))

    @property
    def progress(self) -> float:
        """Mean judged task progress over the trial's instructions (0 when none)."""
        rows = self.instructions
        return sum(float(r["judged_progress"]) for r in rows) / len(rows) if rows else 0.0


def read_trial(spec: TrialSpec, root: Path) -> TrialResult:
    """What the trial folder of ``spec`` holds (not finished when it has no results).

    Raises:
        TrialFileError: ``results.json`` exists but is not JSON, has another version, or lacks
            the judged instructions.
    """
    folder = spec.folder(root)
    path = folder / "results.json"
    if not path.is_file():
        error = ""
        if (folder / "error.json").is_file():
            try:
                error = str(json.loads((folder / "error.json").read_text()).get("error", ""))
            except (json.JSONDecodeError, AttributeError):
                error = (folder / "error.json").read_text()[:500]
        return TrialResult(spec, False, error=error)
    return TrialResult(spec, True, parse_results(path.read_text(), str(path)))


def parse_results(text: str, where: str) -> dict[str, Any]:
    """The content of a trial's ``results.json`` (``where`` names it in errors).

    Raises:
        TrialFileError: not JSON, another version, or no judged instructions.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise TrialFileError(f"{where} is not JSON: {err}") from err
    if not isinstance(data, dict) or data.get("version") != RESULTS_VERSION:
        raise TrialFileError(f"{where} is not results.json version {RESULTS_VERSION}")
    rows = data.get("instructions")
    if not isinstance(rows, list) or not all(
            isinstance(r, dict) and "judged_progress" in r for r in rows):
        raise TrialFileError(f"{where} holds no judged instructions")
    return data


def trial_specs(scenario: str, methods: list[Method], *, trials: int, first_seed: int,
                profile: str, noise_scales: list[float], step_budget: int, vlm_backend: str,
                instruction_timeout_s: float, mode: str = IN_PROCESS,
                nodes: int = 0) -> list[TrialSpec]:
    """Every trial of an evaluation, seed-major so that the methods of one layout run close
    together (a partial evaluation then still pairs its methods). With ``mode`` in process,
    the first ``nodes`` layouts of every method and scale also run as the node graph, to check
    that the two modes agree.

    Raises:
        EvalConfigError: fewer than one trial, a node subsample outside ``[0, trials]`` or
            beside node-graph trials, or a bad noise scale or mode.
    """
    if trials < 1:
        raise EvalConfigError(f"--trials must be at least 1, got {trials}")
    if not 0 <= nodes <= trials:
        raise EvalConfigError(f"--nodes must lie in [0, --trials = {trials}], got {nodes}")
    if nodes and mode != IN_PROCESS:
        raise EvalConfigError("--nodes reruns in-process trials as the node graph; every "
                              "trial already runs as the node graph")
    specs = []
    for k in range(trials):
        for scale in noise_scales:
            for method in methods:
                specs.append(TrialSpec(scenario, method, first_seed + k, profile, scale,
                                       step_budget, vlm_backend, instruction_timeout_s, mode))
                if k < nodes:
                    specs.append(TrialSpec(scenario, method, first_seed + k, profile, scale,
                                           step_budget, vlm_backend, instruction_timeout_s,
                                           NODES))
    return specs
