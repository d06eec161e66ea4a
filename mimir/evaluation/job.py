"""``mimir eval``: plan the trials, run the missing ones, write the report."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

from mimir.evaluation.archive import ArchiveError, merge, pack
from mimir.evaluation.methods import EvalConfigError, load_eval_config
from mimir.evaluation.options import EvalOptions
from mimir.evaluation.report import write_report
from mimir.evaluation.runner import check_manifest, run_trials
from mimir.evaluation.trials import IN_PROCESS, NODES, read_trial, trial_specs
from mimir.sim_job import SimJobOptions, check_options, scenario_instructions


def run_evaluation(options: EvalOptions, say: Callable[[str], None] = lambda _text: None
                   ) -> Path:
    """Run (or, with ``report_only``, only read) the evaluation; the path of its report.

    With ``merge`` the archive's trials join the folder first (they are not run again); with
    ``pack`` the finished trials are archived after the report (:mod:`.archive`). ``say``
    is told what merging and packing did.

    Raises:
        EvalConfigError: a bad choice (unknown method, no trial, a folder of another
            evaluation).
        ArchiveError: an archive to merge that is not one or disagrees with the folder, or a
            pack into an existing file.
        mimir.sim_report.SimJobError: the scenario, profile or backend cannot be used.
    """
    config = load_eval_config(options.config or None)
    methods = config.pick(options.methods)
    first_seed = config.first_seed if options.first_seed < 0 else options.first_seed
    check_options(SimJobOptions(scenario=options.scenario, vlm_backend=options.vlm_backend,
                                step_budget=config.step_budget,
                                instruction_timeout_s=options.instruction_timeout_s,
                                noise_profile=options.profile, in_process=options.in_process))
    scenario_instructions(options.scenario, first_seed)
    if not options.noise_scales:
        raise EvalConfigError("give at least one --noise-scale")
    specs = trial_specs(options.scenario, methods, trials=options.trials,
                        first_seed=first_seed, profile=options.profile,
                        noise_scales=list(options.noise_scales),
                        step_budget=config.step_budget, vlm_backend=options.vlm_backend,
                        instruction_timeout_s=options.instruction_timeout_s,
                        mode=IN_PROCESS if options.in_process else NODES, nodes=options.nodes)
    root = options.out
    if options.pack is not None and options.pack.exists():
        raise ArchiveError(f"{options.pack} exists; give a new file for the archive")
    if options.merge is not None:
        # the folder takes this command's settings first, so an archive made with others is
        # refused before any of its trials is written
        check_manifest(root, specs)
        added, kept = merge(options.merge, root)
        say(f"merged {options.merge}: {added} trials added, {kept} finished here already")
    if options.report_only:
        results = [read_trial(spec, root) for spec in specs]
    else:
        results = run_trials(specs, root, jobs=options.jobs,
                             show_progress=options.show_progress)
    command = shlex.join(options.argv) if options.argv else ""
    report = write_report(results, methods, root, command=command)
    if options.pack is not None:
        count = pack(results, root, options.pack)
        say(f"packed {count} finished trials into {options.pack}")
    return report

