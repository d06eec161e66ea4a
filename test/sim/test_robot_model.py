"""Where the simulated TidyBot++ comes from: an explicit model, or mujoco-menagerie."""

from __future__ import annotations

from pathlib import Path

import pytest

from mimir.sim_job import SimJobError, robot_model
from mimir_sim.errors import ModelDirError
from mimir_sim.robot_model import MENAGERIE_NAME, resolve_robot_model, robot_xml_in


def test_an_explicit_model_may_be_the_file_its_folder_or_a_folder_above(tidybot_dir: Path) -> None:
    xml = (tidybot_dir / MENAGERIE_NAME / "tidybot.xml").resolve()
    for given in (xml, xml.parent, tidybot_dir, str(tidybot_dir)):
        assert robot_xml_in(given) == xml
    model = resolve_robot_model(tidybot_dir)
    assert (model.xml, model.source) == (xml, "explicit")


def test_menagerie_serves_the_model_from_menagerie_root(
        tidybot_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MENAGERIE_ROOT", str(tidybot_dir))
    for nothing in (None, "", "  "):
        model = resolve_robot_model(nothing)
        assert model.xml == (tidybot_dir / MENAGERIE_NAME / "tidybot.xml").resolve()
        assert "menagerie" in model.source


def test_a_missing_model_is_a_typed_error_that_says_how_to_get_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ModelDirError, match="not found"):
        robot_xml_in(tmp_path / "nowhere")
    (tmp_path / "tidybot.xml").mkdir()  # a folder named like the file is not the model
    with pytest.raises(ModelDirError):
        robot_xml_in(tmp_path)
    monkeypatch.setenv("MENAGERIE_ROOT", str(tmp_path / "empty"))
    with pytest.raises(ModelDirError, match="MENAGERIE_ROOT") as err:
        resolve_robot_model()
    assert "pip install mujoco-menagerie" in str(err.value)
    with pytest.raises(SimJobError) as job:
        robot_model("")
    assert "MENAGERIE_ROOT" in str(job.value) and job.value.hint


def test_the_job_resolves_the_model_before_any_node_starts(tidybot_dir: Path) -> None:
    xml, source = robot_model(str(tidybot_dir))
    assert xml.name == "tidybot.xml" and source == "explicit"
    with pytest.raises(SimJobError, match="not found"):
        robot_model(str(tidybot_dir / "missing"))
