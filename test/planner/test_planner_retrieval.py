"""Keyframe retriever: three-source pool with caps, catalog, offline and recorded-VLM stages."""

from __future__ import annotations

import json
from pathlib import Path

import image_helpers
import numpy as np
import pytest
from planner_kitchen import RecordedBackend, recorded_text

from mimir_memory.keyframes import KeyframeStore, Trigger
from mimir_planner.config import RetrievalConfig, load_planner_config
from mimir_planner.errors import PlanAnswerError, RetrievalError
from mimir_planner.reasoning.prompts import PromptLibrary
from mimir_planner.retrieval import (
    Choice,
    KeyframeRetriever,
    OfflineRetrievalReasoner,
    RetrievalQuery,
    VlmRetrievalReasoner,
    edge_density,
    parse_selection_answer,
    parse_shortlist_answer,
    task_terms,
)


def textured(seed: int, height: int = 96, width: int = 128, block: int = 8) -> np.ndarray:
    return image_helpers.textured(seed, height, width, block)


def plain(seed: int, height: int = 96, width: int = 128) -> np.ndarray:
    """A low-clutter image: two flat regions."""
    img = np.full((height, width, 3), 40 + seed, dtype=np.uint8)
    img[:, width // 2:] = 200
    return img


@pytest.fixture
def store(tmp_path: Path):
    kf = KeyframeStore.open(tmp_path / "kf")
    ids: dict[str, str] = {}

    def save(name: str, image: np.ndarray, stamp: float, trigger: Trigger, **kw: object) -> None:
        result = kf.save(image, timestamp=stamp, camera=kw.pop("camera", "wrist"),  # type: ignore[arg-type]
                         trigger=trigger, **kw)  # type: ignore[arg-type]
        assert result.saved, result.reason
        assert result.frame_id is not None
        ids[name] = result.frame_id

    save("cab3_inside", plain(1), 10.0, Trigger.INTERACTION_PEAK, action="inspect",
         node_ids=["cabinet_3"], labels=[("ketchup", "analyzer"), ("cabinet interior", "analyzer")])
    save("cab3_twin", plain(1), 10.5, Trigger.INTERACTION_POST, action="inspect",
         node_ids=["cabinet_3"])
    save("cab2_inside", textured(2), 11.0, Trigger.INTERACTION_PEAK, action="inspect",
         node_ids=["cabinet_2"], labels=[("banana", "analyzer")])
    save("counter", textured(3), 12.0, Trigger.NEW_NODE, camera="base1",
         node_ids=["counter_1"], tags=["sponge"])
    save("caption", textured(4), 13.0, Trigger.NODE_UPDATE, camera="base1",
         caption="a ketchup bottle next to the mustard")
    for i in range(6):
        save(f"recent_{i}", textured(10 + i), 20.0 + i, Trigger.INTERACTION_PRE, action="open",
             node_ids=["cabinet_1"])
    yield kf, ids
    kf.close()


def test_task_terms() -> None:
    assert task_terms(["the red mugs", None, "Cabinet_3", "find it in the fridge"]) == (
        "red", "mug", "cabinet", "fridge")


def test_pool_sources_caps_and_dedup(store) -> None:
    kf, ids = store
    cfg = RetrievalConfig(node_cap=2, label_cap=2, recent_cap=3, shortlist_k=3, final_k=2)
    retriever = KeyframeRetriever(kf, cfg)
    pool = retriever.candidate_pool(RetrievalQuery("find the ketchup", ("cabinet_3",),
                                                   ("ketchup",)))
    by_id = {e.frame_id: e for e in pool}
    assert by_id[ids["cab3_inside"]].sources == ("node", "label")  # not among the 3 newest
    assert by_id[ids["cab3_inside"]].linked == ("cabinet_3",)
    assert by_id[ids["cab3_inside"]].matched == ("ketchup",)
    assert "label" in by_id[ids["caption"]].sources  # caption words are indexed
    recent = [e for e in pool if "recent" in e.sources]
    assert len(recent) == 3  # capped
    assert ids["recent_5"] in by_id and ids["recent_0"] not in by_id
    assert len(pool) == len(by_id)  # deduplicated
    catalog = retriever.catalog(pool).splitlines()
    assert catalog[0] == "idx|frame_id|trigger|camera|action|graph_nodes|labels"
    first = catalog[1].split("|")
    assert first[0] == "1" and len(first[1]) == 12 and len(first) == 7


def test_index_follows_new_labels_and_removals(store) -> None:
    kf, ids = store
    retriever = KeyframeRetriever(kf, load_planner_config().retrieval)
    query = RetrievalQuery("find the sponge", (), ("sponge",))
    assert [e.frame_id for e in retriever.candidate_pool(query)
            if "label" in e.sources] == [ids["counter"]]
    kf.add_labels(ids["cab2_inside"], [("sponge", "analyzer")], stamp=30.0)
    labelled = {e.frame_id for e in retriever.candidate_pool(query) if "label" in e.sources}
    assert labelled == {ids["counter"], ids["cab2_inside"]}
    kf.enforce_budget(0, stamp=40.0)  # drops unprotected perception frames
    labelled = {e.frame_id for e in retriever.candidate_pool(query) if "label" in e.sources}
    assert labelled == {ids["cab2_inside"]}


def test_offline_two_stages(store) -> None:
    kf, ids = store
    retriever = KeyframeRetriever(kf, RetrievalConfig(shortlist_k=3, final_k=2))
    result = retriever.retrieve(RetrievalQuery("find the ketchup", ("cabinet_3",),
                                               ("ketchup",)))
    assert result.reasoner == "offline-reasoner"
    shortlisted = [result.pool[c.idx - 1].frame_id for c in result.shortlist]
    assert shortlisted[:2] == [ids["cab3_inside"], ids["cab3_twin"]]
    chosen = [f.frame_id for f in result.frames]
    # The twin frame has the same thumbnail: dropped as redundant in stage two.
    assert chosen[0] == ids["cab3_inside"] and ids["cab3_twin"] not in chosen
    assert "edge density" in result.frames[0].reason
    assert result.frames[0].edge_density is not None
    assert edge_density(plain(0)) < edge_density(textured(0))


def test_empty_store_and_bad_query(tmp_path: Path) -> None:
    with KeyframeStore.open(tmp_path / "empty") as kf:
        retriever = KeyframeRetriever(kf, RetrievalConfig())
        result = retriever.retrieve(RetrievalQuery("find the mug", ("mug_1",), ("mug",)))
        assert result.frames == () and result.pool == ()
        with pytest.raises(RetrievalError):
            retriever.candidate_pool("find the mug")  # type: ignore[arg-type]


def test_recorded_vlm_stages(store) -> None:
    kf, ids = store
    cfg = load_planner_config()
    query = RetrievalQuery("Pick the ketchup that is easiest to grasp", ("cabinet_3",),
                           ("ketchup",))
    probe = KeyframeRetriever(kf, cfg.retrieval)
    pool = probe.candidate_pool(query)
    idx = next(i for i, e in enumerate(pool) if e.frame_id == ids["cab3_inside"]) + 1
    stage1 = json.dumps({"chosen": [{"idx": idx, "frame_id": ids["cab3_inside"][:12],
                                     "reason": "inside of cabinet_3 with the ketchup"}]})
    stage2 = recorded_text("stage2_selected.json").replace('"idx": 1', f'"idx": {idx}')
    backend = RecordedBackend([stage1, stage2])
    reasoner = VlmRetrievalReasoner(backend, PromptLibrary(cfg.prompt_dir), cfg.retrieval)
    result = KeyframeRetriever(kf, cfg.retrieval, reasoner).retrieve(query, "cabinet_3: ...")
    assert [f.frame_id for f in result.frames] == [ids["cab3_inside"]]
    assert result.frames[0].reason == "ketchup alone with free space on its left"
    catalog_prompt = backend.requests[0].messages[0].parts[0].text  # type: ignore[union-attr]
    assert ids["cab3_inside"][:12] in catalog_prompt and "cabinet_3: ..." in catalog_prompt
    thumbs = backend.requests[1].messages[0].images()
    assert len(thumbs) == 1 and thumbs[0].rgb.shape[2] == 3


def test_recorded_vlm_bad_answers_raise_after_retries(store) -> None:
    kf, _ = store
    cfg = load_planner_config()
    bad = recorded_text("stage1_bad_prefix.json")
    backend = RecordedBackend([bad, "not json at all"])
    reasoner = VlmRetrievalReasoner(backend, PromptLibrary(cfg.prompt_dir), cfg.retrieval)
    with pytest.raises(RetrievalError):
        KeyframeRetriever(kf, cfg.retrieval, reasoner).retrieve(
            RetrievalQuery("find the ketchup", ("cabinet_3",), ("ketchup",)))
    assert len(backend.requests) == cfg.retrieval.stage_attempts
    backend = RecordedBackend([])  # model down
    reasoner = VlmRetrievalReasoner(backend, PromptLibrary(cfg.prompt_dir), cfg.retrieval)
    with pytest.raises(RetrievalError):
        KeyframeRetriever(kf, cfg.retrieval, reasoner).retrieve(
            RetrievalQuery("find the ketchup", ("cabinet_3",), ("ketchup",)))


def test_stage_parsers_are_strict(store) -> None:
    kf, _ = store
    pool = KeyframeRetriever(kf, RetrievalConfig()).candidate_pool(
        RetrievalQuery("x", ("cabinet_3",), ()))
    fid = pool[0].frame_id[:12]
    ok = {"chosen": [{"idx": 1, "frame_id": fid, "reason": "r"}]}
    assert parse_shortlist_answer(json.dumps(ok), pool, 3) == (Choice(1, "r"),)
    bad_answers = [
        {"chosen": [{"idx": 99, "frame_id": fid, "reason": "r"}]},
        {"chosen": [{"idx": 1, "frame_id": fid, "reason": ""}]},
        {"chosen": [{"idx": 1, "frame_id": fid, "reason": "r"}] * 2},
        {"chosen": [{"idx": 1, "frame_id": fid[:3], "reason": "r"}]},
        {"chosen": [{"idx": True, "frame_id": fid, "reason": "r"}]},
        {"chosen": [{"idx": 1, "frame_id": fid, "reason": "r", "x": 1}]},
        {"picked": []},
    ]
    for answer in bad_answers:
        with pytest.raises(PlanAnswerError):
            parse_shortlist_answer(json.dumps(answer), pool, 3)
    with pytest.raises(PlanAnswerError):
        parse_shortlist_answer(json.dumps({"chosen": [ok["chosen"][0]] * 4}), pool, 3)
    shortlist = (Choice(2, "a"), Choice(3, "b"))
    assert parse_selection_answer('{"selected": [{"idx": 3, "reason": "c"}]}', shortlist, 2)
    for answer in ('{"selected": [{"idx": 1, "reason": "c"}]}', '{"selected": {}}',
                   '{"selected": [{"idx": 2, "reason": "c"}, {"idx": 2, "reason": "d"}]}'):
        with pytest.raises(PlanAnswerError):
            parse_selection_answer(answer, shortlist, 2)


def test_offline_reasoner_name() -> None:
    assert OfflineRetrievalReasoner().name == "offline-reasoner"
