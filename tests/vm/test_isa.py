"""Every opcode of the one ISA table has each tool derived from it (DESIGN.md principle 1).

For each opcode: the builder emits it, the verifier accepts it in a valid program, the
disassembler prints its mnemonic, save/load round-trips it unchanged, and the interpreter's
decoder has a handler for it.
"""

import pytest

from tests.vm.executable_samples import every_opcode_executable
from vm.builder import ExecutableBuilder
from vm.decode import DECODERS
from vm.executable import Executable
from vm.isa import OPCODES, Opcode, OperandKind, register_written, registers_read
from vm.text import format_instruction
from vm.verify import verify

EXE = every_opcode_executable()
BY_OPCODE = {ins.opcode: (pc, ins) for pc, ins in enumerate(EXE.functions[0].instructions)}
ROUND_TRIPPED = Executable.load_exec(EXE.save()[0])

# An operand value of each kind that the builder accepts.
SAMPLE_OPERAND = {
    OperandKind.REG: 0,
    OperandKind.DST: 1,
    OperandKind.REGS: (0,),
    OperandKind.CONST: 0,
    OperandKind.FUNC: 0,
    OperandKind.PRIM: 0,
    OperandKind.IMM: 1,
    OperandKind.OFFSET: 1,
    OperandKind.TAG: 0,
    OperandKind.SHAPE: (2,),
    OperandKind.DTYPE: "float32",
}


def test_the_table_has_one_row_per_opcode_with_semantics():
    assert set(OPCODES) == set(Opcode)
    assert all(row.semantics and row.mnemonic for row in OPCODES.values())


@pytest.mark.parametrize("opcode", list(Opcode), ids=lambda op: op.name)
def test_every_opcode_is_built_verified_printed_saved_and_decoded(opcode):
    info = OPCODES[opcode]
    builder = ExecutableBuilder()
    fb = builder.function("f", ["x"], [("any",)], ("any",))
    operands = [SAMPLE_OPERAND[kind] for _, kind in info.operands]
    pc = fb.emit(opcode, *operands)
    assert fb.finish().instructions[pc].operands == tuple(operands)

    assert opcode in BY_OPCODE, f"the sample program does not use {opcode.name}"
    verify(EXE)
    where, ins = BY_OPCODE[opcode]
    text = " ".join(format_instruction(ins, where, EXE))
    assert info.mnemonic in text

    assert ROUND_TRIPPED.functions[0].instructions[where] == ins
    assert opcode in DECODERS


def test_registers_read_and_written_follow_the_operand_kinds() -> None:
    assert registers_read(Opcode.InvokePacked, (0, (3, 4, 5), 1)) == [3, 4, 5]
    assert register_written(Opcode.InvokePacked, (0, (3, 4, 5), 1)) is None
    assert registers_read(Opcode.If, (1, 2, 1, 3)) == [1, 2]
    assert registers_read(Opcode.Move, (7, 8)) == [7] and register_written(Opcode.Move, (7, 8)) == 8
    assert registers_read(Opcode.KillRegister, (4,)) == []
    assert register_written(Opcode.KillRegister, (4,)) == 4


# ---- per-opcode facts in the rows -------------------------------------------------------------


def test_only_kill_register_clears_its_register():
    assert [op for op, row in OPCODES.items() if row.clears] == [Opcode.KillRegister]


@pytest.mark.parametrize("opcode", list(Opcode), ids=lambda op: op.name)
def test_every_row_states_its_facts_consistently(opcode):
    row = OPCODES[opcode]
    kinds = [kind for _, kind in row.operands]
    assert all(type(fact) is bool for fact in (row.pure, row.clears, row.straight_line))
    if row.pure:  # its one effect is its destination, so it may go when nothing reads it
        assert OperandKind.DST in kinds and not (row.terminator or row.writes_outputs)
    if row.straight_line:  # a graph has no jumps, closures or run-time shapes
        assert OperandKind.OFFSET not in kinds and opcode is not Opcode.Fatal
        assert "closure" not in row.mnemonic and "shape_reg" not in row.operand_names


def test_the_pure_and_straight_line_opcodes_are_the_ones_the_compiler_relies_on():
    pure = {op for op, row in OPCODES.items() if row.pure}
    assert pure == {
        Opcode.Move, Opcode.AllocADT, Opcode.AllocClosure, Opcode.GetField, Opcode.LoadConst,
        Opcode.LoadConsti, Opcode.GetTag, Opcode.ShapeOf, Opcode.AllocTensor, Opcode.AllocStorage,
    }  # fmt: skip
    # Calls, kernels and reshapes can fail or write memory: never removed unread.
    assert not pure & {Opcode.Invoke, Opcode.InvokePacked, Opcode.ReshapeTensor}
    straight = {op for op, row in OPCODES.items() if row.straight_line}
    assert straight == {
        Opcode.Move, Opcode.Ret, Opcode.Invoke, Opcode.InvokePacked, Opcode.AllocTensor,
        Opcode.AllocStorage, Opcode.AllocADT, Opcode.GetField, Opcode.LoadConst,
        Opcode.LoadConsti, Opcode.ReshapeTensor, Opcode.KillRegister,
    }  # fmt: skip
