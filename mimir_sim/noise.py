"""Noise of the simulated robot's sensors and actuators: named profiles, one scale, seeded draws.

A profile is a YAML file under ``config/noise/`` (``ideal``, ``realistic``) or a path. Every term
is written ``name: {value: ..., source: ...}``: the value and where it comes from (a data sheet,
a paper, a measurement, or ``assumption: ...`` for a rate nobody here can measure). The terms:

* ``depth`` (stereo depth as a ZED reports it): noise whose standard deviation grows with the
  square of range, invalid pixels (NaN) on the far side of depth edges (seen by one lens only)
  and on dark or saturated surfaces, and the camera's near and far limits;
* ``color``: exposure and white-balance variation per frame, motion blur while the camera moves
  (the image motion over the exposure time) and JPEG-like compression;
* ``segmentation`` (the stand-in for SAM3 with the robot's vocabulary): instances missed more
  often when small (far or occluded) and far away, masks eroded or dilated at their boundary,
  labels confused within groups of look-alike classes, scores below 1;
* ``odometry``: the base's wheel odometry drifts (scale error and a random walk growing with the
  distance travelled and the angle turned), so the base ends a move where odometry is wrong;
* ``arm``: the hand lands off the commanded pose by a calibration offset (drawn at each arm
  reset) plus an approach error (drawn for each motion), neither of which the arm's own state
  reports; whether a grasp then holds is left to the physics.

:meth:`NoiseProfile.scaled` multiplies every noise term by one scalar (0 is noise-free), so
results can be reported as curves over noise level. Sensor limits (near and far range) are
properties of the camera, not noise, and do not scale.

The functions that apply a profile take a :class:`numpy.random.Generator`; the simulation seeds
one per stream (:func:`stream_rng`) so the same seed, profile and scale give the same noise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from mimir import settings
from mimir.paths import ConfigFileNotFoundError, config_dir
from mimir_perception.segmentation import SegmentationResult, compose_instances
from mimir_sim.errors import SimError
from mimir_sim.rendering import CAMERAS, Frame

FloatArray = npt.NDArray[np.float64]
NOISE_DIR = "noise"
PROFILES = ("ideal", "realistic")

#: stream numbers of :func:`stream_rng` (one generator per consumer keeps them independent)
STREAM_CAMERAS = 1
STREAM_ODOMETRY = 2
STREAM_ARM = 3


class NoiseProfileError(SimError, ValueError):
    """A noise profile that cannot be found or is malformed (the message names the key)."""


# --------------------------------------------------------------------------------- the terms


@dataclass(frozen=True)
class DepthNoise(settings.Checked, section="depth", error=NoiseProfileError,
                 non_negative=("sigma_per_m2", "edge_invalid_px", "dark_invalid_p",
                               "bright_invalid_p"),
                 positive=("edge_jump_m", "max_range_m"),
                 within={"dark_below": (0.0, 1.0), "bright_above": (0.0, 1.0),
                         "dark_invalid_p": (0.0, 1.0), "bright_invalid_p": (0.0, 1.0)}):
    """Stereo depth: ``sigma(z) = sigma_per_m2 * z**2``; invalid pixels are NaN."""

    sigma_per_m2: float = 0.0
    edge_jump_m: float = 0.05
    edge_invalid_px: int = 0
    dark_below: float = 0.0
    dark_invalid_p: float = 0.0
    bright_above: float = 1.0
    bright_invalid_p: float = 0.0
    min_range_m: float = 0.0
    max_range_m: float = 100.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= self.min_range_m < self.max_range_m:
            raise NoiseProfileError(
                f"depth.min_range_m must lie in [0, max_range_m), got {self.min_range_m}")


@dataclass(frozen=True)
class ColorNoise(settings.Checked, section="color", error=NoiseProfileError,
                 non_negative=("exposure_sigma", "white_balance_sigma", "exposure_time_s"),
                 within={"jpeg_quality": (1, 100)}):
    """Colour: log-normal gain per frame and per channel, motion blur, JPEG compression."""

    exposure_sigma: float = 0.0
    white_balance_sigma: float = 0.0
    exposure_time_s: float = 0.0
    jpeg_quality: int = 100


@dataclass(frozen=True)
class SegmentationNoise(settings.Checked, section="segmentation", error=NoiseProfileError,
                        non_negative=("boundary_px",), positive=("small_area_px", "far_span_m"),
                        within={"miss_p": (0.0, 1.0), "miss_small_p": (0.0, 1.0),
                                "miss_far_p": (0.0, 1.0), "confusion_p": (0.0, 1.0),
                                "score_drop": (0.0, 1.0), "score_spread": (0.0, 1.0)}):
    """Segmentation misses, boundary errors, label confusion and scores.

    The chance to miss an instance is ``miss_p + miss_small_p * exp(-pixels / small_area_px) +
    miss_far_p * clip((range - far_from_m) / far_span_m, 0, 1)``. Its mask is eroded or dilated
    by up to ``boundary_px`` pixels. With ``confusion_p`` its label becomes another of its
    ``confusions`` group. Its score is ``1 - score_drop`` give or take ``score_spread``, lower
    for small instances.
    """

    miss_p: float = 0.0
    miss_small_p: float = 0.0
    small_area_px: float = 150.0
    miss_far_p: float = 0.0
    far_from_m: float = 2.0
    far_span_m: float = 2.0
    boundary_px: int = 0
    confusion_p: float = 0.0
    confusions: tuple[str, ...] = ()
    score_drop: float = 0.0
    score_spread: float = 0.0

    def groups(self) -> list[tuple[str, ...]]:
        """The confusion groups: each entry of ``confusions`` is ``"a|b|c"``."""
        out = []
        for entry in self.confusions:
            names = tuple(n.strip() for n in entry.split("|") if n.strip())
            if len(names) < 2:
                raise NoiseProfileError(
                    f"segmentation.confusions: {entry!r} needs at least two labels 'a|b'")
            out.append(names)
        return out

    def __post_init__(self) -> None:
        super().__post_init__()
        self.groups()


@dataclass(frozen=True)
class OdometryNoise(settings.Checked, section="odometry", error=NoiseProfileError,
                    non_negative=("scale_sigma", "xy_walk_per_sqrt_m", "yaw_walk_per_sqrt_m",
                                  "yaw_walk_per_sqrt_rad")):
    """Wheel odometry drift.

    ``scale_sigma``: std-dev of the per-reset scale error of translation (fraction);
    ``xy_walk_per_sqrt_m``: random walk of position, m per sqrt(m) travelled;
    ``yaw_walk_per_sqrt_m`` / ``yaw_walk_per_sqrt_rad``: random walk of heading, rad per
    sqrt(m) travelled and per sqrt(rad) turned.
    """

    scale_sigma: float = 0.0
    xy_walk_per_sqrt_m: float = 0.0
    yaw_walk_per_sqrt_m: float = 0.0
    yaw_walk_per_sqrt_rad: float = 0.0


@dataclass(frozen=True)
class ArmNoise(settings.Checked, section="arm", error=NoiseProfileError,
               non_negative=("calibration_sigma_m", "approach_sigma_m")):
    """Where the hand lands: calibration offset per reset, approach error per motion (m)."""

    calibration_sigma_m: float = 0.0
    approach_sigma_m: float = 0.0


_SECTIONS: dict[str, type[Any]] = {
    "depth": DepthNoise, "color": ColorNoise, "segmentation": SegmentationNoise,
    "odometry": OdometryNoise, "arm": ArmNoise,
}
#: terms that are sensor properties, not noise: :meth:`NoiseProfile.scaled` keeps them
_LIMITS = {"min_range_m", "max_range_m", "edge_jump_m", "small_area_px", "far_from_m",
           "far_span_m", "dark_below", "bright_above", "confusions"}
_PROBABILITIES = {"dark_invalid_p", "bright_invalid_p", "miss_p", "miss_small_p", "miss_far_p",
                  "confusion_p", "score_drop", "score_spread"}


@dataclass(frozen=True)
class NoiseProfile:
    """One named noise profile at one scale.

    Attributes:
        name: the profile's name (its file stem).
        scale: the factor every noise term was multiplied by (1 as written in the file).
        sources: ``section.term`` -> where the value comes from.
    """

    name: str = "ideal"
    scale: float = 1.0
    depth: DepthNoise = field(default_factory=DepthNoise)
    color: ColorNoise = field(default_factory=ColorNoise)
    segmentation: SegmentationNoise = field(default_factory=SegmentationNoise)
    odometry: OdometryNoise = field(default_factory=OdometryNoise)
    arm: ArmNoise = field(default_factory=ArmNoise)
    sources: Mapping[str, str] = field(default_factory=dict)

    def scaled(self, scale: float) -> NoiseProfile:
        """This profile with every noise term multiplied by ``scale`` (>= 0).

        Probabilities are clipped to 1, pixel counts rounded, JPEG quality moves from 100 towards
        the file's quality; sensor limits stay.
        """
        if isinstance(scale, bool) or not isinstance(scale, int | float) or not (
                math.isfinite(scale) and scale >= 0.0):
            raise NoiseProfileError(f"noise scale must be a finite number >= 0, got {scale!r}")
        changed: dict[str, Any] = {}
        for name in _SECTIONS:
            term = getattr(self, name)
            values: dict[str, Any] = {}
            for f in fields(term):
                value = getattr(term, f.name)
                if f.name in _LIMITS:
                    continue
                if f.name == "jpeg_quality":
                    values[f.name] = round(100 - min(1.0, scale) * (100 - value))
                elif f.name in _PROBABILITIES:
                    values[f.name] = min(1.0, value * scale)
                elif isinstance(value, int):
                    values[f.name] = round(value * scale)
                else:
                    values[f.name] = value * scale
            changed[name] = replace(term, **values)
        return replace(self, scale=self.scale * scale, **changed)

    def quiet(self, section: str) -> bool:
        """Whether the term ``section`` (depth, color, ...) adds no noise at this scale."""
        return bool(getattr(self, section) == getattr(self._silent, section))

    @cached_property
    def _silent(self) -> NoiseProfile:
        """This profile at scale 0 (built once: :meth:`quiet` is asked for every frame)."""
        return self.scaled(0.0)

    def summary(self) -> dict[str, Any]:
        """Name, scale and every term's value (for run reports)."""
        out: dict[str, Any] = {"profile": self.name, "scale": self.scale}
        for name in _SECTIONS:
            term = getattr(self, name)
            out[name] = {f.name: getattr(term, f.name) for f in fields(term)}
        return out


def parse_noise_profile(data: Mapping[str, Any], name: str) -> NoiseProfile:
    """Build a profile from decoded YAML (``section: {term: {value, source}}``).

    Raises:
        NoiseProfileError: unknown section or term, a term without ``value`` or ``source``, or a
            value out of range; the message names ``section.term``.
    """
    settings.refuse_unknown(data, set(_SECTIONS), f"noise profile {name!r}", NoiseProfileError)
    sections: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for section_name, cls in _SECTIONS.items():
        raw = data.get(section_name)
        if raw is None:
            sections[section_name] = cls()
            continue
        if not isinstance(raw, Mapping):
            raise NoiseProfileError(f"{section_name} must be a mapping of terms")
        values: dict[str, Any] = {}
        for term, entry in raw.items():
            key = f"{section_name}.{term}"
            if not isinstance(entry, Mapping) or set(entry) != {"value", "source"}:
                raise NoiseProfileError(f"{key} must be {{value: ..., source: ...}}, got {entry!r}")
            source = entry["source"]
            if not isinstance(source, str) or not source.strip():
                raise NoiseProfileError(f"{key}.source must say where the value comes from")
            values[str(term)] = entry["value"]
            sources[key] = source.strip()
        sections[section_name] = settings.section(cls, section_name, values, NoiseProfileError)
    return NoiseProfile(name=name, sources=sources, **sections)


def load_noise_profile(name_or_path: str | Path, scale: float = 1.0) -> NoiseProfile:
    """A profile by name (``config/noise/<name>.yaml``) or path, scaled by ``scale``.

    Raises:
        NoiseProfileError: no such profile, unreadable or malformed file, bad scale.
    """
    text = str(name_or_path)
    path = Path(text)
    if path.suffix not in (".yaml", ".yml"):
        try:
            folder = config_dir() / NOISE_DIR
        except ConfigFileNotFoundError as err:
            raise NoiseProfileError(f"no configuration folder to find profile {text!r}") from err
        path = folder / f"{text}.yaml"
        if not text or not path.is_file():
            known = sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []
            raise NoiseProfileError(
                f"unknown noise profile {text!r} (available: {', '.join(known) or 'none'})")
    data = settings.read_mapping(path, "noise profile", NoiseProfileError)
    return parse_noise_profile(data, path.stem).scaled(scale)


def stream_rng(seed: int, stream: int, index: int = 0) -> np.random.Generator:
    """The generator of one noise stream of a run (cameras, odometry, arm; ``index`` per camera)."""
    return np.random.default_rng([max(0, int(seed)), stream, index])


# --------------------------------------------------------------------------------- sensors

def noisy_depth(depth: npt.NDArray[np.float32], color: npt.NDArray[np.uint8] | None,
                term: DepthNoise, rng: np.random.Generator) -> npt.NDArray[np.float32]:
    """A stereo camera's reading of a true depth image (metres; NaN where it has no depth).

    ``color`` (the true colour image of the same view) decides which pixels are too dark or
    saturated to match; without it only range, edges and noise apply.
    """
    z = np.asarray(depth, dtype=np.float64)
    out = z + rng.standard_normal(z.shape) * (term.sigma_per_m2 * z * z)
    invalid = ~np.isfinite(z) | (z < term.min_range_m) | (z > term.max_range_m)
    if term.edge_invalid_px > 0:
        # the far side of an occlusion edge is seen by one lens only: background pixels within
        # edge_invalid_px of a surface nearer by more than edge_jump_m have no depth (the near
        # surface itself, a handle in front of its door, keeps it)
        finite = np.where(np.isfinite(z), z, term.max_range_m).astype(np.float32)
        size = 2 * term.edge_invalid_px + 1
        nearest = cv2.erode(finite, np.ones((size, size), np.uint8))
        invalid |= (finite - nearest) > term.edge_jump_m
    if color is not None and (term.dark_invalid_p > 0.0 or term.bright_invalid_p > 0.0):
        luma = cv2.cvtColor(np.ascontiguousarray(color), cv2.COLOR_RGB2GRAY) / 255.0
        draw = rng.random(z.shape)
        invalid |= (luma < term.dark_below) & (draw < term.dark_invalid_p)
        invalid |= (luma > term.bright_above) & (draw < term.bright_invalid_p)
    out[invalid] = np.nan
    return out.astype(np.float32)


def image_motion(pose_before: FloatArray, pose_now: FloatArray, k: FloatArray,
                 depth_m: float) -> FloatArray:
    """Pixel displacement of the image centre between two camera poses (world-from-optical).

    The point on the optical axis ``depth_m`` in front of the camera at ``pose_before`` is
    projected into the camera at ``pose_now``; the result is (du, dv) in pixels.
    """
    point = pose_before @ np.array([0.0, 0.0, depth_m, 1.0])
    local = np.linalg.inv(pose_now) @ point
    if local[2] <= 1e-6:
        return np.zeros(2)
    u = k[0, 0] * local[0] / local[2]
    v = k[1, 1] * local[1] / local[2]
    return np.array([u, v])


def noisy_color(color: npt.NDArray[np.uint8], term: ColorNoise, rng: np.random.Generator,
                blur_px: FloatArray | None = None) -> npt.NDArray[np.uint8]:
    """A camera's colour image of a true one.

    Args:
        blur_px: image motion (du, dv) over the exposure (pixels), or None for a still camera.
    """
    image = color.astype(np.float32)
    gain = math.exp(rng.normal(0.0, term.exposure_sigma)) if term.exposure_sigma else 1.0
    balance = (np.exp(rng.normal(0.0, term.white_balance_sigma, 3))
               if term.white_balance_sigma else np.ones(3))
    image *= (gain * balance).astype(np.float32)
    if blur_px is not None:
        length = float(np.hypot(blur_px[0], blur_px[1]))
        if length >= 1.0:
            image = _motion_blur(image, blur_px, length)
    out = np.clip(image, 0.0, 255.0).astype(np.uint8)
    if term.jpeg_quality < 100:
        ok, buf = cv2.imencode(".jpg", cv2.cvtColor(out, cv2.COLOR_RGB2BGR),
                               [cv2.IMWRITE_JPEG_QUALITY, int(term.jpeg_quality)])
        if not ok:
            raise NoiseProfileError("JPEG encoding of a frame failed")
        out = cv2.cvtColor(cv2.imdecode(buf, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    return out


def _motion_blur(image: npt.NDArray[np.float32], motion: FloatArray,
                 length: float) -> npt.NDArray[np.float32]:
    size = min(math.ceil(length) | 1, 31)
    kernel = np.zeros((size, size), np.float32)
    c = size // 2
    direction = motion / length
    reach = min(length, size) / 2.0
    end = (round(c + direction[0] * reach), round(c + direction[1] * reach))
    start = (round(c - direction[0] * reach), round(c - direction[1] * reach))
    cv2.line(kernel, start, end, 1.0, 1)
    kernel /= max(float(kernel.sum()), 1.0)
    return cv2.filter2D(image, -1, kernel, borderType=cv2.BORDER_REFLECT)


def _confuse(label: str, groups: Sequence[tuple[str, ...]], rng: np.random.Generator) -> str:
    for group in groups:
        if label in group:
            others = [g for g in group if g != label]
            return others[int(rng.integers(len(others)))]
    return label


def noisy_segmentation(result: SegmentationResult, depth: npt.NDArray[np.float32] | None,
                       term: SegmentationNoise, rng: np.random.Generator, *,
                       min_pixels: int = 1) -> SegmentationResult:
    """What a segmentation model reports for a view whose true instances are ``result``.

    ``depth`` (true, metres) gives each instance's range for the distance-dependent misses.
    An instance left with fewer than ``min_pixels`` pixels is dropped.
    """
    groups = term.groups()
    masks: list[npt.NDArray[np.bool_]] = []
    labels: list[str] = []
    scores: list[float] = []
    for info in result.instances:
        mask = result.instance_ids == info.instance_id
        pixels = (int(info.pixel_count) if info.pixel_count is not None
                  else int(np.count_nonzero(mask)))
        distance = 0.0
        if depth is not None:
            values = depth[mask]
            values = values[np.isfinite(values)]
            distance = float(np.median(values)) if values.size else 0.0
        far = min(max((distance - term.far_from_m) / term.far_span_m, 0.0), 1.0)
        p_miss = (term.miss_p + term.miss_small_p * math.exp(-pixels / term.small_area_px)
                  + term.miss_far_p * far)
        if rng.random() < min(p_miss, 1.0):
            continue
        if term.boundary_px > 0:
            step = int(rng.integers(-term.boundary_px, term.boundary_px + 1))
            if step:
                kernel = np.ones((2 * abs(step) + 1,) * 2, np.uint8)
                morph = cv2.dilate if step > 0 else cv2.erode
                mask = morph(mask.astype(np.uint8), kernel).astype(bool)
        if not mask.any():
            continue
        label = info.label
        if term.confusion_p > 0.0 and rng.random() < term.confusion_p:
            label = _confuse(label, groups, rng)
        small = math.exp(-pixels / term.small_area_px)
        score = (1.0 - term.score_drop * (1.0 + small)
                 + term.score_spread * float(rng.uniform(-1.0, 1.0)))
        masks.append(mask)
        labels.append(label)
        scores.append(min(max(score, 0.05), 1.0))
    if not masks:
        return SegmentationResult(np.zeros_like(result.instance_ids), (), result.stamp,
                                  result.camera)
    return compose_instances(masks, labels, scores, min_pixels=min_pixels, stamp=result.stamp,
                             camera=result.camera)


class SensorNoise:
    """A profile's sensor terms applied to rendered views, one seeded stream per camera.

    The simulation renders true views; :meth:`view` turns one into what the camera delivers
    (noisy colour and depth; the entity image stays true, since only the segmentation stand-in
    reads it) and :meth:`segmentation` turns the true instances into what the segmenter reports.
    Motion blur uses the camera's motion since its previous view.

    Args:
        profile: the noise profile (at its scale).
        seed: the run's seed; with the same seed, profile and sequence of views the noise repeats.
    """

    def __init__(self, profile: NoiseProfile, seed: int) -> None:
        self.profile = profile
        self._seed = seed
        self._rngs: dict[str, np.random.Generator] = {}
        self._last: dict[str, tuple[float, FloatArray]] = {}

    def _rng(self, camera: str) -> np.random.Generator:
        if camera not in self._rngs:
            index = CAMERAS.index(camera) if camera in CAMERAS else len(CAMERAS) + len(self._rngs)
            self._rngs[camera] = stream_rng(self._seed, STREAM_CAMERAS, index)
        return self._rngs[camera]

    def _blur(self, frame: Frame) -> FloatArray | None:
        last = self._last.get(frame.camera)
        self._last[frame.camera] = (frame.stamp, frame.pose)
        exposure = self.profile.color.exposure_time_s
        if last is None or exposure <= 0.0 or frame.stamp <= last[0]:
            return None
        depth = 1.5
        if frame.depth is not None:
            finite = frame.depth[np.isfinite(frame.depth)]
            if finite.size:
                depth = float(np.clip(np.median(finite), 0.3, 5.0))
        shift = image_motion(last[1], frame.pose, frame.info.k, depth)
        return np.asarray(shift * (exposure / (frame.stamp - last[0])), dtype=np.float64)

    def view(self, frame: Frame) -> Frame:
        """The view as the camera delivers it (the true ``frame`` is left untouched).

        A quiet depth term (scale 0, the ideal profile) leaves depth exact, range limits too.
        """
        rng = self._rng(frame.camera)
        profile = self.profile
        blur = self._blur(frame)
        color, depth = frame.color, frame.depth
        if color is not None and not profile.quiet("color"):
            color = noisy_color(color, profile.color, rng, blur)
        if depth is not None and not profile.quiet("depth"):
            depth = noisy_depth(depth, frame.color, profile.depth, rng)
        return replace(frame, color=color, depth=depth)

    def segmentation(self, result: SegmentationResult, frame: Frame, *,
                     min_pixels: int = 1) -> SegmentationResult:
        """What the segmenter reports for the true instances of ``frame`` (its true depth gives
        each instance's range)."""
        if self.profile.quiet("segmentation"):
            return result
        return noisy_segmentation(result, frame.depth, self.profile.segmentation,
                                  self._rng(frame.camera), min_pixels=min_pixels)


# --------------------------------------------------------------------------------- actuators


@dataclass
class OdometryDrift:
    """Accumulates the error of wheel odometry as the base moves.

    Feed it the base's true planar pose after every step (:meth:`advance`); it returns the
    odometry increment the wheels would report. The scale error is drawn at each
    :meth:`restart` (an odometry reset).
    """

    term: OdometryNoise
    rng: np.random.Generator
    scale_error: float = 0.0

    def restart(self) -> None:
        """A new odometry session: draw a new scale error."""
        self.scale_error = (float(self.rng.normal(0.0, self.term.scale_sigma))
                            if self.term.scale_sigma else 0.0)

    def increment(self, dx: float, dy: float, dyaw: float) -> tuple[float, float, float]:
        """The measured increment for a true one given in the base frame at its start."""
        t = self.term
        dist = math.hypot(dx, dy)
        mx = dx * (1.0 + self.scale_error)
        my = dy * (1.0 + self.scale_error)
        myaw = dyaw
        if dist > 0.0 and t.xy_walk_per_sqrt_m:
            walk = self.rng.normal(0.0, t.xy_walk_per_sqrt_m * math.sqrt(dist), 2)
            mx += float(walk[0])
            my += float(walk[1])
        spread = math.hypot(t.yaw_walk_per_sqrt_m * math.sqrt(dist),
                            t.yaw_walk_per_sqrt_rad * math.sqrt(abs(dyaw)))
        if spread > 0.0:
            myaw += float(self.rng.normal(0.0, spread))
        return mx, my, myaw


@dataclass
class HandError:
    """Where the hand lands relative to where the arm was told to put it (arm base frame, m).

    ``offset`` is the calibration part (drawn at :meth:`restart`) plus the approach part
    (drawn at :meth:`new_motion`).
    """

    term: ArmNoise
    rng: np.random.Generator
    calibration: FloatArray = field(default_factory=lambda: np.zeros(3))
    approach: FloatArray = field(default_factory=lambda: np.zeros(3))

    def restart(self) -> None:
        """An arm reset: a new calibration offset and no approach error."""
        sigma = self.term.calibration_sigma_m
        self.calibration = self.rng.normal(0.0, sigma, 3) if sigma else np.zeros(3)
        self.approach = np.zeros(3)

    def new_motion(self) -> None:
        """A new motion starts from rest: a new approach error."""
        sigma = self.term.approach_sigma_m
        self.approach = self.rng.normal(0.0, sigma, 3) if sigma else np.zeros(3)

    @property
    def offset(self) -> FloatArray:
        """Total offset of the hand from its commanded position (m)."""
        return np.asarray(self.calibration + self.approach, dtype=np.float64)
