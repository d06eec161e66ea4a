"""Events stored under world memory's lock go out after it is released, in order."""

from __future__ import annotations

import threading

import pytest

from mimir.nodes.memory.outbox import LockedOutbox
from mimir_memory.events import EventKind, MemoryEvent, Source

WAIT_S = 5.0


def _event(number: int) -> MemoryEvent:
    return MemoryEvent(kind=EventKind.NODE_CREATED, stamp=float(number),
                       source=Source.PERCEPTION, payload={"node_id": f"cup_{number}"})


def test_events_go_out_after_the_lock_is_released() -> None:
    published: list[float] = []
    memory_free: list[bool] = []
    others: list[threading.Thread] = []

    def publish(event: MemoryEvent) -> None:
        # another user can take memory while this one publishes
        free = threading.Event()

        def take() -> None:
            with memory.hold():
                free.set()

        other = threading.Thread(target=take)
        other.start()
        memory_free.append(free.wait(WAIT_S))
        others.append(other)  # it publishes (nothing) after this publication ends
        published.append(event.stamp)

    memory = LockedOutbox(publish)
    with memory.hold(writer=True):
        memory.emit([_event(1)])
        assert published == []  # nothing goes out while memory is held
    # (a second user holds memory until it can publish after this one, to keep the order)
    assert published == [1.0] and memory_free == [True]
    for other in others:
        other.join(WAIT_S)
        assert not other.is_alive()


def test_events_keep_their_order_across_users() -> None:
    published: list[float] = []
    writer_publishing, go_on = threading.Event(), threading.Event()

    def publish(event: MemoryEvent) -> None:
        if event.stamp == 1.0:
            writer_publishing.set()
            assert go_on.wait(WAIT_S)
        published.append(event.stamp)

    memory = LockedOutbox(publish)

    def writer() -> None:
        with memory.hold(writer=True):
            memory.emit([_event(1), _event(2)])

    thread = threading.Thread(target=writer)
    thread.start()
    assert writer_publishing.wait(WAIT_S)
    caller_stored = threading.Event()

    def caller() -> None:
        with memory.hold():  # memory is free, but the writer's events are still going out
            memory.emit([_event(3)])
            caller_stored.set()

    second = threading.Thread(target=caller)
    second.start()
    assert caller_stored.wait(WAIT_S)
    go_on.set()
    for t in (thread, second):
        t.join(WAIT_S)
    assert published == [1.0, 2.0, 3.0]


def test_stored_events_go_out_when_the_user_fails_afterwards() -> None:
    published: list[float] = []
    memory = LockedOutbox(lambda event: published.append(event.stamp))
    with pytest.raises(RuntimeError), memory.hold():
        memory.emit([_event(1)])
        raise RuntimeError("building the response failed")
    assert published == [1.0]
    with memory.hold():  # the locks were released
        pass
