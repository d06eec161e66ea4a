"""Appearance without a model: what an object's pixels say about its colour and pattern, and
whether two objects look alike.

A crop of an object and its mask give an :class:`Appearance`:

- its two main colours in CIELAB (k-means over the masked pixels) with their shares, so a
  striped or checked object keeps both of its colours;
- a coarse CIELAB histogram of the masked pixels, for matching one instance against another;
- the boundary between the two colours as a pattern cue: its density (how much of the object is
  colour edge) and its orientation coherence (one dominant direction for stripes, two crossing
  directions for checks), measured with the doubled-angle sum of the boundary's gradients so
  the cue does not depend on how the object is turned.

Colour words come from regions of hue, lightness and chroma (``config/appearance.yaml``); each
word carries a confidence that falls to zero at a region's edge, so a colour near a boundary
(shaded white that could be grey, dark orange that could be brown) is reported with little
confidence and a caller that needs certainty treats it as unknown. Matching compares histograms
and main colours, and abstains when the two best candidates are too close to tell apart.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt
from scipy.cluster.vq import kmeans2

from mimir import settings
from mimir_perception.errors import AppearanceConfigError, AppearanceError

BgrImage = npt.NDArray[np.uint8]
Mask = npt.NDArray[np.bool_]
Lab = tuple[float, float, float]

#: Pixels within this CIELAB spread are one colour (k-means would split noise).
_SAME_COLOUR = 2.0


@dataclass(frozen=True)
class ColourRegion:
    """Where a colour word lives in CIELAB: ranges of hue angle (degrees, may wrap through 0),
    lightness (0-100) and chroma."""

    word: str
    hue: tuple[float, float]
    lightness: tuple[float, float]
    chroma: tuple[float, float]

    def score(self, lab: Lab, margins: tuple[float, float, float]) -> float:
        """1 well inside the region, falling linearly to 0 at its edge (margins: hue degrees,
        lightness, chroma)."""
        lightness, a, b = lab
        chroma = math.hypot(a, b)
        hue = math.degrees(math.atan2(b, a)) % 360.0
        inside = [_inside(lightness, self.lightness, 100.0) / margins[1],
                  _inside(chroma, self.chroma, 200.0) / margins[2]]
        if self.hue[1] - self.hue[0] < 360.0:
            start, end = self.hue[0] % 360.0, self.hue[1] % 360.0
            span = (end - start) % 360.0
            offset = (hue - start) % 360.0
            inside.append(min(offset, span - offset) / margins[0] if offset <= span else -1.0)
        return float(min(1.0, max(0.0, min(inside))))


def _inside(value: float, bounds: tuple[float, float], top: float) -> float:
    """How far ``value`` lies inside ``bounds`` (negative outside); a bound at 0 or at ``top``
    (the scale's end) is open: nothing lies beyond it."""
    sides = [math.inf]
    if bounds[0] > 0.0:
        sides.append(value - bounds[0])
    if bounds[1] < top:
        sides.append(bounds[1] - value)
    return min(sides)


@dataclass(frozen=True)
class NamingConfig(settings.Checked, section="naming", error=AppearanceConfigError,
                   positive=("hue_margin_deg", "lightness_margin", "chroma_margin",
                             "main_share_margin"),
                   within={"min_confidence": (0.0, 1.0)}):
    """How colour words are given: the margins over which a word's confidence rises from 0 at
    its region's edge to 1, and the confidence below which a word is not reported at all.

    ``main_share_margin``: how much more of the object the larger colour must cover than a
    second, distinct one to be the main colour with full confidence (an even check pattern
    has no main colour: which square wins depends on the view)."""

    hue_margin_deg: float = 10.0
    lightness_margin: float = 6.0
    chroma_margin: float = 6.0
    min_confidence: float = 0.05
    main_share_margin: float = 0.25


@dataclass(frozen=True)
class PatternConfig(settings.Checked, section="pattern", error=AppearanceConfigError,
                    within={"second_share_min": (0.0, 0.5), "stripe_span_min": (0.0, 1.0),
                            "band_max_share": (0.0, 1.0)},
                    positive=("chroma_delta_min", "stripe_elongation_min", "share_margin",
                              "chroma_margin", "elongation_margin", "span_margin",
                              "checks_margin")):
    """When two colours make a pattern, and which one.

    A second colour is part of the object's pattern when it covers at least
    ``second_share_min`` of the object and differs from the first in hue and chroma by
    ``chroma_delta_min`` (lightness alone is shading). Then one long patch of it (elongation at
    least ``stripe_elongation_min``) that runs across the object (covering ``stripe_span_min``
    of its length that way) is a stripe, several patches are checks. A patch that is not long
    (a band with a label of its colour on it makes a cross) is still a stripe when it crosses
    ``stripe_span_min`` of the object's rows or columns taking at most ``band_max_share`` of
    each on median: a band runs through every line across it, a label through some. The margins turn
    distances from these thresholds into confidences (``checks_margin``: patches beyond the
    first of either colour for full confidence in checks).
    """

    second_share_min: float = 0.08
    chroma_delta_min: float = 20.0
    stripe_elongation_min: float = 2.0
    stripe_span_min: float = 0.8
    band_max_share: float = 0.4
    share_margin: float = 0.04
    span_margin: float = 0.1
    checks_margin: float = 2.0
    chroma_margin: float = 8.0
    elongation_margin: float = 0.8


@dataclass(frozen=True)
class MatchingConfig(settings.Checked, section="matching", error=AppearanceConfigError,
                     positive=("max_distance", "margin", "colour_scale")):
    """Same-instance matching: a candidate further than ``max_distance`` never matches, and the
    best must beat the second best by ``margin`` or the matcher abstains. ``colour_scale`` is
    the CIELAB distance between main colours that counts as fully different; ``weights``
    weigh the colour histogram, the main colours and the texture in the distance."""

    max_distance: float = 0.45
    margin: float = 0.06
    colour_scale: float = 40.0
    weights: tuple[float, float, float] = (0.3, 0.3, 0.4)

    def __post_init__(self) -> None:
        super().__post_init__()
        if len(self.weights) != 3 or any(not (math.isfinite(w) and w >= 0.0)
                                         for w in self.weights) or not sum(self.weights) > 0:
            raise AppearanceConfigError(
                f"matching.weights must be three numbers >= 0 (colour histogram, main colours, "
                f"texture) with a positive sum, got {self.weights!r}")


@dataclass(frozen=True)
class DescribeConfig(settings.Checked, section="describe", error=AppearanceConfigError,
                     positive_int=("min_pixels", "sample_pixels", "lightness_bins",
                                   "chroma_bins", "texture_bins"),
                     within={"blob_share": (0.0, 0.5)}):
    """How a crop is measured: at least ``min_pixels`` masked pixels, at most
    ``sample_pixels`` of them clustered, and a histogram of ``lightness_bins`` x
    ``chroma_bins`` x ``chroma_bins`` (L and the chromaticity of a, b) and one of
    ``texture_bins`` gradient directions; a patch of the second colour counts when it covers
    ``blob_share`` of the object."""

    min_pixels: int = 120
    sample_pixels: int = 4000
    lightness_bins: int = 3
    chroma_bins: int = 8
    blob_share: float = 0.03
    texture_bins: int = 8


@dataclass(frozen=True)
class CropConfig(settings.Checked, section="crops", error=AppearanceConfigError,
                 positive_int=("ring_px", "frames", "min_box_px", "sightings",
                               "keyframes_per_camera"),
                 positive=("min_delta",),
                 non_negative=("sighting_window_s",),
                 within={"min_share": (0.0, 1.0), "min_inside": (0.0, 1.0),
                         "instance_inside": (0.0, 1.0)}):
    """Crops around a remembered box.

    Where the keyframe kept its segmentation, :func:`instance_mask` takes the instance with
    the most pixels in the box of those with at least ``instance_inside`` of their pixels in
    it, when it covers at least ``min_share`` of the box. Where none was kept,
    :func:`object_mask` compares the box with a ring ``ring_px`` wide around it: pixels further
    than ``min_delta`` (CIELAB) from every colour of the ring stand out, and at least
    ``min_share`` of the box must. A node's look measures ``frames`` keyframes whose projected
    box is at least ``min_box_px`` wide and high with ``min_inside`` of it in the image: those
    a camera took within ``sighting_window_s`` of an image it saw the node in first, among
    the node's newest ``sightings`` sightings and at most ``keyframes_per_camera`` keyframes of
    each camera in their time span (bounds on what one look reads after hours of work).
    """

    ring_px: int = 6
    min_delta: float = 18.0
    min_share: float = 0.15
    frames: int = 5
    min_box_px: int = 14
    min_inside: float = 0.6
    sighting_window_s: float = 0.05
    sightings: int = 400
    keyframes_per_camera: int = 5000
    instance_inside: float = 0.5


@dataclass(frozen=True)
class AppearanceConfig:
    """The settings of ``config/appearance.yaml``."""

    colours: tuple[ColourRegion, ...]
    naming: NamingConfig = NamingConfig()
    pattern: PatternConfig = PatternConfig()
    matching: MatchingConfig = MatchingConfig()
    describe: DescribeConfig = DescribeConfig()
    crops: CropConfig = CropConfig()

    def __post_init__(self) -> None:
        if not self.colours:
            raise AppearanceConfigError("appearance settings name no colour")


def _range(word: str, key: str, value: object, low: float, high: float) -> tuple[float, float]:
    if (not isinstance(value, list | tuple) or len(value) != 2
            or any(isinstance(v, bool) or not isinstance(v, int | float) for v in value)):
        raise AppearanceConfigError(f"colours.{word}.{key} must be two numbers, got {value!r}")
    start, end = float(value[0]), float(value[1])
    if not (low <= start < end <= high):
        raise AppearanceConfigError(
            f"colours.{word}.{key} must satisfy {low:g} <= from < to <= {high:g}, got {value!r}")
    return start, end


def parse_appearance_config(data: Mapping[str, Any]) -> AppearanceConfig:
    """Settings from the mapping of ``config/appearance.yaml``.

    Raises:
        AppearanceConfigError: Unknown keys, malformed colour regions or out-of-range values.
    """
    settings.refuse_unknown(data, {"colours", "naming", "pattern", "matching", "describe",
                                   "crops"},
                            "appearance settings", AppearanceConfigError)
    raw = data.get("colours")
    if not isinstance(raw, Mapping) or not raw:
        raise AppearanceConfigError("appearance settings need a mapping 'colours'")
    regions = []
    for word, spec in raw.items():
        if not isinstance(word, str) or not word.strip() or not isinstance(spec, Mapping):
            raise AppearanceConfigError(f"colours.{word} must map a word to its region")
        settings.refuse_unknown(spec, {"hue", "lightness", "chroma"}, f"colours.{word}",
                                AppearanceConfigError)
        regions.append(ColourRegion(
            word.strip(), _range(word, "hue", spec.get("hue", [0, 360]), -360.0, 720.0),
            _range(word, "lightness", spec.get("lightness", [0, 100]), 0.0, 101.0),
            _range(word, "chroma", spec.get("chroma", [0, 200]), 0.0, 200.0)))
    return AppearanceConfig(
        tuple(regions),
        settings.section(NamingConfig, "naming", data.get("naming"), AppearanceConfigError),
        settings.section(PatternConfig, "pattern", data.get("pattern"), AppearanceConfigError),
        _matching(data.get("matching")),
        settings.section(DescribeConfig, "describe", data.get("describe"),
                         AppearanceConfigError),
        settings.section(CropConfig, "crops", data.get("crops"), AppearanceConfigError))


def _matching(raw: object) -> MatchingConfig:
    """The matching section; ``weights`` is a list of numbers, which the shared loader (lists
    of strings) does not read."""
    if not isinstance(raw, Mapping):
        return settings.section(MatchingConfig, "matching", raw, AppearanceConfigError)
    rest = dict(raw)
    weights = rest.pop("weights", None)
    config = settings.section(MatchingConfig, "matching", rest, AppearanceConfigError)
    if weights is None:
        return config
    if (not isinstance(weights, list | tuple) or len(weights) != 3
            or any(isinstance(w, bool) or not isinstance(w, int | float) for w in weights)):
        raise AppearanceConfigError(f"matching.weights must be three numbers, got {weights!r}")
    return dataclasses.replace(config, weights=(float(weights[0]), float(weights[1]),
                                                float(weights[2])))


def load_appearance_config(path: str | Path) -> AppearanceConfig:
    """Settings from a YAML file (see :func:`parse_appearance_config`)."""
    return parse_appearance_config(
        settings.read_mapping(path, "appearance settings", AppearanceConfigError))


# ------------------------------------------------------------------------------ describing
@dataclass(frozen=True)
class Appearance:
    """What the pixels of one object show.

    Attributes:
        pixels: Masked pixels measured.
        colours: The main colours in CIELAB with their shares, largest first (one or two).
        histogram: Normalised CIELAB histogram of the masked pixels (flattened).
        boundary_density: Pixels on the boundary between the two colours per masked pixel.
        coherence: Orientation coherence of that boundary in [0, 1]: near 1 when it runs one
            way, near 0 when it runs two crossing ways or nowhere.
        blobs: Separate patches of the second colour, each at least ``describe.blob_share``
            of the object (a band is one, a check pattern several).
        elongation: Length over width of the largest such patch (a band is long and thin).
        span: How much of the object's length along that patch's long axis the patch covers
            (a band around the object spans it, a label or a mark does not).
        main_blobs: Separate patches of the main colour of the same least size: one around a
            label, two beside a band, two or more for checks (each colour's squares apart).
        crossing: The larger over image rows and columns of the share of the object's lines
            the second colour crosses, where it takes at most ``pattern.band_max_share`` of
            those lines on median (else 0): near 1 for a band around the object, whatever is
            printed on it, the label's share of the object's width for a label.
        texture: Normalised histogram of the masked pixels' gradient directions (weighted by
            strength) with a last bin for smooth pixels: print, grain and edges.
    """

    pixels: int
    colours: tuple[tuple[Lab, float], ...]
    histogram: npt.NDArray[np.float64]
    boundary_density: float
    coherence: float
    blobs: int = 0
    elongation: float = 0.0
    span: float = 0.0
    texture: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros(1))
    main_blobs: int = 0
    crossing: float = 0.0

    def chroma_delta(self) -> float:
        """How far apart the two main colours lie in chromaticity (:func:`chromaticity`),
        which shading across one plain surface barely changes; 0 with one colour."""
        if len(self.colours) < 2:
            return 0.0
        return math.dist(chromaticity(self.colours[0][0]), chromaticity(self.colours[1][0]))


#: Lightness added before dividing by it, so near-black colours keep a small chromaticity.
_DARK_OFFSET = 10.0
#: Scale of chromaticity: a mid-lightness colour keeps about its CIELAB a, b.
_CHROMA_SCALE = 60.0


def chromaticity(lab: Lab) -> tuple[float, float]:
    """CIELAB a, b divided by lightness (plus a small offset) and scaled back to about a, b
    at mid lightness: a surface's colour stays put when light or shade scale its brightness,
    while two colours of another hue, or a dark or white one beside a saturated one, differ."""
    scale = _CHROMA_SCALE / (lab[0] + _DARK_OFFSET)
    return lab[1] * scale, lab[2] * scale


def _lab(bgr: BgrImage) -> npt.NDArray[np.float32]:
    """CIELAB of an 8-bit BGR image (L in 0-100, a and b about -128..127)."""
    return cv2.cvtColor(bgr.astype(np.float32) / 255.0, cv2.COLOR_BGR2Lab)


def describe(bgr: BgrImage, mask: Mask | None, config: AppearanceConfig,
             seed: int = 0) -> Appearance:
    """Measure the masked pixels of a crop (the whole crop when ``mask`` is None).

    Raises:
        AppearanceError: Not an 8-bit 3-channel image, a mask of another size or type, or
            fewer masked pixels than ``describe.min_pixels``.
    """
    if not isinstance(bgr, np.ndarray) or bgr.dtype != np.uint8 or bgr.ndim != 3 \
            or bgr.shape[2] != 3:
        raise AppearanceError(
            f"a crop must be an 8-bit HxWx3 image, got {getattr(bgr, 'dtype', type(bgr))} "
            f"{getattr(bgr, 'shape', '')}")
    if mask is None:
        mask = np.ones(bgr.shape[:2], dtype=bool)
    if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_ \
            or mask.shape != bgr.shape[:2]:
        raise AppearanceError(f"the mask must be a boolean {bgr.shape[:2]} array, got "
                              f"{getattr(mask, 'dtype', type(mask))} {getattr(mask, 'shape', '')}")
    cfg = config.describe
    count = int(mask.sum())
    if count < cfg.min_pixels:
        raise AppearanceError(f"{count} masked pixels, fewer than the {cfg.min_pixels} needed")
    lab = _lab(bgr)
    pixels = lab[mask].astype(np.float64)
    rng = np.random.default_rng(seed)
    sample = pixels if len(pixels) <= cfg.sample_pixels else pixels[
        rng.choice(len(pixels), cfg.sample_pixels, replace=False)]
    if float(np.ptp(sample, axis=0).max()) < _SAME_COLOUR:
        centres = sample.mean(axis=0, keepdims=True)  # one colour: nothing to split
    else:
        centres = _kmeans(sample, 2, rng)
    distances = np.linalg.norm(pixels[:, None, :] - centres[None, :, :], axis=2)
    labels = np.argmin(distances, axis=1)
    shares = np.bincount(labels, minlength=len(centres)) / len(labels)
    order = np.argsort(-shares)
    colours = tuple((_triple(centres[k]), float(shares[k])) for k in order if shares[k] > 0)
    label_image = np.full(mask.shape, -1, dtype=np.int8)
    label_image[mask] = (labels == order[0]).astype(np.int8)  # 1: the main colour
    density, coherence = _boundary(label_image)
    blobs, elongation, span = _patches(label_image == 0, mask, cfg.blob_share)
    main_blobs, _, _ = _patches(label_image == 1, mask, cfg.blob_share)
    crossing = _crossing(label_image == 0, mask, config.pattern.band_max_share)
    scale = _CHROMA_SCALE / (pixels[:, 0:1] + _DARK_OFFSET)
    hist, _ = np.histogramdd(
        np.column_stack([pixels[:, 0], pixels[:, 1:] * scale]),
        bins=(cfg.lightness_bins, cfg.chroma_bins, cfg.chroma_bins),
        range=((0.0, 100.0), (-120.0, 120.0), (-120.0, 120.0)))
    hist = hist.ravel() / max(hist.sum(), 1.0)
    return Appearance(count, colours, hist, density, coherence, blobs, elongation, span,
                      _texture(bgr, mask, cfg.texture_bins), main_blobs, crossing)


def _kmeans(points: npt.NDArray[np.float64], k: int, rng: np.random.Generator
            ) -> npt.NDArray[np.float64]:
    """``k`` cluster centres (scipy's k-means++; a cluster left empty is simply unused)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        centres, _ = kmeans2(points, k, seed=rng, minit="++")
    return np.asarray(centres[np.all(np.isfinite(centres), axis=1)], dtype=np.float64)


def _triple(values: npt.ArrayLike) -> Lab:
    arr = np.asarray(values, dtype=np.float64)
    return (float(arr[0]), float(arr[1]), float(arr[2]))


def _boundary(label_image: npt.NDArray[np.int8]) -> tuple[float, float]:
    """(boundary pixels per masked pixel, orientation coherence) of a two-colour label image
    (-1 outside the mask)."""
    inside = label_image >= 0
    binary = (label_image == 1).astype(np.float32)
    gx = cv2.Sobel(binary, cv2.CV_32F, 1, 0, ksize=3)
    gy = cv2.Sobel(binary, cv2.CV_32F, 0, 1, ksize=3)
    # only edges between the two colours: both sides of the 3x3 window inside the mask
    interior = cv2.erode(inside.astype(np.uint8), np.ones((3, 3), np.uint8)) > 0
    weight = np.hypot(gx, gy) * interior
    on_edge = weight > 0
    count = int(inside.sum())
    density = float(on_edge.sum()) / max(count, 1)
    total = float(weight.sum())
    if total <= 0.0:
        return density, 0.0
    angle = np.arctan2(gy, gx)
    doubled = complex(float((weight * np.cos(2 * angle)).sum()),
                      float((weight * np.sin(2 * angle)).sum()))
    return density, float(abs(doubled) / total)


#: Gradient strength (grey levels per pixel, Sobel 3x3 scaled) under which a pixel is smooth.
_SMOOTH = 8.0


def _texture(bgr: BgrImage, mask: Mask, bins: int) -> npt.NDArray[np.float64]:
    """Direction histogram of the grey gradients inside the mask (see :class:`Appearance`)."""
    grey = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY).astype(np.float32)
    gx = cv2.Sobel(grey, cv2.CV_32F, 1, 0, ksize=3) / 4.0
    gy = cv2.Sobel(grey, cv2.CV_32F, 0, 1, ksize=3) / 4.0
    strength = np.hypot(gx, gy)[mask]
    direction = (np.arctan2(gy, gx)[mask] % np.pi) / np.pi  # edges have no sign
    strong = strength >= _SMOOTH
    hist = np.bincount(np.minimum((direction[strong] * bins).astype(int), bins - 1),
                       weights=strength[strong], minlength=bins).astype(np.float64)
    total = float(hist.sum())
    textured = float(strong.mean()) if strength.size else 0.0
    hist = hist / total * textured if total > 0 else hist
    return np.append(hist, 1.0 - textured)


#: Masked pixels a row or column needs to count as a line across the object.
_MIN_LINE_PX = 3


def _crossing(second: npt.NDArray[np.bool_], mask: Mask, max_share: float) -> float:
    """See ``Appearance.crossing``; specks of one pixel are opened away first."""
    opened = cv2.morphologyEx(second.astype(np.uint8), cv2.MORPH_OPEN,
                              np.ones((3, 3), np.uint8)) > 0
    best = 0.0
    for axis in (0, 1):  # 0: per column (a horizontal band), 1: per row (a vertical one)
        length = mask.sum(axis=axis)
        lines = length >= _MIN_LINE_PX
        if not lines.any():
            continue
        taken = (opened & mask).sum(axis=axis)[lines] / length[lines]
        crossed = taken > 0
        if not crossed.any() or float(np.median(taken[crossed])) > max_share:
            continue
        best = max(best, float(crossed.mean()))
    return best


def _patches(second: npt.NDArray[np.bool_], mask: Mask, min_share: float
             ) -> tuple[int, float, float]:
    """(patches of the second colour of at least ``min_share`` of the mask, elongation of the
    largest, the share of the object's length along its long axis that it covers)."""
    count = int(mask.sum())
    opened = cv2.morphologyEx(second.astype(np.uint8), cv2.MORPH_OPEN,
                              np.ones((3, 3), np.uint8))
    n, labels, stats, _ = cv2.connectedComponentsWithStats(opened, connectivity=4)
    big = [i for i in range(1, n) if stats[i, cv2.CC_STAT_AREA] >= min_share * count]
    if not big:
        return 0, 0.0, 0.0
    largest = max(big, key=lambda i: stats[i, cv2.CC_STAT_AREA])
    ys, xs = np.nonzero(labels == largest)
    points = np.column_stack([xs, ys]).astype(np.float64)
    eigen, vectors = np.linalg.eigh(np.cov(points.T))
    elongation = math.sqrt(max(float(eigen[-1]), 0.0) / max(float(eigen[0]), 0.25))
    axis = vectors[:, -1]
    along = points @ axis
    mys, mxs = np.nonzero(mask)
    whole = np.column_stack([mxs, mys]).astype(np.float64) @ axis
    span = (float(np.ptp(along)) + 1.0) / (float(np.ptp(whole)) + 1.0)
    return len(big), float(elongation), min(1.0, span)


def delta_e(a: Lab, b: Lab) -> float:
    """CIELAB distance (CIE76) between two colours."""
    return math.dist(a, b)


# ------------------------------------------------------------------------------ naming
@dataclass(frozen=True)
class Attribute:
    """A named attribute with its confidence in [0, 1] and the measure behind it."""

    word: str
    confidence: float
    why: str


def _colour_word(lab: Lab, share: float,
                 config: AppearanceConfig) -> Attribute:
    """The most confident colour region of one CIELAB colour."""
    cfg = config.naming
    margins = (cfg.hue_margin_deg, cfg.lightness_margin, cfg.chroma_margin)
    scored = sorted(((region.score(lab, margins), region.word)
                     for region in config.colours), reverse=True)
    best, word = scored[0]
    runner = scored[1][0] if len(scored) > 1 else 0.0
    confidence = max(0.0, best - runner) if runner > 0 else best
    hue = math.degrees(math.atan2(lab[2], lab[1])) % 360.0
    return Attribute(word, confidence,
                     f"{share:.0%} of the object at L {lab[0]:.0f}, hue {hue:.0f} deg, "
                     f"chroma {math.hypot(lab[1], lab[2]):.0f}")


def _distinct_second(appearance: Appearance, config: AppearanceConfig) -> bool:
    """Whether the object has a second colour of its own: one covering at least
    ``pattern.second_share_min`` that differs in hue or chroma, not only in shading."""
    return (len(appearance.colours) > 1
            and appearance.colours[1][1] >= config.pattern.second_share_min
            and appearance.chroma_delta() >= config.pattern.chroma_delta_min)


def colour_words(appearance: Appearance, config: AppearanceConfig) -> list[Attribute]:
    """The colour word of each main colour that counts (the second only when it covers
    ``pattern.second_share_min`` and differs in hue or chroma, not only in shading), the most
    confident region per colour, main colour first."""
    out: list[Attribute] = []
    for index, (lab, share) in enumerate(appearance.colours):
        if index > 0 and not _distinct_second(appearance, config):
            break
        attribute = _colour_word(lab, share, config)
        if attribute.confidence < config.naming.min_confidence \
                or any(a.word == attribute.word for a in out):
            continue
        out.append(attribute)
    return out


def main_colour_word(appearance: Appearance, config: AppearanceConfig) -> Attribute | None:
    """The colour word of the object's main colour (the larger), or None when it is not
    named with ``naming.min_confidence`` (a label's or a part's colour is never the main).

    Where a second, distinct colour (as :func:`colour_words` counts one) covers nearly as much,
    the confidence falls with the lead in share, to 0 at an even split
    (``naming.main_share_margin``)."""
    if not appearance.colours:
        return None
    lab, share = appearance.colours[0]
    attribute = _colour_word(lab, share, config)
    if _distinct_second(appearance, config):
        lead = share - appearance.colours[1][1]
        if lead < config.naming.main_share_margin:
            attribute = dataclasses.replace(
                attribute, confidence=attribute.confidence * max(
                    0.0, lead / config.naming.main_share_margin),
                why=f"{attribute.why}, only {lead:.0%} more of it than of a second colour")
    return attribute if attribute.confidence >= config.naming.min_confidence else None


def pattern_word(appearance: Appearance, config: AppearanceConfig) -> Attribute:
    """``plain``, ``striped`` or ``checked`` with a confidence (near 0 close to a threshold)."""
    cfg = config.pattern
    if len(appearance.colours) < 2:
        return Attribute("plain", 1.0, "one colour")
    share = appearance.colours[1][1]
    chroma = appearance.chroma_delta()
    measured = (f"second colour {share:.0%} of the object, {chroma:.0f} apart in hue and "
                f"chroma, {appearance.blobs} patch(es), the largest {appearance.elongation:.1f} "
                f"times longer than wide, across {appearance.span:.0%} of the object")
    plain_by = max((cfg.second_share_min - share) / cfg.share_margin,
                   (cfg.chroma_delta_min - chroma) / cfg.chroma_margin)
    if plain_by >= 0.0 or appearance.blobs == 0:
        return Attribute("plain", min(1.0, max(plain_by, 0.0 if appearance.blobs else 1.0)),
                         measured)
    patterned = min(1.0, -plain_by)
    long_by = min((appearance.elongation - cfg.stripe_elongation_min) / cfg.elongation_margin,
                  (appearance.span - cfg.stripe_span_min) / cfg.span_margin)
    if appearance.blobs == 1:
        if long_by >= 0.0:
            return Attribute("striped", min(patterned, 1.0, long_by), measured)
        band_by = (appearance.crossing - cfg.stripe_span_min) / cfg.span_margin
        if band_by >= 0.0:
            return Attribute("striped", min(patterned, 1.0, band_by),
                             f"{measured}; it crosses {appearance.crossing:.0%} of the "
                             "object's lines one way, thinly (a band, with a mark on it)")
        return Attribute("plain", 0.0, measured + " (one short patch: a label or a mark)")
    # every patch beyond the first of either colour: a 2x2 check splits both colours in two
    extra = appearance.blobs - 1 + max(appearance.main_blobs - 1, 0)
    return Attribute("checked", min(patterned, 1.0, extra / cfg.checks_margin),
                     f"{measured}, the main colour in {appearance.main_blobs} patch(es)")


# ------------------------------------------------------------------------------ matching
def _hellinger(p: npt.NDArray[np.float64], q: npt.NDArray[np.float64]) -> float:
    if p.shape != q.shape:
        return 1.0
    return math.sqrt(max(0.0, 1.0 - float(np.sum(np.sqrt(p * q)))))


def distance(a: Appearance, b: Appearance, config: AppearanceConfig) -> float:
    """How different two objects look, in [0, 1]: the colour histograms' Hellinger distance,
    the main colours' CIELAB distance (share-weighted, both orders) over
    ``matching.colour_scale``, and the texture histograms' Hellinger distance, weighted by
    ``matching.weights``."""
    colour = 0.0
    for ours, theirs in ((a, b), (b, a)):
        colour += sum(share * min(delta_e(lab, other) for other, _ in theirs.colours)
                      for lab, share in ours.colours) / 2.0
    w_hist, w_colour, w_texture = config.matching.weights
    return (w_hist * _hellinger(a.histogram, b.histogram)
            + w_colour * min(1.0, colour / config.matching.colour_scale)
            + w_texture * _hellinger(a.texture, b.texture)) / (w_hist + w_colour + w_texture)


@dataclass(frozen=True)
class Match:
    """The matcher's answer: the chosen candidate (None when it abstains) and why."""

    best: str | None
    distance: float
    runner_up: str | None
    runner_distance: float
    reason: str


def match(reference: Appearance, candidates: Mapping[str, Appearance],
          config: AppearanceConfig) -> Match:
    """The candidate that looks most like ``reference``, or an abstention when none is close
    enough or the best two are within ``matching.margin`` of each other."""
    return match_distances({key: distance(reference, app, config)
                            for key, app in candidates.items()}, config)


def match_distances(distances: Mapping[str, float], config: AppearanceConfig) -> Match:
    """:func:`match` over distances already measured (candidate -> distance to the reference,
    for instance pooled over several views of each)."""
    cfg = config.matching
    if not distances:
        return Match(None, math.inf, None, math.inf, "no candidate has been seen")
    ranked = sorted((d, key) for key, d in distances.items())
    best_d, best = ranked[0]
    runner_d, runner = ranked[1] if len(ranked) > 1 else (math.inf, None)
    if best_d > cfg.max_distance:
        return Match(None, best_d, best, runner_d,
                     f"nothing looks alike: the closest, {best}, is {best_d:.2f} away "
                     f"(more than {cfg.max_distance:g})")
    if runner is not None and runner_d - best_d < cfg.margin:
        return Match(None, best_d, best, runner_d,
                     f"{best} ({best_d:.2f}) and {runner} ({runner_d:.2f}) look too much "
                     f"alike to choose (margin {cfg.margin:g})")
    gap = "" if runner is None else f", next {runner} at {runner_d:.2f}"
    return Match(best, best_d, runner, runner_d, f"{best} looks most alike ({best_d:.2f}{gap})")


# ------------------------------------------------------------------------------ masks
def _check_box(box: tuple[int, int, int, int], height: int, width: int) -> None:
    x0, y0, x1, y1 = box
    if not (0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height):
        raise AppearanceError(f"box {box} does not lie inside a {width}x{height} image")


def instance_mask(instances: npt.NDArray[np.uint16], box: tuple[int, int, int, int],
                  config: AppearanceConfig) -> Mask:
    """The pixels of the segmented instance that is the object in ``box`` (x0, y0, x1, y1,
    exclusive ends) of a keyframe kept with its segmentation (an instance-id image, 0 for
    background): of the instances with at least ``crops.instance_inside`` of their pixels in
    the box (not the fixture or the counter the box lies on), the one with the most pixels
    there. The whole instance is the mask, also where it reaches past the box.

    Raises:
        AppearanceError: A box outside the image or empty, or no instance that lies mostly
            in the box and covers ``crops.min_share`` of it (the segmenter missed the object
            in this frame, or something hides it).
    """
    height, width = instances.shape[:2]
    _check_box(box, height, width)
    x0, y0, x1, y1 = box
    inside = instances[y0:y1, x0:x1]
    ids, counts = np.unique(inside[inside > 0], return_counts=True)
    if ids.size:
        totals = np.bincount(instances.ravel(), minlength=int(ids.max()) + 1)[ids]
        mostly_inside = counts >= config.crops.instance_inside * totals
        ids, counts = ids[mostly_inside], counts[mostly_inside]
    share = float(counts.max()) / inside.size if ids.size else 0.0
    if share < config.crops.min_share:
        raise AppearanceError(
            f"no segmented instance lies in box {box} (the best covers {share:.0%} of it)")
    return np.asarray(instances == ids[int(np.argmax(counts))])


def object_mask(bgr: BgrImage, box: tuple[int, int, int, int],
                config: AppearanceConfig) -> Mask:
    """The pixels inside ``box`` (x0, y0, x1, y1, exclusive ends) that do not look like the
    ring of pixels around it (``crops`` settings), the one patch of them nearest the box's
    centre (of those at least a quarter the size of the largest): an object's mask where no
    segmentation was kept (a keyframe crop around a remembered box).

    Raises:
        AppearanceError: A box outside the image or empty, a box with too little around it to
            compare (it fills the image), or one where less than ``crops.min_share`` of the box
            stands out from its surroundings (the object is not there, or looks like what is
            around it): measuring the box anyway would read the background.
    """
    crops = config.crops
    ring, min_delta, min_share = crops.ring_px, crops.min_delta, crops.min_share
    height, width = bgr.shape[:2]
    _check_box(box, height, width)
    x0, y0, x1, y1 = box
    mask = np.zeros((height, width), dtype=bool)
    ox0, oy0 = max(0, x0 - ring), max(0, y0 - ring)
    ox1, oy1 = min(width, x1 + ring), min(height, y1 + ring)
    outer = np.zeros_like(mask)
    outer[oy0:oy1, ox0:ox1] = True
    outer[y0:y1, x0:x1] = False
    if outer.sum() < 20:
        raise AppearanceError(f"box {box} leaves too little of the image around it to compare")
    lab = _lab(bgr)
    ring_pixels = lab[outer].astype(np.float64)
    if float(np.ptp(ring_pixels, axis=0).max()) < _SAME_COLOUR:
        centres = ring_pixels.mean(axis=0, keepdims=True)
    else:
        centres = _kmeans(ring_pixels, 3, np.random.default_rng(0))
    inner = lab[y0:y1, x0:x1].reshape(-1, 3).astype(np.float64)
    nearest = np.min(np.linalg.norm(inner[:, None, :] - centres[None, :, :], axis=2), axis=1)
    standing_out = (nearest > min_delta).reshape(y1 - y0, x1 - x0).astype(np.uint8)
    # one thing: the patch nearest the box's centre (a neighbour reaching into the box is
    # another patch)
    count, labels, stats, centroids = cv2.connectedComponentsWithStats(standing_out,
                                                                       connectivity=8)
    if count > 1:
        centre = np.array([(x1 - x0) / 2.0, (y1 - y0) / 2.0])
        big = [i for i in range(1, count)
               if stats[i, cv2.CC_STAT_AREA] >= 0.25 * stats[1:, cv2.CC_STAT_AREA].max()]
        chosen = min(big, key=lambda i: float(np.linalg.norm(centroids[i] - centre)))
        mask[y0:y1, x0:x1] = labels == chosen
    share = float(mask.sum()) / ((x1 - x0) * (y1 - y0))
    if share < min_share:
        raise AppearanceError(f"only {share:.0%} of box {box} stands out from its surroundings")
    return mask


__all__ = ["Appearance", "AppearanceConfig", "Attribute", "ColourRegion", "Match",
           "colour_words", "delta_e", "describe", "distance", "instance_mask",
           "load_appearance_config", "match", "object_mask", "parse_appearance_config",
           "pattern_word"]
