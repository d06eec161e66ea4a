"""ROS domain claims: distinct while held, stale ones taken over, given back on release."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mimir.ros import domains


def test_claims_are_distinct_and_released(monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    monkeypatch.setattr(domains, "DOMAIN_LOCKS", tmp_path)
    first = domains.claim_domain_id()
    second = domains.claim_domain_id(exclude=frozenset({first}))
    assert first != second
    assert domains.claim_domain_id(exclude=frozenset({first})) not in (first, second)
    domains.release_domain_id(first)
    assert not (tmp_path / f"{first}.pid").exists()


def test_a_claim_of_a_dead_process_is_taken_over(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    monkeypatch.setattr(domains, "DOMAIN_LOCKS", tmp_path)
    monkeypatch.setattr(domains, "POOL", range(7, 8))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (tmp_path / "7.pid").write_text(gone)
    assert domains.claim_domain_id() == 7
    assert (tmp_path / "7.pid").read_text() == str(os.getpid())


def test_a_full_pool_is_a_typed_error(monkeypatch: pytest.MonkeyPatch,
                                      tmp_path: Path) -> None:
    monkeypatch.setattr(domains, "DOMAIN_LOCKS", tmp_path)
    monkeypatch.setattr(domains, "POOL", range(7, 8))
    (tmp_path / "7.pid").write_text(str(os.getppid()))
    with pytest.raises(domains.NoFreeDomainError, match="claimed"):
        domains.claim_domain_id()


def test_release_leaves_another_process_claim_alone(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    monkeypatch.setattr(domains, "DOMAIN_LOCKS", tmp_path)
    (tmp_path / "9.pid").write_text(str(os.getppid()))
    domains.release_domain_id(9)
    assert (tmp_path / "9.pid").exists()
