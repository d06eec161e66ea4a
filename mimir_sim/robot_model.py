"""Where the simulated TidyBot++ comes from: MuJoCo Menagerie's ``stanford_tidybot``.

The robot model is not part of this repository. By default it is resolved through the
``mujoco-menagerie`` package, which knows the model's archive and checksum and downloads it into
its cache on first use (``MENAGERIE_CACHE_DIR``, by default ``~/.cache/mujoco_menagerie``).
Machines without that network access point ``MENAGERIE_ROOT`` at a Menagerie checkout or any folder
that holds ``stanford_tidybot/`` (the tests and ``make demo`` use ``../shared/models/tidybot``).
An explicit model (the bridge's ``tidybot_dir`` parameter, ``mimir sim --tidybot-dir``,
``sim.launch.py tidybot_dir:=``) wins over both.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mimir_sim.errors import ModelDirError

#: Menagerie's name of the robot and the entry point (robot alone, no floor) the kitchen attaches.
MENAGERIE_NAME = "stanford_tidybot"
MENAGERIE_ENTRY = "tidybot"
ROBOT_FILE = f"{MENAGERIE_ENTRY}.xml"

_HOW_TO = (
    "install the model with `pip install mujoco-menagerie` (it downloads stanford_tidybot on first "
    "use), or set MENAGERIE_ROOT to a folder holding stanford_tidybot/ (an offline copy), or give "
    "the model explicitly (bridge parameter tidybot_dir, `mimir sim --tidybot-dir`)"
)


@dataclass(frozen=True)
class RobotModel:
    """The robot's MJCF file and where it was found (for logs and run reports)."""

    xml: Path
    source: str


def robot_xml_in(location: str | Path) -> Path:
    """The robot MJCF named by ``location``, checked to exist.

    ``location`` may be the MJCF file itself, Menagerie's model folder (holding ``tidybot.xml``),
    or a folder holding that model folder (a Menagerie checkout or an offline copy).

    Raises:
        ModelDirError: nothing at ``location`` is the robot model.
    """
    path = Path(location).expanduser()
    for candidate in (path, path / ROBOT_FILE, path / MENAGERIE_NAME / ROBOT_FILE):
        if candidate.is_file():
            return candidate.resolve()
    raise ModelDirError(
        f"TidyBot++ model not found at {path}: expected {ROBOT_FILE} or "
        f"{MENAGERIE_NAME}/{ROBOT_FILE} there")


def resolve_robot_model(explicit: str | Path | None = None) -> RobotModel:
    """The robot model to simulate: ``explicit`` if given, else Menagerie's ``stanford_tidybot``.

    Menagerie honours ``MENAGERIE_ROOT`` (a local copy, no download) and otherwise downloads the
    archive it registers, checks its checksum and caches it.

    Raises:
        ModelDirError: the model cannot be found or fetched; the message says how to provide it.
    """
    if explicit is not None and str(explicit).strip():
        return RobotModel(robot_xml_in(explicit), "explicit")
    try:
        import mujoco_menagerie  # noqa: PLC0415 - only the simulation needs it
    except ImportError as err:
        raise ModelDirError(
            f"TidyBot++ model: mujoco-menagerie is not installed; {_HOW_TO}") from err
    try:
        folder = mujoco_menagerie.get(MENAGERIE_NAME).path(progress=None)
    except (mujoco_menagerie.MenagerieError, OSError) as err:
        raise ModelDirError(
            f"TidyBot++ model: mujoco-menagerie could not provide {MENAGERIE_NAME} "
            f"({type(err).__name__}: {err}); {_HOW_TO}") from err
    return RobotModel(robot_xml_in(folder), f"mujoco-menagerie {MENAGERIE_NAME}")
