"""The assembler: build executables instruction by instruction, checked against the ISA table.

Runtime layer (``vm``); imports ``vm.isa``, ``vm.program``, ``vm.executable`` and ``vm.verify``.

The compiler's code generator and the VM's own tests both use this builder, so VM
tests need no compiler. Operands are checked by kind as they are emitted; jumps
may target labels that are placed later and are back-patched into relative
offsets; constants are interned; :meth:`ExecutableBuilder.build` verifies the result.

Example
-------
>>> from vm.builder import ExecutableBuilder
>>> from vm.isa import Opcode
>>> b = ExecutableBuilder()
>>> f = b.function("main", ["x"], [("tensor", (2,), "float32")], ("tensor", (2,), "float32"))
>>> f.emit(Opcode.Ret, 0)
>>> exe = b.build()
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from vm.canonical import canonical_type_spec
from vm.executable import Executable
from vm.isa import OPCODES, Opcode, OperandKind
from vm.ndarray import frozen
from vm.program import ConstructorInfo, Instruction, Primitive, TypeSpec, VMFunction
from vm.verify import verify as verify_executable


class Label:
    """A jump target inside one function; placed once, referenced any number of times."""

    __slots__ = ("pc",)

    def __init__(self) -> None:
        self.pc: int | None = None


class FunctionBuilder:
    """Emits the instructions of one function. Parameters are registers ``0 .. arity-1``."""

    def __init__(
        self,
        name: str,
        params: Sequence[str],
        param_types: Sequence[TypeSpec],
        ret_type: TypeSpec,
    ) -> None:
        if len(params) != len(param_types):
            raise ValueError(
                f"function {name}: {len(params)} parameter names but {len(param_types)} types"
            )
        self.name = name
        self.params = tuple(params)
        self.param_types = tuple(param_types)
        self.ret_type = ret_type
        self.num_registers = len(self.params)
        self._code: list[list[Any]] = []
        self._opcodes: list[Opcode] = []
        self._fixups: list[tuple[int, int, Label]] = []  # (pc, operand position, label)

    @property
    def pc(self) -> int:
        """The index the next emitted instruction will have."""
        return len(self._code)

    def reg(self) -> int:
        """A fresh register."""
        self.num_registers += 1
        return self.num_registers - 1

    def label(self) -> Label:
        """A new, unplaced label."""
        return Label()

    def place(self, label: Label) -> None:
        """Place ``label`` at the next instruction."""
        if label.pc is not None:
            raise ValueError(f"function {self.name}: label placed twice")
        label.pc = self.pc

    def emit(self, opcode: Opcode, *operands: Any) -> int:
        """Append an instruction; returns its pc. OFFSET operands may be :class:`Label` s."""
        info = OPCODES[opcode]
        if len(operands) != len(info.operands):
            expected = ", ".join(info.operand_names) or "no operands"
            raise TypeError(
                f"{info.name} takes {len(info.operands)} operands ({expected}), got {len(operands)}"
            )
        values: list[Any] = []
        for position, ((name, kind), value) in enumerate(zip(info.operands, operands)):
            if kind is OperandKind.OFFSET and isinstance(value, Label):
                self._fixups.append((self.pc, position, value))
                values.append(0)
                continue
            values.append(_check_operand(info.name, name, kind, value))
            if kind in (OperandKind.REG, OperandKind.DST):
                self.num_registers = max(self.num_registers, values[-1] + 1)
            elif kind is OperandKind.REGS:
                self.num_registers = max(self.num_registers, max(values[-1], default=-1) + 1)
        self._code.append(values)
        self._opcodes.append(opcode)
        return self.pc - 1

    def finish(self) -> VMFunction:
        """Resolve labels and return the finished function."""
        for pc, position, label in self._fixups:
            if label.pc is None:
                raise ValueError(
                    f"function {self.name}: a jump at pc {pc} targets an unplaced label"
                )
            self._code[pc][position] = label.pc - pc
        instructions = tuple(
            Instruction(op, tuple(values)) for op, values in zip(self._opcodes, self._code)
        )
        return VMFunction(
            self.name,
            self.params,
            self.param_types,
            self.ret_type,
            self.num_registers,
            instructions,
        )


def _check_operand(op: str, name: str, kind: OperandKind, value: Any) -> Any:
    where = f"{op} operand {name}"
    if kind in (OperandKind.REGS, OperandKind.SHAPE):
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{where} must be a list of ints, got {value!r}")
        items = tuple(_int(where, v) for v in value)
        if any(v < 0 for v in items):
            raise ValueError(f"{where} must be non-negative, got {items}")
        return items
    if kind is OperandKind.DTYPE:
        if not isinstance(value, str):
            raise TypeError(f"{where} must be a dtype name, got {value!r}")
        return value
    number = _int(where, value)
    if kind in (OperandKind.REG, OperandKind.DST, OperandKind.CONST, OperandKind.FUNC,
                OperandKind.PRIM, OperandKind.TAG) and number < 0:  # fmt: skip
        raise ValueError(f"{where} must be non-negative, got {number}")
    return number


def _int(where: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{where} must be an int, got {value!r}")
    return int(value)


class ExecutableBuilder:
    """Collects functions, constants, primitives and constructors into an Executable."""

    def __init__(self) -> None:
        self._function_names: list[str] = []
        self._functions: dict[str, VMFunction] = {}
        self._constants: list[np.ndarray] = []
        self._constant_keys: dict[tuple, int] = {}
        self._primitives: list[Primitive] = []
        self._primitive_index: dict[str, int] = {}
        self._constructors: dict[int, ConstructorInfo] = {}

    def declare(self, name: str) -> int:
        """Reserve a function index for ``name`` (for calls emitted before its body)."""
        if name not in self._function_names:
            self._function_names.append(name)
        return self._function_names.index(name)

    def function_index(self, name: str) -> int:
        """The index of a declared function."""
        return self._function_names.index(name)

    def function(
        self,
        name: str,
        params: Sequence[str],
        param_types: Sequence[TypeSpec],
        ret_type: TypeSpec,
    ) -> FunctionBuilder:
        """Start a function; call :meth:`add_function` with the builder when done.

        Use as ``fb = b.function(...); ...; b.add_function(fb)``.
        """
        self.declare(name)
        return FunctionBuilder(name, params, param_types, ret_type)

    def add_function(self, fb: FunctionBuilder | VMFunction) -> int:
        """Finish ``fb`` (or take a finished function) and store it at its declared index."""
        index = self.declare(fb.name)
        if fb.name in self._functions:
            raise ValueError(f"function {fb.name} is defined twice")
        self._functions[fb.name] = fb.finish() if isinstance(fb, FunctionBuilder) else fb
        return index

    def add_constant(self, value: np.ndarray) -> int:
        """Intern a constant tensor; equal constants (dtype, shape, bytes) share an index."""
        # np.ascontiguousarray would turn a 0-d array into shape (1,); 0-d arrays are always
        # contiguous, so only copy arrays that need it.
        array = np.asarray(value)
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        # The key is a digest of the memory, not a copy of it: the bytes kept a second copy
        # of every weight (94 MB for ResNet-50) as long as the builder lived, and hashing
        # the memory in place costs no more than copying it.
        flat = array.reshape(-1).view(np.uint8)
        key = (array.dtype.str, array.shape, hashlib.sha256(flat).digest())
        index = self._constant_keys.get(key)
        if index is not None and np.array_equal(
            self._constants[index].reshape(-1).view(np.uint8), flat
        ):
            return index
        index = len(self._constants)
        self._constants.append(frozen(array))
        self._constant_keys.setdefault(key, index)
        return index

    def add_primitive(self, name: str, description: dict[str, Any]) -> int:
        """Intern a primitive by name; the same name must always carry the same description."""
        index = self._primitive_index.get(name)
        if index is not None:
            if self._primitives[index].description != description:
                raise ValueError(f"primitive {name} added twice with different descriptions")
            return index
        self._primitives.append(Primitive(name, description))
        self._primitive_index[name] = len(self._primitives) - 1
        return len(self._primitives) - 1

    def add_constructor(
        self,
        tag: int,
        name: str,
        arity: int,
        type_name: str,
        type_arity: int = 0,
        field_types: Sequence[TypeSpec] | None = None,
    ) -> None:
        """Record an ADT constructor so results can name it and the verifier can check AllocADT.

        ``field_types`` (specs, ``("var", i)`` for the type's parameter ``i`` of
        ``type_arity``) let the VM check the fields of caller-made values.
        """
        fields = None if field_types is None else tuple(canonical_type_spec(t) for t in field_types)
        info = ConstructorInfo(tag, name, arity, type_name, type_arity, fields)
        existing = self._constructors.get(tag)
        if existing is not None and existing != info:
            raise ValueError(f"constructor tag {tag} used for both {existing.name} and {name}")
        self._constructors[tag] = info

    def build(self, verify: bool = True) -> Executable:
        """The finished :class:`vm.executable.Executable` (verified unless ``verify=False``)."""

        missing = [n for n in self._function_names if n not in self._functions]
        if missing:
            raise ValueError(f"functions declared but never defined: {', '.join(missing)}")
        functions = tuple(self._functions[n] for n in self._function_names)
        constructors = tuple(self._constructors[t] for t in sorted(self._constructors))
        exe = Executable(functions, tuple(self._constants), tuple(self._primitives), constructors)
        if verify:
            verify_executable(exe)
        return exe
