"""Element-wise and broadcasting operators: arithmetic, comparisons, logic, math, casts, fills.

Compiler layer (``compiler.op``). Registers, with TVM's names and attributes: the binary
broadcasting operators (``add`` ... ``logical_or``), the unary math operators (``negative``
... ``sign``), ``clip``, ``cast``, ``copy``, the fill operators (``zeros``, ``ones``,
``full`` and their ``*_like`` forms), ``where`` and ``broadcast_to``.

Semantics follow TVM: binary operators need identical dtypes (Relay never promotes),
comparisons give ``bool``, integer ``divide``/``mod`` truncate toward zero (the remainder
takes the dividend's sign) while ``floor_divide``/``floor_mod`` floor, and ``round`` rounds
half to even.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from compiler.ir.attrs import Attrs
from compiler.ir.types import Any, TensorType, Type
from compiler.op.defs_common import define, required, result
from compiler.op.registry import OpPattern, OpTypeError
from compiler.op.typerel import (
    broadcast_dim,
    broadcast_shapes,
    dtype_kind,
    fmt_shape,
    fmt_type,
    require_dtype,
    require_same_dtype,
    tensor_arg,
)

ELEMWISE = OpPattern.ELEMWISE
BROADCAST = OpPattern.BROADCAST
INJECTIVE = OpPattern.INJECTIVE

# --- binary broadcasting operators -------------------------------------------------------------


def _binary_rel(op: str, operand_kind: str | None, out_dtype: str | None) -> Callable:
    """Relation of a broadcasting binary operator.

    ``operand_kind`` restricts the (shared) operand dtype (``None`` allows every dtype);
    ``out_dtype`` fixes the result dtype (``bool`` for comparisons), else it is the operands'.
    """

    def rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
        lhs = tensor_arg(op, arg_types[0], "lhs")
        rhs = tensor_arg(op, arg_types[1], "rhs")
        dtype = require_same_dtype(op, [("lhs", lhs), ("rhs", rhs)])
        if operand_kind is not None:
            require_dtype(op, lhs, "lhs", operand_kind)
        return TensorType(broadcast_shapes(op, lhs, rhs), out_dtype or dtype)

    rel.__doc__ = f"{op}(lhs, rhs): numpy broadcasting of two tensors of one dtype."
    return rel


def _trunc_div(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division rounding toward zero (TVM's truncdiv), exact for every int width."""
    if np.any(b == 0):
        raise ZeroDivisionError(f"{op}: integer division by zero")
    with np.errstate(over="ignore"):
        q = np.floor_divide(a, b)
        # floor and trunc differ only when the signs differ and the division is inexact.
        fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
        return np.where(fix, q + 1, q).astype(a.dtype)


def _divide(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    a, b = args
    if dtype_kind(a.dtype.name) == "float":
        with np.errstate(divide="ignore", invalid="ignore"):
            return result(np.true_divide(a, b), a.dtype)
    return result(_trunc_div("divide", a, b), a.dtype)


def _floor_divide(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    a, b = args
    if dtype_kind(a.dtype.name) == "float":
        # TVM computes floor(a / b); numpy's floor_divide differs in the last ulp for floats.
        with np.errstate(divide="ignore", invalid="ignore"):
            return result(np.floor(np.true_divide(a, b)), a.dtype)
    if np.any(b == 0):
        raise ZeroDivisionError("floor_divide: integer division by zero")
    with np.errstate(over="ignore"):
        return result(np.floor_divide(a, b), a.dtype)


def _mod(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    a, b = args
    if dtype_kind(a.dtype.name) == "float":
        with np.errstate(divide="ignore", invalid="ignore"):
            return result(np.fmod(a, b), a.dtype)
    if np.any(b == 0):
        raise ZeroDivisionError("mod: integer division by zero")
    return result(np.fmod(a, b), a.dtype)


def _floor_mod(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    a, b = args
    if dtype_kind(a.dtype.name) == "float":
        # a - floor(a / b) * b, TVM's floormod for floats.
        with np.errstate(divide="ignore", invalid="ignore"):
            return result(a - np.floor(np.true_divide(a, b)) * b, a.dtype)
    if np.any(b == 0):
        raise ZeroDivisionError("floor_mod: integer division by zero")
    return result(np.remainder(a, b), a.dtype)


def _power(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    a, b = args
    if dtype_kind(a.dtype.name) == "float":
        with np.errstate(all="ignore"):
            return result(np.power(a, b), a.dtype)
    a, b = np.broadcast_arrays(a, b)
    negative = b < 0
    with np.errstate(over="ignore"):
        # numpy refuses negative integer exponents; Relay keeps the integer meaning
        # trunc(1 / a**-b): 1 for a == 1, +-1 for a == -1, 0 otherwise, and a == 0 divides by 0.
        positive = np.power(a, np.where(negative, 0, b))
    if not np.any(negative):
        return result(positive, a.dtype)
    if np.any(negative & (a == 0)):
        raise ZeroDivisionError("power: zero raised to a negative power")
    odd = np.remainder(b, 2) == 1
    inverse = np.where(a == 1, 1, np.where(a == -1, np.where(odd, -1, 1), 0))
    return result(np.where(negative, inverse, positive), a.dtype)


def _ufunc2(ufunc: np.ufunc, out_dtype: str | None = None) -> Callable:
    def reference(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        a, b = args
        with np.errstate(all="ignore"):
            value = ufunc(a, b)
        return result(value, out_dtype or a.dtype)

    return reference


_BINARY = [
    # name, operand kind, result dtype, reference, doc
    ("add", "numeric", None, _ufunc2(np.add), "lhs + rhs"),
    ("subtract", "numeric", None, _ufunc2(np.subtract), "lhs - rhs"),
    ("multiply", "numeric", None, _ufunc2(np.multiply), "lhs * rhs"),
    ("divide", "numeric", None, _divide, "lhs / rhs; integers truncate toward zero"),
    ("floor_divide", "numeric", None, _floor_divide, "floor(lhs / rhs)"),
    ("mod", "numeric", None, _mod, "remainder with the sign of lhs (truncmod)"),
    ("floor_mod", "numeric", None, _floor_mod, "remainder with the sign of rhs (floormod)"),
    ("power", "numeric", None, _power, "lhs ** rhs"),
    ("maximum", None, None, _ufunc2(np.maximum), "element-wise maximum"),
    ("minimum", None, None, _ufunc2(np.minimum), "element-wise minimum"),
    ("equal", None, "bool", _ufunc2(np.equal, "bool"), "lhs == rhs"),
    ("not_equal", None, "bool", _ufunc2(np.not_equal, "bool"), "lhs != rhs"),
    ("less", None, "bool", _ufunc2(np.less, "bool"), "lhs < rhs"),
    ("less_equal", None, "bool", _ufunc2(np.less_equal, "bool"), "lhs <= rhs"),
    ("greater", None, "bool", _ufunc2(np.greater, "bool"), "lhs > rhs"),
    ("greater_equal", None, "bool", _ufunc2(np.greater_equal, "bool"), "lhs >= rhs"),
    ("logical_and", "bool", "bool", _ufunc2(np.logical_and, "bool"), "lhs and rhs"),
    ("logical_or", "bool", "bool", _ufunc2(np.logical_or, "bool"), "lhs or rhs"),
]

for _name, _kind, _out, _ref, _doc in _BINARY:
    define(_name, ("lhs", "rhs"), _binary_rel(_name, _kind, _out), _ref, BROADCAST, doc=_doc)


# --- unary operators ---------------------------------------------------------------------------


def _unary_rel(op: str, kind: str | None) -> Callable:
    def rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
        data = tensor_arg(op, arg_types[0], "data")
        if kind is not None:
            require_dtype(op, data, "data", kind)
        return data

    rel.__doc__ = f"{op}(data): same shape and dtype as data."
    return rel


def _ufunc1(fn: Callable[[np.ndarray], object], int_identity: bool = False) -> Callable:
    def reference(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        (x,) = args
        if int_identity and dtype_kind(x.dtype.name) == "int":
            return x.copy()
        with np.errstate(all="ignore"):
            value = fn(x)
        return result(value, x.dtype)

    return reference


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # Both branches are evaluated; the overflow in the discarded one is harmless.
    positive = 1.0 / (1.0 + np.exp(-x))
    negative = np.exp(x) / (1.0 + np.exp(x))
    return np.where(x >= 0, positive, negative)


_erf = np.vectorize(math.erf, otypes=[np.float64])


def _erf_ref(x: np.ndarray) -> np.ndarray:
    return _erf(x.astype(np.float64)) if x.size else x.astype(np.float64)


_UNARY = [
    # name, dtype kind, reference, doc
    ("negative", "numeric", _ufunc1(np.negative), "-data"),
    ("abs", "numeric", _ufunc1(np.abs), "|data|"),
    ("exp", "float", _ufunc1(np.exp), "e ** data"),
    ("log", "float", _ufunc1(np.log), "natural logarithm"),
    ("sqrt", "float", _ufunc1(np.sqrt), "square root"),
    ("rsqrt", "float", _ufunc1(lambda x: 1.0 / np.sqrt(x)), "1 / sqrt(data)"),
    ("sin", "float", _ufunc1(np.sin), "sine"),
    ("cos", "float", _ufunc1(np.cos), "cosine"),
    ("tanh", "float", _ufunc1(np.tanh), "hyperbolic tangent"),
    ("sigmoid", "float", _ufunc1(_sigmoid), "1 / (1 + e ** -data)"),
    ("erf", "float", _ufunc1(_erf_ref), "the Gauss error function"),
    ("floor", "numeric", _ufunc1(np.floor, int_identity=True), "round toward -inf"),
    ("ceil", "numeric", _ufunc1(np.ceil, int_identity=True), "round toward +inf"),
    ("round", "numeric", _ufunc1(np.round, int_identity=True), "round half to even"),
    ("sign", "numeric", _ufunc1(np.sign), "-1, 0 or 1 (0 for 0, nan for nan)"),
    ("logical_not", "bool", _ufunc1(np.logical_not), "not data"),
    ("copy", None, _ufunc1(np.copy), "a copy of data"),
    ("zeros_like", None, _ufunc1(np.zeros_like), "zeros of data's shape and dtype"),
    ("ones_like", None, _ufunc1(np.ones_like), "ones of data's shape and dtype"),
]

_UNARY_PATTERN = {"copy": INJECTIVE}

for _name, _kind, _ref, _doc in _UNARY:
    define(
        _name,
        ("data",),
        _unary_rel(_name, _kind),
        _ref,
        _UNARY_PATTERN.get(_name, ELEMWISE),
        doc=_doc,
    )

define(
    "nn.relu",
    ("data",),
    _unary_rel("nn.relu", "numeric"),
    _ufunc1(lambda x: np.where(x > 0, x, np.zeros_like(x))),
    ELEMWISE,
    doc="max(data, 0)",
)


# --- clip and cast -----------------------------------------------------------------------------


def _clip_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """clip(data; a_min, a_max): same type as data; a_min must not exceed a_max."""
    data = tensor_arg("clip", arg_types[0], "data")
    require_dtype("clip", data, "data", "numeric")
    a_min = required("clip", attrs, "a_min")
    a_max = required("clip", attrs, "a_max")
    if a_min > a_max:  # type: ignore[operator]
        raise OpTypeError(f"clip: attribute a_min={a_min} must not exceed a_max={a_max}")
    return data


def _clip(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    (x,) = args
    a_min, a_max = float(attrs["a_min"]), float(attrs["a_max"])
    if dtype_kind(x.dtype.name) == "float":
        lo, hi = x.dtype.type(a_min), x.dtype.type(a_max)
    else:
        # The integers inside [a_min, a_max], limited to what the dtype can hold.
        info = np.iinfo(x.dtype)
        lo = info.min if a_min == -math.inf else max(info.min, math.ceil(a_min))
        hi = info.max if a_max == math.inf else min(info.max, math.floor(a_max))
        lo, hi = x.dtype.type(lo), x.dtype.type(hi)
    return result(np.minimum(np.maximum(x, lo), hi), x.dtype)


define(
    "clip",
    ("data",),
    _clip_rel,
    _clip,
    ELEMWISE,
    doc="data limited to [a_min, a_max]",
)


def _cast_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """cast(data; dtype): data's shape with the new dtype."""
    data = tensor_arg("cast", arg_types[0], "data")
    return TensorType(data.shape, required("cast", attrs, "dtype"))


def _cast(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    (x,) = args
    with np.errstate(invalid="ignore", over="ignore"):
        return np.array(x, dtype=attrs["dtype"], copy=True)


define(
    "cast",
    ("data",),
    _cast_rel,
    _cast,
    INJECTIVE,
    doc="data converted to dtype (float to int truncates toward zero)",
)


# --- fills -------------------------------------------------------------------------------------


def _check_shape_attr(op: str, shape: Sequence[int]) -> None:
    for d in shape:
        if d < 0:
            raise OpTypeError(
                f"{op}: attribute shape={fmt_shape(shape)} has a negative dimension {d}; "
                "expected sizes >= 0"
            )


def _init_rel(op: str) -> Callable:
    def rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
        shape = required(op, attrs, "shape")
        _check_shape_attr(op, shape)  # type: ignore[arg-type]
        return TensorType(shape, attrs["dtype"])  # type: ignore[arg-type]

    rel.__doc__ = f"{op}(; shape, dtype): a tensor of that shape and dtype."
    return rel


def _init_ref(value: int) -> Callable:
    def reference(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        return np.full(attrs["shape"], value, dtype=attrs["dtype"])

    return reference


for _name, _value in (("zeros", 0), ("ones", 1)):
    define(
        _name,
        (),
        _init_rel(_name),
        _init_ref(_value),
        ELEMWISE,
        doc=f"a tensor filled with {_value}",
    )


def _scalar_fill(op: str, ty: Type) -> TensorType:
    fill = tensor_arg(op, ty, "fill_value")
    if fill.shape != ():
        raise OpTypeError(
            f"{op}: argument fill_value must be a scalar (shape ()), found {fmt_type(fill)}"
        )
    return fill


def _full_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """full(fill_value; shape, dtype): dtype "" means fill_value's dtype."""
    fill = _scalar_fill("full", arg_types[0])
    shape = required("full", attrs, "shape")
    _check_shape_attr("full", shape)  # type: ignore[arg-type]
    return TensorType(shape, attrs["dtype"] or fill.dtype)  # type: ignore[arg-type]


def _full(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    (fill,) = args
    dtype = attrs["dtype"] or fill.dtype
    with np.errstate(invalid="ignore", over="ignore"):
        value = np.asarray(fill).astype(dtype)
    return np.full(attrs["shape"], value, dtype=dtype)


define(
    "full",
    ("fill_value",),
    _full_rel,
    _full,
    ELEMWISE,
    doc="a tensor of shape filled with the scalar fill_value",
)


def _full_like_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """full_like(data, fill_value): data's type; fill_value is a scalar of any dtype."""
    data = tensor_arg("full_like", arg_types[0], "data")
    _scalar_fill("full_like", arg_types[1])
    return data


def _full_like(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    data, fill = args
    with np.errstate(invalid="ignore", over="ignore"):
        value = np.asarray(fill).astype(data.dtype)
    return np.full(data.shape, value, dtype=data.dtype)


define(
    "full_like",
    ("data", "fill_value"),
    _full_like_rel,
    _full_like,
    ELEMWISE,
    doc="a tensor of data's shape and dtype filled with fill_value",
)


# --- where and broadcast_to --------------------------------------------------------------------


def _where_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """where(condition, x, y): bool condition; x and y share a dtype; all three broadcast."""
    cond = tensor_arg("where", arg_types[0], "condition")
    x = tensor_arg("where", arg_types[1], "x")
    y = tensor_arg("where", arg_types[2], "y")
    require_dtype("where", cond, "condition", "bool")
    dtype = require_same_dtype("where", [("x", x), ("y", y)])
    values = TensorType(broadcast_shapes("where", x, y), dtype)
    return TensorType(broadcast_shapes("where", cond, values), dtype)


def _where(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    cond, x, y = args
    return result(np.where(cond, x, y), x.dtype)


define(
    "where",
    ("condition", "x", "y"),
    _where_rel,
    _where,
    BROADCAST,
    doc="x where condition holds, else y",
)


def _broadcast_to_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """broadcast_to(data; shape): data broadcast (numpy rules) to exactly shape."""
    data = tensor_arg("broadcast_to", arg_types[0], "data")
    shape = tuple(required("broadcast_to", attrs, "shape"))  # type: ignore[arg-type]
    _check_shape_attr("broadcast_to", shape)
    if data.ndim > len(shape):
        raise OpTypeError(
            f"broadcast_to: cannot broadcast {fmt_type(data)} to shape {fmt_shape(shape)}: "
            f"the tensor has rank {data.ndim} but the shape has rank {len(shape)}"
        )
    padded = (1,) * (len(shape) - data.ndim) + data.shape
    for have, want in zip(padded, shape, strict=True):
        if broadcast_dim(have, want) != want and not isinstance(have, Any):
            raise OpTypeError(
                f"broadcast_to: cannot broadcast {fmt_type(data)} to shape {fmt_shape(shape)}: "
                f"dimension {have} vs {want}"
            )
    return TensorType(shape, data.dtype)


def _broadcast_to(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    (x,) = args
    return np.broadcast_to(x, attrs["shape"])


define(
    "broadcast_to",
    ("data",),
    _broadcast_to_rel,
    _broadcast_to,
    BROADCAST,
    doc="data broadcast to shape",
)
