"""The verifier: every rule a program must follow before the interpreter may run it.

Runtime layer (``vm``); imports ``serialization`` (limits, dtype names) and the
plain-data modules of ``vm``; kernel descriptions are checked by ``vm.kernels``.

One linear pass per function, like WebAssembly validation and the JVM's static
constraints. Operands are checked by their kind in the ISA table (:mod:`vm.isa`);
only a few rules that relate operands to other parts of the executable (callee
arity, constructor field counts, kernel signatures, immediates with a range) are
per opcode. A final data-flow pass checks, on every path, that each register is
written before it is read, that a kernel writes only into tensors its function
allocated (never a caller's input or a constant) and that no uninitialized byte of
a new storage or tensor is read or handed on; the memory facts of each opcode come
from its ISA row. The interpreter can then trust registers, indices and jumps
without checking them again. Any failure raises
:class:`vm.errors.InvalidExecutableError` naming the section, function and instruction.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import numpy as np

from serialization.limits import (
    MAX_CONSTANT_BYTES,
    MAX_CONSTRUCTORS,
    MAX_FUNCTIONS,
    MAX_INDEX,
    MAX_INSTRUCTIONS,
    MAX_NESTING,
    MAX_PRIMITIVES,
    MAX_RANK,
    MAX_REGISTERS,
)
from serialization.ndarray import ALLOWED_DTYPES, DTYPE_NAMES
from vm.errors import InvalidExecutableError
from vm.isa import OPCODES, Opcode, OperandKind, Result
from vm.program import ConstructorInfo, Instruction, Primitive, VMFunction

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

_DTYPES = frozenset(DTYPE_NAMES)
_REGISTER_READS = (OperandKind.REG, OperandKind.REGS)


def verify(exe: Any) -> None:
    """Check every rule of a well-formed program; return None if ``exe`` passes.

    Parameters
    ----------
    exe : vm.Executable
        The executable to check (from the builder, the compiler or ``load_exec``).

    Raises
    ------
    vm.errors.InvalidExecutableError
        At the first rule broken; the message names the section, the function and
        the instruction, e.g. ``"invalid executable: code section, function 'main',
        instruction 17 (If): jump target 42 is outside the function (0..30)"``.
    """
    functions: Sequence[VMFunction] = exe.functions
    _check_globals(functions, exe.constructors)
    _check_constants(exe.constant_values)
    _check_primitives(exe.primitives)
    context = _Context(functions, exe.constant_values, exe.primitives, exe.constructors)
    for function in functions:
        _FunctionVerifier(context, function).run()


def _fail(
    section: str,
    detail: str,
    function: str | None = None,
    pc: int | None = None,
    opname: str | None = None,
    item: str | None = None,
) -> NoReturn:
    where = f"{section} section"
    if item is not None:
        where += f", {item}"
    if function is not None:
        where += f", function {function[:60]!r}"
    if pc is not None:
        where += f", instruction {pc}"
        if opname:
            where += f" ({opname})"
    raise InvalidExecutableError(f"invalid executable: {where}: {detail}", section, function, pc)


def _is_dtype(value: Any) -> bool:
    return type(value) is str and value in _DTYPES


def _brief(value: Any, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _range(count: int) -> str:
    return f"0..{count - 1}" if count else "none"


# ---- tables outside the code ----------------------------------------------------------------


def _check_globals(
    functions: Sequence[VMFunction], constructors: Sequence[ConstructorInfo]
) -> None:
    if len(functions) > MAX_FUNCTIONS:
        _fail("global", f"{len(functions)} functions exceed MAX_FUNCTIONS = {MAX_FUNCTIONS}")
    seen: dict[str, int] = {}
    for index, function in enumerate(functions):
        name = function.name
        if type(name) is not str or not name.isidentifier():
            _fail(
                "global",
                f"the name {_brief(name)} is not a valid identifier",
                item=f"function {index}",
            )
        if name in seen:
            _fail("global", f"functions {seen[name]} and {index} are both named {name!r}")
        seen[name] = index
    if len(constructors) > MAX_CONSTRUCTORS:
        _fail(
            "global",
            f"{len(constructors)} constructors exceed MAX_CONSTRUCTORS = {MAX_CONSTRUCTORS}",
        )
    tags: dict[int, str] = {}
    for index, c in enumerate(constructors):
        item = f"constructor {index}"
        if type(c.name) is not str or not c.name:
            _fail(
                "global", f"the name must be a non-empty string, found {_brief(c.name)}", item=item
            )
        item = f"constructor {index} ({c.name[:60]})"
        if type(c.type_name) is not str or not c.type_name:
            _fail("global", "the type name must be a non-empty string", item=item)
        if type(c.tag) is not int or not 1 <= c.tag <= MAX_INDEX:
            _fail(
                "global",
                f"tag {_brief(c.tag)} must be an int from 1 to {MAX_INDEX} (0 is the tuple tag)",
                item=item,
            )
        if type(c.arity) is not int or not 0 <= c.arity <= MAX_INDEX:
            _fail("global", f"arity {_brief(c.arity)} must be a non-negative int", item=item)
        _check_field_types(c, item)
        if c.tag in tags:
            _fail("global", f"constructors {tags[c.tag]} and {c.name} share the tag {c.tag}")
        tags[c.tag] = c.name


def _check_field_types(c: Any, item: str) -> None:
    """A constructor's field types: one valid spec per field, variables of its type only."""
    if c.field_types is None:
        return
    if type(c.type_arity) is not int or not 0 <= c.type_arity <= MAX_INDEX:
        _fail("global", f"type arity {_brief(c.type_arity)} must be a non-negative int", item=item)
    if type(c.field_types) is not tuple or len(c.field_types) != c.arity:
        _fail("global", f"{c.arity} fields need {c.arity} field types", item=item)
    for index, spec in enumerate(c.field_types):
        problem = _spec_problem(spec)
        if problem is None:
            problem = _var_problem(spec, c.type_arity)
        if problem is not None:
            _fail("global", f"the type of field {index} is invalid: {problem}", item=item)


def _var_problem(spec: Any, limit: int) -> str | None:
    """Why a valid ``spec`` uses a type variable outside ``0 .. limit-1``, or None."""
    stack = [spec]
    while stack:
        item = stack.pop()
        if item[0] == "var" and item[1] >= limit:
            return f"type variable {item[1]} is not one of the type's {limit} parameters"
        if item[0] == "tuple":
            stack.extend(item[1])
        elif item[0] == "adt" and len(item) == 3:
            stack.extend(item[2])
        elif item[0] == "func" and len(item) == 3:
            stack.extend((*item[1], item[2]))
    return None


def _check_constants(constants: Sequence[np.ndarray]) -> None:
    total = 0
    for index, array in enumerate(constants):
        if not isinstance(array, np.ndarray) or array.dtype.str not in ALLOWED_DTYPES:
            _fail(
                "constant", "it must be a numpy array of an allowed dtype", item=f"constant {index}"
            )
        if array.ndim > MAX_RANK:
            _fail("constant", f"rank {array.ndim} exceeds {MAX_RANK}", item=f"constant {index}")
        total += array.nbytes
    if total > MAX_CONSTANT_BYTES:
        _fail("constant", f"constants hold {total} bytes, more than {MAX_CONSTANT_BYTES}")


def _check_primitives(primitives: Sequence[Primitive]) -> None:
    if len(primitives) > MAX_PRIMITIVES:
        _fail("primitive", f"{len(primitives)} primitives exceed MAX_PRIMITIVES = {MAX_PRIMITIVES}")
    seen: dict[str, int] = {}
    for index, primitive in enumerate(primitives):
        name = primitive.name
        if type(name) is not str or not name:
            _fail("primitive", "the name must be a non-empty string", item=f"primitive {index}")
        if name in seen:
            _fail("primitive", f"primitives {seen[name]} and {index} are both named {name!r}")
        seen[name] = index
        _check_description(index, name, primitive.description)


def _signature(description: Any) -> tuple[int, int] | None:
    """(number of inputs, number of outputs) of a description, or None if malformed."""
    if _signature_problem(description) is not None:
        return None
    return len(description["inputs"]), len(description["outputs"])


def _signature_problem(description: Any) -> str | None:
    """Why the ``inputs`` and ``outputs`` of a description are not lists of [dtype, ndim].

    Every primitive, a numba kernel or a shape function, has this signature; the
    interpreter reads it to check arguments, so it is checked here for both kinds
    before the kind-specific checker sees the description.
    """
    if not isinstance(description, dict):
        return f"the description must be a map, found {type(description).__name__}"
    for key in ("inputs", "outputs"):
        if key not in description:
            return f"the description has no {key!r} list"
        values = description[key]
        if not isinstance(values, (list, tuple)):
            return f"{key!r} must be a list of [dtype, ndim] pairs, found {_brief(values)}"
        for index, pair in enumerate(values):
            if (
                not isinstance(pair, (list, tuple))
                or len(pair) != 2
                or type(pair[0]) is not str
                or type(pair[1]) is not int
            ):
                return (
                    f"{key}[{index}] must be a [dtype, ndim] pair (a string and an int), "
                    f"found {_brief(pair)}"
                )
    return None


def _check_description(index: int, name: str, description: Any) -> None:
    item = f"primitive {index} ({name[:60]!r})"
    problem = _signature_problem(description)
    if problem is not None:
        _fail("kernel", problem, item=item)
    from vm.kernels import KernelDescriptionError  # deferred: numba, verifying needs none

    # A numba kernel's description, or a shape function's.
    from vm.shape_funcs import check_primitive  # deferred: numba, verifying needs none

    try:
        check_primitive(description)
    except KernelDescriptionError as err:
        _fail("kernel", str(err), item=item)
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, RecursionError) as err:
        # The description is untrusted input; a checker that trips over it still means
        # the file cannot be used, and loading must only raise load errors.
        _fail(
            "kernel",
            f"the description could not be checked ({type(err).__name__}: {err})",
            item=item,
        )


# ---- type specs ------------------------------------------------------------------------------


def _spec_problem(spec: Any) -> str | None:
    """Why ``spec`` is not a valid type spec (see vm.program), or None if it is."""
    stack: list[tuple[Any, int]] = [(spec, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_NESTING:
            return f"it is nested deeper than {MAX_NESTING}"
        if type(item) is not tuple or not item or type(item[0]) is not str:
            return f"{_brief(item)} is not a tuple starting with a kind"
        kind = item[0]
        if kind == "tensor":
            if len(item) != 3 or type(item[1]) is not tuple or not _is_dtype(item[2]):
                return f"{_brief(item)} is not ('tensor', dims, dtype) with a known dtype"
            dims = item[1]
            if len(dims) > MAX_RANK or any(
                type(d) is not int or not -1 <= d <= MAX_INDEX for d in dims
            ):
                return f"{_brief(item)} has dimensions that are not ints >= -1 (at most {MAX_RANK})"
        elif kind == "tuple":
            if len(item) != 2 or type(item[1]) is not tuple:
                return f"{_brief(item)} is not ('tuple', (spec, ...))"
            stack.extend((field, depth + 1) for field in item[1])
        elif kind == "adt":
            if (
                len(item) not in (2, 3)
                or type(item[1]) is not str
                or not item[1]
                or (len(item) == 3 and type(item[2]) is not tuple)
            ):
                return (
                    f"{_brief(item)} is not ('adt', type_name) or ('adt', type_name, (spec, ...))"
                )
            if len(item) == 3:
                stack.extend((arg, depth + 1) for arg in item[2])
        elif kind == "func":
            if len(item) == 3 and type(item[1]) is tuple:
                stack.extend((p, depth + 1) for p in (*item[1], item[2]))
            elif len(item) != 1:
                return f"{_brief(item)} is not ('func',) or ('func', (spec, ...), spec)"
        elif kind == "var":
            if len(item) != 2 or type(item[1]) is not int or not 0 <= item[1] <= MAX_INDEX:
                return f"{_brief(item)} is not ('var', n) with n an int from 0 to {MAX_INDEX}"
        elif kind == "any":
            if len(item) != 1:
                return f"{_brief(item)} is not ('any',)"
        else:
            return f"unknown type kind {_brief(kind)}"
    return None


# ---- code -------------------------------------------------------------------------------------


class _Context:
    """What every function's checks look up: table sizes and arities."""

    def __init__(
        self,
        functions: Sequence[VMFunction],
        constants: Sequence[np.ndarray],
        primitives: Sequence[Primitive],
        constructors: Sequence[ConstructorInfo],
    ) -> None:
        self.arities = [len(f.params) for f in functions]
        self.names = [f.name for f in functions]
        self.num_constants = len(constants)
        self.signatures = [_signature(p.description) for p in primitives]
        self.constructors = {c.tag: c for c in constructors}


class _FunctionVerifier:
    def __init__(self, context: _Context, function: VMFunction) -> None:
        self.context = context
        self.function = function
        self.name = function.name
        self.size = 0
        self.count = 0

    def fail(self, detail: str, pc: int | None = None, opname: str | None = None) -> NoReturn:
        _fail("code", detail, self.name, pc, opname)

    def run(self) -> None:
        self.check_signature()
        code = self.function.instructions
        self.count = len(code)
        if not code:
            self.fail("the function has no instructions (it must end with ret, goto or fatal)")
        if len(code) > MAX_INSTRUCTIONS:
            self.fail(f"{len(code)} instructions exceed MAX_INSTRUCTIONS = {MAX_INSTRUCTIONS}")
        for pc, instruction in enumerate(code):
            self.check_instruction(pc, instruction)
        last = OPCODES[Opcode(code[-1].opcode)]
        if not last.terminator:
            self.fail(
                f"the last instruction is {last.name}; a function must end with Ret, Goto or "
                "Fatal so control cannot fall off the end",
                len(code) - 1,
                last.name,
            )
        check_dataflow(self.function, self.fail)

    def check_signature(self) -> None:
        f = self.function
        params, types = f.params, f.param_types
        if type(params) is not tuple or any(type(p) is not str for p in params):
            self.fail("the parameter names must be a tuple of strings")
        if type(types) is not tuple or len(types) != len(params):
            self.fail(f"{len(params)} parameters need {len(params)} parameter types")
        for index, spec in enumerate(types):
            problem = _spec_problem(spec)
            if problem:
                self.fail(
                    f"the type of parameter {index} ({params[index][:40]!r}) is invalid: {problem}"
                )
        problem = _spec_problem(f.ret_type)
        if problem:
            self.fail(f"the return type is invalid: {problem}")
        size = f.register_file_size
        if type(size) is not int or not 0 <= size <= MAX_REGISTERS:
            self.fail(
                f"the register file size {_brief(size)} must be an int from 0 to "
                f"MAX_REGISTERS = {MAX_REGISTERS}"
            )
        if len(params) > size:
            self.fail(
                f"{len(params)} parameters do not fit in a frame of {size} registers "
                "(parameters occupy registers 0..arity-1)"
            )
        self.size = size

    def check_instruction(self, pc: int, instruction: Any) -> None:
        if not isinstance(instruction, Instruction):
            self.fail(f"{_brief(instruction)} is not an Instruction", pc)
        number = instruction.opcode
        if type(number) is bool or not isinstance(number, int) or number not in _KNOWN_OPCODES:
            self.fail(f"unknown opcode {_brief(number)}", pc)
        info = OPCODES[Opcode(number)]
        operands = instruction.operands
        if type(operands) is not tuple or len(operands) != len(info.operands):
            names = ", ".join(info.operand_names) or "none"
            found = len(operands) if isinstance(operands, (tuple, list)) else _brief(operands)
            self.fail(
                f"{len(info.operands)} operands expected ({names}), found {found}", pc, info.name
            )
        for (name, kind), value in zip(info.operands, operands):
            problem = self.operand_problem(pc, kind, value)
            if problem:
                self.fail(f"operand {name}: {problem}", pc, info.name)
        cross_check = _CROSS_CHECKS.get(info.opcode)
        if cross_check is not None:
            problem = cross_check(self.context, instruction)
            if problem:
                self.fail(problem, pc, info.name)

    def operand_problem(self, pc: int, kind: OperandKind, value: Any) -> str | None:
        if kind in (OperandKind.REGS, OperandKind.SHAPE):
            if type(value) is not tuple:
                return f"must be a tuple of ints, found {type(value).__name__}"
            if kind is OperandKind.SHAPE:
                if len(value) > MAX_RANK:
                    return f"rank {len(value)} exceeds {MAX_RANK}"
                for dim in value:
                    if type(dim) is not int or not 0 <= dim <= MAX_INDEX:
                        return f"dimension {_brief(dim)} must be a non-negative int"
                return None
            for register in value:
                problem = self.register_problem(register)
                if problem:
                    return problem
            return None
        if kind is OperandKind.DTYPE:
            if not _is_dtype(value):
                return f"unknown dtype {_brief(value)} (expected one of {', '.join(DTYPE_NAMES)})"
            return None
        if type(value) is not int:
            return f"must be an int, found {type(value).__name__}"
        if kind in (OperandKind.REG, OperandKind.DST):
            return self.register_problem(value)
        if kind is OperandKind.CONST:
            return _index_problem(
                "constant index", value, self.context.num_constants, "constant pool"
            )
        if kind is OperandKind.FUNC:
            return _index_problem(
                "function index", value, len(self.context.arities), "function table"
            )
        if kind is OperandKind.PRIM:
            return _index_problem(
                "primitive index", value, len(self.context.signatures), "primitive table"
            )
        if kind is OperandKind.OFFSET:
            if value == 0:
                return "a jump offset of 0 would loop on itself forever"
            target = pc + value
            if not 0 <= target < self.count:
                return f"jump target {target} is outside the function ({_range(self.count)})"
            return None
        if kind is OperandKind.TAG:
            if not 0 <= value <= MAX_INDEX:
                return f"tag {value} must be from 0 to {MAX_INDEX}"
            return None
        if not INT64_MIN <= value <= INT64_MAX:  # IMM
            return f"immediate {value} does not fit in 64 bits"
        return None

    def register_problem(self, register: Any) -> str | None:
        if type(register) is not int:
            return f"register {_brief(register)} must be an int"
        if not 0 <= register < self.size:
            return f"register ${register} is outside the frame (registers {_range(self.size)})"
        return None


_KNOWN_OPCODES = frozenset(int(op) for op in OPCODES)


def _index_problem(what: str, value: int, count: int, table: str) -> str | None:
    if 0 <= value < count:
        return None
    return f"{what} {value} is outside the {table} ({_range(count)})"


# ---- rules that relate an operand to another table -------------------------------------------


def _check_invoke(context: _Context, ins: Instruction) -> str | None:
    arity = context.arities[ins.func_index]
    if len(ins.args) != arity:
        callee = context.names[ins.func_index]
        return f"{len(ins.args)} arguments passed to {callee!r}, which takes {arity}"
    return None


def _check_alloc_closure(context: _Context, ins: Instruction) -> str | None:
    arity = context.arities[ins.func_index]
    if len(ins.captured) > arity:
        callee = context.names[ins.func_index]
        return (
            f"{len(ins.captured)} captured values for {callee!r}, which takes only {arity} "
            "parameters (captured values are its first parameters)"
        )
    return None


def _check_alloc_adt(context: _Context, ins: Instruction) -> str | None:
    if ins.tag == 0:
        return None
    constructor = context.constructors.get(ins.tag)
    if constructor is None:
        known = ", ".join(f"{c.name}={t}" for t, c in sorted(context.constructors.items())[:20])
        return f"tag {ins.tag} is neither 0 (tuple) nor a known constructor ({known or 'none'})"
    if len(ins.fields) != constructor.arity:
        return (
            f"constructor {constructor.name} (tag {ins.tag}) takes {constructor.arity} fields, "
            f"{len(ins.fields)} given"
        )
    return None


def _check_invoke_packed(context: _Context, ins: Instruction) -> str | None:
    signature = context.signatures[ins.prim_index]
    if signature is None:  # unreachable: descriptions are checked before any code
        return f"primitive {ins.prim_index} has no valid description"
    inputs, outputs = signature
    if ins.num_outputs != outputs:
        return (
            f"num_outputs is {ins.num_outputs}, but primitive {ins.prim_index} has "
            f"{outputs} outputs"
        )
    if len(ins.args) != inputs + outputs:
        return (
            f"{len(ins.args)} registers passed to primitive {ins.prim_index}, which takes "
            f"{inputs} inputs and {outputs} outputs"
        )
    return None


def _non_negative(operand: str) -> Callable[[_Context, Instruction], str | None]:
    def check(context: _Context, ins: Instruction) -> str | None:
        value = getattr(ins, operand)
        if not 0 <= value <= MAX_INDEX:
            return f"operand {operand} is {value}; it must be from 0 to {MAX_INDEX}"
        return None

    return check


def _check_alignment(context: _Context, ins: Instruction) -> str | None:
    value = ins.alignment
    if value < 1 or value > MAX_INDEX or value & (value - 1):
        return f"alignment {value} must be a positive power of two"
    return None


_CROSS_CHECKS: dict[Opcode, Callable[[_Context, Instruction], str | None]] = {
    Opcode.Invoke: _check_invoke,
    Opcode.AllocClosure: _check_alloc_closure,
    Opcode.AllocADT: _check_alloc_adt,
    Opcode.InvokePacked: _check_invoke_packed,
    Opcode.GetField: _non_negative("index"),
    Opcode.AllocTensor: _non_negative("offset"),
    Opcode.AllocTensorReg: _non_negative("offset"),
    Opcode.AllocStorage: _check_alignment,
}


# ---- data flow: registers and memory are written before they are read ------------------------

# What an operand requires of the register it names, checked with the state before the
# instruction; every requirement includes that the register is defined (written on every path).
_DEFINED, _WRITTEN, _OWN, _STORAGE = range(4)  # indices into the state tuple


def check_dataflow(function: VMFunction, fail: Callable[..., NoReturn]) -> None:
    """Check the rules that hold on every path to each instruction.

    1. Each register read was written earlier (parameters are written on entry).
    2. No uninitialized byte is read or handed on: a storage from ``alloc_storage`` or a
       tensor from ``alloc_tensor`` holds undefined bytes until a kernel writes the
       tensor, and until then it may only be viewed (``alloc_tensor``, ``reshape_tensor``,
       ``shape_of``, ``move``), never read by a kernel, returned, passed to a call, put
       in an ADT or a closure, or tested.
    3. A kernel writes only into tensors the function allocated itself: each output
       register holds, on every path, a tensor made by ``alloc_tensor`` or
       ``alloc_tensor_reg`` (or a move or reshape of one), never a parameter (the
       caller's input), a constant or a value from a call.
    4. The storage operand of ``alloc_tensor`` holds a buffer from ``alloc_storage``.

    A forward must-analysis over basic blocks; the facts of each register are bits of
    four Python ints (defined, written, own memory, storage buffer). It converges in a
    few sweeps for the code a compiler emits. Unreachable code is not checked (it never
    runs). Assumes the per-instruction checks passed.
    """
    code = function.instructions
    count = len(code)
    needs: list[list[tuple[int, str, int]]] = []  # per pc: (register, what it is, requirement)
    effects: list[tuple[int, int, int, Result, int]] = []  # (outputs, clears, dst, how, source)
    successors: list[list[int]] = []
    leaders = {0}
    for pc, ins in enumerate(code):
        info = OPCODES[Opcode(ins.opcode)]
        operands = dict(zip(info.operand_names, ins.operands))
        need: list[tuple[int, str, int]] = []
        outputs = clears = dst = 0
        targets: list[int] = []
        first_output = None
        if info.writes_outputs:
            first_output = len(operands["args"]) - operands["num_outputs"]
        for name, kind in info.operands:
            value = operands[name]
            if kind is OperandKind.REG:
                if name in info.shallow:
                    is_storage = info.result is Result.TENSOR and name == info.source
                    need.append((value, f"operand {name}", _STORAGE if is_storage else _DEFINED))
                else:
                    need.append((value, f"operand {name}", _WRITTEN))
            elif kind is OperandKind.REGS:
                for index, register in enumerate(value):
                    if first_output is not None and index >= first_output:
                        need.append((register, f"output {index - first_output}", _OWN))
                        outputs |= 1 << register
                    else:
                        need.append((register, f"operand {name}[{index}]", _WRITTEN))
            elif kind is OperandKind.DST:
                if info.clears:  # the register counts as unwritten afterwards
                    clears |= 1 << value
                else:
                    dst = 1 << value
            elif kind is OperandKind.OFFSET:
                targets.append(pc + value)
        source = operands[info.source] if info.result is Result.ALIAS else 0
        needs.append(need)
        effects.append((outputs, clears, dst, info.result, source))
        if not targets and not info.terminator:
            targets.append(pc + 1)
        successors.append(targets)
        if targets != [pc + 1]:
            leaders.update(targets)
            if pc + 1 < count:
                leaders.add(pc + 1)
    starts = sorted(leaders)
    block_of = {start: b for b, start in enumerate(starts)}
    ends = starts[1:] + [count]

    def step(pc: int, state: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
        defined, written, own, storage = state
        outputs, clears, dst, how, source = effects[pc]
        written |= outputs
        if dst:
            keep = ~dst
            defined |= dst
            if how is Result.VALUE:
                written, own, storage = written | dst, own & keep, storage & keep
            elif how is Result.STORAGE:
                written, own, storage = written & keep, own & keep, storage | dst
            elif how is Result.TENSOR:
                written, own, storage = written & keep, own | dst, storage & keep
            else:  # an alias keeps every fact its source has
                written = written & keep | (dst if written >> source & 1 else 0)
                own = own & keep | (dst if own >> source & 1 else 0)
                storage = storage & keep | (dst if storage >> source & 1 else 0)
        if clears:
            keep = ~clears
            defined, written, own, storage = (
                defined & keep,
                written & keep,
                own & keep,
                storage & keep,
            )
        return defined, written, own, storage

    arity = len(function.params)
    params = (1 << arity) - 1
    block_in: list[tuple[int, int, int, int] | None] = [None] * len(starts)
    block_in[0] = (params, params, 0, 0)
    work = [0]  # a heap: lowest block first, so forward code settles in about one sweep
    queued = {0}
    while work:
        block = heapq.heappop(work)
        queued.discard(block)
        state = block_in[block]
        assert state is not None
        for pc in range(starts[block], ends[block]):
            state = step(pc, state)
        for target in successors[ends[block] - 1]:
            successor = block_of[target]
            old = block_in[successor]
            new = state if old is None else tuple(a & b for a, b in zip(old, state))
            if new != old:
                block_in[successor] = new  # type: ignore[assignment]
                if successor not in queued:
                    queued.add(successor)
                    heapq.heappush(work, successor)

    for block, entry in enumerate(block_in):
        if entry is None:
            continue
        state = entry
        for pc in range(starts[block], ends[block]):
            for register, what, requirement in needs[pc]:
                if not state[_DEFINED] >> register & 1:
                    problem = (
                        f"register ${register} is read before it is written on some path "
                        "to this instruction"
                    )
                elif requirement != _DEFINED and not state[requirement] >> register & 1:
                    problem = _memory_problem(register, what, requirement, arity)
                else:
                    continue
                fail(problem, pc, OPCODES[Opcode(code[pc].opcode)].name)
            state = step(pc, state)


def _memory_problem(register: int, what: str, requirement: int, arity: int) -> str:
    if requirement == _WRITTEN:
        return (
            f"{what}: register ${register} may hold uninitialized memory (on some path to "
            "this instruction it is a storage from alloc_storage, or a tensor from "
            "alloc_tensor that no kernel has written yet)"
        )
    if register < arity:
        held = "a parameter (the caller's value)"
    else:
        held = "a value it did not allocate (a parameter, a constant, a call's result or a field)"
    if requirement == _STORAGE:
        return (
            f"{what}: register ${register} must hold a buffer from alloc_storage on every "
            f"path to this instruction, but it may hold {held}"
        )
    return (
        f"{what}: register ${register} must hold a tensor this function allocated "
        f"(alloc_tensor or alloc_tensor_reg) on every path to this instruction, but it may "
        f"hold {held}; a kernel writes only into the function's own tensors"
    )
