"""Waiting for another thread without the GIL and without sleeping: a compiled poll loop.

Runtime layer (``vm.kernels``); imports numba.

Waking a sleeping thread costs tens of microseconds, more in a virtual machine whose idle
CPU is halted; a product split between threads is only a millisecond or two, so
:mod:`vm.kernels.threads` lets its workers (and a caller waiting for the last chunk)
poll a flag for a while before they block. The poll runs in compiled code that holds no
GIL, and reads the flag with an atomic acquire load so the compiler cannot hoist it out
of the loop.
"""

from __future__ import annotations

from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

#: Polls before a waiter gives up and blocks: about 2 ms at ~0.35 ns a poll, longer than
#: the serial stretches between two products of a network, so workers stay awake.
POLLS = 6_000_000


@intrinsic
def _load_acquire(typingctx, array, index):
    """``array[index]`` of an int64 array, read with an atomic acquire load."""
    if not isinstance(array, types.Array) or array.dtype != types.int64:
        return None
    if not isinstance(index, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        array_type = signature.args[0]
        handle = context.make_array(array_type)(context, builder, args[0])
        pointer = cgutils.get_item_pointer(
            context, builder, array_type, handle, [args[1]], wraparound=False
        )
        return builder.load_atomic(pointer, ordering="acquire", align=8)

    return types.int64(array, index), codegen


@njit(nogil=True, cache=True)
def wait_for_change(flags, seen, polls):
    """Poll ``flags[0]`` until it differs from ``seen`` (True) or ``polls`` reads pass (False)."""
    for _ in range(polls):  # noqa: SIM110 (numba compiles no generator expressions)
        if _load_acquire(flags, 0) != seen:
            return True
    return False
