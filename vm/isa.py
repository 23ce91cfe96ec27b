"""The relayvm instruction set: every opcode defined once.

Runtime layer (``vm``); imports nothing but the standard library.

Each row of :data:`OPCODES` names an opcode, its number, its operands with their
kinds and a one-line semantics in register notation. The builder, the verifier,
the disassembler and the serializer are derived from this table, and the
interpreter's decoder table (:data:`vm.decode.DECODERS`) has one entry per row; a
test checks that every opcode has each of them.
Tools switch on :class:`OperandKind`, never on opcodes.

Notation: ``R[r]`` register ``r`` of the current frame, ``K[i]`` constant ``i``,
``F[i]`` VM function ``i``, ``P[i]`` primitive (kernel) ``i``, ``pc`` the index
of the current instruction. Jump offsets are relative to the jumping instruction,
as in TVM's Relay VM.

The facts tools share about an opcode are fields of its row too: what its destination
holds afterwards (the verifier's memory rules), whether it only computes its
destination (pruning), whether it empties a register instead of writing it (the
verifier and the decoder's dataflow), whether a straight-line graph may contain it
(the graph executor's code generator).

Adding an opcode is one row here plus a decoder in :mod:`vm.decode` (and a kind in
:mod:`vm.decoded` with its branch in the loop, if no existing kind fits), and bumps
:data:`serialization` 's format version.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


class OperandKind(enum.Enum):
    """What an operand means; tools check and print operands by kind."""

    REG = "reg"  # a register read
    DST = "dst"  # a register written
    REGS = "regs"  # a list of registers read
    CONST = "const"  # an index into the constant section
    FUNC = "func"  # an index into the function table
    PRIM = "prim"  # an index into the primitive (kernel) table
    IMM = "imm"  # a signed integer immediate
    OFFSET = "offset"  # a jump, relative to this instruction
    TAG = "tag"  # a constructor tag (0 is the tuple tag)
    SHAPE = "shape"  # a list of non-negative integer dimensions
    DTYPE = "dtype"  # a dtype name such as "float32"


class Result(enum.Enum):
    """What the register an instruction writes holds, as the verifier's memory rules see it.

    The verifier tracks, per register, whether every byte of its value has been written
    and whether the value is memory the function allocated itself, so a kernel never
    writes into a caller's input or a constant, and no uninitialized byte is ever read
    or handed on (see :mod:`vm.verify`).
    """

    VALUE = "value"  # a value whose bytes are all defined: a constant, a call's result, ...
    STORAGE = "storage"  # a new buffer whose bytes are undefined
    TENSOR = "tensor"  # a new tensor viewing the storage operand, undefined until written
    ALIAS = "alias"  # the value of the source operand, or a view of its bytes


class Opcode(enum.IntEnum):
    """Opcode numbers follow TVM's Relay VM where TVM has the opcode."""

    Move = 0
    Ret = 1
    Invoke = 2
    InvokeClosure = 3
    InvokePacked = 4
    AllocTensor = 5
    AllocTensorReg = 6
    AllocADT = 7
    AllocClosure = 8
    GetField = 9
    If = 10
    LoadConst = 11
    Goto = 12
    GetTag = 13
    LoadConsti = 14
    Fatal = 15
    AllocStorage = 16
    ShapeOf = 17
    ReshapeTensor = 18
    KillRegister = 20


@dataclass(frozen=True)
class OpInfo:
    """One row of the instruction-set table."""

    opcode: Opcode
    mnemonic: str
    operands: tuple[tuple[str, OperandKind], ...]
    semantics: str
    terminator: bool = False  # control never falls through to pc + 1
    result: Result = Result.VALUE  # what the DST operand holds afterwards
    source: str | None = None  # the operand a TENSOR views or an ALIAS copies
    shallow: tuple[str, ...] = ()  # register operands read without reading their bytes
    # The last ``num_outputs`` registers of ``args`` are written in place, not read.
    writes_outputs: bool = False
    # Only computes its destination: removable when nothing reads it (compiler.backend's
    # pruning). In compiled (well-typed, planned) code it cannot fail.
    pure: bool = False
    # Its DST operand is emptied, not written: afterwards the register counts as never
    # written (the verifier rejects reading it; dataflow does not count it as a writer).
    clears: bool = False
    # May appear in a straight-line program, which the graph executor's code generator
    # turns into a graph; the others are control flow, closures or run-time shapes.
    straight_line: bool = False

    @property
    def name(self) -> str:
        return self.opcode.name

    @property
    def operand_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.operands)


R, D, RS = OperandKind.REG, OperandKind.DST, OperandKind.REGS
C, F, P, I = OperandKind.CONST, OperandKind.FUNC, OperandKind.PRIM, OperandKind.IMM
O, T, S, DT = OperandKind.OFFSET, OperandKind.TAG, OperandKind.SHAPE, OperandKind.DTYPE

_ROWS = (
    OpInfo(
        Opcode.Move,
        "move",
        (("src", R), ("dst", D)),
        "R[dst] := R[src]",
        result=Result.ALIAS,
        source="src",
        shallow=("src",),
        pure=True,
        straight_line=True,
    ),
    OpInfo(
        Opcode.Ret,
        "ret",
        (("result", R),),
        "return R[result] to the caller",
        terminator=True,
        straight_line=True,
    ),
    OpInfo(
        Opcode.Invoke,
        "invoke",
        (("func_index", F), ("args", RS), ("dst", D)),
        "R[dst] := F[func_index](R[args]...)",
        straight_line=True,
    ),
    OpInfo(
        Opcode.InvokeClosure,
        "invoke_closure",
        (("closure", R), ("args", RS), ("dst", D)),
        "R[dst] := F[R[closure].func_index](R[closure].captured..., R[args]...)",
    ),
    OpInfo(
        Opcode.InvokePacked,
        "invoke_packed",
        (("prim_index", P), ("args", RS), ("num_outputs", I)),
        "P[prim_index](inputs..., outputs...): the last num_outputs of args are written in place",
        writes_outputs=True,
        straight_line=True,
    ),
    OpInfo(
        Opcode.AllocTensor,
        "alloc_tensor",
        (("storage", R), ("offset", I), ("shape", S), ("dtype", DT), ("dst", D)),
        "R[dst] := tensor(shape, dtype) viewing R[storage] at byte offset",
        result=Result.TENSOR,
        source="storage",
        shallow=("storage",),
        pure=True,
        straight_line=True,
    ),
    OpInfo(
        Opcode.AllocTensorReg,
        "alloc_tensor_reg",
        (("storage", R), ("offset", I), ("shape_reg", R), ("dtype", DT), ("dst", D)),
        "R[dst] := tensor(R[shape_reg], dtype) viewing R[storage] at byte offset",
        result=Result.TENSOR,
        source="storage",
        shallow=("storage",),
    ),
    OpInfo(
        Opcode.AllocADT,
        "alloc_adt",
        (("tag", T), ("fields", RS), ("dst", D)),
        "R[dst] := ADT(tag, R[fields]...); tag 0 builds a tuple",
        pure=True,
        straight_line=True,
    ),
    OpInfo(
        Opcode.AllocClosure,
        "alloc_closure",
        (("func_index", F), ("captured", RS), ("dst", D)),
        "R[dst] := Closure(func_index, R[captured]...)",
        pure=True,
    ),
    OpInfo(
        Opcode.GetField,
        "get_field",
        (("object", R), ("index", I), ("dst", D)),
        "R[dst] := R[object].fields[index]",
        pure=True,
        straight_line=True,
    ),
    OpInfo(
        Opcode.If,
        "if",
        (("test", R), ("target", R), ("true_offset", O), ("false_offset", O)),
        "pc += true_offset if R[test] == R[target] else false_offset",
    ),
    OpInfo(
        Opcode.LoadConst,
        "load_const",
        (("const_index", C), ("dst", D)),
        "R[dst] := K[const_index]",
        pure=True,
        straight_line=True,
    ),
    OpInfo(Opcode.Goto, "goto", (("offset", O),), "pc += offset", True),
    OpInfo(
        Opcode.GetTag,
        "get_tag",
        (("object", R), ("dst", D)),
        "R[dst] := int32 scalar holding R[object].tag",
        pure=True,
    ),
    OpInfo(
        Opcode.LoadConsti,
        "load_consti",
        (("value", I), ("dst", D)),
        "R[dst] := int64 scalar holding value",
        pure=True,
        straight_line=True,
    ),
    OpInfo(Opcode.Fatal, "fatal", (), "raise VMError (no match clause applied)", True),
    OpInfo(
        Opcode.AllocStorage,
        "alloc_storage",
        (("size", R), ("alignment", I), ("dtype_hint", DT), ("dst", D)),
        "R[dst] := storage of R[size] bytes",
        result=Result.STORAGE,
        pure=True,
        straight_line=True,
    ),
    OpInfo(
        Opcode.ShapeOf,
        "shape_of",
        (("tensor", R), ("dst", D)),
        "R[dst] := int64 vector holding R[tensor].shape",
        shallow=("tensor",),
        pure=True,
    ),
    OpInfo(
        Opcode.ReshapeTensor,
        "reshape_tensor",
        (("tensor", R), ("newshape", R), ("dst", D)),
        "R[dst] := view of R[tensor] with shape R[newshape] (no copy)",
        result=Result.ALIAS,
        source="tensor",
        shallow=("tensor",),
        straight_line=True,
    ),
    OpInfo(
        Opcode.KillRegister,
        "kill_register",
        (("reg", D),),
        "R[reg] := empty (drops the reference so its memory can be reused)",
        clears=True,
        straight_line=True,
    ),
)

#: Opcode -> its row, in opcode order. The one table everything derives from.
OPCODES: dict[Opcode, OpInfo] = {row.opcode: row for row in sorted(_ROWS, key=lambda r: r.opcode)}

#: Mnemonic -> opcode, for the assembler's text form.
BY_MNEMONIC: dict[str, Opcode] = {row.mnemonic: row.opcode for row in _ROWS}

#: Kinds whose operand value is a single register number.
REGISTER_KINDS = frozenset({OperandKind.REG, OperandKind.DST})

assert len(OPCODES) == len(Opcode), "every Opcode needs exactly one row"
for _row in _ROWS:  # the memory facts name operands of their own row
    _names = set(_row.operand_names)
    assert set(_row.shallow) <= _names, _row.name
    assert (_row.source in _names) == (_row.result in (Result.TENSOR, Result.ALIAS)), _row.name
    assert not _row.writes_outputs or {"args", "num_outputs"} <= _names, _row.name
    _kinds = [kind for _, kind in _row.operands]
    assert not _row.clears or _kinds == [OperandKind.DST], _row.name
    assert not _row.pure or (  # a pure opcode's one effect is writing its destination
        OperandKind.DST in _kinds and not (_row.clears or _row.terminator or _row.writes_outputs)
    ), _row.name
del _row, _names, _kinds


def registers_read(opcode: Opcode, operands: Sequence[Any]) -> list[int]:
    """The registers an instruction reads, in operand order (``kill_register`` reads none)."""
    regs: list[int] = []
    for (_name, kind), value in zip(OPCODES[opcode].operands, operands):
        if kind is OperandKind.REG:
            regs.append(value)
        elif kind is OperandKind.REGS:
            regs.extend(value)
    return regs


def register_written(opcode: Opcode, operands: Sequence[Any]) -> int | None:
    """The register an instruction writes (or empties, if its row ``clears``), if any."""
    for (_name, kind), value in zip(OPCODES[opcode].operands, operands):
        if kind is OperandKind.DST:
            return value
    return None


del R, D, RS, C, F, P, I, O, T, S, DT
