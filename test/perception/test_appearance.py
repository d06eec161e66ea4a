"""Appearance without a model: colour words, patterns, matching and masks on drawn objects,
under the kind of gain and white-balance changes a camera has, and the bad inputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from mimir.paths import config_file
from mimir_perception.appearance import (
    Appearance,
    AppearanceConfig,
    colour_words,
    describe,
    distance,
    instance_mask,
    load_appearance_config,
    main_colour_word,
    match,
    object_mask,
    parse_appearance_config,
    pattern_word,
)
from mimir_perception.errors import AppearanceConfigError, AppearanceError

RED, BLUE, YELLOW = (220, 40, 50), (50, 120, 230), (245, 205, 30)
PURPLE, GREEN, WHITE, DARK = (150, 60, 175), (60, 170, 90), (240, 240, 240), (25, 25, 25)


@pytest.fixture(scope="module")
def config() -> AppearanceConfig:
    return load_appearance_config(config_file("appearance.yaml"))


def drawn(colour: tuple[int, int, int], second: tuple[int, int, int] | None = None,
          kind: str = "plain", *, size: int = 90, angle: float = 0.0,
          gain: float = 1.0, balance: tuple[float, float, float] = (1.0, 1.0, 1.0)
          ) -> np.ndarray:
    """A BGR square of an object: plain, with a band across it, or 2x2 checks; turned by
    ``angle`` degrees, then seen through a camera's gain and white balance."""
    rgb = np.zeros((size, size, 3), np.float32)
    rgb[:] = colour
    if kind == "stripes":
        rgb[size // 2 - 9:size // 2 + 9] = second
    elif kind == "checks":
        half = size // 2
        rgb[:half, :half] = second
        rgb[half:, half:] = second
    if angle:
        turn = cv2.getRotationMatrix2D((size / 2, size / 2), angle, 1.0)
        rgb = cv2.warpAffine(rgb, turn, (size, size), flags=cv2.INTER_NEAREST,
                             borderMode=cv2.BORDER_REFLECT)
    rgb = np.clip(rgb * gain * np.asarray(balance, np.float32), 0, 255).astype(np.uint8)
    return np.ascontiguousarray(rgb[:, :, ::-1])


def words(app: Appearance, config: AppearanceConfig) -> list[str]:
    return [w.word for w in colour_words(app, config) if w.confidence >= 0.5]


@pytest.mark.parametrize(("image", "colours", "pattern"), [
    (drawn(RED), ["red"], "plain"),
    (drawn(WHITE), ["white"], "plain"),
    (drawn(DARK), ["black"], "plain"),
    (drawn(RED, BLUE, "checks"), ["red", "blue"], "checked"),
    (drawn(PURPLE, YELLOW, "checks", angle=30.0), ["purple", "yellow"], "checked"),
    (drawn(BLUE, DARK, "stripes"), ["blue", "black"], "striped"),
    (drawn(GREEN, WHITE, "stripes", angle=25.0), ["green", "white"], "striped"),
])
def test_colour_and_pattern_words(image: np.ndarray, colours: list[str], pattern: str,
                                  config: AppearanceConfig) -> None:
    app = describe(image, None, config)
    assert sorted(words(app, config)) == sorted(colours)
    said = pattern_word(app, config)
    assert said.word == pattern and said.confidence >= 0.5, said


def test_words_survive_the_gain_and_white_balance_of_a_camera(config: AppearanceConfig
                                                              ) -> None:
    for gain, balance in ((0.85, (1.03, 1.0, 0.97)), (1.12, (0.97, 1.02, 1.03))):
        app = describe(drawn(RED, BLUE, "checks", gain=gain, balance=balance), None, config)
        assert sorted(words(app, config)) == ["blue", "red"]
        assert pattern_word(app, config).word == "checked"


def _cylinder(body: tuple[int, int, int], mark: tuple[int, int, int], *, band: bool,
              label: bool, label_rows: tuple[int, int] = (25, 55)) -> np.ndarray:
    """An upright object 60 px wide and 90 tall, as the kitchen's bottles and cups are
    marked: a band of ``mark`` around it (18 px high), a label of ``mark`` on its front (40 px
    wide, over ``label_rows``: a third of its height), or both, crossing."""
    rgb = np.zeros((90, 60, 3), np.float32)
    rgb[:] = body
    if band:
        rgb[28:46] = mark
    if label:
        rgb[label_rows[0]:label_rows[1], 10:50] = mark
    return np.ascontiguousarray(rgb.astype(np.uint8)[:, :, ::-1])


def test_a_band_with_a_label_on_it_is_a_stripe_and_a_label_alone_is_not(
        config: AppearanceConfig) -> None:
    # the band and the label make one patch shaped like a cross: not long, but it crosses
    # every column of the object, thinly
    crossed = describe(_cylinder(BLUE, DARK, band=True, label=True), None, config)
    assert crossed.blobs == 1 and crossed.elongation < config.pattern.stripe_elongation_min
    assert crossed.crossing == pytest.approx(1.0)
    said = pattern_word(crossed, config)
    assert said.word == "striped" and said.confidence >= 0.5, said
    assert "crosses 100%" in said.why
    # a label alone crosses only the columns it covers (40 of 60)
    labelled = describe(_cylinder(BLUE, DARK, band=False, label=True), None, config)
    assert labelled.crossing == pytest.approx(40 / 60, abs=0.02)
    said = pattern_word(labelled, config)
    assert said.word == "plain" and "one short patch" in said.why, said
    # a label wrapped around half the height crosses every column, but thickly: not a band
    wrapped = _cylinder(BLUE, DARK, band=False, label=False)
    wrapped[22:64] = DARK[::-1]
    wide = describe(wrapped, None, config)
    assert wide.crossing == 0.0
    assert pattern_word(wide, config).word != "striped"


def test_shading_is_not_a_second_colour(config: AppearanceConfig) -> None:
    """A plain surface lit from one side: one hue at two lightnesses is one colour, plain."""
    image = drawn(GREEN).astype(np.float32)
    image[:, 45:] *= 0.55
    app = describe(image.astype(np.uint8), None, config)
    assert words(app, config) == ["green"]
    assert pattern_word(app, config).word == "plain"


def test_checks_split_both_colours_into_patches(config: AppearanceConfig) -> None:
    """Two squares of each colour make a sure check: a face of a 2x2 check shows only two
    patches of its second colour, but its main colour falls apart in two as well; a band
    splits the main colour in two and stays a stripe, a label leaves it whole."""
    checks = describe(drawn(RED, BLUE, "checks"), None, config)
    assert (checks.blobs, checks.main_blobs) == (2, 2)
    said = pattern_word(checks, config)
    assert said.word == "checked" and said.confidence == pytest.approx(1.0), said
    band = describe(drawn(BLUE, DARK, "stripes"), None, config)
    assert (band.blobs, band.main_blobs) == (1, 2)
    assert pattern_word(band, config).word == "striped"
    label = drawn(GREEN)
    label[30:60, 30:60] = drawn(WHITE)[30:60, 30:60]
    labelled = describe(label, None, config)
    assert (labelled.blobs, labelled.main_blobs) == (1, 1)
    assert pattern_word(labelled, config).word == "plain"


def test_an_even_check_has_no_main_colour(config: AppearanceConfig) -> None:
    """Which square of an even check covers more depends on the view, so neither is the
    main colour; a band over a fifth of the object, or shading, leaves the main colour sure."""
    for angle in (0.0, 30.0):
        even = main_colour_word(describe(drawn(PURPLE, YELLOW, "checks", angle=angle), None,
                                         config), config)
        assert even is None or even.confidence < 0.2, even
    banded = main_colour_word(describe(drawn(BLUE, WHITE, "stripes"), None, config), config)
    assert banded is not None and banded.word == "blue" and banded.confidence > 0.9, banded
    shade = drawn(GREEN).astype(np.float32)
    shade[:, 45:] *= 0.55
    shaded = main_colour_word(describe(shade.astype(np.uint8), None, config), config)
    assert shaded is not None and shaded.word == "green" and shaded.confidence > 0.9, shaded


def _from_lab(lightness: float, hue_deg: float, chroma: float) -> tuple[int, int, int]:
    a, b = chroma * np.cos(np.radians(hue_deg)), chroma * np.sin(np.radians(hue_deg))
    lab = np.array([[[lightness, a, b]]], np.float32)
    rgb = cv2.cvtColor(lab, cv2.COLOR_Lab2RGB)[0, 0]
    return (int(rgb[0] * 255), int(rgb[1] * 255), int(rgb[2] * 255))


def test_a_colour_on_a_boundary_is_named_with_little_confidence(config: AppearanceConfig
                                                                ) -> None:
    # orange ends and yellow begins at hue 78 in the shipped settings
    between = describe(drawn(_from_lab(70.0, 78.0, 60.0)), None, config)
    deep = describe(drawn(_from_lab(70.0, 62.0, 60.0)), None, config)
    assert max(w.confidence for w in colour_words(deep, config)) == pytest.approx(1.0)
    assert max((w.confidence for w in colour_words(between, config)), default=0.0) < 0.5


def test_masked_pixels_only(config: AppearanceConfig) -> None:
    image = drawn(BLUE)
    image[:, :30] = drawn(RED)[:, :30]
    mask = np.zeros(image.shape[:2], bool)
    mask[:, 35:] = True
    assert words(describe(image, mask, config), config) == ["blue"]


def test_the_same_instance_is_found_and_look_alikes_abstain(config: AppearanceConfig) -> None:
    reference = describe(drawn(RED, BLUE, "checks", gain=0.9), None, config)
    candidates = {
        "froot": describe(drawn(RED, BLUE, "checks", angle=20.0, gain=1.1), None, config),
        "trix": describe(drawn(PURPLE, YELLOW, "checks"), None, config),
        "plain_red": describe(drawn(RED), None, config),
    }
    found = match(reference, candidates, config)
    assert found.best == "froot", found.reason
    assert distance(reference, candidates["froot"], config) < distance(
        reference, candidates["plain_red"], config)
    twins = {"a": describe(drawn(RED, BLUE, "checks", angle=20.0), None, config),
             "b": describe(drawn(RED, BLUE, "checks", angle=-15.0), None, config)}
    tie = match(reference, twins, config)
    assert tie.best is None and "alike" in tie.reason
    far = match(describe(drawn(GREEN), None, config), {"trix": candidates["trix"]}, config)
    assert far.best is None and "nothing looks alike" in far.reason
    none = match(reference, {}, config)
    assert none.best is None


def test_an_object_mask_from_its_surroundings(config: AppearanceConfig) -> None:
    """Inside a remembered box, the pixels unlike the ring around it are the object; a box
    with nothing in it, or nothing around it, is refused rather than read."""
    scene = np.zeros((120, 160, 3), np.uint8)
    scene[:] = (200, 205, 210)  # a cabinet's inside
    scene[40:90, 60:100] = drawn(YELLOW, size=50)[:, 5:45]
    mask = object_mask(scene, (50, 30, 110, 100), config)
    assert mask[40:90, 60:100].mean() > 0.9 and mask[30:40, 50:110].mean() < 0.1
    assert words(describe(scene, mask, config), config) == ["yellow"]
    # a blue neighbour reaching into the box is another patch, left out
    crowded = scene.copy()
    crowded[35:95, 100:118] = drawn(BLUE, size=60)[:, :18]
    mask = object_mask(crowded, (50, 30, 110, 100), config)
    assert not mask[35:95, 100:110].any() and mask[40:90, 60:100].mean() > 0.9
    assert words(describe(crowded, mask, config), config) == ["yellow"]
    with pytest.raises(AppearanceError, match="stands out"):  # an empty stretch of cabinet
        object_mask(scene, (110, 30, 150, 60), config)
    with pytest.raises(AppearanceError, match="around it"):  # the whole image: no ring
        object_mask(scene, (0, 0, 160, 120), config)
    with pytest.raises(AppearanceError, match="inside"):
        object_mask(scene, (150, 30, 170, 100), config)
    with pytest.raises(AppearanceError, match="inside"):
        object_mask(scene, (50, 30, 50, 100), config)


def test_an_instance_mask_from_the_kept_segmentation(config: AppearanceConfig) -> None:
    """A white mug with a red label in a white cabinet: nothing of the mug stands out from
    the ring around its box but the label, so the box is refused or read as red alone; the
    segmentation kept with the frame gives the whole mug, label and white, and leaves out
    the cabinet the box lies on and a neighbour reaching into it."""
    scene = np.zeros((120, 160, 3), np.uint8)
    scene[:] = (238, 238, 236)  # the cabinet's white inside
    scene[40:90, 60:100] = WHITE[::-1]
    scene[55:75, 60:100] = RED[::-1]  # a band of red label around the mug
    ids = np.full((120, 160), 3, np.uint16)  # the cabinet, everywhere else
    ids[40:90, 60:100] = 12  # the mug
    ids[35:95, 100:118] = 40  # a neighbour, partly in the box
    box = (50, 30, 110, 100)
    try:
        guessed = words(describe(scene, object_mask(scene, box, config), config), config)
    except AppearanceError:
        guessed = []
    assert "white" not in guessed
    mask = instance_mask(ids, box, config)
    assert np.array_equal(mask, ids == 12)
    assert set(words(describe(scene, mask, config), config)) == {"white", "red"}
    # the box on a stretch of cabinet alone: the cabinet reaches far past it, so nothing
    with pytest.raises(AppearanceError, match="no segmented instance"):
        instance_mask(ids, (10, 10, 40, 40), config)
    # a segmenter that missed the mug in this frame: the neighbour covers too little of it
    missed = ids.copy()
    missed[missed == 12] = 0
    with pytest.raises(AppearanceError, match="no segmented instance"):
        instance_mask(missed, box, config)
    with pytest.raises(AppearanceError, match="inside"):
        instance_mask(ids, (150, 30, 170, 100), config)
    with pytest.raises(AppearanceError, match="inside"):
        instance_mask(ids, (50, 30, 50, 100), config)


@pytest.mark.parametrize(("image", "mask", "message"), [
    (np.zeros((20, 20, 3), np.float32), None, "8-bit"),
    (np.zeros((20, 20), np.uint8), None, "8-bit"),
    ("a picture", None, "8-bit"),
    (np.zeros((40, 40, 3), np.uint8), np.ones((40, 41), bool), "mask"),
    (np.zeros((40, 40, 3), np.uint8), np.ones((40, 40), np.uint8), "mask"),
    (np.zeros((40, 40, 3), np.uint8), np.zeros((40, 40), bool), "fewer"),
    (np.zeros((8, 8, 3), np.uint8), None, "fewer"),
])
def test_what_cannot_be_measured_is_a_typed_error(image: Any, mask: Any, message: str,
                                                   config: AppearanceConfig) -> None:
    with pytest.raises(AppearanceError, match=message):
        describe(image, mask, config)


def _shipped() -> dict[str, Any]:
    import yaml
    data: dict[str, Any] = yaml.safe_load(Path(config_file("appearance.yaml")).read_text())
    return data


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d.pop("colours"), "colours"),
    (lambda d: d.update(colours={}), "colours"),
    (lambda d: d["colours"].update(red={"hue": [40, 10]}), "from < to"),
    (lambda d: d["colours"].update(red={"hue": [0, "x"]}), "two numbers"),
    (lambda d: d["colours"].update(red={"tint": [0, 1]}), "unknown"),
    (lambda d: d["colours"].update(red=[0, 45]), "region"),
    (lambda d: d["pattern"].update(second_share_min=0.9), "second_share_min"),
    (lambda d: d["matching"].update(margin=-1.0), "margin"),
    (lambda d: d["describe"].update(min_pixels=0), "min_pixels"),
    (lambda d: d["crops"].update(min_inside=1.5), "min_inside"),
    (lambda d: d["crops"].update(sightings=0), "sightings"),
    (lambda d: d["crops"].update(keyframes_per_camera=2.5), "keyframes_per_camera"),
    (lambda d: d["pattern"].update(span_margin=0.0), "span_margin"),
    (lambda d: d["pattern"].update(band_max_share=1.5), "band_max_share"),
    (lambda d: d["naming"].update(main_share_margin=0.0), "main_share_margin"),
    (lambda d: d["naming"].update(main_share_margin="wide"), "main_share_margin"),
    (lambda d: d.update(extra=1), "unknown"),
])
def test_malformed_settings_are_refused(change: Any, message: str) -> None:
    data = _shipped()
    change(data)
    with pytest.raises(AppearanceConfigError, match=message):
        parse_appearance_config(data)


def test_a_missing_settings_file_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(AppearanceConfigError, match="cannot read"):
        load_appearance_config(tmp_path / "none.yaml")
