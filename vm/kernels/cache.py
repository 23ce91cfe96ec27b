"""The on-disk kernel cache: where it lives, writing generated modules, importing them.

Runtime layer (``vm.kernels``); standard library only.

Each kernel is a generated module ``<cache_dir>/kernels/k_<key>.py``; numba keeps its
compiled code in ``__pycache__`` beside it (``cache=True``), keyed on the module file's
modification time and size. A module is therefore written once and never touched again:
it is created as a temporary file in the same directory and linked into place only if
absent, so a second process, or one racing with the first, never sees a partial file and
never refreshes the timestamp under numba's feet.

The cache directory must be trusted like any code directory: what is in it is imported.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pathlib
import sys
import tempfile
import threading
import types
import warnings

_LOCK = threading.Lock()
_FALLBACK: pathlib.Path | None = None
_CHECKED: dict[pathlib.Path, bool] = {}


def configured_cache_dir() -> pathlib.Path:
    """``$RELAYVM_CACHE_DIR``, else ``$XDG_CACHE_HOME/relayvm``, else ``~/.cache/relayvm``."""
    explicit = os.environ.get("RELAYVM_CACHE_DIR")
    if explicit:
        return pathlib.Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return pathlib.Path(xdg).expanduser() / "relayvm"
    return pathlib.Path.home() / ".cache" / "relayvm"


def _writable(directory: pathlib.Path) -> bool:
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".probe-"):
            pass
    except OSError:
        return False
    return True


def cache_dir() -> pathlib.Path:
    """The directory compiled kernels are cached in.

    ``$RELAYVM_CACHE_DIR``, else ``$XDG_CACHE_HOME/relayvm``, else ``~/.cache/relayvm``. If
    that directory cannot be created or written, a per-process temporary directory is used
    instead (with one warning), so kernels still work but are compiled in every process.
    """
    global _FALLBACK
    wanted = configured_cache_dir()
    with _LOCK:
        ok = _CHECKED.get(wanted)
        if ok is None:
            ok = _CHECKED[wanted] = _writable(wanted)
        if ok:
            return wanted
        if _FALLBACK is None:
            _FALLBACK = pathlib.Path(tempfile.mkdtemp(prefix="relayvm-cache-"))
            warnings.warn(
                f"relayvm: the kernel cache directory {wanted} is not writable; compiled "
                f"kernels go to {_FALLBACK} for this process only. Set RELAYVM_CACHE_DIR to a "
                "writable directory to keep them between runs.",
                RuntimeWarning,
                stacklevel=2,
            )
        return _FALLBACK


def kernels_dir() -> pathlib.Path:
    """``cache_dir() / "kernels"``, created if missing."""
    directory = cache_dir() / "kernels"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def write_module(directory: pathlib.Path, name: str, text: str) -> pathlib.Path:
    """``directory/name`` holding ``text``, written atomically if it is absent or differs.

    An existing file with the same text is left alone (its timestamp keeps numba's cache
    valid). A file with different text (written by another version of the library) is
    replaced atomically.
    """
    path = directory / name
    data = text.encode("utf-8")
    with contextlib.suppress(OSError):
        if path.read_bytes() == data:
            return path
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            # Create-if-absent: a concurrent writer of the same text wins and we keep its file.
            os.link(tmp, path)
        except FileExistsError:
            if path.read_bytes() != data:
                os.replace(tmp, path)
                tmp = ""
        except OSError:
            # A file system without hard links: an atomic rename is the next best thing.
            os.replace(tmp, path)
            tmp = ""
    finally:
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return path


def import_module(path: pathlib.Path, module_name: str) -> types.ModuleType:
    """Import the module at ``path`` under ``module_name`` (registered in ``sys.modules``,
    which numba needs to rebuild a cached function's environment)."""
    existing = sys.modules.get(module_name)
    if existing is not None and getattr(existing, "__file__", None) == str(path):
        return existing
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:  # pragma: no cover - only for non-.py paths
        raise ImportError(f"cannot import kernel module {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module
