"""Waiting for another thread without the GIL and without sleeping: a compiled poll loop.

Runtime layer, compiled runtime support (``vm.kernels.runtime``); imports numba and
:mod:`vm.kernels.runtime.atomics`.

Waking a sleeping thread costs tens of microseconds, more in a virtual machine whose idle
CPU is halted; a product split between threads is only a millisecond or two, so
:mod:`vm.kernels.runtime.threads` lets its workers (and a caller waiting for the last chunk)
poll a flag for a while before they block. The poll runs in compiled code that holds no
GIL, and reads the flag with an atomic load (:mod:`vm.kernels.runtime.atomics`) so the compiler
cannot hoist it out of the loop.
"""

from __future__ import annotations

from numba import njit

from vm.kernels.runtime import atomics

#: Polls before a waiter gives up and blocks: about 2 ms at ~0.35 ns a poll, longer than
#: the serial stretches between two products of a network, so workers stay awake.
POLLS = 6_000_000


@njit(nogil=True, cache=True)
def wait_for_change(flags, seen, polls):
    """Poll ``flags[0]`` until it differs from ``seen`` (True) or ``polls`` reads pass (False)."""
    address = flags.ctypes.data
    for _ in range(polls):  # noqa: SIM110 (numba compiles no generator expressions)
        if atomics.load(address) != seen:
            return True
    return False
