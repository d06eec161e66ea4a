"""Finished trials packed into an archive and merged into another evaluation folder."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest
from eval_helpers import finish_trial

from mimir.evaluation.archive import ArchiveError, merge, pack
from mimir.evaluation.job import run_evaluation
from mimir.evaluation.methods import Method
from mimir.evaluation.options import EvalOptions
from mimir.evaluation.report import read_retrieval, retrieval, trial_line, write_report
from mimir.evaluation.runner import check_manifest
from mimir.evaluation.trials import (
    IN_PROCESS,
    KEY_DEPTH,
    NODES,
    TrialFileError,
    TrialSpec,
    read_trial,
)
from mimir_memory.keyframes import KeyframeStore, Trigger

FULL = Method(name="full", label="full")
SG = Method(name="sg", label="SG", interaction=False, keyframes=False)


def _spec(method: Method, seed: int) -> TrialSpec:
    return TrialSpec("long_horizon", method, seed, "ideal", mode=IN_PROCESS)


def _evaluation(root: Path) -> list[TrialSpec]:
    """Two layouts of full (whose planner read keyframes 30 and 45 s old) and SG; SG's second
    layout has not run."""
    specs = [_spec(m, s) for s in (1000, 1001) for m in (FULL, SG)]
    check_manifest(root, specs)
    rng = np.random.default_rng(0)
    for spec in specs[:3]:
        calls: list[dict[str, object]] = [
            {"call": 1, "instruction": "instruction 2", "primitive": "open",
             "target": "cabinet_1", "outcome": "executed", "success": False,
             "detail": "NO_MOTION", "start": 60.0, "retrieved": [], "retrieval_s": 0.02}]
        if spec.method is FULL:
            store = KeyframeStore.open(spec.folder(root) / "memory" / "keyframes")
            ids = [store.save(rng.integers(0, 255, (48, 64, 3), dtype=np.uint8),
                              timestamp=stamp, camera="wrist", trigger=Trigger.INTERACTION_PEAK,
                              node_ids=["cabinet_1"]).frame_id for stamp in (30.0, 15.0)]
            store.close()
            calls[0]["retrieved"] = [{"frame_id": i} for i in ids]
        trace = [{"kind": "memory", "instruction": 2, "verdict": "defer",
                  "subject": "cabinet_1", "reason": "no mechanical evidence"}]
        finish_trial(spec, root, (1.0, 1.0, 0.5), calls=calls, trace=trace)
    return specs


def test_a_packed_evaluation_merges_into_an_empty_folder_with_the_same_report_lines(
        tmp_path: Path) -> None:
    source, copy = tmp_path / "a", tmp_path / "b"
    specs = _evaluation(source)
    results = [read_trial(s, source) for s in specs]
    archive = tmp_path / "lh.tar.gz"
    assert pack(results, source, archive) == 3
    assert merge(archive, copy) == (3, 0)
    assert json.loads((copy / "eval.json").read_text()) == json.loads(
        (source / "eval.json").read_text())
    merged = [read_trial(s, copy) for s in specs]
    assert [r.finished for r in merged] == [True, True, True, False]
    for before, after in zip(results, merged, strict=True):
        assert trial_line(after, copy) == trial_line(before, source)
    # the retrieval figures came from the keyframe store, which the archive leaves behind
    assert not (specs[0].folder(copy) / "memory" / "keyframes").exists()
    assert retrieval(specs[0].folder(copy)).reach_s == (30.0, 45.0)
    report = write_report(merged, [FULL, SG], copy).read_text()
    assert "NO_MOTION" in (copy / "report" / "failures.md").read_text()
    assert "3 of 4 trials finished" in report


def test_merging_keeps_finished_trials_and_replaces_unfinished_ones(tmp_path: Path) -> None:
    source, target = tmp_path / "a", tmp_path / "b"
    specs = _evaluation(source)
    archive = tmp_path / "lh.tar.gz"
    pack([read_trial(s, source) for s in specs], source, archive)
    check_manifest(target, specs)
    finish_trial(specs[0], target, (0.0, 0.0, 0.0))  # finished here: kept as it is
    specs[1].folder(target).mkdir(parents=True)
    (specs[1].folder(target) / "error.json").write_text('{"error": "killed"}')
    assert merge(archive, target) == (2, 1)
    assert read_trial(specs[0], target).progress == 0.0
    assert read_trial(specs[1], target).finished
    assert not (specs[1].folder(target) / "error.json").exists()


def test_packing_refuses_an_existing_file_and_an_evaluation_with_nothing_finished(
        tmp_path: Path) -> None:
    specs = _evaluation(tmp_path / "a")
    results = [read_trial(s, tmp_path / "a") for s in specs]
    taken = tmp_path / "taken.tar.gz"
    taken.write_bytes(b"keep me")
    with pytest.raises(ArchiveError, match="exists"):
        pack(results, tmp_path / "a", taken)
    assert taken.read_bytes() == b"keep me"
    with pytest.raises(ArchiveError, match="no finished trial"):
        pack(results[3:], tmp_path / "a", tmp_path / "new.tar.gz")
    assert not list(tmp_path.glob("new.tar.gz*"))


def _archive(path: Path, members: dict[str, bytes], *, link: str = "") -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if link:
            info = tarfile.TarInfo(link)
            info.type = tarfile.SYMTYPE
            info.linkname = "/etc/passwd"
            tar.addfile(info)
    return path


@pytest.mark.parametrize(("case", "message"), [
    ("garbage", "cannot be read"),
    ("no manifest", "no eval.json"),
    ("escape", "not a record of a trial folder"),
    ("absolute", "not a record of a trial folder"),
    ("link", "not a plain file"),
    ("no results", "has no results.json"),
    ("bad results", "not JSON"),
    ("other settings", "holds an evaluation with other profile"),
])
def test_a_bad_archive_is_refused_and_changes_nothing(tmp_path: Path, case: str,
                                                      message: str) -> None:
    source, target = tmp_path / "a", tmp_path / "b"
    specs = _evaluation(source)
    good = tmp_path / "good.tar.gz"
    pack([read_trial(s, source) for s in specs], source, good)
    with tarfile.open(good) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]
    key = specs[0].key
    path = tmp_path / "bad.tar.gz"
    if case == "garbage":
        path.write_bytes(b"not a tar at all")
    elif case == "no manifest":
        _archive(path, {k: v for k, v in members.items() if k != "eval.json"})
    elif case == "escape":
        _archive(path, {**members, "../../outside/x/y/results.json": b"{}"})
    elif case == "absolute":
        _archive(path, {**members, "/tmp/x/y/results.json": b"{}"})
    elif case == "link":
        _archive(path, members, link=f"{key}/memory/link")
    elif case == "no results":
        _archive(path, {k: v for k, v in members.items() if k != f"{key}/results.json"})
    elif case == "bad results":
        _archive(path, {**members, f"{key}/results.json": b"{cut"})
    else:
        check_manifest(target, [TrialSpec("long_horizon", FULL, 1000, "realistic")])
    before = sorted(p for p in tmp_path.rglob("*") if p.relative_to(tmp_path).parts[0] == "b")
    with pytest.raises(ArchiveError if case != "bad results" else TrialFileError,
                       match=message):
        merge(path if case != "other settings" else good, target)
    after = sorted(p for p in tmp_path.rglob("*") if p.relative_to(tmp_path).parts[0] == "b")
    assert after == before


@pytest.mark.parametrize("text", [
    "{cut", "[]", '{"calls": -1, "frames": 0, "reach_s": [], "latency_s": []}',
    '{"calls": true, "frames": 0, "reach_s": [], "latency_s": []}',
    '{"calls": 1, "frames": 2, "reach_s": [NaN], "latency_s": []}',
    '{"calls": 1, "frames": 2, "reach_s": ["30"], "latency_s": []}',
    '{"calls": 1, "frames": 2, "reach_s": []}',
])
def test_kept_retrieval_figures_that_cannot_be_read_are_refused(tmp_path: Path,
                                                               text: str) -> None:
    path = tmp_path / "retrieval.json"
    path.write_text(text)
    with pytest.raises(TrialFileError):
        read_retrieval(path)


def test_mimir_eval_merges_before_it_reports_and_packs_after(tmp_path: Path) -> None:
    """``--merge`` then ``--report-only`` with ``--pack``: the merged trials are reported
    and packed again; a pack into an existing file is refused before anything is read."""
    source, target = tmp_path / "a", tmp_path / "b"
    specs = _evaluation(source)
    archive = tmp_path / "lh.tar.gz"
    pack([read_trial(s, source) for s in specs], source, archive)
    again = tmp_path / "again.tar.gz"
    options = EvalOptions(scenario="long_horizon", methods="full,sg", trials=2,
                          first_seed=1000, profile="ideal", out=target, report_only=True,
                          merge=archive, pack=again)
    told: list[str] = []
    report = run_evaluation(options, say=told.append)
    assert told == [f"merged {archive}: 3 trials added, 0 finished here already",
                    f"packed 3 finished trials into {again}"]
    assert "3 of 4 trials finished" in report.read_text()
    with pytest.raises(ArchiveError, match="exists"):
        run_evaluation(EvalOptions(scenario="long_horizon", methods="full,sg", trials=2,
                                   first_seed=1000, profile="ideal", out=tmp_path / "c",
                                   report_only=True, merge=archive, pack=again))
    assert not (tmp_path / "c").exists()
    # an archive made with another profile than the command's is refused before any of its
    # trials lands in the folder (the trial folders do not name the profile)
    with pytest.raises(ArchiveError, match="other profile"):
        run_evaluation(EvalOptions(scenario="long_horizon", methods="full,sg", trials=2,
                                   first_seed=1000, profile="realistic",
                                   out=tmp_path / "d", report_only=True, merge=archive))
    assert not list((tmp_path / "d").glob("*/*"))


def test_the_archive_reads_trial_keys_as_deep_as_trial_specs_write_them() -> None:
    for mode in (IN_PROCESS, NODES):
        spec = TrialSpec("long_horizon", FULL, 1000, "ideal", noise_scale=0.5, mode=mode)
        assert len(Path(spec.key).parts) == KEY_DEPTH
