"""Encode and decode an executable's sections, mirror images of each other.

Runtime layer (``vm``); imports ``serialization`` and the plain-data modules of ``vm``. It
sits below :mod:`vm.executable`: :func:`encode` reads any object with an executable's four
sections and :func:`decode` returns the sections, from which the executable builds itself.

The sections of :data:`serialization.formats.EXECUTABLE_FORMAT`, in order:

``global``
    ``{"functions": [name, ...], "constructors": [[tag, name, arity, type_name,
    type_arity, [field type spec, ...]], ...]}``; function names in function-index order.
    Format 1.0 and 1.1 files have constructors of four entries, without field types.
``constant``
    ``[array, ...]``, numpy arrays in the ndarray extension type.
``primitive``
    ``[name, ...]`` in primitive-index order.
``kernel``
    ``[description, ...]``: the primitives' structured descriptions, same order.
``code``
    ``[{"name", "params", "param_types", "ret_type", "register_file_size",
    "instruction_count", "code"}, ...]`` per function, where ``code`` is every
    instruction flattened into one list: the opcode number, then each operand by its
    kind in the ISA table (:mod:`vm.isa`): a register list or shape is its length
    followed by its items, a dtype is a string, anything else one int.

Decoding checks structure only (exact keys, exact types, declared lengths against
actual ones, resource caps) and raises :class:`vm.errors.MalformedExecutableError`;
the meaning of indices, registers and jumps is :mod:`vm.verify`'s job.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, NoReturn, Protocol

import numpy as np

from serialization.errors import FormatError, VersionError
from serialization.formats import EXECUTABLE_FORMAT
from serialization.framing import read_document, write_document
from serialization.limits import (
    MAX_CONSTANT_BYTES,
    MAX_CONSTRUCTORS,
    MAX_FUNCTIONS,
    MAX_INDEX,
    MAX_INSTRUCTIONS,
    MAX_PRIMITIVES,
    MAX_REGISTERS,
)
from vm.canonical import canonical_description, canonical_type_spec
from vm.errors import MalformedExecutableError
from vm.isa import OPCODES, Opcode, OperandKind
from vm.program import ConstructorInfo, Instruction, Primitive, VMFunction

#: Operand kinds stored as a length followed by that many ints.
LIST_KINDS = frozenset({OperandKind.REGS, OperandKind.SHAPE})

_FUNCTION_KEYS = (
    "name",
    "params",
    "param_types",
    "ret_type",
    "register_file_size",
    "instruction_count",
    "code",
)

#: Opcode number -> (opcode, operand kinds), derived from the ISA table.
_LAYOUT: dict[int, tuple[Opcode, tuple[tuple[str, OperandKind], ...]]] = {
    int(op): (op, info.operands) for op, info in OPCODES.items()
}


# ---- encoding -----------------------------------------------------------------------------


class ExecutableSections(Protocol):
    """What :func:`encode` reads: an executable's sections (:class:`vm.Executable` has them)."""

    @property
    def functions(self) -> Sequence[VMFunction]: ...

    @property
    def constant_values(self) -> Sequence[np.ndarray]: ...

    @property
    def primitives(self) -> Sequence[Primitive]: ...

    @property
    def constructors(self) -> Sequence[ConstructorInfo]: ...


class DecodedSections(NamedTuple):
    """What :func:`decode` returns, in :class:`vm.Executable`'s constructor order."""

    functions: list[VMFunction]
    constants: list[np.ndarray]
    primitives: list[Primitive]
    constructors: list[ConstructorInfo]


def encode(exe: ExecutableSections) -> bytes:
    """The bytes of ``exe`` (deterministic: equal executables give equal bytes).

    Raises
    ------
    ValueError, TypeError
        If an instruction does not match its ISA row or a value cannot be written;
        the message names the function and instruction.
    """
    total = sum(c.nbytes for c in exe.constant_values)
    if total > MAX_CONSTANT_BYTES:
        raise ValueError(
            f"the constants hold {total} bytes; an executable holds at most "
            f"{MAX_CONSTANT_BYTES} (serialization.limits.MAX_CONSTANT_BYTES)"
        )
    global_section = {
        "functions": [f.name for f in exe.functions],
        "constructors": [_constructor_entry(c) for c in exe.constructors],
    }
    code_section = [
        {
            "name": f.name,
            "params": list(f.params),
            "param_types": list(f.param_types),
            "ret_type": f.ret_type,
            "register_file_size": f.register_file_size,
            "instruction_count": len(f.instructions),
            "code": flatten_code(f),
        }
        for f in exe.functions
    ]
    return write_document(
        EXECUTABLE_FORMAT,
        [
            ("global", global_section),
            ("constant", list(exe.constant_values)),
            ("primitive", [p.name for p in exe.primitives]),
            ("kernel", [p.description for p in exe.primitives]),
            ("code", code_section),
        ],
    )


def _constructor_entry(c: ConstructorInfo) -> list[Any]:
    if c.field_types is None:  # loaded from a format 1.0 or 1.1 file: write what it had
        return [c.tag, c.name, c.arity, c.type_name]
    return [c.tag, c.name, c.arity, c.type_name, c.type_arity, list(c.field_types)]


def flatten_code(function: VMFunction) -> list[Any]:
    """``function``'s instructions as one flat list of words (see the module docstring)."""
    words: list[Any] = []
    for pc, instruction in enumerate(function.instructions):
        info = OPCODES.get(instruction.opcode) if isinstance(instruction, Instruction) else None
        if info is None or len(instruction.operands) != len(info.operands):
            raise ValueError(
                f"cannot save function {function.name!r}, instruction {pc}: "
                f"{instruction!r} does not match the instruction set"
            )
        words.append(int(info.opcode))
        for (_, kind), value in zip(info.operands, instruction.operands):
            if kind in LIST_KINDS:
                words.append(len(value))
                words.extend(value)
            else:
                words.append(value)
    return words


# ---- decoding -----------------------------------------------------------------------------


def _malformed(section: str, detail: str) -> NoReturn:
    raise MalformedExecutableError(f"malformed executable: {section} section, {detail}", section)


def decode(data: bytes) -> DecodedSections:
    """The sections of the executable stored in ``data``, structurally checked, not verified.

    ``vm.Executable(*decode(data))`` is the executable.

    Raises
    ------
    vm.errors.MalformedExecutableError
        If ``data`` does not decode; the message and ``err.section`` name the section.
    """
    try:
        document = read_document(EXECUTABLE_FORMAT, data)
    except VersionError as err:
        raise MalformedExecutableError(f"unsupported executable: {err.detail}", "header") from None
    except FormatError as err:
        raise MalformedExecutableError(f"malformed executable: {err}", err.section) from None
    sections = document.sections
    names, constructors = _decode_global(sections["global"])
    constants = _decode_constants(sections["constant"])
    primitives = _decode_primitives(sections["primitive"], sections["kernel"])
    functions = _decode_code(sections["code"], names)
    return DecodedSections(functions, constants, primitives, constructors)


def _exact_map(section: str, where: str, value: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    if type(value) is not dict:
        _malformed(section, f"{where} must be a map, found {_type(value)}")
    if set(value) != set(keys):
        missing = sorted(set(keys) - set(value))
        # Keys may be str or bytes (msgpack's strict_map_key allows both): sort by repr.
        extra = sorted((key for key in value if key not in keys), key=repr)
        detail = "; ".join(
            part
            for part in (
                f"missing keys {missing}" if missing else "",
                f"unknown keys {[key[:40] for key in extra][:8]}" if extra else "",
            )
            if part
        )
        _malformed(section, f"{where}: {detail}")
    return value


def _list(section: str, where: str, value: Any, limit: int, cap_name: str) -> list[Any]:
    if type(value) is not list:
        _malformed(section, f"{where} must be a list, found {_type(value)}")
    if len(value) > limit:
        _malformed(section, f"{where} has {len(value)} entries, more than {cap_name} = {limit}")
    return value


def _type(value: Any) -> str:
    return type(value).__name__


def _decode_global(value: Any) -> tuple[list[str], list[ConstructorInfo]]:
    table = _exact_map("global", "the global table", value, ("functions", "constructors"))
    names = _list("global", "the function list", table["functions"], MAX_FUNCTIONS, "MAX_FUNCTIONS")
    for index, name in enumerate(names):
        if type(name) is not str:
            _malformed(
                "global", f"function {index}: the name must be a string, found {_type(name)}"
            )
    entries = _list(
        "global", "the constructor table", table["constructors"], MAX_CONSTRUCTORS,
        "MAX_CONSTRUCTORS",
    )  # fmt: skip
    constructors = []
    for index, entry in enumerate(entries):
        kinds = [type(x) for x in entry] if type(entry) is list else None
        if kinds == [int, str, int, str]:
            constructors.append(ConstructorInfo(*entry))
            continue
        if kinds != [int, str, int, str, int, list]:
            _malformed(
                "global",
                f"constructor {index} must be [tag, name, arity, type_name] (format 1.0 and "
                "1.1) or [tag, name, arity, type_name, type_arity, field_types], found "
                f"{_brief(entry)}",
            )
        try:
            fields = tuple(canonical_type_spec(t) for t in entry[5])
        except ValueError as err:
            _malformed("global", f"constructor {index}: field types: {err}")
        constructors.append(ConstructorInfo(*entry[:5], fields))
    return names, constructors


def _decode_constants(value: Any) -> list[np.ndarray]:
    arrays = _list("constant", "the constant pool", value, MAX_INDEX, "MAX_INDEX")
    total = 0
    for index, array in enumerate(arrays):
        if not isinstance(array, np.ndarray):
            _malformed("constant", f"constant {index} must be an array, found {_type(array)}")
        total += array.nbytes
        if total > MAX_CONSTANT_BYTES:
            _malformed(
                "constant",
                f"constants hold more than MAX_CONSTANT_BYTES = {MAX_CONSTANT_BYTES} bytes",
            )
    return arrays


def _decode_primitives(names: Any, descriptions: Any) -> list[Primitive]:
    names = _list("primitive", "the primitive list", names, MAX_PRIMITIVES, "MAX_PRIMITIVES")
    descriptions = _list(
        "kernel", "the kernel list", descriptions, MAX_PRIMITIVES, "MAX_PRIMITIVES"
    )
    if len(names) != len(descriptions):
        _malformed(
            "kernel",
            f"{len(descriptions)} kernel descriptions for {len(names)} primitives",
        )
    primitives = []
    for index, (name, description) in enumerate(zip(names, descriptions)):
        if type(name) is not str:
            _malformed(
                "primitive", f"primitive {index}: the name must be a string, found {_type(name)}"
            )
        try:
            canonical = canonical_description(description)
        except TypeError as err:
            _malformed("kernel", f"primitive {index} ({name[:60]!r}): {err}")
        primitives.append(Primitive(name, canonical))
    return primitives


def _decode_code(value: Any, names: list[str]) -> list[VMFunction]:
    entries = _list("code", "the function list", value, MAX_FUNCTIONS, "MAX_FUNCTIONS")
    if len(entries) != len(names):
        _malformed("code", f"{len(entries)} functions, but the global section names {len(names)}")
    return [_decode_function(index, entry, names[index]) for index, entry in enumerate(entries)]


def _decode_function(index: int, entry: Any, global_name: str) -> VMFunction:
    where = f"function {index}"
    record = _exact_map("code", where, entry, _FUNCTION_KEYS)
    name = record["name"]
    if name != global_name:
        _malformed(
            "code",
            f"{where} is named {_brief(name)} here but {global_name[:60]!r} in the global section",
        )
    where = f"function {name[:60]!r}"
    params = record["params"]
    if type(params) is not list or any(type(p) is not str for p in params):
        found = _brief(params) if type(params) is list else _type(params)
        _malformed("code", f"{where}: the parameter names must be a list of strings, found {found}")
    param_types = record["param_types"]
    if type(param_types) is not list or len(param_types) != len(params):
        found = f"{len(param_types)} types" if type(param_types) is list else _type(param_types)
        _malformed(
            "code",
            f"{where}: the parameter types must be a list of one type per parameter "
            f"({len(params)}), found {found}",
        )
    size = record["register_file_size"]
    if type(size) is not int or not 0 <= size <= MAX_REGISTERS:
        _malformed(
            "code",
            f"{where}: the register file size must be an int from 0 to MAX_REGISTERS = "
            f"{MAX_REGISTERS}, found {_brief(size)}",
        )
    count = record["instruction_count"]
    if type(count) is not int or not 0 <= count <= MAX_INSTRUCTIONS:
        _malformed(
            "code",
            f"{where}: the instruction count must be an int from 0 to MAX_INSTRUCTIONS = "
            f"{MAX_INSTRUCTIONS}, found {_brief(count)}",
        )
    code = record["code"]
    if type(code) is not list:
        _malformed("code", f"{where}: the code must be a list, found {_type(code)}")
    instructions = _decode_instructions(where, code, count)
    return VMFunction(
        name,
        tuple(params),
        tuple(canonical_type_spec(t) for t in param_types),
        canonical_type_spec(record["ret_type"]),
        size,
        instructions,
    )


def _decode_instructions(where: str, code: list[Any], count: int) -> tuple[Instruction, ...]:
    instructions: list[Instruction] = []
    end = len(code)
    pos = 0
    while pos < end:
        pc = len(instructions)
        if pc == count:
            _malformed("code", f"{where}: more code than the declared {count} instructions")
        number = code[pos]
        layout = _LAYOUT.get(number) if type(number) is int else None
        if layout is None:
            _malformed("code", f"{where}, instruction {pc}: unknown opcode {_brief(number)}")
        opcode, kinds = layout
        pos += 1
        operands: list[Any] = []
        for operand, kind in kinds:
            at = f"{where}, instruction {pc} ({opcode.name})"
            if pos >= end:
                _malformed("code", f"{at}: the code ends before operand {operand}")
            word = code[pos]
            pos += 1
            if kind in LIST_KINDS:
                if type(word) is not int or not 0 <= word <= end - pos:
                    _malformed(
                        "code",
                        f"{at}: operand {operand} declares {_brief(word)} items but only "
                        f"{end - pos} words remain",
                    )
                items = code[pos : pos + word]
                pos += word
                wrong = [item for item in items if type(item) is not int]
                if wrong:
                    _malformed(
                        "code",
                        f"{at}: operand {operand} must hold ints, found {_brief(wrong[0])}",
                    )
                operands.append(tuple(items))
            elif kind is OperandKind.DTYPE:
                if type(word) is not str:
                    _malformed(
                        "code",
                        f"{at}: operand {operand} must be a dtype name, found {_brief(word)}",
                    )
                operands.append(word)
            else:
                if type(word) is not int:
                    _malformed(
                        "code", f"{at}: operand {operand} must be an int, found {_type(word)}"
                    )
                operands.append(word)
        instructions.append(Instruction(opcode, tuple(operands)))
    if len(instructions) != count:
        _malformed("code", f"{where}: {len(instructions)} instructions, but {count} were declared")
    return tuple(instructions)


def _brief(value: Any, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."
