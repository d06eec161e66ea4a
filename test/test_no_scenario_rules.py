"""No rule in the robot's code may name what a scenario holds.

A planner or memory that knew the scenario files' fixture or object ids, or their instruction
sentences, would score on the evaluation's layouts for the wrong reason. This test collects
every id and sentence of ``config/scenarios`` and looks for them as string literals (ids) or
text (sentences) in the cores and the nodes.
"""

from __future__ import annotations

import re
from pathlib import Path

from mimir_sim.scenario import load_scenario

REPO = Path(__file__).resolve().parents[1]
ROBOT_CODE = ("mimir_planner", "mimir_memory", "mimir_perception", "mimir_robot", "mimir/nodes")


def scenario_names() -> tuple[set[str], set[str]]:
    ids: set[str] = set()
    sentences: set[str] = set()
    for path in sorted((REPO / "config" / "scenarios").glob("*.yaml")):
        if path.name == "catalog.yaml":
            continue
        scenario = load_scenario(path)
        ids |= {f.id for f in scenario.fixtures} | {o.id for o in scenario.objects}
        sentences |= {i.text for i in scenario.instructions}
    return ids, sentences


def offences(sources: dict[str, str], ids: set[str], sentences: set[str]) -> list[str]:
    quoted = re.compile(r"""["']([A-Za-z0-9_]+)["']""")
    found = []
    for name, text in sources.items():
        found += [f"{name}: id {m}" for m in sorted(set(quoted.findall(text)) & ids)]
        found += [f"{name}: sentence {s!r}" for s in sorted(sentences) if s in text]
    return found


def test_the_scenarios_name_things_to_look_for() -> None:
    ids, sentences = scenario_names()
    assert {"cab_1", "ketchup_1"} <= ids and len(sentences) > 10


def test_the_check_finds_a_planted_rule() -> None:
    ids, sentences = scenario_names()
    planted = {"planner.py": 'if target == "ketchup_1":\n    return "cabinet_3"\n'}
    assert offences(planted, ids, sentences) == ["planner.py: id ketchup_1"]


def test_no_core_or_node_names_a_scenarios_ids_or_sentences() -> None:
    ids, sentences = scenario_names()
    sources = {str(p.relative_to(REPO)): p.read_text(encoding="utf-8")
               for root in ROBOT_CODE for p in sorted((REPO / root).rglob("*.py"))}
    assert len(sources) > 100
    assert offences(sources, ids, sentences) == []
