"""The ``mimir bench memtransfer`` and ``mimir bench memtransfer-cases`` command lines."""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mimir.evaluation.memtransfer.names import CONDITIONS, MIXES, POLICIES, REPRESENTATIONS

if TYPE_CHECKING:
    from mimir.evaluation.memtransfer.protocol import Setting

CASES = "memtransfer/cases.json"


def add_parsers(subparsers: argparse._SubParsersAction[Any],
                handler: Callable[[argparse.Namespace], int]) -> None:
    """Register ``bench memtransfer`` and ``bench memtransfer-cases``; ``handler`` runs the
    chosen one (``args.bench_handler``) and turns its errors into the caller's."""
    bench = subparsers.add_parser("bench", help="benchmarks of memory representations")
    bench.set_defaults(handler=handler)
    sub = bench.add_subparsers(dest="bench_command", required=True, metavar="BENCHMARK")
    run = sub.add_parser(
        "memtransfer", help="MemTransfer: navigation cases in a warehouse under changed starts, "
        "a blocked route and mixed histories (report with Tables III-V)")
    run.add_argument("--policies", default="oracle,no_memory",
                     help=f"comma-separated reference policies ({', '.join(POLICIES)}); "
                          "empty for none")
    run.add_argument("--representations", default="",
                     help="comma-separated memory representations a model policy runs with "
                          f"({', '.join(REPRESENTATIONS)}); needs a backend")
    run.add_argument("--backend", default="", choices=("", "openai", "transformers"),
                     help="reasoning backend of the model policy (default: the reasoning "
                          "config's)")
    run.add_argument("--endpoint", default="",
                     help="OpenAI-compatible base URL (e.g. http://127.0.0.1:8000/v1)")
    run.add_argument("--model", default="", help="model name at the endpoint, or local path")
    run.add_argument("--reasoning-config", default="",
                     help="reasoning settings YAML (default: the installed reasoning.yaml)")
    run.add_argument("--image-size", type=int, default=256,
                     help="side of the rendered square views, pixels (default 256)")
    run.add_argument("--window", type=int, default=6,
                     help="steps in the model policy's working window (default 6)")
    run.add_argument("--profile", default="realistic", metavar="NAME",
                     help="sensor noise mimir's own memory is built through: ideal, realistic "
                          "(config/noise) or a profile YAML path")
    run.add_argument("--condition", action="append", choices=CONDITIONS, default=None,
                     help="a condition to run (repeat for several; default: all four)")
    run.add_argument("--demos", type=int, choices=(1, 4), default=None,
                     help="demonstrations per task in memory (default: the paper's settings)")
    run.add_argument("--start-table", action="store_true",
                     help="also run Table IV: the original start with memory from each single "
                          "demonstration start")
    run.add_argument("--mix", choices=MIXES, action="append", default=None,
                     help="the mixed condition's other-task histories (default: both)")
    run.add_argument("--runs", type=int, default=3, help="runs of every episode (default 3)")
    run.add_argument("--types", default="", help="comma-separated task types (default: all)")
    run.add_argument("--limit", type=int, default=0,
                     help="cases per task type (default: all ten)")
    run.add_argument("--jobs", type=int, default=1, help="worker processes")
    run.add_argument("--out", default="bench/memtransfer", help="output folder (resumable)")
    run.add_argument("--cases", default="", help="cases file (default: the installed one)")
    run.add_argument("--layout", default="", help="warehouse layout (default: the installed one)")
    run.add_argument("--baseline", default="",
                     help="the policy Δ and retention are measured against (default: working "
                          "when it runs, else no_memory)")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.set_defaults(bench_handler=cmd_memtransfer)
    cases = sub.add_parser("memtransfer-cases",
                           help="generate the MemTransfer cases of a seed and check them")
    cases.add_argument("--seed", type=int, default=2609)
    cases.add_argument("--out", required=True, help="JSON file to write")
    cases.add_argument("--layout", default="", help="warehouse layout (default: the installed one)")
    cases.set_defaults(bench_handler=cmd_cases)


def settings_for(args: argparse.Namespace) -> list[Setting]:
    """The settings the options ask for."""
    from mimir.evaluation.memtransfer.protocol import (  # noqa: PLC0415
        DEFAULT_SETTINGS,
        START_SETTINGS,
    )

    conditions = args.condition or list(CONDITIONS)
    mixes = args.mix or list(MIXES)
    chosen = []
    for setting in DEFAULT_SETTINGS:
        if setting.condition not in conditions:
            continue
        if args.demos is not None and setting.demos != args.demos:
            continue
        if setting.condition == "mixed" and setting.mix not in mixes:
            continue
        chosen.append(setting)
    if args.start_table:
        chosen += [s for s in START_SETTINGS if s not in chosen]
    return chosen


def cmd_memtransfer(args: argparse.Namespace) -> int:
    """Run the benchmark and write ``report.md``, ``sr.png`` and ``episodes.jsonl``."""
    from mimir.evaluation.memtransfer import report  # noqa: PLC0415
    from mimir.evaluation.memtransfer.runner import jobs_for, run_jobs  # noqa: PLC0415
    from mimir.evaluation.memtransfer.workshop import ModelSettings, Workshop  # noqa: PLC0415
    from mimir.paths import config_file  # noqa: PLC0415
    from mimir_sim.warehouse.cases import read_cases  # noqa: PLC0415
    from mimir_sim.warehouse.layout import load_layout  # noqa: PLC0415

    names = [p for p in args.policies.split(",") if p]
    representations = [r for r in args.representations.split(",") if r]
    unknown = sorted(set(names) - set(POLICIES)) + sorted(
        set(representations) - set(REPRESENTATIONS))
    if unknown or not names + representations:
        print(f"mimir bench memtransfer: unknown policies or representations {unknown}; "
              f"policies: {', '.join(POLICIES)}; representations: "
              f"{', '.join(REPRESENTATIONS)}", file=sys.stderr)
        return 2
    if args.runs < 1 or args.jobs < 1 or args.limit < 0 or args.image_size < 16 or (
            args.window < 0):
        print("mimir bench memtransfer: --runs and --jobs must be >= 1, --limit and --window "
              ">= 0, --image-size >= 16", file=sys.stderr)
        return 2
    layout = load_layout(args.layout)
    cases_path = str(config_file(CASES, args.cases))
    cases = read_cases(cases_path, layout)
    if args.types:
        types = {int(t) for t in args.types.split(",")}
        cases = [c for c in cases if c.task.type in types]
    if args.limit:
        per_type: dict[int, int] = {}
        kept = []
        for case in cases:
            per_type[case.task.type] = per_type.get(case.task.type, 0) + 1
            if per_type[case.task.type] <= args.limit:
                kept.append(case)
        cases = kept
    settings = settings_for(args)
    if not cases or not settings:
        print("mimir bench memtransfer: no case or no setting left to run", file=sys.stderr)
        return 2
    out = Path(args.out)
    model = ModelSettings(args.backend, args.reasoning_config, args.endpoint, args.model,
                          args.image_size, args.window, folder=str(out),
                          noise_profile=args.profile)
    workshop = Workshop(args.layout, cases_path, model)
    started = time.monotonic()
    for path in workshop.write_documents(representations, settings):
        print(f"wrote {path}")
    names += representations
    jobs = jobs_for(names, settings, args.runs, cases)
    outcomes = run_jobs(out, jobs, workshop, workers=args.jobs, progress=not args.no_progress)
    wanted = {job.key for job in jobs}
    outcomes = [o for o in outcomes if o.key in wanted]
    command = "mimir bench memtransfer " + shlex.join(sys.argv[3:] if len(sys.argv) > 3 else [])
    baseline = args.baseline or ("working" if "working" in names else "no_memory")
    if baseline not in names:
        baseline = names[0]
    (out / "report.md").write_text(report.markdown(outcomes, baseline=baseline,
                                                   command=command.strip()), encoding="utf-8")
    report.plot(outcomes, out / "sr.png")
    print(f"{len(outcomes)} episodes in {time.monotonic() - started:.0f} s; report: "
          f"{out / 'report.md'}")
    return 0


def cmd_cases(args: argparse.Namespace) -> int:
    """Generate the cases of a seed, check every rule on them and write them."""
    from mimir_sim.warehouse.cases import generate, violations, write_cases  # noqa: PLC0415
    from mimir_sim.warehouse.layout import load_layout  # noqa: PLC0415

    layout = load_layout(args.layout)
    cases = generate(layout, args.seed)
    broken = [f"{case.id}: {rule}" for case in cases for rule in violations(layout, case)]
    if broken:
        print("\n".join(broken), file=sys.stderr)
        return 1
    write_cases(args.out, layout, cases, args.seed)
    print(f"{len(cases)} cases written to {args.out}")
    return 0
