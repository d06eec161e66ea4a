"""Two evaluations of the same trials paired (``mimir eval --against``): per-trial changes,
the first primitive where two runs part, totals, and the folders that cannot be paired."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eval_helpers import finish_trial

from mimir.cli import main
from mimir.evaluation.methods import Method
from mimir.evaluation.paired import PairingError, compare, report_lines
from mimir.evaluation.trials import IN_PROCESS, TrialFileError, TrialSpec

FULL = Method(name="full", label="full")
SG = Method(name="sg", label="SG", interaction=False, keyframes=False)


def _call(instruction: int, primitive: str, target: str, outcome: str) -> dict[str, object]:
    return {"t": 1.0, "kind": "primitive", "text": f"    -> {primitive}({target})",
            "instruction": instruction, "interaction_id": "0a1b2c3d4e5f",
            "primitive": primitive, "target": target, "success": outcome != "NO_MOTION",
            "outcome": outcome}


OPENS = [_call(0, "move_to", "cabinet_1", "REACHED"), _call(0, "open", "cabinet_1", "OPENED"),
         _call(1, "move_to", "cabinet_2", "REACHED"), _call(1, "open", "cabinet_2", "OPENED")]


def trial(root: Path, method: Method, seed: int, outcomes: tuple[float, ...],
          calls: list[dict[str, object]], *, robot: str = "a\n", wrong: int | None = 0,
          scenario: str = "locked_unlocked") -> Path:
    """A finished in-process trial with its primitive trace, robot trace and audit count."""
    spec = TrialSpec(scenario, method, seed, "ideal", mode=IN_PROCESS)
    finish_trial(spec, root, outcomes, trace=[{"t": 0.5, "kind": "step", "text": "step 1"},
                                              *calls])
    folder = spec.folder(root)
    (folder / "robot_trace.jsonl").write_text(robot)
    if wrong is not None:
        (folder / "audit_summary.json").write_text(json.dumps({"admitted": 4,
                                                               "wrong_admitted": wrong}))
    return folder


def test_pairs_report_progress_wins_losses_and_where_the_runs_part(tmp_path: Path) -> None:
    before, after = tmp_path / "before", tmp_path / "after"
    trial(before, FULL, 1000, (1.0, 0.0, 1.0), OPENS)
    trial(after, FULL, 1000, (1.0, 0.0, 1.0), OPENS)
    trial(before, SG, 1000, (1.0, 1.0, 0.5), OPENS, wrong=1)
    stuck = [*OPENS[:3], _call(1, "open", "cabinet_2", "NO_MOTION")]
    trial(after, SG, 1000, (1.0, 0.0, 1.0), stuck, robot="b\n", wrong=2)
    trial(before, FULL, 1001, (1.0, 1.0, 1.0), OPENS)  # only before finished this one
    found = compare(before, after)
    assert [p.key for p in found.pairs] == [
        "locked_unlocked: full/scale-1/seed-1000-in-process",
        "locked_unlocked: sg/scale-1/seed-1000-in-process"]
    assert found.only_before == ("locked_unlocked: full/scale-1/seed-1001-in-process",)
    assert found.only_after == ()
    same, changed = found.pairs
    assert same.same_robot_trace is True and same.first_change == ""
    assert changed.same_robot_trace is False
    assert changed.first_change == (
        "call 4: instruction 1, open(cabinet_2) OPENED -> instruction 1, open(cabinet_2) "
        "NO_MOTION")
    assert [r["index"] for r in changed.changed_instructions(won=True)] == [2]
    assert [r["index"] for r in changed.changed_instructions(won=False)] == [1]
    text = "\n".join(report_lines(found, "before", "after"))
    assert ("| locked_unlocked: sg/scale-1/seed-1000-in-process | 83.3% -> 66.7% | 2 -> 2 | "
            "15 -> 15 | 1 -> 2 | differs |") in text
    assert "2 pairs: 4 -> 4 instructions done of 6, mean progress 75.0% -> 66.7%" in text
    assert "- lost: 1 (finding) instruction 1" in text
    assert "- won: 2 (memory) instruction 2" in text
    assert "Finished only in before: locked_unlocked: full/scale-1/seed-1001-in-process." in text
    # the unchanged trial has no story of its own
    assert "## locked_unlocked: full/scale-1/seed-1000-in-process" not in text


def test_a_run_that_goes_on_where_the_other_stopped_is_named(tmp_path: Path) -> None:
    before, after = tmp_path / "before", tmp_path / "after"
    trial(before, FULL, 1000, (1.0,), OPENS[:2])
    trial(after, FULL, 1000, (1.0,), OPENS)
    (pair,) = compare(before, after).pairs
    assert pair.first_change == "call 3: only after ran on (instruction 1, move_to(cabinet_2) " \
        "REACHED)"


def test_scenarios_with_the_same_method_and_seed_are_different_trials(tmp_path: Path) -> None:
    before, after = tmp_path / "before", tmp_path / "after"
    trial(before, FULL, 1000, (1.0,), OPENS, scenario="locked_unlocked")
    trial(before / "other", FULL, 1000, (1.0,), OPENS, scenario="clutter_aware_pick")
    trial(after, FULL, 1000, (0.0,), OPENS, scenario="clutter_aware_pick")
    found = compare(before, after)
    assert [p.key for p in found.pairs] == ["clutter_aware_pick: full/scale-1/seed-1000-in-process"]
    assert found.only_before == ("locked_unlocked: full/scale-1/seed-1000-in-process",)


def test_trials_without_robot_trace_or_audit_pair_with_those_left_unknown(tmp_path: Path) -> None:
    before, after = tmp_path / "before", tmp_path / "after"
    trial(before, FULL, 1000, (1.0,), OPENS, wrong=None)
    folder = trial(after, FULL, 1000, (1.0,), OPENS)
    (folder / "robot_trace.jsonl").unlink()
    (pair,) = compare(before, after).pairs
    assert pair.same_robot_trace is None and pair.before.wrong_admitted is None
    assert "| 1 -> 1 | 4 -> 4 | - -> 0 | - |" in "\n".join(
        report_lines(compare(before, after), "b", "a"))


# -- bad input --------------------------------------------------------------------------------
def test_folders_that_cannot_be_paired_are_refused(tmp_path: Path) -> None:
    before, after = tmp_path / "before", tmp_path / "after"
    with pytest.raises(PairingError, match="is not a folder"):
        compare(before, after)
    trial(before, FULL, 1000, (1.0,), OPENS)
    trial(after, FULL, 1001, (1.0,), OPENS)
    with pytest.raises(PairingError, match=r"\(1 finished trials\) .* share no trial"):
        compare(before, after)
    trial(after / "again", FULL, 1001, (1.0,), OPENS)
    with pytest.raises(PairingError, match="seed-1001-in-process twice"):
        compare(before, after)


def test_unreadable_trial_files_are_typed_errors_that_name_the_file(tmp_path: Path) -> None:
    before, after = tmp_path / "before", tmp_path / "after"
    folder = trial(before, FULL, 1000, (1.0,), OPENS)
    trial(after, FULL, 1000, (1.0,), OPENS)
    (folder / "results.json").write_text("{not json")
    with pytest.raises(TrialFileError, match=r"results\.json is not JSON"):
        compare(before, after)
    trial(before, FULL, 1000, (1.0,), [{"kind": "primitive", "instruction": 0}])
    with pytest.raises(TrialFileError, match=r"trace\.jsonl: a primitive record lacks 'primitive'"):
        compare(before, after)
    trial(before, FULL, 1000, (1.0,), OPENS)
    (folder / "audit_summary.json").write_text('{"admitted": 3}')
    with pytest.raises(TrialFileError, match="no count of wrong facts admitted"):
        compare(before, after)
    # a trace line cut by a killed process is passed over, as the evaluation report does
    with (folder / "trace.jsonl").open("a") as out:
        out.write('{"kind": "primi')
    (folder / "audit_summary.json").write_text('{"wrong_admitted": 0}')
    assert compare(before, after).pairs[0].first_change == ""


def test_the_command_prints_and_writes_the_comparison_and_refuses_bad_folders(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before, after = tmp_path / "before", tmp_path / "after"
    trial(before, FULL, 1000, (1.0, 1.0), OPENS)
    trial(after, FULL, 1000, (1.0, 0.0), OPENS)
    assert main(["eval", "--against", str(before), "--out", str(after)]) == 0
    out = capsys.readouterr().out
    assert "1 pair: 2 -> 1 instructions done of 2" in out
    assert (after / "against.md").read_text().startswith(f"# {after} against {before}")
    assert main(["eval", "--against", str(tmp_path / "none"), "--out", str(after)]) == 2
    assert "none is not a folder of evaluation trials" in capsys.readouterr().err
