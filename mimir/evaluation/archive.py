"""Finished trials as a small archive: packed in one evaluation folder, merged into another.

A trial folder holds the whole run: memory databases, keyframe images, the robot's trace (some
40 MB for a Long Horizon trial). The report reads a small part of it. :func:`pack` writes that
part of every finished trial to one gzip'd tar (``mimir eval --pack FILE``):
``results.json``, ``trial.json``, ``trace.jsonl``, ``memory/planner_trace.jsonl`` and
:data:`~mimir.evaluation.report.RETRIEVAL_FILE` (the retrieval figures, worked out from the
keyframe store before it is left behind), with the folder's ``eval.json``. :func:`merge`
(``mimir eval --merge FILE``) adds an archive's trials to an evaluation folder, so an
evaluation run in parts, on several machines or in several sittings, resumes and reports as
one. A Long Horizon trial packs to about 60 kB.

Merging never replaces a finished trial and refuses, before writing anything, an archive that
is not one (no ``eval.json``, a member outside a trial folder, a link), one made with other
shared choices than the folder's, or one whose results cannot be read.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from mimir.evaluation.methods import EvalConfigError
from mimir.evaluation.report import RETRIEVAL_FILE, retrieval, retrieval_record
from mimir.evaluation.runner import settle_manifest
from mimir.evaluation.trials import KEY_DEPTH, TrialResult, parse_results

#: What a packed trial keeps of its folder, beside the retrieval figures.
RECORD_FILES = ("results.json", "trial.json", "trace.jsonl", "memory/planner_trace.jsonl")
MANIFEST = "eval.json"


class ArchiveError(ValueError):
    """An archive that cannot be written or merged; nothing was changed."""


def pack(results: Sequence[TrialResult], root: Path, path: Path) -> int:
    """Write the finished trials among ``results`` (of the evaluation folder ``root``) to the
    new archive ``path``; the number of trials packed.

    Raises:
        ArchiveError: ``path`` exists, no trial is finished, or ``root`` has no ``eval.json``.
        TrialFileError: a trial's retrieval figures cannot be read.
    """
    if path.exists():
        raise ArchiveError(f"{path} exists; give a new file for the archive")
    finished = [r for r in results if r.finished]
    if not finished:
        raise ArchiveError(f"no finished trial in {root} to pack")
    if not (root / MANIFEST).is_file():
        raise ArchiveError(f"{root} has no {MANIFEST}: not an evaluation folder")
    partial = path.with_name(path.name + ".partial")
    try:
        with tarfile.open(partial, "w:gz") as tar:
            tar.add(root / MANIFEST, arcname=MANIFEST)
            for result in finished:
                folder = result.spec.folder(root)
                for name in RECORD_FILES:
                    if (folder / name).is_file():
                        tar.add(folder / name, arcname=f"{result.spec.key}/{name}")
                data = json.dumps(retrieval_record(retrieval(folder))).encode()
                info = tarfile.TarInfo(f"{result.spec.key}/{RETRIEVAL_FILE}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return len(finished)


def _trial_key(name: str) -> tuple[str, str]:
    """(trial key, file within the trial) of an archive member.

    Raises:
        ArchiveError: the member lies outside a trial folder or is not one of its records.
    """
    for record in (*RECORD_FILES, RETRIEVAL_FILE):
        if name.endswith("/" + record):
            key = name[: -len(record) - 1]
            parts = PurePosixPath(key).parts
            if len(parts) == KEY_DEPTH and not any(p in ("", ".", "..") for p in parts) \
                    and not key.startswith("/"):
                return key, record
    raise ArchiveError(f"archive member {name!r} is not a record of a trial folder")


def merge(path: Path, root: Path) -> tuple[int, int]:
    """Add the trials of the archive ``path`` to the evaluation folder ``root``; (trials
    added, trials ``root`` had finished already and kept). A trial folder there without
    results (not run, stopped, failed) is replaced by the archive's.

    Raises:
        ArchiveError: the archive cannot be read, is not an evaluation archive, was made with
            other shared choices than ``root``'s evaluation, or holds a trial without results.
        TrialFileError: a trial's results in the archive cannot be read.
    """
    try:
        with tarfile.open(path, "r:gz") as tar:
            files = {m.name: _read_member(tar, m) for m in tar.getmembers()}
    except (OSError, tarfile.TarError, EOFError) as err:
        raise ArchiveError(f"{path} cannot be read as an evaluation archive: {err}") from err
    if MANIFEST not in files:
        raise ArchiveError(f"{path} has no {MANIFEST}: not an evaluation archive")
    trials: dict[str, dict[str, bytes]] = {}
    for name, data in files.items():
        if name != MANIFEST:
            key, record = _trial_key(name)
            trials.setdefault(key, {})[record] = data
    for key, records in trials.items():
        if "results.json" not in records:
            raise ArchiveError(f"{path}: trial {key} has no results.json")
        parse_results(records["results.json"].decode("utf-8", "replace"), f"{path}:{key}")
    _check_manifest(path, files[MANIFEST], root)
    added = kept = 0
    for key, records in sorted(trials.items()):
        folder = root / key
        if (folder / "results.json").is_file():
            kept += 1
            continue
        if folder.exists():
            shutil.rmtree(folder)
        for record, data in records.items():
            (folder / record).parent.mkdir(parents=True, exist_ok=True)
            (folder / record).write_bytes(data)
        added += 1
    return added, kept


def _read_member(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    if not member.isfile():
        raise ArchiveError(f"archive member {member.name!r} is not a plain file")
    handle = tar.extractfile(member)
    if handle is None:
        raise ArchiveError(f"archive member {member.name!r} cannot be read")
    return handle.read()


def _check_manifest(path: Path, data: bytes, root: Path) -> None:
    """Write ``root``'s ``eval.json`` from the archive's, or check that they agree."""
    try:
        held = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ArchiveError(f"{path}: {MANIFEST} is not JSON: {err}") from err
    if not isinstance(held, dict):
        raise ArchiveError(f"{path}: {MANIFEST} is not an evaluation's settings")
    try:
        settle_manifest(root, held)
    except EvalConfigError as err:
        raise ArchiveError(f"cannot merge {path}: {err}") from err
