"""The planner trace file: one JSON line per planner call, bounded, never stopping the robot."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from mimir_planner.trace import TRACE_FILE, PlannerTrace, read_trace


def test_records_are_appended_and_read_back_in_order(tmp_path: Path) -> None:
    trace = PlannerTrace(tmp_path)
    for call in range(1, 4):
        assert trace.append({"call": call, "score": 0.5, "plan": [{"primitive": "open"}]})
    assert [r["call"] for r in read_trace(tmp_path / TRACE_FILE)] == [1, 2, 3]


def test_non_finite_numbers_are_written_as_null(tmp_path: Path) -> None:
    PlannerTrace(tmp_path).append({"score": math.nan, "nested": [math.inf, 1.0]})
    line = (tmp_path / TRACE_FILE).read_text()
    assert "NaN" not in line and "Infinity" not in line
    assert json.loads(line) == {"score": None, "nested": [None, 1.0]}


def test_the_file_is_bounded_and_keeps_the_newest_steps(tmp_path: Path) -> None:
    trace = PlannerTrace(tmp_path, max_bytes=2_000)
    for call in range(200):
        trace.append({"call": call, "detail": "x" * 50})
    current = tmp_path / TRACE_FILE
    assert current.stat().st_size <= 2_000
    assert (tmp_path / (TRACE_FILE + ".1")).stat().st_size <= 2_000
    assert read_trace(current)[-1]["call"] == 199


def test_a_folder_that_cannot_be_written_loses_the_record_not_the_run(tmp_path: Path) -> None:
    trace = PlannerTrace(tmp_path / "gone" / "deeper")
    assert trace.append({"call": 1}) is False


def test_damaged_lines_are_skipped_and_a_missing_file_is_empty(tmp_path: Path) -> None:
    assert read_trace(tmp_path / TRACE_FILE) == []
    (tmp_path / TRACE_FILE).write_text('{"call": 1}\nnot json\n[1, 2]\n{"call": 2')
    assert read_trace(tmp_path / TRACE_FILE) == [{"call": 1}]


def test_a_bound_that_is_not_positive_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        PlannerTrace(tmp_path, max_bytes=0)
