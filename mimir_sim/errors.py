"""Exception classes of the simulation core."""

from __future__ import annotations

from typing import Any


class SimError(Exception):
    """Base class of every error raised by ``mimir_sim``."""


class ScenarioError(SimError):
    """A scenario could not be found or parsed."""


class UnknownScenarioError(ScenarioError):
    """No scenario file carries the requested name."""


class KeyedError(SimError):
    """An error about one entry of a file or mapping; ``key`` names the entry and starts the
    message."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


class MalformedScenarioError(ScenarioError, KeyedError):
    """A scenario file is not valid; the message names the offending key."""


class ModelDirError(SimError):
    """The robot model folder is missing or incomplete."""


class SceneBuildError(SimError):
    """MuJoCo refused the generated scene."""


class UnknownEntityError(SimError):
    """A fixture, object or camera id is not part of the scene."""


class UnreachablePoseError(SimError):
    """A base pose lies outside the room or inside a fixture."""


class RenderError(SimError):
    """Offscreen rendering failed or was asked for bad parameters."""


class PrimitiveError(SimError):
    """A primitive was called with arguments it cannot act on."""


class SimConfigError(KeyedError):
    """A simulation settings file or mapping is invalid; ``key`` names the offending entry."""


class PhysicsUnstableError(SimError):
    """The physics blew up: MuJoCo found a bad position, velocity or acceleration and reset the
    world (the simulation cannot be trusted from there).

    Attributes:
        state: MuJoCo's full state before the step that blew up (``mjSTATE_INTEGRATION``), or
            None; :func:`mimir_sim.physics.save_unstable` writes it for a replay.
        time: simulation time of that step (s).
    """

    def __init__(self, message: str, *, state: Any = None, time: float = float("nan")) -> None:
        super().__init__(message)
        self.state = state
        self.time = time


class StepListenerError(SimError):
    """A step listener was registered with bad arguments, is unknown, or broke the rules."""


class FiducialLayoutError(SimError):
    """The kitchen's walls leave too little free room for the fiducial tag layout."""
