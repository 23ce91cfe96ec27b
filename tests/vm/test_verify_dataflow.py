"""Register definedness: every register read is written on every path before it."""

import sys

import pytest

from tests.vm.executable_samples import F32x2
from vm.errors import InvalidExecutableError
from vm.executable import Executable
from vm.isa import Opcode as O
from vm.program import Instruction as I
from vm.program import VMFunction
from vm.verify import verify


def run(code, size=6, params=("x",)):
    function = VMFunction("main", params, (F32x2,) * len(params), F32x2, size, tuple(code))
    verify(Executable((function,), (), ()))


def expect_undefined(code, register, pc, **kwargs):
    with pytest.raises(InvalidExecutableError) as info:
        run(code, **kwargs)
    assert f"register ${register} is read before it is written on some path" in str(info.value)
    assert info.value.pc == pc


# ---- returns ------------------------------------------------------------------------------


def test_parameters_count_as_written():
    run([I(O.Move, (0, 2)), I(O.Ret, (2,))], params=("x", "y"))


def test_a_register_written_on_both_branches_is_defined_after_the_join():
    run([
        I(O.LoadConsti, (1, 1)),
        I(O.If, (0, 1, 1, 3)),
        I(O.Move, (0, 2)),
        I(O.Goto, (2,)),
        I(O.Move, (1, 2)),
        I(O.Ret, (2,)),
    ])  # fmt: skip


def test_a_loop_reading_a_register_written_before_it_is_fine():
    run([
        I(O.LoadConsti, (0, 1)),          # 0
        I(O.LoadConsti, (1, 2)),          # 1
        I(O.If, (1, 2, 1, 3)),            # 2: loop test
        I(O.Move, (2, 1)),                # 3: body
        I(O.Goto, (-2,)),                 # 4: back to the test
        I(O.Ret, (1,)),                   # 5
    ])  # fmt: skip


def test_unreachable_code_is_not_checked():
    run([I(O.Ret, (0,)), I(O.Ret, (5,))])


def test_a_fatal_branch_needs_nothing_defined_after_it():
    run([
        I(O.LoadConsti, (1, 1)),
        I(O.If, (0, 1, 1, 3)),
        I(O.Move, (0, 2)),
        I(O.Ret, (2,)),
        I(O.Fatal, ()),
    ])  # fmt: skip


# ---- invalid ------------------------------------------------------------------------------


def test_reading_a_never_written_register_is_invalid():
    expect_undefined([I(O.Ret, (3,))], 3, 0)


def test_a_register_written_on_one_branch_only_is_undefined_after_the_join():
    expect_undefined(
        [
            I(O.LoadConsti, (1, 1)),
            I(O.If, (0, 1, 1, 3)),
            I(O.Move, (0, 2)),
            I(O.Goto, (2,)),
            I(O.Move, (1, 3)),
            I(O.Ret, (2,)),
        ],
        2,
        5,
    )


def test_a_value_written_inside_a_loop_body_is_undefined_on_the_first_test():
    expect_undefined(
        [
            I(O.LoadConsti, (1, 1)),          # 0
            I(O.If, (3, 1, 1, 3)),            # 1: reads $3, only written in the body
            I(O.LoadConsti, (1, 3)),          # 2
            I(O.Goto, (-2,)),                 # 3
            I(O.Ret, (0,)),                   # 4
        ],
        3,
        1,
    )  # fmt: skip


def test_reading_a_killed_register_is_invalid():
    expect_undefined([I(O.Move, (0, 1)), I(O.KillRegister, (1,)), I(O.Ret, (1,))], 1, 2)


def test_every_argument_of_a_register_list_is_checked():
    expect_undefined([I(O.AllocADT, (0, (0, 4), 1)), I(O.Ret, (1,))], 4, 0)


def test_an_invoke_packed_output_must_be_allocated_first():
    from tests.vm.executable_samples import ADD_DESCRIPTION
    from vm.program import Primitive

    function = VMFunction("main", ("x", "y"), (F32x2, F32x2), F32x2, 3,
                          (I(O.InvokePacked, (0, (0, 1, 2), 1)), I(O.Ret, (2,))))  # fmt: skip
    exe = Executable((function,), (), (Primitive("k", ADD_DESCRIPTION),))
    with pytest.raises(InvalidExecutableError, match=r"register \$2 is read before"):
        verify(exe)


# ---- scale --------------------------------------------------------------------------------


def _diamonds(count):
    """``count`` if/else diamonds, each writing a fresh register on both arms; the code and
    its register count."""
    code = [I(O.LoadConsti, (1, 1))]
    register = 2
    for _ in range(count):
        code += [
            I(O.If, (0, 1, 1, 3)),
            I(O.Move, (register - 1 if register > 2 else 0, register)),
            I(O.Goto, (2,)),
            I(O.Move, (0, register)),
        ]
        register += 1
    code.append(I(O.Ret, (register - 1,)))
    return code, register


def _lines_run(count):
    """Python lines the verifier runs on :func:`_diamonds` (a measure of work that, unlike
    time, does not depend on the machine's load)."""
    code, size = _diamonds(count)
    lines = 0

    def line(frame, event, arg):
        nonlocal lines
        lines += event == "line"
        return line

    previous = sys.gettrace()
    sys.settrace(line)
    try:
        run(code, size=size)
    finally:
        sys.settrace(previous)
    return lines


def test_a_long_chain_of_branches_verifies():
    # 3,000 diamonds: about 15,000 instructions, 6,000 blocks and 6,000 registers.
    code, size = _diamonds(3000)
    run(code, size=size)


def test_the_verifiers_work_grows_linearly_with_the_chain():
    # Twice the diamonds, twice the Python-level work (a fixpoint that needed more sweeps
    # for longer code, or a scan per block, would show as 4x).
    small, large = _lines_run(400), _lines_run(800)
    assert large <= 2.2 * small
