"""Running MemTransfer episodes: every policy, setting, run and case, in parallel and resumable.

Each finished episode is one line of ``episodes.jsonl`` in the output folder (its key, outcome,
path and prompt cost) and a step trace under ``traces/`` (pose, action, feedback and the
model's answer of every step); a run started again over the same folder skips the keys already
there, so an interrupted benchmark goes on where it stopped. Episodes run in worker processes
(``jobs``), each with a :class:`Workshop` of its own (layout, cases, renderer, backend).
"""

from __future__ import annotations

import json
import multiprocessing
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from tqdm import tqdm

from mimir.evaluation.memtransfer.model_policy import InvalidAnswerError
from mimir.evaluation.memtransfer.policies import Brief
from mimir.evaluation.memtransfer.protocol import Setting, plan_episode
from mimir.evaluation.memtransfer.workshop import Workshop
from mimir_sim.warehouse.cases import Case
from mimir_sim.warehouse.episode import Episode
from mimir_sim.warehouse.layout import WarehouseError

EPISODES = "episodes.jsonl"


@dataclass(frozen=True)
class Job:
    """One episode to run."""

    policy: str
    setting: str
    run: int
    case: str

    @property
    def key(self) -> str:
        """The episode's key in ``episodes.jsonl``."""
        return f"{self.policy}|{self.setting}|{self.run}|{self.case}"


@dataclass(frozen=True)
class Outcome:
    """One finished episode."""

    key: str
    policy: str
    setting: str
    run: int
    case: str
    task_type: int
    success: bool
    steps: int
    reference_steps: int
    spl: float
    met_closure: bool
    bumps: int
    invalid_answers: int
    prompts: int
    images: int
    tokens: int
    actions: tuple[str, ...]

    def to_json(self) -> str:
        """One line of ``episodes.jsonl``."""
        data = asdict(self)
        data["actions"] = list(self.actions)
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> Outcome:
        """An outcome read back.

        Raises:
            WarehouseError: not an outcome line.
        """
        try:
            data = json.loads(line)
            data["actions"] = tuple(data["actions"])
            return cls(**data)
        except (ValueError, TypeError, KeyError) as err:
            raise WarehouseError(f"not an episode line: {line[:80]!r} ({err})") from err


def run_episode(workshop: Workshop, job: Job, max_steps: int = 200,
                trace: list[dict[str, object]] | None = None) -> Outcome:
    """Run one episode and measure it (an answer naming no action spends a step); with
    ``trace``, append one row per step: pose, action, feedback and the model's answer."""
    layout, case = workshop.layout, workshop.by_id[job.case]
    setting = Setting.from_key(job.setting)
    plan = plan_episode(layout, case, setting, workshop.cases)
    policy = workshop.policy(job.policy)
    policy.begin(Brief(plan, (layout.width, layout.height), job.run))
    episode = Episode(layout, case.task, plan.start, blocked=plan.blocked, max_steps=max_steps,
                      render=workshop.render if workshop.looks(job.policy) else None)
    observation = episode.observe()
    invalid = 0
    while not episode.done:
        try:
            action = policy.act(observation)
        except InvalidAnswerError as err:
            invalid += 1
            action = ""
            observation = episode.idle(str(err))
        else:
            observation = episode.step(action)
        if trace is not None:
            trace.append({"step": observation.step, "action": action,
                          "pose": observation.pose.to_list(), "feedback": observation.feedback,
                          "stages_done": observation.stages_done,
                          "answer": getattr(policy, "last_answer", None)})
    steps = len(episode.actions)
    spl = (plan.reference_steps / max(steps, plan.reference_steps)) if episode.success else 0.0
    cost = policy.cost
    return Outcome(job.key, job.policy, job.setting, job.run, case.id, case.task.type,
                   episode.success, steps, plan.reference_steps, spl,
                   bool(plan.blocked) and episode.met_closure(plan.approach), len(episode.bumps),
                   invalid, cost.prompts, cost.images, cost.tokens, tuple(episode.actions))


def trace_path(folder: Path, job: Job) -> Path:
    """Where the step trace of ``job`` is written."""
    setting = job.setting.replace("/", "-").replace(":", "-")
    return folder / "traces" / job.policy / setting / f"run{job.run}" / f"{job.case}.jsonl"


def jobs_for(policies: Iterable[str], settings: Iterable[Setting], runs: int,
             cases: Sequence[Case]) -> list[Job]:
    """Every episode of the benchmark, policy by policy."""
    return [Job(policy, setting.key, run, case.id) for policy in policies
            for setting in settings for run in range(runs) for case in cases]


def read_outcomes(folder: Path) -> list[Outcome]:
    """The episodes already finished in ``folder`` (a cut-off last line is ignored).

    Raises:
        WarehouseError: a line other than the last is not an outcome.
    """
    path = folder / EPISODES
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    outcomes = []
    for n, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            outcomes.append(Outcome.from_json(line))
        except WarehouseError:
            if n == len(lines) - 1:
                break  # the process was stopped while writing it
            raise
    return outcomes


_WORKER: dict[str, tuple[Workshop, Path]] = {}


def _init(workshop: Workshop, folder: Path) -> None:
    _WORKER["workshop"] = (workshop, folder)


def _work(job: Job) -> Outcome:
    workshop, folder = _WORKER["workshop"]
    rows: list[dict[str, object]] = []
    outcome = run_episode(workshop, job, trace=rows)
    path = trace_path(folder, job)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return outcome


def run_jobs(folder: Path, jobs: Sequence[Job], workshop: Workshop, *, workers: int = 1,
             progress: bool = True) -> list[Outcome]:
    """Run the jobs not yet in ``folder``'s ``episodes.jsonl`` and return every outcome there.

    Raises:
        WarehouseError: the layout or cases cannot be read, or the folder holds bad lines.
    """
    folder.mkdir(parents=True, exist_ok=True)
    _drop_cut_line(folder / EPISODES)
    done = {o.key for o in read_outcomes(folder)}
    todo = [job for job in jobs if job.key not in done]
    _ = workshop.cases  # fail here, not in a worker, on a bad file
    _init(workshop, folder)
    bar = tqdm(total=len(todo), desc="memtransfer episodes", unit="ep", file=sys.stderr,
               disable=not progress)
    with (folder / EPISODES).open("a", encoding="utf-8") as out:
        for outcome in _outcomes(todo, workers, workshop, folder):
            out.write(outcome.to_json() + "\n")
            out.flush()
            bar.update(1)
    bar.close()
    return read_outcomes(folder)


def _drop_cut_line(path: Path) -> None:
    """Remove a last line a stop cut off, so that new lines do not join it."""
    if not path.is_file():
        return
    text = path.read_text(encoding="utf-8")
    if text and not text.endswith("\n"):
        path.write_text(text[:text.rfind("\n") + 1], encoding="utf-8")


def _outcomes(todo: Sequence[Job], workers: int, workshop: Workshop, folder: Path
              ) -> Iterator[Outcome]:
    if workers <= 1 or len(todo) < 2:
        for job in todo:
            yield _work(job)
        return
    context = multiprocessing.get_context("spawn")
    fresh = Workshop(workshop.layout_path, workshop.cases_path, workshop.model)
    with context.Pool(workers, initializer=_init, initargs=(fresh, folder)) as pool:
        yield from pool.imap_unordered(_work, todo, chunksize=8)
