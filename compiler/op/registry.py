"""The operator registry: each operator defined once, with everything the compiler needs.

Compiler layer (``compiler.op``).

An :class:`OpDef` holds an operator's attribute schema (names, defaults,
validation; the schema itself is the kernel rule's, from :mod:`vm.kernels.table`), its type
relation (output type from input types and attributes,
with numpy broadcasting and ``?`` dimensions), its numpy reference
implementation (used by the reference interpreter and as the oracle for the
VM's numba kernels), and its fusion pattern. The parser, printer, type
inference, reference interpreter, constant folding, fusion and the VM lowering
all read this one registry.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from compiler.ir import hooks
from compiler.ir.attrs import Attrs, make_attrs
from compiler.ir.expr import Op
from compiler.ir.types import Type, normalize_dtype
from vm.kernels.rules import Attr


class OpPattern(enum.IntEnum):
    """TVM's fusion patterns, from most to least fusible."""

    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    COMM_REDUCE = 3
    OUT_ELEMWISE_FUSABLE = 4
    TUPLE = 7
    OPAQUE = 8


class OpTypeError(TypeError):
    """A type relation rejected its inputs; the message names what was expected and found."""


#: One attribute of an operator: the kernel table's record (:class:`vm.kernels.rules.Attr`),
#: so that each operator's schema is written once, with its kernel rule, and read here.
AttrSpec = Attr


@dataclass(frozen=True)
class OpDef:
    """Everything known about one operator.

    Parameters
    ----------
    name : str
        TVM's name, e.g. ``add`` or ``nn.dense``.
    num_inputs : int
        Number of arguments (``concatenate`` and ``stack`` take one tuple argument).
    type_rel : callable
        ``type_rel(arg_types, attrs) -> Type``; raises :class:`OpTypeError` naming the
        problem. Argument types are fully resolved (no type variables).
    reference : callable
        ``reference(args, attrs) -> ndarray or tuple of ndarrays`` in numpy.
    attrs : tuple of AttrSpec
        The attribute schema, in TVM's order (the printer prints attributes in this order):
        the kernel rule's (:mod:`vm.kernels.table`).
    pattern : OpPattern
        The fusion pattern.
    """

    name: str
    num_inputs: int
    type_rel: Callable[[Sequence[Type], Attrs], Type]
    reference: Callable[[Sequence[np.ndarray], Attrs], object]
    attrs: tuple[AttrSpec, ...] = ()
    pattern: OpPattern = OpPattern.OPAQUE
    doc: str = ""
    arg_names: tuple[str, ...] = field(default=())

    def normalize_attrs(self, attrs: Mapping[str, object] | None) -> Attrs:
        """Validate ``attrs`` against the schema and fill defaults; ``TypeError`` on bad input."""
        given = dict(make_attrs(attrs))
        known = {spec.name for spec in self.attrs}
        unknown = sorted(set(given) - known)
        if unknown:
            expected = ", ".join(sorted(known)) or "no attributes"
            raise TypeError(
                f"operator {self.name} got unknown attribute(s) {', '.join(unknown)}; "
                f"expected {expected}"
            )
        out: dict[str, object] = {}
        for spec in self.attrs:
            if spec.name in given:
                out[spec.name] = _coerce_attr(self.name, spec, given[spec.name])
            elif spec.required:
                raise TypeError(f"operator {self.name} requires attribute {spec.name}")
            else:
                out[spec.name] = spec.default
        return Attrs(out)


def _coerce_attr(op: str, spec: AttrSpec, value: object) -> object:
    where = f"attribute {spec.name} of {op}"
    if value is None:
        if spec.optional or spec.default is None:
            return None
        raise TypeError(f"{where} must not be None")
    kind = spec.kind
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{where} must be an int, got {value!r}")
        value = int(value)
    elif kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
            raise TypeError(f"{where} must be a number, got {value!r}")
        value = float(value)
    elif kind == "bool":
        if isinstance(value, (bool, np.bool_)) or value in (0, 1):
            value = bool(value)
        else:
            raise TypeError(f"{where} must be a bool, got {value!r}")
    elif kind == "str":
        if not isinstance(value, str):
            raise TypeError(f"{where} must be a string, got {value!r}")
    elif kind == "dtype":
        value = normalize_dtype(value)
    elif kind == "dtype_or_empty":
        # TVM's out_dtype="" convention: empty means "the input's dtype".
        if value != "":
            try:
                value = normalize_dtype(value)
            except TypeError as exc:
                raise TypeError(f"{where}: {exc}") from None
    elif kind in ("ints", "int_or_ints"):
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            value = int(value) if kind == "int_or_ints" else (int(value),)
        elif isinstance(value, (list, tuple)):
            items = []
            for v in value:
                if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                    raise TypeError(f"{where} must hold ints, got {value!r}")
                items.append(int(v))
            value = tuple(items)
        else:
            raise TypeError(f"{where} must be an int or a tuple of ints, got {value!r}")
    elif kind == "floats":
        items = value if isinstance(value, (list, tuple)) else (value,)
        if not all(
            isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
            for v in items
        ):
            raise TypeError(f"{where} must hold numbers, got {value!r}")
        value = tuple(float(v) for v in items)
    elif kind not in ("any", "pairs"):
        # ``pairs`` (nn.pad's pad_width) is kept as given; the type relation reads it.
        raise AssertionError(f"unknown attribute kind {kind}")
    if spec.choices is not None and value not in spec.choices:
        allowed = ", ".join(repr(c) for c in spec.choices)
        raise TypeError(f"{where} must be one of {allowed}, got {value!r}")
    return value


_REGISTRY: dict[str, OpDef] = {}
_OPS: dict[str, Op] = {}


def register_op(opdef: OpDef) -> OpDef:
    """Add an operator to the registry (each name once)."""
    if opdef.name in _REGISTRY:
        raise ValueError(f"operator {opdef.name} is already registered")
    _REGISTRY[opdef.name] = opdef
    _OPS[opdef.name] = Op(opdef.name)
    return opdef


def get_op(name: str) -> Op:
    """The unique :class:`Op` node for ``name``; ``ValueError`` naming close matches if unknown."""
    try:
        return _OPS[name]
    except KeyError:
        raise ValueError(_unknown(name)) from None


# TVM spells the lookup as a static method of the operator class (``tvm.ir.Op.get``).
# It is attached here, where the table lives, so that compiler.ir stays below compiler.op.
Op.get = staticmethod(get_op)  # type: ignore[attr-defined]


def get_def(name: str) -> OpDef:
    """The :class:`OpDef` for ``name``."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(_unknown(name)) from None


def list_ops() -> list[str]:
    """Every registered operator name, sorted."""
    return sorted(_REGISTRY)


def _unknown(name: str) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(_REGISTRY), n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"unknown operator {name!r}{hint}"


def _normalize_op_attrs(name: str, attrs: Mapping[str, object]) -> Mapping[str, object]:
    return get_def(name).normalize_attrs(attrs)


# The IR's operator sugar (``x + y``) and structural equality's attribute defaults.
hooks.register_operators(get_op, _normalize_op_attrs)
