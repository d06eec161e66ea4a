"""Trial specs, their folders and what a trial folder holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eval_helpers import finish_trial

from mimir.evaluation.methods import EvalConfigError, Method
from mimir.evaluation.trials import TrialFileError, TrialSpec, read_trial, trial_specs

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
    assert [s.key for s in specs[:4]] == ["full/scale-0/seed-1000", "sg/scale-0/seed-1000",
                                          "full/scale-1/seed-1000", "sg/scale-1/seed-1000"]
    assert len(specs) == 8 and {s.seed for s in specs} == {1000, 1001}
    with pytest.raises(EvalConfigError, match="--trials"):
        trial_specs("locked_unlocked", [FULL], trials=0, first_seed=1000, profile="ideal",
                    noise_scales=[1.0], step_budget=12, vlm_backend="offline",
                    instruction_timeout_s=600.0)


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
