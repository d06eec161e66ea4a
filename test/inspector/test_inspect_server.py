"""``mimir inspect``'s server over real HTTP on a memory folder written by the memory core: every
view, time travel, escaping, read-only access, path traversal, a writer working meanwhile, and
folders it cannot show."""

from __future__ import annotations

import hashlib
import html
import json
import re
import shutil
import sqlite3
import threading
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote

import pytest
from inspect_helpers import LOCK_STAMP, MARKUP, RunFolder, Serving, make_run_folder

from mimir.cli import main
from mimir.inspect.folder import InspectError, MemoryFolder
from mimir.inspect.server import is_loopback
from mimir_memory.world import WorldMemory


@pytest.fixture
def run(tmp_path: Path) -> RunFolder:
    return make_run_folder(tmp_path / "run")


def get(url: str, method: str = "GET") -> tuple[int, str, bytes]:
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, reply.headers.get("Content-Type", ""), reply.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers.get("Content-Type", ""), err.read()


def text(url: str) -> str:
    status, _, body = get(url)
    assert status == 200, body[:300]
    return body.decode()


def digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_every_view_answers_and_shows_what_memory_holds(run: RunFolder) -> None:
    with Serving(run.root) as s:
        home = text(s.url)
        assert 'data-node="cabinet_1"' in home and "locked" in home
        node = text(s.url + "node/cabinet_1")
        assert 'data-property="locked"' in node
        assert f'href="/keyframe/{run.lock_keyframe}"' in node  # the evidence keyframe
        assert "robot_state:gripper@38.000" in node
        assert "banana" in text(s.url + "node/cabinet_2")
        assert "interaction_post" in text(s.url + "keyframes")
        assert "property_set" in text(s.url + "timeline")
        planner = text(s.url + "planner")
        assert "Find the banana." in planner and "property_set" in planner  # writes in the step
        agenda = text(s.url + "agenda")
        assert "g001_find" in agenda and "locked" in agenda
        keyframe = text(s.url + f"keyframe/{run.lock_keyframe}")
        assert f'src="/image/{run.lock_keyframe}"' in keyframe
        # its node's box, projected through the camera view recorded with the frame
        assert 'class=node-box data-node="cabinet_1"' in keyframe
        assert "not in view" not in keyframe
        first = text(s.url + f"keyframe/{run.keyframes[0]}")  # saved without a camera view
        assert "no camera view was recorded" in first and "node-box" not in first
        status, kind, image = get(s.url + f"image/{run.lock_keyframe}")
        assert status == 200 and kind == "image/jpeg" and image[:2] == b"\xff\xd8"
        state = json.loads(text(s.url + "api/state"))
        assert state["revision"] > 0


def test_a_keyframe_draws_the_box_memory_held_when_it_was_taken(run: RunFolder) -> None:
    """cabinet_1 stands straight ahead of the lock frame's camera, so the projection of its box
    straddles the image centre."""
    with Serving(run.memory) as s:
        keyframe = text(s.url + f"keyframe/{run.lock_keyframe}")
    match = re.search(r'data-node="cabinet_1"><path d="([^"]+)"', keyframe)
    assert match, keyframe[:2000]
    numbers = [float(v) for v in re.findall(r"-?\d+\.\d+", match.group(1))]
    us, vs = numbers[0::2], numbers[1::2]
    assert len(us) == 24  # twelve edges
    assert min(us) < 159.5 < max(us) and min(vs) < 119.5 < max(vs)


def test_time_travel_shows_memory_before_the_lock_was_learned(run: RunFolder) -> None:
    with Serving(run.root) as s:
        before = text(s.url + f"node/cabinet_1?t={LOCK_STAMP - 1}")
        after = text(s.url + f"node/cabinet_1?t={LOCK_STAMP}")
        assert 'data-property="locked"' not in before
        assert 'data-property="locked"' in after
        assert "banana" not in text(s.url + "node/cabinet_2?t=45")
        # the banana node itself did exist then; a time before it answers 404
        status, _, _ = get(s.url + "node/cabinet_1?t=0.5")
        assert status == 404


def test_model_and_operator_text_is_escaped_everywhere(run: RunFolder) -> None:
    escaped = html.escape(MARKUP, quote=True)
    with Serving(run.root) as s:
        banana = next(n for n in s.folder.graph().nodes if n.startswith("banana"))
        for path in ("", "node/cabinet_1", "node/cabinet_2", f"node/{quote(banana, safe='')}",
                     "keyframes",
                     f"keyframe/{run.lock_keyframe}", "timeline", "planner", "agenda"):
            page = text(s.url + path)
            assert MARKUP not in page, path
            assert "<script>alert" not in page, path
        assert escaped in text(s.url + "node/cabinet_1")


def test_serving_leaves_every_file_unchanged_byte_for_byte(run: RunFolder) -> None:
    before = digests(run.memory)
    with Serving(run.root) as s:
        for path in ("", "node/cabinet_1?t=39", "keyframes", "timeline?fusion=1", "planner",
                     "agenda", f"image/{run.lock_keyframe}", f"thumb/{run.lock_keyframe}",
                     "api/state"):
            get(s.url + path)
        for method in ("POST", "PUT", "DELETE"):
            assert get(s.url, method)[0] == 405
    assert digests(run.memory) == before


@pytest.mark.parametrize("path", [
    "image/..%2F..%2Fworld.db", "image/../../world.db", "thumb/%2e%2e%2fworld.db",
    "keyframe/..%2Fworld.db", "image/%2Fetc%2Fpasswd", "..%2F..%2Fetc%2Fpasswd",
    "node/..%2F..%2Fetc%2Fpasswd", "image/", "image/a/b",
])
def test_path_traversal_finds_nothing(run: RunFolder, path: str) -> None:
    with Serving(run.root) as s:
        status, _, body = get(s.url + path)
    assert status == 404
    assert b"SQLite format" not in body and b"root:" not in body


def test_an_index_row_pointing_outside_the_image_folder_is_not_served(run: RunFolder) -> None:
    db = run.memory / "keyframes" / "keyframes.db"
    with sqlite3.connect(db) as con:
        con.execute("UPDATE keyframes SET image_file = '../../world.db' WHERE frame_id = ?",
                    [run.lock_keyframe])
    with Serving(run.root) as s:
        status, _, body = get(s.url + f"image/{run.lock_keyframe}")
    assert status == 404 and b"SQLite format" not in body


@pytest.mark.parametrize("query", ["t=abc", "t=nan", "t=inf", "start=x"])
def test_a_bad_time_is_a_clear_400(run: RunFolder, query: str) -> None:
    with Serving(run.root) as s:
        path = "keyframes" if query.startswith("start") else ""
        status, _, body = get(s.url + f"{path}?{query}")
    assert status == 400 and b"time" in body


def test_a_database_being_written_while_read(run: RunFolder) -> None:
    stop = threading.Event()
    written = []

    def writer() -> None:
        world = WorldMemory.open(run.memory / "world.db")
        try:
            stamp = 60.0
            while not stop.is_set():
                stamp += 0.5
                world.set_property("cabinet_2", "fullness", f"{stamp:.1f}", confidence=0.5,
                                   stamp=stamp)
                written.append(stamp)
        finally:
            world.close()

    with Serving(run.root) as s:
        first = json.loads(text(s.url + "api/state"))["revision"]
        thread = threading.Thread(target=writer)
        thread.start()
        try:
            for _ in range(30):
                for path in ("", "node/cabinet_2", "timeline", "api/state"):
                    assert get(s.url + path)[0] == 200
        finally:
            stop.set()
            thread.join()
        last = json.loads(text(s.url + "api/state"))["revision"]
        assert written and last >= first + len(written)
        assert f"{written[-1]:.1f}" in text(s.url + "node/cabinet_2")


def test_a_folder_without_memory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InspectError, match=r"no world\.db"):
        MemoryFolder(tmp_path)
    assert main(["inspect", str(tmp_path / "nowhere"), "--port", "0"]) == 2


def test_a_newer_schema_is_refused_with_its_version(run: RunFolder, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(run.memory, copy)
    with sqlite3.connect(copy / "world.db") as con:
        con.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    with pytest.raises(InspectError, match="999"):
        MemoryFolder(copy)


def test_a_folder_without_keyframes_or_task_memory_still_shows_the_map(
        run: RunFolder, tmp_path: Path) -> None:
    copy = tmp_path / "bare"
    copy.mkdir()
    shutil.copy(run.memory / "world.db", copy / "world.db")
    with Serving(copy) as s:
        assert "cabinet_1" in text(s.url)
        assert "no keyframes" in text(s.url + "keyframes")
        assert "no task memory" in text(s.url + "agenda")
        assert "no trace" in text(s.url + "planner")
        assert get(s.url + f"image/{run.lock_keyframe}")[0] == 404


def test_loopback_addresses() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.4")
