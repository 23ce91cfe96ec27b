"""Shared pieces of operator type relations: argument checks, broadcasting, axes, messages.

Compiler layer (``compiler.op``). Every helper raises :class:`OpTypeError` with a message
that names the operator, the argument, what was expected and what was found, so the
definition modules stay short and their errors read alike.
"""

from __future__ import annotations

from collections.abc import Sequence

from compiler.ir.types import Any, Dim, FuncType, TensorType, TupleType, Type
from compiler.op.registry import OpTypeError
from vm.kernels import shape_rules as sr
from vm.kernels.rules import RuleError, norm_axes, norm_axis

FLOAT_DTYPES = frozenset({"float16", "float32", "float64"})
INT_DTYPES = frozenset({"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"})
NUMERIC_DTYPES = FLOAT_DTYPES | INT_DTYPES


def fmt_shape(shape: Sequence[Dim]) -> str:
    """``(2, ?, 3)``; a one-dimensional shape keeps Python's trailing comma: ``(4,)``."""
    dims = [repr(d) if isinstance(d, Any) else str(d) for d in shape]
    if len(dims) == 1:
        return f"({dims[0]},)"
    return "(" + ", ".join(dims) + ")"


def fmt_type(ty: Type) -> str:
    """A type as the text format writes it; independent of the printer so errors never fail."""
    if isinstance(ty, TensorType):
        return f"Tensor[{fmt_shape(ty.shape)}, {ty.dtype}]"
    if isinstance(ty, TupleType):
        inner = ", ".join(fmt_type(f) for f in ty.fields)
        return f"({inner},)" if len(ty.fields) == 1 else f"({inner})"
    if isinstance(ty, FuncType):
        args = ", ".join(fmt_type(a) for a in ty.arg_types)
        return f"fn ({args}) -> {fmt_type(ty.ret_type)}"
    try:
        return str(ty)
    except Exception:  # the printer may not know an exotic type; a name still helps
        return type(ty).__name__


def dtype_kind(dtype: str) -> str:
    """``float``, ``int`` (signed or unsigned) or ``bool``."""
    if dtype in FLOAT_DTYPES:
        return "float"
    if dtype == "bool":
        return "bool"
    return "int"


def check_arity(op: str, arg_types: Sequence[Type], count: int) -> None:
    """Reject a call with the wrong number of arguments."""
    if len(arg_types) != count:
        plural = "argument" if count == 1 else "arguments"
        raise OpTypeError(f"{op}: expected {count} {plural}, found {len(arg_types)}")


def tensor_arg(op: str, ty: Type, name: str) -> TensorType:
    """``ty`` as a tensor type, or an error naming argument ``name`` of ``op``."""
    if not isinstance(ty, TensorType):
        raise OpTypeError(f"{op}: argument {name} must be a tensor, found {fmt_type(ty)}")
    return ty


def tuple_arg(op: str, ty: Type, name: str) -> list[TensorType]:
    """The fields of a tuple-of-tensors argument (``concatenate``, ``stack``)."""
    if not isinstance(ty, TupleType):
        raise OpTypeError(f"{op}: argument {name} must be a tuple of tensors, found {fmt_type(ty)}")
    if not ty.fields:
        raise OpTypeError(f"{op}: argument {name} must hold at least one tensor, found ()")
    fields = []
    for i, field in enumerate(ty.fields):
        if not isinstance(field, TensorType):
            raise OpTypeError(
                f"{op}: field {i} of argument {name} must be a tensor, found {fmt_type(field)}"
            )
        fields.append(field)
    return fields


_KIND_WORDS = {
    "float": "a floating-point",
    "int": "an integer",
    "bool": "a bool",
    "numeric": "a numeric (integer or floating-point)",
}


def require_dtype(op: str, ty: TensorType, name: str, kind: str) -> None:
    """Check ``ty``'s dtype is of ``kind``: ``float``, ``int``, ``bool`` or ``numeric``."""
    allowed = {
        "float": FLOAT_DTYPES,
        "int": INT_DTYPES,
        "bool": frozenset({"bool"}),
        "numeric": NUMERIC_DTYPES,
    }[kind]
    if ty.dtype not in allowed:
        raise OpTypeError(
            f"{op}: argument {name} must be {_KIND_WORDS[kind]} tensor, found {fmt_type(ty)}"
        )


def require_same_dtype(op: str, named: Sequence[tuple[str, TensorType]]) -> str:
    """All tensors share one dtype (Relay never promotes); returns it."""
    first_name, first = named[0]
    for name, ty in named[1:]:
        if ty.dtype != first.dtype:
            raise OpTypeError(
                f"{op}: argument {first_name} has dtype {first.dtype} but argument {name} has "
                f"dtype {ty.dtype} ({fmt_type(first)} vs {fmt_type(ty)}); Relay does not promote "
                "dtypes, insert a cast"
            )
    return first.dtype


def broadcast_dim(a: Dim, b: Dim) -> Dim | None:
    """One broadcast dimension, or ``None`` when ``a`` and ``b`` cannot broadcast
    (:func:`vm.kernels.shape_rules.broadcast_dim`, the run-time shape rules' own rule).

    ``?`` against 1 stays ``?``; ``?`` against ``k != 1`` is ``k`` (the run time must agree).
    """
    try:
        dim = sr.broadcast_dim(None if isinstance(a, Any) else a, None if isinstance(b, Any) else b)
    except RuleError:
        return None
    if dim is not None:
        return dim
    # An unknown result keeps the unknown operand (two unknowns need not be the same size).
    if isinstance(a, Any) and isinstance(b, Any):
        return Any()
    return a if isinstance(a, Any) else b


def broadcast_shapes(op: str, lhs: TensorType, rhs: TensorType) -> tuple[Dim, ...]:
    """Numpy broadcasting of two tensor types' shapes with ``?`` dimensions."""
    a = lhs.shape
    b = rhs.shape
    ndim = max(len(a), len(b))
    a_full = (1,) * (ndim - len(a)) + a
    b_full = (1,) * (ndim - len(b)) + b
    out: list[Dim] = []
    for da, db in zip(a_full, b_full, strict=True):
        d = broadcast_dim(da, db)
        if d is None:
            raise OpTypeError(
                f"{op}: cannot broadcast {fmt_type(lhs)} and {fmt_type(rhs)}: "
                f"dimension {da} vs {db}"
            )
        out.append(d)
    return tuple(out)


def normalize_axis(op: str, axis: int, ndim: int, attr: str = "axis", extra: int = 0) -> int:
    """``axis`` in ``[-(ndim + extra), ndim + extra)`` made non-negative
    (:func:`vm.kernels.rules.norm_axis`, the kernels' and shape functions' check).

    ``extra=1`` is for operators that insert an axis (``expand_dims``, ``stack``).
    """
    try:
        return norm_axis(attr, axis, ndim, extra)
    except RuleError as err:
        raise OpTypeError(f"{op}: {err}") from None


def normalize_axes(op: str, axes: Sequence[int], ndim: int, attr: str = "axis") -> list[int]:
    """Each axis normalized, with duplicates rejected (:func:`vm.kernels.rules.norm_axes`)."""
    try:
        return norm_axes(attr, axes, ndim)
    except RuleError as err:
        raise OpTypeError(f"{op}: {err}") from None


def merge_dims(op: str, what: str, a: Dim, b: Dim) -> Dim:
    """Two dimensions that must be equal; ``?`` yields to a known size."""
    if isinstance(a, Any):
        return b
    if isinstance(b, Any) or a == b:
        return a
    raise OpTypeError(f"{op}: {what}: dimension {a} vs {b}")


def product(dims: Sequence[Dim]) -> Dim:
    """The number of elements, or ``?`` if any dimension is ``?`` (and none is 0)."""
    total = 1
    unknown = False
    for d in dims:
        if isinstance(d, Any):
            unknown = True
        else:
            total *= d
    if total == 0:
        return 0
    return Any() if unknown else total
