"""Task progress over generated layouts and noise levels, beside memory-free baselines.

Runs ``mimir sim`` (the node graph, realistic profile) on each scenario for ``--layouts``
generated layouts (seeds ``--first-seed`` onwards: evaluation seeds, apart from the ones the tests
use) at each noise scale, one process at a time, and reads each run folder:

- task progress: instructions judged done (``report.md``), pooled per scenario and scale, with a
  95% Wilson interval;
- missed grasps: primitives that ended ``MISSED_GRASP`` (``trace.jsonl``);
- localisation error: the judge's comparison of the robot's localised base pose with simulator
  truth (``localisation.json``, written by the bridge);
- wall time of the run (``report.md``).

Beside them, the sanity baselines of :mod:`mimir_sim.baselines` (fixed order, nearest first,
random) scored on the same layouts with their chance level: a memory-free policy far above
chance means the generator gives the answer away.

    .venv/bin/python benchmarks/noise_sweep.py --runs runs/noise [--layouts 20]
        [--scales 0 0.5 1 2] [--scenarios locked_unlocked clutter_aware_pick]
        [--first-seed 1000] [--table-only] [--plot docs/noise_sweep.svg]

Prints Markdown tables; ``--table-only`` rebuilds them from run folders already there. A full
sweep (2 scenarios x 20 layouts x 4 scales, about 4 minutes a run in real time) takes hours: it
is a make target (``make noise-sweep``), not a test.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from run_files import json_lines

_PROGRESS = re.compile(r"Task progress \(judged from simulator state\): (\d+)/(\d+)")
_WALL = re.compile(r"wall time (\d+) s")
POLICIES = ("fixed_order", "nearest_first", "random")


@dataclass
class Cell:
    """What the runs of one scenario at one noise scale add up to."""

    done: int = 0
    total: int = 0
    runs: int = 0
    failed_runs: int = 0
    missed_grasps: int = 0
    grasps: int = 0
    wall: list[float] = field(default_factory=list)
    loc_mean: list[float] = field(default_factory=list)
    loc_max: list[float] = field(default_factory=list)


def wilson(successes: int, trials: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion."""
    if trials == 0:
        return (0.0, 1.0)
    p = successes / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / (
        1 + z * z / trials)
    return (max(0.0, centre - half), min(1.0, centre + half))


def run_folder(root: Path, scenario: str, seed: int, scale: float) -> Path:
    return root / f"{scenario}-seed{seed}-s{scale:g}"


def run_one(root: Path, scenario: str, seed: int, scale: float, timeout: float) -> Path | None:
    """One ``mimir sim`` run (reused when its report is already there); its run folder."""
    folder = run_folder(root, scenario, seed, scale)
    found = sorted(p.parent for p in folder.glob("*/report.md"))
    if found:
        return found[-1]
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [str(Path(sys.executable).parent / "mimir"), "sim", "--scenario", scenario,
           "--seed", str(seed), "--profile", "realistic", "--noise-scale", str(scale),
           "--runs", str(folder), "--quiet", "--instruction-timeout", str(timeout)]
    print(f"running {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
    subprocess.run(cmd, check=False)
    found = sorted(p.parent for p in folder.glob("*/report.md"))
    return found[-1] if found else None


def read_run(run: Path | None, cell: Cell, instructions: int) -> None:
    """Add one run folder's figures to ``cell`` (a run without a report counts as all failed)."""
    cell.runs += 1
    if run is None:
        cell.failed_runs += 1
        cell.total += instructions
        return
    report = (run / "report.md").read_text()
    match = _PROGRESS.search(report)
    if match is None:
        cell.failed_runs += 1
        cell.total += instructions
        return
    cell.done += int(match.group(1))
    cell.total += int(match.group(2))
    wall = _WALL.search(report)
    if wall:
        cell.wall.append(float(wall.group(1)))
    for entry in json_lines(run / "trace.jsonl"):
        if entry.get("kind") == "primitive" and entry.get("primitive") in ("open", "close",
                                                                             "pick"):
            cell.grasps += 1
            cell.missed_grasps += entry.get("outcome") == "MISSED_GRASP"
    loc = run / "localisation.json"
    if loc.is_file():
        data = json.loads(loc.read_text())
        if data.get("samples"):
            cell.loc_mean.append(float(data["mean_m"]))
            cell.loc_max.append(float(data["max_m"]))


def baseline_rows(scenario_name: str, seeds: list[int], k: int) -> list[str]:
    """Each baseline's score on the generated layouts of ``seeds`` and the chance level."""
    from mimir_sim.baselines import chance_levels, score  # noqa: PLC0415 - heavy import
    from mimir_sim.layouts import generate_layout  # noqa: PLC0415
    from mimir_sim.scenario import load_scenario  # noqa: PLC0415

    template = load_scenario(scenario_name)
    rows = []
    layouts = [generate_layout(template, seed) for seed in seeds]
    chance = [level for layout in layouts for level in chance_levels(layout, k).values()]
    for policy in POLICIES:
        rng = np.random.default_rng(0)
        hits = [float(hit) for layout in layouts
                for hit in score(policy, layout, k, rng).values()]
        rows.append(f"| {scenario_name} | {policy} | {np.mean(hits):.2f} ({len(hits)} tasks) | "
                    f"{np.mean(chance):.2f} |")
    return rows


def table(cells: dict[tuple[str, float], Cell]) -> list[str]:
    lines = ["| scenario | noise scale | runs (failed) | task progress [95% CI] | "
             "missed grasps | localisation error mean / max (m) | wall time per run (s) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for (scenario, scale), cell in sorted(cells.items()):
        low, high = wilson(cell.done, cell.total)
        rate = cell.done / cell.total if cell.total else 0.0
        loc = (f"{np.mean(cell.loc_mean):.3f} / {max(cell.loc_max):.3f}"
               if cell.loc_mean else "-")
        wall = f"{np.mean(cell.wall):.0f}" if cell.wall else "-"
        lines.append(f"| {scenario} | {scale:g} | {cell.runs} ({cell.failed_runs}) | "
                     f"{cell.done}/{cell.total} = {rate:.2f} [{low:.2f}, {high:.2f}] | "
                     f"{cell.missed_grasps}/{cell.grasps} | {loc} | {wall} |")
    return lines


def plot_svg(cells: dict[tuple[str, float], Cell], path: Path) -> None:
    """Task progress against noise scale, one line per scenario with its 95% intervals, as SVG
    (written directly: no plotting library is installed here)."""
    width, height, margin = 520, 320, 50
    scales = sorted({scale for _, scale in cells})
    top = max(scales[-1], 1e-9) if scales else 1.0

    def at(scale: float, rate: float) -> tuple[float, float]:
        return (margin + (width - 2 * margin) * scale / top,
                height - margin - (height - 2 * margin) * rate)

    colours = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             'font-family="sans-serif" font-size="12">',
             f'<rect width="{width}" height="{height}" fill="white"/>']
    x0, y0 = at(0.0, 0.0)
    x1, y1 = at(top, 1.0)
    parts.append(f'<path d="M{x0},{y1} V{y0} H{x1}" stroke="black" fill="none"/>')
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        _, y = at(0.0, tick)
        parts.append(f'<text x="{x0 - 8}" y="{y + 4}" text-anchor="end">{tick:.2f}</text>')
    for scale in scales:
        x, _ = at(scale, 0.0)
        parts.append(f'<text x="{x}" y="{y0 + 18}" text-anchor="middle">{scale:g}</text>')
    parts.append(f'<text x="{(x0 + x1) / 2}" y="{height - 8}" text-anchor="middle">'
                 'noise scale (realistic profile)</text>')
    parts.append(f'<text x="14" y="{(y0 + y1) / 2}" transform="rotate(-90 14 {(y0 + y1) / 2})" '
                 'text-anchor="middle">task progress (95% CI)</text>')
    for colour, scenario in zip(colours, sorted({name for name, _ in cells}), strict=False):
        points = []
        for scale in scales:
            cell = cells.get((scenario, scale))
            if cell is None or not cell.total:
                continue
            low, high = wilson(cell.done, cell.total)
            x, y = at(scale, cell.done / cell.total)
            _, ylo = at(scale, low)
            _, yhi = at(scale, high)
            parts.append(f'<path d="M{x},{ylo} V{yhi}" stroke="{colour}"/>')
            points.append(f"{x},{y}")
        if points:
            parts.append(f'<polyline points="{" ".join(points)}" stroke="{colour}" '
                         'fill="none" stroke-width="2"/>')
            lx, ly = points[-1].split(",")
            parts.append(f'<text x="{float(lx) - 4}" y="{float(ly) - 8}" fill="{colour}" '
                         f'text-anchor="end">{scenario}</text>')
    parts.append("</svg>")
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=Path("runs/noise"))
    parser.add_argument("--scenarios", nargs="+",
                        default=["locked_unlocked", "clutter_aware_pick"])
    parser.add_argument("--layouts", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=1000)
    parser.add_argument("--scales", type=float, nargs="+", default=[0.0, 0.5, 1.0, 2.0])
    parser.add_argument("--k", type=int, default=1, help="openings the baselines get")
    parser.add_argument("--instruction-timeout", type=float, default=400.0)
    parser.add_argument("--table-only", action="store_true")
    parser.add_argument("--plot", type=Path, default=None, help="write the plot here (SVG)")
    args = parser.parse_args(argv)
    if args.layouts < 1 or any(not math.isfinite(s) or s < 0 for s in args.scales):
        parser.error("--layouts must be >= 1 and every scale a number >= 0")
    from mimir_sim.scenario import load_scenario  # noqa: PLC0415 - heavy import

    seeds = list(range(args.first_seed, args.first_seed + args.layouts))
    cells: dict[tuple[str, float], Cell] = {}
    for scenario in args.scenarios:
        count = len(load_scenario(scenario).instructions)
        for scale in args.scales:
            cell = cells.setdefault((scenario, scale), Cell())
            for seed in seeds:
                if args.table_only:
                    found = sorted(p.parent for p in
                                   run_folder(args.runs, scenario, seed, scale).glob("*/report.md"))
                    if not found:
                        continue
                    run: Path | None = found[-1]
                else:
                    run = run_one(args.runs, scenario, seed, scale, args.instruction_timeout)
                read_run(run, cell, count)
    done = {key: c for key, c in cells.items() if c.runs}
    print("\n".join(table(done)))
    if args.plot is not None:
        plot_svg(done, args.plot)
    print()
    print(f"Memory-free baselines on the same layouts (finding instructions, first {args.k} "
          "opening(s)):")
    print("| scenario | policy | score | chance level |")
    print("| --- | --- | --- | --- |")
    for scenario in args.scenarios:
        print("\n".join(baseline_rows(scenario, seeds, args.k)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
