"""The evaluation report: tables, plots, per-trial lines and the story of every failure.

``write_report`` reads the finished trials and writes, in ``<evaluation>/report/``:

- ``report.md``: mean task progress with 95% bootstrap intervals per method and per task
  family, paired comparisons between methods (sign-flip permutation tests over the layouts both
  finished, Holm-adjusted), steps, memory sizes, keyframe retrieval (how many frames a planner
  call got, how far into the past they reach and how long retrieving them took), and the
  memory-free sanity baselines on the same layouts;
- ``trials.jsonl``: one line per trial;
- ``progress.png``, ``tasks.png`` and, with several noise scales, ``noise.png``;
- ``failures.md``: for every instruction judged not done, the judge's unmet criteria, the
  planner calls with the first one that went wrong, and memory's verdicts meanwhile.

A trial whose job failed (a node died, a time limit) has no judged progress: it is listed with
its error and left out of the means and the pairs, never counted as zero or as success.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mimir.evaluation.methods import Method
from mimir.evaluation.stats import Interval, bootstrap_interval, holm, paired_p_value
from mimir.evaluation.trials import IN_PROCESS, NODES, TrialFileError, TrialResult

#: Planner calls a memory-free robot spends per fixture it searches (move, open, inspect).
CALLS_PER_FIXTURE = 3
#: A trial's retrieval figures worked out from its keyframe store, kept where the store is not
#: (a packed trial, :mod:`mimir.evaluation.archive`).
RETRIEVAL_FILE = "retrieval.json"


@dataclass(frozen=True)
class Retrieval:
    """Keyframes retrieved by the planner calls of one trial."""

    calls: int
    frames: int
    reach_s: tuple[float, ...]
    latency_s: tuple[float, ...] = ()
    """Wall time each planner call that read keyframes spent retrieving them (s)."""


def json_lines(path: Path) -> list[dict[str, Any]]:
    """The records of a JSON-lines file of a trial (none when it is missing); a line that is
    not JSON (cut by a killed process) is passed over."""
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut by a killed process; the rest is still worth reading
    return rows


def planner_calls(folder: Path) -> list[dict[str, Any]]:
    """The planner's trace of a trial (one record per planner call)."""
    return json_lines(folder / "memory" / "planner_trace.jsonl")


def retrieval(folder: Path) -> Retrieval:
    """How many keyframes the trial's planner calls retrieved and how old they were then
    (from :data:`RETRIEVAL_FILE` where a packed trial kept them).

    Raises:
        TrialFileError: the kept figures cannot be read.
    """
    from mimir_memory.errors import MemoryStoreError  # noqa: PLC0415 - report only
    from mimir_memory.keyframes import KeyframeStore  # noqa: PLC0415

    if (folder / RETRIEVAL_FILE).is_file():
        return read_retrieval(folder / RETRIEVAL_FILE)
    calls = planner_calls(folder)
    frames = [(float(c.get("start", math.nan)), r.get("frame_id"))
              for c in calls for r in c.get("retrieved", []) if isinstance(r, dict)]
    reach: list[float] = []
    if frames and (folder / "memory" / "keyframes").is_dir():
        try:
            store = KeyframeStore.open(folder / "memory" / "keyframes", readonly=True)
        except MemoryStoreError:
            store = None
        if store is not None:
            try:
                for start, frame_id in frames:
                    try:
                        reach.append(start - store.get(str(frame_id)).timestamp)
                    except MemoryStoreError:
                        continue  # evicted by the budget since
            finally:
                store.close()
    return Retrieval(len(calls), len(frames), tuple(r for r in reach if math.isfinite(r)),
                     retrieval_latencies(calls))


def retrieval_record(found: Retrieval) -> dict[str, Any]:
    """The JSON form of a trial's retrieval figures (:data:`RETRIEVAL_FILE`)."""
    return {"calls": found.calls, "frames": found.frames, "reach_s": list(found.reach_s),
            "latency_s": list(found.latency_s)}


def read_retrieval(path: Path) -> Retrieval:
    """Retrieval figures kept by :func:`retrieval_record`.

    Raises:
        TrialFileError: not JSON, a count that is not a whole number >= 0, or a time that is
            not a finite number of seconds.
    """
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise TrialFileError(f"{path} is not JSON: {err}") from err
    if not isinstance(data, dict):
        raise TrialFileError(f"{path} holds no retrieval figures")
    counts: list[int] = []
    for key in ("calls", "frames"):
        value = data.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise TrialFileError(f"{path}: {key!r} must be a whole number >= 0")
        counts.append(value)
    times: list[tuple[float, ...]] = []
    for key in ("reach_s", "latency_s"):
        values = data.get(key)
        if not isinstance(values, list) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                for v in values):
            raise TrialFileError(f"{path}: {key!r} must be a list of finite seconds")
        times.append(tuple(float(v) for v in values))
    return Retrieval(counts[0], counts[1], times[0], times[1])


def _seconds(value: object) -> float | None:
    """A recorded duration (s), or None for anything else (null, text, negative, not finite)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) \
            and math.isfinite(value) and value >= 0:
        return float(value)
    return None


def retrieval_latencies(calls: Iterable[Mapping[str, Any]]) -> tuple[float, ...]:
    """The retrieval times the planner calls recorded (``retrieval_s``); calls that read no
    keyframes (null) and traces written before the field existed give none."""
    found = (_seconds(call.get("retrieval_s")) for call in calls)
    return tuple(value for value in found if value is not None)


def family_progress(result: TrialResult) -> dict[str, float]:
    """Mean judged progress per task family of one finished trial."""
    by_family: dict[str, list[float]] = defaultdict(list)
    for row in result.instructions:
        by_family[str(row.get("family") or "other")].append(float(row["judged_progress"]))
    return {family: float(np.mean(values)) for family, values in by_family.items()}


def code_line(finished: Sequence[TrialResult]) -> str:
    """Which code the finished trials ran on (an evaluation resumed later may mix versions)."""
    seeds: dict[str, list[int]] = {}
    for r in finished:
        seeds.setdefault(str(r.results.get("code_version") or "not recorded"), []).append(
            r.spec.seed)
    if not seeds:
        return "Code: no trial finished yet."
    parts = [f"{v} (seeds {', '.join(str(s) for s in sorted(set(ss)))})"
             for v, ss in sorted(seeds.items(), key=lambda kv: min(kv[1]))]
    return ("Code: " + "; ".join(parts) + "." if len(parts) > 1
            else f"Code: every finished trial ran on {next(iter(seeds))}.")


def trial_line(result: TrialResult, root: Path) -> dict[str, Any]:
    """One line of ``trials.jsonl``."""
    spec = result.spec
    line: dict[str, Any] = {
        "trial": spec.key, "method": spec.method.name, "seed": spec.seed,
        "noise_scale": spec.noise_scale, "profile": spec.profile, "mode": spec.mode,
        "finished": result.finished, "error": result.error,
        "code_version": result.results.get("code_version", ""),
    }
    if result.finished:
        got = retrieval(spec.folder(root))
        line.update(
            progress=result.progress, families=family_progress(result),
            instructions=[{k: row.get(k) for k in ("index", "family", "success",
                                                   "judged_progress", "steps", "error")}
                          for row in result.instructions],
            figures=result.results.get("figures", {}), wall_s=result.results.get("wall_s"),
            cpu_s=_cpu_s(result),
            planner_calls=got.calls, retrieved_frames=got.frames,
            retrieval_reach_s=list(got.reach_s), retrieval_latency_s=list(got.latency_s))
    return line


def _pairs_key(result: TrialResult) -> tuple[int, float]:
    return (result.spec.seed, result.spec.noise_scale)


def _mean(values: Iterable[float]) -> float:
    data = list(values)
    return float(np.mean(data)) if data else math.nan


def _fmt(value: float, digits: int = 1) -> str:
    return "-" if math.isnan(value) else f"{value:.{digits}f}"


def method_table(results: Sequence[TrialResult], methods: Sequence[Method],
                 lines: Mapping[str, dict[str, Any]]) -> list[str]:
    """The per-method table."""
    rows = ["| method | trials (failed runs) | task progress [95% CI] | instructions done | "
            "steps per instruction | keyframes stored | interaction properties | frames per "
            "planner call | retrieved frames' age, median / max (s) | retrieval time, median / "
            "p95 (ms) | wall time per trial (s) | CPU per trial (core-s) |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for method in methods:
        own = [r for r in results if r.spec.method.name == method.name]
        done = [r for r in own if r.finished]
        failed = sum(r.failed for r in own)
        pending = len(own) - len(done) - failed
        interval = bootstrap_interval([r.progress for r in done])
        instructions = [row for r in done for row in r.instructions]
        figures = [r.results.get("figures", {}) for r in done]
        own_lines = [lines[r.spec.key] for r in done]
        calls = sum(int(line["planner_calls"]) for line in own_lines)
        frames = sum(int(line["retrieved_frames"]) for line in own_lines)
        ages = [a for line in own_lines for a in line["retrieval_reach_s"]]
        latency_ms = [1000.0 * t for line in own_lines
                      for t in line.get("retrieval_latency_s", ())]
        rows.append(
            f"| {method.label} | {len(done)} ({failed}"
            + (f"; {pending} not run" if pending else "") + f") | {interval.text()} | "
            f"{sum(bool(row.get('success')) for row in instructions)}/{len(instructions)} | "
            f"{_fmt(_mean(float(row.get('steps', 0)) for row in instructions))} | "
            f"{_fmt(_mean(float(f.get('keyframes stored', 0)) for f in figures), 0)} | "
            f"{_fmt(_mean(float(f.get('interaction-derived properties', 0)) for f in figures))}"
            f" | {_fmt(frames / calls if calls else math.nan, 2)} | "
            + (f"{np.median(ages):.0f} / {max(ages):.0f}" if ages else "-") + " | "
            + (f"{np.median(latency_ms):.0f} / {np.percentile(latency_ms, 95):.0f}"
               if latency_ms else "-")
            + f" | {_fmt(_mean(float(r.results.get('wall_s', 0)) for r in done), 0)} | "
            f"{_fmt(_mean(c for c in map(_cpu_s, done) if c is not None), 0)} |")
    return rows


def _cpu_s(result: TrialResult) -> float | None:
    """Core-seconds the trial used (its node processes, or its one process in process); None
    where the run did not record it."""
    return _seconds(result.results.get("cpu_s"))


#: cores the Cost section's least wall time assumes (the protocol's machine)
COST_CORES = 2


def cost_lines(results: Sequence[TrialResult]) -> list[str]:
    """What the finished trials cost per layout (summed over methods) and in all: core-minutes
    of CPU and minutes of trial wall time, and the wall time the set needs on COST_CORES cores at
    the least (its CPU shared perfectly over them)."""
    layouts: dict[tuple[int, float], list[TrialResult]] = {}
    for r in results:
        if r.finished:
            layouts.setdefault(_pairs_key(r), []).append(r)
    if not layouts:
        return ["No trial has finished."]
    rows = ["| layout (seed) | trials | CPU (core-min) | trial wall time (min) |",
            "| --- | --- | --- | --- |"]
    total_cpu = total_wall = 0.0
    unmeasured = 0
    one_scale = len({scale for _, scale in layouts}) == 1
    for (seed, scale), own in sorted(layouts.items()):
        cpu = [_cpu_s(r) for r in own]
        wall = [_seconds(r.results.get("wall_s")) for r in own]
        unmeasured += sum(c is None for c in cpu)
        layout_cpu = sum(c for c in cpu if c is not None) / 60.0
        layout_wall = sum(w for w in wall if w is not None) / 60.0
        total_cpu += layout_cpu
        total_wall += layout_wall
        name = f"{seed}" if one_scale else f"{seed} (noise x{scale:g})"
        rows.append(f"| {name} | {len(own)} | {layout_cpu:.1f} | {layout_wall:.1f} |")
    trials = sum(len(own) for own in layouts.values())
    rows.append(f"| all | {trials} | {total_cpu:.1f} | {total_wall:.1f} |")
    text = ["The finished trials' own figures (`cpu_s` and `wall_s` of `results.json`); a "
            f"failed run is not counted. On {COST_CORES} cores the set needs at least "
            f"{total_cpu / COST_CORES:.0f} minutes of wall time "
            f"({total_cpu / COST_CORES / 60.0:.2f} h): its CPU shared perfectly over them, "
            "with nothing else running.", "", *rows]
    if unmeasured:
        text += ["", f"{unmeasured} finished trial(s) recorded no CPU time; the sums leave "
                 "them out."]
    return text


def mode_table(primary: Sequence[TrialResult], check: Sequence[TrialResult],
               methods: Sequence[Method]) -> list[str]:
    """In-process trials against the node graph on the same layouts, per method: both means
    with their intervals, the mean absolute difference per layout, whether the intervals
    overlap, and what a trial cost in each mode."""
    rows = ["| method | layouts | in process [95% CI] | node graph [95% CI] | mean abs. "
            "difference per layout | intervals overlap | wall per trial, in process / nodes (s) "
            "| CPU per trial, in process / nodes (core-s) |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for method in methods:
        nodes = {_pairs_key(r): r for r in check
                 if r.spec.method.name == method.name and r.finished}
        pairs = [(r, nodes[_pairs_key(r)]) for r in primary
                 if r.spec.method.name == method.name and r.finished and _pairs_key(r) in nodes]
        if not pairs:
            rows.append(f"| {method.label} | 0 | - | - | - | - | - | - |")
            continue
        ours = bootstrap_interval([a.progress for a, _ in pairs])
        theirs = bootstrap_interval([b.progress for _, b in pairs])
        gap = _mean(abs(a.progress - b.progress) for a, b in pairs)
        if math.isnan(ours.low) or math.isnan(theirs.low):
            overlap = "-"
        else:
            overlap = "yes" if ours.low <= theirs.high and theirs.low <= ours.high else "NO"

        def cost(side: Iterable[TrialResult], field: str) -> str:
            values = [_seconds(r.results.get(field)) for r in side]
            return _fmt(_mean(v for v in values if v is not None), 0)

        rows.append(
            f"| {method.label} | {len(pairs)} | {ours.text()} | {theirs.text()} | "
            f"{100 * gap:.1f} points | {overlap} | {cost((a for a, _ in pairs), 'wall_s')} / "
            f"{cost((b for _, b in pairs), 'wall_s')} | {cost((a for a, _ in pairs), 'cpu_s')}"
            f" / {cost((b for _, b in pairs), 'cpu_s')} |")
    return rows


def family_table(results: Sequence[TrialResult], methods: Sequence[Method]) -> list[str]:
    """Mean task progress per family (rows) and method (columns)."""
    families = sorted({f for r in results if r.finished for f in family_progress(r)})
    rows = ["| task family | " + " | ".join(m.label for m in methods) + " |",
            "| --- |" + " --- |" * len(methods)]
    for family in families:
        cells = []
        for method in methods:
            values = [family_progress(r)[family] for r in results
                      if r.finished and r.spec.method.name == method.name
                      and family in family_progress(r)]
            cells.append(bootstrap_interval(values).text())
        rows.append(f"| {family} | " + " | ".join(cells) + " |")
    return rows


@dataclass(frozen=True)
class Comparison:
    """One paired comparison of two methods over the layouts both finished."""

    first: Method
    second: Method
    pairs: int
    difference: float
    p_value: float
    adjusted: float = math.nan


def comparisons(results: Sequence[TrialResult], methods: Sequence[Method]) -> list[Comparison]:
    """Every pair of methods, paired by layout (seed and noise scale), Holm-adjusted."""
    progress: dict[str, dict[tuple[int, float], float]] = defaultdict(dict)
    for r in results:
        if r.finished:
            progress[r.spec.method.name][_pairs_key(r)] = r.progress
    found = []
    for first, second in itertools.combinations(methods, 2):
        keys = sorted(set(progress[first.name]) & set(progress[second.name]))
        if not keys:
            continue
        a = [progress[first.name][k] for k in keys]
        b = [progress[second.name][k] for k in keys]
        found.append(Comparison(first, second, len(keys), float(np.mean(a) - np.mean(b)),
                                paired_p_value(a, b)))
    adjusted = holm([c.p_value for c in found])
    return [Comparison(c.first, c.second, c.pairs, c.difference, c.p_value, p)
            for c, p in zip(found, adjusted, strict=True)]


def comparison_table(found: Sequence[Comparison]) -> list[str]:
    """The paired comparisons as a table."""
    rows = ["| method A | method B | layouts paired | mean difference A - B (points) | p | "
            "p, Holm-adjusted |", "| --- | --- | --- | --- | --- | --- |"]
    for c in found:
        rows.append(f"| {c.first.label} | {c.second.label} | {c.pairs} | "
                    f"{c.difference * 100:+.1f} | {c.p_value:.3g} | {c.adjusted:.3g} |")
    return rows


def baseline_table(scenario: str, seeds: Sequence[int], step_budget: int) -> list[str]:
    """The memory-free sanity policies on the same generated layouts (finding instructions)."""
    from mimir_sim.baselines import POLICIES, chance_levels, score  # noqa: PLC0415
    from mimir_sim.layouts import generate_layout  # noqa: PLC0415
    from mimir_sim.scenario import load_scenario  # noqa: PLC0415

    openings = max(1, step_budget // CALLS_PER_FIXTURE)
    template = load_scenario(scenario)
    layouts = [generate_layout(template, seed) for seed in sorted(set(seeds))]
    chance = [v for layout in layouts for v in chance_levels(layout, openings).values()]
    rows = [f"Memory-free sanity baselines on the same layouts: each opens fixtures in an order "
            f"fixed before it looks inside, and succeeds on a finding instruction when the "
            f"target's fixture comes among its first {openings} openings (a budget of "
            f"{step_budget} planner calls, {CALLS_PER_FIXTURE} per fixture searched) and no "
            "fixture the instruction forbids comes before it. Scored without physics.", "",
            "| policy | finding instructions done | chance level |", "| --- | --- | --- |"]
    if not chance:
        return [*rows, "| (no finding instruction behind a door in these layouts) | - | - |"]
    for policy in POLICIES:
        rng = np.random.default_rng(0)
        hits = [float(h) for layout in layouts
                for h in score(policy, layout, openings, rng).values()]
        rows.append(f"| {policy} | {np.mean(hits):.0%} ({len(hits)}) | {np.mean(chance):.0%} |")
    return rows


def failure_story(result: TrialResult, root: Path) -> list[str]:
    """For each instruction of a finished trial judged not done: what was unmet, the planner
    calls (the first that went wrong marked), and the verdicts memory gave meanwhile."""
    folder = result.spec.folder(root)
    calls = planner_calls(folder)
    trace = json_lines(folder / "trace.jsonl")
    lines: list[str] = []
    for row in result.instructions:
        if row.get("success"):
            continue
        index = int(row["index"])
        text = str(row.get("instruction", ""))
        lines += ["", f"### {result.spec.key}, instruction {index + 1} "
                  f"({row.get('family') or 'other'}): {text}", ""]
        unmet = [c for c in row.get("criteria", [])
                 if isinstance(c, dict) and not c.get("satisfied", True)]
        lines += [f"- unmet: {c.get('reason', c)}" for c in unmet] or [
            "- the judge named no unmet criterion"]
        if row.get("error"):
            lines.append(f"- planner: {row['error']}")
        own = [c for c in calls if c.get("instruction") == text]
        wrong = next((c for c in own if c.get("success") is False), None)
        for call in own:
            mark = " **<- first to go wrong**" if call is wrong else ""
            action = (f"{call['primitive']}({call.get('target')})" if call.get("primitive")
                      else "no primitive")
            lines.append(f"  - call {call.get('call')}: {action} {call.get('outcome')}, "
                         f"{'ok' if call.get('success') else 'failed'}: "
                         f"{str(call.get('detail', ''))[:200]}{mark}")
        if own and wrong is None:
            lines.append("  - no call failed: the budget ran out or the answer was wrong")
        verdicts = [e for e in trace if e.get("kind") == "memory" and e.get("instruction") == index]
        for entry in verdicts:
            why = str(entry.get("reason") or entry.get("event_kind") or "")
            lines.append(f"  - memory [{entry.get('verdict')}] {entry.get('subject')}: "
                         f"{why[:200]}")
    return lines


def save_percent_plot(fig: Any, ax: Any, path: Path, ylabel: str, *, legend: bool = True
                      ) -> None:
    """Finish a plot whose y axis is a percentage (0-105), write it to ``path`` and free it."""
    from matplotlib import pyplot as plt  # noqa: PLC0415 - plotting only when a report is written

    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 105)
    if legend:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_progress(path: Path, methods: Sequence[Method],
                   intervals: Mapping[str, Interval]) -> None:
    import matplotlib  # noqa: PLC0415 - plotting only when a report is written

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(1.4 * len(methods) + 2, 3.6))
    xs = np.arange(len(methods))
    means = [intervals[m.name].mean * 100 for m in methods]
    low = [max(0.0, intervals[m.name].mean - intervals[m.name].low) * 100
           if not math.isnan(intervals[m.name].low) else 0.0 for m in methods]
    high = [max(0.0, intervals[m.name].high - intervals[m.name].mean) * 100
            if not math.isnan(intervals[m.name].high) else 0.0 for m in methods]
    ax.bar(xs, np.nan_to_num(means), yerr=[low, high], capsize=4, color="#4c72b0")
    ax.set_xticks(xs, [m.label for m in methods], rotation=20, ha="right")
    save_percent_plot(fig, ax, path, "task progress (%), 95% CI", legend=False)


def _plot_tasks(path: Path, results: Sequence[TrialResult], methods: Sequence[Method]) -> None:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt  # noqa: PLC0415

    count = max((len(r.instructions) for r in results if r.finished), default=0)
    grid = np.full((count, len(methods)), np.nan)
    for j, method in enumerate(methods):
        for i in range(count):
            values = [float(r.instructions[i]["judged_progress"]) for r in results
                      if r.finished and r.spec.method.name == method.name
                      and len(r.instructions) > i]
            if values:
                grid[i, j] = np.mean(values) * 100
    fig, ax = plt.subplots(figsize=(1.3 * len(methods) + 2.5, 0.35 * count + 1.8))
    image = ax.imshow(grid, cmap="viridis", vmin=0, vmax=100, aspect="auto")
    ax.set_xticks(range(len(methods)), [m.label for m in methods], rotation=20, ha="right")
    ax.set_yticks(range(count), [f"instruction {i + 1}" for i in range(count)])
    fig.colorbar(image, ax=ax, label="task progress (%)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_noise(path: Path, results: Sequence[TrialResult], methods: Sequence[Method]) -> None:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    scales = sorted({r.spec.noise_scale for r in results})
    for method in methods:
        points = []
        for scale in scales:
            interval = bootstrap_interval([r.progress for r in results if r.finished
                                           and r.spec.method.name == method.name
                                           and r.spec.noise_scale == scale])
            if interval.n:
                points.append((scale, interval))
        if not points:
            continue
        xs = [p[0] for p in points]
        ys = [p[1].mean * 100 for p in points]
        lo = [(p[1].mean - p[1].low) * 100 if not math.isnan(p[1].low) else 0.0 for p in points]
        hi = [(p[1].high - p[1].mean) * 100 if not math.isnan(p[1].high) else 0.0
              for p in points]
        ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=method.label)
    ax.set_xlabel("noise scale")
    save_percent_plot(fig, ax, path, "task progress (%), 95% CI")


def write_report(results: Sequence[TrialResult], methods: Sequence[Method], root: Path, *,
                 command: str = "") -> Path:
    """Write the report folder of an evaluation; returns the path of ``report.md``.

    Raises:
        ValueError: ``results`` is empty.
    """
    if not results:
        raise ValueError("an evaluation report needs at least one trial")
    out = root / "report"
    out.mkdir(parents=True, exist_ok=True)
    lines_by_key = {r.spec.key: trial_line(r, root) for r in results}
    with (out / "trials.jsonl").open("w") as handle:
        for r in results:
            handle.write(json.dumps(lines_by_key[r.spec.key], sort_keys=True) + "\n")
    # the tables are those of the evaluation's own mode; node-graph reruns of in-process
    # trials are the check of the last section
    mode = IN_PROCESS if any(r.spec.mode == IN_PROCESS for r in results) else NODES
    check = [r for r in results if r.spec.mode != mode]
    results = [r for r in results if r.spec.mode == mode]
    first = results[0].spec
    finished = [r for r in results if r.finished]
    intervals = {m.name: bootstrap_interval([r.progress for r in finished
                                             if r.spec.method.name == m.name])
                 for m in methods}
    scales = sorted({r.spec.noise_scale for r in results})
    text = [f"# mimir eval: {first.scenario}", ""]
    if command:
        text += ["Command:", "", f"    {command}", ""]
    text += [code_line(finished), ""]
    text += [
        f"Profile {first.profile} at noise scale(s) {', '.join(f'{s:g}' for s in scales)}; "
        f"reasoning backend {first.vlm_backend}; {first.step_budget} planner calls per "
        f"instruction; layouts of seeds {min(r.spec.seed for r in results)}.."
        f"{max(r.spec.seed for r in results)}; {len(finished)} of {len(results)} trials "
        "finished; "
        + ("each trial ran in one process in simulation time (`mimir sim --in-process`)."
           if mode == IN_PROCESS else "each trial ran as the node graph (`mimir sim`)."),
        "",
        "Task progress is the judge's (simulator state), averaged over a trial's instructions; "
        "intervals are 95% percentile bootstraps over layouts. A trial whose run failed is "
        "counted under 'failed runs' and left out of the means.",
        "",
        *method_table(results, methods, lines_by_key),
        "",
        "## Per task family",
        "",
        *family_table(results, methods),
        "",
        "## Paired comparisons",
        "",
        "Sign-flip permutation tests of the per-layout differences in task progress, over the "
        "layouts both methods finished; p-values adjusted for all pairs by Holm's method.",
        "",
        *comparison_table(comparisons(results, methods)),
        "",
        "## Sanity baselines",
        "",
        *baseline_table(first.scenario, [r.spec.seed for r in results], first.step_budget),
    ]
    if check:
        text += [
            "", "## Node graph against in-process", "",
            "The first layouts of each method ran again as the node graph (DDS, the wall "
            "clock; the reference). Both columns cover the same layouts.", "",
            *mode_table(results, check, methods)]
    text += ["", "## Cost", "", *cost_lines(results)]
    failed_runs = [r for r in results + check if r.failed]
    if failed_runs:
        text += ["", "## Failed runs", ""]
        text += [f"- {r.spec.key}: {r.error}" for r in failed_runs]
    pending = [r for r in results + check if not r.finished and not r.failed]
    if pending:
        text += ["", f"Not run yet, or stopped before the end ({len(pending)}; the same command "
                 "runs them): " + ", ".join(r.spec.key for r in pending) + "."]
    if finished:
        _plot_progress(out / "progress.png", methods, intervals)
        _plot_tasks(out / "tasks.png", results, methods)
        text += ["", "![task progress per method](progress.png)", "",
                 "![task progress per instruction and method](tasks.png)"]
        if len(scales) > 1:
            _plot_noise(out / "noise.png", results, methods)
            text += ["", "![task progress against noise scale](noise.png)"]
    stories = [line for r in finished for line in failure_story(r, root)]
    (out / "failures.md").write_text("\n".join(
        [f"# Instructions judged not done: {first.scenario}",
         *(stories or ["", "Every instruction of every finished trial was judged done."])])
        + "\n")
    text += ["", f"Instructions judged not done, step by step: [failures.md](failures.md) "
             f"({sum(1 for s in stories if s.startswith('### '))})."]
    path = out / "report.md"
    path.write_text("\n".join(text) + "\n")
    return path
