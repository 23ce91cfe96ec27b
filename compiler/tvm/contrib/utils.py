"""``tvm.contrib.utils`` over relayvm: TVM's temporary directory helper.

Compiler layer (``compiler.tvm``). relayvm has no such helper of its own, so this module
defines it, following TVM's documented behaviour: ``tempdir()`` makes a fresh directory
that is removed when the object is removed, garbage-collected or leaves a ``with`` block.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from types import TracebackType


class TempDirectory:
    """A temporary directory, removed with the object (TVM's ``TempDirectory``).

    Parameters
    ----------
    custom_path : str, optional
        Use (and create) this directory instead of a fresh one; it is then kept.
    keep_for_debug : bool, optional
        Keep the directory when the object goes away.

    Attributes
    ----------
    temp_dir : str
        The directory's path.
    """

    def __init__(self, custom_path: str | None = None, keep_for_debug: bool | None = None) -> None:
        if custom_path is not None:
            os.makedirs(custom_path, exist_ok=True)
            self.temp_dir = os.path.abspath(custom_path)
            self._keep = True
        else:
            self.temp_dir = tempfile.mkdtemp(prefix="relayvm-")
            self._keep = bool(keep_for_debug)

    @property
    def path(self) -> str:
        """The directory's path."""
        return self.temp_dir

    def relpath(self, name: str) -> str:
        """The path of ``name`` inside the directory."""
        return os.path.join(self.temp_dir, name)

    def listdir(self) -> list[str]:
        """The names of the files in the directory."""
        return os.listdir(self.temp_dir)

    def remove(self) -> None:
        """Remove the directory and everything in it (unless it is kept)."""
        if not self._keep and self.temp_dir and os.path.isdir(self.temp_dir):
            shutil.rmtree(self.temp_dir, ignore_errors=True)

    def __enter__(self) -> TempDirectory:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.remove()

    def __del__(self) -> None:
        self.remove()

    def __repr__(self) -> str:
        return f"TempDirectory({self.temp_dir!r})"


def tempdir(custom_path: str | None = None, keep_for_debug: bool | None = None) -> TempDirectory:
    """A new :class:`TempDirectory` (TVM's ``tvm.contrib.utils.tempdir``)."""
    return TempDirectory(custom_path, keep_for_debug)
