"""End to end: memory follows an object the scenario moves between two finds.

``mimir sim --scenario moved_object`` runs every node over real DDS with the offline reasoner.
The first instruction finds the mug on the first counter; before the second the scenario (not
the robot) moves it to the other counter. The cameras, looking at the old place, find it empty:
memory logs the misses and marks the old belief "no longer at this place" (an event; the node
stays), the planner does not complete on that belief, goes looking, and completes on the mug
seen at its new place, which memory learns as a node of its own.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sim_runs import finished_run

from mimir_memory.world import WorldMemory

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.timeout(900),
              pytest.mark.usefixtures("one_simulation_at_a_time")]


def test_memory_marks_the_old_place_stale_and_learns_the_new_one(tmp_path: Path) -> None:
    run = finished_run("moved_object", tmp_path)
    assert "Task progress (judged from simulator state): 2/2" in (run / "report.md").read_text()

    trace = [json.loads(line) for line in (run / "trace.jsonl").read_text().splitlines()]
    results = [t["text"] for t in trace if t["kind"] == "result"]
    assert len(results) == 2
    first_name = results[0].split("names: ")[1].split(" ")[0]
    second_name = results[1].split("names: ")[1].split(" ")[0]
    # the second find names the mug seen at its new place, not the remembered one
    assert second_name != first_name, results

    world = WorldMemory.open(run / "memory" / "world.db", readonly=True)
    try:
        old, new = world.node(first_name), world.node(second_name)
        assert old.label == new.label == "mug"
        # the old place: missed by the cameras, marked no longer there, kept in memory
        misses = world.why(first_name, "misses")
        assert len(misses) >= 3 and all(e.kind.value == "observation_missed" for e in misses)
        stale = old.properties["at_last_place"]
        assert stale.value is False and stale.source == "perception"
        # the new place is over a metre away, and nothing says the new node is gone
        gap = sum((a - b) ** 2 for a, b in zip(old.centroid, new.centroid, strict=True)) ** 0.5
        assert gap > 1.0, (old.centroid, new.centroid)
        assert "at_last_place" not in new.properties or new.properties["at_last_place"].value
    finally:
        world.close()
