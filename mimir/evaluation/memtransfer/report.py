"""MemTransfer figures and the Markdown report.

Per policy (or representation) and setting, over runs: the success rate SR (percent of episodes
that finish every stage within the step limit), SPL (success weighted by the reference length
over the length taken), each as the mean over runs with the standard deviation
across runs (the paper's ``±``). Against a blocked passage (Table V): the change Δ of the drop in
SR from the unchanged to the blocked map relative to the baseline's drop, the retention
``SR_blocked / SR_unchanged``, the follow rate F (episodes that came up against the closed
passage: tried to enter it, or reached the cell where the old route entered it) and the recovery
rate C (successes among them). Prompt cost: images and tokens per prompt, and all prompt tokens
in millions (Mtok).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mimir.evaluation.memtransfer.protocol import DEFAULT_SETTINGS, START_SETTINGS, Setting
from mimir.evaluation.memtransfer.runner import Outcome
from mimir.evaluation.report import save_percent_plot
from mimir_sim.warehouse.tasks import GROUPS

UNCHANGED, BLOCKED = Setting("new-start", 4).key, Setting("blocked", 4).key


@dataclass(frozen=True)
class Figure:
    """A mean over runs and its standard deviation across runs (NaN with no episodes; the
    deviation is NaN with one run)."""

    mean: float
    sd: float
    runs: int

    def text(self, digits: int = 1) -> str:
        """``mean ± sd`` (``-`` when nothing was run)."""
        if self.runs == 0 or math.isnan(self.mean):
            return "-"
        if self.runs < 2:
            return f"{self.mean:.{digits}f}"
        return f"{self.mean:.{digits}f} ± {self.sd:.{digits}f}"


def _over_runs(outcomes: Sequence[Outcome], value: str) -> Figure:
    by_run: dict[int, list[float]] = defaultdict(list)
    for o in outcomes:
        by_run[o.run].append(float(getattr(o, value)))
    means = [sum(v) / len(v) for v in by_run.values()]
    if not means:
        return Figure(math.nan, math.nan, 0)
    sd = statistics.stdev(means) if len(means) > 1 else math.nan
    return Figure(statistics.fmean(means), sd, len(means))


def select(outcomes: Sequence[Outcome], policy: str, setting: str,
           types: Sequence[int] | None = None) -> list[Outcome]:
    """The episodes of one policy and setting (of some task types)."""
    return [o for o in outcomes if o.policy == policy and o.setting == setting
            and (types is None or o.task_type in types)]


def success_rate(outcomes: Sequence[Outcome]) -> Figure:
    """SR in percent over runs."""
    figure = _over_runs(outcomes, "success")
    return Figure(100.0 * figure.mean, 100.0 * figure.sd, figure.runs)


def spl(outcomes: Sequence[Outcome]) -> Figure:
    """SPL over runs."""
    return _over_runs(outcomes, "spl")


@dataclass(frozen=True)
class Closure:
    """Table V's figures of one policy (NaN where a term is not defined)."""

    delta: float
    retention: float
    follow: Figure
    recovery: Figure


def closure(outcomes: Sequence[Outcome], policy: str, baseline: str) -> Closure:
    """How ``policy`` copes with the closed passage, against ``baseline``."""
    def sr(name: str, setting: str) -> float:
        return success_rate(select(outcomes, name, setting)).mean

    drop = sr(policy, BLOCKED) - sr(policy, UNCHANGED)
    base_drop = sr(baseline, BLOCKED) - sr(baseline, UNCHANGED)
    unchanged = sr(policy, UNCHANGED)
    retention = sr(policy, BLOCKED) / unchanged if unchanged > 0 else math.nan
    blocked = select(outcomes, policy, BLOCKED)
    follow = _over_runs(blocked, "met_closure")
    met = [o for o in blocked if o.met_closure]
    recovery = _over_runs(met, "success")
    return Closure(drop - base_drop, retention,
                   Figure(100.0 * follow.mean, 100.0 * follow.sd, follow.runs),
                   Figure(100.0 * recovery.mean, 100.0 * recovery.sd, recovery.runs))


def _per_prompt(outcomes: Sequence[Outcome], value: str) -> str:
    prompts = sum(o.prompts for o in outcomes)
    if not prompts:
        return "0"
    return f"{sum(getattr(o, value) for o in outcomes) / prompts:.0f}"


def markdown(outcomes: Sequence[Outcome], *, baseline: str, command: str = "") -> str:
    """The report: Tables III-V in the paper's layout, mixed histories and task groups."""
    policies = list(dict.fromkeys(o.policy for o in outcomes))
    settings = list(dict.fromkeys(o.setting for o in outcomes))
    lines = ["# MemTransfer", ""]
    if command:
        lines += [f"Command: `{command}`", ""]
    cases = len({o.case for o in outcomes})
    runs = len({o.run for o in outcomes})
    lines += [f"{len(outcomes)} episodes: {cases} cases, {runs} run(s) each, "
              f"{len(policies)} policies. SR in percent (mean ± sd over runs), SPL.", ""]
    main = [s.key for s in DEFAULT_SETTINGS[:4] if s.key in settings]
    if main:
        lines += ["## Table III: start, route and demonstrations", "",
                  "| policy | img/prompt | tok/prompt | Mtok | " + " | ".join(
                      f"{k} SR | {k} SPL" for k in main) + " |",
                  "| --- | --- | --- | --- | " + " | ".join("--- | ---" for _ in main) + " |"]
        for policy in policies:
            mine = [o for o in outcomes if o.policy == policy]
            cells = [f"{success_rate(select(outcomes, policy, k)).text()} | "
                     f"{spl(select(outcomes, policy, k)).text(3)}" for k in main]
            mtok = sum(o.tokens for o in mine) / 1e6
            lines.append(f"| {policy} | {_per_prompt(mine, 'images')} | "
                         f"{_per_prompt(mine, 'tokens')} | {mtok:.2f} | " + " | ".join(cells)
                         + " |")
        lines.append("")
    starts = [s.key for s in START_SETTINGS if s.key in settings]
    if len(starts) > 1:
        lines += ["## Table IV: the test at the original start, memory from one start", "",
                  "| policy | " + " | ".join(starts) + " |",
                  "| --- | " + " | ".join("---" for _ in starts) + " |"]
        for policy in policies:
            lines.append(f"| {policy} | " + " | ".join(
                f"{success_rate(select(outcomes, policy, k)).text()} "
                f"({spl(select(outcomes, policy, k)).text(3)})" for k in starts) + " |")
        lines.append("")
    if UNCHANGED in settings and BLOCKED in settings:
        lines += ["## Table V: a blocked route", "",
                  f"Δ and retention against `{baseline}`.", "",
                  "| policy | Δ | retention | follow % | recovery % |",
                  "| --- | --- | --- | --- | --- |"]
        for policy in policies:
            c = closure(outcomes, policy, baseline)
            lines.append(f"| {policy} | {_num(c.delta, 1)} | {_num(c.retention, 2)} | "
                         f"{c.follow.text()} | {c.recovery.text()} |")
        lines.append("")
    mixed = [k for k in settings if k.startswith("mixed")]
    if mixed:
        lines += ["## Mixed histories (two of four demonstrations from other tasks)", "",
                  "| policy | " + " | ".join([UNCHANGED, *mixed]) + " |",
                  "| --- | " + " | ".join("---" for _ in [UNCHANGED, *mixed]) + " |"]
        for policy in policies:
            lines.append(f"| {policy} | " + " | ".join(
                success_rate(select(outcomes, policy, k)).text()
                for k in [UNCHANGED, *mixed]) + " |")
        lines.append("")
    lines += ["## Task groups (SR, every setting)", "",
              "| policy | " + " | ".join(GROUPS) + " |",
              "| --- | " + " | ".join("---" for _ in GROUPS) + " |"]
    for policy in policies:
        mine = [o for o in outcomes if o.policy == policy]
        lines.append(f"| {policy} | " + " | ".join(
            success_rate([o for o in mine if o.task_type in types]).text()
            for types in GROUPS.values()) + " |")
    return "\n".join(lines) + "\n"


def _num(value: float, digits: int) -> str:
    return "-" if math.isnan(value) else f"{value:.{digits}f}"


def plot(outcomes: Sequence[Outcome], path: Path) -> None:
    """A bar chart of SR per setting and policy, written to ``path`` (PNG)."""
    import matplotlib  # noqa: PLC0415 - only when a report is written

    matplotlib.use("Agg")
    from matplotlib import pyplot  # noqa: PLC0415

    policies = list(dict.fromkeys(o.policy for o in outcomes))
    settings = list(dict.fromkeys(o.setting for o in outcomes))
    width = 0.8 / max(1, len(policies))
    figure, axes = pyplot.subplots(figsize=(max(6.0, 1.4 * len(settings)), 3.5))
    for n, policy in enumerate(policies):
        figures = [success_rate(select(outcomes, policy, k)) for k in settings]
        axes.bar([i + n * width for i in range(len(settings))], [f.mean for f in figures],
                 width, yerr=[0.0 if math.isnan(f.sd) else f.sd for f in figures],
                 label=policy)
    axes.set_xticks([i + width * (len(policies) - 1) / 2 for i in range(len(settings))],
                    settings, rotation=20, fontsize=8)
    save_percent_plot(figure, axes, path, "SR (%)")
