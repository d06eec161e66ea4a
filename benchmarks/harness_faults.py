"""The propose-verify harness under a faulty reasoner: wrong facts admitted, true facts held back.

Runs ``mimir sim`` on each scenario at each fault rate, once with the full harness and once with
none (``--verifiers-off all``), one process at a time, and reads what the judge graded in each
run folder (``audit_summary.json``, ``audit.jsonl``, ``report.md``). Then, from the full-harness
runs' verdict logs, it works out what switching off one verdict kind at a time would have let
in: every fact that kind last left rejected or deferred would have been admitted as proposed
(a corrected claim is written in its corrected form, so what it proposed is not graded and
corrections are left out). That per-verdict row is a claim-level counterfactual on the same
runs, not a closed-loop run with the switch off; its task progress is not known and is left
blank.

    .venv/bin/python benchmarks/harness_faults.py --runs runs/harness [--rates 0 0.2 0.4]
        [--scenarios locked_unlocked clutter_aware_pick] [--seed 1] [--table-only]

Prints a Markdown table; ``--table-only`` rebuilds it from run folders already there.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from run_files import json_lines

_VERIFIER = re.compile(r"^(?:admit|defer|correct|reject) by (\w+)")


def run_one(root: Path, scenario: str, rate: float, seed: int, harness: str) -> Path:
    """One ``mimir sim`` run; returns its run folder (reused when it already exists)."""
    folder = root / f"{scenario}-p{rate:.1f}-{harness}"
    found = sorted(folder.glob("*/audit_summary.json"))
    if found:
        return found[-1].parent
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [str(Path(sys.executable).parent / "mimir"), "sim", "--scenario", scenario,
           "--runs", str(folder), "--quiet", "--instruction-timeout", "400",
           "--reasoner-faults", str(rate), "--fault-seed", str(seed)]
    if harness == "none":
        cmd += ["--verifiers-off", "all"]
    print(f"running {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
    subprocess.run(cmd, check=False)
    runs = sorted(p.parent for p in folder.glob("*/report.md"))
    if not runs:
        raise RuntimeError(f"{folder}: the run left no report")
    return runs[-1]


def progress(run: Path) -> str:
    """``done/total`` from the run's report."""
    match = re.search(r"Task progress \(judged from simulator state\): (\d+)/(\d+)",
                      (run / "report.md").read_text())
    return f"{match.group(1)}/{match.group(2)}" if match else "?"


def stopped_by(run: Path) -> dict[str, list[dict[str, Any]]]:
    """Per verdict kind, the graded facts it kept out of memory in this run (last verdicts)."""
    reasons = {t["event_id"]: t.get("reason", "") for t in json_lines(run / "trace.jsonl")
               if t.get("kind") == "memory"}
    last: dict[str, dict[str, Any]] = {}
    for grade in json_lines(run / "audit.jsonl"):
        last[grade["fact"]] = grade
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for grade in last.values():
        if grade["verdict"] not in ("reject", "defer"):
            continue
        match = _VERIFIER.match(reasons.get(grade["event_id"], ""))
        if match:
            out[match.group(1)].append(grade)
    return out


def row(label: str, rate: float, summaries: list[dict[str, Any]], prog: str) -> str:
    admitted = sum(s["admitted"] for s in summaries)
    wrong = sum(s["wrong_admitted"] for s in summaries)
    true = sum(s["true_facts"] for s in summaries)
    held = sum(s["true_held"] for s in summaries)
    faults = sum(s.get("faults", 0) for s in summaries)
    refutable = sum(s.get("refutable_faults", 0) for s in summaries)
    wrong_pct = f"{100 * wrong / admitted:.1f}% ({wrong}/{admitted})" if admitted else "-"
    held_pct = f"{100 * held / true:.1f}% ({held}/{true})" if true else "-"
    return (f"| {label} | {rate:.1f} | {faults} ({refutable}/{faults - refutable}) | "
            f"{wrong_pct} | {held_pct} | {prog} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=Path("runs/harness"))
    parser.add_argument("--rates", type=float, nargs="+", default=[0.0, 0.2, 0.4])
    parser.add_argument("--scenarios", nargs="+",
                        default=["locked_unlocked", "clutter_aware_pick"])
    parser.add_argument("--seed", type=int, default=1, help="seed of the reasoner faults")
    parser.add_argument("--table-only", action="store_true")
    args = parser.parse_args(argv)
    lines = ["| harness | p | faults (refutable/not) | wrong facts admitted | "
             "true facts deferred or rejected | task progress |",
             "| --- | --- | --- | --- | --- | --- |"]
    for rate in args.rates:
        full_runs: list[Path] = []
        for harness in ("full", "none"):
            runs = []
            for scenario in args.scenarios:
                folder = args.runs / f"{scenario}-p{rate:.1f}-{harness}"
                if args.table_only:
                    found = sorted(p.parent for p in folder.glob("*/audit_summary.json"))
                    if not found:
                        continue
                    runs.append(found[-1])
                else:
                    runs.append(run_one(args.runs, scenario, rate, args.seed, harness))
            if not runs:
                continue
            summaries = [json.loads((r / "audit_summary.json").read_text()) for r in runs]
            prog = " + ".join(progress(r) for r in runs)
            lines.append(row("full" if harness == "full" else "none", rate, summaries, prog))
            if harness == "full":
                full_runs = runs
        # each verdict kind off in turn: what it stopped is admitted as proposed
        stopped: dict[str, list[dict[str, Any]]] = defaultdict(list)
        base = [json.loads((r / "audit_summary.json").read_text()) for r in full_runs]
        for run in full_runs:
            for kind, grades in stopped_by(run).items():
                stopped[kind] += grades
        for kind in sorted(stopped):
            extra = stopped[kind]
            summary = {
                "admitted": sum(s["admitted"] for s in base)
                + sum(g["truth"] is not None for g in extra),
                "wrong_admitted": sum(s["wrong_admitted"] for s in base)
                + sum(g["truth"] is False for g in extra),
                "true_facts": sum(s["true_facts"] for s in base),
                "true_held": sum(s["true_held"] for s in base)
                - sum(g["truth"] is True for g in extra),
                "faults": sum(s.get("faults", 0) for s in base),
                "refutable_faults": sum(s.get("refutable_faults", 0) for s in base),
            }
            lines.append(row(f"without `{kind}` (counterfactual)", rate, [summary], ""))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
