"""Kernel calls: results, caller-owned outputs, and kernel failures as VMErrors.

Every program here uses one kernel (``add`` on float32 matrices), compiled once.
"""

from __future__ import annotations

import numpy as np
import pytest

import vm
from tests.vm.interpreter_programs import add_description, kernel_programs
from vm.builder import ExecutableBuilder
from vm.decoded import Kind
from vm.isa import Opcode as O


@pytest.fixture(scope="module")
def machine():
    return vm.VirtualMachine(kernel_programs())


@pytest.fixture
def x():
    return np.arange(100, dtype=np.float32).reshape(10, 10)


# ---- returns ----------------------------------------------------------------------------------


def test_a_kernel_call_computes_its_output(machine, x):
    np.testing.assert_array_equal(machine.invoke("main", x), x + x)


def test_a_function_invoking_another_runs_both_kernels(machine, x):
    np.testing.assert_array_equal(machine.invoke("twice", x), 4 * x)


def test_results_are_never_overwritten_by_later_calls(machine, x):
    first = machine.invoke("main", x)
    second = machine.invoke("main", x + 1)
    np.testing.assert_array_equal(first, x + x)
    np.testing.assert_array_equal(second, 2 * (x + 1))
    assert not np.shares_memory(first, second)


def test_the_inputs_are_never_written(machine, x):
    before = x.copy()
    machine.invoke("twice", x)
    np.testing.assert_array_equal(x, before)


def test_a_tuple_result_holds_a_new_tensor_and_the_caller_s_own_array(machine, x):
    total, same = machine.invoke("pair", x)
    np.testing.assert_array_equal(total, x + x)
    # Returning an argument returns the caller's array (viewed as an NDArray), not a copy.
    assert type(same) is vm.NDArray and same.base is x


def test_read_only_inputs_are_accepted_and_copied_if_returned(machine, x):
    x.flags.writeable = False
    total, same = machine.invoke("pair", x)
    np.testing.assert_array_equal(total, x + x)
    assert same.flags.writeable and not np.shares_memory(same, x)


def _code(machine, name):
    return machine._fast.codes[machine.executable.globals.index(name)]


def test_an_entry_only_function_fuses_allocation_and_kernel(machine):
    # main's parameter is only ever set through the checked API, so its rank is proven.
    assert any(ins[0] == Kind.KERNEL_RUN for ins in _code(machine, "main"))


def test_a_parameter_every_caller_passes_a_proven_tensor_is_proven(machine):
    # double is invoked only by twice, with twice's own proven parameter.
    assert any(ins[0] == Kind.KERNEL_RUN for ins in _code(machine, "double"))


@pytest.mark.parametrize("callee", ["strict", "captured"])
def test_a_parameter_reached_by_unproven_values_is_checked_at_the_kernel(machine, callee):
    # strict gets relay's parameter of type any; captured is called through a closure.
    kinds = [ins[0] for ins in _code(machine, callee)]
    assert Kind.KERNEL_RUN not in kinds and Kind.CALL in kinds


def test_back_to_back_kernel_pairs_run_in_one_inner_loop(machine, x):
    chain = machine._fast.codes[machine.executable.globals.index("chain")]
    assert chain[2][0] == Kind.KERNEL_RUN and len(chain[2][1]) == 3
    y = np.full((10, 10), 0.5, np.float32)
    result = machine.invoke("chain", x, y)
    np.testing.assert_array_equal(result, 3 * x + y)
    # The result is the last of three tensors carved from one 1200-byte storage (itself a
    # view of a slightly bigger buffer, which lets it start on a cache line).
    chain, array = [], result
    while isinstance(array.base, np.ndarray):
        array = array.base
        chain.append(array)
    (storage,) = [a for a in chain if a.dtype == np.uint8 and a.nbytes == 1200]
    assert result.__array_interface__["data"][0] - storage.ctypes.data == 800


def test_kernel_runs_give_the_same_results_with_an_instrument_or_profile(machine, x):
    y = np.full((10, 10), 0.5, np.float32)
    machine.set_instrument(lambda *args: None)
    try:
        np.testing.assert_array_equal(machine.invoke("chain", x, y), 3 * x + y)
    finally:
        machine.set_instrument(None)
    report = machine.profile("chain", x, y)
    assert sum(c["Count"] for c in report.calls if c["Name"] == "VM::AllocTensor") == 3


def test_an_error_inside_a_run_of_kernel_pairs_names_the_failing_pair(machine, x):
    # The second pair adds y; a 5x5 y fails there, at the kernel call of pc 5.
    with pytest.raises(vm.VMError, match=r"in function chain at pc 5 \(invoke_packed"):
        machine.invoke("chain", x, np.ones((5, 5), np.float32))


def test_a_count_of_executed_instructions(machine, x):
    # load_consti, alloc_storage, alloc_tensor, invoke_packed, ret
    assert machine.count_instructions("main", x) == 5
    assert machine.count_instructions("twice", x) == 1 + 5 + 5


# ---- traps ------------------------------------------------------------------------------------


def test_a_kernel_exception_becomes_a_vmerror_naming_kernel_function_and_pc(machine, x):
    with pytest.raises(vm.VMError) as info:
        machine.invoke("mismatch", x, np.ones((5, 5), np.float32))
    message = str(info.value)
    assert "in function mismatch at pc 3 (invoke_packed" in message
    assert "kernel vm_mod_fused_add raised ValueError" in message
    assert (info.value.function, info.value.pc) == ("mismatch", 3)


def test_a_wrong_rank_never_reaches_a_kernel(machine):
    with pytest.raises(
        vm.VMError,
        match=r"argument 0 \(\$0\) of kernel vm_mod_fused_add is float32\[3\], "
        r"but the kernel takes a tensor of rank 2",
    ):
        machine.invoke("loose", np.ones(3, np.float32))


@pytest.mark.parametrize("caller", ["relay", "via_closure"])
def test_a_wrong_rank_passed_on_by_a_caller_never_reaches_a_kernel(machine, caller):
    with pytest.raises(
        vm.VMError, match=r"is float32\[3\], but the kernel takes a tensor of rank 2"
    ):
        machine.invoke(caller, np.ones(3, np.float32))
    np.testing.assert_array_equal(machine.invoke(caller, np.ones((10, 10), np.float32)), 2)


def test_a_wrong_dtype_is_explained_without_numba_wording(machine, x):
    with pytest.raises(vm.VMError) as info:
        machine.invoke("loose", x.astype(np.float64))
    assert "is a tensor float64[10, 10], but the kernel takes a float32 tensor of rank 2" in str(
        info.value
    )
    assert "unbox" not in str(info.value)


def test_a_tuple_passed_to_a_kernel_is_a_vmerror(machine, x):
    with pytest.raises(
        vm.VMError, match="is a tuple of 2 fields, but the kernel takes a float32 tensor"
    ):
        machine.invoke("loose", (x, x))


def test_a_kernel_never_writes_into_a_constant(machine, x):
    with pytest.raises(
        vm.VMError, match=r"output 0 \(\$1\) of kernel vm_mod_fused_add is read-only memory"
    ):
        machine.invoke("into_const", x)
    assert not machine.executable.constant_values[0].any()


def test_the_machine_keeps_working_after_kernel_errors(machine, x):
    for _ in range(2):
        with pytest.raises(vm.VMError):
            machine.invoke("mismatch", x, np.ones((5, 5), np.float32))
        np.testing.assert_array_equal(machine.invoke("twice", x), 4 * x)


# ---- float16 (a second kernel: add on float16 vectors) ---------------------------------------


@pytest.fixture(scope="module")
def half():
    b = ExecutableBuilder()
    prim = b.add_primitive("vm_mod_fused_add_f16", add_description("float16", 1))
    f = b.function("loose", ["x"], [("any",)], ("tensor", (4,), "float16"))
    size, st, out = f.reg(), f.reg(), f.reg()
    f.emit(O.LoadConsti, 8, size)
    f.emit(O.AllocStorage, size, 64, "float16", st)
    f.emit(O.AllocTensor, st, 0, (4,), "float16", out)
    f.emit(O.InvokePacked, prim, [0, 0, out], 1)
    f.emit(O.Ret, out)
    b.add_function(f)
    return vm.VirtualMachine(b.build())


def test_float16_tensors_go_through_kernels(half):
    x = np.array([0.5, 1.5, -2.0, 1000.0], np.float16)
    result = half.invoke("loose", x)
    assert result.dtype == np.float16
    np.testing.assert_array_equal(result, x + x)


def test_a_two_byte_array_is_not_taken_for_float16(half):
    with pytest.raises(vm.VMError, match=r"is int16\[4\], but the kernel takes a float16 tensor"):
        half.invoke("loose", np.ones(4, np.int16))
