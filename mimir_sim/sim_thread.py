"""The one thread that touches a simulator: idle stepping paced to wall time, and queued jobs.

Rendering needs its GL context in one thread, and MuJoCo's state must not change under a
reader, so everything that uses the simulator (stepping, rendering, primitives, judging) runs in
:class:`SimThread` under :attr:`SimThread.lock`. With no job queued the thread advances the
physics in chunks of ``step_chunk`` s; a job (a primitive, a service request) runs between
chunks while its caller waits. :meth:`SimThread.pace` keeps simulation time from running faster
than ``real_time_factor`` times wall time; step listeners call it, and the thread waits
between chunks, outside the lock.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mimir_sim.sim import KitchenSim


class SimThreadStoppedError(RuntimeError):
    """The simulation thread stopped (or is stopping) before a job ran."""


@dataclass
class _Job:
    """Work for the simulation thread; the caller waits on ``done``."""

    run: Callable[[], Any]
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: Exception | None = None


class SimThread:
    """Runs a simulator in a thread of its own.

    Args:
        sim: the simulator; the thread shuts it down when it ends.
        step_chunk: simulation time advanced per idle step (s).
        real_time_factor: largest ratio of simulation to wall time; 0 runs as fast as possible.
        setup: called once in the thread, under the lock, before the first step.
        on_failure: called with the exception that ended the thread's loop; returns whether it
            is a failure to re-raise (``False`` for an expected end, such as shutdown).
        on_job_failed: called with the exception a job raised (before its caller gets it).
    """

    def __init__(
        self,
        sim: KitchenSim,
        step_chunk: float,
        real_time_factor: float,
        *,
        setup: Callable[[], None],
        on_failure: Callable[[Exception], bool],
        on_job_failed: Callable[[Exception], None] = lambda _err: None,
    ) -> None:
        self.sim = sim
        self.lock = threading.RLock()  # re-entrant: jobs may call helpers that lock too
        self._step_chunk = step_chunk
        self._rtf = real_time_factor
        self._setup = setup
        self._on_failure = on_failure
        self._on_job_failed = on_job_failed
        self._jobs: queue.Queue[_Job] = queue.Queue()
        self._stop = threading.Event()
        self._pace_anchor: tuple[float, float] | None = None
        self._owed = 0.0  # s to wait after the current chunk (pacing)
        self._thread = threading.Thread(target=self._loop, name="sim_bridge", daemon=True)

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stop.is_set()

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def stop(self, timeout: float = 60.0) -> None:
        """Ask the thread to stop and wait for it (it shuts the simulator down)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=timeout)

    def submit(self, run: Callable[[], Any]) -> Any:
        """Run ``run`` in the simulation thread and return its result (re-raising its error).

        Raises:
            SimThreadStoppedError: the thread stopped before the job ran.
        """
        job = _Job(run)
        self._jobs.put(job)
        while not job.done.wait(0.2):
            if not self._thread.is_alive():
                raise SimThreadStoppedError("the simulation thread stopped before the request ran")
        if job.error is not None:
            raise job.error
        return job.result

    def pace(self, sim_time: float) -> None:
        """Note how long to wait so simulation time runs at most ``real_time_factor`` times wall
        time; the thread waits after the current chunk, outside the lock, so the robot's RPC
        servers and other users of the lock get their turn while it waits."""
        rtf = self._rtf
        if rtf <= 0.0 or self._stop.is_set():
            return
        now = time.monotonic()
        anchor = self._pace_anchor
        if anchor is None or sim_time < anchor[1]:
            self._pace_anchor = (now, sim_time)
            return
        due = anchor[0] + (sim_time - anchor[1]) / rtf
        if due > now:
            self._owed = max(self._owed, min(due - now, 1.0))
        elif now - due > 1.0:
            self._pace_anchor = (now, sim_time)  # fell behind (rendering): do not race to catch up

    def _wait_owed(self) -> None:
        owed, self._owed = self._owed, 0.0
        if owed > 0.0:
            self._stop.wait(owed)

    def _loop(self) -> None:
        try:
            with self.lock:
                self._setup()
            while not self._stop.is_set():
                try:
                    job = self._jobs.get_nowait()
                except queue.Empty:
                    with self.lock:
                        self.sim.step_seconds(self._step_chunk)
                    self._wait_owed()
                    continue
                self._run_job(job)
        except Exception as err:
            if self._on_failure(err):
                raise
        finally:
            with self.lock:
                self.sim.shutdown()
            while not self._jobs.empty():
                job = self._jobs.get_nowait()
                job.error = SimThreadStoppedError("the sim bridge is shutting down")
                job.done.set()

    def _run_job(self, job: _Job) -> None:
        try:
            with self.lock:
                job.result = job.run()
        except Exception as err:  # noqa: BLE001 - handed to the waiting caller, which re-raises
            self._on_job_failed(err)
            job.error = err
        finally:
            self._pace_anchor = None  # a job's wall time must not be caught up afterwards
            self._owed = 0.0
            job.done.set()
