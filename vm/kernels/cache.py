"""The on-disk kernel cache: where it lives, writing generated modules, importing them, and
checking every cached byte before it is loaded.

Runtime layer, kernel generator (``vm.kernels``); standard library and numba's caching machinery.

Each kernel is a generated module ``<cache_dir>/kernels/k_<key>.py``; numba keeps its
compiled code in ``__pycache__`` beside it (``cache=True``). The library's own cached
functions (the shared product, the convolution and pooling loops) go to
``<cache_dir>/library/<hash>``, keyed by :func:`vm.kernels.fingerprint.library_hash`
rather than by their files' paths and modification times as numba would: a fresh clone
or a reinstall of the same library then finds them compiled, where it used to spend most
of a minute compiling them again. A module is written once and never touched again: it
is created as a temporary file in the same directory and linked into place only if
absent, so a second process, or one racing with the first, never sees a partial file.

Cached files do not stay intact by themselves: a full disk, a crash mid-write or a bit
flip leaves a truncated or garbled file, and numba would unpickle it (an exception in
every later process) or load its machine code (an LLVM abort or a segfault). So every
cache file this module or numba writes for relayvm is *sealed*: it starts with a magic
tag and the sha256 of the rest, written in the same atomic rename as the contents. A file
is checked before anything parses it; one that fails is deleted, reported with a
:class:`KernelCacheWarning` naming it, and compiled again. The generated module's own
bytecode is kept in such a sealed file too (Python's ``.pyc`` files carry no check of
their body). Only the files a process actually loads are hashed, at a few hundred MB/s,
so a warm start pays well under a millisecond per kernel.

Numba writes its index and data files itself, so the check sits inside numba's cache:
the dispatchers of relayvm's functions get :class:`_SealedFunctionCache` instead of
numba's ``FunctionCache`` (installed when this module is imported, which the package
does before any kernel module). Functions of other packages keep numba's own cache.

The cache directory must be trusted like any code directory: what is in it is imported.
The seal detects damage, not tampering.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import marshal
import os
import pathlib
import pickle
import sys
import tempfile
import threading
import types
import warnings
from typing import Any

from numba.core import caching

from vm.kernels.fingerprint import library_hash

_LOCK = threading.Lock()
_FALLBACK: pathlib.Path | None = None
_CHECKED: dict[pathlib.Path, str | None] = {}

#: Module names of generated kernels start with this (library.py imports them so).
KERNEL_MODULE_PREFIX = "_relayvm_kernel_"
#: Functions of these modules get sealed numba cache files.
_LIBRARY_PREFIX = __name__.rpartition(".")[0] + "."

_SEAL_MAGIC = b"RVMSEAL1"
_SEAL_HEADER = len(_SEAL_MAGIC) + hashlib.sha256().digest_size


class KernelCacheWarning(RuntimeWarning):
    """A kernel cache file was damaged or unusable and was discarded or bypassed.

    The kernel still works (it is compiled again); the message names the file.
    """


def configured_cache_dir() -> pathlib.Path:
    """``$RELAYVM_CACHE_DIR``, else ``$XDG_CACHE_HOME/relayvm``, else ``~/.cache/relayvm``."""
    explicit = os.environ.get("RELAYVM_CACHE_DIR")
    if explicit:
        return pathlib.Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return pathlib.Path(xdg).expanduser() / "relayvm"
    return pathlib.Path.home() / ".cache" / "relayvm"


def _unusable(directory: pathlib.Path) -> str | None:
    """Why ``directory`` (and its ``kernels`` subdirectory) cannot hold the cache, or None."""
    try:
        kernels = directory / "kernels"
        kernels.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=kernels, prefix=".probe-"):
            pass
    except OSError as exc:
        # A regular file where a directory belongs lands here too (FileExistsError or
        # NotADirectoryError), and is treated like a read-only directory.
        return f"{type(exc).__name__}: {exc.strerror or exc}"
    return None


def _fallback_dir(reason: str) -> pathlib.Path:
    """The per-process temporary cache directory, created (with one warning) on first use."""
    global _FALLBACK
    with _LOCK:
        if _FALLBACK is None:
            _FALLBACK = pathlib.Path(tempfile.mkdtemp(prefix="relayvm-cache-"))
            warnings.warn(
                f"relayvm: {reason}; compiled kernels go to {_FALLBACK} for this process "
                "only. Set RELAYVM_CACHE_DIR to a writable directory to keep them between runs.",
                RuntimeWarning,
                stacklevel=3,
            )
        return _FALLBACK


def cache_dir() -> pathlib.Path:
    """The directory compiled kernels are cached in.

    ``$RELAYVM_CACHE_DIR``, else ``$XDG_CACHE_HOME/relayvm``, else ``~/.cache/relayvm``. If
    that directory cannot be created or written (or a regular file stands in its place),
    a per-process temporary directory is used instead (with one warning), so kernels still
    work but are compiled in every process.
    """
    wanted = configured_cache_dir()
    with _LOCK:
        if wanted not in _CHECKED:
            _CHECKED[wanted] = _unusable(wanted)
        problem = _CHECKED[wanted]
    if problem is None:
        return wanted
    return _fallback_dir(f"the kernel cache directory {wanted} is not writable ({problem})")


def library_dir() -> pathlib.Path:
    """Where numba keeps the library's own compiled functions: ``cache_dir() / "library" /``
    the first 32 hex digits of :func:`vm.kernels.fingerprint.library_hash`."""
    return cache_dir() / "library" / library_hash()[:32]


def kernels_dir() -> pathlib.Path:
    """``cache_dir() / "kernels"``, created if missing."""
    directory = cache_dir() / "kernels"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def _warn(message: str) -> None:
    warnings.warn(f"relayvm: {message}", KernelCacheWarning, stacklevel=3)


# --- sealed files -----------------------------------------------------------------------


def seal(payload: bytes) -> bytes:
    """``payload`` behind a header (magic tag and sha256) that :func:`unseal` checks."""
    return _SEAL_MAGIC + hashlib.sha256(payload).digest() + payload


def unseal(raw: bytes) -> bytes:
    """The payload of a sealed file's bytes.

    Raises
    ------
    ValueError
        If the bytes are not a sealed file or do not match their digest; the message says
        which.
    """
    if len(raw) < _SEAL_HEADER:
        raise ValueError(f"{len(raw)} bytes, shorter than the {_SEAL_HEADER}-byte seal")
    if raw[: len(_SEAL_MAGIC)] != _SEAL_MAGIC:
        raise ValueError("it does not start with the seal's magic tag")
    view = memoryview(raw)[_SEAL_HEADER:]
    if hashlib.sha256(view).digest() != raw[len(_SEAL_MAGIC) : _SEAL_HEADER]:
        raise ValueError(f"its {len(view)} bytes do not match their sha256")
    return bytes(view)


def discard(path: str | os.PathLike[str], reason: str) -> None:
    """Delete the damaged cache file ``path`` and warn, naming it and ``reason``."""
    with contextlib.suppress(OSError):
        os.unlink(path)
    _warn(f"discarded the damaged kernel cache file {os.fspath(path)} ({reason}); compiling again")


def read_sealed(path: str | os.PathLike[str]) -> bytes | None:
    """The checked payload of the sealed file ``path``, or None if it is missing or damaged
    (a damaged file is discarded with a :class:`KernelCacheWarning`)."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        _warn(
            f"cannot read the kernel cache file {os.fspath(path)} "
            f"({type(exc).__name__}: {exc.strerror or exc}); compiling again"
        )
        return None
    try:
        return unseal(raw)
    except ValueError as exc:
        discard(path, str(exc))
        return None


def write_sealed(path: pathlib.Path, payload: bytes) -> None:
    """Write ``seal(payload)`` to ``path`` atomically (a temporary file renamed over it)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(seal(payload))
        os.replace(tmp, path)
        tmp = ""
    finally:
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


# --- generated modules ------------------------------------------------------------------


def write_module(directory: pathlib.Path, name: str, text: str) -> pathlib.Path:
    """``directory/name`` holding ``text``, written atomically if it is absent or differs.

    An existing file with the same text is left alone. A file with different text (damaged,
    or written by another build of the library) is replaced atomically, with a
    :class:`KernelCacheWarning`.
    """
    path = directory / name
    data = text.encode("utf-8")
    existing: bytes | None = None
    with contextlib.suppress(OSError):
        existing = path.read_bytes()
    if existing == data:
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
                if existing is not None:
                    _warn(
                        f"the kernel module {path} did not hold the generated source "
                        f"({len(existing)} bytes instead of {len(data)}, or different "
                        "bytes); rewriting it"
                    )
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


def store_module(name: str, text: str) -> pathlib.Path:
    """Write a generated module into :func:`kernels_dir` (see :func:`write_module`).

    If that fails (a full disk, a directory where the file belongs), the module goes to the
    per-process fallback directory instead, with a warning naming the problem.
    """
    directory = kernels_dir()
    try:
        return write_module(directory, name, text)
    except OSError as exc:
        if directory.parent == _FALLBACK:
            raise
        fallback = _fallback_dir(
            f"the kernel module {directory / name} cannot be written "
            f"({type(exc).__name__}: {exc.strerror or exc})"
        )
        directory = fallback / "kernels"
        directory.mkdir(parents=True, exist_ok=True)
        return write_module(directory, name, text)


def _code_cache_path(path: pathlib.Path) -> pathlib.Path:
    return path.parent / "__pycache__" / f"{path.stem}.{sys.implementation.cache_tag}.sealed-code"


def _module_code(path: pathlib.Path) -> types.CodeType:
    """The compiled bytecode of the module at ``path``, from its sealed code file if that
    matches the source, else compiled (and the code file rewritten)."""
    source = path.read_bytes()
    # The bytecode belongs to this source, this interpreter's bytecode format and this
    # path: the code objects carry their file name, which numba uses to find its cache.
    tag = importlib.util.MAGIC_NUMBER + hashlib.sha256(source + b"\0" + bytes(path)).digest()
    cached = _code_cache_path(path)
    payload = read_sealed(cached)
    if payload is not None and payload[: len(tag)] == tag:
        try:
            code = marshal.loads(payload[len(tag) :])
        except (ValueError, EOFError, TypeError) as exc:
            discard(cached, f"its sealed bytecode does not load: {exc}")
        else:
            if isinstance(code, types.CodeType):
                return code
            discard(cached, f"it holds a {type(code).__name__}, not bytecode")
    code = compile(source, str(path), "exec", dont_inherit=True)
    with contextlib.suppress(OSError):
        cached.parent.mkdir(exist_ok=True)
        write_sealed(cached, tag + marshal.dumps(code))
    return code


def import_module(path: pathlib.Path, module_name: str) -> types.ModuleType:
    """Import the module at ``path`` under ``module_name`` (registered in ``sys.modules``,
    which numba needs to rebuild a cached function's environment).

    The bytecode comes from a sealed code file, never from a ``.pyc``.
    """
    existing = sys.modules.get(module_name)
    if existing is not None and getattr(existing, "__file__", None) == str(path):
        return existing
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None:  # pragma: no cover - only for non-.py paths
        raise ImportError(f"cannot import kernel module {path}")
    module = importlib.util.module_from_spec(spec)
    code = _module_code(path)
    sys.modules[module_name] = module
    try:
        exec(code, module.__dict__)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


# --- numba's cache, sealed --------------------------------------------------------------


class _SealedCacheFile(caching.IndexDataCacheFile):
    """numba's index and data files, sealed, under names of their own (``.sealed.nbi``,
    ``.N.sealed.nbc``) so that files numba wrote unsealed are never mistaken for damage."""

    def __init__(self, cache_path: str, filename_base: str, source_stamp: Any) -> None:
        super().__init__(cache_path, filename_base, source_stamp)
        self._index_name = f"{filename_base}.sealed.nbi"
        self._index_path = os.path.join(cache_path, self._index_name)
        self._data_name_pattern = f"{filename_base}.{{number:d}}.sealed.nbc"

    def load(self, key: Any) -> Any:
        data_name = self._load_index().get(key)
        if data_name is None:
            return None
        path = self._data_path(data_name)
        payload = read_sealed(path)
        if payload is None:
            return None
        try:
            return pickle.loads(payload)
        except Exception as exc:
            discard(path, f"its sealed contents do not unpickle: {type(exc).__name__}")
            return None

    def _load_index(self) -> dict:
        payload = read_sealed(self._index_path)
        if payload is None:
            return {}
        stream = io.BytesIO(payload)
        try:
            if pickle.load(stream) != self._version:
                return {}  # written by another numba: stale, not damaged
            stamp, overloads = pickle.load(stream)
        except Exception as exc:
            discard(self._index_path, f"its sealed contents do not unpickle: {type(exc).__name__}")
            return {}
        if stamp != self._source_stamp or not isinstance(overloads, dict):
            return {}
        return overloads

    def _save_index(self, overloads: dict) -> None:
        payload = pickle.dumps(self._version, protocol=-1)
        payload += self._dump((self._source_stamp, overloads))
        with self._open_for_write(self._index_path) as handle:
            handle.write(seal(payload))

    def _save_data(self, name: str, data: Any) -> None:
        with self._open_for_write(self._data_path(name)) as handle:
            handle.write(seal(self._dump(data)))


class _LibraryLocator(caching._CacheLocator):
    """Places the library's cached functions in :func:`library_dir`, stamped with the
    library's hash; declines every other function (numba's own locators take those)."""

    def __init__(self, py_func: Any) -> None:
        self._lineno = py_func.__code__.co_firstlineno

    def get_cache_path(self) -> str:
        return str(library_dir())

    def get_source_stamp(self) -> str:
        return library_hash()

    def get_disambiguator(self) -> str:
        return str(self._lineno)

    @classmethod
    def from_function(cls, py_func: Any, py_file: str) -> _LibraryLocator | None:
        if not (getattr(py_func, "__module__", None) or "").startswith(_LIBRARY_PREFIX):
            return None
        locator = cls(py_func)
        try:
            locator.ensure_cache_path()
        except OSError:
            return None  # numba's in-tree or user-wide locator, as before
        return locator


class _CacheImpl(caching.CompileResultCacheImpl):
    _locator_classes = [_LibraryLocator, *caching.CompileResultCacheImpl._locator_classes]


def _is_relayvm_function(py_func: Any) -> bool:
    module = getattr(py_func, "__module__", None) or ""
    return module.startswith((_LIBRARY_PREFIX, KERNEL_MODULE_PREFIX))


class _SealedFunctionCache(caching.FunctionCache):
    """numba's ``FunctionCache``; for relayvm's functions, with sealed files, and a cache
    that cannot be written or rebuilt is bypassed with a warning instead of failing."""

    _impl_class = _CacheImpl

    def __init__(self, py_func: Any) -> None:
        super().__init__(py_func)
        self._sealed = _is_relayvm_function(py_func)
        if self._sealed:
            self._cache_file = _SealedCacheFile(
                cache_path=self._cache_path,
                filename_base=self._impl.filename_base,
                source_stamp=self._impl.locator.get_source_stamp(),
            )

    def load_overload(self, sig: Any, target_context: Any) -> Any:
        if not self._sealed:
            return super().load_overload(sig, target_context)
        try:
            return super().load_overload(sig, target_context)
        except Exception as exc:
            # The bytes passed their check, so this is not damage but something numba
            # cannot rebuild (say a global the code refers to has gone): compile afresh.
            _warn(
                f"numba could not load the cached {self._name} from {self._cache_path} "
                f"({type(exc).__name__}: {exc}); compiling again"
            )
            return None

    def save_overload(self, sig: Any, data: Any) -> None:
        if not self._sealed:
            return super().save_overload(sig, data)
        try:
            super().save_overload(sig, data)
        except OSError as exc:
            _warn(
                f"could not write the kernel cache files of {self._name} in "
                f"{self._cache_path} ({type(exc).__name__}: {exc.strerror or exc}); it "
                "will be compiled again in the next process"
            )
        return None


def _install_sealed_cache() -> None:
    """Make numba's dispatchers and C callbacks create :class:`_SealedFunctionCache`.

    Both look ``FunctionCache`` up in their own module when caching is enabled, which
    ``cache=True`` does at decoration time, so this must run before any relayvm module
    with cached functions is imported (``vm.kernels`` imports this module first).
    """
    from numba.core import ccallback, dispatcher

    for module in (dispatcher, ccallback):
        if module.FunctionCache is caching.FunctionCache:
            module.FunctionCache = _SealedFunctionCache


_install_sealed_cache()
