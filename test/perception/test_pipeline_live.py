"""The memory pipeline fed live (as the in-process simulation feeds it): what the analyzer
answers for interactions it cannot analyse, and when it analyses at all."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mimir.nodes.robot import messages as rconv
from mimir.replay import MemoryPipeline
from mimir_msgs.action import ExecutePrimitive
from mimir_robot.executor import Outcome


@pytest.fixture
def pipeline(tmp_path: Path) -> Iterator[MemoryPipeline]:
    live = MemoryPipeline(tmp_path / "memory", ("pole",), live=True)
    assert live.start_analysis() is not None
    try:
        yield live
    finally:
        live.close()


def ended(target: str, iid: str, start: float = 1.0, end: float = 3.0) -> object:
    goal = ExecutePrimitive.Goal(primitive="open", target_id=target)
    return rconv.interaction_event(goal, iid, start, end=end,
                                   out=Outcome("open", True, "OPENED", ""), frame="map")


def test_an_interaction_without_a_target_gets_a_verdict_that_says_so(
        pipeline: MemoryPipeline) -> None:
    pipeline.on_interaction(ended("", "a1"))
    pipeline.advance(100.0)
    assert pipeline.analysis is not None
    verdict = pipeline.analysis.verdicts["a1"]
    assert not verdict.verified and "names no target" in verdict.reason


def test_a_target_memory_does_not_hold_gets_a_verdict_that_says_so(
        pipeline: MemoryPipeline) -> None:
    pipeline.on_interaction(ended("cabinet_7", "a2"))
    pipeline.advance(2.0)  # the window and its margin are not past yet
    assert pipeline.analysis is not None and "a2" not in pipeline.analysis.verdicts
    pipeline.advance(100.0)
    verdict = pipeline.analysis.verdicts["a2"]
    assert not verdict.verified and "'cabinet_7' is not in memory" in verdict.reason
    assert pipeline.world.revision == 0  # nothing written


def test_without_auto_analyze_an_ended_interaction_waits_to_be_asked(tmp_path: Path) -> None:
    live = MemoryPipeline(tmp_path / "memory", ("pole",), live=True,
                          sections={"analyzer": {"auto_analyze": False}})
    try:
        analysis = live.start_analysis()
        assert analysis is not None
        event = ended("", "a3")
        live.on_interaction(event)
        live.advance(100.0)
        assert "a3" not in analysis.verdicts
        analysis.on_ended(event)  # the planner asks
        live.advance(101.0)
        assert not analysis.verdicts["a3"].verified
    finally:
        live.close()
