"""Attribute words checked against what the keyframes linked to a node show (no model): the
node's remembered box projected through each keyframe's camera view, the object masked from its
surroundings, its colour words and pattern pooled over the frames."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from planner_kitchen import Fixture, observation, see, session_for

from mimir.paths import config_file
from mimir_memory.keyframes import KeyframeStore, Trigger
from mimir_memory.task import GoalStatus
from mimir_memory.world import WorldMemory
from mimir_perception.appearance import load_appearance_config
from mimir_planner.config import load_planner_config
from mimir_planner.looks import NodeLooks
from mimir_planner.retrieval import (
    KeyframeRetriever,
    OfflineRetrievalReasoner,
    RetrievalQuery,
    task_terms,
)

WIDTH, HEIGHT, F = 320, 240, 250.0
CABINET_INSIDE = (205, 200, 190)  # BGR


def _view(eye: tuple[float, float, float]) -> dict[str, Any]:
    """A camera at ``eye`` looking along +x (optical z forward, x right, y down)."""
    return {"position": list(eye), "orientation": [-0.5, 0.5, -0.5, 0.5], "fx": F, "fy": F,
            "cx": (WIDTH - 1) / 2.0, "cy": (HEIGHT - 1) / 2.0}


def _frame(colour_bgr: tuple[int, int, int], radius: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    image = np.zeros((HEIGHT, WIDTH, 3), np.uint8)
    image[:] = CABINET_INSIDE
    cv2.circle(image, (WIDTH // 2, HEIGHT // 2), radius, colour_bgr, -1)
    noise = rng.normal(0.0, 2.0, image.shape)
    return np.clip(image + noise, 0, 255).astype(np.uint8)


@pytest.fixture
def kitchen(kitchen_of):
    return kitchen_of([
        ("cabinet_1", Fixture("cabinet", (1.1, 0.6, 1.6), contents=("apple",))),
        ("cabinet_2", Fixture("cabinet", (1.1, -0.6, 1.6), contents=("apple",))),
    ])


def _remember(world: WorldMemory, kit: Any, holder: str, label: str) -> str:
    """A 9 cm thing inside ``holder``, 5 cm below its centre, listed as its contents."""
    x, y, z = kit.fixtures[holder].position
    centre = (x, y, z - 0.05)
    node = world.add_node(label, centre, stamp=3.0, bbox_min=[c - 0.045 for c in centre],
                          bbox_max=[c + 0.045 for c in centre]).payload["node_id"]
    world.set_parent(node, holder, "container", stamp=4.0)
    world.set_contents(holder, [{"name": label, "node_id": node}], is_empty=False, stamp=4.0,
                       source_action="inspect")
    kit.object_nodes[(holder, label)] = node
    return str(node)


def _apple_seen(world: WorldMemory, kit: Any, store: KeyframeStore, holder: str,
                colour_bgr: tuple[int, int, int] | None, *, stamp: float,
                with_view: bool = True) -> str:
    """An apple (a 9 cm box in memory) in ``holder``, and keyframes of it 0.6 m away."""
    x, y, z = kit.fixtures[holder].position
    node = _remember(world, kit, holder, "apple")
    if colour_bgr is not None:
        # the box spans f * 0.09 / 0.6 = 37 px; the apple fills most of it
        for k in range(3):
            saved = store.save(_frame(colour_bgr, 17, seed=k), timestamp=stamp + k,
                               camera="wrist", trigger=Trigger.INTERACTION_POST,
                               node_ids=[node],
                               camera_view=_view((x - 0.6, y, z - 0.05)) if with_view else None)
            assert saved.frame_id
    return node


GREEN, RED = (60, 170, 60), (50, 40, 210)


def test_the_green_apple_is_the_one_its_keyframes_show_green(kitchen, tmp_path: Path) -> None:
    world, task, kit = kitchen
    store = KeyframeStore.open(tmp_path / "keyframes")
    red = _apple_seen(world, kit, store, "cabinet_1", RED, stamp=10.0)
    green = _apple_seen(world, kit, store, "cabinet_2", GREEN, stamp=20.0)
    session = session_for(world, task, keyframes=store)
    session.submit("Find the green apple.")
    report = session.run(kit)
    assert report.completed == ["g001_find"] and not report.blocked
    assert [e.node_id for e in report.answer_entities["g001_find"]] == [green]
    assert red not in {s.target for s in kit.executed}
    known, why = session.recall.attributes.known(world.state.nodes[green], "color")
    assert known == {"green"} and "keyframes" in why and "3 keyframe(s)" in why
    store.close()


def test_a_node_is_seen_from_where_its_measured_frames_were_taken(kitchen,
                                                                 tmp_path: Path) -> None:
    """The way the hand comes in (mimir_planner.clutter) runs from the cameras that saw the
    thing: the mean horizontal position of its measured frames' cameras; none without them."""
    world, _, kit = kitchen
    store = KeyframeStore.open(tmp_path / "keyframes")
    seen = _apple_seen(world, kit, store, "cabinet_1", GREEN, stamp=10.0)
    unseen = _apple_seen(world, kit, store, "cabinet_2", GREEN, stamp=20.0, with_view=False)
    looks = NodeLooks(store, load_appearance_config(config_file("appearance.yaml")))
    x, y, _ = kit.fixtures["cabinet_1"].position
    assert looks.viewpoint(world.state.nodes[seen]) == pytest.approx((x - 0.6, y))
    assert looks.viewpoint(world.state.nodes[unseen]) is None
    store.close()


def test_keyframes_without_a_camera_view_leave_the_colour_unknown(kitchen,
                                                                 tmp_path: Path) -> None:
    world, task, kit = kitchen
    store = KeyframeStore.open(tmp_path / "keyframes")
    _apple_seen(world, kit, store, "cabinet_1", RED, stamp=10.0, with_view=False)
    _apple_seen(world, kit, store, "cabinet_2", GREEN, stamp=20.0, with_view=False)
    session = session_for(world, task, keyframes=store)
    result = session.run_instruction("Find the green apple.", kit)
    # it looks closer into each cabinet once; the frames it gets show nothing it can read
    inspected = [s.target for s in kit.executed if s.primitive == "inspect"]
    assert sorted(inspected) == ["cabinet_1", "cabinet_2"], kit.executed
    assert task.status("g001_find") is GoalStatus.BLOCKED
    assert "colour not known" in result.reason
    store.close()


def test_a_white_thing_in_a_white_cabinet_is_read_from_its_kept_segmentation(
        kitchen, tmp_path: Path) -> None:
    """A white mug against a white cabinet does not stand out from the ring around its box,
    so frames kept without a segmentation leave its colour unknown; the same frames kept
    with the segmenter's instance image show it white."""
    world, _, kit = kitchen
    store = KeyframeStore.open(tmp_path / "keyframes")
    looks = NodeLooks(store, load_appearance_config(config_file("appearance.yaml")))
    wall, mug_white = (236, 236, 234), (246, 246, 246)
    mugs = {}
    for holder, segmented in (("cabinet_1", False), ("cabinet_2", True)):
        node = _remember(world, kit, holder, "mug")
        x, y, z = kit.fixtures[holder].position
        for k in range(3):
            image = np.full((HEIGHT, WIDTH, 3), wall, np.uint8)
            cv2.circle(image, (WIDTH // 2, HEIGHT // 2), 17, mug_white, -1)
            ids = np.zeros((HEIGHT, WIDTH), np.uint16)
            cv2.circle(ids, (WIDTH // 2, HEIGHT // 2), 17, 5, -1)
            store.save(image, timestamp=10.0 * len(mugs) + k + 10.0, camera="wrist",
                       trigger=Trigger.INTERACTION_POST, node_ids=[node],
                       camera_view=_view((x - 0.6, y, z - 0.05)),
                       instances=ids if segmented else None)
        mugs[segmented] = world.state.nodes[node]
    unread = looks.look(mugs[False])
    assert looks.words(mugs[False], "color", 0.5)[0] == frozenset() and not unread.frames
    assert all("stands out" in why for _, why in unread.skipped), unread.skipped
    words, why = looks.words(mugs[True], "color", 0.5)
    assert words == {"white"} and "3 keyframe(s)" in why
    store.close()


class _WristViews:
    """The test kitchen, whose wrist camera sees what a cabinet holds when it is inspected:
    a sighting of each remembered thing in it and the frame it came from."""

    def __init__(self, kit: Any, world: WorldMemory, store: KeyframeStore,
                 colours: dict[str, tuple[int, int, int]]) -> None:
        self.kit, self.world, self.store, self.colours = kit, world, store, colours

    def execute(self, step: Any) -> Any:
        outcome = self.kit.execute(step)
        if step.primitive == "inspect" and outcome.feedback.success:
            for child in sorted(self.world.state.children.get(step.target, ())):
                node = self.world.state.nodes[child]
                stamp = outcome.stamp + 0.25
                self.world.ingest([observation(node.label, node.centroid, 0.045, stamp,
                                               camera="wrist")])
                x, y, z = node.centroid
                self.store.save(_frame(self.colours[step.target], 17, seed=70), timestamp=stamp,
                                camera="wrist", trigger=Trigger.INTERACTION_POST,
                                node_ids=[child], camera_view=_view((x - 0.6, y, z)))
        return outcome


def test_a_thing_of_unknown_colour_is_looked_at_closer(kitchen, tmp_path: Path) -> None:
    """Both apples were seen from afar only (colour unknown): the planner looks into their
    cabinets, the wrist camera shows one green, and that one is the answer."""
    world, task, kit = kitchen
    store = KeyframeStore.open(tmp_path / "keyframes")
    red = _apple_seen(world, kit, store, "cabinet_1", None, stamp=10.0)
    green = _apple_seen(world, kit, store, "cabinet_2", None, stamp=20.0)
    session = session_for(world, task, keyframes=store)
    robot = _WristViews(kit, world, store, {"cabinet_1": RED, "cabinet_2": GREEN})
    result = session.run_instruction("Find the green apple.", robot)
    assert task.status("g001_find") is GoalStatus.COMPLETED, result.reason
    assert [e.node_id for e in session.answer_entities["g001_find"]] == [green]
    assert "inspect" in [s.primitive for s in kit.executed]
    assert red not in (s.target for s in kit.executed)
    store.close()


def test_a_node_look_pools_frames_and_says_which_it_left_out(kitchen, tmp_path: Path) -> None:
    world, _task, kit = kitchen
    store = KeyframeStore.open(tmp_path / "keyframes")
    node_id = _apple_seen(world, kit, store, "cabinet_1", GREEN, stamp=10.0)
    node = world.state.nodes[node_id]
    x, y, z = kit.fixtures["cabinet_1"].position
    # a frame from behind the apple, one from 20 m away, and one where the apple is not (it
    # was taken away): all left out, with reasons
    for k, eye in enumerate(((x + 0.6, y, z), (x - 20.0, y, z))):
        store.save(_frame(RED, 17, seed=9 + k), timestamp=30.0 + k, camera="pole",
                   trigger=Trigger.INTERACTION_POST, node_ids=[node_id], camera_view=_view(eye))
    store.save(_frame(CABINET_INSIDE, 17, seed=12), timestamp=40.0, camera="pole",
               trigger=Trigger.INTERACTION_POST, node_ids=[node_id],
               camera_view=_view((x - 0.6, y, z - 0.05)))
    looks = NodeLooks(store, load_appearance_config(config_file("appearance.yaml")))
    look = looks.look(node)
    assert len(look.frames) == 3 and look.words["color"] == {"green": pytest.approx(1.0)}
    assert look.words["pattern"].get("plain", 0.0) > 0.5
    reasons = sorted(dict(look.skipped).values())
    assert len(reasons) == 3
    assert "behind or at the camera" in reasons
    assert "too small or outside the image" in reasons
    assert any("stands out from its surroundings" in r for r in reasons)
    assert looks.look(node) is look  # the same frames: measured once
    words, why = looks.words(node, "color", 0.5)
    assert words == {"green"} and node_id in why
    assert looks.words(node, "pattern", 1.01) == (frozenset(), "")
    store.close()


def test_frames_where_the_cameras_saw_a_node_are_read_at_that_sighting_s_box(
        kitchen, tmp_path: Path) -> None:
    """The wrist camera saw a green apple three times during a look into the cabinet, each
    frame kept; later views from the
    base camera, taken from a drifted pose, pulled the fused box 10 cm aside, so the node's
    box misses the apple in the kept frames. Each observation's own box lands on it."""
    world, _task, kit = kitchen
    store = KeyframeStore.open(tmp_path / "keyframes")
    x, y, z = kit.fixtures["cabinet_1"].position
    apple = (x, y, z - 0.05)
    for k in range(3):
        world.ingest([observation("apple", apple, 0.04, 10.0 + k, camera="wrist")])
        store.save(_frame(GREEN, 17, seed=30 + k), timestamp=10.0 + k, camera="wrist",
                   trigger=Trigger.INTERACTION_DURING, node_ids=["apple_1"],
                   camera_view=_view((x - 0.6, y, z - 0.05)))
    for k in range(8):
        world.ingest([observation("apple", (x, y + 0.12, z - 0.05), 0.04, 20.0 + k,
                                  camera="base")])
    # a frame of another camera a second after a sighting shows the cabinet's open door
    store.save(_frame(CABINET_INSIDE, 0, seed=40), timestamp=11.5, camera="pole",
               trigger=Trigger.NODE_UPDATE, node_ids=["apple_1"],
               camera_view=_view((x - 0.6, y, z - 0.05)))
    node = world.state.nodes["apple_1"]
    assert node.observation_count == 11 and node.centroid[1] > y + 0.09
    config = load_appearance_config(config_file("appearance.yaml"))

    unregistered = NodeLooks(store, config).look(node)
    assert unregistered.words["color"] == {}
    assert any("stands out" in why for _, why in unregistered.skipped)

    looks = NodeLooks(store, config, sightings=world.sightings)
    look = looks.look(node)
    assert len(look.frames) == 3 and look.words["color"] == {"green": pytest.approx(1.0)}
    assert looks.look(node) is look
    assert looks.words(node, "color", 0.5)[0] == {"green"}
    shown = looks.in_frame(look.frames[0], node, 0.5)
    assert not isinstance(shown, str) and "green" in shown.words
    # the camera saw it again without a frame kept: the same frames, the same look
    world.ingest([observation("apple", apple, 0.04, 30.0, camera="wrist")])
    assert looks.look(world.state.nodes["apple_1"]) is look
    # and with one: measured anew
    world.ingest([observation("apple", apple, 0.04, 31.0, camera="wrist")])
    store.save(_frame(GREEN, 17, seed=50), timestamp=31.0, camera="wrist",
               trigger=Trigger.INTERACTION_DURING, node_ids=[],
               camera_view=_view((x - 0.6, y, z - 0.05)))
    again = looks.look(world.state.nodes["apple_1"])
    assert again is not look and len(again.frames) == 4
    store.close()


def _labelled_frame(body_bgr: tuple[int, int, int], label_bgr: tuple[int, int, int],
                    seed: int) -> np.ndarray:
    """A 17 px disc of ``body_bgr`` with a band of ``label_bgr`` across a third of it, on a
    dark shelf (a white mug does not stand out from a light cabinet wall)."""
    rng = np.random.default_rng(seed)
    image = np.full((HEIGHT, WIDTH, 3), 70, np.uint8)
    cy, cx = HEIGHT // 2, WIDTH // 2
    cv2.circle(image, (cx, cy), 17, body_bgr, -1)
    image[cy - 5:cy + 6, cx - 14:cx + 15] = label_bgr
    return np.clip(image + rng.normal(0.0, 2.0, image.shape), 0, 255).astype(np.uint8)


@pytest.mark.parametrize(("body", "label", "taken"), [
    ((245, 245, 245), (200, 90, 30), True),  # a white mug with a blue band
    ((200, 90, 30), (245, 245, 245), False),  # a blue mug with a white band
])
def test_one_colour_asked_for_is_the_main_colour(kitchen_of, tmp_path: Path,
                                                 body: tuple[int, int, int],
                                                 label: tuple[int, int, int],
                                                 taken: bool) -> None:
    """'The white mug' is a mug that is white as a whole: a blue mug whose white band the
    keyframes show is not taken for it (two colours asked for may be any of its colours)."""
    world, task, kit = kitchen_of([
        ("cabinet_1", Fixture("cabinet", (1.1, 0.6, 1.6), contents=("mug",))),
    ])
    store = KeyframeStore.open(tmp_path / "keyframes")
    x, y, z = kit.fixtures["cabinet_1"].position
    mug = _remember(world, kit, "cabinet_1", "mug")
    for k in range(3):
        store.save(_labelled_frame(body, label, seed=80 + k), timestamp=10.0 + k,
                   camera="wrist", trigger=Trigger.INTERACTION_POST, node_ids=[mug],
                   camera_view=_view((x - 0.6, y, z - 0.05)))
    session = session_for(world, task, keyframes=store)
    known, _ = session.recall.attributes.known(world.state.nodes[mug], "color")
    assert known == {"white", "blue"}
    result = session.run_instruction("Find the white mug.", kit)
    completed = task.status("g001_find") is GoalStatus.COMPLETED
    assert completed is taken, result.reason
    if not taken:
        assert "white only in part (remembered blue as a whole" in result.reason
    store.close()


def _checked_frame(first: tuple[int, int, int], second: tuple[int, int, int], seed: int
                   ) -> np.ndarray:
    image = _frame(CABINET_INSIDE, 0, seed)
    c, h = (WIDTH // 2, HEIGHT // 2), 16
    image[c[1] - h:c[1] + h, c[0] - h:c[0] + h] = first
    image[c[1] - h:c[1], c[0] - h:c[0]] = second
    image[c[1]:c[1] + h, c[0]:c[0] + h] = second
    return image


@pytest.fixture
def pantry(kitchen_of):
    return kitchen_of([
        ("cabinet_1", Fixture("cabinet", (1.1, 0.6, 1.6), contents=("cereal box",))),
        ("cabinet_2", Fixture("cabinet", (1.1, -0.6, 1.6), contents=("cereal box",))),
    ])


def test_a_described_box_is_the_one_whose_keyframes_show_that_pattern(pantry,
                                                                      tmp_path: Path) -> None:
    """``the red one with the blue check pattern``: red and blue checks, not purple and yellow."""
    world, task, kit = pantry
    store = KeyframeStore.open(tmp_path / "keyframes")
    boxes = {}
    for holder, (first, second) in (("cabinet_1", ((180, 60, 150), (30, 205, 245))),
                                    ("cabinet_2", ((50, 40, 215), (225, 120, 50)))):
        x, y, z = kit.fixtures[holder].position
        node = _remember(world, kit, holder, "cereal box")
        for k in range(2):
            store.save(_checked_frame(first, second, seed=k), timestamp=10.0 + k,
                       camera="wrist", trigger=Trigger.INTERACTION_POST, node_ids=[node],
                       camera_view=_view((x - 0.6, y, z - 0.05)))
        boxes[holder] = node
    session = session_for(world, task, keyframes=store)
    session.submit("Find the cereal box, the red one with the blue check pattern.")
    report = session.run(kit)
    assert report.completed == ["g001_find"], task.state.status_reason
    assert [e.node_id for e in report.answer_entities["g001_find"]] == [boxes["cabinet_2"]]
    store.close()


PURPLE_BGR, YELLOW_BGR = (180, 60, 150), (30, 205, 245)


@pytest.mark.parametrize("plain_yellow_too", [True, False])
def test_an_evenly_checked_box_is_not_the_yellow_one(pantry, tmp_path: Path,
                                                     plain_yellow_too: bool) -> None:
    """``the yellow one`` is a box that is yellow as a whole: a box checked evenly in purple
    and yellow has no main colour its keyframes can tell, so it is not taken for it; the plain
    yellow box is, and without one the goal does not complete on the checked box."""
    world, task, kit = pantry
    store = KeyframeStore.open(tmp_path / "keyframes")
    frames = {"cabinet_1": lambda k: _checked_frame(PURPLE_BGR, YELLOW_BGR, seed=k)}
    if plain_yellow_too:
        frames["cabinet_2"] = lambda k: _frame(YELLOW_BGR, 17, seed=k)
    boxes = {}
    for holder, frame in frames.items():
        x, y, z = kit.fixtures[holder].position
        node = _remember(world, kit, holder, "cereal box")
        for k in range(3):
            store.save(frame(k), timestamp=10.0 + k, camera="wrist",
                       trigger=Trigger.INTERACTION_POST, node_ids=[node],
                       camera_view=_view((x - 0.6, y, z - 0.05)))
        boxes[holder] = node
    session = session_for(world, task, keyframes=store)
    checked = world.state.nodes[boxes["cabinet_1"]]
    assert session.recall.attributes.known(checked, "color")[0] == {"purple", "yellow"}
    assert session.recall.attributes.main_colours(checked) == frozenset()
    result = session.run_instruction("Find the cereal box, the yellow one.", kit)
    if plain_yellow_too:
        assert task.status("g001_find") is GoalStatus.COMPLETED, result.reason
        assert result.run is not None
        assert [e.node_id for e in result.run.answer_entities["g001_find"]] == [boxes["cabinet_2"]]
    else:
        assert task.status("g001_find") is not GoalStatus.COMPLETED, result.reason
        assert "yellow only in part (its main colour not known" in result.reason
    store.close()


@pytest.fixture
def cups(kitchen_of):
    return kitchen_of([
        ("counter_1", Fixture("counter", (1.0, 0.0, 0.9), opens=False)),
        ("cabinet_1", Fixture("cabinet", (1.1, 0.6, 1.6), contents=("cup",))),
        ("cabinet_2", Fixture("cabinet", (1.1, -0.6, 1.6), contents=("cup",))),
    ])


def _cup_on_counter(world: WorldMemory, kit: Any, store: KeyframeStore | None,
                    colour_bgr: tuple[int, int, int], *, parent: bool = True,
                    dy: float = 0.0, label: str = "cup") -> str:
    """The reference: a cup standing on the counter, seen from 0.6 m three times; with its
    parent set (an interaction put it there) or, ``parent`` False, only seen there."""
    x, y, z = kit.fixtures["counter_1"].position
    centre = (x, y + dy, z + 0.05)
    node = str(world.add_node(label, centre, stamp=2.0, bbox_min=[c - 0.045 for c in centre],
                              bbox_max=[c + 0.045 for c in centre]).payload["node_id"])
    if parent:
        world.set_parent(node, "counter_1", "surface", stamp=2.5)
    if store is not None:
        for k in range(3):
            store.save(_frame(colour_bgr, 17, seed=20 + k), timestamp=5.0 + k, camera="pole",
                       trigger=Trigger.NEW_NODE, node_ids=[node],
                       camera_view=_view((x - 0.6, y, z + 0.05)))
    return node


def _stored_cup(world: WorldMemory, kit: Any, store: KeyframeStore, holder: str,
                colour_bgr: tuple[int, int, int], *, seed: int, label: str = "cup") -> str:
    x, y, z = kit.fixtures[holder].position
    node = _remember(world, kit, holder, label)
    for k in range(3):
        store.save(_frame(colour_bgr, 17, seed=seed + k), timestamp=10.0 + seed + k,
                   camera="wrist", trigger=Trigger.INTERACTION_POST, node_ids=[node],
                   camera_view=_view((x - 0.6, y, z - 0.05)))
    return node


@pytest.mark.parametrize("parent", [True, False], ids=["parent", "seen-only"])
def test_the_cup_that_looks_like_the_one_on_the_counter(cups, tmp_path: Path,
                                                         parent: bool) -> None:
    """The reference is on the counter whether an interaction put it there (its parent) or
    perception alone saw it there (no parent: found by its position on the counter's box)."""
    world, task, kit = cups
    store = KeyframeStore.open(tmp_path / "keyframes")
    reference = _cup_on_counter(world, kit, store, GREEN, parent=parent)
    assert (world.state.nodes[reference].parent is None) is not parent
    red = _stored_cup(world, kit, store, "cabinet_1", RED, seed=1)
    green = _stored_cup(world, kit, store, "cabinet_2", GREEN, seed=5)
    session = session_for(world, task, keyframes=store)
    session.submit("Find the cup that looks like the cup on the counter.")
    report = session.run(kit)
    assert report.completed == ["g001_find"], task.state.status_reason
    assert [e.node_id for e in report.answer_entities["g001_find"]] == [green]
    assert {reference, red}.isdisjoint(s.target for s in kit.executed)
    store.close()


def test_a_reference_memory_holds_gone_is_no_reference(cups, tmp_path: Path) -> None:
    world, task, kit = cups
    store = KeyframeStore.open(tmp_path / "keyframes")
    seen = _cup_on_counter(world, kit, store, GREEN, parent=False)
    gone = _cup_on_counter(world, kit, store, RED, parent=False, dy=0.3)
    _stored_cup(world, kit, store, "cabinet_1", RED, seed=1)
    _stored_cup(world, kit, store, "cabinet_2", GREEN, seed=5)
    session = session_for(world, task, keyframes=store)
    # two cups on the counter: the reference is ambiguous, and the planner says which
    result = session.run_instruction("Find the cup that looks like the cup on the counter.", kit)
    assert f"is ambiguous: memory holds {seen}, {gone}" in result.reason
    # once the cameras missed one of them enough times, the other is the reference
    for k in range(3):
        world.record_miss(gone, stamp=30.0 + k, camera="pole", reason="expected in view")
    assert world.state.nodes[gone].properties["at_last_place"].value is False
    result = session.run_instruction("Find the cup that looks like the cup on the counter.", kit)
    assert task.status("g002_find") is GoalStatus.COMPLETED, result.reason
    store.close()


def _green_cup_is_found(world: WorldMemory, task: Any, kit: Any,
                        store: KeyframeStore) -> None:
    """A red cup in cabinet_1 and a green one in cabinet_2: "the cup that looks like the cup
    on the counter" (a green one) is found, and it is the green cup."""
    _stored_cup(world, kit, store, "cabinet_1", RED, seed=1)
    green = _stored_cup(world, kit, store, "cabinet_2", GREEN, seed=5)
    session = session_for(world, task, keyframes=store)
    result = session.run_instruction("Find the cup that looks like the cup on the counter.", kit)
    assert task.status("g001_find") is GoalStatus.COMPLETED, result.reason
    assert [e.node_id for e in session.answer_entities["g001_find"]] == [green]


def test_the_cup_on_the_counter_is_the_cup_not_the_mug_beside_it(cups,
                                                                   tmp_path: Path) -> None:
    """A mug is a synonym of a cup; with a cup and a mug on the counter, the cup is the
    reference the instruction names."""
    world, task, kit = cups
    store = KeyframeStore.open(tmp_path / "keyframes")
    reference = _cup_on_counter(world, kit, store, GREEN, parent=False)
    x, y, z = kit.fixtures["counter_1"].position
    centre = (x, y + 0.3, z + 0.05)
    mug = str(world.add_node("mug", centre, stamp=2.0, bbox_min=[c - 0.045 for c in centre],
                             bbox_max=[c + 0.045 for c in centre]).payload["node_id"])
    _green_cup_is_found(world, task, kit, store)
    assert {reference, mug}.isdisjoint(s.target for s in kit.executed)
    store.close()


def test_a_reference_named_in_part_is_found_at_its_place(kitchen_of, tmp_path: Path) -> None:
    """The cameras call the tins "coffee"; "the coffee tin on the counter" is the coffee
    there (a name in part is enough at the named place), and the tin that looks like it is
    the answer."""
    world, task, kit = kitchen_of([
        ("counter_1", Fixture("counter", (1.0, 0.0, 0.9), opens=False)),
        ("cabinet_1", Fixture("cabinet", (1.1, 0.6, 1.6), contents=("coffee",))),
        ("cabinet_2", Fixture("cabinet", (1.1, -0.6, 1.6), contents=("coffee",))),
    ])
    store = KeyframeStore.open(tmp_path / "keyframes")
    reference = _cup_on_counter(world, kit, store, GREEN, parent=False, label="coffee")
    _stored_cup(world, kit, store, "cabinet_1", RED, seed=1, label="coffee")
    green = _stored_cup(world, kit, store, "cabinet_2", GREEN, seed=5, label="coffee")
    session = session_for(world, task, keyframes=store)
    result = session.run_instruction(
        "Find the coffee tin that looks like the one on the counter.", kit)
    assert task.status("g001_find") is GoalStatus.COMPLETED, result.reason
    assert [e.node_id for e in session.answer_entities["g001_find"]] == [green]
    assert reference not in (s.target for s in kit.executed)
    # anywhere else a name in part is no reference: "the coffee tin in the sink" is not held
    result = session.run_instruction(
        "Find the coffee tin that looks like the one in the sink.", kit)
    assert task.status("g002_find") is GoalStatus.BLOCKED
    store.close()


def test_a_cup_reading_where_a_mug_stands_is_not_the_reference(cups, tmp_path: Path) -> None:
    """Two cup nodes on the counter, but one stands where a mug node stands that the
    cameras named more often: that one is the mug, seen a few times as a cup, and the other
    cup is the reference."""
    world, task, kit = cups
    store = KeyframeStore.open(tmp_path / "keyframes")
    reference = _cup_on_counter(world, kit, store, GREEN, parent=False)
    x, y, z = kit.fixtures["counter_1"].position
    spot = (x, y + 0.3, z + 0.05)
    mug = see(world, "mug", spot, stamp=2.0)
    for k in range(4):
        world.ingest([observation("mug", spot, 0.04, 3.0 + k)])
    near = (spot[0] + 0.01, spot[1], spot[2])
    minority = str(world.add_node("cup", near, stamp=2.0, bbox_min=[c - 0.04 for c in near],
                                  bbox_max=[c + 0.04 for c in near]).payload["node_id"])
    state = world.state
    assert state.nodes[mug].observation_count > state.nodes[minority].observation_count
    _green_cup_is_found(world, task, kit, store)
    assert {reference, mug, minority}.isdisjoint(s.target for s in kit.executed)
    store.close()


class _CloseLook:
    """The test kitchen, whose cameras see the counter's cup up close once the robot stands in
    front of the counter: a sighting of it and the frame it came from."""

    def __init__(self, kit: Any, world: WorldMemory, store: KeyframeStore, cup: str,
                 colour_bgr: tuple[int, int, int]) -> None:
        self.kit, self.world, self.store, self.cup, self.colour = kit, world, store, cup, colour_bgr

    def execute(self, step: Any) -> Any:
        outcome = self.kit.execute(step)
        if step.primitive == "move_to" and step.target == "counter_1":
            node = self.world.state.nodes[self.cup]
            stamp = outcome.stamp + 0.5
            self.world.ingest([observation("cup", node.centroid, 0.045, stamp, camera="pole")])
            x, y, z = node.centroid
            self.store.save(_frame(self.colour, 17, seed=60), timestamp=stamp, camera="pole",
                            trigger=Trigger.NODE_UPDATE, node_ids=[self.cup],
                            camera_view=_view((x - 0.6, y, z)))
        return outcome


def test_a_reference_no_frame_shows_well_is_looked_at_first(cups, tmp_path: Path) -> None:
    """The cup on the counter was only seen from across the room (no keyframe shows it well
    enough to compare): the planner goes to look at it from in front of the counter, then
    compares. Where looking did not help, it looks for other cups and says why."""
    world, task, kit = cups
    store = KeyframeStore.open(tmp_path / "keyframes")
    reference = _cup_on_counter(world, kit, None, GREEN, parent=False)
    _stored_cup(world, kit, store, "cabinet_1", RED, seed=1)
    green = _stored_cup(world, kit, store, "cabinet_2", GREEN, seed=5)
    session = session_for(world, task, keyframes=store)
    result = session.run_instruction("Find the cup that looks like the cup on the counter.",
                                     _CloseLook(kit, world, store, reference, GREEN))
    assert task.status("g001_find") is GoalStatus.COMPLETED, result.reason
    assert kit.executed[0].primitive == "move_to" and kit.executed[0].target == "counter_1"
    assert [e.node_id for e in session.answer_entities["g001_find"]] == [green]

    # a second instruction where the close look shows nothing new: one look, then on
    blind = _cup_on_counter(world, kit, None, GREEN, parent=False, dy=-0.3)
    for k in range(3):
        world.record_miss(reference, stamp=300.0 + k, camera="pole", reason="expected in view")
    before = len(kit.executed)
    result = session.run_instruction("Find the cup that looks like the cup on the counter.",
                                     kit)
    moves = [s.target for s in kit.executed[before:] if s.primitive == "move_to"]
    assert moves.count("counter_1") == 1, moves
    assert task.status("g002_find") is GoalStatus.BLOCKED
    assert f"no keyframe shows {blind} well enough" in result.reason
    store.close()


def test_two_cups_alike_to_the_reference_block_and_say_so(cups, tmp_path: Path) -> None:
    world, task, kit = cups
    store = KeyframeStore.open(tmp_path / "keyframes")
    _cup_on_counter(world, kit, store, GREEN)
    _stored_cup(world, kit, store, "cabinet_1", GREEN, seed=1)
    _stored_cup(world, kit, store, "cabinet_2", GREEN, seed=5)
    session = session_for(world, task, keyframes=store)
    result = session.run_instruction("Find the cup that looks like the one on the counter.",
                                     kit)
    assert task.status("g001_find") is GoalStatus.BLOCKED
    assert "too much alike" in result.reason
    store.close()


def test_likeness_without_keyframes_or_reference_blocks(cups, tmp_path: Path) -> None:
    world, task, kit = cups
    store = KeyframeStore.open(tmp_path / "keyframes")
    _stored_cup(world, kit, store, "cabinet_1", RED, seed=1)
    _stored_cup(world, kit, store, "cabinet_2", GREEN, seed=5)
    session = session_for(world, task, keyframes=store)
    result = session.run_instruction("Find the cup that looks like the cup on the counter.",
                                     kit)
    assert "the reference 'cup' on or in the counter is not in memory" in result.reason
    _cup_on_counter(world, kit, None, GREEN)
    blind = session_for(world, task)
    result = blind.run_instruction("Find the cup that looks like the cup on the counter.", kit)
    assert "likeness cannot be judged without keyframes" in result.reason
    assert task.status("g002_find") is GoalStatus.BLOCKED
    store.close()


def test_offline_stage_two_puts_frames_that_show_the_target_first(kitchen,
                                                                  tmp_path: Path) -> None:
    world, _task, kit = kitchen
    store = KeyframeStore.open(tmp_path / "keyframes")
    green = _apple_seen(world, kit, store, "cabinet_2", GREEN, stamp=10.0)
    measured = {r.frame_id for r in store.query(node_ids=[green])}
    # newer frames linked to the apple that recorded no camera view: nothing to measure
    for k in range(2):
        store.save(_frame(GREEN, 17, seed=40 + k), timestamp=50.0 + k, camera="pole",
                   trigger=Trigger.INTERACTION_POST, node_ids=[green])
    config = load_planner_config().retrieval
    query = RetrievalQuery("find the green apple", node_ids=(green,),
                           terms=task_terms(["find the green apple"]))
    blind = KeyframeRetriever(store, config).retrieve(query)
    assert blind.frames[0].frame_id not in measured  # recency alone: the newest first
    looks = NodeLooks(store, load_appearance_config(config_file("appearance.yaml")))
    viewer = OfflineRetrievalReasoner(viewer=lambda fid, nid: looks.in_frame(
        fid, world.state.nodes[nid], 0.5))
    seeing = KeyframeRetriever(store, config, viewer).retrieve(query)
    first = seeing.frames[0]
    assert first.frame_id in measured
    assert f"shows {green} at" in first.reason and "looking green" in first.reason
    store.close()


def test_a_frame_view_says_why_it_shows_nothing(kitchen, tmp_path: Path) -> None:
    world, _task, kit = kitchen
    store = KeyframeStore.open(tmp_path / "keyframes")
    apple = _apple_seen(world, kit, store, "cabinet_1", RED, stamp=10.0, with_view=False)
    looks = NodeLooks(store, load_appearance_config(config_file("appearance.yaml")))
    frame = store.query(node_ids=[apple])[0].frame_id
    assert looks.in_frame(frame, world.state.nodes[apple], 0.5) == "no camera view"
    assert "unknown keyframe" in str(looks.in_frame("nope", world.state.nodes[apple], 0.5))
    store.close()


def test_a_planner_call_records_how_long_keyframe_retrieval_took(kitchen, tmp_path: Path
                                                                  ) -> None:
    world, task, kit = kitchen
    store = KeyframeStore.open(tmp_path / "keyframes")
    _apple_seen(world, kit, store, "cabinet_1", RED, stamp=10.0)
    reading = session_for(world, task, keyframes=store)
    reading.submit("Find the apple.")
    goal = task.active_goal()
    assert goal is not None
    ctx = reading.context(goal)
    assert ctx.retrieved, "the apple's keyframes are retrieved"
    assert ctx.retrieval_s is not None and 0.0 < ctx.retrieval_s < 60.0
    # a planner that reads no keyframes retrieves nothing and times nothing
    blind = session_for(world, task)
    assert blind.context(goal).retrieval_s is None
    store.close()
