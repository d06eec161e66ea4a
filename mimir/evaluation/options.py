"""The options of ``mimir eval`` and its command-line parser (standard library only, so that
the command line starts fast)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class EvalOptions:
    """What ``mimir eval`` was asked to do (see ``mimir eval --help``)."""

    scenario: str = "locked_unlocked"
    methods: str = "full,sg_ia,sg_kf,sg"
    trials: int = 2
    first_seed: int = -1
    profile: str = "realistic"
    noise_scales: tuple[float, ...] = (1.0,)
    jobs: int = 1
    out: Path = Path("evals")
    vlm_backend: str = "offline"
    instruction_timeout_s: float = 600.0
    config: str = ""
    report_only: bool = False
    merge: Path | None = None
    pack: Path | None = None
    in_process: bool = True
    nodes: int = 0
    show_progress: bool = True
    argv: tuple[str, ...] = field(default_factory=tuple)


def add_parser(subparsers: argparse._SubParsersAction[Any],
               handler: Callable[[argparse.Namespace], int]) -> None:
    """Register the ``eval`` subcommand with its options and ``handler``."""
    evaluate = subparsers.add_parser(
        "eval", help="compare memory methods over generated layouts (report with intervals, "
        "paired tests, plots)")
    evaluate.add_argument("--scenario", default="locked_unlocked",
                          help="scenario name in config/scenarios or a scenario file")
    evaluate.add_argument("--methods", default="full,sg_ia,sg_kf,sg",
                          help="comma-separated methods of config/eval.yaml, or 'all'")
    evaluate.add_argument("--trials", type=int, default=2,
                          help="generated layouts per method (seeds --seed, --seed + 1, ...)")
    evaluate.add_argument("--seed", type=int, default=-1,
                          help="first layout seed (-1: eval.yaml's first_seed, apart from the "
                               "tests' seeds)")
    evaluate.add_argument("--profile", default="realistic", metavar="NAME",
                          help="noise profile: ideal, realistic or a profile YAML path")
    evaluate.add_argument("--noise-scale", type=float, nargs="+", default=[1.0], metavar="S",
                          help="noise scale(s); several give a plot against noise")
    evaluate.add_argument("--jobs", type=int, default=1,
                          help="trials run at once (each in its own ROS domain)")
    evaluate.add_argument("--out", default="",
                          help="evaluation folder (default: evals/<scenario>-<profile>); an "
                               "existing one is resumed")
    evaluate.add_argument("--vlm", default="offline", choices=("offline", "openai", "transformers"),
                          help="reasoning backend for the analyzer and the planner")
    evaluate.add_argument("--instruction-timeout", type=float, default=600.0,
                          help="wall-clock limit per instruction (s)")
    evaluate.add_argument("--config", default="",
                          help="evaluation file (default: the installed eval.yaml)")
    evaluate.add_argument("--in-process", action=argparse.BooleanOptionalAction, default=True,
                          help="run each trial in one process in simulation time (the "
                               "default); --no-in-process runs every trial as the node graph")
    evaluate.add_argument("--nodes", type=int, default=0, metavar="K",
                          help="also run the first K layouts of each method as the node graph; "
                               "the report compares the two modes")
    evaluate.add_argument("--report-only", action="store_true",
                          help="write the report from the trials already in --out")
    evaluate.add_argument("--merge", default="", metavar="FILE",
                          help="first add the finished trials of an archive made by --pack "
                               "(another machine's or sitting's) to --out")
    evaluate.add_argument("--pack", default="", metavar="FILE",
                          help="at the end, write the finished trials' records (results, "
                               "traces, retrieval figures; about 60 kB a trial) to this new "
                               ".tar.gz")
    evaluate.add_argument("--against", default="", metavar="FOLDER",
                          help="run nothing: pair the finished trials in --out with the same "
                               "trials (scenario, method, noise scale, seed) in FOLDER, an "
                               "evaluation of other code, and write what changed to "
                               "--out/against.md")
    evaluate.set_defaults(handler=handler)
