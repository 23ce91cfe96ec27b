"""Plain-data pieces of an executable: instructions, functions, type specs, constructors.

Runtime layer (``vm``); imports ``vm.isa`` only.

Everything here is immutable plain data (ints, strings, tuples, dicts of plain
data, numpy arrays for constants) so that saving and loading are mirror images and
nothing in a file is ever run as code.

Type specs
----------
A *type spec* describes a parameter or result type with plain data, so the VM can
check arguments without the compiler:

- ``("tensor", (d0, d1, ...), dtype)``: a tensor; a dimension of ``-1`` is ``?``.
- ``("tuple", (spec, ...))``: a tuple.
- ``("adt", type_name, (arg, ...))``: a value of the algebraic data type ``type_name``
  applied to the type arguments ``arg`` (specs); ``("adt", type_name)`` (format 1.0 and
  1.1 files) leaves the arguments unknown.
- ``("func", (param, ...), result)``: a closure of that signature; ``("func",)`` (older
  files, or a function type with type parameters of its own) leaves it unknown.
- ``("var", n)``: type variable ``n`` of the scope: of a function's signature (its
  parameter and result types share one numbering) or, in a constructor's field types,
  parameter ``n`` of the constructor's type.
- ``("any",)``: anything (how format 1.0 and 1.1 files spell a type variable).

The VM checks a caller-made value against the spec of the parameter it is passed to
(see :mod:`vm.value_types`); where a spec leaves something unknown, only the value's
own well-formedness is checked.

Kernel descriptions
-------------------
A primitive's *description* is a small dataflow graph, plain data, from which the
runtime builds (or finds in its cache) one numba kernel::

    {
      "inputs":  [[dtype, ndim], ...],          # the kernel's tensor inputs, in order
      "outputs": [[dtype, ndim], ...],          # its outputs, written in place
      "nodes": [                               # operator applications in topological order
        {"op": "add", "args": [0, 1], "attrs": {...}, "outputs": [[dtype, ndim], ...]},
        ...
      ],
      "results": [value_index, ...],           # which values are the kernel's outputs
    }

Values are numbered in order: the inputs first (``0 .. len(inputs)-1``), then each
node's outputs in order (most operators have one output; ``split`` has several).
A single-operator primitive has one node; a fused group has several. Attribute
values are plain data (bool, int, float, str, None, lists of them). Shapes are not
part of a description: kernels are generic over shapes, and read them from their
arguments, so one compiled kernel serves every shape with the same structure.

A primitive may instead be a *shape function* (:mod:`vm.shape_funcs`), which computes a
kernel's output shapes at run time for outputs of ``?`` dimensions; the VM runs it in
Python, not as a numba kernel. Its description holds the kernel's::

    {
      "shape_func": {...},                      # the kernel description it computes shapes for
      "inputs":  [["int64", 1], ...],           # one shape vector per kernel input
      "outputs": [["int64", 1], ...,            # one shape vector per kernel output
                  ["int64", 0], ...],           # then one size in bytes per kernel output
    }
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vm.isa import OPCODES, Opcode

TypeSpec = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Instruction:
    """One instruction: an opcode and its operands in the order of its ISA row.

    Register lists and shapes are tuples of ints; a dtype is a string.
    """

    opcode: Opcode
    operands: tuple[Any, ...]

    def __getattr__(self, name: str) -> Any:
        info = OPCODES[object.__getattribute__(self, "opcode")]
        try:
            index = info.operand_names.index(name)
        except ValueError:
            raise AttributeError(f"{info.name} has no operand {name!r}") from None
        return object.__getattribute__(self, "operands")[index]


@dataclass(frozen=True)
class VMFunction:
    """A function of the executable.

    Parameters occupy registers ``0 .. len(params)-1``.
    """

    name: str
    params: tuple[str, ...]
    param_types: tuple[TypeSpec, ...]
    ret_type: TypeSpec
    register_file_size: int
    instructions: tuple[Instruction, ...]

    @property
    def arity(self) -> int:
        return len(self.params)


@dataclass(frozen=True)
class ConstructorInfo:
    """A constructor of an algebraic data type: its tag, name, field count and type name.

    ``type_arity`` is how many type parameters the type takes and ``field_types`` the
    spec of each field, in which ``("var", i)`` is the type's parameter ``i``; files of
    format 1.0 and 1.1 do not record them (``field_types`` is None: fields unchecked).
    """

    tag: int
    name: str
    arity: int
    type_name: str
    type_arity: int = 0
    field_types: tuple[TypeSpec, ...] | None = None


@dataclass(frozen=True)
class Primitive:
    """A kernel: its name (``vm_mod_fused_add`` style) and structured description."""

    name: str
    description: dict[str, Any] = field(hash=False, compare=True)
