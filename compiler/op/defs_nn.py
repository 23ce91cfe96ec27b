"""Neural-network operators (``nn.*``): dense, matmul, bias_add, softmax, log_softmax,
batch_flatten and batch_matmul (``nn.relu`` lives with the element-wise operators).

Compiler layer (``compiler.op``). Shapes follow TVM: ``nn.dense`` takes the weight as
``(units, in_features)``, ``nn.matmul`` as ``(in_features, units)`` unless
``transpose_b``; ``nn.batch_matmul`` defaults to ``transpose_b=True`` and
broadcasts a batch of 1. ``out_dtype=""`` means the input dtype; the references compute
in ``out_dtype`` (so ``int8`` inputs with ``out_dtype="int32"`` accumulate in 32 bits).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from compiler.ir.attrs import Attrs
from compiler.ir.types import Any, Dim, TensorType, Type
from compiler.op.defs_common import define, result
from compiler.op.registry import OpPattern, OpTypeError
from compiler.op.typerel import (
    broadcast_dim,
    fmt_type,
    merge_dims,
    normalize_axis,
    product,
    require_dtype,
    require_same_dtype,
    tensor_arg,
)

# --- nn.dense ----------------------------------------------------------------------------------


def _dense_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """nn.dense(data, weight; units, out_dtype): (..., in) x (units, in) -> (..., units)."""
    op = "nn.dense"
    data = tensor_arg(op, arg_types[0], "data")
    weight = tensor_arg(op, arg_types[1], "weight")
    dtype = require_same_dtype(op, [("data", data), ("weight", weight)])
    require_dtype(op, data, "data", "numeric")
    if weight.ndim != 2:
        raise OpTypeError(
            f"{op}: argument weight must be a 2-D tensor of shape (units, in_features), "
            f"found {fmt_type(weight)}"
        )
    dense_features(op, data, weight)
    out_units = _units(op, attrs, "weight", weight, weight.shape[0])
    return TensorType([*data.shape[:-1], out_units], attrs.get("out_dtype") or dtype)


def dense_features(op: str, data: TensorType, weight: TensorType) -> None:
    """Check that ``data`` has rank >= 1 and that its last dimension, the input features,
    matches ``weight``'s second dimension (a dense layer's weight, packed or not)."""
    if data.ndim < 1:
        raise OpTypeError(f"{op}: argument data must have rank >= 1, found {fmt_type(data)}")
    what = (
        f"the input features of data {fmt_type(data)} (last dimension) and weight "
        f"{fmt_type(weight)} (second dimension) differ"
    )
    merge_dims(op, what, data.shape[-1], weight.shape[1])


def _units(op: str, attrs: Attrs, name: str, weight: TensorType, found: Dim) -> Dim:
    """The output units: ``found`` (from the weight's shape), checked against attribute
    ``units`` when it is given."""
    units = attrs.get("units")
    if units is None:
        return found
    if not isinstance(found, Any) and found != units:
        raise OpTypeError(
            f"{op}: attribute units={units} does not match {name} {fmt_type(weight)} "
            f"with {found} output units"
        )
    return units  # type: ignore[return-value]


def _dense(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    data, weight = args
    dtype = attrs["out_dtype"] or data.dtype
    with np.errstate(all="ignore"):
        value = np.matmul(data.astype(dtype), weight.astype(dtype).T)
    return result(value, dtype)


define(
    "nn.dense",
    ("data", "weight"),
    _dense_rel,
    _dense,
    OpPattern.OUT_ELEMWISE_FUSABLE,
    doc="data @ weight.T",
)


# --- nn.matmul ---------------------------------------------------------------------------------


def _matmul_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """nn.matmul(tensor_a, tensor_b; units, out_dtype, transpose_a, transpose_b):
    (..., K) x (K, N) -> (..., N); ``transpose_a`` takes a 2-D (K, M), ``transpose_b`` (N, K)."""
    op = "nn.matmul"
    a = tensor_arg(op, arg_types[0], "tensor_a")
    b = tensor_arg(op, arg_types[1], "tensor_b")
    dtype = require_same_dtype(op, [("tensor_a", a), ("tensor_b", b)])
    require_dtype(op, a, "tensor_a", "numeric")
    if attrs["transpose_a"] and a.ndim != 2:
        raise OpTypeError(
            f"{op}: with transpose_a=True argument tensor_a must be a 2-D tensor (K, M), "
            f"found {fmt_type(a)}"
        )
    if a.ndim < 1:
        raise OpTypeError(f"{op}: argument tensor_a must have rank >= 1, found {fmt_type(a)}")
    if b.ndim != 2:
        layout = "(N, K)" if attrs["transpose_b"] else "(K, N)"
        raise OpTypeError(
            f"{op}: argument tensor_b must be a 2-D tensor of shape {layout}, found {fmt_type(b)}"
        )
    rows, ka = (a.shape[1], a.shape[0]) if attrs["transpose_a"] else (None, a.shape[-1])
    n, kb = (b.shape[0], b.shape[1]) if attrs["transpose_b"] else (b.shape[1], b.shape[0])
    what = (
        f"the reduction dimensions of tensor_a {fmt_type(a)} and tensor_b {fmt_type(b)} differ "
        f"(transpose_a={attrs['transpose_a']}, transpose_b={attrs['transpose_b']})"
    )
    merge_dims(op, what, ka, kb)
    n = _units(op, attrs, "tensor_b", b, n)
    lead = [rows] if attrs["transpose_a"] else list(a.shape[:-1])
    return TensorType([*lead, n], attrs.get("out_dtype") or dtype)


def _matmul(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    a, b = args
    dtype = attrs["out_dtype"] or a.dtype
    a, b = a.astype(dtype), b.astype(dtype)
    with np.errstate(all="ignore"):
        value = np.matmul(a.T if attrs["transpose_a"] else a, b.T if attrs["transpose_b"] else b)
    return result(value, dtype)


define(
    "nn.matmul",
    ("tensor_a", "tensor_b"),
    _matmul_rel,
    _matmul,
    OpPattern.OUT_ELEMWISE_FUSABLE,
    doc="op(tensor_a) @ op(tensor_b), op transposing when asked",
)


# --- nn.bias_add -------------------------------------------------------------------------------


def _bias_add_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """nn.bias_add(data, bias; axis): a 1-D bias added along data's axis."""
    op = "nn.bias_add"
    data = tensor_arg(op, arg_types[0], "data")
    bias = tensor_arg(op, arg_types[1], "bias")
    require_same_dtype(op, [("data", data), ("bias", bias)])
    require_dtype(op, data, "data", "numeric")
    if data.ndim == 0:
        raise OpTypeError(f"{op}: argument data must have rank >= 1, found {fmt_type(data)}")
    axis = normalize_axis(op, attrs["axis"], data.ndim)  # type: ignore[arg-type]
    if bias.ndim != 1:
        raise OpTypeError(f"{op}: argument bias must be a 1-D tensor, found {fmt_type(bias)}")
    what = f"bias {fmt_type(bias)} does not match axis {axis} of data {fmt_type(data)}"
    merge_dims(op, what, data.shape[axis], bias.shape[0])
    return data


def _bias_add(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    data, bias = args
    axis = normalize_axis("nn.bias_add", attrs["axis"], data.ndim)  # type: ignore[arg-type]
    shape = [1] * data.ndim
    shape[axis] = bias.shape[0]
    with np.errstate(all="ignore"):
        return result(data + bias.reshape(shape), data.dtype)


define(
    "nn.bias_add",
    ("data", "bias"),
    _bias_add_rel,
    _bias_add,
    OpPattern.BROADCAST,
    doc="data + bias along axis",
)


# --- softmax -----------------------------------------------------------------------------------


def _softmax_rel(op: str) -> Callable:
    def rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
        data = tensor_arg(op, arg_types[0], "data")
        require_dtype(op, data, "data", "float")
        if data.ndim == 0:
            raise OpTypeError(f"{op}: argument data must have rank >= 1, found {fmt_type(data)}")
        normalize_axis(op, attrs["axis"], data.ndim)  # type: ignore[arg-type]
        return data

    rel.__doc__ = f"{op}(data; axis): same type as data (floating point)."
    return rel


def _softmax(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    (x,) = args
    with np.errstate(all="ignore"):
        shifted = x - np.max(x, axis=attrs["axis"], keepdims=True)
        e = np.exp(shifted)
        return result(e / np.sum(e, axis=attrs["axis"], keepdims=True), x.dtype)


def _log_softmax(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    (x,) = args
    with np.errstate(all="ignore"):
        shifted = x - np.max(x, axis=attrs["axis"], keepdims=True)
        total = np.sum(np.exp(shifted), axis=attrs["axis"], keepdims=True)
        return result(shifted - np.log(total), x.dtype)


for _name, _ref in (("nn.softmax", _softmax), ("nn.log_softmax", _log_softmax)):
    define(
        _name,
        ("data",),
        _softmax_rel(_name),
        _ref,
        OpPattern.OPAQUE,
        doc=f"{_name[3:]} along axis",
    )


# --- nn.batch_flatten --------------------------------------------------------------------------


def _batch_flatten_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """nn.batch_flatten(data): (N, d1, d2, ...) -> (N, d1 * d2 * ...)."""
    op = "nn.batch_flatten"
    data = tensor_arg(op, arg_types[0], "data")
    if data.ndim == 0:
        raise OpTypeError(f"{op}: argument data must have rank >= 1, found {fmt_type(data)}")
    return TensorType([data.shape[0], product(data.shape[1:])], data.dtype)


def _batch_flatten(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    (x,) = args
    rest = 1
    for d in x.shape[1:]:
        rest *= d
    return x.reshape(x.shape[0], rest)


define(
    "nn.batch_flatten",
    ("data",),
    _batch_flatten_rel,
    _batch_flatten,
    OpPattern.INJECTIVE,
    doc="flatten every axis but the first",
)


# --- nn.batch_matmul ---------------------------------------------------------------------------


def _batch_matmul_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """nn.batch_matmul(x, y; transpose_a, transpose_b, out_dtype): (B, M, K) x (B, N, K)."""
    op = "nn.batch_matmul"
    x = tensor_arg(op, arg_types[0], "x")
    y = tensor_arg(op, arg_types[1], "y")
    dtype = require_same_dtype(op, [("x", x), ("y", y)])
    require_dtype(op, x, "x", "numeric")
    for name, ty in (("x", x), ("y", y)):
        if ty.ndim != 3:
            raise OpTypeError(
                f"{op}: argument {name} must be a 3-D tensor (batch, rows, columns), "
                f"found {fmt_type(ty)}"
            )
    batch = broadcast_dim(x.shape[0], y.shape[0])
    if batch is None:
        raise OpTypeError(
            f"{op}: the batch dimensions of x {fmt_type(x)} and y {fmt_type(y)} do not "
            f"broadcast: dimension {x.shape[0]} vs {y.shape[0]}"
        )
    m, kx = (x.shape[2], x.shape[1]) if attrs["transpose_a"] else (x.shape[1], x.shape[2])
    n, ky = (y.shape[1], y.shape[2]) if attrs["transpose_b"] else (y.shape[2], y.shape[1])
    what = (
        f"the reduction dimensions of x {fmt_type(x)} and y {fmt_type(y)} differ "
        f"(transpose_a={attrs['transpose_a']}, transpose_b={attrs['transpose_b']})"
    )
    merge_dims(op, what, kx, ky)
    return TensorType([batch, m, n], attrs.get("out_dtype") or dtype)


def _batch_matmul(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, y = args
    dtype = attrs["out_dtype"] or x.dtype
    a = x.astype(dtype)
    b = y.astype(dtype)
    if attrs["transpose_a"]:
        a = np.swapaxes(a, 1, 2)
    if attrs["transpose_b"]:
        b = np.swapaxes(b, 1, 2)
    with np.errstate(all="ignore"):
        return result(np.matmul(a, b), dtype)


define(
    "nn.batch_matmul",
    ("x", "y"),
    _batch_matmul_rel,
    _batch_matmul,
    OpPattern.OUT_ELEMWISE_FUSABLE,
    doc="batched matrix product",
)
