"""The in-process kernel table: ``load_kernel(description)`` returns a compiled kernel.

Runtime layer, kernel generator (``vm.kernels``); imports numpy and numba.

Loading validates the description, computes its cache key, and returns the kernel from
the in-process table, else generates its module, prepares what the library functions it
calls need (the chunk code of the jobs they share with the worker threads, the C entry
points they call by symbol: see the ``NEEDS`` tables beside them), writes the module to
the cache directory and imports it (numba then loads the machine code from its disk
cache, or compiles and stores it). The key is the sha256 of the code generator's
version, a hash of the kernel library's own source (the helper module the generated code
calls, and the emitters, since numba does not notice when a callee changes) and the
canonical JSON of the normalized description.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import pathlib
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from vm.kernels import cache, codegen
from vm.kernels.description import Description, parse_description
from vm.kernels.fingerprint import library_hash
from vm.kernels.runtime import callbacks, jobs, threads


class KernelBuildError(RuntimeError):
    """A valid description could not be compiled: a bug in the kernel library, not the user's."""


def kernel_key(description: Description) -> str:
    """The cache key of a validated description."""
    digest = hashlib.sha256()
    digest.update(f"relayvm-kernel-v{codegen.CODEGEN_VERSION}\n".encode())
    digest.update(library_hash().encode())
    digest.update(b"\n")
    digest.update(description.canonical_json().encode())
    return digest.hexdigest()


@dataclass(frozen=True, eq=False)
class CompiledKernel:
    """A compiled kernel and its calling convention.

    ``entry(*inputs, *outputs)`` runs it: inputs first, then the caller-allocated outputs
    (C-contiguous, of exactly the dtypes and ranks below, with the shapes the results
    have). It is numba's entry point for the one compiled signature, so it skips numba's
    type dispatch; it does *not* check dtypes, ranks or contiguity (the kernel itself
    checks shapes). :meth:`__call__` checks everything first and is the safe way to call
    a kernel by hand. Errors raised while running are ``ValueError`` (shapes),
    ``ZeroDivisionError`` (integer division by zero) and ``IndexError`` (``take`` with
    ``mode="fast"``).
    """

    key: str
    entry: Callable[..., None]
    input_dtypes: tuple[str, ...]
    input_ndims: tuple[int, ...]
    output_dtypes: tuple[str, ...]
    output_ndims: tuple[int, ...]
    path: pathlib.Path
    #: True when numba loaded the machine code from its disk cache instead of compiling.
    from_cache: bool
    dispatcher: Any = field(repr=False)

    def __call__(self, *arrays: np.ndarray) -> None:
        """Check ``arrays`` (inputs then outputs) against the signature, then run the kernel."""
        dtypes = self.input_dtypes + self.output_dtypes
        ndims = self.input_ndims + self.output_ndims
        if len(arrays) != len(dtypes):
            raise TypeError(
                f"kernel {self.key[:12]} takes {len(self.input_dtypes)} input(s) and "
                f"{len(self.output_dtypes)} output(s), {len(dtypes)} arrays in all; "
                f"got {len(arrays)}"
            )
        for k, (array, dtype, ndim) in enumerate(zip(arrays, dtypes, ndims)):
            role = (
                f"input {k}"
                if k < len(self.input_dtypes)
                else (f"output {k - len(self.input_dtypes)}")
            )
            if not isinstance(array, np.ndarray):
                raise TypeError(f"kernel {role} must be a numpy array, got {type(array).__name__}")
            if array.dtype != np.dtype(dtype) or array.ndim != ndim:
                raise TypeError(
                    f"kernel {role} must be a {dtype} array of rank {ndim}, got "
                    f"{array.dtype} of rank {array.ndim} (shape {array.shape})"
                )
            if not array.flags.c_contiguous:
                raise ValueError(f"kernel {role} must be C-contiguous")
            if k >= len(self.input_dtypes) and not array.flags.writeable:
                raise ValueError(f"kernel {role} must be writeable")
        self.entry(*arrays)


_TABLE: dict[str, CompiledKernel] = {}
_BUILD_LOCK = threading.Lock()


def load_kernel(description: object) -> CompiledKernel:
    """The compiled kernel for ``description``, built or loaded from the disk cache once per
    process (thread-safe).

    Raises
    ------
    KernelDescriptionError
        If the description is invalid (nothing is compiled).
    KernelBuildError
        If a valid description fails to compile (a library bug).
    """
    desc = parse_description(description)
    key = kernel_key(desc)
    kernel = _TABLE.get(key)
    if kernel is not None:
        return kernel
    with _BUILD_LOCK:
        kernel = _TABLE.get(key)
        if kernel is None:
            kernel = _build(desc, key)
            _TABLE[key] = kernel
    return kernel


def _build(desc: Description, key: str) -> CompiledKernel:
    source = codegen.generate(desc, key)
    path = cache.store_module(f"k_{key}.py", source)
    ops = ", ".join(sorted({n.op for n in desc.nodes})) or "copy"
    try:
        _prepare(source)
        with warnings.catch_warnings():
            # Object-mode blocks (BLAS calls) make numba warn that nogil cannot apply there.
            from numba.core.errors import NumbaWarning

            warnings.simplefilter("ignore", NumbaWarning)
            module = cache.import_module(path, f"{cache.KERNEL_MODULE_PREFIX}{key}")
        dispatcher = module.kernel
        (signature,) = dispatcher.signatures
        native = dispatcher.overloads[signature].entry_point
    except Exception as exc:
        raise KernelBuildError(
            f"internal error: the kernel for ({ops}) could not be compiled "
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
            f"generated source: {path}"
        ) from exc
    _mark_built(key)
    specs = (*desc.inputs, *desc.outputs)
    entry = _float16_entry(native, [s.dtype == "float16" for s in specs])
    return CompiledKernel(
        key=key,
        entry=entry,
        input_dtypes=tuple(s.dtype for s in desc.inputs),
        input_ndims=tuple(s.ndim for s in desc.inputs),
        output_dtypes=tuple(s.dtype for s in desc.outputs),
        output_ndims=tuple(s.ndim for s in desc.outputs),
        path=path,
        from_cache=sum(dispatcher.stats.cache_hits.values()) > 0,
        dispatcher=dispatcher,
    )


def _built_marker(key: str) -> pathlib.Path:
    return cache.kernels_dir() / f"k_{key}.built"


def _mark_built(key: str) -> None:
    """Record that the kernel of ``key`` compiled (or loaded) here, so that numba's disk
    cache holds it for the next process (see :func:`built_before`)."""
    # The marker only saves work: without it the kernel is built again.
    with contextlib.suppress(OSError):
        _built_marker(key).touch()


def is_loaded(key: str) -> bool:
    """Whether the kernel of ``key`` is in this process's table."""
    return key in _TABLE


def built_before(key: str) -> bool:
    """Whether some process built the kernel of ``key`` with this cache directory, so that
    loading it here takes its machine code from numba's disk cache rather than compiling
    (unless that cache was removed since)."""
    try:
        return _built_marker(key).exists()
    except OSError:
        return False


def _needs(source: str) -> list[jobs.Needs]:
    """What the library functions generated ``source`` calls need (their ``NEEDS``)."""
    found = []
    for module, function in sorted(codegen.library_calls(source)):
        needs = getattr(importlib.import_module(f"vm.kernels.runtime.{module}"), "NEEDS", {})
        if function in needs:
            found.append(needs[function])
    return found


def _prepare(source: str) -> None:
    """Make ready what the library functions ``source`` calls need, before the kernel is
    compiled or loaded: a C entry point it calls by symbol must be linked first (else the
    kernel fails to link), and a job kind it shares must be registered (else it runs
    alone). Runs in every process for every kernel, from the cache or not; only what this
    kernel calls is compiled (or loaded), once per process."""
    shares = False
    for needs in _needs(source):
        needs.prepare()
        shares = shares or bool(needs.kinds)
    if shares:
        # Workers polling from the first call on can share the kernel's first jobs.
        threads.start()


class LibraryUnit(NamedTuple):
    """One separately compiled part of the kernel library: a job kind's chunk code
    (``part`` ``"job"``, ``name`` the kind's number) or a C entry point (``"entry"``, its
    symbol), with the module whose import registers it. A kernel that calls the library
    needs some of them compiled (or loaded) first; each is compiled once per cache."""

    part: str
    name: str
    module: str


def _entry_unit(symbol: str) -> LibraryUnit:
    return LibraryUnit("entry", symbol, callbacks.entry_function(symbol).__module__)


def _links(unit: LibraryUnit) -> tuple[LibraryUnit, ...]:
    if unit.part == "job":
        symbols = jobs.chunk_links(int(unit.name))
    else:
        symbols = callbacks.entry_links(unit.name)
    return tuple(_entry_unit(symbol) for symbol in symbols)


def library_units(description: object) -> dict[LibraryUnit, tuple[LibraryUnit, ...]]:
    """The library units the kernel of ``description`` needs before it is compiled or
    loaded, each with the units it calls (which are compiled before it).

    Raises
    ------
    KernelDescriptionError
        If the description is invalid.
    """
    desc = parse_description(description)
    pending: list[LibraryUnit] = []
    for needs in _needs(codegen.generate(desc, kernel_key(desc))):
        pending += [LibraryUnit("job", str(k), jobs.OWNERS[k]) for k in needs.kinds]
        pending += [_entry_unit(symbol) for symbol in needs.symbols]
    graph: dict[LibraryUnit, tuple[LibraryUnit, ...]] = {}
    while pending:
        unit = pending.pop()
        if unit not in graph:
            graph[unit] = _links(unit)
            pending.extend(graph[unit])
    return graph


def prepare_unit(unit: LibraryUnit) -> None:
    """Compile ``unit`` (or load it from numba's disk cache), and the units it calls,
    once per process.

    Raises
    ------
    KeyError
        If the unit's module does not register it.
    """
    importlib.import_module(unit.module)
    if unit.part == "job":
        jobs.require(int(unit.name))
    else:
        callbacks.link(unit.name)


def _float16_entry(native: Callable[..., None], is_f16: list[bool]) -> Callable[..., None]:
    """numba takes float16 arrays as their uint16 bits; view them so on the way in."""
    if not any(is_f16):
        return native
    positions = [k for k, f in enumerate(is_f16) if f]
    bits = np.dtype(np.uint16)

    def entry(*arrays: np.ndarray) -> None:
        args = list(arrays)
        for k in positions:
            args[k] = args[k].view(bits)
        native(*args)

    return entry


def loaded_kernels() -> list[CompiledKernel]:
    """Every kernel loaded in this process."""
    return list(_TABLE.values())
