"""Running trials: resumed, parallel in separate ROS domains, refusing another evaluation.

The launch step is replaced by one that writes what a finished ``mimir sim`` run writes
(``results.json`` through the job's own writer); the real launch is exercised by the
end-to-end evaluation test.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from eval_helpers import finish_trial

from mimir.evaluation.methods import EvalConfigError, Method
from mimir.evaluation.runner import RASTER_THREADS_VAR, run_trials, trial_environment
from mimir.evaluation.trials import TrialSpec, read_trial, trial_specs
from mimir.ros.domains import DOMAIN_LOCKS

FULL = Method(name="full", label="full")
SG = Method(name="sg", label="SG", interaction=False, keyframes=False)


def specs(trials: int = 2, profile: str = "ideal") -> list[TrialSpec]:
    return trial_specs("locked_unlocked", [FULL, SG], trials=trials, first_seed=1000,
                       profile=profile, noise_scales=[1.0], step_budget=12,
                       vlm_backend="offline", instruction_timeout_s=600.0)


class Recorder:
    """A launch that finishes each trial and notes which ran, in which domain, how many at once."""

    def __init__(self, delay: float = 0.0) -> None:
        self.ran: list[str] = []
        self.domains: dict[str, int] = {}
        self.running = 0
        self.most = 0
        self.delay = delay
        self._lock = threading.Lock()

    def __call__(self, spec: TrialSpec, root: Path, domain: int) -> None:
        assert (spec.folder(root) / "trial.json").is_file()
        with self._lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.ran.append(spec.key)
            self.domains[spec.key] = domain
        time.sleep(self.delay)
        finish_trial(spec, root, (1.0, 0.0) if spec.method.name == "sg" else (1.0, 1.0))
        with self._lock:
            self.running -= 1


def test_every_trial_runs_once_and_results_come_in_spec_order(tmp_path: Path) -> None:
    launch = Recorder()
    results = run_trials(specs(), tmp_path, launch=launch, show_progress=False)
    assert sorted(launch.ran) == sorted(s.key for s in specs())
    assert [r.spec for r in results] == specs()
    assert [r.progress for r in results] == [1.0, 0.5, 1.0, 0.5]


def test_a_resumed_evaluation_runs_only_unfinished_trials(tmp_path: Path) -> None:
    first, *_ = specs()
    finish_trial(first, tmp_path, (0.0, 1.0))
    left = specs()[1].folder(tmp_path)
    left.mkdir(parents=True)
    (left / "trace.jsonl").write_text("half a run\n")
    launch = Recorder()
    results = run_trials(specs(), tmp_path, launch=launch, show_progress=False)
    assert first.key not in launch.ran and len(launch.ran) == 3
    assert results[0].progress == 0.5  # read, not run again
    assert not (left / "trace.jsonl").exists()  # the half run was cleared, then run anew
    assert (left / "results.json").is_file()


def test_parallel_trials_get_different_domains_and_give_them_back(tmp_path: Path) -> None:
    launch = Recorder(delay=0.3)
    run_trials(specs(), tmp_path, jobs=2, launch=launch, show_progress=False)
    assert launch.most == 2
    at_once = {launch.domains[s.key] for s in specs()}
    assert len(at_once) == 2
    for domain in at_once:
        assert not (DOMAIN_LOCKS / f"{domain}.pid").exists()


def test_another_evaluations_folder_is_refused(tmp_path: Path) -> None:
    run_trials(specs(1), tmp_path, launch=Recorder(), show_progress=False)
    with pytest.raises(EvalConfigError, match="profile"):
        run_trials(specs(1, profile="realistic"), tmp_path, launch=Recorder(),
                   show_progress=False)


def test_bad_runner_arguments(tmp_path: Path) -> None:
    with pytest.raises(EvalConfigError, match="no trial"):
        run_trials([], tmp_path, launch=Recorder(), show_progress=False)
    with pytest.raises(EvalConfigError, match="--jobs"):
        run_trials(specs(1), tmp_path, jobs=0, launch=Recorder(), show_progress=False)


def test_a_trial_that_leaves_no_results_is_reported_unfinished(tmp_path: Path) -> None:
    def crash(spec: TrialSpec, root: Path, domain: int) -> None:
        (spec.folder(root) / "error.json").write_text('{"error": "node analyzer died"}')

    results = run_trials(specs(1), tmp_path, launch=crash, show_progress=False)
    assert [r.finished for r in results] == [False, False]
    assert results[0].error == "node analyzer died"
    assert all(r.failed for r in results)


def test_a_trial_that_ends_without_results_or_a_word_is_a_failure(tmp_path: Path) -> None:
    """A trial process that ended leaving nothing failed; it is not a trial still to run."""
    def silent(spec: TrialSpec, root: Path, domain: int) -> None:
        return None

    results = run_trials(specs(1), tmp_path, launch=silent, show_progress=False)
    assert all(r.failed and "ended without results" in r.error for r in results)
    # read back later (a report of the folder), they stay failures
    again = [read_trial(r.spec, tmp_path) for r in results]
    assert all(r.failed for r in again)


def test_a_trial_gets_its_share_of_the_cores_for_software_rendering() -> None:
    base = {"PATH": "/usr/bin", "ROS_DOMAIN_ID": "0"}
    env = trial_environment(7, jobs=2, cores=2, base=base)
    assert env == {"PATH": "/usr/bin", "ROS_DOMAIN_ID": "7", RASTER_THREADS_VAR: "1"}
    assert base == {"PATH": "/usr/bin", "ROS_DOMAIN_ID": "0"}  # the caller's is left alone
    assert trial_environment(7, jobs=1, cores=2, base=base)[RASTER_THREADS_VAR] == "2"
    assert trial_environment(7, jobs=3, cores=8, base=base)[RASTER_THREADS_VAR] == "2"
    assert trial_environment(7, jobs=4, cores=2, base=base)[RASTER_THREADS_VAR] == "1"


def test_a_thread_count_the_caller_set_is_kept() -> None:
    env = trial_environment(3, jobs=2, cores=2, base={RASTER_THREADS_VAR: "4"})
    assert env[RASTER_THREADS_VAR] == "4"


def test_no_share_of_no_cores() -> None:
    with pytest.raises(EvalConfigError, match="at least 1"):
        trial_environment(3, jobs=0, cores=2, base={})
    with pytest.raises(EvalConfigError, match="at least 1"):
        trial_environment(3, jobs=2, cores=0, base={})
