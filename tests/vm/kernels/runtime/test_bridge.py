"""Tests of vm.kernels.runtime.bridge, the calls from compiled kernels into Python.

Returns group: handler codes that compiled code may carry between processes. Invalid group:
two handlers of one name. Traps group: an interrupt (a signal handler's exception) raised in
a handler, or before the callback's first instruction (where ctypes would swallow it and
return an undefined status), makes compiled code raise ``Interrupted``, never return, and
:func:`bridge.interruption` gives the exception that interrupted it.
"""

from __future__ import annotations

import ctypes
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numba import njit

from vm.kernels.runtime import bridge

ROOT = Path(__file__).resolve().parents[4]

_CODES = """
import sys
for name in sys.argv[1:]:
    __import__(name)
from vm.kernels.runtime import convolution, pool_loops
print(convolution._CONV_PACKED, convolution._CONV_IMAGE, pool_loops._MAX_POOL, pool_loops._AVG_POOL)
"""


def _codes(*first: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _CODES, *first], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_handler_codes_do_not_depend_on_which_module_was_imported_first() -> None:
    # Kernels cached on disk carry the codes as constants.
    assert _codes("vm.kernels.runtime.pool_loops") == _codes("vm.kernels.runtime.convolution")


def test_a_second_handler_of_the_same_name_is_invalid() -> None:
    name = "tests.bridge.twice"
    bridge.register(name, lambda: None, 0)
    with pytest.raises(ValueError, match=r"'tests\.bridge\.twice' clashes with"):
        bridge.register(name, lambda: None, 0)


# --- traps: interrupts -----------------------------------------------------------------------


def _caller(code: int):
    """Compiled code calling handler ``code`` with one array and its size."""

    @njit
    def call(values):
        block = np.empty(16, np.int64)
        at = bridge.put(block, 1, values)
        block[at] = values.size
        bridge.invoke(code, block, at + 1)

    return call


def test_an_interrupt_in_a_handler_raises_interrupted_and_keeps_the_keyboard_interrupt() -> None:
    interrupt = KeyboardInterrupt("pressed in the handler")

    def interrupted(values, count) -> None:
        values[:] = 1.0
        raise interrupt

    call = _caller(bridge.register("tests.bridge.interrupted", interrupted, 1))
    with pytest.raises(bridge.Interrupted, match="interrupted in a kernel's call"):
        call(np.zeros(3, np.float32))
    assert bridge.interruption() is interrupt
    # Taken: a later stand-in without a kept exception still means an interrupt.
    assert type(bridge.interruption()) is KeyboardInterrupt


class _Signalled(Exception):
    pass


_LIBC = ctypes.CDLL(None)
_raise_signal = getattr(_LIBC, "raise")
_raise_signal.argtypes = [ctypes.c_int]
_raise_signal.restype = ctypes.c_int


@pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="no SIGUSR1 here")
def test_a_signal_before_the_callbacks_first_instruction_is_never_a_result(capfd) -> None:
    # The signal arrives while compiled code runs (without Python), so its handler runs at
    # the callback's first instruction, before any try of it: ctypes drops what escapes.
    ran = []
    call_code = bridge.register("tests.bridge.never_runs", lambda values, count: ran.append(1), 1)
    signum = int(signal.SIGUSR1)

    @njit
    def signal_then_call(values):
        _raise_signal(signum)
        block = np.empty(16, np.int64)
        at = bridge.put(block, 1, values)
        block[at] = values.size
        bridge.invoke(call_code, block, at + 1)

    def handler(number, frame) -> None:
        raise _Signalled(f"signal {number}")

    signal_then_call.compile("(float32[::1],)")
    previous = signal.signal(signal.SIGUSR1, handler)
    try:
        with pytest.raises(bridge.Interrupted):
            signal_then_call(np.zeros(3, np.float32))
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert ran == []
    kept = bridge.interruption()
    assert isinstance(kept, _Signalled) and str(kept) == f"signal {signum}"
    assert "Exception ignored" not in capfd.readouterr().err
