"""Calls from compiled kernels into Python: the way kernels reach numpy's BLAS and the
worker threads.

Runtime layer, compiled runtime support (``vm.kernels.runtime``); imports numpy, numba, llvmlite and
ctypes.

numba's ``objmode`` blocks would do, but a kernel loaded from numba's disk cache rebuilds
its object-mode code on its first call (tens of milliseconds per kernel, which a network
with twenty kernels pays at every start). Instead, Python handlers are registered here
under codes derived from their names, and one C-callable function (a ctypes callback, registered
with LLVM under the fixed symbol ``relayvm_kernel_callback``) dispatches to them.
Compiled code calls the symbol as an external function with a code and the address of an
int64 parameter block, so cached kernels link to it by name and start at once. The codes
are compiled into that code as constants: a CRC of the handler's name, not the order of
registration, which depends on which module a process imported first (a kernel cached by
one process then called another's handler).

A parameter block holds its own length, then each array as (address, item size, rank,
shape...) and then plain integers. Arrays are C-contiguous float32 or float64 (item size
4 or 8) and must outlive the call (they are the kernel's own). A handler's exception is
kept (:func:`last_error`) and reported to compiled code as a status, which raises
``MemoryError`` or ``RuntimeError`` there.

Interrupts. A signal handler's exception (Ctrl-C's ``KeyboardInterrupt``) is raised at
the callback's next bytecode boundary, which may lie outside any ``try`` of the callback
(its very first instruction, when the signal came while compiled code ran). ctypes then
prints "Exception ignored", drops the exception and returns an undefined value, so the
callback's return value cannot carry the status. The callback writes it over the block's
first word instead, as its last act: a block that still holds its length afterwards was
cut short. Compiled code raises :class:`Interrupted` both then and when a handler raised
an exception that is not an ``Exception`` (``KeyboardInterrupt``, ``SystemExit``); that
exception is kept per thread, and the virtual machine raises it in the stand-in's place
(:func:`interruption`). One that escapes the callback reaches it through
``sys.unraisablehook``, chained here to whatever hook was set before.
"""

from __future__ import annotations

import ctypes
import functools
import sys
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numba import njit, types

from vm.kernels.runtime import atomics, symbols

SYMBOL = symbols.KERNEL_CALLBACK

_DTYPES = {4: np.dtype(np.float32), 8: np.dtype(np.float64)}
_STATE = threading.local()


@dataclass(frozen=True)
class _Handler:
    function: Callable[..., None]
    arrays: int


_HANDLERS: dict[int, _Handler] = {}
_NAMES: dict[int, str] = {}


def register(name: str, function: Callable[..., None], arrays: int) -> int:
    """Make ``function(*arrays, *ints)`` callable from compiled code under ``name``
    (unique, and the same in every process); returns its code.

    Raises
    ------
    ValueError
        If another handler has this name, or a name with the same code.
    """
    code = zlib.crc32(name.encode()) & 0x7FFFFFFF
    if code in _NAMES:
        raise ValueError(f"bridge handler {name!r} clashes with {_NAMES[code]!r} (code {code})")
    _NAMES[code] = name
    _HANDLERS[code] = _Handler(function, arrays)
    return code


def handlers() -> dict[str, Callable[..., None]]:
    """Every handler registered so far, by name."""
    return {_NAMES[code]: handler.function for code, handler in _HANDLERS.items()}


class Interrupted(Exception):
    """Raised by compiled code whose call into Python was interrupted (see the module
    docstring; numba raises no ``KeyboardInterrupt``): :func:`interruption` gives the
    exception to raise in its place."""


#: What the callback leaves in a block's first word (a length is positive).
_OK, _NO_MEMORY, _FAILED, _INTERRUPTED = 0, -1, -2, -3


def last_error() -> BaseException | None:
    """The exception of the last handler that failed in this thread, if any."""
    return getattr(_STATE, "error", None)


def interruption() -> BaseException:
    """The exception that interrupted this thread's last call into Python, which a
    kernel reported as :class:`Interrupted` (taken: it is raised once); a
    ``KeyboardInterrupt`` if it was lost (``sys.unraisablehook`` replaced since)."""
    recorded = getattr(_STATE, "interrupt", None)
    _STATE.interrupt = None
    if recorded is None:
        return KeyboardInterrupt("interrupted in a kernel's call to BLAS or its threads")
    return recorded


def _array(address: int, itemsize: int, shape: tuple[int, ...]) -> np.ndarray:
    dtype = _DTYPES[itemsize]
    count = int(np.prod(shape)) if shape else 1
    if count == 0 or address == 0:
        return np.zeros(shape, dtype)
    buffer = (ctypes.c_char * (count * itemsize)).from_address(address)
    return np.frombuffer(buffer, dtype).reshape(shape)


def _decode(handler: _Handler, address: int) -> list[object]:
    length = ctypes.c_int64.from_address(address).value
    block = (ctypes.c_int64 * length).from_address(address)
    values: list[object] = []
    at = 1
    for _ in range(handler.arrays):
        data, itemsize, ndim = block[at], block[at + 1], block[at + 2]
        shape = tuple(block[at + 3 : at + 3 + ndim])
        values.append(_array(data, itemsize, shape))
        at += 3 + ndim
    values.extend(block[at:length])
    return values


def _dispatch(code: int, address: int) -> int:
    # An exception may still be raised between any two calls below (a signal handler's);
    # the status word, written last with no call in between, says how far this got.
    word = None
    status = _INTERRUPTED
    try:
        word = ctypes.c_int64.from_address(address)
        _STATE.interrupt = None
        handler = _HANDLERS[code]
        handler.function(*_decode(handler, address))
        status = _OK
    except MemoryError as exc:
        status = _NO_MEMORY
        _STATE.error = exc
    except Exception as exc:  # reported to compiled code as a status
        status = _FAILED
        _STATE.error = exc
    except BaseException as exc:  # an interrupt: compiled code raises Interrupted
        status = _INTERRUPTED
        _STATE.interrupt = exc
    finally:
        if word is not None:
            word.value = status
    return 0


_callback = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)(_dispatch)
symbols.export(SYMBOL, ctypes.cast(_callback, ctypes.c_void_p).value)


def _keep_escaped(unraisable: object, previous: Callable[[object], object]) -> None:
    """``sys.unraisablehook``: keep an exception that escaped the callback (see the module
    docstring) for :func:`interruption`; pass anything else on."""
    if getattr(unraisable, "object", None) is _dispatch:
        _STATE.interrupt = unraisable.exc_value  # type: ignore[attr-defined]
        return
    previous(unraisable)


sys.unraisablehook = functools.partial(_keep_escaped, previous=sys.unraisablehook)

#: The callback as compiled code sees it: ``call(code, address of block)``, whose return
#: value means nothing (the status comes back in the block, see :func:`invoke`).
call = types.ExternalFunction(SYMBOL, types.int64(types.int64, types.int64))


@njit(nogil=True)
def put(block, at, array):
    """Write ``array``'s address, item size, rank and shape at ``block[at]``; returns the
    next free position."""
    block[at] = array.ctypes.data
    block[at + 1] = array.itemsize
    block[at + 2] = array.ndim
    for d in range(array.ndim):
        block[at + 3 + d] = array.shape[d]
    return at + 3 + array.ndim


@njit(nogil=True)
def invoke(code, block, length):
    """Call handler ``code`` with ``block[:length]``; raise if it failed or was interrupted
    (:class:`Interrupted`)."""
    block[0] = length
    call(code, block.ctypes.data)
    # The callback's return value is undefined when an exception escaped it; the status
    # is in the block (read atomically: compiled code must not assume it unchanged).
    status = atomics.load(block.ctypes.data)
    if status == _OK:
        return
    if status == _NO_MEMORY:
        raise MemoryError("a kernel ran out of memory in a matrix product")
    if status == _FAILED:
        raise RuntimeError(
            "internal error in a kernel's call to BLAS or its threads "
            "(vm.kernels.runtime.bridge.last_error() holds the Python exception)"
        )
    raise Interrupted("interrupted in a kernel's call to BLAS or its threads")
