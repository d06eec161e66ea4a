"""Atomic file writes for images stored beside the databases."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from mimir_memory.errors import StorageError


def write_file_atomic(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write ``data`` to ``path`` through a temporary file and ``os.replace``.

    Either the complete file appears under its final name or nothing does, also when the
    process is killed. With ``durable`` the file and its folder are synced as well, so the file
    also survives a power cut once this returns.

    Raises:
        StorageError: The folder is not writable, the disk is full, or another OS error.
    """
    folder = path.parent
    tmp_name: str | None = None
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=".tmp-", suffix=path.suffix, dir=folder)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp_name, path)
        tmp_name = None
        if durable:
            dir_fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
    except OSError as err:
        raise StorageError(err.errno or 0, f"cannot write {path}: {err.strerror or err}") from err
    finally:
        if tmp_name is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp_name)
