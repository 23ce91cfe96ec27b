"""What an instrument returns before a call: run it or skip it.

Runtime layer (``vm``); standard library only.

``VirtualMachine.set_instrument(fn)`` calls ``fn(func, func_symbol, before_run,
ret_value, *args)`` around every kernel call and every VM function call, as TVM's
Relax VM does. Returning :attr:`VMInstrumentReturnKind.SKIP_RUN` before a call skips
the call and its after-call; ``None`` or :attr:`VMInstrumentReturnKind.NO_OP` runs it.
"""

from __future__ import annotations

import enum


class VMInstrumentReturnKind(enum.IntEnum):
    """The values an instrument may return (TVM's numbering)."""

    NO_OP = 0
    SKIP_RUN = 1
