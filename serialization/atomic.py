"""Atomic file writes: a reader sees the old file or the new one, never a torn one.

Lowest layer (``serialization``); standard library only.

The data goes to a temporary file in the target's directory (so the final rename
stays on one file system), is flushed and fsynced, and then ``os.replace`` swaps it
in, which is atomic on POSIX and replaces on Windows. The directory is fsynced
afterwards on POSIX so the rename survives a power loss. On any failure the
temporary file is removed and the old file is left as it was.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path


def atomic_write(path: str | os.PathLike[str], data: bytes | bytearray | memoryview) -> None:
    """Write ``data`` to ``path`` atomically.

    Parameters
    ----------
    path : str or os.PathLike
        The file to create or replace. Its directory must exist.
    data : bytes-like
        The complete new contents.

    Raises
    ------
    OSError
        If the directory does not exist or cannot be written; ``path`` is unchanged.
    """
    target = Path(os.fspath(path))
    directory = target.parent
    fd, tmp_name = _create_temporary(target)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    _fsync_directory(directory)


def _create_temporary(target: Path) -> tuple[int, str]:
    # os.open with mode 0o666 lets the process umask decide the permissions, as for any
    # newly created file (tempfile.mkstemp would force 0o600 onto the final file).
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        name = str(target.parent / f".{target.name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(name, flags, 0o666), name
        except FileExistsError:
            continue
    raise FileExistsError(f"could not create a temporary file next to {target}")


def _fsync_directory(directory: Path) -> None:
    # Directories cannot be opened for fsync on Windows; there the rename is durable
    # enough. Elsewhere a failing directory fsync is not worth failing a finished write.
    if os.name != "posix":
        return
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
