"""Text views of an executable: the disassembler, the statistics and the constant listing.

Runtime layer (``vm``); imports numpy and the plain-data modules of ``vm``.

Operands print by their kind in the ISA table (:mod:`vm.isa`): ``$3`` a register,
``[$1, $2]`` a register list, ``Const[0]`` a constant, ``VMFunc[1]`` a function,
``PackedFunc[0]`` a kernel, ``tag(2)`` a constructor tag, ``[10, 10]`` a shape,
``float32`` a dtype, a plain number an immediate or a jump offset. Destinations
print first, as in TVM. Comments resolve jump targets and name the functions,
kernels and constructors that indices refer to. The views also work on executables
that fail verification, so a broken program can be inspected.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vm.isa import OPCODES, Opcode, OperandKind
from vm.program import Instruction

_CALL_TARGETS = (OperandKind.FUNC, OperandKind.REG)


def format_instruction(instruction: Instruction, pc: int, exe: Any = None) -> tuple[str, str]:
    """The text of one instruction and its comment (``""`` if none).

    Parameters
    ----------
    instruction : vm.program.Instruction
        The instruction to print.
    pc : int
        Its index in the function (for resolving jump targets).
    exe : vm.Executable, optional
        Used to name functions, kernels and constructors in the comment.
    """
    try:
        return _format(instruction, pc, exe)
    except (TypeError, ValueError, AttributeError):
        # Operands of the wrong type: an unverified executable is still printable.
        return f"<invalid {instruction!r}>", ""


def _format(instruction: Instruction, pc: int, exe: Any) -> tuple[str, str]:
    info = OPCODES.get(instruction.opcode) if _is_opcode(instruction.opcode) else None
    operands = instruction.operands
    if info is None or not isinstance(operands, tuple) or len(operands) != len(info.operands):
        return f"<invalid {instruction.opcode!r} {operands!r}>", ""
    destinations: list[str] = []
    parts: list[str] = []
    notes: list[str] = []
    previous: OperandKind | None = None
    for (name, kind), value in zip(info.operands, operands):
        if kind is OperandKind.DST:
            destinations.append(f"${value}")
        elif kind is OperandKind.REGS:
            registers = ", ".join(f"${r}" for r in value)
            if info.opcode is Opcode.InvokePacked:
                split = len(value) - instruction.num_outputs
                inputs = ", ".join(f"${r}" for r in value[:split])
                outputs = ", ".join(f"${r}" for r in value[split:])
                parts.append(f"(in: {inputs}, out: {outputs})")
            elif previous in _CALL_TARGETS and parts:
                parts[-1] += f"({registers})"
            else:
                parts.append(f"[{registers}]")
        elif kind is OperandKind.REG:
            parts.append(f"${value}")
        elif kind is OperandKind.CONST:
            parts.append(f"Const[{value}]")
        elif kind is OperandKind.FUNC:
            parts.append(f"VMFunc[{value}]")
            notes.append(_name_of(exe, "functions", value))
        elif kind is OperandKind.PRIM:
            parts.append(f"PackedFunc[{value}]")
            notes.append(_name_of(exe, "primitives", value))
        elif kind is OperandKind.TAG:
            parts.append(f"tag({value})")
            notes.append(_constructor_name(exe, value))
        elif kind is OperandKind.SHAPE:
            parts.append("[" + ", ".join(str(d) for d in value) + "]")
        elif kind is OperandKind.OFFSET:
            parts.append(str(value))
            label = name.removesuffix("_offset").removesuffix("offset")
            target = f"-> {pc + value}" if isinstance(value, int) else "-> ?"
            notes.append(f"{label} {target}" if label else target)
        elif info.opcode is Opcode.InvokePacked and name == "num_outputs":
            pass  # shown by the in/out split of the argument list
        else:  # IMM, DTYPE
            parts.append(str(value))
        previous = kind
    text = " ".join([info.mnemonic, *destinations, *parts])
    return text, ", ".join(note for note in notes if note)


def _is_opcode(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value in OPCODES


def _name_of(exe: Any, table: str, index: Any) -> str:
    items = getattr(exe, table, ()) if exe is not None else ()
    if isinstance(index, int) and 0 <= index < len(items):
        return str(items[index].name)
    return ""


def _constructor_name(exe: Any, tag: Any) -> str:
    if tag == 0:
        return "tuple"
    by_tag = getattr(exe, "constructor_by_tag", {}) if exe is not None else {}
    constructor = by_tag.get(tag) if isinstance(tag, int) else None
    return constructor.name if constructor is not None else ""


def disassemble(exe: Any) -> str:
    """The bytecode listing of every function of ``exe``.

    Each function prints as::

        VM Function[0]: main(x, y)
        # reg file size = 3
        # instruction count = 2
          0: invoke_packed PackedFunc[0] (in: $0, $1, out: $2)  # vm_mod_add
          1: ret $2

    followed by a blank line.
    """
    lines: list[str] = []
    for index, function in enumerate(exe.functions):
        params = ", ".join(str(p) for p in function.params)
        code = function.instructions
        lines.append(f"VM Function[{index}]: {function.name}({params})")
        lines.append(f"# reg file size = {function.register_file_size}")
        lines.append(f"# instruction count = {len(code)}")
        width = max(3, len(str(len(code) - 1)))
        for pc, instruction in enumerate(code):
            text, note = format_instruction(instruction, pc, exe)
            line = f"{pc:>{width}}: {text}"
            if note:
                line = f"{line:<48}  # {note}"
            lines.append(line)
        lines.append("")
    return "\n".join(lines) + ("\n" if lines else "")


def _shape_text(array: np.ndarray) -> str:
    if array.ndim == 0:
        return "scalar"
    return "[" + ", ".join(str(d) for d in array.shape) + "]"


def stats(exe: Any) -> str:
    """TVM-style executable statistics, one item per line.

    ::

        Relay VM executable statistics:
          Constant shapes (# 2): [scalar, [2, 3]]
          Globals (#1): [("main", 0)]
          Primitive ops (#1): [vm_mod_fused_add]
          Constructors (#0): []
    """
    constants = exe.constant_values
    names = exe.globals
    ops = exe.primitive_ops
    ctors = exe.constructors
    shapes = ", ".join(_shape_text(c) for c in constants)
    globals_text = ", ".join(f'("{name}", {index})' for index, name in enumerate(names))
    ctor_text = ", ".join(f"{c.name}(tag {c.tag}, {c.arity} fields)" for c in ctors)
    return (
        "Relay VM executable statistics:\n"
        f"  Constant shapes (# {len(constants)}): [{shapes}]\n"
        f"  Globals (#{len(names)}): [{globals_text}]\n"
        f"  Primitive ops (#{len(ops)}): [{', '.join(ops)}]\n"
        f"  Constructors (#{len(ctors)}): [{ctor_text}]\n"
    )


def constants_text(exe: Any) -> str:
    """The constant pool, one line per constant, in TVM's ``VM Const[i]`` form.

    Large arrays are summarized (first and last items), so the listing stays short.
    """
    lines = []
    for index, array in enumerate(exe.constant_values):
        values = np.array2string(
            array, threshold=16, edgeitems=3, separator=", ", max_line_width=1 << 30
        )
        values = " ".join(values.split())
        shape = "(" + ", ".join(str(d) for d in array.shape) + ")"
        lines.append(
            f"VM Const[{index}]: NDArray[{shape},{array.dtype},(1,0)]={values} on device index 0"
        )
    return "\n".join(lines) + ("\n" if lines else "")
