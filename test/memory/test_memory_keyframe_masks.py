"""A keyframe keeps the segmentation it was taken with: stored losslessly beside the image,
read back as it was given, removed with its frame, refused when malformed, and absent (not
invented) for frames saved without one or in stores of the previous schema."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from memory_helpers import as_older_keyframe_schema, textured

from mimir_memory.errors import InvalidImageError, SchemaVersionError, StorageError
from mimir_memory.keyframes import KeyframeStore, Trigger, files_on_disk


def _instances(seed: int, height: int = 120, width: int = 160) -> np.ndarray:
    """Three rectangular instances with ids that need 16 bits."""
    ids = np.zeros((height, width), dtype=np.uint16)
    ids[10 + seed:50, 20:60] = 7
    ids[60:110, 30:90] = 300
    ids[20:40, 100:150 - seed] = 65535
    return ids


def test_a_segmentation_is_stored_beside_its_frame_and_read_back_exactly(tmp_path: Path) -> None:
    with KeyframeStore.open(tmp_path / "kf") as store:
        ids = _instances(0)
        saved = store.save(textured(1), timestamp=2.0, camera="pole", trigger=Trigger.NEW_NODE,
                           node_ids=["mug_1"], instances=ids)
        assert saved.saved and saved.frame_id
        record = store.get(saved.frame_id)
        assert record.mask_path is not None and record.mask_path.parent == store.mask_dir
        back = store.load_instances(saved.frame_id)
        assert back is not None and back.dtype == np.uint16 and np.array_equal(back, ids)
        # the stored size counts the instance file
        assert record.bytes > record.image_path.stat().st_size + record.thumb_path.stat().st_size
        plain = store.save(textured(2), timestamp=3.0, camera="pole", trigger=Trigger.NEW_NODE,
                           node_ids=["mug_2"])
        assert plain.frame_id and store.get(plain.frame_id).mask_path is None
        assert store.load_instances(plain.frame_id) is None
        assert store.index_from_log() == store.index_from_tables()
        assert store.index_from_tables()[saved.frame_id]["mask_file"] == record.mask_path.name


def test_retention_removes_a_frames_segmentation_with_it(tmp_path: Path) -> None:
    with KeyframeStore.open(tmp_path / "kf") as store:
        old = store.save(textured(3), timestamp=1.0, camera="pole", trigger=Trigger.NEW_NODE,
                         node_ids=["a"], instances=_instances(1))
        kept = store.save(textured(4), timestamp=2.0, camera="pole",
                          trigger=Trigger.INTERACTION_POST, instances=_instances(2))
        assert len(list(store.mask_dir.iterdir())) == 2
        assert store.enforce_budget(0, stamp=10.0) == [old.frame_id]
        kept_record = store.get(str(kept.frame_id))
        assert kept_record.mask_path is not None
        assert list(store.mask_dir.iterdir()) == [kept_record.mask_path]
        assert files_on_disk(store) == {kept_record.image_path.name, kept_record.mask_path.name}
        assert store.index_from_log() == store.index_from_tables()


@pytest.mark.parametrize("bad", [
    np.zeros((120, 160), dtype=np.uint8),      # 8 bits cannot hold every id
    np.zeros((120, 160), dtype=np.int32),
    np.zeros((60, 80), dtype=np.uint16),       # not the frame's size
    np.zeros((120, 160, 1), dtype=np.uint16),
    [[0, 1], [1, 0]],
])
def test_a_malformed_segmentation_is_refused_and_nothing_is_stored(tmp_path: Path,
                                                                   bad: object) -> None:
    with KeyframeStore.open(tmp_path / "kf") as store:
        with pytest.raises(InvalidImageError, match="instances"):
            store.save(textured(5), timestamp=1.0, camera="pole",
                       trigger=Trigger.INTERACTION_PRE, instances=bad)  # type: ignore[arg-type]
        assert store.count() == 0 and not files_on_disk(store)
        assert store.index_from_log() == {}


def test_a_damaged_segmentation_file_is_a_storage_error(tmp_path: Path) -> None:
    with KeyframeStore.open(tmp_path / "kf") as store:
        saved = store.save(textured(6), timestamp=1.0, camera="pole",
                           trigger=Trigger.INTERACTION_PRE, instances=_instances(3))
        path = store.get(str(saved.frame_id)).mask_path
        assert path is not None
        path.write_bytes(b"not a png")
        with pytest.raises(StorageError, match="16-bit instance image"):
            store.load_instances(str(saved.frame_id))
        path.unlink()
        with pytest.raises(StorageError):
            store.load_instances(str(saved.frame_id))


def test_a_store_of_schema_3_is_migrated_and_its_frames_have_no_segmentation(
        tmp_path: Path) -> None:
    root = tmp_path / "kf"
    with KeyframeStore.open(root) as store:
        old = str(store.save(textured(7), timestamp=1.0, camera="pole",
                             trigger=Trigger.INTERACTION_PRE).frame_id)
    as_older_keyframe_schema(root, 3, "mask_file")
    with pytest.raises(SchemaVersionError, match="writer"):
        KeyframeStore.open(root, readonly=True)
    with KeyframeStore.open(root) as store:
        assert store.get(old).mask_path is None and store.load_instances(old) is None
        new = str(store.save(textured(8), timestamp=2.0, camera="pole",
                             trigger=Trigger.INTERACTION_POST, instances=_instances(4)).frame_id)
        assert np.array_equal(store.load_instances(new), _instances(4))
        assert store.index_from_log() == store.index_from_tables()
