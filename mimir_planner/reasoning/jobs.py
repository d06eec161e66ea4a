"""One analysis per interaction id, however often and from however many threads it is asked.

The analyzer answers a repeated request for an interaction with the first answer: the first
caller of an id runs the analysis, later callers wait for it (bounded). Answers worth keeping
are remembered (the newest ``keep``); the others are forgotten so that a later request tries
again.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass
class AnalysisJob:
    """One interaction's analysis: its answer, once done, and what the caller keeps with it.

    Attributes:
        done: set when ``response`` holds the answer.
        response: the answer.
        writes: the writes behind the answer (retried when they failed).
        stamp: end of the interaction's window, s.
    """

    done: threading.Event = field(default_factory=threading.Event)
    response: Any = None
    writes: list[Any] = field(default_factory=list)
    stamp: float = 0.0


class AnalysisJobs:
    """Jobs by interaction id, safe to share between threads.

    Args:
        keep: most finished jobs remembered (oldest forgotten first).
    """

    def __init__(self, keep: int = 500) -> None:
        self._keep = keep
        self._jobs: dict[str, AnalysisJob] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._jobs)

    def claim(self, key: str) -> tuple[AnalysisJob, bool]:
        """The job of ``key`` and whether this caller owns it (must run it and finish it)."""
        with self._lock:
            job = self._jobs.get(key)
            if job is not None:
                return job, False
            job = self._jobs[key] = AnalysisJob()
            return job, True

    def finish(self, key: str, job: AnalysisJob, response: Any, *, remember: bool) -> None:
        """Records the owner's answer, wakes the waiters, forgets what is not remembered."""
        job.response = response
        job.done.set()
        with self._lock:
            if not remember:
                self._jobs.pop(key, None)
            finished = [k for k, j in self._jobs.items() if j.done.is_set()]
            for old in finished[: max(0, len(finished) - self._keep)]:
                del self._jobs[old]
