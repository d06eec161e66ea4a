"""Config, prompts, percepts, collage, records and harness rules."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reasoning_scene import CAM_POSE, CUPBOARD, H, K, W, config, make_window, make_world

from mimir_planner.reasoning import (
    Box3D,
    CameraFrame,
    ClaimContext,
    ContentClaim,
    Decision,
    Detection3D,
    EmptyClaim,
    Evidence,
    Harness,
    OutcomeClaim,
    PromptLibrary,
    PropertyClaim,
    RobotStateSample,
    load_reasoning_config,
)
from mimir_planner.reasoning.collage import build_collage, column_times, fit_max_side
from mimir_planner.reasoning.config import PerceptConfig, VocabularyConfig
from mimir_planner.reasoning.errors import (
    EvidenceError,
    PromptPlaceholderError,
    ReasoningConfigError,
    UnknownPromptError,
)
from mimir_planner.reasoning.evidence import DisplacementMeasurement, PullTracking
from mimir_planner.reasoning.percepts import (
    box_region,
    contact_summary,
    contents_inside,
    depth_change,
    detections_inside,
    failure_category,
    hand_displacement,
    matching,
    measure_depth_change,
    names_match,
    never_held,
    pair_problem,
    primitive_intent,
    pull_tracking,
    reach_inside,
    settled_pair,
    shut_in_view,
)

CFG = load_reasoning_config()


def _harness() -> Harness:
    """A harness over a fresh test world with the test configuration."""
    cfg = config()
    return Harness(make_world(), cfg.vocabulary, cfg.percepts, cfg.verifier)


def test_default_config_loads_and_bad_configs_fail(tmp_path: Path) -> None:
    assert CFG.vlm.backend == "offline"
    assert (CFG.prompt_dir / "interaction_manipulation.md").is_file()
    for text in [
        "vlm: {backend: magic}\n",
        "vlm: {timeout_s: -1}\n",
        "vlm: {json_mode: 1}\n",
        "analyzer: {colour: red}\n",
        "planner: {}\n",
        "vocabulary: {fixture_labels: drawer}\n",
        "percepts: {depth_change_quantile: 2.0}\n",
        "percepts: {interior_back_m: 0}\n",
        "percepts: {interior_stride_px: 0}\n",
        "percepts: {interior_inset_m: -0.05}\n",
        "vocabulary: {structure_labels: counter}\n",
        "[1, 2]\n",
        "vlm: {backend: [unclosed\n",
    ]:
        path = tmp_path / "bad.yaml"
        path.write_text(text)
        with pytest.raises(ReasoningConfigError):
            load_reasoning_config(path)
    with pytest.raises(ReasoningConfigError):
        load_reasoning_config(tmp_path / "absent.yaml")


def test_prompts_render_strictly(tmp_path: Path) -> None:
    library = PromptLibrary(CFG.prompt_dir)
    assert {"interaction_manipulation", "interaction_inspection", "answer_correction"} <= set(
        library.names()
    )
    assert "could not be used: boom" in library.render("answer_correction", {"error": "boom"})
    with pytest.raises(PromptPlaceholderError, match="missing"):
        library.render("interaction_manipulation", {"target_id": "drawer_3"})
    with pytest.raises(PromptPlaceholderError, match="no placeholders"):
        library.render("answer_correction", {"error": "x", "surplus": 1})
    with pytest.raises(UnknownPromptError):
        library.get("does_not_exist")
    with pytest.raises(UnknownPromptError):
        library.get("../secrets")
    (tmp_path / "broken.md").write_text("value {unclosed")
    with pytest.raises(PromptPlaceholderError):
        PromptLibrary(tmp_path).get("broken")
    (tmp_path / "attr.md").write_text("value {obj.attr}")
    with pytest.raises(PromptPlaceholderError):
        PromptLibrary(tmp_path).get("attr")


def test_words_intents_and_failure_categories() -> None:
    vocab = CFG.vocabulary
    assert primitive_intent("OpenCabinet", vocab) == "open"
    assert primitive_intent("PickPlaceCabinetToCounter", vocab) == "pick"
    assert primitive_intent("peek", vocab) == "inspection"
    assert primitive_intent("move_base_to", vocab) == "other"
    assert failure_category("The drawer is LOCKED.", vocab) == "fixture_locked"
    assert failure_category("gripper slipped off", vocab) == "missed_grasp"
    assert failure_category(None, vocab) == "other"
    assert names_match("red mugs", "mug", {})
    assert names_match("Scissors", "scissors", {})
    assert names_match("coffee mug", "cup", vocab.synonyms)
    assert not names_match("gold watch", "scissors", vocab.synonyms)
    assert not names_match("", "scissors", {})


def test_detections_inside_grow_the_box_by_the_margin_and_keep_their_order() -> None:
    margin = CFG.percepts.box_margin_m
    box = Box3D(np.zeros(3), np.ones(3))
    xs = [0.5, 1.0 + margin * 0.99, -margin * 1.01, 1.0 + margin * 1.01, 0.0]
    dets = [Detection3D(label, np.array([x, 0.5, 0.5]), 0.9, float(i))
            for i, (label, x) in enumerate(zip(["mug", "cup", "mug", "mug", "sponge"], xs,
                                                strict=True))]
    inside = detections_inside(iter(dets), box, CFG.percepts)
    assert [d.stamp for d in inside] == [0.0, 1.0, 4.0]
    # positions stacked by the caller give the same answer; a count that differs is refused
    stacked = np.stack([d.position for d in dets])
    assert detections_inside(dets, box, CFG.percepts, stacked) == inside
    with pytest.raises(ValueError, match="4 positions for 5 detections"):
        detections_inside(dets, box, CFG.percepts, stacked[:4])
    assert detections_inside([], box, CFG.percepts) == []
    # per label once, in the detections' order, as names_match decides for each
    syn = CFG.vocabulary.synonyms
    assert [d.stamp for d in matching("coffee mug", dets, syn)] == [
        d.stamp for d in dets if names_match("coffee mug", d.label, syn)] == [0.0, 1.0, 2.0, 3.0]


def _merged_by_reference(old: Evidence, new: Evidence) -> list[Detection3D]:
    """What merging means for detections: one per reference, in the place of its first
    occurrence, with the value of its last."""
    return list({d.ref: d for d in (*old.detections, *new.detections)}.values())


def test_merged_evidence_keeps_one_detection_per_reference_and_their_positions() -> None:
    """Re-checks merge evidence again and again; the merged detections and the stacked
    positions handed on must be those of a merge from scratch, whether the references are
    new, repeated in the old evidence, repeated across the two, or repeated within the new."""
    rng = np.random.default_rng(7)

    def batch(n: int, refs: list[str]) -> Evidence:
        return Evidence(detections=tuple(
            Detection3D("mug", rng.normal(size=3), 0.9, float(k), ref=ref)
            for k, ref in zip(range(n), refs, strict=True)))

    evidence = Evidence()
    merges = [
        batch(3, ["a", "b", "c"]),          # new references
        batch(0, []),                       # nothing new
        batch(2, ["d", "e"]),               # new references again
        batch(2, ["b", "f"]),               # one seen before: its value changes, not its place
        batch(3, ["g", "g", "h"]),          # one repeated within the new evidence
        batch(1, ["i"]),
    ]
    for step, new in enumerate(merges):
        expected = _merged_by_reference(evidence, new)
        evidence = evidence.merged(new)
        assert list(evidence.detections) == expected, step
        assert [d.ref for d in evidence.detections] == [d.ref for d in expected]
        np.testing.assert_array_equal(evidence.detection_positions,
                                      np.stack([d.position for d in expected]))
    assert [d.ref for d in evidence.detections] == list("abcdefghi")
    assert Evidence().detection_positions.shape == (0, 3)
    # an evidence whose own detections repeat a reference merges as from scratch too
    doubled = batch(2, ["x", "x"])
    assert [d.ref for d in doubled.merged(Evidence()).detections] == ["x"]


def test_contact_summary_separates_grip_from_empty_close() -> None:
    cfg = PerceptConfig()
    locked = make_window(contact=True, opened_m=None)
    missed = make_window(contact=False, opened_m=None)
    a = contact_summary(locked.robot_states, cfg)
    b = contact_summary(missed.robot_states, cfg)
    assert a is not None and a.contact and a.peak_stamp is not None
    assert b is not None and not b.contact and b.peak_stamp is None
    assert contact_summary((), cfg) is None


def test_depth_change_measures_only_the_fixture_region() -> None:
    cfg = PerceptConfig()
    window = make_window(contact=True, opened_m=0.2)
    base = window.frames_of("base")
    world = make_world()
    drawer_3 = world.node("drawer_3")
    cabinet = world.node("cabinet_1")
    assert drawer_3 is not None and drawer_3.bbox is not None
    assert cabinet is not None and cabinet.bbox is not None
    region = box_region(base[0], drawer_3.bbox)
    assert region is not None
    moved = depth_change(base[0], base[-1], "drawer_3", drawer_3.bbox, cfg)
    assert moved is not None and moved.magnitude == pytest.approx(0.2, abs=1e-3)
    still = make_window(contact=True, opened_m=None).frames_of("base")
    unmoved = depth_change(still[0], still[-1], "drawer_3", drawer_3.bbox, cfg)
    assert unmoved is not None and unmoved.magnitude < 1e-6
    # a box behind the camera is not visible; NaN depth does not count
    behind = Box3D(np.array([-2.0, -0.1, 0.4]), np.array([-1.5, 0.1, 0.6]))
    assert depth_change(base[0], base[-1], "x", behind, cfg) is None
    nan_depth = np.full_like(base[0].depth, np.nan)
    blank = CameraFrame("base", 100.0, base[0].rgb, nan_depth, K, CAM_POSE)
    assert depth_change(blank, base[-1], "drawer_3", drawer_3.bbox, cfg) is None


def test_depth_change_starts_from_the_first_frame_taken_where_the_camera_stopped() -> None:
    cfg = PerceptConfig()
    drawer = make_world().node("drawer_3")
    assert drawer is not None and drawer.bbox is not None
    opened = make_window(contact=True, opened_m=0.2).frames_of("base")
    settling = []
    for i, dx in enumerate((0.12, 0.07)):  # the base still closing in on its stance
        pose = CAM_POSE.copy()
        pose[0, 3] -= dx
        settling.append(CameraFrame("base", opened[0].stamp - 2.0 + i, opened[0].rgb,
                                    opened[0].depth, K, pose, pose))
    still = [CameraFrame("base", f.stamp, f.rgb, f.depth, K, CAM_POSE, CAM_POSE) for f in opened]
    frames = [*settling, *still]
    # the very first frame does not register with the last: no measurement from it
    assert depth_change(frames[0], frames[-1], "drawer_3", drawer.bbox, cfg) is None
    pair = settled_pair(frames, cfg)
    assert pair is not None and pair[0] is still[0] and pair[1] is still[-1]
    measure = depth_change(pair[0], pair[1], "drawer_3", drawer.bbox, cfg)
    assert measure is not None and measure.magnitude == pytest.approx(0.2, abs=1e-3)
    # nothing registers, or a single frame: no pair
    assert settled_pair([*settling, still[-1]], cfg) is None
    assert settled_pair(still[:1], cfg) is None
    assert settled_pair([], cfg) is None


def test_settled_pair_ends_at_the_newest_frame_whose_pose_is_known() -> None:
    cfg = PerceptConfig()
    drawer = make_world().node("drawer_3")
    assert drawer is not None and drawer.bbox is not None
    opened = make_window(contact=True, opened_m=0.2).frames_of("base")
    # the newest frame's pose had not reached the analyzer: the pair ends one frame earlier
    unposed = CameraFrame("base", opened[-1].stamp + 0.5, opened[-1].rgb, opened[-1].depth, K)
    pair = settled_pair([*opened, unposed], cfg)
    assert pair is not None and pair[0] is opened[0] and pair[1] is opened[-1]
    assert "1 of 2 frames carry depth and a camera pose" in pair_problem([opened[0], unposed], cfg)
    assert pair_problem(opened[:1], cfg) == "1 frame(s) in the window"
    away = CAM_POSE.copy()
    away[0, 3] += 0.5
    moving = [opened[0], CameraFrame("base", opened[0].stamp + 1, opened[0].rgb,
                                     opened[0].depth, K, away)]
    assert settled_pair(moving, cfg) is None
    assert "the camera moved 0.500 m" in pair_problem(moving, cfg)


def _flat(depth_m: float | np.ndarray, stamp: float = 100.0) -> CameraFrame:
    """A base frame whose depth reads ``depth_m`` (a plane across the view, or an image)."""
    depth = np.broadcast_to(np.asarray(depth_m, dtype=np.float32), (H, W)).copy()
    return CameraFrame("base", stamp, np.zeros((H, W, 3), np.uint8), depth, K, CAM_POSE)


def test_a_look_that_reaches_the_back_sees_inside_and_a_shut_door_does_not() -> None:
    cfg = PerceptConfig()
    # the cupboard's front is at x 0.8, its back at 1.2: a shut door stops every ray at 0.8
    assert reach_inside(_flat(0.8), CUPBOARD, cfg) == 0
    assert reach_inside(_flat(1.15), CUPBOARD, cfg) >= cfg.depth_min_valid_pixels
    assert shut_in_view([_flat(0.8), _flat(0.8, 101.0)], CUPBOARD, cfg) is True
    assert shut_in_view([_flat(0.8), _flat(1.15, 101.0)], CUPBOARD, cfg) is False
    # a counter slab on top of the unit reaches back to the wall: rows 0-8 of the image meet
    # it at 1.15 m, above the box's top less the inset, so it is not the inside
    slab = np.full((H, W), 0.8, dtype=np.float32)
    slab[:9] = 1.15
    assert reach_inside(_flat(slab), CUPBOARD, cfg) == 0
    # without the inset the slab's points would count as the inside
    assert reach_inside(_flat(slab), CUPBOARD, replace(cfg, interior_inset_m=0.0)) > 0
    # one frame is too few to call it shut, and frames that measure nothing say nothing
    assert shut_in_view([_flat(0.8)], CUPBOARD, cfg) is None
    no_depth = CameraFrame("base", 100.0, np.zeros((H, W, 3), np.uint8), None, K, CAM_POSE)
    behind = Box3D(np.array([-2.0, -0.4, 0.1]), np.array([-1.5, 0.4, 0.9]))
    assert reach_inside(no_depth, CUPBOARD, cfg) is None
    assert reach_inside(_flat(0.8), behind, cfg) is None
    assert reach_inside(_flat(np.nan), CUPBOARD, cfg) is None
    assert shut_in_view([no_depth, _flat(0.8, 101.0)], CUPBOARD, cfg) is None


def _glimpse(points: int, stamp: float = 100.0) -> CameraFrame:
    """A look whose rays stop at the cupboard's front (0.8 m) but for ``points`` pixels in
    the middle of the image, which reach its back (1.15 m): a raised side view into a dark
    upper unit, most of it without depth."""
    depth = np.full((H, W), 0.8, dtype=np.float32)
    rows, cols = divmod(np.arange(points), 4)
    depth[H // 2 + rows, W // 2 + cols] = 1.15
    return _flat(depth, stamp)


def test_a_few_points_at_the_back_mean_the_rays_got_in() -> None:
    cfg = PerceptConfig()
    few = cfg.interior_back_min_pixels
    assert few < cfg.depth_min_valid_pixels  # a glimpse, not a measurement's worth of pixels
    assert reach_inside(_glimpse(few), CUPBOARD, cfg) == few
    assert shut_in_view([_flat(0.8), _glimpse(few, 101.0)], CUPBOARD, cfg) is False
    # fewer than that, in every frame, is a shut door
    assert shut_in_view([_glimpse(few - 1), _glimpse(few - 1, 101.0)], CUPBOARD, cfg) is True
    with pytest.raises(ReasoningConfigError, match="interior_back_min_pixels"):
        PerceptConfig(interior_back_min_pixels=0)


def test_counters_and_fixtures_are_never_contents() -> None:
    vocab = CFG.vocabulary
    for name in ("counter", "kitchen counter", "Counters", "cabinet", "sink"):
        assert never_held(name, vocab), name
    for name in ("cereal box", "tea box", "mug", "table salt", ""):
        assert not never_held(name, vocab), name
    slab = Detection3D("counter", np.array([1.0, 0.0, 0.5]), 0.9, 1.0, "base", "d:slab")
    mug = Detection3D("mug", np.array([1.0, 0.1, 0.5]), 0.9, 1.0, "base", "d:mug")
    box = Box3D(np.array([0.8, -0.2, 0.4]), np.array([1.2, 0.2, 0.6]))
    assert contents_inside([slab, mug], box, CFG.percepts, vocab) == [mug]


def test_a_depth_change_that_cannot_be_measured_says_why() -> None:
    cfg = PerceptConfig()
    drawer = make_world().node("drawer_3")
    assert drawer is not None and drawer.bbox is not None
    base = make_window(contact=True, opened_m=0.2).frames_of("base")
    no_depth = CameraFrame("base", base[0].stamp, base[0].rgb, None, K, CAM_POSE)
    assert measure_depth_change(no_depth, base[-1], "drawer_3", drawer.bbox, cfg) \
        == "a frame has no registered depth"
    behind = Box3D(np.array([-2.0, -0.1, 0.4]), np.array([-1.5, 0.1, 0.6]))
    assert measure_depth_change(base[0], base[-1], "x", behind, cfg) == "the region is not in view"
    blank = CameraFrame("base", 100.0, base[0].rgb, np.full_like(base[0].depth, np.nan), K,
                        CAM_POSE)
    assert "points with depth in both frames" in str(
        measure_depth_change(blank, base[-1], "drawer_3", drawer.bbox, cfg))
    # the reason travels into the verdict's words
    window = make_window(contact=True, opened_m=None, hand=True, depth=False)
    evidence = _evidence_of(window)
    assert "drawer_3" not in evidence.depth_changes
    claim = PropertyClaim("drawer_3", "locked", True, 0.9, "it would not open")
    (verdict,) = _harness().evaluate([claim], _ctx(), evidence).verdicts
    assert "depth: region not measured (base: " in verdict.reason, verdict.reason


def _shifted(frame: CameraFrame, dx: float, *, odom: np.ndarray | None) -> CameraFrame:
    """The frame with its map pose moved dx along map x; its odom pose given separately."""
    moved = frame.camera_to_map.copy()
    moved[0, 3] += dx
    return CameraFrame(frame.camera, frame.stamp, frame.rgb, frame.depth, frame.intrinsics,
                       moved, odom)


def test_depth_change_ignores_localisation_jumps_and_registers_small_camera_motion() -> None:
    cfg = PerceptConfig()
    drawer = make_world().node("drawer_3")
    assert drawer is not None and drawer.bbox is not None
    still = make_window(contact=True, opened_m=None).frames_of("base")
    first = CameraFrame("base", still[0].stamp, still[0].rgb, still[0].depth, K, CAM_POSE,
                        CAM_POSE)
    # localisation corrected map by 4 cm between the frames; the camera did not move in odom
    jumped = _shifted(still[-1], 0.04, odom=CAM_POSE)
    measure = depth_change(first, jumped, "drawer_3", drawer.bbox, cfg)
    assert measure is not None and measure.magnitude < 1e-6
    # without odom poses the same jump reads as 4 cm of motion of a flat wall facing the camera
    no_odom = [CameraFrame("base", f.stamp, f.rgb, f.depth, K, f.camera_to_map)
               for f in (first, jumped)]
    faked = depth_change(no_odom[0], no_odom[1], "drawer_3", drawer.bbox, cfg)
    assert faked is not None and faked.magnitude == pytest.approx(0.04, abs=1e-3)
    # the base really crept 2 cm towards the wall: its depth shrinks by as much, and the
    # registration expects exactly that, so nothing moved
    crept_pose = CAM_POSE.copy()
    crept_pose[0, 3] += 0.02
    crept = CameraFrame("base", still[-1].stamp, still[-1].rgb, still[-1].depth - 0.02, K,
                        crept_pose, crept_pose)
    measure = depth_change(first, crept, "drawer_3", drawer.bbox, cfg)
    assert measure is not None and measure.magnitude < 0.002
    # further than registration_max_m: not compared at all
    far_pose = CAM_POSE.copy()
    far_pose[0, 3] += 0.2
    far = CameraFrame("base", still[-1].stamp, still[-1].rgb, still[-1].depth, K, far_pose,
                      far_pose)
    assert depth_change(first, far, "drawer_3", drawer.bbox, cfg) is None


def test_pull_tracking_tells_a_held_back_hand_from_one_that_followed() -> None:
    cfg = PerceptConfig()
    locked = make_window(contact=True, opened_m=None, hand=True)
    opened = make_window(contact=True, opened_m=0.2, hand=True)
    held = pull_tracking(locked.robot_states, cfg)
    followed = pull_tracking(opened.robot_states, cfg)
    assert held is not None and held.commanded_m == pytest.approx(0.25)
    assert held.achieved_m == pytest.approx(0.0) and held.held_back_m == pytest.approx(0.25)
    assert followed is not None and followed.held_back_m == pytest.approx(0.05)
    # no hand reports, or the jaws never held: nothing to say
    assert pull_tracking(make_window(contact=True, opened_m=None).robot_states, cfg) is None
    assert pull_tracking(
        make_window(contact=False, opened_m=None, hand=True).robot_states, cfg) is None


def test_hand_motion_is_measured_in_odom_so_a_localisation_correction_is_not_a_pull() -> None:
    cfg = PerceptConfig()
    locked = make_window(contact=True, opened_m=None, hand=True).robot_states
    # localisation corrected map by 5 cm along the pull halfway through; in odom the hand held
    corrected = []
    for i, s in enumerate(locked):
        shift = np.array([0.05 if i >= len(locked) // 2 else 0.0, 0.0, 0.0])
        corrected.append(replace(
            s, hand_position=None if s.hand_position is None
            else tuple(np.asarray(s.hand_position) - shift),
            hand_commanded=None if s.hand_commanded is None
            else tuple(np.asarray(s.hand_commanded) - shift),
            hand_odom=s.hand_position, commanded_odom=s.hand_commanded))
    in_odom = pull_tracking(corrected, cfg)
    assert in_odom is not None and in_odom.achieved_m == pytest.approx(0.0)
    assert in_odom.held_back_m == pytest.approx(0.25)
    held = hand_displacement("cabinet_1", corrected, cfg)
    assert held is not None and held.magnitude == pytest.approx(0.0)
    # without odom positions the correction reads as 5 cm of hand travel
    in_map = pull_tracking([replace(s, hand_odom=None, commanded_odom=None) for s in corrected],
                           cfg)
    assert in_map is not None and in_map.achieved_m == pytest.approx(0.05)
    # one sample whose odom position went missing does not switch the measurement to map
    gap = [replace(s, hand_odom=None) if i == 1 else s for i, s in enumerate(corrected)]
    held = hand_displacement("cabinet_1", gap, cfg)
    assert held is not None and held.magnitude == pytest.approx(0.0)
    with pytest.raises(EvidenceError, match="odom"):
        replace(corrected[0], hand_odom=(float("nan"), 0.0, 0.0))


def test_collage_layout_and_downscale() -> None:
    window = make_window(contact=True, opened_m=None)
    collage = build_collage(
        window, start=100.0, end=103.0, columns=4, tile_width=32, label_width=40, header_height=16
    )
    assert collage.cameras == ("base", "side", "wrist")
    assert collage.image.shape == (16 + 3 * 24, 40 + 4 * 32, 3)
    assert len(collage.frame_refs[0]) == 4 and collage.frame_refs[0][0].endswith("@100.000")
    assert column_times(1.0, 1.0, 5) == [1.0]
    with pytest.raises(EvidenceError):
        column_times(0.0, 1.0, 0)
    big = np.zeros((1000, 2000, 3), dtype=np.uint8)
    assert fit_max_side(big, 500).shape == (250, 500, 3)
    assert fit_max_side(big, 5000) is big


@pytest.mark.parametrize(
    "build",
    [
        lambda: CameraFrame("base", 1.0, np.zeros((4, 4), dtype=np.uint8)),
        lambda: CameraFrame("base", float("nan"), np.zeros((4, 4, 3), dtype=np.uint8)),
        lambda: CameraFrame("base", 1.0, np.zeros((4, 4, 3), dtype=np.float32)),
        lambda: CameraFrame(
            "base", 1.0, np.zeros((4, 4, 3), dtype=np.uint8), depth=np.zeros((5, 5))
        ),
        lambda: CameraFrame("base", 1.0, np.zeros((4, 4, 3), dtype=np.uint8), intrinsics=np.eye(2)),
        lambda: CameraFrame("", 1.0, np.zeros((4, 4, 3), dtype=np.uint8)),
        lambda: RobotStateSample(1.0, -0.1, 0.0, False),
        lambda: RobotStateSample(1.0, 0.02, float("inf"), False),
        lambda: Detection3D("mug", np.array([np.nan, 0, 0]), 0.5, 1.0),
        lambda: Detection3D("mug", np.zeros(3), 1.5, 1.0),
        lambda: Box3D(np.ones(3), np.zeros(3)),
    ],
)
def test_bad_records_are_typed_errors(build) -> None:
    with pytest.raises(EvidenceError):
        build()


def _ctx(intent: str = "open") -> ClaimContext:
    return ClaimContext(
        "i1", "OpenDrawer", intent, "drawer_3", "drawer", np.array([1.0, 0.0, 0.5]), 103.0
    )


def test_harness_rejects_duplicates_unknown_ids_and_owned_claims() -> None:
    harness = _harness()
    claim = PropertyClaim("drawer_3", "has_handle", True, 0.9, "bar handle")
    far = PropertyClaim("sofa_9", "has_handle", True, 0.9, "?")
    owned = PropertyClaim("drawer_3", "pickable", True, 0.9, "lifted")
    weak = PropertyClaim("drawer_3", "material", "wood", 0.1, "maybe")
    result = harness.evaluate([claim, claim, far, owned, weak], _ctx(), Evidence())
    decisions = [(v.verifier, v.decision) for v in result.verdicts]
    assert ("confidence", Decision.ADMIT) in decisions
    assert ("dedup", Decision.REJECT) in decisions
    assert ("ownership", Decision.REJECT) in decisions
    assert any(v.verifier == "grounding" and "sofa_9" in v.reason for v in result.rejected)
    assert [(u.property, u.value) for u in result.property_updates] == [("has_handle", True)]
    log = result.verdicts[0].to_log()
    assert log["decision"] == "admit" and log["claim"]["type"] == "PropertyClaim"


def test_a_look_alike_label_outvoted_where_it_lies_is_not_a_content() -> None:
    """A ketchup bottle seen in twelve frames, one of which labelled it hot sauce (a segmenter's
    look-alike confusion): ketchup is admitted, hot sauce deferred. A real hot sauce bottle 8 cm
    beside it, seen as often, is admitted too."""
    ctx = ClaimContext("i6", "Inspect", "inspection", "drawer_3", "drawer",
                       np.array([1.0, 0.0, 0.5]), 103.0)
    looked = frozenset({"drawer_3"})
    rng = np.random.default_rng(3)
    spot = np.array([1.0, 0.05, 0.5])

    def seen(label: str, at: np.ndarray, n: int, tag: str) -> list[Detection3D]:
        return [Detection3D(label, at + rng.normal(0.0, 0.004, 3), 0.88, 102.0 + 0.1 * i,
                            "wrist", f"{tag}{i}") for i in range(n)]

    ketchup = seen("ketchup", spot, 11, "k") + seen("hot sauce", spot, 1, "stray")
    claims = [ContentClaim("drawer_3", "ketchup", "", ""),
              ContentClaim("drawer_3", "hot sauce", "", "")]
    alone = _harness().evaluate(claims, ctx, Evidence(detections=tuple(ketchup),
                                                      observed_interiors=looked))
    assert [v.decision for v in alone.verdicts] == [Decision.ADMIT, Decision.DEFER]
    assert "look-alike" in alone.verdicts[1].reason
    # a re-check brings a stray from another view that landed 6 cm from its bottle's other
    # detections: it stands alone, but most of the name's detections are still outvoted
    apart = ketchup + seen("hot sauce", spot + np.array([0.0, 0.0, 0.06]), 1, "apart")
    rechecked = _harness().evaluate(claims[1:], ctx, Evidence(detections=tuple(apart),
                                                              observed_interiors=looked))
    assert [v.decision for v in rechecked.verdicts] == [Decision.DEFER]
    beside = ketchup + seen("hot sauce", spot + np.array([0.0, -0.08, 0.0]), 10, "h")
    both = _harness().evaluate(claims, ctx, Evidence(detections=tuple(beside),
                                                     observed_interiors=looked))
    assert [v.decision for v in both.verdicts] == [Decision.ADMIT, Decision.ADMIT]
    # a stricter count, and bad settings
    cfg = config()
    strict = Harness(make_world(), cfg.vocabulary,
                     replace(cfg.percepts, content_min_detections=20), cfg.verifier)
    counted = strict.evaluate(claims[:1], ctx, Evidence(detections=tuple(ketchup),
                                                        observed_interiors=looked))
    assert [v.decision for v in counted.verdicts] == [Decision.DEFER]
    for bad in ({"content_spot_share": 1.5}, {"content_spot_m": 0.0},
                {"content_min_detections": 0}):
        with pytest.raises(ReasoningConfigError):
            PerceptConfig(**bad)  # type: ignore[arg-type]


def test_grasp_hold_extractor_supplies_pickable() -> None:
    harness = _harness()
    holding = tuple(RobotStateSample(100.0 + i, 0.03, 20.0, True) for i in range(3))
    ctx = ClaimContext("i2", "PickMug", "pick", "mug_1", "mug", np.array([0.5, 0.5, 0.9]), 103.0)
    outcome = OutcomeClaim("mug_1", "PickMug", True, None, "success", 0.9)
    result = harness.evaluate([outcome], ctx, Evidence(gripper=holding))
    assert [(u.property, u.value, u.source) for u in result.property_updates] == [
        ("pickable", True, "extractor:grasp_hold")
    ]
    empty = tuple(RobotStateSample(100.0 + i, 0.0, 20.0, False) for i in range(3))
    missed = harness.evaluate([outcome], ctx, Evidence(gripper=empty))
    assert missed.property_updates == ()
    assert missed.outcome_updates[0].category == "missed_grasp"
    assert missed.outcome_updates[0].verdict.decision is Decision.CORRECT


def test_empty_ignores_the_fixtures_own_parts_but_not_objects() -> None:
    cfg = config()
    harness = _harness()
    ctx = ClaimContext("i3", "Inspect", "inspection", "drawer_3", "drawer",
                       np.array([1.0, 0.0, 0.5]), 103.0)
    front = Detection3D("drawer", np.array([0.85, 0.0, 0.5]), 0.9, 102.0, "wrist", "d:front")
    mug = Detection3D("mug", np.array([1.0, 0.1, 0.5]), 0.9, 102.0, "wrist", "d:mug")
    looked = frozenset({"drawer_3"})
    empty = EmptyClaim("drawer_3", "nothing inside")
    only_front = harness.evaluate(
        [empty], ctx, Evidence(detections=(front,), observed_interiors=looked, visible_frames=3))
    assert [v.decision for v in only_front.verdicts] == [Decision.ADMIT]
    # hardly in view, or the look failed: emptiness is not shown either way
    glimpse = _harness().evaluate(
        [empty], ctx, Evidence(detections=(front,), observed_interiors=looked, visible_frames=1))
    assert [v.decision for v in glimpse.verdicts] == [Decision.DEFER]
    failed = ClaimContext("i4", "Inspect", "inspection", "drawer_3", "drawer",
                          np.array([1.0, 0.0, 0.5]), 103.0, reported_success=False,
                          reported_message="NO_VIEW")
    blind = _harness().evaluate(
        [empty], failed, Evidence(observed_interiors=looked, visible_frames=5))
    assert [v.decision for v in blind.verdicts] == [Decision.DEFER]
    assert "NO_VIEW" in blind.verdicts[0].reason
    # a look the arm could not finish (a door in the way) shows what it saw, not absence
    partial = ClaimContext("i5", "Inspect", "inspection", "drawer_3", "drawer",
                           np.array([1.0, 0.0, 0.5]), 104.0, reported_success=True,
                           reported_message="1 of 3 views reached",
                           reported_outcome="INSPECTED_PARTLY")
    part = _harness().evaluate(
        [empty, ContentClaim("drawer_3", "mug", "", "")], partial,
        Evidence(detections=(front, mug), observed_interiors=looked, visible_frames=5))
    assert [v.decision for v in part.verdicts] == [Decision.REJECT, Decision.ADMIT]
    part = _harness().evaluate(
        [empty, ContentClaim("drawer_3", "spoon", "", "")], partial,
        Evidence(detections=(front,), observed_interiors=looked, visible_frames=5))
    assert [v.decision for v in part.verdicts] == [Decision.DEFER, Decision.DEFER]
    assert all("1 of 3 views" in v.reason for v in part.verdicts)
    with_mug = harness.evaluate(
        [empty], ctx, Evidence(detections=(front, mug), observed_interiors=looked))
    assert [v.decision for v in with_mug.verdicts] == [Decision.REJECT]
    assert "mug" in with_mug.verdicts[0].reason and "drawer'" not in with_mug.verdicts[0].reason
    box = make_world().node("drawer_3").bbox  # type: ignore[union-attr]
    assert [d.label for d in contents_inside((front, mug), box, cfg.percepts, cfg.vocabulary)] \
        == ["mug"]


def test_unknown_extractor_is_a_config_error() -> None:
    cfg = config()
    from dataclasses import replace

    with pytest.raises(ReasoningConfigError):
        Harness(
            make_world(),
            cfg.vocabulary,
            cfg.percepts,
            replace(cfg.verifier, extractors=("psychic",)),
        )


@settings(max_examples=60, deadline=None)
@given(
    st.floats(min_value=-3, max_value=3),
    st.floats(min_value=-3, max_value=3),
    st.floats(min_value=-3, max_value=3),
    st.floats(min_value=0.0, max_value=0.5),
)
def test_box_contains_matches_bounds(x: float, y: float, z: float, margin: float) -> None:
    box = Box3D(np.array([-1.0, -1.0, 0.0]), np.array([1.0, 1.0, 1.0]))
    inside = -1 - margin <= x <= 1 + margin and -1 - margin <= y <= 1 + margin
    inside = inside and -margin <= z <= 1 + margin
    assert box.contains(np.array([x, y, z]), margin) == inside


def test_vocabulary_defaults_are_consistent() -> None:
    vocab = VocabularyConfig()
    assert "openable" in vocab.seeded_properties and "locked" in vocab.seeded_properties


# -- evidence from the robot contract (a gripper without force, the achieved hand) ---------------
def test_contract_gripper_holds_where_the_fingers_stopped_short() -> None:
    from mimir_planner.reasoning.window import contract_gripper_readings, robot_states

    closing_on_a_handle = [(0.0, 0.0), (0.1, 0.0), (0.2, 0.34), (0.3, 0.78), (0.4, 0.785),
                           (0.5, 0.786), (0.6, 0.3), (0.7, 0.01)]
    readings = contract_gripper_readings(closing_on_a_handle, stroke_m=0.085, open_below=0.05,
                                         closed_empty=0.93)
    holding = [r.holding for _, r in readings]
    # open, open, passing through, just stopped, held, held, opening again, open
    assert holding == [False, False, False, False, True, True, False, False]
    assert readings[4][1].opening_m == pytest.approx((1 - 0.785) * 0.085)
    samples, _ = robot_states(readings, lambda _t: (0.0, 0.0, 0.0))
    assert [s.contact for s in samples] == holding

    on_nothing = [(0.0, 0.0), (0.1, 0.6), (0.2, 0.97), (0.3, 0.975), (0.4, 0.975)]
    assert not any(r.holding for _, r in contract_gripper_readings(
        on_nothing, stroke_m=0.085, open_below=0.05, closed_empty=0.93))


def test_contract_gripper_hold_survives_a_pull_and_ends_when_the_jaws_open() -> None:
    from mimir_planner.reasoning.window import contract_gripper_readings

    # Readings recorded in the simulation while the hand pulled a locked door: the fingers flex
    # by up to 0.07 from one reading to the next (a repeated stamp is one sample republished),
    # then the jaws open to let go.
    pull = [(29.80, 0.341), (30.10, 0.787), (30.10, 0.787), (30.15, 0.787), (31.15, 0.768),
            (31.60, 0.712), (31.80, 0.761), (32.20, 0.643), (32.25, 0.713), (32.30, 0.764),
            (32.55, 0.189), (32.55, 0.116), (32.55, 0.116), (32.60, 0.02)]
    holding = [r.holding for _, r in contract_gripper_readings(
        pull, stroke_m=0.085, open_below=0.05, closed_empty=0.93)]
    # passing through, stopped (first look), the same sample again, held through the pull
    # (flexing included), released: the opening readings, repeated or not, start no new hold
    assert holding == [False, False, False] + [True] * 7 + [False] * 4

    # a reading that slides to closed-on-nothing ends the hold (the handle slipped out)
    slipped = [(0.0, 0.78), (0.1, 0.78), (0.2, 0.85), (0.3, 0.96), (0.4, 0.96)]
    assert [r.holding for _, r in contract_gripper_readings(
        slipped, stroke_m=0.085, open_below=0.05, closed_empty=0.93)] == \
        [False, True, True, False, False]

    # Recorded in the simulation after a handle slipped out of the jaws on a locked door: the
    # jaws, closed on nothing, open again and pause at 0.094 on the way while the hand already
    # backs away; a pause on the way open holds nothing
    reopened = [(25.40, 0.955), (25.50, 0.981), (25.75, 1.0), (25.80, 1.0), (26.10, 0.094),
                (26.15, 0.094), (26.15, 0.059), (26.20, 0.036), (26.25, 0.024)]
    assert not any(r.holding for _, r in contract_gripper_readings(
        reopened, stroke_m=0.085, open_below=0.05, closed_empty=0.93))
    # a window that opens on a bottle already held (a place after a pick) holds from its
    # second reading
    carried = [(0.0, 0.40), (0.1, 0.40), (0.2, 0.41), (0.3, 0.05), (0.4, 0.0)]
    assert [r.holding for _, r in contract_gripper_readings(
        carried, stroke_m=0.085, open_below=0.05, closed_empty=0.93)] == \
        [False, True, True, False, False]


def test_hand_travel_while_held_measures_the_part_and_ignores_the_empty_hand() -> None:
    from mimir_planner.reasoning.evidence import RobotStateSample
    from mimir_planner.reasoning.percepts import hand_displacement, moved

    cfg = PerceptConfig()

    def sample(t: float, held: bool, x: float, commanded: bool = True) -> RobotStateSample:
        return RobotStateSample(stamp=t, gripper_opening_m=0.02, gripper_effort_n=0.0,
                                contact=held, hand_position=(x, 0.0, 1.1),
                                hand_commanded=(x, 0.0, 1.1) if commanded else None)

    # the hand swings a door: it travels half a metre while the jaws hold the handle
    opened = [sample(0.0, False, 0.6), *(sample(0.1 * i, True, 0.6 - 0.05 * i)
                                         for i in range(1, 11)), sample(1.2, False, 0.2)]
    measure = hand_displacement("cabinet_2", opened, cfg)
    assert measure is not None and measure.source == "hand"
    assert measure.magnitude == pytest.approx(0.45) and moved(measure, cfg)
    # a locked door: the hand slides a few centimetres along the handle before the executor stops
    locked = [sample(0.1 * i, True, 0.6 - 0.01 * i) for i in range(1, 6)]
    held_back = hand_displacement("cabinet_1", locked, cfg)
    assert held_back is not None and moved(held_back, cfg) is False
    # recorded: after the pull stopped (no more commands) the hand held back by the locked door
    # sprang 8 cm away as the jaws loosened, while their reading still showed them closed
    sprang = [*locked, sample(0.6, True, 0.6), sample(0.65, True, 0.48, commanded=False)]
    after = hand_displacement("cabinet_1", sprang, cfg)
    assert after is not None and after.magnitude == pytest.approx(held_back.magnitude)
    # travel of an empty hand or without hand positions measures nothing
    assert hand_displacement("cabinet_1", [sample(0.0, False, 0.6), sample(1.0, False, 0.1)],
                             cfg) is None
    with pytest.raises(EvidenceError):
        RobotStateSample(stamp=0.0, gripper_opening_m=0.0, gripper_effort_n=0.0, contact=False,
                         hand_position=(float("nan"), 0.0, 0.0))


def _evidence_of(window, intent: str = "open") -> Evidence:
    from reasoning_scene import primitive

    from mimir_planner.reasoning import InteractionAnalyzer, make_backend

    cfg = config(backend="offline")
    world = make_world()
    analyzer = InteractionAnalyzer(make_backend(cfg), world, cfg)
    drawer = world.node("drawer_3")
    assert drawer is not None
    return analyzer.build_evidence(window, primitive(), [drawer], intent=intent)


def test_locked_and_opened_reasons_name_the_gripper_the_hand_and_depth() -> None:
    harness = _harness()
    locked = _evidence_of(make_window(contact=True, opened_m=None, hand=True))
    assert locked.pull is not None and locked.pull.held_back_m == pytest.approx(0.25)
    claim = PropertyClaim("drawer_3", "locked", True, 0.9, "it would not open")
    (verdict,) = harness.evaluate([claim], _ctx(), locked).verdicts
    assert verdict.decision is Decision.ADMIT and verdict.verifier == "locked"
    assert "gripper: closed on something in 4 of 6 readings" in verdict.reason
    assert "end effector: moved 0.000 m of 0.250 m commanded" in verdict.reason
    assert "depth: the region of 'drawer_3' changed 0.000 m" in verdict.reason

    opened = _evidence_of(make_window(contact=True, opened_m=0.2, hand=True))
    claim = PropertyClaim("drawer_3", "openable", True, 0.9, "it slid out", is_opened=True)
    (verdict,) = harness.evaluate([claim], _ctx(), opened).verdicts
    assert verdict.decision is Decision.ADMIT
    assert "fixture moved 0.200 m" in verdict.reason
    assert "depth: the region of 'drawer_3' changed 0.200 m" in verdict.reason
    assert "moved 0.200 m of 0.250 m commanded" in verdict.reason


@pytest.mark.parametrize(("outcome", "decision"), [
    ("PARTIAL_OPEN", Decision.REJECT), ("OPENED", Decision.REJECT), ("NO_MOTION", Decision.ADMIT),
    ("", Decision.ADMIT)])
def test_a_pull_the_executor_saw_give_way_is_not_locked(outcome: str,
                                                        decision: Decision) -> None:
    """The hand's travel can stay under ``open_hand_travel_m`` while the door moved a fifth of
    its way (0.11 m); the executor's outcome of that pull says the part gave way."""
    import dataclasses

    locked = _evidence_of(make_window(contact=True, opened_m=None, hand=True))
    claim = PropertyClaim("drawer_3", "locked", True, 0.9, "locked or stuck")
    ctx = dataclasses.replace(_ctx(), reported_success=False, reported_outcome=outcome,
                              reported_message="fixture did not open far enough (19% of the path)")
    (verdict,) = _harness().evaluate([claim], ctx, locked).verdicts
    assert verdict.decision is decision and verdict.verifier == "locked"
    if decision is Decision.REJECT:
        assert f"the executor reported {outcome}" in verdict.reason
        assert "19% of the path" in verdict.reason
    # a look is not a pull: its outcome says nothing of a lock
    look = dataclasses.replace(ctx, intent="inspection")
    assert _harness().evaluate([claim], look, locked).verdicts[0].decision is Decision.ADMIT


def test_locked_needs_the_hand_held_back_from_the_command() -> None:
    harness = _harness()
    window = make_window(contact=True, opened_m=None)
    still = DisplacementMeasurement("drawer_3", 0.001, "m", "depth")
    # the executor commanded only 2 cm of pull: a door that did not move proves nothing yet
    timid = Evidence(gripper=window.robot_states, displacements={"drawer_3": still},
                     depth_changes={"drawer_3": still}, pull=PullTracking(0.02, 0.0, 5))
    claim = PropertyClaim("drawer_3", "locked", True, 0.9, "stuck")
    (verdict,) = harness.evaluate([claim], _ctx(), timid).verdicts
    assert verdict.decision is Decision.DEFER and "not held back" in verdict.reason


def test_every_verdict_kind_can_be_switched_off() -> None:
    import dataclasses

    from mimir_planner.reasoning.config import VERIFIERS, VerifierConfig

    cfg = config()
    moving = _evidence_of(make_window(contact=True, opened_m=0.2, hand=True))
    claim = PropertyClaim("drawer_3", "locked", True, 0.9, "wrong")
    on = _harness()
    # the open moved the drawer: the lock claim is corrected to what the open showed
    assert on.evaluate([claim], _ctx(), moving).verdicts[0].decision is Decision.CORRECT
    off = Harness(make_world(), cfg.vocabulary, cfg.percepts,
                  dataclasses.replace(cfg.verifier, switched_off=("locked",)))
    (verdict,) = off.evaluate([claim], _ctx(), moving).verdicts
    assert verdict.decision is Decision.ADMIT and "switched off" in verdict.reason
    ghost = PropertyClaim("ghost_1", "locked", True, 0.9, "made up")
    none = Harness(make_world(), cfg.vocabulary, cfg.percepts,
                   dataclasses.replace(cfg.verifier, switched_off=VERIFIERS))
    assert {v.decision for v in none.evaluate([ghost, ghost], _ctx(), moving).verdicts} == {
        Decision.ADMIT}
    with pytest.raises(ReasoningConfigError):
        VerifierConfig(switched_off=("vibes",))


def test_outcomes_without_a_predicate_follow_the_executor_and_need_views() -> None:
    harness = _harness()
    claim = OutcomeClaim("drawer_3", "PlaceOn", True, None, "success", 0.9)
    ctx = ClaimContext("i2", "PlaceOn", "place", "drawer_3", "drawer", np.array([1.0, 0.0, 0.5]),
                       103.0, reported_success=False, reported_message="NOT_REACHED")
    (failed,) = harness.evaluate([claim], ctx, Evidence(visible_frames=5)).verdicts
    assert failed.decision is Decision.CORRECT and "NOT_REACHED" in failed.reason
    assert failed.corrected is not None and not failed.corrected.success
    unknown = ClaimContext("i3", "PlaceOn", "place", "drawer_3", "drawer",
                           np.array([1.0, 0.0, 0.5]), 103.0)
    (blind,) = harness.evaluate([claim], unknown, Evidence(visible_frames=1)).verdicts
    assert blind.decision is Decision.DEFER and "1 frame(s)" in blind.reason
    seen = _harness()
    (ok,) = seen.evaluate([claim], unknown, Evidence(visible_frames=3)).verdicts
    assert ok.decision is Decision.ADMIT


def test_another_actions_signals_never_decide_a_pending_claim() -> None:
    harness = _harness()
    window = make_window(contact=True, opened_m=None)
    # drawer_3 was pulled with the hand barely held back: "locked" waits for more
    timid = Evidence(gripper=window.robot_states, pull=PullTracking(0.02, 0.0, 5),
                     displacements={"drawer_3": DisplacementMeasurement("drawer_3", 0.0, "m",
                                                                         "depth")},
                     target_id="drawer_3")
    claim = PropertyClaim("drawer_3", "locked", True, 0.9, "stuck")
    assert harness.evaluate([claim], _ctx(), timid).verdicts[0].decision is Decision.DEFER
    # the next action pulls hard on drawer_4 and moves nothing; its door also sweeps through
    # drawer_3's image region: none of that is evidence about drawer_3
    other = Evidence(gripper=window.robot_states, pull=PullTracking(0.3, 0.0, 8),
                     displacements={"drawer_4": DisplacementMeasurement("drawer_4", 0.0, "m",
                                                                         "depth"),
                                    "drawer_3": DisplacementMeasurement("drawer_3", 0.4, "m",
                                                                         "depth")},
                     target_id="drawer_4")
    assert other.about({"drawer_3"}).pull is None and other.about({"drawer_3"}).gripper == ()
    result = harness.recheck(other.about({"drawer_4"}))
    assert [v.decision for v in result.verdicts] == [Decision.DEFER]
    result = harness.recheck(other)
    assert [v.decision for v in result.verdicts] == [Decision.DEFER]
    assert "not held back" in result.verdicts[0].reason or "moved" in result.verdicts[0].reason


def test_depth_motion_against_a_held_back_hand_is_held() -> None:
    harness = _harness()
    window = make_window(contact=True, opened_m=None)
    # the door region changed in depth, but the hand made 5 of 12 commanded cm: the arm in
    # front of a door that did not open looks like this
    covered = DisplacementMeasurement("drawer_3", 0.077, "m", "depth")
    ev = Evidence(gripper=window.robot_states, displacements={"drawer_3": covered},
                  depth_changes={"drawer_3": covered}, pull=PullTracking(0.116, 0.051, 9),
                  target_id="drawer_3")
    opened = PropertyClaim("drawer_3", "openable", True, 0.9, "it opened", is_opened=True)
    success = OutcomeClaim("drawer_3", "OpenDrawer", True, None, "success", 0.9)
    verdicts = harness.evaluate([opened, success], _ctx(), ev).verdicts
    assert [v.decision for v in verdicts] == [Decision.DEFER, Decision.DEFER]
    assert all("held back" in v.reason for v in verdicts)
    # the same signals decide a lock: the hand held the part and the part did not let it
    # through (recorded in an end-to-end run: 4.4 cm of depth change, the hand 4.1 cm of 11.6 cm)
    recorded = DisplacementMeasurement("drawer_3", 0.044, "m", "depth")
    held = Evidence(gripper=window.robot_states, displacements={"drawer_3": recorded},
                    depth_changes={"drawer_3": recorded}, pull=PullTracking(0.116, 0.041, 36),
                    target_id="drawer_3")
    for evidence in (ev, held):
        (lock,) = _harness().evaluate(
            [PropertyClaim("drawer_3", "locked", True, 0.9, "it held")], _ctx(), evidence).verdicts
        assert lock.decision is Decision.ADMIT and "is the arm" in lock.reason, lock.reason
        # ... and "unlocked" said of it is corrected to locked
        (unlocked,) = _harness().evaluate(
            [PropertyClaim("drawer_3", "locked", False, 0.9, "it gave")], _ctx(), evidence).verdicts
        assert unlocked.decision is Decision.CORRECT and unlocked.corrected is not None
        assert unlocked.corrected.new_value is True
    # a hand that was not held back leaves the depth change standing: the part moved
    free = replace(held, pull=PullTracking(0.116, 0.110, 36))
    (lock,) = _harness().evaluate(
        [PropertyClaim("drawer_3", "locked", True, 0.9, "it held")], _ctx(), free).verdicts
    assert lock.decision is Decision.CORRECT and "not locked" in lock.reason
    # nor does a hand that travelled as far as an opening part goes, held back or not
    far = replace(held, pull=PullTracking(0.30, 0.13, 36))
    (lock,) = _harness().evaluate(
        [PropertyClaim("drawer_3", "locked", True, 0.9, "it held")], _ctx(), far).verdicts
    assert lock.decision is Decision.CORRECT and "not locked" in lock.reason


@pytest.mark.parametrize("intent", ["open", "close"])
def test_motion_does_not_outvote_an_executor_that_reports_the_pull_ended_early(
        intent: str) -> None:
    """Recorded in an end-to-end run: the fingers lost a door's handle after 17% of the path;
    the door region changed 8.6 cm in depth and the held hand travelled 7.8 cm, but the door
    stood closed (under the open threshold) when the pull ended."""
    window = make_window(contact=True, opened_m=None)
    ajar = DisplacementMeasurement("drawer_3", 0.086, "m", "depth")
    ev = Evidence(gripper=window.robot_states, displacements={"drawer_3": ajar},
                  depth_changes={"drawer_3": ajar}, pull=PullTracking(0.09, 0.078, 12),
                  target_id="drawer_3")
    slipped = replace(_ctx(intent), reported_success=False, reported_outcome="SLIPPED",
                      reported_message="the handle slipped out of the fingers after 17% of "
                      "the path, before the hand was held back")
    success = OutcomeClaim("drawer_3", "OpenDrawer", True, None, "success", 0.9)
    locked = OutcomeClaim("drawer_3", "OpenDrawer", False, "it held", "fixture_locked", 0.9)
    for claim in (success, locked):
        (verdict,) = _harness().evaluate([claim], slipped, ev).verdicts
        assert verdict.decision is Decision.DEFER, verdict
        assert "executor reported SLIPPED" in verdict.reason and "17% of the path" in verdict.reason
        assert "changed 0.086 m" in verdict.reason  # the signals stay in the reason
    # the same motion with no report (a replayed bag) or a reported success is decided by it
    for ctx in (_ctx(intent), replace(_ctx(intent), reported_success=True,
                                      reported_outcome="OPENED")):
        (verdict,) = _harness().evaluate([success], ctx, ev).verdicts
        assert verdict.decision is Decision.ADMIT and "moved as intended" in verdict.reason
        (verdict,) = _harness().evaluate([locked], ctx, ev).verdicts
        assert verdict.decision is Decision.CORRECT and verdict.corrected is not None
        assert verdict.corrected.success is True
    # a reported failure with no motion is judged as before: held, so locked
    still = DisplacementMeasurement("drawer_3", 0.0, "m", "depth")
    held = replace(ev, displacements={"drawer_3": still}, depth_changes={"drawer_3": still},
                   pull=PullTracking(0.25, 0.0, 12))
    (verdict,) = _harness().evaluate([success], replace(slipped, reported_outcome="NO_MOTION"),
                                     held).verdicts
    assert verdict.decision is Decision.CORRECT and verdict.corrected is not None
    assert verdict.corrected.category == "fixture_locked"
