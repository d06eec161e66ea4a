"""Keyframe store: filters, files, metadata, queries, retention and bad input."""

from __future__ import annotations

import errno
import math
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from memory_helpers import textured

from mimir_memory import files as files_module
from mimir_memory import keyframes as keyframes_module
from mimir_memory.config import KeyframeConfig, MemoryConfig
from mimir_memory.errors import (
    ImageTooLargeError,
    InvalidImageError,
    InvalidValueError,
    ReadOnlyStoreError,
    SchemaVersionError,
    StorageError,
    UnknownKeyframeError,
)
from mimir_memory.keyframes import KeyframeLabel, KeyframeStore, Trigger, dhash, files_on_disk


@pytest.fixture
def store(tmp_path: Path) -> Iterator[KeyframeStore]:
    config = MemoryConfig(keyframes=KeyframeConfig(image_format="png", max_pixels=640 * 480))
    kf = KeyframeStore.open(tmp_path / "kf", config=config)
    yield kf
    kf.close()


#: the peak of one interaction: saving it twice stores it once.
PEAK: dict[str, Any] = {"timestamp": 172.4, "camera": "base1",
                        "trigger": Trigger.INTERACTION_PEAK, "session": "20260603_142210"}


def test_interaction_frame_is_stored_with_files_and_metadata(store: KeyframeStore) -> None:
    image = textured(1)
    result = store.save(
        image,
        **PEAK,
        action="OpenCabinet",
        node_ids=["cabinet_3", "banana_1"],
        robot_pose=[1.0, 2.0, 0.5],
        tags=["banana", "mug"],
        labels=[("cabinet interior", "analyzer")],
        caption="open cabinet with fruit",
    )
    assert result.saved and result.reason == "saved" and result.frame_id
    record = store.get(result.frame_id)
    assert record.node_ids == ("cabinet_3", "banana_1")
    assert record.robot_pose == (1.0, 2.0, 0.5)
    assert record.labels[0] == KeyframeLabel("cabinet interior", "analyzer", 172.4)
    data = record.to_dict()
    assert data["scene_graph_nodes"] == ["cabinet_3", "banana_1"]
    assert data["trigger"] == "interaction_peak" and data["session_id"] == "20260603_142210"
    assert record.image_path.parent == store.image_dir
    assert not record.image_path.name.startswith(".tmp")
    np.testing.assert_array_equal(store.load_image(result.frame_id), image)
    thumb = store.load_image(result.frame_id, thumbnail=True)
    assert thumb.shape == (120, 160, 3)
    again = store.save(image, **PEAK)
    assert not again.saved and again.reason == "exists" and again.frame_id == result.frame_id
    assert store.count() == 1


def test_file_names_come_from_content_not_metadata(store: KeyframeStore) -> None:
    image = textured(2)
    a = store.save(image, timestamp=1.0, camera="c", trigger="interaction_pre", caption="../x")
    b = store.save(image, timestamp=2.0, camera="c", trigger="interaction_post")
    assert a.frame_id != b.frame_id
    ra, rb = store.get(str(a.frame_id)), store.get(str(b.frame_id))
    assert ra.image_path == rb.image_path  # same pixels share one file
    assert all(c in "0123456789abcdef." for c in ra.image_path.name.replace("png", ""))
    assert len(list(store.image_dir.iterdir())) == 1


def test_perception_filters_blank_blurry_and_duplicates(store: KeyframeStore) -> None:
    blank = np.full((120, 160, 3), 128, np.uint8)
    assert store.save(blank, timestamp=1.0, camera="c", trigger="new_node").reason == "blank"
    blurry = cv2.GaussianBlur(textured(3), (0, 0), 12)
    assert store.save(blurry, timestamp=1.0, camera="c", trigger="new_node").reason == "blurry"
    # Interaction frames are kept whatever they look like.
    assert store.save(blank, timestamp=1.0, camera="c", trigger="interaction_pre").saved

    image = textured(4)
    first = store.save(image, timestamp=2.0, camera="c", trigger="new_node", node_ids=["mug_1"])
    assert first.saved
    noisy = np.clip(
        image.astype(int) + np.random.default_rng(0).integers(-3, 4, image.shape), 0, 255
    ).astype(np.uint8)
    dup = store.save(noisy, timestamp=3.0, camera="c", trigger="node_update", node_ids=["mug_1"])
    assert dup.reason == "duplicate" and dup.duplicate_of == first.frame_id
    # A frame showing a node the recent frame did not show is kept.
    assert store.save(
        noisy, timestamp=3.0, camera="c", trigger="new_node", node_ids=["mug_1", "bowl_1"]
    ).saved
    # Other camera or outside the time window: kept.
    assert store.save(noisy, timestamp=3.5, camera="d", trigger="node_update").saved
    assert store.save(
        noisy, timestamp=500.0, camera="c", trigger="node_update", node_ids=["mug_1"]
    ).saved
    # A genuinely different view is kept.
    assert store.save(
        textured(5), timestamp=4.0, camera="c", trigger="node_update", node_ids=["mug_1"]
    ).saved


def test_duplicate_memory_survives_reopen(tmp_path: Path) -> None:
    image = textured(6)
    with KeyframeStore.open(tmp_path / "kf") as kf:
        assert kf.save(image, timestamp=1.0, camera="c", trigger="new_node").saved
    with KeyframeStore.open(tmp_path / "kf") as kf:
        assert kf.save(image, timestamp=2.0, camera="c", trigger="new_node").reason == "duplicate"


def test_labels_are_appended_and_images_never_rewritten(store: KeyframeStore) -> None:
    result = store.save(
        textured(7),
        timestamp=1.0,
        camera="c",
        trigger="interaction_post",
        labels=[("drawer", "perception")],
    )
    frame_id = str(result.frame_id)
    path = store.get(frame_id).image_path
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    record = store.add_labels(frame_id, [("Spoiled Bananas", "analyzer")], stamp=5.0)
    assert [lab.label for lab in record.labels] == ["drawer", "Spoiled Bananas"]
    store.add_labels(frame_id, [KeyframeLabel("open drawer interior", "analyzer", 6.0)], stamp=6.0)
    assert len(store.get(frame_id).labels) == 3
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
    assert [r.frame_id for r in store.query(label="BANANA")] == [frame_id]
    with pytest.raises(UnknownKeyframeError):
        store.add_labels("nope", [("x", "analyzer")], stamp=1.0)
    with pytest.raises(InvalidValueError):
        store.add_labels(frame_id, [("", "analyzer")], stamp=1.0)
    with pytest.raises(InvalidValueError):
        store.add_labels(frame_id, [], stamp=1.0)


def test_query_filters_and_newest_first(store: KeyframeStore) -> None:
    ids = {}
    specs = [
        (1.0, "new_node", ["mug_1"], "base", ["mug"]),
        (2.0, "interaction_pre", ["cabinet_1"], "wrist", []),
        (3.0, "interaction_post", ["cabinet_1", "mug_1"], "wrist", ["open"]),
        (4.0, "node_update", ["bowl_1"], "base", []),
    ]
    for seed, (stamp, trig, nodes, cam, tags) in enumerate(specs):
        res = store.save(
            textured(10 + seed),
            timestamp=stamp,
            camera=cam,
            trigger=trig,
            node_ids=nodes,
            tags=tags,
        )
        ids[stamp] = res.frame_id
    assert [r.timestamp for r in store.query()] == [4.0, 3.0, 2.0, 1.0]
    assert [r.timestamp for r in store.query(node_ids=["mug_1"])] == [3.0, 1.0]
    assert [r.timestamp for r in store.query(start=2.0, end=3.0)] == [3.0, 2.0]
    assert [r.timestamp for r in store.query(trigger="interaction_pre")] == [2.0]
    assert [r.timestamp for r in store.query(trigger=["new_node", "node_update"])] == [4.0, 1.0]
    assert [r.timestamp for r in store.query(camera="wrist", limit=1)] == [3.0]
    assert [r.timestamp for r in store.query(label="MU")] == [1.0]
    assert store.query(node_ids=[]) == []
    with pytest.raises(InvalidValueError):
        store.query(limit=0)
    with pytest.raises(InvalidValueError):
        store.query(trigger="bogus")
    with pytest.raises(InvalidValueError):
        store.query(start=math.nan)
    with pytest.raises(InvalidValueError):
        store.query(node_ids="mug_1")


def test_bad_images_and_metadata_are_refused(store: KeyframeStore) -> None:
    ok = textured(20)
    cases = [
        (ok.astype(np.float32), InvalidImageError),
        (ok[:, :, :2], InvalidImageError),
        (np.zeros((0, 10, 3), np.uint8), InvalidImageError),
        ("image.png", InvalidImageError),
        (np.zeros((481, 640, 3), np.uint8), ImageTooLargeError),
    ]
    for image, error in cases:
        with pytest.raises(error):
            store.save(image, timestamp=1.0, camera="c", trigger="interaction_pre")  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError):
        store.save(ok, timestamp=math.nan, camera="c", trigger="interaction_pre")
    with pytest.raises(InvalidValueError):
        store.save(ok, timestamp=1.0, camera="c", trigger="sometimes")
    with pytest.raises(InvalidValueError):
        store.save(ok, timestamp=1.0, camera="", trigger="new_node")
    with pytest.raises(InvalidValueError):
        store.save(ok, timestamp=1.0, camera="c", trigger="new_node", robot_pose=[0, math.inf, 0])
    with pytest.raises(InvalidValueError):
        store.save(ok, timestamp=1.0, camera="c", trigger="new_node", node_ids="mug_1")
    with pytest.raises(UnknownKeyframeError):
        store.get("deadbeef")
    with pytest.raises(UnknownKeyframeError):
        store.load_image("deadbeef", thumbnail=True)
    assert store.count() == 0 and files_on_disk(store) == set()
    grey = cv2.cvtColor(ok, cv2.COLOR_BGR2GRAY)
    res = store.save(grey, timestamp=1.0, camera="c", trigger="interaction_pre")
    assert store.load_image(str(res.frame_id)).shape == grey.shape


def test_full_disk_while_writing_files_leaves_nothing(
    store: KeyframeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = keyframes_module.write_file_atomic
    calls = {"n": 0}

    def second_fails(path: Path, data: bytes, *, durable: bool = True) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise StorageError(errno.ENOSPC, "No space left on device")
        real(path, data, durable=durable)

    monkeypatch.setattr(keyframes_module, "write_file_atomic", second_fails)
    with pytest.raises(StorageError) as info:
        store.save(textured(21), timestamp=1.0, camera="c", trigger="interaction_pre")
    assert info.value.errno == errno.ENOSPC
    assert store.count() == 0 and store.log.count() == 0
    assert files_on_disk(store) == set()


def test_os_level_failure_leaves_no_temp_file(
    store: KeyframeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_space(src: str, dst: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files_module.os, "replace", no_space)
    with pytest.raises(StorageError):
        store.save(textured(22), timestamp=1.0, camera="c", trigger="interaction_pre")
    monkeypatch.undo()
    assert files_on_disk(store) == set() and store.count() == 0


def test_database_failure_removes_new_files(
    store: KeyframeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(*args: object) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(KeyframeStore, "_insert_row", staticmethod(full))
    with pytest.raises(StorageError) as info:
        store.save(textured(23), timestamp=1.0, camera="c", trigger="interaction_pre")
    assert info.value.errno == errno.ENOSPC
    monkeypatch.undo()
    assert files_on_disk(store) == set() and store.count() == 0 and store.log.count() == 0


def test_retention_keeps_interaction_and_protected_frames(store: KeyframeStore) -> None:
    perception = []
    for i in range(6):
        res = store.save(
            textured(30 + i), timestamp=float(i), camera="c", trigger="new_node", node_ids=[f"n{i}"]
        )
        perception.append(str(res.frame_id))
    inter = str(
        store.save(textured(40), timestamp=0.5, camera="c", trigger="interaction_pre").frame_id
    )
    total = store.total_bytes()
    assert total == sum(store.get(f).bytes for f in [*perception, inter])
    removed = store.enforce_budget(0, protected={perception[1]}, stamp=100.0)
    assert removed == [perception[0], *perception[2:]]
    assert {r.frame_id for r in store.query()} == {inter, perception[1]}
    assert len(files_on_disk(store)) == 4  # image + thumbnail of the two survivors
    assert store.enforce_budget(10**9, stamp=101.0) == []
    assert store.index_from_log() == store.index_from_tables()
    with pytest.raises(InvalidValueError):
        store.enforce_budget(-1, stamp=1.0)


def test_retention_with_callable_protection_and_budget(store: KeyframeStore) -> None:
    ids = [
        str(
            store.save(
                textured(50 + i),
                timestamp=float(i),
                camera="c",
                trigger="new_node",
                node_ids=[f"n{i}"],
            ).frame_id
        )
        for i in range(4)
    ]
    second = store.get(ids[1]).bytes
    removed = store.enforce_budget(store.total_bytes() - second, lambda f: f == ids[0], stamp=9.0)
    assert removed == [ids[1]]


def test_log_replay_equals_index(store: KeyframeStore) -> None:
    for i in range(3):
        store.save(
            textured(60 + i),
            timestamp=float(i),
            camera="c",
            trigger="interaction_post",
            node_ids=["a"],
            labels=[("x", "analyzer")],
        )
    first = store.query(limit=1)[0].frame_id
    store.add_labels(first, [("later", "analyzer")], stamp=9.0)
    assert store.index_from_log() == store.index_from_tables()


def test_readonly_store_and_newer_schema(tmp_path: Path) -> None:
    with KeyframeStore.open(tmp_path / "kf") as kf:
        fid = str(kf.save(textured(70), timestamp=1.0, camera="c", trigger="new_node").frame_id)
    with KeyframeStore.open(tmp_path / "kf", readonly=True) as reader:
        assert reader.get(fid).frame_id == fid
        files_before = files_on_disk(reader)
        with pytest.raises(ReadOnlyStoreError):
            reader.save(textured(71), timestamp=2.0, camera="c", trigger="interaction_pre")
        with pytest.raises(ReadOnlyStoreError):
            reader.add_labels(fid, [("x", "analyzer")], stamp=3.0)
        with pytest.raises(ReadOnlyStoreError):
            reader.enforce_budget(0, stamp=3.0)
        assert files_on_disk(reader) == files_before and reader.count() == 1
    with sqlite3.connect(tmp_path / "kf" / "keyframes.db") as conn:
        conn.execute("UPDATE meta SET value = '7' WHERE key = 'schema_version'")
    with pytest.raises(SchemaVersionError):
        KeyframeStore.open(tmp_path / "kf")
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    with pytest.raises(StorageError):
        KeyframeStore.open(blocker / "kf")


def test_dhash_is_stable_and_sensitive() -> None:
    a = cv2.cvtColor(textured(80), cv2.COLOR_BGR2GRAY)
    b = cv2.cvtColor(textured(81), cv2.COLOR_BGR2GRAY)
    assert dhash(a) == dhash(a.copy())
    assert (dhash(a) ^ dhash(b)).bit_count() > 10
    assert 0 <= dhash(a) < 2**64


def test_real_kitchen_frames_dedup_and_round_trip(sevenscenes_dir: Path, tmp_path: Path) -> None:
    paths = sorted(sevenscenes_dir.glob("frame-*.color.jpg"))[:24]
    assert len(paths) == 24
    with KeyframeStore.open(tmp_path / "kf") as kf:
        outcomes = []
        for i, path in enumerate(paths):
            image = cv2.imread(str(path), cv2.IMREAD_COLOR)
            assert image is not None
            res = kf.save(
                image, timestamp=i * 0.17, camera="base", trigger="new_node", node_ids=["cabinet_1"]
            )
            outcomes.append(res.reason)
        assert outcomes[0] == "saved"
        assert "duplicate" in outcomes  # the hand-held camera lingers on the same view
        assert 0 < kf.count() < len(paths)
        newest = kf.query(limit=1)[0]
        assert kf.load_image(newest.frame_id).shape == (480, 640, 3)
        assert kf.load_image(newest.frame_id, thumbnail=True).shape == (120, 160, 3)
