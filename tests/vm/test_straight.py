"""The virtual machine's straight-line tier (``vm.straight``): from a function's second call
the machine runs it as one generated function.

Returns: the tier gives the interpreter's bits (intermediates in its arena, tuples, inputs
and constants handed back, calls of other functions), fresh caller-owned results on every
call, and the machine's stateful API on top of it. Traps: after the tier is built, a wrong
argument or a failing kernel raises the interpreter's error, naming what was wrong, and the
machine's next call is right. Instruments and threads: with an instrument set every call
goes through the interpreter and its hooks; another thread's calls do not share the owner's
arena.
"""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

import vm
from compiler import relay

RNG = np.random.default_rng(5)
SHAPE = (4, 6)


def _machine(body, params=1, opt_level=2):
    xs = [relay.var(f"x{i}", shape=SHAPE) for i in range(params)]
    mod = relay.IRModule.from_expr(relay.Function(xs, body(*xs)))
    with relay.transform.PassContext(opt_level=opt_level):
        exe = relay.vm.compile(mod)
    return vm.VirtualMachine(exe, vm.cpu()), exe


def _interpreted(exe, *args):
    """The interpreter's answer: an instrument keeps every call in the interpreter."""
    machine = vm.VirtualMachine(exe, vm.cpu())
    machine.set_instrument(lambda *a: None)
    return machine.invoke("main", *args)


def _data(n=1):
    return [RNG.standard_normal(SHAPE).astype("float32") for _ in range(n)]


def _tiered(machine, name="main"):
    return machine._tier_invoke[machine._index[name]] is not None


def _warm(machine, *args):
    """Two calls: the first claims the machine's state, the second builds the tier."""
    for _ in range(2):
        machine.invoke("main", *args)
    assert _tiered(machine)


PROGRAMS = {
    # exp is not fused with the product's add at opt_level 0: an intermediate in the arena.
    "intermediates": (lambda x: relay.exp(relay.add(x, x)) * x, 1, 0),
    "tuple": (lambda x, y: relay.Tuple([x + y, relay.Tuple([x * y, x])]), 2, 2),
    "input": (lambda x: x, 1, 2),
    "constant": (lambda x: relay.Tuple([x, relay.const(np.ones(SHAPE, "float32"))]), 1, 2),
    "reshape": (lambda x: relay.reshape(x + x, (6, 4)), 1, 2),
}


def _leaves(value):
    return [value] if not isinstance(value, tuple) else [y for v in value for y in _leaves(v)]


# ---- returns --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_tier_gives_the_interpreters_bits(name):
    body, params, opt_level = PROGRAMS[name]
    machine, exe = _machine(body, params, opt_level)
    for _ in range(4):
        args = _data(params)
        got = machine.invoke("main", *args)
        want = _interpreted(exe, *args)
        assert type(got) is type(want) and len(_leaves(got)) == len(_leaves(want))
        for g, w in zip(_leaves(got), _leaves(want)):
            assert type(g) is vm.NDArray and g.flags.writeable
            np.testing.assert_array_equal(g, w)
    assert _tiered(machine)


def test_results_are_fresh_on_every_call():
    machine, _ = _machine(PROGRAMS["intermediates"][0], 1, 0)
    (x,) = _data()
    results = [machine.invoke("main", x) for _ in range(3)]
    assert _tiered(machine)
    results[-1][...] = 0
    np.testing.assert_allclose(results[0], np.exp(x + x) * x, rtol=1e-6)
    np.testing.assert_array_equal(results[0], results[1])
    assert results[0] is not results[1]


def test_a_returned_input_is_handed_back_as_the_interpreter_does():
    machine, _ = _machine(lambda x: x)
    x = vm.nd.array(_data()[0])
    for _ in range(3):
        assert machine.invoke("main", x) is x  # a writable tensor of the machine's type
    frozen = _data()[0]
    frozen.flags.writeable = False
    got = machine.invoke("main", frozen)
    assert got is not frozen and got.flags.writeable


def test_a_function_calling_another_runs_inlined():
    mod = relay.IRModule()
    x = relay.var("x", shape=SHAPE)
    double = relay.GlobalVar("double")
    mod[double] = relay.Function([x], x + x)
    y = relay.var("y", shape=SHAPE)
    mod["main"] = relay.Function([y], relay.Call(double, [y]) * y)
    machine = vm.VirtualMachine(relay.vm.compile(mod), vm.cpu())
    for _ in range(3):
        (data,) = _data()
        np.testing.assert_allclose(machine.invoke("main", data), (data + data) * data)
    assert _tiered(machine)


def test_invoke_records_the_inputs_and_stateful_calls_use_the_tier():
    machine, _ = _machine(lambda x, y: x * y, 2)
    a, b = _data(2)
    _warm(machine, a, b)
    c, d = _data(2)
    machine.invoke("main", c, d)
    np.testing.assert_array_equal(machine.invoke("main"), c * d)
    machine.invoke_stateful("main")
    np.testing.assert_array_equal(machine.get_outputs()[0], c * d)
    timer = machine.time_evaluator("main", vm.cpu(), number=2)
    assert len(timer(a, b).results) == 1


def test_keyword_arguments_and_set_inputs_run_on_the_tier_too():
    machine, _ = _machine(lambda x0, x1: x0 - x1, 2)
    a, b = _data(2)
    _warm(machine, a, b)
    calls = []
    tier = machine._tier_call[0]
    machine._tier_call[0] = lambda *values: calls.append(1) or tier(*values)
    np.testing.assert_array_equal(machine.invoke("main", x1=a, x0=b), b - a)
    np.testing.assert_array_equal(machine.invoke("main"), b - a)
    assert len(calls) == 2


def test_arguments_that_need_converting_are_converted():
    machine, _ = _machine(lambda x: x + x)
    (x,) = _data()
    _warm(machine, x)
    strided = np.asfortranarray(x)
    np.testing.assert_array_equal(machine.invoke("main", strided), x + x)
    np.testing.assert_array_equal(machine.invoke("main"), x + x)  # the converted copy
    assert machine._inputs[0][0].flags.c_contiguous


def test_a_program_with_control_flow_stays_in_the_interpreter():
    x = relay.var("x", shape=())
    body = relay.If(relay.greater(x, relay.const(0.0)), x, relay.negative(x))
    machine = vm.VirtualMachine(relay.vm.compile(relay.Function([x], body)), vm.cpu())
    for value in (2.0, -3.0, 4.0):
        assert float(machine.invoke("main", np.float32(value))) == abs(value)
    assert not _tiered(machine)
    assert not machine._tier_pending  # refused once, never traced again


# ---- traps ----------------------------------------------------------------------------------


def _error(call):
    with pytest.raises(Exception) as info:
        call()
    return type(info.value), str(info.value)


def test_a_wrong_argument_raises_the_interpreters_error():
    machine, exe = _machine(lambda x: x + x)
    (x,) = _data()
    _warm(machine, x)
    reference = vm.VirtualMachine(exe, vm.cpu())
    for args in [(x[:2],), (x.astype("int32"),), (x, x), ("text",)]:
        got = _error(lambda: machine.invoke("main", *args))  # noqa: B023
        assert got == _error(lambda: reference.invoke("main", *args))  # noqa: B023
        assert issubclass(got[0], (TypeError, ValueError))
    np.testing.assert_array_equal(machine.invoke("main", x), x + x)


def test_a_failing_kernel_raises_the_interpreters_error_naming_the_instruction():
    data = relay.var("data", shape=(4,))
    indices = relay.var("indices", shape=(2,), dtype="int64")
    mod = relay.IRModule.from_expr(
        relay.Function([data, indices], relay.take(data, indices, mode="fast"))
    )
    exe = relay.vm.compile(mod)
    machine = vm.VirtualMachine(exe, vm.cpu())
    values = np.arange(4, dtype="float32")
    _warm(machine, values, np.array([0, 3]))
    bad = np.array([0, 99])
    got = _error(lambda: machine.invoke("main", values, bad))
    reference = vm.VirtualMachine(exe, vm.cpu())
    want = _error(lambda: reference.invoke("main", values, bad))
    assert got == want and issubclass(got[0], vm.VMError)
    np.testing.assert_array_equal(machine.invoke("main", values, np.array([3, 1])), [3.0, 1.0])


# ---- instruments and threads ----------------------------------------------------------------


def test_an_instrument_sees_every_call_and_removing_it_restores_the_tier():
    machine, _ = _machine(lambda x: x + x)
    (x,) = _data()
    _warm(machine, x)
    seen = []
    machine.set_instrument(lambda func, name, before, *rest: seen.append((name, before)))
    machine.invoke("main", x)
    machine.invoke_stateful("main")
    assert len(seen) == 4 and not _tiered(machine)
    machine.set_instrument(None)
    machine.invoke("main", x)
    assert len(seen) == 4 and _tiered(machine)


def test_another_thread_does_not_share_the_owners_arena():
    # Convolutions hand their products to Python (vm.kernels.runtime.bridge), where the
    # threads switch; intermediates shared between the threads would mix their answers.
    x = relay.var("x", shape=(1, 16, 14, 14))
    w1 = relay.const(RNG.standard_normal((32, 16, 3, 3)).astype("float32"))
    w2 = relay.const(RNG.standard_normal((16, 32, 3, 3)).astype("float32"))
    h = relay.nn.conv2d(relay.nn.relu(relay.nn.conv2d(x, w1, padding=(1, 1))), w2)
    exe = relay.vm.compile(relay.IRModule.from_expr(relay.Function([x], h)))
    machine = vm.VirtualMachine(exe, vm.cpu())
    inputs = [RNG.standard_normal((1, 16, 14, 14)).astype("float32") for _ in range(2)]
    _warm(machine, inputs[0])
    failures = []

    def work(x, rounds=100):
        want = _interpreted(exe, x)
        for _ in range(rounds):
            if not np.array_equal(machine.invoke("main", x), want):
                failures.append(x)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        other = threading.Thread(target=work, args=(inputs[1],))
        other.start()
        work(inputs[0])
        other.join()
    finally:
        sys.setswitchinterval(interval)
    assert not failures
