"""Paired comparison of two evaluations of the same trials (``mimir eval --against``).

A change to the robot's behaviour is judged on the layouts both code versions ran: the same
method, noise scale and seed, so that a difference comes from the change and not from the
layout. For every trial the two evaluations share this reports the judged progress and the
instructions done on each side, the instructions won and lost, whether the robot streamed the
same targets to the bit (``robot_trace.jsonl``; a change that does not touch a trial's path
leaves it identical), the first primitive call where the two runs part (the place to start
reading a changed path), and the wrong facts memory admitted (the judge's audit). Over the
pairs it gives the totals and a sign-flip permutation test of the progress differences.

Trials are found by their ``results.json`` anywhere below each folder and keyed by their
scenario and the last three folders of their path (``<method>/scale-<s>/seed-<n>``, with
``-in-process`` where it ran so), so one evaluation folder compares with another, and so does a
folder holding several evaluations of one trial each.
"""

from __future__ import annotations

import filecmp
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mimir.evaluation.report import json_lines
from mimir.evaluation.stats import paired_p_value
from mimir.evaluation.trials import KEY_DEPTH, TrialFileError, parse_results


class PairingError(ValueError):
    """The two evaluations cannot be paired: a folder is missing, holds one trial twice, or
    the two share no finished trial."""


@dataclass(frozen=True)
class PrimitiveCall:
    """One primitive the executor ran, as the trial's trace records it."""

    instruction: int
    primitive: str
    target: str
    outcome: str

    def __str__(self) -> str:
        return f"instruction {self.instruction}, {self.primitive}({self.target}) {self.outcome}"


@dataclass(frozen=True)
class TrialRecord:
    """What one side of a pair left: its judged results and the primitives it ran."""

    key: str
    folder: Path
    results: Mapping[str, Any]
    primitives: tuple[PrimitiveCall, ...]
    wrong_admitted: int | None
    """Facts memory admitted that the judge found false (None: the trial kept no audit)."""

    @property
    def instructions(self) -> list[Mapping[str, Any]]:
        return list(self.results["instructions"])

    @property
    def progress(self) -> float:
        rows = self.instructions
        return sum(float(r["judged_progress"]) for r in rows) / len(rows) if rows else 0.0

    @property
    def done(self) -> int:
        return sum(bool(r["success"]) for r in self.instructions)

    @property
    def steps(self) -> int:
        return sum(int(r.get("steps", 0)) for r in self.instructions)


@dataclass(frozen=True)
class TrialPair:
    """One trial as both evaluations ran it."""

    before: TrialRecord
    after: TrialRecord

    @property
    def key(self) -> str:
        return self.before.key

    def changed_instructions(self, *, won: bool) -> list[Mapping[str, Any]]:
        """The instructions done only after (``won``) or only before (lost), paired by index."""
        after = {int(r["index"]): r for r in self.after.instructions}
        out = []
        for row in self.before.instructions:
            other = after.get(int(row["index"]))
            if other is not None and bool(other["success"]) == won != bool(row["success"]):
                out.append(other)
        return out

    @property
    def same_robot_trace(self) -> bool | None:
        """Whether both runs streamed the same robot targets and states, byte for byte (None
        where one of them kept no robot trace)."""
        a = self.before.folder / "robot_trace.jsonl"
        b = self.after.folder / "robot_trace.jsonl"
        if not (a.is_file() and b.is_file()):
            return None
        return filecmp.cmp(a, b, shallow=False)

    @property
    def first_change(self) -> str:
        """Where the two runs' primitive calls first differ ("" where they do not)."""
        a, b = self.before.primitives, self.after.primitives
        for index, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                return f"call {index + 1}: {x} -> {y}"
        n = min(len(a), len(b))
        if len(a) == len(b):
            return ""
        side, extra = ("before", a[n]) if len(a) > n else ("after", b[n])
        return f"call {n + 1}: only {side} ran on ({extra})"


@dataclass(frozen=True)
class PairedComparison:
    """Every trial the two evaluations share, and the ones only one of them finished."""

    pairs: tuple[TrialPair, ...]
    only_before: tuple[str, ...]
    only_after: tuple[str, ...]

    @property
    def p_value(self) -> float:
        """Two-sided sign-flip permutation test that the mean progress differs."""
        return paired_p_value([p.before.progress for p in self.pairs],
                              [p.after.progress for p in self.pairs])


def find_trials(root: Path) -> dict[str, TrialRecord]:
    """The finished trials below ``root``, keyed ``<scenario>: <method>/scale-<s>/seed-<n>``.

    Raises:
        PairingError: ``root`` is not a folder, or two trials below it share a key.
        TrialFileError: a trial's files cannot be read.
    """
    if not root.is_dir():
        raise PairingError(f"{root} is not a folder of evaluation trials")
    found: dict[str, TrialRecord] = {}
    for path in sorted(root.rglob("results.json")):
        record = read_record(path.parent)
        if record.key in found:
            raise PairingError(f"{root} holds trial {record.key} twice "
                               f"({found[record.key].folder} and {record.folder}); name one "
                               "evaluation folder")
        found[record.key] = record
    return found


def read_record(folder: Path) -> TrialRecord:
    """One finished trial's record.

    Raises:
        TrialFileError: ``results.json`` is not a judged results file, or a primitive line of
            ``trace.jsonl`` or ``audit_summary.json`` lacks what a trial writes.
    """
    results = parse_results((folder / "results.json").read_text(), str(folder / "results.json"))
    key = f"{results.get('scenario', '?')}: {'/'.join(folder.parts[-KEY_DEPTH:])}"
    calls = []
    for row in json_lines(folder / "trace.jsonl"):
        if row.get("kind") != "primitive":
            continue
        try:
            calls.append(PrimitiveCall(int(row["instruction"]), str(row["primitive"]),
                                       str(row["target"]), str(row["outcome"])))
        except (KeyError, TypeError, ValueError) as err:
            raise TrialFileError(f"{folder / 'trace.jsonl'}: a primitive record lacks "
                                 f"{err}: {json.dumps(row)[:200]}") from err
    return TrialRecord(key, folder, results, tuple(calls), _wrong_admitted(folder))


def _wrong_admitted(folder: Path) -> int | None:
    path = folder / "audit_summary.json"
    if not path.is_file():
        return None
    try:
        return int(json.loads(path.read_text())["wrong_admitted"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
        raise TrialFileError(f"{path} holds no count of wrong facts admitted: {err}") from err


def compare(before: Path, after: Path) -> PairedComparison:
    """Pair the finished trials of two evaluations.

    Raises:
        PairingError: a folder is missing, holds a trial twice, or they share no trial.
        TrialFileError: a trial's files cannot be read.
    """
    old, new = find_trials(before), find_trials(after)
    shared = sorted(set(old) & set(new))
    if not shared:
        raise PairingError(f"{before} ({len(old)} finished trials) and {after} ({len(new)}) "
                           "share no trial (same method, noise scale and seed)")
    pairs = tuple(TrialPair(old[k], new[k]) for k in shared)
    return PairedComparison(pairs, tuple(sorted(set(old) - set(new))),
                            tuple(sorted(set(new) - set(old))))


def _percent(value: float) -> str:
    return f"{100.0 * value:.1f}%"


def _wrong(record: TrialRecord) -> str:
    return "-" if record.wrong_admitted is None else str(record.wrong_admitted)


def report_lines(found: PairedComparison, before: str, after: str) -> list[str]:
    """The comparison as Markdown: a row per trial, the totals, then what changed in each."""
    lines = [f"# {after} against {before}", "",
             "| trial | progress | done | steps | wrong facts admitted | robot trace |",
             "|---|---|---|---|---|---|"]
    for pair in found.pairs:
        a, b = pair.before, pair.after
        same = {True: "identical", False: "differs", None: "-"}[pair.same_robot_trace]
        lines.append(f"| {pair.key} | {_percent(a.progress)} -> {_percent(b.progress)} | "
                     f"{a.done} -> {b.done} | {a.steps} -> {b.steps} | "
                     f"{_wrong(a)} -> {_wrong(b)} | {same} |")
    n = len(found.pairs)
    done_a = sum(p.before.done for p in found.pairs)
    done_b = sum(p.after.done for p in found.pairs)
    total = sum(len(p.before.instructions) for p in found.pairs)
    mean_a = sum(p.before.progress for p in found.pairs) / n
    mean_b = sum(p.after.progress for p in found.pairs) / n
    pairs = f"{n} pair" if n == 1 else f"{n} pairs"
    lines += ["", f"{pairs}: {done_a} -> {done_b} instructions done of {total}, mean "
              f"progress {_percent(mean_a)} -> {_percent(mean_b)} (paired permutation test "
              f"p = {found.p_value:.3f})."]
    for label, keys in (("only in " + before, found.only_before),
                        ("only in " + after, found.only_after)):
        if keys:
            lines.append(f"Finished {label}: {', '.join(keys)}.")
    for pair in found.pairs:
        story = _changes(pair)
        if story:
            lines += ["", f"## {pair.key}", *story]
    return lines


def _changes(pair: TrialPair) -> list[str]:
    out = []
    first = pair.first_change
    if first:
        out.append(f"- first different primitive: {first}")
    for won, word in ((True, "won"), (False, "lost")):
        for row in pair.changed_instructions(won=won):
            error = str(row.get("error") or "")
            out.append(f"- {word}: {row['index']} ({row.get('family', '')}) "
                       f"{row['instruction']}" + (f" [after: {error[:120]}]" if error else ""))
    return out
