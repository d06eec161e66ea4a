"""MemTransfer with a model: answers read into actions, the prompts a model policy sends over a
real OpenAI-compatible connection (a local server replaying recorded answers), and what each
memory representation keeps and hands over."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import yaml
from recorded_server import RecordedServer, Step, serve
from tiny_qwen import build_tiny_qwen

from mimir.cli import main
from mimir.evaluation.memtransfer.memories import (
    DocumentError,
    Episodic,
    FullContext,
    keyframe_steps,
    read_document,
    record,
    write_semantic,
    write_summary,
)
from mimir.evaluation.memtransfer.model_policy import InvalidAnswerError, parse_action
from mimir.evaluation.memtransfer.protocol import Setting, plan_episode
from mimir.evaluation.memtransfer.runner import Job, read_outcomes, run_episode
from mimir.evaluation.memtransfer.scene_memory import SceneMemory, named_kinds
from mimir.evaluation.memtransfer.workshop import ModelSettings, Workshop
from mimir.paths import config_file
from mimir_planner.reasoning.openai_backend import OpenAICompatibleBackend
from mimir_sim.noise import load_noise_profile
from mimir_sim.warehouse.cases import Case, write_cases
from mimir_sim.warehouse.layout import Layout, Pose

RECORDED = Path(__file__).parent / "recorded" / "memtransfer_answers.json"


def _answers() -> list[dict[str, object]]:
    return json.loads(RECORDED.read_text(encoding="utf-8"))["answers"]


def _reply(content: str, *, finish: str = "stop", prompt_tokens: int = 1500) -> Step:
    return Step(body=json.dumps({
        "id": "chatcmpl-mt", "object": "chat.completion", "model": "Qwen2.5-VL-7B-Instruct",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "finish_reason": finish}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 3}}))


@pytest.mark.parametrize("answer", _answers(), ids=lambda a: repr(a["content"])[:30])
def test_recorded_answers_read_as_recorded(answer: dict[str, object]) -> None:
    if answer["action"] is None:
        with pytest.raises(InvalidAnswerError):
            parse_action(str(answer["content"]))
    else:
        assert parse_action(str(answer["content"])) == answer["action"]


@pytest.fixture(scope="module")
def two_cases(tmp_path_factory: pytest.TempPathFactory, warehouse: Layout,
              memtransfer_cases: list[Case]) -> Path:
    """A cases file of two cases (types 1 and 7) so documents take few answers."""
    path = tmp_path_factory.mktemp("cases") / "two.json"
    chosen = [c for c in memtransfer_cases if c.id in ("t01c00", "t07c00")]
    write_cases(path, warehouse, chosen, 2609)
    return path


Make = Callable[[RecordedServer], Workshop]


@pytest.fixture
def workshop_at(two_cases: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                ) -> Iterator[Make]:
    monkeypatch.setenv("MIMIR_VLM_API_KEY", "sk-test")
    made: list[Workshop] = []

    def make(server: RecordedServer) -> Workshop:
        model = ModelSettings("openai", base_url=server.url, model="Qwen2.5-VL-7B-Instruct",
                              image_size=64, folder=str(tmp_path))
        workshop = Workshop("", str(two_cases), model)
        made.append(workshop)
        return workshop

    yield make
    for workshop in made:
        if "renderer" in workshop.__dict__:
            workshop.renderer.close()


def test_a_model_policy_spends_a_step_on_every_unusable_answer(workshop_at: Make) -> None:
    answers = [str(a["content"]) for a in _answers()[:12]]
    with serve([_reply(a) for a in answers]) as server:
        workshop = workshop_at(server)
        outcome = run_episode(workshop, Job("working", "original/1", 0, "t01c00"), max_steps=12)
        requests = list(server.requests)
    expected = [a["action"] or "" for a in _answers()[:12]]
    assert list(outcome.actions) == expected
    assert outcome.invalid_answers == 4 and outcome.prompts == 12
    assert outcome.tokens == 12 * 1500
    # One image (the view) in the first prompt, then one more per step of the window (6 at most).
    assert outcome.images == sum(1 + min(n, 6) for n in range(12))
    first = requests[0]
    assert first["temperature"] == 0.0 and first["max_tokens"] == 30
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    kinds = [p["type"] for p in first["messages"][1]["content"]]
    assert kinds.count("image_url") == 1
    # The ninth answer ('fly') named no action: the next prompt says so.
    after = " ".join(p["text"] for p in requests[9]["messages"][1]["content"]
                     if p["type"] == "text")
    assert "last action: no action taken: the answer 'fly' names no action" in after


def test_following_the_reference_by_answers_succeeds_with_spl_one(
        workshop_at: Make, memtransfer_cases: list[Case]) -> None:
    case = next(c for c in memtransfer_cases if c.id == "t07c00")
    with serve([_reply(a) for a in case.demos["original"].actions]) as server:
        workshop = workshop_at(server)
        outcome = run_episode(workshop, Job("full_context", "original/1", 0, case.id))
        prompt = server.requests[0]["messages"][1]["content"]
    assert outcome.success and outcome.spl == pytest.approx(1.0)
    texts = " ".join(p["text"] for p in prompt if p["type"] == "text")
    assert "Demonstration 1: task" in texts and case.task.instruction in texts
    images = sum(p["type"] == "image_url" for p in prompt)
    assert 3 <= images <= 41  # keyframes and the current view


def test_full_context_keeps_the_moments_the_protocol_names(warehouse: Layout,
                                                           memtransfer_cases: list[Case]) -> None:
    case = next(c for c in memtransfer_cases if c.task.type == 10)
    plan = plan_episode(warehouse, case, Setting("new-start", 4), memtransfer_cases)
    records = [record(warehouse, h) for h in plan.histories]
    rec = records[0]
    steps = keyframe_steps(rec, 40)
    last = len(rec.poses) - 1
    assert steps[0] == 0 and steps[-1] == last and steps == sorted(set(steps))
    turns = [n for n, a in enumerate(rec.actions) if a.startswith("turn")]
    assert set(turns) <= set(steps)
    completions = [n + 1 for n in range(len(rec.actions))
                   if rec.stages[n] > (rec.stages[n - 1] if n else 0)]
    assert len(completions) == 3 and set(completions) <= set(steps)
    assert len(keyframe_steps(rec, 3)) == 3 and keyframe_steps(rec, 0) == []
    frames = FullContext(records, lambda pose: _blank(), max_images=40).recall(_blank())
    assert len(frames.images) <= 40 and frames.text.count("Demonstration") == 4


def _blank() -> np.ndarray:
    return np.zeros((8, 8, 3), np.uint8)


def test_episodic_memory_hands_over_the_continuation_of_the_matching_view(
        workshop_at: Make) -> None:
    with serve([]) as server:
        workshop = workshop_at(server)
        case = workshop.by_id["t01c00"]
        plan = plan_episode(workshop.layout, case, Setting("new-start", 4), workshop.cases)
        records = workshop.records(plan.histories)
        memory = Episodic(records, workshop.render, horizon=6)
        rec = records[2]
        view = workshop.render(rec.poses[1])
        r, u = memory.match(view)
        assert records[r].poses[u] == rec.poses[1]  # the same view, whichever demonstration
        recall = memory.recall(view)
    assert len(recall.images) == 1 + min(6, len(records[r].actions) - u)
    assert recall.text.count("->") == len(recall.images) - 1


def test_documents_are_written_once_and_bad_answers_are_refused(workshop_at: Make) -> None:
    setting = Setting("original", 1)
    with serve([_reply("- Racks run north-south."), _reply("- Categories share a rack face."),
                _reply("- Racks run north-south; a category shares one face."),
                _reply("Red barrels stand on the west face of the first rack."),
                _reply("Red barrels at (2, 5)-(2, 9); the cross-aisle joins the banks.")]
               ) as server:
        workshop = workshop_at(server)
        written = workshop.write_documents(["hybrid"], [setting])
        assert len(written) == 2 and len(server.requests) == 5
        assert workshop.write_documents(["summary", "semantic"], [setting]) == []
        folder = Path(workshop.model.folder)
        assert "cross-aisle" in read_document(folder, "summary", setting.key)
        assert "category shares" in read_document(folder, "semantic", setting.key)
        summary_prompt = server.requests[4]["messages"][0]["content"]
        assert any("Red barrels stand" in p.get("text", "") for p in summary_prompt)
    with pytest.raises(DocumentError, match="no summary document"):
        read_document(folder, "summary", "blocked/4")
    with serve([_reply(""), _reply("cut", finish="length")]) as server:
        backend = OpenAICompatibleBackend(server.vlm_config())
        workshop = workshop_at(server)
        records = workshop.records(plan_episode(workshop.layout, workshop.cases[0], setting,
                                                workshop.cases).histories)
        with pytest.raises(DocumentError, match="empty"):
            write_semantic(backend, records)
        with pytest.raises(DocumentError, match="cut off"):
            write_summary(backend, records, lambda pose: _blank())


def test_the_command_runs_a_representation_against_an_endpoint(
        two_cases: Path, tmp_path: Path, memtransfer_cases: list[Case],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MIMIR_VLM_API_KEY", "sk-test")
    case = next(c for c in memtransfer_cases if c.id == "t01c00")
    out = tmp_path / "bench"
    with serve([_reply(a) for a in case.demos["original"].actions]) as server:
        status = main(["bench", "memtransfer", "--policies", "", "--representations", "episodic",
                       "--backend", "openai", "--endpoint", server.url, "--model", "m",
                       "--cases", str(two_cases), "--types", "1", "--condition", "original",
                       "--demos", "1", "--runs", "1", "--image-size", "48", "--out", str(out),
                       "--no-progress"])
    assert status == 0
    [outcome] = read_outcomes(out)
    assert outcome.policy == "episodic" and outcome.success and outcome.images > 0
    trace = (out / "traces" / "episodic" / "original-1" / "run0" / "t01c00.jsonl").read_text(
        encoding="utf-8").splitlines()
    assert [json.loads(row)["answer"] for row in trace] == list(case.demos["original"].actions)
    assert "| episodic |" in (out / "report.md").read_text(encoding="utf-8")
    assert main(["bench", "memtransfer", "--representations", "telepathy",
                 "--out", str(out)]) == 2
    # An endpoint that does not answer stops the benchmark with one line, not a traceback.
    assert main(["bench", "memtransfer", "--policies", "", "--representations", "working",
                 "--backend", "openai", "--endpoint", "http://127.0.0.1:9/v1", "--cases",
                 str(two_cases), "--types", "1", "--condition", "original", "--demos", "1",
                 "--runs", "1", "--image-size", "32", "--out", str(tmp_path / "down"),
                 "--no-progress", "--reasoning-config", str(_fast_config(tmp_path))]) == 2
    assert Pose(0, 0, 0).cell == (0, 0)


def _fast_config(tmp_path: Path) -> Path:
    data = yaml.safe_load(config_file("reasoning.yaml").read_text(encoding="utf-8"))
    data["vlm"].update(timeout_s=0.5, max_attempts=1, backoff_initial_s=0.0, backoff_max_s=0.0)
    path = tmp_path / "reasoning.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_mimirs_memory_is_built_through_noisy_perception(workshop_at: Make) -> None:
    with serve([]) as server:
        workshop = workshop_at(server)
        case = workshop.by_id["t07c00"]
        plan = plan_episode(workshop.layout, case, Setting("new-start", 4), workshop.cases)
        records = workshop.records(plan.histories)
        folder = Path(workshop.model.folder) / "scene"
        ideal = SceneMemory(folder / "ideal", workshop.layout, records, workshop.renderer.frame,
                            load_noise_profile("ideal"), seed=1)
        noisy = SceneMemory(folder / "noisy", workshop.layout, records, workshop.renderer.frame,
                            load_noise_profile("realistic"), seed=1)
        # Real SQLite files, keyframes linked to the nodes they show.
        assert (folder / "noisy" / "world.db").is_file() and noisy.frames_kept > 0
        kinds = named_kinds(workshop.layout, case.task.instruction)
        assert kinds and kinds <= set(workshop.layout.kinds)
        truth = [i for i in workshop.layout.items if i.kind in kinds]
        for memory in (ideal, noisy):
            nodes = [n for k in kinds for n in memory.world.nodes_by_label(k)]
            assert nodes, "the demonstrations pass the target"
            for node in nodes:  # every remembered target stands near a true one
                assert min(abs(node.centroid[0] - i.rack[0]) + abs(node.centroid[1] - i.rack[1])
                           for i in truth) < 1.0
        # The realistic profile's noise changes what memory holds.
        assert [n.centroid for n in ideal.world.state.nodes.values()] != [
            n.centroid for n in noisy.world.state.nodes.values()]
        recall = noisy.read(case.task.instruction)
        assert "mimir's scene graph" in recall.text and 0 < len(recall.images) <= 3
        assert all(image.ndim == 3 for _, image in recall.images)
        assert noisy.read("Go to a unicorn.").text.count("nodes of this task: none") == 1
        ideal.close()
        noisy.close()


def test_a_model_policy_reads_mimirs_memory(workshop_at: Make,
                                            memtransfer_cases: list[Case]) -> None:
    case = next(c for c in memtransfer_cases if c.id == "t01c00")
    with serve([_reply(a) for a in case.demos["original"].actions]) as server:
        workshop = workshop_at(server)
        outcome = run_episode(workshop, Job("mimir", "original/1", 0, case.id))
        prompt = server.requests[0]["messages"][1]["content"]
    assert outcome.success
    texts = " ".join(p["text"] for p in prompt if p["type"] == "text")
    assert "mimir's scene graph of earlier runs" in texts


def test_a_local_transformers_model_serves_the_policy(tmp_path: Path, two_cases: Path) -> None:
    pytest.importorskip("torch")
    model = build_tiny_qwen(tmp_path / "tiny_qwen")
    workshop = Workshop("", str(two_cases), ModelSettings(
        "transformers", model=str(model), image_size=32, folder=str(tmp_path)))
    outcome = run_episode(workshop, Job("episodic", "new-start/4", 0, "t01c00"), max_steps=3)
    workshop.renderer.close()
    # A random model answers nonsense: every step is spent, each prompt counted with its tokens.
    assert outcome.prompts == 3 and outcome.steps == 3
    assert outcome.tokens > 0 and outcome.images >= 3
    assert outcome.invalid_answers + sum(1 for a in outcome.actions if a) == 3
