"""Text views: bytecode listing, statistics and constants, checked against golden text."""

import numpy as np

from tests.vm.executable_samples import control_flow_executable, kernel_executable
from vm.executable import Executable
from vm.isa import OPCODES, Opcode, OperandKind
from vm.program import Instruction, VMFunction
from vm.text import format_instruction

CONTROL_FLOW_BYTECODE = """\
VM Function[0]: identity(x)
# reg file size = 1
# instruction count = 1
  0: ret $0

VM Function[1]: pick(c, a, b)
# reg file size = 5
# instruction count = 6
  0: load_consti $3 1
  1: if $0 $3 1 3                                 # true -> 2, false -> 4
  2: move $4 $1
  3: goto 2                                       # -> 5
  4: move $4 $2
  5: ret $4

VM Function[2]: first(a, b)
# reg file size = 4
# instruction count = 3
  0: alloc_adt $2 tag(0) [$0, $1]                 # tuple
  1: get_field $3 $2 0
  2: ret $3

VM Function[3]: cons(h, t)
# reg file size = 3
# instruction count = 2
  0: alloc_adt $2 tag(1) [$0, $1]                 # Cons
  1: ret $2

VM Function[4]: head(l)
# reg file size = 4
# instruction count = 6
  0: get_tag $1 $0
  1: load_consti $2 1
  2: if $1 $2 1 3                                 # true -> 3, false -> 5
  3: get_field $3 $0 0
  4: ret $3
  5: fatal

VM Function[5]: main(x, y)
# reg file size = 8
# instruction count = 7
  0: load_const $2 Const[0]
  1: alloc_closure $3 VMFunc[2]($0)               # first
  2: invoke_closure $4 $3($2)
  3: load_consti $5 1
  4: invoke $6 VMFunc[1]($5, $4, $1)              # pick
  5: alloc_adt $7 tag(0) [$4, $6]                 # tuple
  6: ret $7

"""

KERNEL_BYTECODE = """\
VM Function[0]: main(x, y)
# reg file size = 5
# instruction count = 5
  0: load_consti $2 8
  1: alloc_storage $3 $2 64 float32
  2: alloc_tensor $4 $3 0 [2] float32
  3: invoke_packed PackedFunc[0] (in: $0, $1, out: $4)  # vm_mod_add
  4: ret $4

"""


def test_bytecode_of_control_flow_matches_golden_text():
    assert control_flow_executable().bytecode == CONTROL_FLOW_BYTECODE


def test_bytecode_of_a_kernel_call_matches_golden_text():
    assert kernel_executable().bytecode == KERNEL_BYTECODE


def test_stats_match_golden_text():
    assert control_flow_executable().stats == (
        "Relay VM executable statistics:\n"
        "  Constant shapes (# 1): [[2]]\n"
        '  Globals (#6): [("identity", 0), ("pick", 1), ("first", 2), ("cons", 3), '
        '("head", 4), ("main", 5)]\n'
        "  Primitive ops (#0): []\n"
        "  Constructors (#2): [Cons(tag 1, 2 fields), Nil(tag 2, 0 fields)]\n"
    )
    assert kernel_executable().stats == (
        "Relay VM executable statistics:\n"
        "  Constant shapes (# 0): []\n"
        '  Globals (#1): [("main", 0)]\n'
        "  Primitive ops (#1): [vm_mod_add]\n"
        "  Constructors (#0): []\n"
    )


def test_stats_print_scalars_and_shapes_like_tvm():
    exe = Executable((), (np.array(3, dtype="int64"), np.zeros((2, 3), dtype="float32")), ())
    assert "  Constant shapes (# 2): [scalar, [2, 3]]\n" in exe.stats


def test_constants_listing_matches_golden_text():
    assert control_flow_executable().constants == (
        "VM Const[0]: NDArray[(2),float32,(1,0)]=[ 1.5, -2. ] on device index 0\n"
    )
    scalar = Executable((), (np.array(140, dtype="int64"),), ())
    assert scalar.constants == "VM Const[0]: NDArray[(),int64,(1,0)]=140 on device index 0\n"


def test_large_constants_are_summarized_on_one_line():
    exe = Executable((), (np.arange(10_000, dtype="int32").reshape(100, 100),), ())
    (line,) = exe.constants.splitlines()
    assert "..." in line and len(line) < 400


def test_an_empty_executable_prints_empty_listings():
    exe = Executable((), (), ())
    assert exe.bytecode == "" and exe.constants == ""
    assert "Globals (#0): []" in exe.stats


def sample_operand(kind: OperandKind):
    return {
        OperandKind.REG: 1,
        OperandKind.DST: 2,
        OperandKind.REGS: (0, 1),
        OperandKind.CONST: 0,
        OperandKind.FUNC: 0,
        OperandKind.PRIM: 0,
        OperandKind.IMM: 1,
        OperandKind.OFFSET: 1,
        OperandKind.TAG: 0,
        OperandKind.SHAPE: (2, 3),
        OperandKind.DTYPE: "float32",
    }[kind]


def test_every_opcode_has_a_text_form_starting_with_its_mnemonic():
    for opcode, info in OPCODES.items():
        operands = tuple(sample_operand(kind) for _, kind in info.operands)
        text, _ = format_instruction(Instruction(opcode, operands), 0)
        assert text.split()[0] == info.mnemonic, opcode
        assert "<invalid" not in text


def test_destinations_print_first():
    text, _ = format_instruction(Instruction(Opcode.GetField, (4, 1, 7)), 0)
    assert text == "get_field $7 $4 1"


def test_a_backward_jump_resolves_its_target():
    _, note = format_instruction(Instruction(Opcode.Goto, (-3,)), 10)
    assert note == "-> 7"


def test_unverified_instructions_still_print():
    bad = VMFunction(
        "main",
        (),
        (),
        ("any",),
        1,
        (
            Instruction(99, (1,)),
            Instruction(Opcode.Move, (1,)),
            Instruction(Opcode.AllocADT, (0, 5, 1)),
            Instruction(Opcode.Invoke, (9, (0,), 0)),
        ),
    )
    listing = Executable((bad,), (), ()).bytecode
    lines = listing.splitlines()[3:7]
    assert lines[0] == "  0: <invalid 99 (1,)>"
    assert lines[1] == "  1: <invalid <Opcode.Move: 0> (1,)>"
    assert lines[2].startswith("  2: <invalid Instruction(")
    assert lines[3] == "  3: invoke $0 VMFunc[9]($0)"
