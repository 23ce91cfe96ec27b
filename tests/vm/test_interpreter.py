"""The interpreter loop: what programs return, how they trap, and that traps leave the VM usable.

Programs come from tests/vm/interpreter_programs.py (built with vm.builder, no kernels here;
kernel programs are in test_interpreter_kernels.py).
"""

from __future__ import annotations

import numpy as np
import pytest

import vm
from tests.vm.interpreter_programs import (
    CONS,
    STEP_BYTES,
    SUCC,
    ZERO,
    closure_programs,
    loop_programs,
    memory_programs,
    nat,
    nat_programs,
    nat_value,
    scalar_programs,
    traced_peak,
)
from vm.decode import DECODERS, Decoder
from vm.decoded import Kind
from vm.groups import _even_runs
from vm.interpreter import export
from vm.isa import OPCODES


@pytest.fixture(scope="module")
def scalars():
    return vm.VirtualMachine(scalar_programs())


@pytest.fixture(scope="module")
def nats():
    return vm.VirtualMachine(nat_programs())


@pytest.fixture(scope="module")
def memory():
    return vm.VirtualMachine(memory_programs())


@pytest.fixture(scope="module")
def closures():
    return vm.VirtualMachine(closure_programs())


def test_every_opcode_of_the_isa_table_has_a_decoder():
    assert set(DECODERS) == set(OPCODES)


# ---- returns ----------------------------------------------------------------------------------


def test_load_consti_is_an_int64_scalar_and_get_tag_an_int32_scalar(scalars):
    consti, tuple_tag, zero_tag = scalars.invoke("consts")
    assert consti.dtype == np.int64 and consti.shape == () and consti == 7
    assert tuple_tag.dtype == np.int32 and tuple_tag.shape == () and tuple_tag == 0
    assert zero_tag.dtype == np.int32 and zero_tag == ZERO


def test_results_of_shared_scalars_are_writable_copies(scalars):
    first = scalars.invoke("consts")[0]
    assert first.flags.writeable
    first[...] = 100
    assert scalars.invoke("consts")[0] == 7


@pytest.mark.parametrize(("a", "b", "expected"), [(3, 3, 1), (3, 4, 0), (-1, -1, 1)])
def test_if_compares_two_registers(scalars, a, b, expected):
    assert scalars.invoke("pick", a, b) == expected


@pytest.mark.parametrize(("a", "expected"), [(5, 1), (4, 0)])
def test_if_against_a_load_consti_register(scalars, a, expected):
    assert scalars.invoke("is_five", a) == expected


def test_tuples_come_back_as_python_tuples(scalars):
    result = scalars.invoke("swap", 1, 2)
    assert type(result) is tuple and [int(v) for v in result] == [2, 1]


def test_get_field_projects_a_tuple_argument(scalars):
    assert scalars.invoke("second", (np.int64(1), np.int64(2))) == 2


def test_goto_jumps_over_instructions(scalars):
    assert scalars.invoke("skip") == 2


@pytest.mark.parametrize(("n", "expected"), [(0, 1), (3, 0)])
def test_a_jump_into_the_middle_of_a_fused_tag_test_runs_the_rest(scalars, n, expected):
    assert scalars.invoke("middle", nat(n)) == expected


def test_kill_register_does_not_touch_other_registers(scalars):
    assert scalars.invoke("killed", 9) == 9


@pytest.mark.parametrize(
    ("offsets", "runs"),
    [
        ([0, 64, 128, 200, 272, 400], [[0, 64, 128], [200, 272]]),
        ([0, 8], [[0, 8]]),
        ([5], []),
        ([], []),
    ],
)
def test_offsets_split_into_evenly_spaced_runs(offsets, runs):
    assert _even_runs(offsets) == runs


def test_the_tag_test_of_a_match_is_fused_in_the_fast_decode():
    exe = nat_programs()
    program = Decoder(exe, []).decode()
    copy = program.codes[exe.globals.index("copy")]
    assert copy[0][0] == Kind.MATCH_TAG
    # The count decode runs every instruction on its own.
    counting = Decoder(exe, [], "count", recorder=[0]).decode()
    assert all(ins[0] != Kind.MATCH_TAG for code in counting.codes for ins in code)


def test_adt_results_are_vm_adts_with_constructor_names(nats):
    result = nats.invoke("main", nat(2))
    assert isinstance(result, vm.ADT)
    assert (result.tag, result.constructor, len(result)) == (SUCC, "succ", 1)
    assert result[0][0].constructor == "zero"
    assert nat_value(result) == 2


def test_a_100000_deep_non_tail_recursion_runs(nats):
    # copy() allocates its result after the recursive call returns: 100,000 live frames.
    assert nat_value(nats.invoke("copy", nat(100_000))) == 100_000


def test_recursion_returns_through_every_frame(nats):
    assert nats.invoke("walk", nat(50)).constructor == "zero"


def test_closures_get_captured_values_first_then_arguments(closures):
    assert [int(v) for v in closures.invoke("call", 1, 2)] == [1, 2]


def test_closure_results_can_be_called_with_invoke_closure(closures):
    closure = closures.invoke("make", 5)
    assert isinstance(closure, vm.Closure) and closure.name == "pair"
    assert [int(v) for v in closures.invoke_closure(closure, 6)] == [5, 6]


def test_closures_are_values_a_program_can_call(closures):
    closure = closures.invoke("make", 5)
    assert [int(v) for v in closures.invoke("apply", closure, np.int64(3))] == [5, 3]


def test_alloc_storage_and_alloc_tensor_give_a_fresh_writable_tensor_per_call(memory):
    first = memory.invoke("fresh")
    second = memory.invoke("fresh")
    assert first.shape == (2, 3) and first.dtype == np.float32 and first.flags.writeable
    assert first.flags.c_contiguous
    assert not np.shares_memory(first, second)


def _storage(tensor):
    """The array that owns ``tensor``'s memory (views of views keep their own type's base)."""
    while isinstance(tensor.base, np.ndarray):
        tensor = tensor.base
    return tensor


def test_tensors_carved_from_one_storage_are_disjoint_views_of_it(memory):
    tensors = memory.invoke("three")
    storage = _storage(tensors[0])
    assert storage.dtype == np.uint8 and storage.nbytes == 24
    for i, tensor in enumerate(tensors):
        assert _storage(tensor) is storage and tensor.shape == (2,) and tensor.flags.c_contiguous
        assert tensor.__array_interface__["data"][0] - storage.ctypes.data == 8 * i
    for i, tensor in enumerate(tensors):
        tensor[...] = i
    assert storage.view(np.float32).tolist() == [0, 0, 1, 1, 2, 2]


def test_even_offsets_of_one_storage_share_one_strided_view_in_the_fast_decode(memory):
    exe = memory.executable
    function = exe.functions[exe.globals.index("three")]
    program = Decoder(exe, []).decode()
    code = program.codes[exe.globals.index("three")]
    assert [ins[2] for ins in code[2:5]] == [None, None, None]  # view[index] of the group
    assert len(program.pads[exe.globals.index("three")]) == function.register_file_size + 1


def test_scalar_tensors_of_one_storage_are_0_d_arrays_not_numpy_scalars(memory):
    scalars = memory.invoke("scalars")
    assert all(type(s) is vm.NDArray and s.shape == () for s in scalars)
    for i, scalar in enumerate(scalars):
        scalar[...] = i
    assert _storage(scalars[0]).view(np.float32)[:3].tolist() == [0, 1, 2]


def test_a_tensor_past_the_end_of_its_storage_is_not_grouped_and_still_traps(memory):
    with pytest.raises(vm.VMError, match=r"overflow at pc 5 .* at byte offset 24 does not fit"):
        memory.invoke("overflow")


def test_alloc_tensor_reg_takes_its_shape_from_a_register(memory):
    assert memory.invoke("by_reg").shape == (3, 2)


def test_shape_of_is_an_int64_vector(memory):
    shape = memory.invoke("shape", np.zeros((4, 5), np.float32))
    assert shape.dtype == np.int64 and shape.tolist() == [4, 5]


def test_reshape_tensor_is_a_view_without_copy(memory):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = memory.invoke("reshape", x)
    assert y.shape == (3, 2) and np.shares_memory(x, y)


def test_constants_come_back_as_writable_copies_and_stay_unchanged(memory):
    first = memory.invoke("const")
    assert first.flags.writeable
    first[...] = -1
    assert memory.invoke("const").tolist() == [[0, 1], [2, 3]]
    assert not memory.executable.constant_values[0].flags.writeable


def test_export_copies_read_only_tensors_inside_containers_and_keeps_sharing():
    frozen = np.zeros(2)
    frozen.flags.writeable = False
    shared = (frozen, np.ones(1))
    value = vm.ADT(CONS, [shared, vm.Closure(0, [shared])], "Cons")
    result = export(value)
    assert result is not value and result.constructor == "Cons"
    inner = result[0]
    assert inner[0].flags.writeable and not np.shares_memory(inner[0], frozen)
    # Writable tensors are not copied, only viewed as the NDArrays results are.
    assert type(inner[1]) is vm.NDArray and inner[1].base is shared[1]
    assert result[1].captured[0] is inner  # a value shared twice stays shared
    untouched = vm.ADT(CONS, [(vm.nd.array(np.ones(1)),)], "Cons")
    assert export(untouched) is untouched


def test_a_tail_recursive_loop_runs_in_constant_memory():
    machine = vm.VirtualMachine(loop_programs())
    start = np.zeros(STEP_BYTES // 4, "float32")
    # Each step's storage dies when the next step's frame replaces its own...
    assert traced_peak(lambda: machine.invoke("steps", nat(500), start)) < 16 * STEP_BYTES
    # ...while a loop that must come back to wrap its result keeps every frame.
    assert traced_peak(lambda: machine.invoke("counted", nat(200), start)) > 150 * STEP_BYTES


def test_tail_calls_return_to_a_caller_that_goes_on_at_its_own_depth():
    # Each loop runs 101 calls deep; were tail calls not undone on return, the second
    # loop would start at depth 101 and pass the limit.
    machine = vm.VirtualMachine(loop_programs(), max_call_depth=150)
    start = np.zeros(STEP_BYTES // 4, "float32")
    first, second = machine.invoke("twice", nat(100), start)
    assert first.shape == second.shape == start.shape


# ---- traps ------------------------------------------------------------------------------------


def test_fatal_raises_vmerror_naming_function_and_pc(nats):
    with pytest.raises(vm.VMError, match=r"no match clause applied in function only_zero at pc 4"):
        nats.invoke("only_zero", nat(1))


def test_fatal_error_records_function_and_pc(nats):
    with pytest.raises(vm.VMError) as info:
        nats.invoke("only_zero", nat(1))
    assert (info.value.function, info.value.pc) == ("only_zero", 4)


def test_a_runaway_recursion_stops_at_the_call_depth_limit():
    machine = vm.VirtualMachine(nat_programs(), max_call_depth=1000)
    with pytest.raises(
        vm.VMError, match=r"call depth limit of 1000 frames exceeded in function forever"
    ):
        machine.invoke("forever", nat(0))


def test_the_call_depth_limit_counts_frames():
    machine = vm.VirtualMachine(nat_programs(), max_call_depth=101)
    # walk(n) needs n + 1 frames below main's entry frame.
    assert machine.invoke("walk", nat(100)).constructor == "zero"
    with pytest.raises(vm.VMError, match="call depth limit"):
        machine.invoke("walk", nat(102))


def test_tail_calls_count_towards_the_call_depth_limit():
    machine = vm.VirtualMachine(loop_programs(), max_call_depth=50)
    start = np.zeros(STEP_BYTES // 4, "float32")
    # steps(n) makes n calls below the entry frame, as many as without tail calls.
    assert machine.invoke("steps", nat(50), start).shape == start.shape
    with pytest.raises(
        vm.VMError, match="call depth limit of 50 frames exceeded in function steps"
    ):
        machine.invoke("steps", nat(51), start)


def test_the_default_call_depth_limit_stops_an_infinite_recursion(nats):
    with pytest.raises(vm.VMError, match="call depth limit of 250000 frames"):
        nats.invoke("forever", nat(0))


def test_the_vm_keeps_working_after_traps():
    machine = vm.VirtualMachine(nat_programs(), max_call_depth=1000)
    for _ in range(3):
        with pytest.raises(vm.VMError):
            machine.invoke("only_zero", nat(1))
        with pytest.raises(vm.VMError):
            machine.invoke("forever", nat(0))
        assert nat_value(machine.invoke("main", nat(3))) == 3
        assert nat_value(machine.invoke("copy", nat(900))) == 900


def test_a_tensor_that_does_not_fit_its_storage_is_a_vmerror(memory):
    with pytest.raises(
        vm.VMError, match=r"too_big at pc 2 .*400 bytes.* does not fit in a storage of 24 bytes"
    ):
        memory.invoke("too_big")


def test_a_negative_storage_size_is_a_vmerror(memory):
    with pytest.raises(vm.VMError, match="cannot allocate a storage of -1 bytes"):
        memory.invoke("negative")


def test_a_constant_is_never_used_as_storage(memory):
    with pytest.raises(vm.VMError, match=r"does not hold a storage buffer .* read-only tensor"):
        memory.invoke("view_const")


def test_get_field_of_a_tensor_is_a_vmerror_not_an_attribute_error(memory):
    with pytest.raises(
        vm.VMError, match=r"function any at pc 0 \(get_field \$1 \$0 0\): \$0 holds a tensor"
    ):
        memory.invoke("any", np.zeros(3))


def test_get_field_out_of_range_is_a_vmerror(memory):
    with pytest.raises(vm.VMError, match="has no field 0"):
        memory.invoke("any", ())


def test_if_on_a_non_scalar_is_a_vmerror(memory):
    with pytest.raises(
        vm.VMError, match="if compares two scalars, but \\$0 holds a tensor float64\\[3\\]"
    ):
        memory.invoke("cond", np.zeros(3))


def test_calling_a_value_that_is_not_a_closure_is_a_vmerror(closures):
    with pytest.raises(vm.VMError, match=r"\$0 holds a tensor float64\[3\], not a closure"):
        closures.invoke("apply_any", np.zeros(3), 1)


def test_a_closure_called_with_the_wrong_number_of_arguments_is_a_vmerror(closures):
    # pair takes (c, x); a closure over nothing called with one argument misses one.
    bare = vm.Closure(closures.executable.globals.index("pair"), [])
    with pytest.raises(
        vm.VMError, match=r"captured 0 values and is called with 1 arguments, but pair takes 2"
    ):
        closures.invoke("apply", bare, 1)
    assert [int(v) for v in closures.invoke("call", 1, 2)] == [1, 2]


# ---- invalid uses ------------------------------------------------------------------------------


def test_an_unknown_function_name_lists_the_known_ones(scalars):
    with pytest.raises(KeyError, match=r"unknown function 'nope'.*swap"):
        scalars.invoke("nope")
    with pytest.raises(ValueError):
        scalars["nope"]


def test_virtual_machine_needs_an_executable():
    with pytest.raises(TypeError, match=r"needs a vm\.Executable"):
        vm.VirtualMachine(b"not an executable")


@pytest.mark.parametrize("depth", [0, -1, 1.5, True])
def test_max_call_depth_must_be_a_positive_int(depth):
    with pytest.raises(ValueError, match="max_call_depth"):
        vm.VirtualMachine(nat_programs(), max_call_depth=depth)


def test_the_device_must_be_a_cpu_device():
    vm.VirtualMachine(nat_programs(), vm.cpu())
    vm.VirtualMachine(nat_programs(), [vm.cpu(0)])
    with pytest.raises(TypeError, match=r"vm\.cpu"):
        vm.VirtualMachine(nat_programs(), "gpu")


def test_cpu_devices_compare_by_index():
    assert vm.cpu() == vm.cpu(0) == vm.Device(1, 0)
    assert str(vm.cpu(1)) == "cpu(1)" and vm.cpu(1) != vm.cpu()
    with pytest.raises(ValueError, match="CPU only"):
        vm.Device(2, 0)


def test_a_storage_that_backs_one_tensor_is_the_tensor_itself_fresh_on_every_call():
    # The fast decode makes the only tensor of a storage directly (vm.groups): it must
    # still be the caller's own NDArray, new on each call, and a kill must drop it.
    from vm.builder import ExecutableBuilder
    from vm.isa import Opcode as O

    b = ExecutableBuilder()
    f = b.function("one", [], [], ("tensor", (2,), "float32"))
    size, st, t0 = f.reg(), f.reg(), f.reg()
    f.emit(O.LoadConsti, 8, size)
    f.emit(O.AllocStorage, size, 64, "float32", st)
    f.emit(O.AllocTensor, st, 0, (2,), "float32", t0)
    f.emit(O.KillRegister, st)
    f.emit(O.Ret, t0)
    b.add_function(f)
    exe = b.build(verify=False)  # t0 is never written: the verifier would reject the ret
    program = Decoder(exe, []).decode()
    size_of_frame = exe.functions[0].register_file_size
    assert len(program.pads[0]) == size_of_frame + 1  # the tensor's hidden register
    registers = [None] * len(program.pads[0])
    program.codes[0][1][1](registers)  # the alloc_storage
    assert registers[st] is None and type(registers[size_of_frame][0]) is vm.NDArray
    program.codes[0][3][1](registers)  # the kill
    assert registers[size_of_frame] is None
    machine = vm.VirtualMachine(exe)
    first, second = machine.invoke("one"), machine.invoke("one")
    assert type(first) is vm.NDArray and first.shape == (2,) and first.dtype == np.float32
    assert first.base is None and not np.shares_memory(first, second)


def test_killing_a_grouped_storage_also_drops_its_hidden_view():
    # The fast decode keeps one strided view per group in a hidden register; if a kill of
    # the storage left it there, the storage's bytes would stay alive until the frame ends.
    from vm.builder import ExecutableBuilder
    from vm.isa import Opcode as O

    b = ExecutableBuilder()
    f = b.function("reuse", [], [], ("tensor", (2,), "float32"))
    size, st, t0, t1, t2 = f.reg(), f.reg(), f.reg(), f.reg(), f.reg()
    f.emit(O.LoadConsti, 24, size)
    f.emit(O.AllocStorage, size, 64, "float32", st)
    f.emit(O.AllocTensor, st, 0, (2,), "float32", t0)
    f.emit(O.AllocTensor, st, 16, (2,), "float32", t2)
    f.emit(O.AllocTensor, st, 8, (2,), "float32", t1)  # returned: never in a group
    f.emit(O.KillRegister, st)
    f.emit(O.Ret, t1)
    b.add_function(f)
    exe = b.build(verify=False)  # t1 is never written: the verifier would reject the ret
    program = Decoder(exe, []).decode()
    registers = [object() for _ in program.pads[0]]
    size_of_frame = exe.functions[0].register_file_size
    assert len(registers) == size_of_frame + 1  # one hidden view for the group
    kill = program.codes[0][5]
    kill[1](registers)
    assert registers[st] is None and registers[size_of_frame] is None
    assert registers[t1] is not None
    result = vm.VirtualMachine(exe).invoke("reuse")
    assert type(result) is vm.NDArray and result.shape == (2,)


@pytest.mark.parametrize("extra", [0, 3, 1000])
def test_big_storages_start_on_a_cache_line(extra):
    # numpy's big buffers start 16 bytes past a page; a kernel's 64-byte vector loads
    # would then each span two cache lines. The storage of one tensor and of two both
    # start on a line (the planner's offsets are multiples of 64).
    from vm.builder import ExecutableBuilder
    from vm.decode import ALIGNED_MIN_BYTES, CACHE_LINE
    from vm.isa import Opcode as O

    elements = ALIGNED_MIN_BYTES // 4 + extra
    nbytes = 4 * elements
    second = -(-nbytes // CACHE_LINE) * CACHE_LINE
    b = ExecutableBuilder()
    one = b.function("one", [], [], ("tensor", (elements,), "float32"))
    size, st, t0 = one.reg(), one.reg(), one.reg()
    one.emit(O.LoadConsti, nbytes, size)
    one.emit(O.AllocStorage, size, 64, "float32", st)
    one.emit(O.AllocTensor, st, 0, (elements,), "float32", t0)
    one.emit(O.Ret, t0)
    b.add_function(one)
    two = b.function("two", [], [], ("tuple", [("tensor", (elements,), "float32")] * 2))
    size, st, t0, t1, tup = two.reg(), two.reg(), two.reg(), two.reg(), two.reg()
    two.emit(O.LoadConsti, 2 * second, size)
    two.emit(O.AllocStorage, size, 64, "float32", st)
    two.emit(O.AllocTensor, st, 0, (elements,), "float32", t0)
    two.emit(O.AllocTensor, st, second, (elements,), "float32", t1)
    two.emit(O.AllocADT, 0, [t0, t1], tup)
    two.emit(O.Ret, tup)
    b.add_function(two)
    machine = vm.VirtualMachine(b.build(verify=False))
    for _ in range(3):
        tensors = [machine.invoke("one"), *machine.invoke("two")]
        for tensor in tensors:
            assert tensor.shape == (elements,) and tensor.flags.writeable
            assert tensor.__array_interface__["data"][0] % CACHE_LINE == 0
        tensors[1][...] = 1.0
        tensors[2][...] = 2.0
        assert (tensors[1] == 1.0).all() and (tensors[2] == 2.0).all()
