"""Operators whose output shape is known only at run time, as TVM's VM tests use them.

Compiler layer (``compiler.op``). ``shape_of`` and ``ndarray_size`` read a tensor's shape;
the ``dyn.*`` operators (TVM's names) are ``reshape``, ``broadcast_to``, ``zeros``,
``ones``, ``full`` and ``strided_slice`` with the shape, begin, end and strides given as
tensors instead of attributes; ``arange`` takes its bounds as scalar tensors; ``topk`` and
``argsort`` sort along an axis. The ``relay.*`` builders pick the ``dyn.*`` form when a
shape argument is a non-constant expression, as TVM's do.

Types: a shape tensor must be one-dimensional with a static length, which gives the
output's rank; each dimension it sets is ``?``. The VM sizes the output with a shape
function that reads the shape tensor's values (:mod:`vm.shape_funcs`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler.ir.attrs import Attrs
from compiler.ir.types import Any, TensorType, TupleType, Type
from compiler.op.defs_common import define, result
from compiler.op.defs_transform import reshape_shape, slice_plan
from compiler.op.registry import OpPattern, OpTypeError
from compiler.op.typerel import fmt_type, normalize_axis, require_dtype, tensor_arg
from vm.kernels import shape_rules
from vm.kernels.rules import RuleError

OPAQUE = OpPattern.OPAQUE


def _shape_length(op: str, ty: Type, name: str) -> int:
    """The static length of a one-dimensional integer shape tensor."""
    tensor = tensor_arg(op, ty, name)
    require_dtype(op, tensor, name, "int")
    if tensor.ndim != 1 or isinstance(tensor.shape[0], Any):
        raise OpTypeError(
            f"{op}: argument {name} must be a one-dimensional integer tensor of static "
            f"length (its length is the output's rank), found {fmt_type(tensor)}"
        )
    return int(tensor.shape[0])


def _dims(op: str, values: np.ndarray, name: str) -> tuple[int, ...]:
    dims = tuple(int(v) for v in np.asarray(values).reshape(-1).tolist())
    if any(d < 0 for d in dims):
        raise OpTypeError(f"{op}: argument {name}={dims} holds a negative size")
    return dims


# --- shape_of, ndarray_size --------------------------------------------------------------------


def _shape_of_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """shape_of(data; dtype): the shape of data as a vector."""
    data = tensor_arg("shape_of", arg_types[0], "data")
    return TensorType((data.ndim,), attrs["dtype"])  # type: ignore[arg-type]


def _shape_of(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    return np.array(args[0].shape, dtype=attrs["dtype"])  # type: ignore[arg-type]


define(
    "shape_of",
    ("data",),
    _shape_of_rel,
    _shape_of,
    OPAQUE,
    doc="the shape of data as a one-dimensional tensor",
)


def _ndarray_size_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """ndarray_size(data; dtype): the element count of data as a scalar."""
    tensor_arg("ndarray_size", arg_types[0], "data")
    return TensorType((), attrs["dtype"])  # type: ignore[arg-type]


def _ndarray_size(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    return np.array(args[0].size, dtype=attrs["dtype"])  # type: ignore[arg-type]


define(
    "ndarray_size",
    ("data",),
    _ndarray_size_rel,
    _ndarray_size,
    OPAQUE,
    doc="the number of elements of data as a scalar",
)


# --- dyn.reshape, dyn.broadcast_to ------------------------------------------------------------


def _dyn_reshape_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """dyn.reshape(data, newshape): newshape's values (with reshape's 0 and -1) at run time."""
    data = tensor_arg("dyn.reshape", arg_types[0], "data")
    rank = _shape_length("dyn.reshape", arg_types[1], "newshape")
    return TensorType([Any() for _ in range(rank)], data.dtype)


def _dyn_reshape(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, newshape = args
    target = tuple(int(v) for v in newshape.reshape(-1).tolist())
    return x.reshape(reshape_shape("dyn.reshape", TensorType(x.shape, x.dtype), target))  # type: ignore[arg-type]


define(
    "dyn.reshape",
    ("data", "newshape"),
    _dyn_reshape_rel,
    _dyn_reshape,
    OPAQUE,
    doc="data reshaped to the values of the tensor newshape",
)


def _dyn_broadcast_to_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """dyn.broadcast_to(data, shape): data broadcast to shape's values."""
    data = tensor_arg("dyn.broadcast_to", arg_types[0], "data")
    rank = _shape_length("dyn.broadcast_to", arg_types[1], "shape")
    if data.ndim > rank:
        raise OpTypeError(
            f"dyn.broadcast_to: cannot broadcast {fmt_type(data)} to a shape of rank {rank}"
        )
    return TensorType([Any() for _ in range(rank)], data.dtype)


def _dyn_broadcast_to(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, shape = args
    target = _dims("dyn.broadcast_to", shape, "shape")
    try:
        return np.broadcast_to(x, target)
    except ValueError:
        raise OpTypeError(
            f"dyn.broadcast_to: cannot broadcast shape {x.shape} to shape {target}"
        ) from None


define(
    "dyn.broadcast_to",
    ("data", "shape"),
    _dyn_broadcast_to_rel,
    _dyn_broadcast_to,
    OPAQUE,
    doc="data broadcast to the values of the tensor shape",
)


# --- dyn.zeros, dyn.ones, dyn.full -------------------------------------------------------------


def _dyn_init_rel(op: str):
    def rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
        rank = _shape_length(op, arg_types[0], "shape")
        return TensorType([Any() for _ in range(rank)], attrs["dtype"])  # type: ignore[arg-type]

    rel.__doc__ = f"{op}(shape; dtype): a tensor of shape's values"
    return rel


def _dyn_init(op: str, value: int):
    def reference(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        return np.full(_dims(op, args[0], "shape"), value, dtype=attrs["dtype"])  # type: ignore[arg-type]

    return reference


for _name, _value in (("dyn.zeros", 0), ("dyn.ones", 1)):
    define(
        _name,
        ("shape",),
        _dyn_init_rel(_name),
        _dyn_init(_name, _value),
        OPAQUE,
        doc=f"a tensor of the values of the tensor shape filled with {_value}",
    )


def _dyn_full_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """dyn.full(fill_value, shape; dtype): shape's values filled with the scalar fill_value."""
    fill = tensor_arg("dyn.full", arg_types[0], "fill_value")
    if fill.ndim != 0:
        raise OpTypeError(f"dyn.full: argument fill_value must be a scalar, found {fmt_type(fill)}")
    rank = _shape_length("dyn.full", arg_types[1], "shape")
    return TensorType([Any() for _ in range(rank)], attrs["dtype"] or fill.dtype)  # type: ignore[arg-type]


def _dyn_full(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    fill, shape = args
    dtype = attrs["dtype"] or fill.dtype
    return np.full(_dims("dyn.full", shape, "shape"), fill, dtype=dtype)  # type: ignore[arg-type]


define(
    "dyn.full",
    ("fill_value", "shape"),
    _dyn_full_rel,
    _dyn_full,
    OPAQUE,
    doc="a tensor of the values of the tensor shape filled with fill_value",
)


# --- dyn.strided_slice -------------------------------------------------------------------------


def _dyn_strided_slice_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """dyn.strided_slice(data, begin, end, strides; slice_mode): the sliced axes are ``?``."""
    op = "dyn.strided_slice"
    data = tensor_arg(op, arg_types[0], "data")
    count = _shape_length(op, arg_types[1], "begin")
    for k, name in ((2, "end"), (3, "strides")):
        length = _shape_length(op, arg_types[k], name)
        # One stride applies to every sliced axis (TVM's default strides are [1]).
        if length != count and not (name == "strides" and length == 1):
            raise OpTypeError(
                f"{op}: argument {name} has {length} entries but begin has {count}; "
                "expected one entry per sliced axis"
            )
    if count > data.ndim:
        raise OpTypeError(
            f"{op}: begin has {count} entries but data {fmt_type(data)} has rank {data.ndim}"
        )
    return TensorType([Any() if i < count else d for i, d in enumerate(data.shape)], data.dtype)


def _strides(strides: np.ndarray, count: int) -> tuple[int, ...]:
    values = tuple(int(v) for v in strides.reshape(-1).tolist())
    return values * count if len(values) == 1 else values


def _dyn_strided_slice(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, begin, end, strides = args
    plain = {
        "begin": tuple(int(v) for v in begin.tolist()),
        "end": tuple(int(v) for v in end.tolist()),
        "strides": _strides(strides, len(begin)),
        "axes": None,
        "slice_mode": attrs["slice_mode"],
    }
    index: list[slice] = [slice(None)] * x.ndim
    for axis, lo, hi, step in slice_plan("dyn.strided_slice", TensorType(x.shape), plain):  # type: ignore[arg-type]
        index[axis] = slice(lo, hi, step)
    return x[tuple(index)]


define(
    "dyn.strided_slice",
    ("data", "begin", "end", "strides"),
    _dyn_strided_slice_rel,
    _dyn_strided_slice,
    OPAQUE,
    doc="data[begin:end:strides] with begin, end and strides given as tensors",
)


# --- arange ------------------------------------------------------------------------------------


def _arange_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """arange(start, stop, step; dtype): ``ceil((stop - start) / step)`` values."""
    dtype = attrs["dtype"]
    for k, name in enumerate(("start", "stop", "step")):
        ty = tensor_arg("arange", arg_types[k], name)
        if ty.ndim != 0 or ty.dtype != dtype:
            raise OpTypeError(
                f"arange: argument {name} must be a scalar of dtype {dtype}, found {fmt_type(ty)}"
            )
    return TensorType((Any(),), dtype)  # type: ignore[arg-type]


def arange_length(start: float, stop: float, step: float) -> int:
    """TVM's element count ``max(ceil((stop - start) / step), 0)``
    (:func:`vm.kernels.shape_rules.arange_length`, the run-time shape function's)."""
    try:
        return shape_rules.arange_length(start, stop, step)
    except RuleError as err:
        raise OpTypeError(f"arange: {err}") from None


def _arange(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    start, stop, step = (a.item() for a in args)
    n = arange_length(start, stop, step)
    return result(start + np.arange(n, dtype="float64") * step, attrs["dtype"])  # type: ignore[arg-type]


define(
    "arange",
    ("start", "stop", "step"),
    _arange_rel,
    _arange,
    OPAQUE,
    doc="evenly spaced values start, start + step, ... below stop",
)


# --- argwhere ----------------------------------------------------------------------------------


def _argwhere_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """argwhere(condition): the index of every nonzero element, one row each, in C order."""
    condition = tensor_arg("argwhere", arg_types[0], "condition")
    if condition.ndim == 0:
        raise OpTypeError(
            f"argwhere: argument condition must have rank at least 1, found {fmt_type(condition)}"
        )
    return TensorType((Any(), condition.ndim), "int32")  # type: ignore[arg-type]


def _argwhere(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    (condition,) = args
    return np.argwhere(condition).astype(np.int32)


define(
    "argwhere",
    ("condition",),
    _argwhere_rel,
    _argwhere,
    OPAQUE,
    doc="the indices of the nonzero elements of condition, one row per element",
)


# --- argsort, topk -----------------------------------------------------------------------------


def stable_argsort(x: np.ndarray, axis: int, ascending: bool) -> np.ndarray:
    """Indices sorting ``x`` along ``axis``; equal elements keep their order either way."""
    if ascending:
        return np.argsort(x, axis=axis, kind="stable")
    flipped = np.flip(x, axis=axis)
    order = np.argsort(flipped, axis=axis, kind="stable")
    return x.shape[axis] - 1 - np.flip(order, axis=axis)


def _argsort_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """argsort(data; axis, is_ascend, dtype): the indices that sort data along axis."""
    data = tensor_arg("argsort", arg_types[0], "data")
    require_dtype("argsort", data, "data", "numeric")
    if data.ndim == 0:
        raise OpTypeError(f"argsort: cannot sort a scalar {fmt_type(data)}")
    normalize_axis("argsort", attrs["axis"], data.ndim)  # type: ignore[arg-type]
    return TensorType(data.shape, attrs["dtype"])  # type: ignore[arg-type]


def _argsort(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    (x,) = args
    axis = normalize_axis("argsort", attrs["axis"], x.ndim)  # type: ignore[arg-type]
    return result(stable_argsort(x, axis, bool(attrs["is_ascend"])), attrs["dtype"])  # type: ignore[arg-type]


define(
    "argsort",
    ("data",),
    _argsort_rel,
    _argsort,
    OPAQUE,
    doc="indices that sort data along axis",
)


def _topk_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """topk(data; k, axis, ret_type, is_ascend, dtype): the k largest (or smallest) along axis."""
    data = tensor_arg("topk", arg_types[0], "data")
    require_dtype("topk", data, "data", "numeric")
    if data.ndim == 0:
        raise OpTypeError(f"topk: cannot sort a scalar {fmt_type(data)}")
    axis = normalize_axis("topk", attrs["axis"], data.ndim)  # type: ignore[arg-type]
    k = attrs["k"]
    shape = list(data.shape)
    dim = shape[axis]
    if k >= 1:  # type: ignore[operator]
        shape[axis] = Any() if isinstance(dim, Any) else min(k, dim)  # type: ignore[type-var]
    values = TensorType(shape, data.dtype)
    indices = TensorType(shape, attrs["dtype"])  # type: ignore[arg-type]
    kind = attrs["ret_type"]
    if kind == "values":
        return values
    if kind == "indices":
        return indices
    return TupleType([values, indices])


def _topk(args: Sequence[np.ndarray], attrs: Attrs) -> object:
    (x,) = args
    axis = normalize_axis("topk", attrs["axis"], x.ndim)  # type: ignore[arg-type]
    k = attrs["k"]
    order = stable_argsort(x, axis, bool(attrs["is_ascend"]))
    if k >= 1:  # type: ignore[operator]
        order = np.take(order, np.arange(min(k, x.shape[axis])), axis=axis)  # type: ignore[call-overload]
    values = np.take_along_axis(x, order, axis=axis)
    indices = result(order, attrs["dtype"])  # type: ignore[arg-type]
    kind = attrs["ret_type"]
    if kind == "values":
        return values
    if kind == "indices":
        return indices
    return (values, indices)


define(
    "topk",
    ("data",),
    _topk_rel,
    _topk,
    OPAQUE,
    doc="the k largest (is_ascend=False) or smallest values along axis and their indices",
)


def _dyn_topk_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """dyn.topk(data, k; axis, ret_type, is_ascend, dtype): topk with ``k`` a scalar (or
    one-element) integer tensor, so the length along ``axis`` is known only when it runs."""
    k = tensor_arg("dyn.topk", arg_types[1], "k")
    require_dtype("dyn.topk", k, "k", "int")
    if k.ndim > 1 or (k.ndim == 1 and k.shape[0] != 1):
        raise OpTypeError(f"dyn.topk: argument k must be a scalar, found {fmt_type(k)}")
    static = _topk_rel(arg_types[:1], Attrs({**dict(attrs), "k": 0}))
    axis = normalize_axis("dyn.topk", attrs["axis"], len(_first(static).shape))  # type: ignore[arg-type]

    def unknown_along_axis(ty: TensorType) -> TensorType:
        shape = list(ty.shape)
        shape[axis] = Any()
        return TensorType(shape, ty.dtype)

    if isinstance(static, TupleType):
        return TupleType([unknown_along_axis(f) for f in static.fields])  # type: ignore[arg-type]
    return unknown_along_axis(static)  # type: ignore[arg-type]


def _first(ty: Type) -> TensorType:
    return ty.fields[0] if isinstance(ty, TupleType) else ty  # type: ignore[return-value]


def _dyn_topk(args: Sequence[np.ndarray], attrs: Attrs) -> object:
    x, k = args
    count = int(np.asarray(k).reshape(-1)[0])
    plain = {key: value for key, value in dict(attrs).items() if key != "exact_k"}
    if not attrs["exact_k"]:
        return _topk([x], Attrs({**plain, "k": count}))
    axis = normalize_axis("dyn.topk", attrs["axis"], x.ndim)  # type: ignore[arg-type]
    if not 0 <= count <= x.shape[axis]:
        raise ValueError(
            f"dyn.topk: k={count} must lie between 0 and the length {x.shape[axis]} of axis {axis}"
        )
    # All of them, sorted, then the first k (TVM's topk would read k = 0 as all).
    out = _topk([x], Attrs({**plain, "k": 0}))
    keep = np.arange(count)
    if isinstance(out, tuple):
        return tuple(np.take(o, keep, axis=axis) for o in out)
    return np.take(out, keep, axis=axis)  # type: ignore[call-overload]


define(
    "dyn.topk",
    ("data", "k"),
    _dyn_topk_rel,
    _dyn_topk,
    OPAQUE,
    doc="topk with k given as a tensor: the kept length is known when it runs",
)
