"""Trial specs, their folders and what a trial folder holds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from eval_helpers import finish_trial

from mimir.evaluation.methods import EvalConfigError, Method
from mimir.evaluation.trials import (
    IN_PROCESS,
    NODES,
    TrialFileError,
    TrialSpec,
    read_trial,
    trial_specs,
)

SG = Method(name="sg", label="SG", interaction=False, keyframes=False)
FULL = Method(name="full", label="full")


def test_a_trial_runs_in_its_own_folder_with_its_methods_switches(tmp_path: Path) -> None:
    spec = TrialSpec("locked_unlocked", SG, 1003, "ideal", 0.5)
    assert spec.folder(tmp_path) == tmp_path / "sg" / "scale-0.5" / "seed-1003"
    options = spec.options(tmp_path)
    assert options.run_root / options.run_name == spec.folder(tmp_path)
    assert options.seed == 1003 and options.noise_profile == "ideal"
    assert options.extra_params["planner"] == {"analyze": False, "use_keyframes": False,
                                               "representation": "scene_graph"}
    assert options.quiet


def test_trial_json_round_trips_and_bad_ones_are_refused() -> None:
    spec = TrialSpec("long_horizon", FULL, 1000)
    assert TrialSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec
    broken = spec.to_json()
    del broken["method"]
    with pytest.raises(TrialFileError, match=r"trial\.json"):
        TrialSpec.from_json(broken)
    with pytest.raises(TrialFileError, match=r"trial\.json"):
        TrialSpec.from_json({**spec.to_json(), "colour": "red"})


@pytest.mark.parametrize(("seed", "scale"), [(-1, 1.0), (1000, -0.5), (1000, float("nan"))])
def test_bad_seeds_and_scales_are_refused(seed: int, scale: float) -> None:
    with pytest.raises(EvalConfigError):
        TrialSpec("locked_unlocked", FULL, seed, noise_scale=scale)


def test_specs_are_seed_major_and_count_every_method_and_scale() -> None:
    specs = trial_specs("locked_unlocked", [FULL, SG], trials=2, first_seed=1000,
                        profile="realistic", noise_scales=[0.0, 1.0], step_budget=12,
                        vlm_backend="offline", instruction_timeout_s=600.0)
    assert [s.key for s in specs[:4]] == [
        "full/scale-0/seed-1000-in-process", "sg/scale-0/seed-1000-in-process",
        "full/scale-1/seed-1000-in-process", "sg/scale-1/seed-1000-in-process"]
    assert len(specs) == 8 and {s.seed for s in specs} == {1000, 1001}
    assert all(s.mode == IN_PROCESS and s.options(Path("e")).in_process for s in specs)
    with pytest.raises(EvalConfigError, match="--trials"):
        trial_specs("locked_unlocked", [FULL], trials=0, first_seed=1000, profile="ideal",
                    noise_scales=[1.0], step_budget=12, vlm_backend="offline",
                    instruction_timeout_s=600.0)


def test_a_node_subsample_reruns_the_first_layouts_as_the_node_graph() -> None:
    common: dict[str, Any] = {"first_seed": 1000, "profile": "realistic", "noise_scales": [1.0],
                              "step_budget": 12, "vlm_backend": "offline",
                              "instruction_timeout_s": 600.0}
    specs = trial_specs("locked_unlocked", [FULL, SG], trials=3, nodes=1, **common)
    nodes = [s for s in specs if s.mode == NODES]
    assert [s.key for s in nodes] == ["full/scale-1/seed-1000", "sg/scale-1/seed-1000"]
    assert not any(s.options(Path("e")).in_process for s in nodes)
    assert len(specs) == 8 and len({s.key for s in specs}) == 8
    # every trial as the node graph: the folders of evaluations made before modes existed
    old = trial_specs("locked_unlocked", [FULL], trials=2, mode=NODES, **common)
    assert [s.key for s in old] == ["full/scale-1/seed-1000", "full/scale-1/seed-1001"]
    with pytest.raises(EvalConfigError, match="--nodes"):
        trial_specs("locked_unlocked", [FULL], trials=2, nodes=3, **common)
    with pytest.raises(EvalConfigError, match="--nodes"):
        trial_specs("locked_unlocked", [FULL], trials=2, nodes=-1, **common)
    with pytest.raises(EvalConfigError, match="already runs as the node graph"):
        trial_specs("locked_unlocked", [FULL], trials=2, nodes=1, mode=NODES, **common)
    with pytest.raises(EvalConfigError, match="runs as one of"):
        TrialSpec("locked_unlocked", FULL, 1000, mode="threads")


def test_a_trial_file_without_a_mode_ran_the_node_graph() -> None:
    data = TrialSpec("locked_unlocked", FULL, 1000, mode=IN_PROCESS).to_json()
    assert TrialSpec.from_json(data).mode == IN_PROCESS
    del data["mode"]
    assert TrialSpec.from_json(data).mode == NODES


def test_reading_finished_failed_and_corrupt_trials(tmp_path: Path) -> None:
    spec = TrialSpec("locked_unlocked", FULL, 1000)
    assert not read_trial(spec, tmp_path).finished
    folder = spec.folder(tmp_path)
    folder.mkdir(parents=True)
    (folder / "error.json").write_text(json.dumps({"error": "node planner died"}))
    held = read_trial(spec, tmp_path)
    assert not held.finished and held.error == "node planner died"
    finish_trial(spec, tmp_path, (1.0, 0.5))
    done = read_trial(spec, tmp_path)
    assert done.finished and done.progress == pytest.approx(0.75)
    assert [r["family"] for r in done.instructions] == ["finding", "finding"]
    (folder / "results.json").write_text("{not json")
    with pytest.raises(TrialFileError, match="not JSON"):
        read_trial(spec, tmp_path)
    (folder / "results.json").write_text(json.dumps({"version": 99, "instructions": []}))
    with pytest.raises(TrialFileError, match="version"):
        read_trial(spec, tmp_path)
    (folder / "results.json").write_text(json.dumps({"version": 1, "instructions": [{}]}))
    with pytest.raises(TrialFileError, match="judged"):
        read_trial(spec, tmp_path)
