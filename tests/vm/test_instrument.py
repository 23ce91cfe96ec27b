"""set_instrument: hooks around kernel calls and VM function calls, and SKIP_RUN."""

from __future__ import annotations

import numpy as np
import pytest

import vm
from tests.vm.interpreter_programs import closure_programs, kernel_programs, nat, nat_programs
from vm.instrument import VMInstrumentReturnKind


class Recorder:
    def __init__(self, answer=None):
        self.events = []
        self.answer = answer

    def __call__(self, func, symbol, before, ret, *args):
        self.events.append((symbol, before, ret, args, func))
        return self.answer(symbol, before) if callable(self.answer) else self.answer


@pytest.fixture(scope="module")
def exe():
    return kernel_programs()


@pytest.fixture
def x():
    return np.arange(100, dtype=np.float32).reshape(10, 10)


def test_return_kinds_have_tvm_s_values():
    assert VMInstrumentReturnKind.NO_OP == 0 and VMInstrumentReturnKind.SKIP_RUN == 1
    assert vm.VMInstrumentReturnKind is VMInstrumentReturnKind


def test_kernel_calls_are_seen_before_and_after_with_their_arrays(exe, x):
    machine = vm.VirtualMachine(exe)
    hook = Recorder()
    machine.set_instrument(hook)
    result = machine.invoke("main", x)
    np.testing.assert_array_equal(result, x + x)
    (before, after) = hook.events
    assert before[:3] == ("vm_mod_fused_add", True, None)
    assert after[:3] == ("vm_mod_fused_add", False, None)
    a, b, out = after[3]
    assert a is x and b is x and np.shares_memory(out, result)
    assert isinstance(before[4], vm.kernels.CompiledKernel)


def test_function_calls_are_seen_around_their_kernels(exe, x):
    machine = vm.VirtualMachine(exe)
    hook = Recorder()
    machine.set_instrument(hook)
    machine.invoke("twice", x)
    assert [(e[0], e[1]) for e in hook.events] == [
        ("double", True),
        ("vm_mod_fused_add", True),
        ("vm_mod_fused_add", False),
        ("double", False),
        ("vm_mod_fused_add", True),
        ("vm_mod_fused_add", False),
    ]
    double_after = hook.events[3]
    np.testing.assert_array_equal(double_after[2], x + x)  # the function's result
    assert double_after[3][0] is x and double_after[4].name == "double"


def test_closure_calls_see_captured_values_then_arguments():
    machine = vm.VirtualMachine(closure_programs())
    hook = Recorder()
    machine.set_instrument(hook)
    machine.invoke("call", 1, 2)
    (before, after) = hook.events
    assert before[0] == "pair" and [int(v) for v in before[3]] == [1, 2]
    assert [int(v) for v in after[2]] == [1, 2]


def test_skip_run_before_a_kernel_skips_it_and_its_after_call(exe, x):
    machine = vm.VirtualMachine(exe)
    hook = Recorder(answer=VMInstrumentReturnKind.SKIP_RUN)
    machine.set_instrument(hook)
    machine.invoke("main", x)
    assert [(e[0], e[1]) for e in hook.events] == [("vm_mod_fused_add", True)]


def test_skip_run_before_a_function_call_gives_none_and_no_after_call():
    machine = vm.VirtualMachine(nat_programs())
    hook = Recorder(answer=lambda symbol, before: VMInstrumentReturnKind.SKIP_RUN)
    machine.set_instrument(hook)
    assert machine.invoke("main", nat(3)) is None
    assert [(e[0], e[1]) for e in hook.events] == [("copy", True)]


@pytest.mark.parametrize("answer", [None, VMInstrumentReturnKind.NO_OP, 0])
def test_none_or_no_op_runs_the_call(exe, x, answer):
    machine = vm.VirtualMachine(exe)
    hook = Recorder(answer=answer)
    machine.set_instrument(hook)
    np.testing.assert_array_equal(machine.invoke("twice", x), 4 * x)
    assert len(hook.events) == 6


def test_removing_the_instrument_restores_the_fast_program(exe, x):
    machine = vm.VirtualMachine(exe)
    hook = Recorder()
    machine.set_instrument(hook)
    machine.set_instrument(None)
    machine.invoke("twice", x)
    assert hook.events == [] and machine._program is machine._fast


def test_an_instrument_that_raises_becomes_a_vmerror_and_the_vm_recovers(exe, x):
    machine = vm.VirtualMachine(exe)

    def broken(func, symbol, before, ret, *args):
        raise KeyError("oops")

    machine.set_instrument(broken)
    with pytest.raises(
        vm.VMError, match=r"function main at pc 3 .*the instrument raised KeyError"
    ) as info:
        machine.invoke("main", x)
    assert isinstance(info.value.__cause__, KeyError)
    machine.set_instrument(None)
    np.testing.assert_array_equal(machine.invoke("main", x), x + x)


def test_deep_recursion_works_with_an_instrument():
    machine = vm.VirtualMachine(nat_programs())
    calls = []
    machine.set_instrument(lambda f, s, before, r, *a: calls.append(before))
    machine.invoke("main", nat(20_000))
    assert calls.count(True) == calls.count(False) == 20_001


def test_an_instrument_must_be_callable(exe):
    with pytest.raises(TypeError, match="an instrument must be callable or None"):
        vm.VirtualMachine(exe).set_instrument(3)
