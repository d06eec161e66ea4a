"""The methods ``mimir eval`` compares: switch settings of one system, read from ``eval.yaml``.

A method never changes code paths the others lack; it sets node parameters of the simulation
graph (see :func:`Method.node_params`) and, for harness ablations, the verdict kinds switched
off. The file is checked as a whole before any trial runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mimir import settings
from mimir.paths import ConfigFileNotFoundError, config_file
from mimir_memory.errors import MemoryStoreError
from mimir_memory.representation import load_representations
from mimir_planner.reasoning.config import VERIFIERS


class EvalConfigError(ValueError):
    """An evaluation file or choice that cannot be used (unknown method, bad value)."""


@dataclass(frozen=True)
class Method(settings.Checked, section="methods", error=EvalConfigError):
    """One method: what the planner reads and whether the analyzer writes.

    Attributes:
        name: key in ``eval.yaml`` (used in folder names and on the command line).
        label: name in tables and plots.
        interaction: the interaction analyzer verifies primitives and writes what they revealed.
        keyframes: the planner reads the keyframe store.
        verifiers_off: comma-separated verdict kinds switched off, or ``all``.
        representation: what the planner reads of memory (``config/representations.yaml``):
            ``scene_graph`` for the system's own methods, a narrower one for the baselines.
    """

    name: str = "full"
    label: str = ""
    interaction: bool = True
    keyframes: bool = True
    verifiers_off: str = ""
    representation: str = "scene_graph"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.name.isidentifier():
            raise EvalConfigError(f"method name {self.name!r} must be a plain identifier")
        kinds = [k.strip() for k in self.verifiers_off.split(",") if k.strip()]
        unknown = [k for k in kinds if k not in VERIFIERS] if kinds != ["all"] else []
        if unknown:
            raise EvalConfigError(f"method {self.name}: unknown verdict kinds {unknown}; "
                                  f"give 'all' or some of {', '.join(VERIFIERS)}")

    def node_params(self) -> dict[str, dict[str, Any]]:
        """Parameters of the simulation graph's nodes that this method sets."""
        return {
            "planner": {"analyze": self.interaction, "use_keyframes": self.keyframes,
                        "representation": self.representation},
            "analyzer": {"auto_analyze": self.interaction},
        }


@dataclass(frozen=True)
class EvalConfig:
    """The methods and the trial settings.

    Attributes:
        first_seed: trial ``k`` runs on the layout of seed ``first_seed + k``.
        step_budget: planner calls per instruction.
        methods: every method, by name, in file order.
    """

    first_seed: int = 1000
    step_budget: int = 12
    methods: Mapping[str, Method] = field(default_factory=dict)

    def pick(self, names: str) -> list[Method]:
        """The methods of a comma-separated list (``all``: every one), in the list's order.

        Raises:
            EvalConfigError: an unknown or repeated name, or an empty list.
        """
        wanted = [n.strip() for n in names.split(",") if n.strip()]
        if wanted == ["all"]:
            return list(self.methods.values())
        if not wanted:
            raise EvalConfigError("no method named; give --methods a comma-separated list "
                                  f"of {', '.join(self.methods)} or 'all'")
        unknown = [n for n in wanted if n not in self.methods]
        if unknown:
            raise EvalConfigError(f"unknown methods {unknown}; known: {', '.join(self.methods)}")
        if len(set(wanted)) != len(wanted):
            raise EvalConfigError(f"a method is named twice in {names!r}")
        return [self.methods[n] for n in wanted]


def load_eval_config(path: str | Path | None = None) -> EvalConfig:
    """Read ``eval.yaml`` (default: the installed one).

    Raises:
        EvalConfigError: the file cannot be read, has unknown keys, or a value is out of range.
    """
    source = Path(path) if path else config_file("eval.yaml")
    data = settings.read_mapping(source, "evaluation file", EvalConfigError)
    settings.refuse_unknown(data, {"first_seed", "step_budget", "methods"}, str(source),
                            EvalConfigError)
    first_seed = data.get("first_seed", 1000)
    budget = data.get("step_budget", 12)
    if isinstance(first_seed, bool) or not isinstance(first_seed, int) or first_seed < 0:
        raise EvalConfigError(f"first_seed must be a non-negative integer, got {first_seed!r}")
    settings.positive_int("step_budget", budget, EvalConfigError)
    raw = data.get("methods")
    if not isinstance(raw, Mapping) or not raw:
        raise EvalConfigError(f"{source}: 'methods' must be a non-empty mapping")
    methods = {}
    for name, body in raw.items():
        if not isinstance(body, Mapping):
            raise EvalConfigError(f"method {name!r} must be a mapping")
        methods[str(name)] = settings.section(
            Method, f"methods.{name}", {"name": str(name), "label": str(name), **body},
            EvalConfigError)
    try:
        known = load_representations(config_file("representations.yaml"))
    except (MemoryStoreError, ConfigFileNotFoundError) as err:
        raise EvalConfigError(f"cannot read the memory representations: {err}") from err
    for method in methods.values():
        if method.representation not in known:
            raise EvalConfigError(
                f"method {method.name}: unknown representation {method.representation!r}; "
                f"known: {', '.join(known)}")
    return EvalConfig(first_seed, int(budget), methods)
