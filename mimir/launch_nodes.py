"""What the three launch files share: their common arguments and the one way they start a node.

``launch`` and ``launch_ros`` are imported inside the functions, so this module imports (and its
tests run) where those packages are not installed; only calling the functions needs them.

Every node started here gets, in this order (later wins): the deployment parameter file named by
the ``params_file`` argument (sections keyed ``/**/<node>``, so they apply under any
``namespace``), ``use_sim_time`` from the launch argument (or false for a node that owns the
clock), ``memory_dir`` for nodes that keep memory, the node's own extra parameters, then the
parameters an operator gave through optional launch arguments (``sam3_model:=...``); an optional
argument left empty keeps the file's value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Parameters that are lists: an optional launch argument gives them comma-separated.
LIST_PARAMETERS = frozenset({"cameras"})

#: Arguments every launch file declares, with their descriptions (defaults vary by file).
COMMON_ARGUMENTS: dict[str, str] = {
    "namespace": "namespace for every mimir node (the parameter file applies under any)",
    "use_sim_time": "use /clock instead of the wall clock",
    "params_file": "parameter file with one /**/<node> section per node",
    "log_level": "log level of every node (debug, info, warn, error)",
    "memory_dir": "folder of the memory databases and keyframes",
}


def common_arguments(*, params_file: str, use_sim_time: str, memory_dir: str,
                     clock_description: str = "") -> list[Any]:
    """``DeclareLaunchArgument`` actions for :data:`COMMON_ARGUMENTS`.

    ``params_file`` is a file under the installed package's ``config`` folder (found with
    ``FindPackageShare``); ``clock_description`` replaces the ``use_sim_time`` description.
    """
    from launch.actions import DeclareLaunchArgument  # noqa: PLC0415 - launch is optional
    from launch.substitutions import PathJoinSubstitution  # noqa: PLC0415
    from launch_ros.substitutions import FindPackageShare  # noqa: PLC0415

    defaults: dict[str, Any] = {
        "namespace": "",
        "use_sim_time": use_sim_time,
        "params_file": PathJoinSubstitution([FindPackageShare("mimir"), "config", params_file]),
        "log_level": "info",
        "memory_dir": memory_dir,
    }
    descriptions = dict(COMMON_ARGUMENTS)
    if clock_description:
        descriptions["use_sim_time"] = clock_description
    return [DeclareLaunchArgument(name, default_value=defaults[name], description=text)
            for name, text in descriptions.items()]


def argument(name: str, default: str | None, description: str) -> Any:
    """One more ``DeclareLaunchArgument``; ``default`` None makes the argument required."""
    from launch.actions import DeclareLaunchArgument  # noqa: PLC0415 - launch is optional

    if default is None:
        return DeclareLaunchArgument(name, description=description)
    return DeclareLaunchArgument(name, default_value=default, description=description)


def config(name: str) -> Any:
    """The value of launch argument ``name`` (a ``LaunchConfiguration``)."""
    from launch.substitutions import LaunchConfiguration  # noqa: PLC0415 - launch is optional

    return LaunchConfiguration(name)


def flag(name: str) -> Any:
    """Launch argument ``name`` as a bool parameter value ("true"/"false" on the command line)."""
    from launch_ros.parameter_descriptions import ParameterValue  # noqa: PLC0415

    return ParameterValue(config(name), value_type=bool)


def overrides(configurations: Mapping[str, Any], from_arguments: Mapping[str, str]
              ) -> dict[str, Any]:
    """Parameters set by the optional launch arguments the operator gave (non-empty ones).

    ``from_arguments`` maps a parameter to its launch argument; a parameter of
    :data:`LIST_PARAMETERS` is split at commas.
    """
    given: dict[str, Any] = {}
    for parameter, name in from_arguments.items():
        value = str(configurations.get(name, "")).strip()
        if not value:
            continue
        if parameter in LIST_PARAMETERS:
            given[parameter] = [part.strip() for part in value.split(",") if part.strip()]
        else:
            given[parameter] = value
    return given


def node(executable: str, name: str, extra: Mapping[str, Any] | None = None, *,
         keeps_memory: bool = False, follows_clock: bool = True,
         from_arguments: Mapping[str, str] | None = None, **kwargs: Any) -> Any:
    """A ``launch_ros`` node of package mimir with the common arguments applied.

    ``extra`` holds parameters of this node only (plain values or substitutions); ``kwargs``
    go to ``launch_ros.actions.Node`` (for example ``condition``). ``from_arguments`` maps
    parameters to optional launch arguments (see :func:`overrides`); with it the node is built
    when the launch runs (an ``OpaqueFunction``), once the arguments' values are known.
    """
    if not from_arguments:
        return _node(executable, name, extra, keeps_memory=keeps_memory,
                     follows_clock=follows_clock, kwargs=kwargs)
    from launch.actions import OpaqueFunction  # noqa: PLC0415 - launch is optional

    chosen = dict(from_arguments)

    def build(context: Any, *_args: Any, **_kwargs: Any) -> list[Any]:
        given = overrides(context.launch_configurations, chosen)
        return [_node(executable, name, {**dict(extra or {}), **given},
                      keeps_memory=keeps_memory, follows_clock=follows_clock, kwargs=kwargs)]

    return OpaqueFunction(function=build)


#: A node that dies is started again after a pause, a bounded number of times (a node that
#: cannot start, such as segmentation without its weights, stops after the last try).
RESPAWN: Mapping[str, Any] = {"respawn": True, "respawn_delay": 2.0, "respawn_max_retries": 5}


def _node(executable: str, name: str, extra: Mapping[str, Any] | None, *, keeps_memory: bool,
          follows_clock: bool, kwargs: Mapping[str, Any]) -> Any:
    from launch_ros.actions import Node  # noqa: PLC0415 - launch_ros is optional

    common: dict[str, Any] = {"use_sim_time": flag("use_sim_time") if follows_clock else False}
    if keeps_memory:
        common["memory_dir"] = config("memory_dir")
    return Node(
        package="mimir",
        executable=executable,
        name=name,
        namespace=config("namespace"),
        parameters=[config("params_file"), common, dict(extra or {})],
        arguments=["--ros-args", "--log-level", config("log_level")],
        output="screen",
        **{**RESPAWN, **kwargs},
    )
