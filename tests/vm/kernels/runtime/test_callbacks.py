"""C callbacks compiled on first need (``vm.kernels.runtime.callbacks``).

Returns group: a callback is compiled once per process, the same object for every caller,
a C entry point's symbol links to it, an entry point that calls another by symbol
links it first, and an array handed to an entry point by address and kept with ``alive``
is still allocated when the entry point reads it. Traps group: linking a symbol nobody
registered raises KeyError.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from numba import cfunc, njit, types

from vm.kernels.runtime import atomics, callbacks

_SIGNATURE = types.int64(types.int64)


@callbacks.entry("relayvm_test_twice", _SIGNATURE)
def _twice(value):
    return 2 * value


_twice_symbol = types.ExternalFunction("relayvm_test_twice", _SIGNATURE)


def test_a_callback_is_compiled_once_and_its_symbol_links_to_it() -> None:
    first = callbacks.build(_twice, _SIGNATURE)
    assert callbacks.build(_twice, _SIGNATURE) is first
    assert ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(first.address)(21) == 42
    assert "relayvm_test_twice" in callbacks.entries()
    callbacks.link("relayvm_test_twice")

    @njit
    def call(value):
        return _twice_symbol(value)

    assert call(5) == 10


@callbacks.entry("relayvm_test_inner", _SIGNATURE)
def _inner(value):
    return value + 1


_inner_symbol = types.ExternalFunction("relayvm_test_inner", _SIGNATURE)


@callbacks.entry("relayvm_test_outer", _SIGNATURE, links=("relayvm_test_inner",))
def _outer(value):
    return 3 * _inner_symbol(value)


def test_an_entry_point_links_the_entry_points_it_calls_first() -> None:
    # Linking only the outer symbol must compile the inner one first: code that calls an
    # unexported symbol fails to link.
    callbacks.link("relayvm_test_outer")
    assert any(name.endswith("test_callbacks._inner") for name in callbacks.compiled())
    outer = callbacks.build(_outer, _SIGNATURE)
    assert ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(outer.address)(4) == 15


@cfunc(types.int64(types.int64))
def _read_after_allocating(address):
    # Allocations of the block's size first: were the block freed, one would reuse it.
    seen = 0
    for _ in range(8):
        other = np.empty(16, np.int64)
        other[:] = -1
        seen += other[0]
    return atomics.load_word(address, 3) + 0 * seen


_read = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(_read_after_allocating.address)


# Without optimisation, numba frees the block after `block.ctypes.data` (its last mention)
# and before the call; without `alive`, the same function read -1 here (glibc).
@njit(_dbg_optnone=True)
def _hand_over_kept():
    block = np.empty(16, np.int64)
    block[:] = 7
    value = _read(block.ctypes.data)
    callbacks.alive(block)
    return value


def test_an_array_kept_alive_is_allocated_when_the_entry_point_reads_it() -> None:
    assert _hand_over_kept() == 7


def test_linking_a_symbol_nobody_registered_raises() -> None:
    with pytest.raises(KeyError, match="relayvm_nobody"):
        callbacks.link("relayvm_nobody")
