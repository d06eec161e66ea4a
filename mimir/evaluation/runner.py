"""Run an evaluation's trials, in parallel and resumably.

Each trial is a process of its own (:mod:`mimir.evaluation.trial`) whose node graph lives in a
ROS domain claimed for it (:mod:`mimir.ros.domains`), so parallel graphs never see each other.
Finished trials are read, not run again; a trial folder without results is cleared and run
from the start. ``eval.json`` in the evaluation folder records what the trials share; resuming
with other choices is refused, since the trials could no longer be compared.
"""

from __future__ import annotations

import functools
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from tqdm import tqdm

from mimir.evaluation.methods import EvalConfigError
from mimir.evaluation.trials import TrialResult, TrialSpec, read_trial
from mimir.ros.domains import claim_domain_id, release_domain_id
from mimir.sim_job import scenario_instructions

#: Seconds a trial process gets to start its graph, on top of its instructions' limits.
STARTUP_ALLOWANCE_S = 300.0
#: Seconds a trial process gets to stop its nodes after SIGTERM before it is killed.
STOP_GRACE_S = 30.0

#: The thread count of Mesa's software rasteriser (llvmpipe, what EGL renders with where no
#: GPU is). Left alone it starts a thread per core in every process; where more renderers run
#: than there are cores (more trials than cores, or trials beside other work), a frame waits
#: for its tiles' threads to be scheduled. A trial's share of the cores draws the same images.
RASTER_THREADS_VAR = "LP_NUM_THREADS"

Launch = Callable[[TrialSpec, Path, int], None]


def manifest(specs: Sequence[TrialSpec]) -> dict[str, Any]:
    """What every trial of an evaluation shares (``eval.json``)."""
    first = specs[0]
    return {"scenario": first.scenario, "profile": first.profile,
            "vlm_backend": first.vlm_backend, "step_budget": first.step_budget}


def check_manifest(root: Path, specs: Sequence[TrialSpec]) -> None:
    """Write ``eval.json``, or check that an existing one agrees with ``specs``.

    Raises:
        EvalConfigError: the folder holds an evaluation made with other shared choices, or its
            ``eval.json`` cannot be read.
    """
    settle_manifest(root, manifest(specs))


def settle_manifest(root: Path, wanted: dict[str, Any]) -> None:
    """Write ``wanted`` as ``root``'s ``eval.json``, or check that the one there agrees.

    Raises:
        EvalConfigError: it does not, or it cannot be read.
    """
    path = root / "eval.json"
    if path.is_file():
        try:
            held = json.loads(path.read_text())
        except json.JSONDecodeError as err:
            raise EvalConfigError(f"{path} is not JSON: {err}") from err
        if held != wanted:
            changed = sorted(k for k in wanted if held.get(k) != wanted[k])
            raise EvalConfigError(
                f"{root} holds an evaluation with other {', '.join(changed) or 'settings'} "
                f"({held}); give another --out or the same choices")
        return
    root.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(wanted, indent=1, sort_keys=True))


def trial_environment(domain: int, jobs: int, *, cores: int | None = None,
                      base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a trial process: ``base`` (this process's environment by default)
    with the trial's ROS domain and, unless ``base`` already sets it, the software
    rasteriser's threads limited to the trial's share of ``cores`` (this process's CPUs by
    default) among ``jobs`` trials at once.

    Raises:
        EvalConfigError: ``jobs`` or ``cores`` below one.
    """
    available = len(os.sched_getaffinity(0)) if cores is None else cores
    if jobs < 1 or available < 1:
        raise EvalConfigError(f"trials at once and cores must be at least 1, got {jobs} "
                              f"and {available}")
    env = dict(os.environ if base is None else base)
    env["ROS_DOMAIN_ID"] = str(domain)
    env.setdefault(RASTER_THREADS_VAR, str(max(1, available // jobs)))
    return env


def trial_process(spec: TrialSpec, root: Path, domain: int, *, jobs: int = 1) -> None:
    """Run ``spec`` as a child process in ROS domain ``domain``, one of ``jobs`` trials at
    once (:func:`trial_environment`); its output goes to ``trial.log`` in the trial folder. A
    process past its time limit is stopped (SIGTERM, then SIGKILL to its process group) and an
    ``error.json`` says so."""
    folder = spec.folder(root)
    env = trial_environment(domain, jobs)
    instructions = len(scenario_instructions(spec.scenario, spec.seed))
    limit = STARTUP_ALLOWANCE_S + spec.instruction_timeout_s * instructions
    with (folder / "trial.log").open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mimir.evaluation.trial", str(folder / "trial.json")],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            (folder / "error.json").write_text(json.dumps(
                {"error": f"the trial ran past {limit:.0f} s and was stopped"}))


def prepare(spec: TrialSpec, root: Path) -> None:
    """Clear what an unfinished run of ``spec`` left and write its ``trial.json``."""
    folder = spec.folder(root)
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    (folder / "trial.json").write_text(json.dumps(spec.to_json(), indent=1, sort_keys=True))


def run_trials(specs: Sequence[TrialSpec], root: Path, *, jobs: int = 1,
               launch: Launch | None = None, show_progress: bool = True
               ) -> list[TrialResult]:
    """Run every trial of ``specs`` that is not finished; the results of all, in spec order.

    Args:
        specs: the trials.
        root: the evaluation folder.
        jobs: trials run at once (each claims a ROS domain while it runs).
        launch: runs one prepared trial (the default, :func:`trial_process`, starts
            :mod:`mimir.evaluation.trial` as one of the trials run at once).
        show_progress: draw a progress bar on standard error.

    Raises:
        EvalConfigError: no trial, ``jobs`` below one, or a folder of another evaluation.
        mimir.ros.domains.NoFreeDomainError: no ROS domain is free.
    """
    if not specs:
        raise EvalConfigError("the evaluation has no trial")
    if jobs < 1:
        raise EvalConfigError(f"--jobs must be at least 1, got {jobs}")
    check_manifest(root, specs)
    results: dict[int, TrialResult] = {}
    todo = []
    for index, spec in enumerate(specs):
        held = read_trial(spec, root)
        if held.finished:
            results[index] = held
        else:
            todo.append(index)
    bar = tqdm(total=len(specs), initial=len(results), unit="trial", disable=not show_progress,
               desc=f"{specs[0].scenario}", file=sys.stderr)
    domains: queue.Queue[int] = queue.Queue()
    claimed: list[int] = []
    try:
        for _ in range(min(jobs, len(todo))):
            claimed.append(claim_domain_id(exclude=frozenset(claimed)))
            domains.put(claimed[-1])
        run = launch or functools.partial(trial_process, jobs=len(claimed))

        def run_one(index: int) -> TrialResult:
            spec = specs[index]
            domain = domains.get()
            try:
                prepare(spec, root)
                run(spec, root, domain)
            finally:
                domains.put(domain)
            result = read_trial(spec, root)
            if not result.finished and not result.error:
                # it ran to its end without a word: a failure, not a trial still to run
                error = "the trial process ended without results (see trial.log)"
                (spec.folder(root) / "error.json").write_text(json.dumps({"error": error}))
                result = read_trial(spec, root)
            return result

        with ThreadPoolExecutor(max_workers=max(1, len(claimed))) as pool:
            futures = {pool.submit(run_one, index): index for index in todo}
            for future in as_completed(futures):
                result = future.result()
                results[futures[future]] = result
                bar.set_postfix_str(f"{result.spec.key}: "
                                    + (f"{result.progress:.0%}" if result.finished
                                       else "failed"))
                bar.update(1)
    finally:
        bar.close()
        for domain in claimed:
            release_domain_id(domain)
    return [results[i] for i in range(len(specs))]
