"""Generated garbage against world memory: typed refusals only, and a log that always opens.

Whatever a writer offers, :meth:`WorldMemory.append` either stores it or raises a
:class:`MemoryStoreError` and leaves the log as it was; whatever an older or broken writer put
in the log, opening it never raises and every later ordinary observation still lands.
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memory_helpers import obs

from mimir_memory.errors import MemoryStoreError
from mimir_memory.events import WORLD_KINDS, MemoryEvent, Source, Verdict, canonical_json
from mimir_memory.world import WorldMemory

NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e155, -1e308, 1e300, 2.0**31 - 1, 5e-324]),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.booleans(),
)
TEXT = st.one_of(st.text(max_size=20), st.sampled_from(["", " ", "cabinet_1", "bowl_1",
                                                        "hand", "x" * 300, "a\x00b"]))
JSON = st.recursive(
    st.one_of(st.none(), NUMBERS, TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(TEXT, inner, max_size=4)),
    max_leaves=12,
)
POINT = st.one_of(st.lists(NUMBERS, min_size=3, max_size=3), JSON)
PAYLOAD = st.fixed_dictionaries(
    {},
    optional={
        "node_id": st.one_of(TEXT, JSON), "label": st.one_of(TEXT, JSON),
        "centroid": POINT, "bbox_min": POINT, "bbox_max": POINT,
        "name": TEXT, "value": JSON, "confidence": st.one_of(NUMBERS, JSON),
        "reasoning": st.one_of(TEXT, JSON), "is_opened": JSON,
        "contents": st.one_of(st.lists(st.dictionaries(TEXT, JSON, max_size=3), max_size=3),
                              JSON),
        "is_empty": JSON, "parent_id": st.one_of(TEXT, JSON),
        "relation": st.one_of(st.sampled_from(["room", "surface", "container", "hand"]), JSON),
        "task": st.one_of(TEXT, JSON), "success": JSON, "frame_id": TEXT,
        "node_ids": st.one_of(st.lists(TEXT, max_size=3), JSON),
        "alternatives": st.one_of(st.lists(TEXT, max_size=3), JSON),
        "event_id": TEXT,
    },
)
KINDS = st.sampled_from(sorted(k.value for k in WORLD_KINDS))


def _seeded(path: Path) -> None:
    with WorldMemory.open(path) as world:
        world.ingest([obs("cabinet", [0.0, 0.0, 1.0]), obs("bowl", [1.0, 0.0, 0.8])])


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(kind=KINDS, payload=PAYLOAD, verdict=st.sampled_from(list(Verdict)),
       stamp=st.floats(min_value=0.0, max_value=1e12))
def test_append_stores_or_refuses_with_a_typed_error(kind: str, payload: dict[str, Any],
                                                     verdict: Verdict, stamp: float) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "world.db"
        _seeded(path)
        with WorldMemory.open(path) as world:
            count = world.log.count()
            try:
                event = MemoryEvent(kind=kind, stamp=stamp, source=Source.OPERATOR,  # type: ignore[arg-type]
                                    payload=payload, verdict=verdict)
                world.append([event])
            except MemoryStoreError:
                assert world.log.count() == count  # a refusal writes nothing
            world.ingest([obs("bowl", [1.01, 0.0, 0.8], stamp=2.0)])  # still usable
        with WorldMemory.open(path) as world:  # and the same graph after a restart
            assert "bowl_1" in world.state.nodes


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(kind=KINDS, payload=PAYLOAD, stamp=st.floats(min_value=0.0, max_value=1e12))
def test_any_stored_event_is_applied_or_skipped(kind: str, payload: dict[str, Any],
                                                stamp: float) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "world.db"
        _seeded(path)
        try:
            text = canonical_json(payload)
        except MemoryStoreError:
            text = '{"centroid": "NaN"}'
        with sqlite3.connect(path) as db:  # straight into the log, as a broken writer would
            db.execute("INSERT INTO events (event_id, kind, stamp, source, verdict, evidence,"
                       " payload, digest) VALUES ('raw', ?, ?, 'perception', 'admit', ?, ?, 'x')",
                       [kind, stamp, canonical_json({"keyframe_ids": [], "detection_ids": [],
                                                     "event_ids": []}), text])
        for _ in range(2):
            with WorldMemory.open(path) as world:
                assert {"cabinet_1", "bowl_1"} <= set(world.state.nodes)
                world.ingest([obs("bowl", [1.0, 0.0, 0.8], stamp=3.0),
                              obs("mug", [3.0, 0.0, 0.8], stamp=3.0)])
                assert world.nodes_near([1.0, 0.0, 0.8], 0.5, "bowl")
        with WorldMemory.open(path) as world:
            if world.skipped_events:
                world.retract_skipped(stamp=4.0)
                assert world.skipped_events == []
