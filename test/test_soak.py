"""The soak benchmark's scenario and its pass/fail rules (benchmarks/soak.py; the hour itself
runs under ``make soak``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from bench_modules import load_benchmark

from mimir_sim.layouts import generate_layout
from mimir_sim.scenario import load_scenario

soak = load_benchmark("soak")


def _proc(pid: int, rss_mib: float, fds: int = 20, threads: int = 10) -> dict[str, int]:
    return {"pid": pid, "rss_kib": int(rss_mib * 1024), "fds": fds, "threads": threads}


def _samples(minutes: int, **series: Any) -> list[dict[str, Any]]:
    """One sample a minute; ``series`` maps a process name to a function of the minute giving
    its figures; events and database bytes grow alike."""
    return [{"minute": float(m), "procs": {name: f(m) for name, f in series.items()},
             "events": 100 * m, "db_bytes": 4096 + 300 * 100 * m, "keyframe_bytes": 0,
             "instructions": m, "done": m // 2, "drops": {"segmentation": 3}}
            for m in range(minutes + 1)]


def test_the_soak_scenario_loads_and_swaps_the_two_objects_each_round(tmp_path: Path) -> None:
    path = tmp_path / "soak.yaml"
    path.write_text(yaml.safe_dump(soak.soak_scenario(3), sort_keys=False))
    layout = generate_layout(load_scenario(str(path)), 1000)
    assert len(layout.instructions) == 6
    assert layout.instructions[0].moves == ()
    banana = [{m.object: m.fixture for m in layout.instructions[i].moves} for i in (2, 4)]
    assert banana[0]["banana_1"] == banana[1]["ketchup_1"]
    assert banana[0]["ketchup_1"] == banana[1]["banana_1"]
    assert banana[0]["banana_1"] != banana[0]["ketchup_1"]
    # the instruction after each move starts from the layout's start pose
    assert {i.start_at for i in layout.instructions[1:]} == {layout.start_at}


def test_flat_processes_and_proportional_databases_pass() -> None:
    samples = _samples(30, planner=lambda m: _proc(7, 300 + 0.5 * m),
                       scene_graph=lambda m: _proc(8, 200, fds=20 + m % 3))
    v = soak.verdict(samples, warmup_min=10)
    assert v.passed, soak.table(v, 10)
    assert v.instructions == 30 and v.done == 15
    assert v.bytes_per_event == (300.0, 300.0)
    assert "PASS" in soak.table(v, 10)[-1]


@pytest.mark.parametrize(("series", "why"), [
    (lambda m: _proc(7, 300 if m < 10 else 300 + 4 * (m - 10)), "RSS grew"),
    (lambda m: _proc(7, 300, fds=20 + m), "descriptors rose"),
    (lambda m: _proc(7, 300, threads=10 + m // 2), "threads rose"),
    (lambda m: _proc(7 if m < 20 else 9, 300), "started again"),
])
def test_a_leaking_or_restarted_process_fails(series: Any, why: str) -> None:
    v = soak.verdict(_samples(30, planner=series), warmup_min=10)
    assert not v.passed
    assert any(why in reason for reason in v.processes[0].why)


def test_growth_during_the_warm_up_is_not_held_against_a_process() -> None:
    v = soak.verdict(_samples(30, planner=lambda m: _proc(7, 100 + 20 * min(m, 10))),
                     warmup_min=10)
    assert v.passed


def test_databases_that_grow_without_events_fail() -> None:
    samples = _samples(30, planner=lambda m: _proc(7, 300))
    for s in samples[21:]:  # the second half of minutes 10-30 grows ten times as fast
        s["db_bytes"] += 3_000 * 100 * (s["minute"] - 20)
    v = soak.verdict(samples)
    assert not v.database_ok and not v.passed


def test_no_samples_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="no samples"):
        soak.verdict([])


def test_analyse_without_samples_is_a_usage_error(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert soak.main(["--analyse", str(tmp_path)]) == 2
    assert "no samples" in capsys.readouterr().err
