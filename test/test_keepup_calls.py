"""The keep-up benchmark reads its service client's lines, and only well-formed ones."""

from __future__ import annotations

import io
import threading

import pytest
from bench_modules import load_benchmark


def test_call_lines_are_read_and_bad_ones_left_out(capsys: pytest.CaptureFixture[str]) -> None:
    keepup = load_benchmark("bench_keepup")
    record = keepup.Recorded()
    ready = threading.Event()
    lines = (b"READY\n"
             b"CALL 1700000000.5 0.031250 171\n"
             b"CALL 1700000001.0 nan -1\n"       # a call that timed out
             b"CALL 1700000001.5 0.02\n"         # cut short
             b"CALL inf 0.02 3\n"
             b"CALL 1700000002.0 fast 3\n"
             b"\n"
             b"something else\n")
    keepup.read_calls(io.BytesIO(lines), record, ready)
    assert ready.is_set()
    assert record.calls == [(1700000000.5, 0.03125, 171), (1700000001.0, None, -1)]
    assert capsys.readouterr().out.count("ignoring a line of the client") == 3
