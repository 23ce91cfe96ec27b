"""C callbacks compiled on first need: the chunk code of shared jobs and the C entry points
kernels call by symbol.

Runtime layer, compiled runtime support (``vm.kernels.runtime``); imports numba and llvmlite.

numba compiles a ``cfunc`` where it is decorated, that is when its module is imported,
and every generated kernel imported the whole library: with an empty cache, a model of
one ``nn.dense`` compiled the chunk code of every convolution, depthwise and pooling job
(about 40 s on two cores) before its first result. Here a callback stays a plain Python
function until something asks for its address (:func:`build`), or its symbol
(:func:`link`); it is then compiled, or loaded from numba's disk cache (``cache=True``,
under the library's hash like every cached library function), once per process.

A callback may itself call C entry points by symbol (``links``): code that many callbacks
share, such as the products' register tile, is then compiled once instead of into each of
them, and linked before any callback that calls it is compiled or loaded.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from numba import cfunc, njit
from numba.core.ccallback import CFunc

from vm.kernels.runtime.symbols import export

_LOCK = threading.Lock()
#: The compiled callbacks, by ``module.qualname`` of their Python function.
_COMPILED: dict[str, CFunc] = {}
#: C entry points registered by :func:`entry`: symbol -> (function, signature, links).
_ENTRIES: dict[str, tuple[Callable, object, tuple[str, ...]]] = {}
_LINKED: set[str] = set()


def _name(function: Callable) -> str:
    return f"{function.__module__}.{function.__qualname__}"


def build(function: Callable, signature: object, links: tuple[str, ...] = ()) -> CFunc:
    """``function`` as a C callback of ``signature`` (nogil), compiled or loaded from the
    disk cache on the first call for it in this process.

    Parameters
    ----------
    function : callable
        A plain Python function that numba can compile in nopython mode.
    signature : numba signature
        Its C signature, e.g. ``types.void(types.int64, types.int64, types.int64)``.
    links : tuple of str
        The symbols of the C entry points ``function`` calls (:func:`entry`); they are
        linked first, since compiled code that calls an unexported symbol fails to link.

    Returns
    -------
    numba.core.ccallback.CFunc
        The callback; its ``address`` stays valid for the life of the process.
    """
    key = _name(function)
    link(*links)
    with _LOCK:
        callback = _COMPILED.get(key)
        if callback is None:
            callback = cfunc(signature, nogil=True, cache=True)(function)
            _COMPILED[key] = callback
    return callback


def compiled() -> dict[str, CFunc]:
    """Every callback compiled in this process so far, by ``module.qualname``."""
    with _LOCK:
        return dict(_COMPILED)


def entry(
    symbol: str, signature: object, links: tuple[str, ...] = ()
) -> Callable[[Callable], Callable]:
    """Register the decorated plain function as the C entry point of LLVM symbol
    ``symbol`` (compiled by :func:`link`, after the entry points of ``links`` it calls);
    returns the function unchanged.

    Compiled code calls it through ``types.ExternalFunction(symbol, signature)``: a kernel
    loaded from the disk cache then finds it by name in any process, wherever it was
    compiled to. :func:`link` must run before such a kernel is compiled or loaded (an
    unresolved symbol fails to link).
    """

    def register(function: Callable) -> Callable:
        _ENTRIES[symbol] = (function, signature, tuple(links))
        return function

    return register


def link(*symbols: str) -> None:
    """Compile (or load) the C entry points of ``symbols`` and register each with LLVM
    under its symbol, once per process.

    Raises
    ------
    KeyError
        If no imported module registered one of the symbols with :func:`entry`.
    """
    for symbol in symbols:
        if symbol in _LINKED:
            continue
        function, signature, links = _ENTRIES[symbol]
        callback = build(function, signature, links)
        with _LOCK:
            export(symbol, callback.address)
            _LINKED.add(symbol)


@njit(nogil=True)
def alive(*arrays):
    """Nothing, but a use of ``arrays`` that keeps them allocated until here: compiled
    code that hands an array it made to an entry point by address calls this after the
    entry point returns. numba frees a local array after the statement that last names
    it, and ``f(block.ctypes.data)`` names ``block`` only to take its address (the
    unoptimised IR frees it before ``f`` runs; whether the optimiser moves the free later
    is luck). Arguments need none: their caller holds them."""


def entry_function(symbol: str) -> Callable:
    """The plain Python function registered under ``symbol`` with :func:`entry`.

    Raises
    ------
    KeyError
        If no imported module registered the symbol.
    """
    return _ENTRIES[symbol][0]


def entry_links(symbol: str) -> tuple[str, ...]:
    """The symbols of the C entry points that the entry point ``symbol`` calls (linked
    before it).

    Raises
    ------
    KeyError
        If no imported module registered ``symbol``.
    """
    return _ENTRIES[symbol][2]


def entries() -> tuple[str, ...]:
    """The symbols of every C entry point registered so far (linked or not)."""
    return tuple(_ENTRIES)
