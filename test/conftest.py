"""Fixtures shared by every test tier."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import rclpy
from rclpy.context import Context
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from ros_helpers import spinning_executor, wait_until

from mimir.paths import config_file
from mimir.ros.domains import claim_domain_id
from mimir_sim.warehouse.cases import Case, read_cases
from mimir_sim.warehouse.layout import Layout, load_layout

REPO_ROOT = Path(__file__).resolve().parents[1]

# Hermetic ROS 2: every test process gets its own DDS domain, discovery stays on this host, and
# ROS logs go to a temporary folder. This runs at import, before any test can call rclpy.init().
os.environ["ROS_DOMAIN_ID"] = str(claim_domain_id())
# MuJoCo picks its GL backend at import; rendering is offscreen through EGL everywhere.
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("ROS_LOG_DIR", tempfile.mkdtemp(prefix="mimir-roslog-"))
os.environ.setdefault("RCUTILS_LOGGING_USE_STDOUT", "0")


def shared_root() -> Path:
    """The ``shared/`` folder that lies beside the checkout (data, robot models, papers)."""
    override = os.environ.get("MIMIR_SHARED_DIR")
    if override:
        return Path(override)
    return REPO_ROOT.parent / "shared"


# The robot model comes from mujoco-menagerie; tests use the offline copy in ../shared instead of a
# download (MENAGERIE_ROOT is Menagerie's own switch for a local copy; the nodes and `mimir sim`
# that tests start inherit it).
os.environ.setdefault("MENAGERIE_ROOT", str(shared_root() / "models" / "tidybot"))


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """Path of ``../shared``; tests read recordings and models from it directly."""
    path = shared_root()
    if not path.is_dir():
        raise FileNotFoundError(
            f"shared data folder not found at {path}; set MIMIR_SHARED_DIR to its location"
        )
    return path


@pytest.fixture(scope="session")
def sevenscenes_dir(shared_dir: Path) -> Path:
    """The 200-frame 7-Scenes kitchen recording (color, depth, pose, intrinsics)."""
    return shared_dir / "data" / "sevenscenes_kitchen"


@pytest.fixture(scope="session")
def tidybot_dir(shared_dir: Path) -> Path:
    """The TidyBot++ MuJoCo/URDF model folder."""
    return shared_dir / "models" / "tidybot"


@pytest.fixture(scope="session")
def warehouse() -> Layout:
    """The installed MemTransfer warehouse."""
    return load_layout()


@pytest.fixture(scope="session")
def memtransfer_cases(warehouse: Layout) -> list[Case]:
    """The installed 100 MemTransfer cases."""
    return read_cases(config_file("memtransfer/cases.json"), warehouse)


# ------------------------------------------------------------------------- ROS 2 fixtures
# Every test that starts nodes gets its own rclpy context (the DDS domain is set per test
# process above), an executor spinning in a background thread, and a driver node for its
# publishers, subscribers and clients. Nodes handed to ``ros_executor`` are destroyed after the
# test. (Importing rclpy reads no environment; the domain above applies from rclpy.init on.)


@pytest.fixture
def ros_context() -> Iterator[Context]:
    """A fresh rclpy context for one test."""
    context = Context()
    rclpy.init(context=context)
    try:
        yield context
    finally:
        rclpy.try_shutdown(context=context)


@pytest.fixture
def ros_executor(ros_context: Context) -> Iterator[MultiThreadedExecutor]:
    """A multi-threaded executor spinning in a background thread for one test."""
    with spinning_executor(ros_context, num_threads=4) as executor:
        yield executor


@pytest.fixture
def spin_node(ros_context: Context, ros_executor: MultiThreadedExecutor) -> Node:
    """A driver node (publishers, subscribers, clients of the test) that is being spun."""
    node = rclpy.create_node("mimir_test_driver", context=ros_context)
    ros_executor.add_node(node)
    return node


@pytest.fixture
def wait_for() -> Callable[..., bool]:
    """``wait_for(predicate, timeout=20.0)``: poll until the predicate holds or time runs out."""
    return wait_until
