"""numpy's OpenBLAS library, found once, if it lets each thread set its own thread count.

Runtime layer, compiled runtime support (``vm.kernels.runtime``); standard library and ctypes. The
kernels' own products (:mod:`vm.kernels.runtime.products`) call its ``sgemm``/``dgemm`` directly,
and the worker pool (:mod:`vm.kernels.runtime.threads`) runs it single-threaded per calling thread
through
:data:`SET_THREADS_LOCAL`.
"""

from __future__ import annotations

import ctypes
import os
import threading

import numpy  # noqa: F401  (loads the BLAS library, so it shows in the process map)

#: The OpenBLAS function that sets the calling thread's BLAS thread count.
SET_THREADS_LOCAL = "openblas_set_num_threads_local"

_LOCK = threading.Lock()
_FOUND: list[ctypes.CDLL | None] = []  # filled on the first call of openblas()


def openblas() -> ctypes.CDLL | None:
    """numpy's OpenBLAS, if numpy uses an OpenBLAS with thread-local thread control."""
    with _LOCK:
        if not _FOUND:
            _FOUND.append(_find_openblas())
        return _FOUND[0]


def _find_openblas() -> ctypes.CDLL | None:
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as handle:
            paths = {line.split()[-1] for line in handle if "openblas" in line.lower()}
    except OSError:
        return None
    for path in sorted(paths):
        if not os.path.isfile(path):
            continue
        try:
            library = ctypes.CDLL(path)
            getattr(library, SET_THREADS_LOCAL)
        except (OSError, AttributeError):
            continue
        return library
    return None
