"""Small executables built with the assembler, shared by the executable and loader tests.

Test helper for ``tests/vm`` (imports ``vm`` only). Each builder returns a fresh,
verified :class:`vm.executable.Executable`; none needs the compiler.
"""

from __future__ import annotations

import numpy as np

from vm.builder import ExecutableBuilder
from vm.executable import Executable
from vm.isa import Opcode
from vm.program import ConstructorInfo, Instruction, Primitive, VMFunction

F32x2 = ("tensor", (2,), "float32")
SCALAR_I64 = ("tensor", (), "int64")

#: The description of a one-node kernel adding two float32 vectors.
ADD_DESCRIPTION = {
    "inputs": [["float32", 1], ["float32", 1]],
    "outputs": [["float32", 1]],
    "nodes": [{"op": "add", "args": [0, 1], "attrs": {}, "outputs": [["float32", 1]]}],
    "results": [2],
}


def control_flow_builder() -> ExecutableBuilder:
    """A builder holding functions that use every non-kernel control and data opcode.

    Functions: ``identity(x)``, ``pick(c, a, b)`` (If/Goto/Move/LoadConsti),
    ``first(a, b)`` (AllocADT tuple + GetField), ``cons(h, t)`` (a constructor),
    ``head(l)`` (GetTag/If/GetField/Fatal), ``main(x, y)`` (LoadConst, AllocClosure,
    InvokeClosure, Invoke), which returns ``(x, x)``.
    """
    b = ExecutableBuilder()
    b.add_constructor(1, "Cons", 2, "List")
    b.add_constructor(2, "Nil", 0, "List")
    for name in ("identity", "pick", "first", "cons", "head", "main"):
        b.declare(name)

    f = b.function("identity", ["x"], [F32x2], F32x2)
    f.emit(Opcode.Ret, 0)
    b.add_function(f)

    f = b.function("pick", ["c", "a", "b"], [SCALAR_I64, F32x2, F32x2], F32x2)
    one, out = f.reg(), f.reg()
    else_, end = f.label(), f.label()
    f.emit(Opcode.LoadConsti, 1, one)
    f.emit(Opcode.If, 0, one, 1, else_)
    f.emit(Opcode.Move, 1, out)
    f.emit(Opcode.Goto, end)
    f.place(else_)
    f.emit(Opcode.Move, 2, out)
    f.place(end)
    f.emit(Opcode.Ret, out)
    b.add_function(f)

    f = b.function("first", ["a", "b"], [F32x2, F32x2], F32x2)
    pair, field = f.reg(), f.reg()
    f.emit(Opcode.AllocADT, 0, (0, 1), pair)
    f.emit(Opcode.GetField, pair, 0, field)
    f.emit(Opcode.Ret, field)
    b.add_function(f)

    f = b.function("cons", ["h", "t"], [F32x2, ("adt", "List")], ("adt", "List"))
    cell = f.reg()
    f.emit(Opcode.AllocADT, 1, (0, 1), cell)
    f.emit(Opcode.Ret, cell)
    b.add_function(f)

    f = b.function("head", ["l"], [("adt", "List")], F32x2)
    tag, want, value = f.reg(), f.reg(), f.reg()
    fail = f.label()
    f.emit(Opcode.GetTag, 0, tag)
    f.emit(Opcode.LoadConsti, 1, want)
    f.emit(Opcode.If, tag, want, 1, fail)
    f.emit(Opcode.GetField, 0, 0, value)
    f.emit(Opcode.Ret, value)
    f.place(fail)
    f.emit(Opcode.Fatal)
    b.add_function(f)

    f = b.function("main", ["x", "y"], [F32x2, F32x2], ("tuple", (F32x2, F32x2)))
    k, clo, a, one, c = f.reg(), f.reg(), f.reg(), f.reg(), f.reg()
    result = f.reg()
    f.emit(Opcode.LoadConst, b.add_constant(np.array([1.5, -2.0], dtype="float32")), k)
    f.emit(Opcode.AllocClosure, b.function_index("first"), (0,), clo)
    f.emit(Opcode.InvokeClosure, clo, (k,), a)
    f.emit(Opcode.LoadConsti, 1, one)
    f.emit(Opcode.Invoke, b.function_index("pick"), (one, a, 1), c)
    f.emit(Opcode.AllocADT, 0, (a, c), result)
    f.emit(Opcode.Ret, result)
    b.add_function(f)
    return b


def control_flow_executable():
    """The verified executable of :func:`control_flow_builder`."""
    return control_flow_builder().build()


def kernel_builder() -> ExecutableBuilder:
    """A builder with ``main(x, y)`` computing ``x + y`` with one InvokePacked of
    :data:`ADD_DESCRIPTION` into storage allocated by AllocStorage/AllocTensor."""
    b = ExecutableBuilder()
    prim = b.add_primitive("vm_mod_add", ADD_DESCRIPTION)
    f = b.function("main", ["x", "y"], [F32x2, F32x2], F32x2)
    size, storage, out = f.reg(), f.reg(), f.reg()
    f.emit(Opcode.LoadConsti, 8, size)
    f.emit(Opcode.AllocStorage, size, 64, "float32", storage)
    f.emit(Opcode.AllocTensor, storage, 0, (2,), "float32", out)
    f.emit(Opcode.InvokePacked, prim, (0, 1, out), 1)
    f.emit(Opcode.Ret, out)
    b.add_function(f)
    return b


def kernel_executable():
    """The verified executable of :func:`kernel_builder`."""
    return kernel_builder().build()


def tiny_executable():
    """The smallest useful executable: ``main(x) = x``, one constant, no kernels."""
    b = ExecutableBuilder()
    f = b.function("main", ["x"], [F32x2], F32x2)
    k = f.reg()
    f.emit(Opcode.LoadConst, b.add_constant(np.array([1, 2], dtype="int32")), k)
    f.emit(Opcode.Ret, 0)
    b.add_function(f)
    return b.build()


def every_opcode_executable():
    """One function using every opcode once, with operands that satisfy every rule.

    Built directly from instructions (not the builder) so the test of "every opcode
    is verified, printed and saved" does not depend on the builder's own checks.
    """
    I, O = Instruction, Opcode
    code = (
        I(O.LoadConst, (0, 1)),
        I(O.LoadConsti, (16, 2)),
        I(O.AllocStorage, (2, 64, "float32", 3)),
        I(O.AllocTensor, (3, 0, (2,), "float32", 4)),
        I(O.ShapeOf, (4, 5)),
        I(O.AllocTensorReg, (3, 8, 5, "float32", 6)),
        I(O.ReshapeTensor, (6, 5, 7)),
        I(O.InvokePacked, (0, (0, 1, 4), 1)),
        I(O.Move, (4, 8)),
        I(O.AllocADT, (1, (0, 8), 9)),
        I(O.GetTag, (9, 10)),
        I(O.GetField, (9, 1, 11)),
        I(O.AllocClosure, (1, (0,), 12)),
        I(O.InvokeClosure, (12, (1,), 13)),
        I(O.Invoke, (1, (0, 1), 14)),
        I(O.KillRegister, (14,)),
        I(O.If, (10, 2, 1, 2)),
        I(O.Goto, (2,)),
        I(O.Fatal, ()),
        I(O.Ret, (13,)),
    )
    main = VMFunction("main", ("x",), (F32x2,), F32x2, 15, code)
    pair = VMFunction("pair", ("a", "b"), (F32x2, F32x2), F32x2, 2, (I(O.Ret, (0,)),))
    return Executable(
        (main, pair),
        (np.zeros(2, "float32"),),
        (Primitive("vm_mod_add", ADD_DESCRIPTION),),
        (ConstructorInfo(1, "Cons", 2, "List"), ConstructorInfo(2, "Nil", 0, "List")),
    )


# ---- document surgery for the loader's corpora ------------------------------------------------


def sections_of(data: bytes) -> dict:
    """The decoded sections (everything but the header) of a saved executable."""
    from serialization.formats import EXECUTABLE_FORMAT
    from serialization.framing import read_document

    return read_document(EXECUTABLE_FORMAT, data).sections


def document_from(sections: dict) -> bytes:
    """Write ``sections`` (as from :func:`sections_of`, possibly mutated) as an executable file."""
    from serialization.formats import EXECUTABLE_FORMAT
    from serialization.framing import write_document

    return write_document(
        EXECUTABLE_FORMAT, [(name, sections[name]) for name in EXECUTABLE_FORMAT.sections]
    )


def raw_body(data: bytes) -> list:
    """The body of a saved file as [section name, section bytes] pairs (header included)."""
    from serialization.codec import unpack
    from serialization.framing import PREFIX_SIZE

    return unpack(data[PREFIX_SIZE:])


def from_raw_body(data: bytes, body: list) -> bytes:
    """``data`` with its body replaced by ``body`` (magic and version kept)."""
    from serialization.codec import pack
    from serialization.framing import PREFIX_SIZE

    return data[:PREFIX_SIZE] + pack(body)


def code_record(sections: dict, name: str) -> dict:
    """The code-section record of function ``name``."""
    return next(r for r in sections["code"] if r["name"] == name)


def instruction_starts(record: dict) -> list[int]:
    """The index in ``record["code"]`` where each instruction's opcode word is."""
    from vm.isa import OPCODES, Opcode, OperandKind

    words = record["code"]
    starts = []
    pos = 0
    while pos < len(words):
        starts.append(pos)
        info = OPCODES[Opcode(words[pos])]
        pos += 1
        for _, kind in info.operands:
            pos += 1 + words[pos] if kind in (OperandKind.REGS, OperandKind.SHAPE) else 1
    return starts


def operand_position(record: dict, pc: int, operand: str) -> int:
    """The index in ``record["code"]`` of operand ``operand`` of instruction ``pc``
    (for a register list or shape, of its length word)."""
    from vm.isa import OPCODES, Opcode, OperandKind

    words = record["code"]
    pos = instruction_starts(record)[pc]
    info = OPCODES[Opcode(words[pos])]
    pos += 1
    for name, kind in info.operands:
        if name == operand:
            return pos
        pos += 1 + words[pos] if kind in (OperandKind.REGS, OperandKind.SHAPE) else 1
    raise ValueError(f"instruction {pc} has no operand {operand}")
