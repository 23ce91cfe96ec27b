"""Errors of a running instruction: the exceptions handlers raise, and their explanation.

Runtime layer (``vm``); imports numpy and the plain-data modules of ``vm``.

Handlers raise :class:`KernelArgumentError` when an argument fails a check, and wrap an
instrument's exception in :class:`HookError`; the interpreter turns whatever an
instruction raised into a :class:`vm.VMError` with :func:`vm_error`, which names the
function, the pc and the instruction and says in words why it failed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from vm.dataflow import operands
from vm.decoded import Kind, Program
from vm.errors import VMError
from vm.isa import Opcode
from vm.ndarray import TENSOR_TYPES
from vm.objects import ADT, Closure
from vm.text import format_instruction as instruction_text


class KernelArgumentError(Exception):
    """A kernel argument failed a check; the loop turns it into a VMError."""


class HookError(Exception):
    """The instrument raised; the loop reports it as a VMError caused by the original."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(f"the instrument raised {type(original).__name__}: {original}")
        self.original = original


def call_hook(hook: Callable[..., Any], *args: Any) -> Any:
    """``hook(*args)``, with any exception it raises wrapped in :class:`HookError`."""
    try:
        return hook(*args)
    except Exception as err:
        raise HookError(err) from err


def type_text(dtype: Any, shape: Sequence[int]) -> str:
    """``float32[1, 784]``: how profiles and kernel errors print a tensor's type."""
    return _type_text(dtype, shape if type(shape) is tuple else tuple(shape))


# A profiled run describes every argument of every call; formatting a numpy dtype takes
# about 10 us, which made a profiled LSTM run 30x slower than a plain one and its
# percentages sum to 6%, so each (dtype, shape) is formatted once.
@functools.lru_cache(maxsize=4096)
def _type_text(dtype: Any, shape: tuple[int, ...]) -> str:
    return f"{dtype}[{', '.join(str(d) for d in shape)}]"


def value_text(value: Any) -> str:
    """``a read-only tensor float32[2]``, ``a closure``, ...: a register's value in words."""
    if isinstance(value, np.ndarray):
        flag = "" if value.flags.writeable else "read-only "
        return f"a {flag}tensor {type_text(value.dtype, value.shape)}"
    if isinstance(value, tuple):
        return f"a tuple of {len(value)} fields"
    if isinstance(value, ADT):
        return f"an ADT value ({value.constructor or f'tag {value.tag}'}, {len(value)} fields)"
    if isinstance(value, Closure):
        return "a closure"
    return "nothing" if value is None else type(value).__name__


def shape_from(value: Any, what: str) -> tuple[int, ...]:
    """The shape a shape register holds (a 1-D integer tensor, or a 0-d one for ``()``).

    Raises
    ------
    KernelArgumentError
        If ``value`` is not such a tensor; ``what`` names the register in the message.
    """
    if type(value) not in TENSOR_TYPES or value.dtype.kind not in "iu" or value.ndim > 1:
        raise KernelArgumentError(
            f"the {what} register must hold a 1-D integer tensor, it holds {value_text(value)}"
        )
    return tuple(value.tolist()) if value.ndim == 1 else ()


def format_instruction(program: Program, findex: int, pc: int) -> str:
    """``alloc_tensor $2 $1 0 [10, 10] float32`` for the instruction at ``pc``."""
    instruction = program.functions[findex].instructions[pc]
    body, comment = instruction_text(instruction, pc, program.exe)
    return f"{body}  # {comment}" if comment else body


def failing_pc(code: list[tuple], pc: int, regs: list) -> int:
    """The pc of the instruction that failed when the decoded tuple at ``pc`` raised.

    A kernel run keeps ``pc`` at its current step, so the tuple there is a run whose
    first step failed. Creating the step's view is free of side effects, so it is
    redone here: if it fails, the ``alloc_tensor`` failed, otherwise the kernel call
    after it did.
    """
    ins = code[pc]
    if ins[0] != Kind.KERNEL_RUN:
        return pc
    storage, shape, dtype, offset = ins[1][0][:4]
    try:
        if shape is None:
            regs[storage][offset]
        else:
            np.ndarray(shape, dtype, regs[storage], offset)
    except Exception:
        return pc
    return pc + 1


def _kind(error: BaseException) -> str:
    """The built-in exception class ``error`` is a kind of (``ValueError`` for a kernel's
    ``KernelValueError``): what a user catches, whatever subclass the kernel raised."""
    for cls in type(error).__mro__:
        if cls.__module__ == "builtins":
            return cls.__name__
    return type(error).__name__


def explain(program: Program, findex: int, pc: int, regs: list, error: BaseException) -> str:
    """Why the instruction at ``pc`` failed, in words (for the VMError message)."""
    function = program.functions[findex]
    instruction = function.instructions[pc]
    ops = operands(instruction)
    opcode = instruction.opcode
    detail = f"{type(error).__name__}: {error}"
    if isinstance(error, (KernelArgumentError, HookError)):
        detail = str(error)
    elif opcode is Opcode.InvokePacked:
        detail = _explain_kernel(program, ops, regs, error)
    elif opcode in (Opcode.AllocTensor, Opcode.AllocTensorReg):
        buffer = regs[ops["storage"]]
        if isinstance(buffer, np.ndarray) and "too small" in str(error):
            if opcode is Opcode.AllocTensor:
                shape = tuple(ops["shape"])
            else:
                shape = shape_from(regs[ops["shape_reg"]], "shape")
            dtype = np.dtype(ops["dtype"])
            size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            detail = (
                f"a {type_text(dtype, shape)} tensor ({size} bytes) at byte offset "
                f"{ops['offset']} does not fit in a storage of {buffer.nbytes} bytes"
            )
    elif opcode is Opcode.AllocStorage:
        size = regs[ops["size"]]
        if isinstance(size, np.ndarray) and size.size == 1:
            detail = f"cannot allocate a storage of {size.item()} bytes ({detail})"
        else:
            detail = f"the size register ${ops['size']} holds {value_text(size)}, not a scalar"
    elif opcode in _NEEDS:
        reg = ops[_NEEDS[opcode][0]]
        value = regs[reg]
        needed = _NEEDS[opcode][1]
        if opcode is Opcode.If:
            bad = [
                f"${r} holds {value_text(regs[r])}"
                for r in (ops["test"], ops["target"])
                if not (isinstance(regs[r], np.ndarray) and regs[r].size == 1)
            ]
            detail = f"if compares two scalars, but {' and '.join(bad) or detail}"
        elif not isinstance(value, needed):
            kinds = " or ".join(_KIND_WORDS[k] for k in needed)
            detail = f"${reg} holds {value_text(value)}, not {kinds}"
        elif opcode is Opcode.GetTag and isinstance(error, KeyError):
            detail = (
                f"${reg} holds an ADT value with tag {value.tag}, which is not a constructor "
                "of this executable"
            )
        elif opcode is Opcode.GetField:
            fields = value if isinstance(value, tuple) else value.fields
            detail = f"${reg} holds {value_text(value)}, which has no field {ops['index']}"
            if len(fields) > ops["index"]:
                detail = f"{type(error).__name__}: {error}"
    return detail


# Operand each opcode reads a structured value from, and the kinds it accepts there.
_NEEDS: dict[Opcode, tuple[str, tuple[type, ...]]] = {
    Opcode.GetField: ("object", (tuple, ADT)),
    Opcode.GetTag: ("object", (tuple, ADT)),
    Opcode.InvokeClosure: ("closure", (Closure,)),
    Opcode.If: ("test", (np.ndarray,)),
}
_KIND_WORDS = {tuple: "a tuple", ADT: "an ADT", Closure: "a closure", np.ndarray: "a tensor"}


def _explain_kernel(program: Program, ops: dict[str, Any], regs: list, error: BaseException) -> str:
    prim = ops["prim_index"]
    name = program.primitive_names[prim]
    description = program.exe.primitives[prim].description
    arg_types = list(description["inputs"]) + list(description["outputs"])
    for i, (reg, (dtype, ndim)) in enumerate(zip(ops["args"], arg_types)):
        value = regs[reg]
        if not isinstance(value, np.ndarray) or str(value.dtype) != dtype or value.ndim != ndim:
            return (
                f"argument {i} (${reg}) of kernel {name} is {value_text(value)}, "
                f"but the kernel takes a {dtype} tensor of rank {ndim}"
            )
    return f"kernel {name} raised {_kind(error)}: {error}"


def vm_error(program: Program, code: list, pc: int, regs: list, error: BaseException) -> VMError:
    """The VMError for ``error`` raised by the instruction at ``pc`` of ``code``."""
    findex = program.function_of(code)
    pc = program.source_pc(failing_pc(code, pc, regs))
    name = program.functions[findex].name
    try:
        detail = explain(program, findex, pc, regs, error)
    except Exception:  # the explanation must never hide the original failure
        detail = f"{type(error).__name__}: {error}"
    text = format_instruction(program, findex, pc)
    result = VMError(f"in function {name} at pc {pc} ({text}): {detail}")
    result.function = name
    result.pc = pc
    return result
