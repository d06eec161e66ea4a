"""The methods of ``config/eval.yaml``: read, checked, turned into node parameters."""

from __future__ import annotations

from pathlib import Path

import pytest

from mimir.evaluation.methods import EvalConfigError, Method, load_eval_config

REPO = Path(__file__).resolve().parents[2]


def test_the_shipped_file_holds_the_graph_methods_an_ablation_and_the_baselines() -> None:
    config = load_eval_config(REPO / "config" / "eval.yaml")
    assert list(config.methods) == ["full", "sg_ia", "sg_kf", "sg", "full_harness_off",
                                    "roboexp", "memer", "memer_fixtures"]
    assert config.step_budget == 12
    assert config.first_seed >= 100  # apart from the seeds the tests use
    switches = {m.name: (m.interaction, m.keyframes, m.representation)
                for m in config.methods.values()}
    graph = "scene_graph"
    assert switches == {"full": (True, True, graph), "sg_ia": (True, False, graph),
                        "sg_kf": (False, True, graph), "sg": (False, False, graph),
                        "full_harness_off": (True, True, graph),
                        "roboexp": (True, False, "action_graph"),
                        "memer": (False, False, "episodic"),
                        "memer_fixtures": (False, False, "episodic_fixtures")}
    assert config.methods["full_harness_off"].verifiers_off == "all"


def test_switches_become_the_nodes_parameters() -> None:
    config = load_eval_config(REPO / "config" / "eval.yaml")
    assert config.methods["sg"].node_params() == {
        "planner": {"analyze": False, "use_keyframes": False, "representation": "scene_graph"},
        "analyzer": {"auto_analyze": False}}
    assert config.methods["sg_kf"].node_params()["planner"] == {
        "analyze": False, "use_keyframes": True, "representation": "scene_graph"}
    assert config.methods["memer"].node_params()["planner"]["representation"] == "episodic"
    assert config.methods["full"].node_params()["analyzer"] == {"auto_analyze": True}


def test_pick_keeps_the_order_given_and_all_gives_every_method() -> None:
    config = load_eval_config(REPO / "config" / "eval.yaml")
    assert [m.name for m in config.pick("sg, full")] == ["sg", "full"]
    assert len(config.pick("all")) == len(config.methods)


@pytest.mark.parametrize(("names", "message"), [
    ("full,memer_v2", "unknown methods"), ("full,full", "named twice"), (" , ", "no method")])
def test_pick_refuses_bad_lists(names: str, message: str) -> None:
    config = load_eval_config(REPO / "config" / "eval.yaml")
    with pytest.raises(EvalConfigError, match=message):
        config.pick(names)


@pytest.mark.parametrize(("text", "message"), [
    ("methods: {}\n", "non-empty"),
    ("methods:\n  a: {interaction: maybe}\n", "interaction"),
    ("methods:\n  a: {keyframes: true, colour: red}\n", "unknown keys"),
    ("methods:\n  a: {verifiers_off: 'locked,sixth_sense'}\n", "sixth_sense"),
    ("methods:\n  a-b: {}\n", "identifier"),
    ("methods:\n  a: [1]\n", "mapping"),
    ("first_seed: -3\nmethods:\n  a: {}\n", "first_seed"),
    ("step_budget: 0\nmethods:\n  a: {}\n", "step_budget"),
    ("trials: 5\nmethods:\n  a: {}\n", "unknown keys"),
    ("methods: [\n", "not valid YAML"),
    ("methods:\n  a: {representation: telepathy}\n", "unknown representation 'telepathy'"),
    ("methods:\n  a: {representation: 3}\n", "must be a string"),
])
def test_bad_files_are_refused_with_what_is_wrong(tmp_path: Path, text: str,
                                                  message: str) -> None:
    path = tmp_path / "eval.yaml"
    path.write_text(text)
    with pytest.raises(EvalConfigError, match=message):
        load_eval_config(path)


def test_a_missing_file_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(EvalConfigError, match="cannot read"):
        load_eval_config(tmp_path / "none.yaml")


def test_a_named_verifier_set_is_accepted() -> None:
    assert Method(name="no_lock", verifiers_off="locked, opened").verifiers_off
