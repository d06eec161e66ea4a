"""The executor's robot interface over controller objects in the same process, without RPC.

For fast evaluation the executor can drive the simulator's (or the fakes') base and arm
controllers directly. :class:`DirectRobot` offers the :class:`~mimir_robot.rpc.RobotLink`
methods the executor uses and applies the same checks on the way in (targets) and out (states),
so the executor code is the same in both modes; only connection handling is missing, since there
is no connection to lose.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mimir_robot.rpc import (
    ArmState,
    BaseState,
    RobotNotResetError,
    arm_action,
    base_action,
    parse_arm_state,
    parse_base_state,
)


class DirectRobot:
    """RobotLink-like access to a base and an arm controller object (``reset``, ``execute_action``,
    ``get_state``). Like the link, it never resets by itself and refuses targets until the caller
    has reset each part."""

    def __init__(self, base: Any, arm: Any) -> None:
        self._base = base
        self._arm = arm
        self._reset = {"base": False, "arm": False}

    def reset_base(self) -> None:
        self._base.reset()
        self._reset["base"] = True

    def reset_arm(self) -> None:
        self._arm.reset()
        self._reset["arm"] = True

    def _require_reset(self, part: str) -> None:
        if not self._reset[part]:
            raise RobotNotResetError(f"{part}: not reset yet; call reset explicitly first")

    def send_base_pose(self, x: float, y: float, theta: float) -> None:
        action = base_action(x, y, theta)
        self._require_reset("base")
        self._base.execute_action(action)

    def send_arm(self, pos: Sequence[float] | np.ndarray, quat: Sequence[float] | np.ndarray,
                 gripper: float) -> None:
        action = arm_action(pos, quat, gripper)
        self._require_reset("arm")
        self._arm.execute_action(action)

    def base_state(self) -> BaseState:
        return parse_base_state(self._base.get_state())

    def arm_state(self) -> ArmState:
        return parse_arm_state(self._arm.get_state())

    def close(self) -> None:
        self._base.close()
        self._arm.close()
