"""The verifier's memory rules: a kernel writes only into tensors its function allocated, and
no uninitialized byte is read, returned or handed on (issue 13, item 4).

Returns: programs the compiler emits (alloc, kernel, then use) verify. Invalid: writing into a
parameter, a constant or a call's result; using a non-storage as storage; returning or passing
on a storage or tensor no kernel has written; the same on only one path of a branch. Fuzz:
programs with renamed registers that still verify are run, and neither change the caller's
input nor return bytes no kernel wrote (RELAYVM_FUZZ_SCALE=N runs N times as many).
"""

import numpy as np
import pytest

from tests.vm.executable_samples import ADD_DESCRIPTION, F32x2, kernel_executable
from vm.errors import InvalidExecutableError
from vm.executable import Executable
from vm.executable_codec import encode
from vm.interpreter import VirtualMachine
from vm.isa import Opcode as O
from vm.program import Instruction as I
from vm.program import Primitive, VMFunction
from vm.verify import verify

ADD = Primitive("vm_mod_add", ADD_DESCRIPTION)
STORAGE = [I(O.LoadConsti, (8, 2)), I(O.AllocStorage, (2, 64, "float32", 3))]  # $3: 8 bytes
TENSOR = [*STORAGE, I(O.AllocTensor, (3, 0, (2,), "float32", 4))]  # $4 views $3
ADDED = [*TENSOR, I(O.InvokePacked, (0, (0, 1, 4), 1))]  # $4 := x + y


def program(code, size=10, helpers=()):
    main = VMFunction("main", ("x", "y"), (F32x2, F32x2), F32x2, size, tuple(code))
    return Executable((main, *helpers), (np.zeros(2, "float32"),), (ADD,))


def identity():
    return VMFunction("identity", ("a",), (F32x2,), F32x2, 1, (I(O.Ret, (0,)),))


def expect_invalid(code, message, pc, **kwargs):
    with pytest.raises(InvalidExecutableError) as info:
        verify(program(code, **kwargs))
    err = info.value
    assert message in str(err), str(err)
    assert (err.section, err.function, err.pc) == ("code", "main", pc), str(err)
    return str(err)


# ---- returns ------------------------------------------------------------------------------


def test_a_kernel_writing_a_fresh_tensor_that_is_returned_verifies():
    verify(kernel_executable())
    verify(program([*ADDED, I(O.Ret, (4,))]))


def test_views_and_moves_of_an_unwritten_tensor_may_be_made_before_a_kernel_writes_it():
    verify(
        program([
            *TENSOR,
            I(O.ShapeOf, (4, 5)),
            I(O.ReshapeTensor, (4, 5, 6)),      # a view of $4, still unwritten
            I(O.Move, (6, 7)),
            I(O.InvokePacked, (0, (0, 1, 7), 1)),  # writes the view through the move
            I(O.Ret, (7,)),
        ])
    )  # fmt: skip


def test_a_tensor_written_on_both_branches_may_be_returned_after_the_join():
    verify(
        program([
            *TENSOR,
            I(O.LoadConsti, (1, 5)),
            I(O.If, (5, 5, 1, 3)),
            I(O.InvokePacked, (0, (0, 1, 4), 1)),   # 5
            I(O.Goto, (2,)),
            I(O.InvokePacked, (0, (1, 0, 4), 1)),   # 7
            I(O.Ret, (4,)),
        ])
    )  # fmt: skip


def test_a_written_tensor_may_be_passed_on_everywhere():
    verify(
        program(
            [
                *ADDED,
                I(O.Invoke, (1, (4,), 5)),
                I(O.AllocADT, (0, (4, 5), 6)),
                I(O.AllocClosure, (1, (4,), 7)),
                I(O.InvokePacked, (0, (4, 5, 4), 1)),  # in place: read, then written again
                I(O.Ret, (4,)),
            ],
            helpers=(identity(),),
        )
    )


def test_a_kernel_may_write_a_storage_in_a_loop_allocated_before_it():
    verify(
        program([
            *STORAGE,
            I(O.LoadConsti, (0, 5)),
            I(O.AllocTensor, (3, 0, (2,), "float32", 4)),  # 3: the loop head
            I(O.InvokePacked, (0, (0, 1, 4), 1)),
            I(O.If, (5, 5, -2, 1)),
            I(O.Ret, (4,)),
        ])
    )  # fmt: skip


# ---- invalid: a kernel writes only into its function's own tensors ---------------------------


def test_a_kernel_writing_into_a_parameter_is_invalid():
    # invoke_packed with output $0 would overwrite the caller's input array.
    text = expect_invalid(
        [I(O.InvokePacked, (0, (0, 1, 0), 1)), I(O.Ret, (0,))],
        "output 0: register $0 must hold a tensor this function allocated",
        0,
    )
    assert "may hold a parameter (the caller's value)" in text
    assert "(InvokePacked)" in text


def test_the_caller_input_is_never_written_by_a_loaded_file():
    # The whole path of issue 13: a saved file whose kernel writes into parameter $0.
    main = VMFunction(
        "main", ("x", "y"), (F32x2, F32x2), F32x2, 2,
        (I(O.InvokePacked, (0, (0, 1, 0), 1)), I(O.Ret, (1,))),
    )  # fmt: skip
    data = encode(Executable((main,), (), (ADD,)))
    with pytest.raises(InvalidExecutableError, match=r"function 'main', instruction 0"):
        Executable.load_exec(data)


@pytest.mark.parametrize(
    "writer",
    [
        [I(O.LoadConst, (0, 4))],
        [I(O.Invoke, (1, (0,), 4))],
        [I(O.AllocADT, (0, (0,), 5)), I(O.GetField, (5, 0, 4))],
        [I(O.Move, (1, 4))],
        [I(O.ReshapeTensor, (0, 0, 4))],
    ],
    ids=["constant", "call-result", "field", "moved-parameter", "reshaped-parameter"],
)
def test_a_kernel_writing_into_a_value_it_did_not_allocate_is_invalid(writer):
    code = [*writer, I(O.InvokePacked, (0, (0, 1, 4), 1)), I(O.Ret, (4,))]
    text = expect_invalid(
        code, "output 0: register $4 must hold a tensor this function allocated", len(writer),
        helpers=(identity(),),
    )  # fmt: skip
    assert "but it may hold a value it did not allocate" in text


def test_a_kernel_output_allocated_on_one_branch_only_is_invalid():
    expect_invalid(
        [
            I(O.LoadConsti, (1, 5)),
            I(O.If, (5, 5, 1, 5)),
            *TENSOR,                                # 2..4
            I(O.Goto, (2,)),
            I(O.Move, (0, 4)),                      # 6: the other branch puts x in $4
            I(O.InvokePacked, (0, (0, 1, 4), 1)),   # 7
            I(O.Ret, (4,)),
        ],
        "output 0: register $4 must hold a tensor this function allocated",
        7,
    )  # fmt: skip


def test_a_parameter_used_as_storage_is_invalid():
    # A caller's uint8 array would pass the runtime's storage check; the kernel would
    # then write into the caller's memory through the view.
    expect_invalid(
        [I(O.AllocTensor, (0, 0, (2,), "float32", 4)), I(O.Ret, (0,))],
        "operand storage: register $0 must hold a buffer from alloc_storage on every path "
        "to this instruction, but it may hold a parameter",
        0,
    )


def test_a_tensor_used_as_storage_is_invalid():
    expect_invalid(
        [*ADDED, I(O.AllocTensor, (4, 0, (2,), "float32", 5)), I(O.Ret, (4,))],
        "operand storage: register $4 must hold a buffer from alloc_storage",
        4,
    )


# ---- invalid: no uninitialized byte is read or handed on ------------------------------------


UNINITIALIZED = "may hold uninitialized memory"


def test_returning_a_storage_is_invalid():
    text = expect_invalid(
        [*STORAGE, I(O.Ret, (3,))], "operand result: register $3 " + UNINITIALIZED, 2
    )
    assert "(Ret)" in text


def test_returning_a_tensor_no_kernel_wrote_is_invalid():
    expect_invalid([*TENSOR, I(O.Ret, (4,))], "operand result: register $4 " + UNINITIALIZED, 3)


def test_returning_a_view_or_move_of_an_unwritten_tensor_is_invalid():
    expect_invalid(
        [*TENSOR, I(O.ShapeOf, (4, 5)), I(O.ReshapeTensor, (4, 5, 6)), I(O.Move, (6, 7)),
         I(O.Ret, (7,))],
        "register $7 " + UNINITIALIZED,
        6,
    )  # fmt: skip


def test_a_kernel_reading_an_unwritten_tensor_is_invalid():
    expect_invalid(
        [*TENSOR, I(O.AllocTensor, (3, 0, (2,), "float32", 5)),
         I(O.InvokePacked, (0, (0, 4, 5), 1)), I(O.Ret, (5,))],
        "operand args[1]: register $4 " + UNINITIALIZED,
        4,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("use", "operand"),
    [
        (I(O.Invoke, (1, (4,), 5)), "args[0]"),
        (I(O.AllocADT, (0, (0, 4), 5)), "fields[1]"),
        (I(O.AllocClosure, (1, (4,), 5)), "captured[0]"),
        (I(O.If, (4, 4, 1, 1)), "test"),
        (I(O.AllocStorage, (4, 64, "float32", 5)), "size"),
        (I(O.AllocTensorReg, (3, 0, 4, "float32", 5)), "shape_reg"),
        (I(O.GetField, (3, 0, 5)), "object"),
    ],
    ids=lambda value: value if isinstance(value, str) else O(value.opcode).name,
)
def test_handing_on_an_unwritten_tensor_is_invalid(use, operand):
    register = 3 if operand == "object" else 4
    expect_invalid(
        [*TENSOR, use, I(O.Ret, (0,))],
        f"operand {operand}: register ${register} " + UNINITIALIZED,
        3,
        helpers=(identity(),),
    )


def test_a_tensor_written_on_one_branch_only_is_uninitialized_after_the_join():
    expect_invalid(
        [
            *TENSOR,
            I(O.LoadConsti, (1, 5)),
            I(O.If, (5, 5, 1, 2)),
            I(O.InvokePacked, (0, (0, 1, 4), 1)),   # 5: the only write
            I(O.Ret, (4,)),                          # 6
        ],
        "operand result: register $4 " + UNINITIALIZED,
        6,
    )  # fmt: skip


def test_a_tensor_allocated_again_in_a_loop_is_unwritten_until_a_kernel_writes_it():
    # The tensor written before the loop is replaced by a fresh one each time round.
    expect_invalid(
        [
            *TENSOR,
            I(O.InvokePacked, (0, (0, 1, 4), 1)),
            I(O.LoadConsti, (0, 5)),
            I(O.AllocTensor, (3, 0, (2,), "float32", 4)),   # 5: loop head
            I(O.InvokePacked, (0, (4, 1, 4), 1)),            # 6: reads the fresh $4
            I(O.If, (5, 5, -2, 1)),
            I(O.Ret, (4,)),
        ],
        "operand args[0]: register $4 " + UNINITIALIZED,
        6,
    )  # fmt: skip


def test_a_file_returning_a_fresh_storage_does_not_load():
    # The second case of issue 13: alloc_storage then ret handed back np.empty bytes.
    main = VMFunction("main", ("x",), (F32x2,), F32x2, 3, (*STORAGE[:1],
                      I(O.AllocStorage, (2, 64, "float32", 1)), I(O.Ret, (1,))))  # fmt: skip
    exe = Executable((main,), (), ())
    with pytest.raises(InvalidExecutableError, match=r"instruction 2 \(Ret\).*uninitialized"):
        Executable.load_exec(encode(exe))


def test_programs_the_interpreter_runs_leave_the_caller_input_alone():
    exe = program([*ADDED, I(O.Ret, (4,))])
    verify(exe)
    x, y = np.array([1, 2], "float32"), np.array([3, 4], "float32")
    result = VirtualMachine(exe).invoke("main", x, y)
    np.testing.assert_array_equal(result, [4, 6])
    np.testing.assert_array_equal(x, [1, 2])


def test_the_interpreter_fixtures_break_only_the_memory_rules_they_test_the_runtime_on():
    # They are built without verifying, so the runtime's own checks can be tested; every
    # other function in them must still be valid.
    from tests.vm.interpreter_programs import kernel_programs, loop_programs, memory_programs
    from vm.verify import _Context, _FunctionVerifier

    def errors(exe):
        context = _Context(exe.functions, exe.constant_values, exe.primitives, exe.constructors)
        found = {}
        for function in exe.functions:
            try:
                _FunctionVerifier(context, function).run()
            except InvalidExecutableError as err:
                found[function.name] = str(err)
        return found

    assert list(errors(kernel_programs())) == ["into_const"]
    assert set(errors(loop_programs())) == {"steps", "counted"}
    memory = errors(memory_programs())
    assert set(memory) == {
        "fresh", "too_big", "negative", "three", "overflow", "scalars", "by_reg", "view_const"
    }  # fmt: skip
    assert "must hold a buffer from alloc_storage" in memory.pop("view_const")
    assert all("may hold uninitialized memory" in text for text in memory.values())


# ---- fuzz: programs that verify never touch the caller's input or hand out uninitialized bytes --

CANARY = 0x7B


def _canary_empty(shape, dtype=float):
    """np.empty that fills every new buffer with CANARY, so bytes no kernel wrote are visible."""
    dtype = np.dtype(dtype)
    if int(np.prod(shape, dtype=np.int64)) * dtype.itemsize > 1 << 26:
        raise MemoryError("the fuzz caps storages at 64 MB")  # a renamed size register
    out = np.empty(shape, dtype)
    out.view(np.uint8)[...] = CANARY
    return out


def _fill_new_buffers(monkeypatch) -> None:
    """Make every buffer the VM allocates start as CANARY bytes: storages, and the tensors
    made without a storage (the only tensor of one, see vm.groups)."""
    import vm.decode

    monkeypatch.setattr(vm.decode, "_empty", _canary_empty)

    def new_tensor(cls, shape, dtype, *buffer):
        # A tensor over an aligned buffer: the buffer came from _empty, canary already.
        if buffer:
            return np.ndarray.__new__(cls, shape, dtype, *buffer)
        return _canary_empty(shape, dtype).view(cls)

    monkeypatch.setattr(vm.decode, "_new_tensor", new_tensor)


def _has_canary(value) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, np.ndarray):
            raw = np.ascontiguousarray(item).reshape(-1).view(np.uint8)
            if raw.size >= 4 and (raw == CANARY).all():
                return True
        elif isinstance(item, (tuple, list)):
            stack.extend(item)
    return False


def _register_words(record) -> list[int]:
    """Positions in a code record's words that hold a register number."""
    from tests.vm.executable_samples import instruction_starts
    from vm.isa import OPCODES, OperandKind

    words, positions = record["code"], []
    for pos in instruction_starts(record):
        pos += 1
        for _, kind in OPCODES[O(words[pos - 1])].operands:
            if kind in (OperandKind.REGS, OperandKind.SHAPE):
                if kind is OperandKind.REGS:
                    positions.extend(range(pos + 1, pos + 1 + words[pos]))
                pos += 1 + words[pos]
            else:
                if kind in (OperandKind.REG, OperandKind.DST):
                    positions.append(pos)
                pos += 1
    return positions


def test_the_canary_shows_a_result_no_kernel_wrote(monkeypatch):
    # Without this, a change to how the VM allocates would make the fuzz below pass blindly.

    _fill_new_buffers(monkeypatch)
    unverified = program([*TENSOR, I(O.Ret, (4,))])
    x = np.zeros(2, "float32")
    assert _has_canary(VirtualMachine(unverified).invoke("main", x, x))


def test_programs_with_renamed_registers_that_verify_never_write_inputs_or_leak_memory(
    monkeypatch,
):
    # Issue 13, item 4: before the memory rules, about one in ten of these loaded, ran
    # and overwrote the caller's input or returned bytes no kernel wrote.
    import random

    from tests.vm.executable_samples import control_flow_executable, document_from, sections_of
    from tests.vm.test_load_fuzz import SCALE, dynamic_executable
    from vm.errors import ExecutableLoadError, VMError

    _fill_new_buffers(monkeypatch)
    samples = [encode(e) for e in (control_flow_executable(), kernel_executable())]
    samples.append(encode(dynamic_executable()))
    rng = random.Random(13)
    outcomes = {"rejected": 0, "ran": 0}
    for _ in range(600 * SCALE):
        sections = sections_of(rng.choice(samples))
        for _ in range(rng.choice((1, 1, 2))):
            record = rng.choice(sections["code"])
            positions = _register_words(record)
            if positions and record["register_file_size"]:
                word = rng.choice(positions)
                record["code"][word] = rng.randrange(record["register_file_size"])
        try:
            exe = Executable.load_exec(document_from(sections))
        except ExecutableLoadError:
            outcomes["rejected"] += 1
            continue
        main = exe.functions[exe.globals.index("main")]
        args = [np.arange(2, dtype="float32") + i for i in range(len(main.params))]
        copies = [a.copy() for a in args]
        try:
            result = VirtualMachine(exe, max_call_depth=50).invoke("main", *args)
        except (VMError, TypeError, ValueError):
            result = None
        outcomes["ran"] += 1
        for arg, copy in zip(args, copies):
            np.testing.assert_array_equal(arg, copy)
        assert not _has_canary(result), exe.bytecode
    assert outcomes["rejected"] > 100 and outcomes["ran"] > 100, outcomes
