"""Scene builder: scenario -> kitchen MJCF with the TidyBot++ attached, plus an entity index.

The kitchen is one run of fixtures along a back wall at ``x = wall_x`` (fronts face -x, towards
the robot, which spawns looking along +x). The robot is not copied: the generated MJCF declares
the robot's own ``tidybot.xml`` as a model asset and attaches its ``base_link`` body, so the
robot's meshes resolve from its folder. A ``pole`` camera is added to ``base_link``.

Every kitchen geom is named ``<entity>/<part>``; the entity index maps geom ids to stable ids
such as ``cab_1`` (carcass), ``cab_1_door``, ``cab_1_handle`` or ``banana_1`` and to labels.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from xml.sax.saxutils import quoteattr

import mujoco
import numpy as np

from mimir.paths import cache_dir
from mimir_sim.errors import SceneBuildError
from mimir_sim.fiducial_tags import TagLayout, plan_tags
from mimir_sim.layouts import generate_layout
from mimir_sim.mjcf import MjcfWriter, floats
from mimir_sim.robot_model import resolve_robot_model, robot_xml_in
from mimir_sim.scenario import (
    OPENABLE_TYPES,
    Scenario,
)
from mimir_sim.scene_fixtures import build_fixture
from mimir_sim.scene_layout import (
    DOOR_T,
    Entity,
    FixtureLayout,
    KitchenScene,
    ObjectLayout,
    start_pose_for,
)
from mimir_sim.scene_objects import object_xml, place_objects
from mimir_sim.view_meshes import DEFAULT_VIEW_FACES, lighten_visual_meshes, mesh_dir_of

#: names other modules import from here; they are defined in :mod:`mimir_sim.scene_layout`
__all__ = [
    "DOOR_T",
    "Entity",
    "FixtureLayout",
    "KitchenScene",
    "ObjectLayout",
    "build_scene",
    "kitchen_mjcf",
    "openable_fixture_ids",
    "robot_xml_path",
    "start_pose_for",
]

LOG = logging.getLogger(__name__)

POLE_PITCH = math.radians(35.0)
POLE_POS = (-0.15, 0.0, 1.5)
POLE_FOVY = 60.0


def robot_xml_path(tidybot_dir: str | Path | None = None) -> Path:
    """The robot's MJCF: inside ``tidybot_dir`` when given (the file, its folder or a folder
    holding ``stanford_tidybot/``), else MuJoCo Menagerie's (:mod:`mimir_sim.robot_model`).

    Raises:
        ModelDirError: the model is missing or cannot be fetched.
    """
    if tidybot_dir is not None:
        return robot_xml_in(tidybot_dir)
    return resolve_robot_model().xml


@contextmanager
def _quiet_mujoco_warnings() -> Iterator[None]:
    """Route MuJoCo's compile warnings (empty attach prefix) to logging instead of a log file."""
    previous: Callable[[str], None] | None = mujoco.get_mju_user_warning()

    def _log(message: str) -> None:
        LOG.debug("mujoco: %s", message.strip())

    mujoco.set_mju_user_warning(_log)
    try:
        yield
    finally:
        mujoco.set_mju_user_warning(previous)


# ---------------------------------------------------------------------------------------------
# top level


def kitchen_mjcf(
    scenario: Scenario, tidybot_dir: str | Path | None = None, seed: int | None = None,
    tags: TagLayout | None = None,
) -> tuple[str, dict[str, Entity], dict[str, FixtureLayout], dict[str, ObjectLayout], int]:
    """Generate the kitchen MJCF text; the robot is referenced by path, never copied.

    The fiducial tags (``tags``, default :func:`~mimir_sim.fiducial_tags.plan_tags` of the
    kitchen) are wall geoms whose textures the text names by file; compiling it needs
    ``tags.textures()`` as assets.
    """
    robot_path = robot_xml_path(tidybot_dir)
    used_seed = scenario.seed if seed is None else int(seed)
    # a scenario with roles becomes the concrete layout of the seed; the jitter stays as it was
    scenario = generate_layout(scenario, used_seed)
    rng = np.random.default_rng(used_seed)
    kitchen = scenario.kitchen
    w = MjcfWriter()
    entities: dict[str, Entity] = {
        "floor": Entity("floor", "structure", "floor"),
        "wall": Entity("wall", "structure", "wall"),
        "robot": Entity("robot", "robot", "robot"),
    }
    rx, ry = kitchen.room_x, kitchen.room_y
    w.world.append(
        f'<geom name="floor/plane" type="plane" pos="{floats(((rx[0] + rx[1]) / 2, 0, 0))}" '
        f'size="{floats(((rx[1] - rx[0]) / 2 + 1, (ry[1] - ry[0]) / 2 + 1, 0.05))}" '
        'material="floor"/>'
    )
    w.box(
        w.world,
        "wall/back",
        (kitchen.wall_x + 0.05, (ry[0] + ry[1]) / 2, 1.3),
        (0.05, (ry[1] - ry[0]) / 2, 1.3),
        (0.93, 0.92, 0.88),
    )
    for side, yy in (("left", ry[1] + 0.05), ("right", ry[0] - 0.05)):
        w.box(
            w.world,
            f"wall/{side}",
            ((rx[0] + rx[1]) / 2, yy, 1.3),
            ((rx[1] - rx[0]) / 2, 0.05, 1.3),
            (0.9, 0.9, 0.86),
        )
    if tags is None:
        tags = plan_tags(kitchen, scenario.fixtures)
    w.assets.extend(tags.mjcf_assets())
    w.world.extend(tags.mjcf_geoms())
    fixtures: dict[str, FixtureLayout] = {}
    for fixture in scenario.fixtures:
        fixtures[fixture.id] = build_fixture(w, kitchen, fixture, entities)
    objects = place_objects(scenario, fixtures, rng)
    specs = {o.id: o for o in scenario.objects}
    for oid, layout in objects.items():
        entities[oid] = Entity(oid, "object", layout.label, layout.fixture)
        object_xml(w, scenario, layout, specs[oid], rng)
    lines = [
        f'<mujoco model="mimir_kitchen_{scenario.name}">',
        '  <compiler angle="radian" autolimits="true"/>',
        '  <option timestep="0.002" integrator="implicitfast" cone="elliptic" impratio="10"/>',
        '  <size memory="64M"/>',
        '  <visual><headlight diffuse="0.5 0.5 0.5" ambient="0.35 0.35 0.35" specular="0 0 0"/>',
        '    <map znear="0.01" zfar="50"/><quality shadowsize="0"/>',
        '    <global offwidth="1280" offheight="960"/></visual>',
        '  <statistic center="0.5 0 0.8" extent="3"/>',
        "  <asset>",
        f'    <model name="tidybot" file={quoteattr(str(robot_path))}/>',
        '    <texture name="floor" type="2d" builtin="checker" rgb1="0.55 0.5 0.45" '
        'rgb2="0.45 0.4 0.36" width="128" height="128"/>',
        '    <material name="floor" texture="floor" texrepeat="8 8" texuniform="true"/>',
        *[f"    {a}" for a in w.assets],
        "  </asset>",
        "  <worldbody>",
        '    <light name="ceiling" pos="0 0 3" dir="0.3 0 -1" directional="false" '
        'diffuse="0.6 0.6 0.6" castshadow="false"/>',
        '    <attach model="tidybot" body="base_link" prefix=""/>',
        *[f"    {line}" for line in w.world],
        "  </worldbody>",
        "  <equality>",
        *[
            f'    <connect name="grip_{fid}" body1="base" body2="{fx.moving_body}" anchor="0 0 0" '
            'active="false" solref="0.01 1"/>'
            for fid, fx in fixtures.items()
            if fx.moving_body is not None
        ],
        *[
            f'    <weld name="grasp_{oid}" body1="base" body2="{oid}" active="false" '
            'solref="0.01 1"/>'
            for oid in objects
        ],
        "  </equality>",
        "</mujoco>",
    ]
    return "\n".join(lines), entities, fixtures, objects, used_seed


def _pole_xyaxes() -> list[float]:
    c, s = math.cos(POLE_PITCH), math.sin(POLE_PITCH)
    # image x points to the robot's right (-y); image up is perpendicular to the view direction
    return [0.0, -1.0, 0.0, s, 0.0, c]


def build_scene(
    scenario: Scenario, tidybot_dir: Path | None = None, seed: int | None = None,
    view_mesh_faces: int = DEFAULT_VIEW_FACES,
) -> KitchenScene:
    """Compile the scenario into a MuJoCo model with the robot attached and the pole camera.

    Args:
        scenario: parsed scenario.
        tidybot_dir: robot model (see :func:`robot_xml_path`; default: Menagerie's).
        seed: layout seed (the roles' assignment and the jitter); ``None`` uses the
            scenario's own seed.
        view_mesh_faces: most faces a visual mesh of the robot keeps in the cameras' images
            (:func:`~mimir_sim.view_meshes.lighten_visual_meshes`); 0 renders the originals.
            The simulator takes it from ``SimConfig.view_mesh_faces``.

    Raises:
        ModelDirError: the robot model is missing.
        SceneBuildError: MuJoCo rejected the generated model.
        FiducialLayoutError: the kitchen's back wall has too little free room for its tags.
    """
    # the scene keeps the seed's concrete layout, so the desk and the judge see that one
    scenario = generate_layout(scenario, scenario.seed if seed is None else int(seed))
    tags = plan_tags(scenario.kitchen, scenario.fixtures)
    robot_path = robot_xml_path(tidybot_dir)
    mjcf, entities, fixtures, objects, used_seed = kitchen_mjcf(scenario, robot_path, seed,
                                                                tags)
    with _quiet_mujoco_warnings(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*empty prefix.*")
        try:
            spec = mujoco.MjSpec.from_string(mjcf, assets=tags.textures())
            base = spec.body("base_link")
            if base is None:
                raise SceneBuildError("robot model has no base_link body")
            cam = base.add_camera(
                name="pole", pos=list(POLE_POS), fovy=POLE_FOVY, resolution=[640, 480]
            )
            cam.alt.type = mujoco.mjtOrientation.mjORIENTATION_XYAXES
            cam.alt.xyaxes = _pole_xyaxes()
            if view_mesh_faces > 0:
                lighten_visual_meshes(spec, mesh_dir_of(robot_path), view_mesh_faces,
                                      cache_dir() / "view_meshes")
            model = spec.compile()
        except (ValueError, mujoco.FatalError) as err:
            raise SceneBuildError(
                f"MuJoCo could not compile scenario {scenario.name}: {err}"
            ) from err
    geom_entity: list[str | None] = []
    base_id = model.body("base_link").id
    for g in range(model.ngeom):
        name = model.geom(g).name
        if "/" in name and name.split("/", 1)[0] in entities:
            geom_entity.append(name.split("/", 1)[0])
        elif model.body_rootid[model.geom_bodyid[g]] == base_id:
            geom_entity.append("robot")
        else:
            geom_entity.append(None)
    return KitchenScene(
        scenario=scenario,
        seed=used_seed,
        mjcf=mjcf,
        model=model,
        entities=entities,
        fixtures=fixtures,
        objects=objects,
        geom_entity=geom_entity,
        fiducials=tags,
    )


def openable_fixture_ids(scene: KitchenScene) -> list[str]:
    """Ids of fixtures with a door or drawer."""
    return [fid for fid, f in scene.fixtures.items() if f.type in OPENABLE_TYPES]
