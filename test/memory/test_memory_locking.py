"""The writer of a CallersFirstLock gives way to callers; they wait for at most one unit."""

from __future__ import annotations

import threading
import time

from mimir_memory.locking import CallersFirstLock

WAIT_S = 5.0


def test_a_caller_waits_for_the_unit_in_progress_and_the_writer_then_waits_for_it() -> None:
    lock = CallersFirstLock()
    log: list[str] = []
    in_unit, finish_unit = threading.Event(), threading.Event()
    caller_in, caller_done = threading.Event(), threading.Event()

    def writer() -> None:
        with lock.writer():
            log.append("unit 1")
            in_unit.set()
            assert finish_unit.wait(WAIT_S)
        with lock.writer():  # the caller came during unit 1: it goes first
            log.append("unit 2")

    def caller() -> None:
        with lock.caller():
            log.append("caller")
            caller_in.set()
            assert caller_done.wait(WAIT_S)

    threads = [threading.Thread(target=writer)]
    threads[0].start()
    assert in_unit.wait(WAIT_S)
    threads.append(threading.Thread(target=caller))
    threads[1].start()
    time.sleep(0.05)
    assert not caller_in.is_set()  # the unit in progress keeps the mutex
    finish_unit.set()
    assert caller_in.wait(WAIT_S)
    time.sleep(0.05)
    assert log == ["unit 1", "caller"]  # no unit starts while a caller holds it
    caller_done.set()
    for thread in threads:
        thread.join(WAIT_S)
    assert log == ["unit 1", "caller", "unit 2"]


def test_the_writer_goes_on_when_the_callers_are_gone_also_after_an_error() -> None:
    lock = CallersFirstLock()
    try:
        with lock.caller():
            raise KeyError("a service failed")
    except KeyError:
        pass
    done = threading.Event()

    def writer() -> None:
        with lock.writer():
            done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    assert done.wait(WAIT_S)
    thread.join(WAIT_S)
