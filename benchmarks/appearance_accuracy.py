"""How well colour words, patterns and same-instance matching work without a model.

Renders the objects of a scenario whose categories come in look-alike variants (the Long
Horizon's cereal boxes, cups, bottles, soup cans, coffee tins, tea boxes and apples) with MuJoCo,
set out on the kitchen floor under the kitchen's lights, from random viewpoints, through the
realistic profile's colour noise at several scales. The simulator's segmentation gives each
object's mask (the measurement's input, as a segmenter's mask would be) and its material gives
the truth:

- colour: the word whose prototype colour (``PROTOTYPES``, plain sRGB names independent of
  ``config/appearance.yaml``) lies nearest in CIELAB to the object's main material colour
  (for a checked or striped object either of its two colours may be said first);
- pattern: the material's pattern (plain, checker, stripes; gradients are left out, the
  planner has no word for them);
- instance: the object id; two objects whose variants are equal (the counter's reference twins)
  are the same-looking instance.

Matching: for every view of an object, the other objects of its category are candidates, each
by another view, and the object itself by a second view; a match is right when it picks the
object (or its twin). Precision counts right answers among answers, recall right answers among
all queries; abstentions are neither.

Real frames (``--sevenscenes DIR``, the 7-Scenes kitchen recording): the same region of the
kitchen seen from two poses must match, regions elsewhere must not. Square patches of a fixed
size in the world (``--patch-m``) are cut around a grid of points of one frame with depth, and
around the same points (moved by the recorded poses, kept only where the second frame's depth
agrees, so nothing hides them) in a frame ``--gaps`` frames later; each patch of the first
frame is matched against all patches of the second.

    MENAGERIE_ROOT=../shared/models/tidybot MUJOCO_GL=egl \\
        .venv/bin/python benchmarks/appearance_accuracy.py [--views 6] [--scales 0 1 2 3] \\
        [--sevenscenes ../shared/data/sevenscenes_kitchen]

Prints one Markdown table per measure; ``--json FILE`` keeps the rows.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import mujoco
import numpy as np

from mimir.paths import config_file
from mimir_perception.appearance import (
    Appearance,
    AppearanceConfig,
    colour_words,
    describe,
    load_appearance_config,
    match,
    pattern_word,
)
from mimir_perception.errors import AppearanceError
from mimir_sim.noise import load_noise_profile, noisy_color
from mimir_sim.scenario import load_scenario
from mimir_sim.scene import build_scene

#: Plain sRGB colours per name: the truth a material colour is named by (the word of the
#: nearest prototype in CIELAB); independent of config/appearance.yaml.
PROTOTYPES = {
    "red": [(0.9, 0.1, 0.1), (0.6, 0.05, 0.05)], "orange": [(1.0, 0.55, 0.0)],
    "yellow": [(1.0, 0.9, 0.0), (1.0, 0.95, 0.5)],
    "green": [(0.1, 0.65, 0.2), (0.5, 0.85, 0.5)],
    "blue": [(0.1, 0.35, 0.9), (0.4, 0.65, 0.95)], "purple": [(0.55, 0.15, 0.65)],
    "pink": [(1.0, 0.65, 0.75)], "brown": [(0.45, 0.25, 0.1)], "white": [(0.97, 0.97, 0.97)],
    "grey": [(0.5, 0.5, 0.5)], "black": [(0.05, 0.05, 0.05)],
}
PATTERN_WORDS = {"plain": "plain", "checker": "checked", "stripes": "striped"}
WIDTH, HEIGHT = 320, 240  # the size of the simulation's keyframes


def _lab(rgb: tuple[float, float, float]) -> np.ndarray:
    bgr = np.array([[[rgb[2], rgb[1], rgb[0]]]], dtype=np.float32)
    return np.asarray(cv2.cvtColor(bgr, cv2.COLOR_BGR2Lab)[0, 0], dtype=np.float64)


def truth_colour(rgb: tuple[float, float, float]) -> str:
    lab = _lab(rgb)
    return min(PROTOTYPES, key=lambda w: min(float(np.linalg.norm(_lab(p) - lab))
                                             for p in PROTOTYPES[w]))


@dataclass
class View:
    object_id: str
    category: str
    scale: float
    appearance: Appearance | None
    error: str = ""


def render_views(args: argparse.Namespace) -> tuple[list[View], dict[str, Any]]:
    scenario = load_scenario(args.scenario)
    scene = build_scene(scenario, seed=args.seed)
    variants: dict[str, set[tuple[Any, ...]]] = defaultdict(set)
    for obj in scene.objects.values():
        variants[obj.category].add((obj.color, obj.pattern))
    chosen = sorted(o for o, obj in scene.objects.items()
                    if len(variants[obj.category]) > 1 and obj.pattern != "gradient")
    model, data = scene.model, mujoco.MjData(scene.model)
    mujoco.mj_resetData(model, data)
    # every object of interest on the floor in two rows; the rest out of sight below it
    for index, oid in enumerate(sorted(scene.objects)):
        joint = model.joint(f"{oid}/free")
        adr = int(joint.qposadr[0])
        if oid in chosen:
            k = chosen.index(oid)
            x, y = -1.0 + 0.45 * (k % 2), -3.0 + 0.5 * (k // 2)
            z = 0.2
        else:
            x, y, z = 5.0 + index, 5.0, -5.0
        data.qpos[adr:adr + 7] = (x, y, z, 1.0, 0.0, 0.0, 0.0)
    mujoco.mj_forward(model, data)
    # let them settle onto the floor under gravity
    for _ in range(600):
        mujoco.mj_step(model, data)
    renderer = mujoco.Renderer(model, height=HEIGHT, width=WIDTH)
    option = mujoco.MjvOption()
    option.geomgroup[:] = [1, 1, 1, 0, 0, 0]
    index_of = {oid: i for i, oid in enumerate(sorted(scene.entities))}
    geom_to_index = np.array([index_of.get(e, -1) if e is not None else -1
                              for e in scene.geom_entity], dtype=np.int32)
    config = load_appearance_config(config_file("appearance.yaml"))
    rng = np.random.default_rng(args.seed)
    views: list[View] = []
    for oid in chosen:
        body = model.body(oid)
        target = data.xpos[body.id].copy()
        for _ in range(args.views):
            cam = mujoco.MjvCamera()
            cam.type = mujoco.mjtCamera.mjCAMERA_FREE
            cam.lookat[:] = target
            cam.distance = float(rng.uniform(0.35, 0.8))
            cam.azimuth = float(rng.uniform(0.0, 360.0))
            cam.elevation = float(-rng.uniform(5.0, 45.0))
            renderer.update_scene(data, camera=cam, scene_option=option)
            rgb = renderer.render().copy()
            renderer.enable_segmentation_rendering()
            raw = renderer.render()
            renderer.disable_segmentation_rendering()
            is_geom = (raw[:, :, 1] == int(mujoco.mjtObj.mjOBJ_GEOM)) & (raw[:, :, 0] >= 0)
            seg = np.full(raw.shape[:2], -1, dtype=np.int32)
            seg[is_geom] = geom_to_index[raw[:, :, 0][is_geom]]
            mask = seg == index_of[oid]
            for scale in args.scales:
                profile = load_noise_profile("realistic", scale)
                seen = noisy_color(rgb, profile.color, rng)
                bgr = np.ascontiguousarray(seen[:, :, ::-1])
                try:
                    app = describe(bgr, mask, config, seed=len(views))
                    views.append(View(oid, scene.objects[oid].category, scale, app))
                except AppearanceError as err:
                    views.append(View(oid, scene.objects[oid].category, scale, None, str(err)))
    renderer.close()
    truth = {oid: {"colour": truth_colour(scene.objects[oid].color),
                   "pattern": PATTERN_WORDS[scene.objects[oid].pattern],
                   "variant": (scene.objects[oid].color, scene.objects[oid].pattern),
                   "category": scene.objects[oid].category} for oid in chosen}
    return views, {"config": config, "truth": truth}


def attribute_rows(views: list[View], truth: dict[str, Any], config: AppearanceConfig,
                   min_confidence: float) -> list[dict[str, Any]]:
    rows = []
    for scale in sorted({v.scale for v in views}):
        at = [v for v in views if v.scale == scale]
        counts = {"colour": [0, 0, 0], "pattern": [0, 0, 0]}  # right, wrong, unknown
        for view in at:
            t = truth[view.object_id]
            if view.appearance is None:
                counts["colour"][2] += 1
                counts["pattern"][2] += 1
                continue
            words = [w for w in colour_words(view.appearance, config)
                     if w.confidence >= min_confidence]
            if not words:
                counts["colour"][2] += 1
            else:  # a patterned object has two main colours: either may be said first
                said = {w.word for w in words} if t["pattern"] != "plain" else {words[0].word}
                counts["colour"][0 if t["colour"] in said else 1] += 1
            pattern = pattern_word(view.appearance, config)
            if pattern.confidence < min_confidence:
                counts["pattern"][2] += 1
            else:
                counts["pattern"][0 if pattern.word == t["pattern"] else 1] += 1
        for kind, (right, wrong, unknown) in counts.items():
            answered = right + wrong
            rows.append({"measure": kind, "scale": scale, "views": len(at),
                         "precision": right / answered if answered else math.nan,
                         "recall": right / len(at) if at else math.nan,
                         "abstained": unknown / len(at) if at else math.nan})
    return rows


def matching_rows(views: list[View], truth: dict[str, Any],
                  config: AppearanceConfig) -> list[dict[str, Any]]:
    rows = []
    for scale in sorted({v.scale for v in views}):
        by_object: dict[str, list[Appearance]] = defaultdict(list)
        for v in views:
            if v.scale == scale and v.appearance is not None:
                by_object[v.object_id].append(v.appearance)
        right = wrong = abstained = 0
        for oid, apps in by_object.items():
            if len(apps) < 2:
                continue
            category = truth[oid]["category"]
            for i in range(len(apps) - 1):
                reference = apps[i]
                candidates = {oid: apps[i + 1]}
                for other, other_apps in by_object.items():
                    if other != oid and truth[other]["category"] == category:
                        candidates[other] = other_apps[(i + 1) % len(other_apps)]
                result = match(reference, candidates, config)
                if result.best is None:
                    abstained += 1
                elif truth[result.best]["variant"] == truth[oid]["variant"]:
                    right += 1
                else:
                    wrong += 1
        total = right + wrong + abstained
        rows.append({"measure": "same instance", "scale": scale, "views": total,
                     "precision": right / (right + wrong) if right + wrong else math.nan,
                     "recall": right / total if total else math.nan,
                     "abstained": abstained / total if total else math.nan})
    return rows


def _frame(folder: Path, index: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    stem = folder / f"frame-{index:06d}"
    color = cv2.imread(str(stem) + ".color.jpg", cv2.IMREAD_COLOR)
    depth = cv2.imread(str(stem) + ".depth.png", cv2.IMREAD_UNCHANGED)
    pose_file = Path(str(stem) + ".pose.txt")
    if color is None or depth is None or not pose_file.is_file():
        return None
    return color, depth.astype(np.float64) / 1000.0, np.loadtxt(pose_file).reshape(4, 4)


def sevenscenes_rows(folder: Path, gaps: list[int], patch_m: float, pairs: int,
                     config: AppearanceConfig) -> list[dict[str, Any]]:
    """Region matching between frames of the 7-Scenes kitchen (see the module docstring)."""
    k = np.loadtxt(folder / "camera-intrinsics.txt").reshape(3, 3)
    fx, fy, cx, cy = k[0, 0], k[1, 1], k[0, 2], k[1, 2]
    numbers = sorted(int(p.name[6:12]) for p in folder.glob("frame-*.color.jpg"))
    rows = []

    def patch(color: np.ndarray, u: float, v: float, z: float) -> Appearance | None:
        half = round(fx * patch_m / 2.0 / z)
        x0, y0, x1, y1 = int(u) - half, int(v) - half, int(u) + half + 1, int(v) + half + 1
        if half < 6 or x0 < 0 or y0 < 0 or x1 > color.shape[1] or y1 > color.shape[0]:
            return None
        try:
            return describe(np.ascontiguousarray(color[y0:y1, x0:x1]), None, config)
        except AppearanceError:
            return None

    for gap in gaps:
        right = wrong = abstained = 0
        step = max(1, (len(numbers) - gap) // pairs)
        for start in range(0, len(numbers) - gap, step):
            first, second = _frame(folder, numbers[start]), _frame(folder, numbers[start + gap])
            if first is None or second is None:
                continue
            (c1, d1, p1), (c2, d2, p2) = first, second
            to_second = np.linalg.inv(p2) @ p1
            regions: dict[int, tuple[Appearance, Appearance]] = {}
            for gy in np.linspace(60, 420, 5):
                for gx in np.linspace(80, 560, 7):
                    z1 = d1[int(gy), int(gx)]
                    if not 0.3 < z1 < 4.0:
                        continue
                    point = np.array([(gx - cx) * z1 / fx, (gy - cy) * z1 / fy, z1, 1.0])
                    x, y, z2, _ = to_second @ point
                    if z2 <= 0.3:
                        continue
                    u2, v2 = fx * x / z2 + cx, fy * y / z2 + cy
                    if not (0 <= u2 < c2.shape[1] and 0 <= v2 < c2.shape[0]):
                        continue
                    seen = d2[int(v2), int(u2)]
                    if not abs(seen - z2) < 0.05:  # hidden, or no depth to tell
                        continue
                    a, b = patch(c1, gx, gy, z1), patch(c2, u2, v2, z2)
                    if a is not None and b is not None:
                        regions[len(regions)] = (a, b)
            candidates = {str(i): pair[1] for i, pair in regions.items()}
            for i, (reference, _) in regions.items():
                result = match(reference, candidates, config)
                if result.best is None:
                    abstained += 1
                elif result.best == str(i):
                    right += 1
                else:
                    wrong += 1
        total = right + wrong + abstained
        rows.append({"measure": f"7-Scenes region, {gap} files apart", "scale": 0.0,
                     "views": total,
                     "precision": right / (right + wrong) if right + wrong else math.nan,
                     "recall": right / total if total else math.nan,
                     "abstained": abstained / total if total else math.nan})
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| measure | noise scale | queries | precision | recall | abstained |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['measure']} | {r['scale']:g} | {r['views']} | "
                     f"{r['precision']:.1%} | {r['recall']:.1%} | {r['abstained']:.1%} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default="long_horizon")
    parser.add_argument("--seed", type=int, default=4100, help="layout and viewpoint seed")
    parser.add_argument("--views", type=int, default=6, help="viewpoints per object")
    parser.add_argument("--scales", type=float, nargs="+", default=[0.0, 1.0, 2.0, 3.0])
    parser.add_argument("--min-confidence", type=float, default=0.5,
                        help="below this a colour or pattern counts as unknown (the planner's "
                             "attributes.min_confidence)")
    parser.add_argument("--sevenscenes", type=Path,
                        help="the 7-Scenes kitchen folder: also match regions between frames")
    parser.add_argument("--gaps", type=int, nargs="+", default=[2, 6, 12],
                        help="frames between the two views of a region (files, 5 originals each)")
    parser.add_argument("--patch-m", type=float, default=0.12, help="patch size in the world (m)")
    parser.add_argument("--pairs", type=int, default=30, help="frame pairs per gap")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args(argv)
    views, meta = render_views(args)
    config, truth = meta["config"], meta["truth"]
    failed = [v for v in views if v.appearance is None]
    print(f"{len(truth)} objects x {args.views} views x {len(args.scales)} noise scales; "
          f"{len(failed)} views too small to measure")
    rows = attribute_rows(views, truth, config, args.min_confidence)
    rows += matching_rows(views, truth, config)
    if args.sevenscenes:
        rows += sevenscenes_rows(args.sevenscenes, args.gaps, args.patch_m, args.pairs, config)
    print(table(rows))
    confusions: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for v in views:
        if v.appearance is not None and v.scale == 1.0:
            words = [w.word for w in colour_words(v.appearance, config)
                     if w.confidence >= args.min_confidence]
            confusions[truth[v.object_id]["colour"]]["+".join(words) or "?"] += 1
    print("\ncolour truth -> said at scale 1:",
          json.dumps({k: dict(v) for k, v in confusions.items()}, sort_keys=True))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
