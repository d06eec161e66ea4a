"""The appearance benchmark runs end to end on a small slice (rendered objects and real frames)
and its figures are what a working measurement gives: colour words mostly right, a region of
the kitchen found again in the next frames more often than not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench_modules import load_benchmark

appearance_accuracy = load_benchmark("appearance_accuracy")


@pytest.mark.slow
def test_the_benchmark_measures_rendered_objects_and_real_frames(
        sevenscenes_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rows.json"
    assert appearance_accuracy.main([
        "--views", "2", "--scales", "1", "--sevenscenes", str(sevenscenes_dir),
        "--gaps", "2", "--pairs", "3", "--json", str(out)]) == 0
    rows = {r["measure"]: r for r in json.loads(out.read_text())}
    assert set(rows) == {"colour", "pattern", "same instance", "7-Scenes region, 2 files apart"}
    for row in rows.values():
        assert row["views"] > 0
        assert row["recall"] + row["abstained"] <= 1.0 + 1e-9
    assert rows["colour"]["precision"] >= 0.8
    assert rows["7-Scenes region, 2 files apart"]["precision"] >= 0.8
    assert "| colour | 1 |" in capsys.readouterr().out
