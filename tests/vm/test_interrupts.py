"""Ctrl-C during ``invoke``: an interrupt is raised as itself, never turned into a result.

Traps group: a KeyboardInterrupt raised in a kernel's Python handler (a product or a
convolution that compiled code hands to BLAS and the worker threads) reaches the caller
as KeyboardInterrupt, not as a VMError, from the interpreter, the machine's straight-line
tier and the AOT executor alike, and the next call is right. Fuzz group:
a small convolutional network is interrupted at the k-th Python call or return (the places
where a signal's handler runs), for k spread over a whole ``invoke``; every run raises
KeyboardInterrupt or returns the right answer, leaves the thread's CPU affinity as it
was, and the next ``invoke`` is right. ``RELAYVM_INTERRUPT_RUNS`` sets how many k are
tried (0: every one).
"""

from __future__ import annotations

import _thread
import os
import sys

import numpy as np
import pytest

import vm
from compiler import relay
from vm.aot import AotModule
from vm.kernels.runtime import bridge

RNG = np.random.default_rng(13)
TOLERANCE = {"rtol": 1e-4, "atol": 1e-3}
#: Interrupted runs in the suite; ``RELAYVM_INTERRUPT_RUNS=0`` tries every place.
RUNS = int(os.environ.get("RELAYVM_INTERRUPT_RUNS", "24"))


@pytest.fixture(scope="module")
def network():
    """A machine running a 3x3 convolution (Winograd, through BLAS and the threads), a 1x1
    convolution and a strided one; its input and its answer."""
    x = relay.var("x", shape=(1, 32, 28, 28))
    w1 = relay.const(RNG.standard_normal((64, 32, 3, 3)).astype("float32"))
    w2 = relay.const(RNG.standard_normal((32, 64, 1, 1)).astype("float32"))
    w3 = relay.const(RNG.standard_normal((16, 32, 3, 3)).astype("float32"))
    h = relay.nn.relu(relay.nn.conv2d(x, w1, padding=(1, 1)))
    h = relay.nn.relu(relay.nn.conv2d(h, w2))
    h = relay.nn.conv2d(h, w3, strides=(2, 2))
    exe = relay.vm.compile(relay.IRModule.from_expr(relay.Function([x], h)))
    machine = vm.VirtualMachine(exe, vm.cpu())
    data = RNG.standard_normal((1, 32, 28, 28)).astype("float32")
    return machine, data, machine.invoke("main", data)


def _affinity() -> set[int] | None:
    return os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None


# --- traps -------------------------------------------------------------------------------------


@pytest.mark.parametrize("executor", ["vm", "aot"])
def test_an_interrupt_in_a_kernels_handler_raises_keyboard_interrupt(
    network, monkeypatch, executor
) -> None:
    # The machine's second call, this one, runs on its straight-line tier.
    machine, data, want = network
    run = AotModule(machine.executable).run if executor == "aot" else machine.run
    calls = []

    def interrupting(*args) -> None:
        calls.append(1)
        raise KeyboardInterrupt("pressed")

    for code, handler in list(bridge._HANDLERS.items()):
        monkeypatch.setitem(bridge._HANDLERS, code, bridge._Handler(interrupting, handler.arrays))
    with pytest.raises(KeyboardInterrupt, match="pressed"):
        run(data)
    assert calls == [1]
    monkeypatch.undo()
    np.testing.assert_allclose(run(data), want, **TOLERANCE)


# --- fuzz --------------------------------------------------------------------------------------


def _events(machine, data) -> int:
    """The Python calls and returns of one ``invoke`` (C calls count at their return, where
    an interrupt is raised after them)."""
    count = 0

    def counter(frame, event, arg) -> None:
        nonlocal count
        if event != "c_call":
            count += 1

    sys.setprofile(counter)
    try:
        machine.invoke("main", data)
    finally:
        sys.setprofile(None)
    return count


def _interrupted_invoke(machine, data, k: int):
    """``invoke`` with Ctrl-C (SIGINT's own handler) landing at its k-th event; its result,
    or the KeyboardInterrupt."""
    seen = 0

    def hook(frame, event, arg) -> None:
        nonlocal seen
        if event == "c_call":
            return
        seen += 1
        if seen == k:
            sys.setprofile(None)
            _thread.interrupt_main()  # raised here at once, as from the place profiled

    sys.setprofile(hook)
    try:
        return machine.invoke("main", data)
    except KeyboardInterrupt as interrupt:
        return interrupt
    finally:
        sys.setprofile(None)


@pytest.mark.usefixtures("sigint_raises")
def test_an_interrupted_invoke_raises_keyboard_interrupt_or_returns_the_answer(network) -> None:
    machine, data, want = network
    _events(machine, data)  # the first profiled run may import or build something once
    total = _events(machine, data)
    places = range(1, total + 1)
    if 0 < RUNS < total:
        places = sorted({1 + (total - 1) * i // (RUNS - 1) for i in range(RUNS)})
    before = _affinity()
    outcomes = {"interrupted": 0, "answered": 0}
    for k in places:
        got = _interrupted_invoke(machine, data, k)
        if isinstance(got, KeyboardInterrupt):
            outcomes["interrupted"] += 1
        else:
            np.testing.assert_allclose(got, want, **TOLERANCE, err_msg=f"interrupt at {k}")
            outcomes["answered"] += 1
        assert _affinity() == before, f"interrupt at {k} left the thread bound"
        np.testing.assert_allclose(
            machine.invoke("main", data), want, **TOLERANCE, err_msg=f"after interrupt at {k}"
        )
    assert outcomes["interrupted"] > 0, outcomes
