"""``vm.aot.AotModule`` on executables built with the assembler (no compiler).

Returns: a hand-built kernel program runs and agrees with the VM. Invalid: programs the VM
would accept but whose kernel calls the AOT executor cannot plan statically (a kernel
writing into a constant, a tensor overflowing its storage, an argument of the wrong dtype or
rank, a storage sized at run time, control flow) are refused at construction with an error
naming the instruction, never run.
"""

from __future__ import annotations

import numpy as np
import pytest

import vm
from tests.vm.executable_samples import (
    ADD_DESCRIPTION,
    F32x2,
    control_flow_executable,
    kernel_executable,
)
from vm.aot import AotModule, AotUnsupportedError, kernel_examples
from vm.builder import ExecutableBuilder
from vm.isa import Opcode


def test_a_kernel_program_runs_and_agrees_with_the_vm():
    exe = kernel_executable()
    x, y = np.array([1.0, 2.0], "float32"), np.array([0.5, -4.0], "float32")
    module = AotModule(exe, vm.cpu())
    np.testing.assert_array_equal(module.run(x, y), vm.VirtualMachine(exe).run(x, y))
    assert "k0(t0, t1, t2)" in module.source


def test_kernel_examples_give_one_call_of_each_kernel_of_straight_line_functions():
    # main adds its two float32[2] parameters into a fresh tensor.
    assert kernel_examples(kernel_executable()) == {0: [((2,), "float32")] * 3}
    # Functions with control flow, ADTs or closures give none.
    assert kernel_examples(control_flow_executable()) == {}


def _add_program(emit_body, *, size=8, verify=True):
    b = ExecutableBuilder()
    prim = b.add_primitive("vm_mod_add", ADD_DESCRIPTION)
    f = b.function("main", ["x", "y"], [F32x2, F32x2], F32x2)
    emit_body(b, f, prim, size)
    b.add_function(f)
    return b.build(verify=verify)


def _into_constant(b, f, prim, size):
    out = f.reg()
    f.emit(Opcode.LoadConst, b.add_constant(np.zeros(2, "float32")), out)
    f.emit(Opcode.InvokePacked, prim, (0, 1, out), 1)
    f.emit(Opcode.Ret, out)


def _overflowing(b, f, prim, size):
    n, storage, out = f.reg(), f.reg(), f.reg()
    f.emit(Opcode.LoadConsti, size, n)
    f.emit(Opcode.AllocStorage, n, 64, "float32", storage)
    f.emit(Opcode.AllocTensor, storage, 4, (2,), "float32", out)
    f.emit(Opcode.InvokePacked, prim, (0, 1, out), 1)
    f.emit(Opcode.Ret, out)


def _wrong_dtype(b, f, prim, size):
    n, storage, out = f.reg(), f.reg(), f.reg()
    f.emit(Opcode.LoadConsti, size, n)
    f.emit(Opcode.AllocStorage, n, 64, "float32", storage)
    f.emit(Opcode.AllocTensor, storage, 0, (2,), "int32", out)
    f.emit(Opcode.InvokePacked, prim, (0, 1, out), 1)
    f.emit(Opcode.Ret, out)


def _wrong_rank(b, f, prim, size):
    n, storage, out = f.reg(), f.reg(), f.reg()
    f.emit(Opcode.LoadConsti, size, n)
    f.emit(Opcode.AllocStorage, n, 64, "float32", storage)
    f.emit(Opcode.AllocTensor, storage, 0, (1, 2), "float32", out)
    f.emit(Opcode.InvokePacked, prim, (0, 1, out), 1)
    f.emit(Opcode.Ret, out)


def _sized_at_run_time(b, f, prim, size):
    shape, n, storage, out = f.reg(), f.reg(), f.reg(), f.reg()
    f.emit(Opcode.ShapeOf, 0, shape)
    f.emit(Opcode.LoadConsti, size, n)
    f.emit(Opcode.AllocStorage, n, 64, "float32", storage)
    f.emit(Opcode.AllocTensorReg, storage, 0, shape, "float32", out)
    f.emit(Opcode.InvokePacked, prim, (0, 1, out), 1)
    f.emit(Opcode.Ret, out)


@pytest.mark.parametrize(
    "body, message",
    [
        (_overflowing, "at byte offset 4 does not fit in its 8-byte storage"),
        (_wrong_dtype, "argument 2 of kernel vm_mod_add is int32[2], but the kernel takes"),
        (_wrong_rank, "argument 2 of kernel vm_mod_add is float32[1, 2], but the kernel takes"),
        (_sized_at_run_time, "dynamic shapes (shape_of)"),
    ],
)
def test_kernel_calls_that_cannot_be_planned_are_refused_naming_the_instruction(body, message):
    # The verifier accepts these (the VM checks such kernel arguments as it runs).
    exe = _add_program(body, verify=False)
    vm.verify.verify(exe)
    with pytest.raises(AotUnsupportedError) as info:
        AotModule(exe)
    assert isinstance(info.value, ValueError)
    assert message in str(info.value) and "@main instruction" in str(info.value)


def test_a_kernel_writing_into_a_constant_is_refused_by_the_verifier_before_aot_plans_it():
    exe = _add_program(_into_constant, verify=False)
    allocated = "must hold a tensor this function allocated"
    with pytest.raises(vm.InvalidExecutableError, match=allocated):
        vm.verify.verify(exe)
    with pytest.raises(vm.InvalidExecutableError, match=allocated):
        AotModule(exe)


@pytest.mark.parametrize(
    "func_name, construct",
    [
        ("pick", "@pick instruction 1 (If) uses control flow"),
        ("head", "parameter 'l' of @head uses type ADT List"),
        ("main", "@main instruction 1 (AllocClosure) uses closures"),
    ],
)
def test_control_flow_adts_and_closures_are_refused_suggesting_the_vm(func_name, construct):
    with pytest.raises(AotUnsupportedError, match=r"use vm\.VirtualMachine") as info:
        AotModule(control_flow_executable(), func_name=func_name)
    assert construct in str(info.value)


def test_bad_constructor_arguments():
    with pytest.raises(TypeError, match=r"needs a vm\.Executable or an AotModule"):
        AotModule(b"code")
    with pytest.raises(KeyError, match="unknown function 'nope'"):
        AotModule(kernel_executable(), func_name="nope")
    with pytest.raises(TypeError):
        AotModule(kernel_executable(), device="gpu")
