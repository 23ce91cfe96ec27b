"""Shape-changing (injective) operators: reshape, transpose, squeeze, expand_dims,
concatenate, stack, split, strided_slice and take.

Compiler layer (``compiler.op``). The type relations handle ``?`` input dimensions by
producing ``?`` wherever the output size cannot be known before run time, and check every
attribute against the input shape (axes in range, element counts, sections dividing an
axis).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from compiler.ir.attrs import Attrs
from compiler.ir.types import Any, Dim, TensorType, TupleType, Type
from compiler.op.defs_common import define, required, result
from compiler.op.registry import OpPattern, OpTypeError
from compiler.op.typerel import (
    fmt_type,
    merge_dims,
    normalize_axes,
    normalize_axis,
    require_dtype,
    require_same_dtype,
    tensor_arg,
    tuple_arg,
)
from vm.kernels.emit_layout import slice_plan as kernel_slice_plan
from vm.kernels.newshape import newshape_dims
from vm.kernels.rules import RuleError

INJECTIVE = OpPattern.INJECTIVE

# --- reshape -----------------------------------------------------------------------------------


def reshape_shape(op: str, ty: TensorType, newshape: Sequence[int]) -> tuple[Dim, ...]:
    """The output shape of ``reshape`` with TVM's special values
    (:func:`vm.kernels.newshape.newshape_dims`, the rule the kernels and the run-time shape
    functions read); a ``?`` input dimension gives ``?`` wherever it decides the size."""
    dims = [None if isinstance(d, Any) else int(d) for d in ty.shape]
    try:
        out = newshape_dims(dims, tuple(newshape), fmt_type(ty))
    except RuleError as err:
        raise OpTypeError(f"{op}: {err}") from None
    return tuple(Any() if d is None else d for d in out)


def _reshape_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """reshape(data; newshape): same elements, new shape."""
    data = tensor_arg("reshape", arg_types[0], "data")
    newshape = required("reshape", attrs, "newshape")
    return TensorType(reshape_shape("reshape", data, newshape), data.dtype)  # type: ignore[arg-type]


def _reshape(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    (x,) = args
    shape = reshape_shape("reshape", TensorType(x.shape, x.dtype), attrs["newshape"])
    return x.reshape(shape)  # type: ignore[arg-type]


define(
    "reshape",
    ("data",),
    _reshape_rel,
    _reshape,
    INJECTIVE,
    doc="data with a new shape (0 copies a dimension, -1 is inferred, -2/-3/-4)",
)


# --- transpose, squeeze, expand_dims -----------------------------------------------------------


def transpose_axes(op: str, ndim: int, axes: Sequence[int] | None) -> list[int]:
    """The permutation ``transpose`` applies: ``axes`` made non-negative, or the axes
    reversed when ``axes`` is empty; :class:`OpTypeError` if it is not a permutation."""
    if axes is None or len(axes) == 0:
        return list(range(ndim))[::-1]
    if len(axes) != ndim:
        raise OpTypeError(
            f"{op}: attribute axes={tuple(axes)} must list each of the {ndim} axes once, "
            f"found {len(axes)} entries"
        )
    return normalize_axes(op, axes, ndim, "axes")


def _transpose_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """transpose(data; axes): dimensions permuted by axes (reversed if None)."""
    data = tensor_arg("transpose", arg_types[0], "data")
    perm = transpose_axes("transpose", data.ndim, attrs.get("axes"))  # type: ignore[arg-type]
    return TensorType([data.shape[a] for a in perm], data.dtype)


def _transpose(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    (x,) = args
    perm = transpose_axes("transpose", x.ndim, attrs["axes"])  # type: ignore[arg-type]
    return np.transpose(x, perm)


define(
    "transpose",
    ("data",),
    _transpose_rel,
    _transpose,
    INJECTIVE,
    doc="permute the axes",
)


def _squeeze_axes(op: str, ty: TensorType, axis: Sequence[int] | None) -> list[int]:
    if axis is None:
        # TVM removes the dimensions known to be 1; a ``?`` dimension is kept.
        return [i for i, d in enumerate(ty.shape) if d == 1 and not isinstance(d, Any)]
    axes = normalize_axes(op, axis, ty.ndim)
    for a in axes:
        d = ty.shape[a]
        if not isinstance(d, Any) and d != 1:
            raise OpTypeError(
                f"{op}: cannot squeeze axis {a} of {fmt_type(ty)}: it has size {d}, expected 1"
            )
    return axes


def _squeeze_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """squeeze(data; axis): the listed size-1 axes (or all static size-1 axes) removed."""
    data = tensor_arg("squeeze", arg_types[0], "data")
    axes = _squeeze_axes("squeeze", data, attrs.get("axis"))  # type: ignore[arg-type]
    return TensorType([d for i, d in enumerate(data.shape) if i not in axes], data.dtype)


def _squeeze(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    (x,) = args
    axes = _squeeze_axes("squeeze", TensorType(x.shape, x.dtype), attrs["axis"])  # type: ignore[arg-type]
    return np.squeeze(x, axis=tuple(axes))


define(
    "squeeze",
    ("data",),
    _squeeze_rel,
    _squeeze,
    INJECTIVE,
    doc="remove size-1 axes",
)


def _expand_dims_shape(op: str, shape: Sequence[Dim], attrs: Attrs) -> list[Dim]:
    count = attrs["num_newaxis"]
    if count < 0:  # type: ignore[operator]
        raise OpTypeError(f"{op}: attribute num_newaxis={count} must be >= 0")
    axis = normalize_axis(op, required(op, attrs, "axis"), len(shape), extra=1)  # type: ignore[arg-type]
    return [*shape[:axis], *([1] * count), *shape[axis:]]  # type: ignore[list-item]


def _expand_dims_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """expand_dims(data; axis, num_newaxis): num_newaxis size-1 axes inserted at axis."""
    data = tensor_arg("expand_dims", arg_types[0], "data")
    return TensorType(_expand_dims_shape("expand_dims", data.shape, attrs), data.dtype)


def _expand_dims(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    (x,) = args
    return x.reshape(_expand_dims_shape("expand_dims", x.shape, attrs))


define(
    "expand_dims",
    ("data",),
    _expand_dims_rel,
    _expand_dims,
    INJECTIVE,
    doc="insert size-1 axes",
)


# --- concatenate and stack ---------------------------------------------------------------------


def _concatenate_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """concatenate(data; axis): tensors of one dtype and rank joined along axis."""
    op = "concatenate"
    fields = tuple_arg(op, arg_types[0], "data")
    dtype = require_same_dtype(op, [(f"data.{i}", f) for i, f in enumerate(fields)])
    first = fields[0]
    if first.ndim == 0:
        raise OpTypeError(f"{op}: cannot concatenate scalars; field 0 is {fmt_type(first)}")
    axis = normalize_axis(op, attrs["axis"], first.ndim)  # type: ignore[arg-type]
    shape = list(first.shape)
    for i, field in enumerate(fields[1:], start=1):
        if field.ndim != first.ndim:
            raise OpTypeError(
                f"{op}: all fields must have the same rank; field 0 is {fmt_type(first)} but "
                f"field {i} is {fmt_type(field)}"
            )
        for a in range(first.ndim):
            if a == axis:
                continue
            what = (
                f"field 0 {fmt_type(first)} and field {i} {fmt_type(field)} differ off the "
                f"concatenation axis {axis}"
            )
            shape[a] = merge_dims(op, what, shape[a], field.shape[a])
    along = [f.shape[axis] for f in fields]
    shape[axis] = Any() if any(isinstance(d, Any) for d in along) else sum(along)  # type: ignore[arg-type]
    return TensorType(shape, dtype)


def _concatenate(args: Sequence[object], attrs: Attrs) -> np.ndarray:
    (fields,) = args
    return np.concatenate(list(fields), axis=attrs["axis"])  # type: ignore[arg-type, call-overload]


define(
    "concatenate",
    ("data",),
    _concatenate_rel,
    _concatenate,
    INJECTIVE,
    doc="join a tuple of tensors along axis",
)


def _stack_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """stack(data; axis): same-shaped tensors stacked along a new axis."""
    op = "stack"
    fields = tuple_arg(op, arg_types[0], "data")
    dtype = require_same_dtype(op, [(f"data.{i}", f) for i, f in enumerate(fields)])
    first = fields[0]
    shape = list(first.shape)
    for i, field in enumerate(fields[1:], start=1):
        if field.ndim != first.ndim:
            raise OpTypeError(
                f"{op}: all fields must have the same shape; field 0 is {fmt_type(first)} but "
                f"field {i} is {fmt_type(field)}"
            )
        what = f"field 0 {fmt_type(first)} and field {i} {fmt_type(field)} differ"
        shape = [merge_dims(op, what, a, b) for a, b in zip(shape, field.shape, strict=True)]
    axis = normalize_axis(op, attrs["axis"], first.ndim, extra=1)  # type: ignore[arg-type]
    shape.insert(axis, len(fields))
    return TensorType(shape, dtype)


def _stack(args: Sequence[object], attrs: Attrs) -> np.ndarray:
    (fields,) = args
    return np.stack(list(fields), axis=attrs["axis"])  # type: ignore[arg-type, call-overload]


define(
    "stack",
    ("data",),
    _stack_rel,
    _stack,
    INJECTIVE,
    doc="stack a tuple of tensors along a new axis",
)


# --- split -------------------------------------------------------------------------------------


def split_sizes(op: str, ty: TensorType, attrs: Attrs) -> tuple[int, list[Dim]]:
    """The normalized axis and the size of each piece along it."""
    if ty.ndim == 0:
        raise OpTypeError(f"{op}: cannot split a scalar {fmt_type(ty)}")
    axis = normalize_axis(op, attrs["axis"], ty.ndim)  # type: ignore[arg-type]
    dim = ty.shape[axis]
    spec = required(op, attrs, "indices_or_sections")
    if isinstance(spec, int):
        if spec < 1:
            raise OpTypeError(f"{op}: attribute indices_or_sections={spec} must be >= 1")
        if isinstance(dim, Any):
            return axis, [Any() for _ in range(spec)]
        if dim % spec:
            raise OpTypeError(
                f"{op}: cannot split axis {axis} of {fmt_type(ty)} into {spec} equal sections: "
                f"{dim} is not divisible by {spec}"
            )
        return axis, [dim // spec] * spec
    sizes: list[Dim] = []
    begin = 0
    for index in spec:  # type: ignore[union-attr]
        if index < begin:
            raise OpTypeError(
                f"{op}: attribute indices_or_sections={tuple(spec)} must be non-decreasing "  # type: ignore[arg-type]
                "and non-negative"
            )
        if not isinstance(dim, Any) and index > dim:
            raise OpTypeError(
                f"{op}: split index {index} is out of range for axis {axis} of {fmt_type(ty)}"
            )
        sizes.append(index - begin)
        begin = index
    sizes.append(Any() if isinstance(dim, Any) else dim - begin)
    return axis, sizes


def _split_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """split(data; indices_or_sections, axis): a tuple of the pieces."""
    data = tensor_arg("split", arg_types[0], "data")
    axis, sizes = split_sizes("split", data, attrs)
    fields = []
    for size in sizes:
        shape = list(data.shape)
        shape[axis] = size
        fields.append(TensorType(shape, data.dtype))
    return TupleType(fields)


def _split(args: Sequence[np.ndarray], attrs: Attrs) -> tuple[np.ndarray, ...]:
    (x,) = args
    axis, sizes = split_sizes("split", TensorType(x.shape, x.dtype), attrs)
    bounds = np.cumsum([0, *sizes])
    pieces = []
    for start, stop in itertools.pairwise(bounds):
        index = [slice(None)] * x.ndim
        index[axis] = slice(int(start), int(stop))
        pieces.append(x[tuple(index)])
    return tuple(pieces)


define(
    "split",
    ("data",),
    _split_rel,
    _split,
    INJECTIVE,
    doc="split along axis into equal sections or at indices",
)


# --- strided_slice -----------------------------------------------------------------------------


def slice_plan(op: str, ty: TensorType, attrs: Attrs) -> list[tuple[int, int, int | None, int]]:
    """``(axis, begin, end, stride)`` for each sliced axis (``end=None``: to the edge), by
    :func:`vm.kernels.emit_layout.slice_plan`, the reading the kernel and the run-time shape
    function use."""
    try:
        return kernel_slice_plan(attrs, ty.ndim, fmt_type(ty))
    except RuleError as err:
        raise OpTypeError(f"{op}: {err}") from None


def _slice_len(dim: int, begin: int, end: int | None, stride: int) -> range:
    return range(*slice(begin, end, stride).indices(dim))


def _strided_slice_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """strided_slice(data; begin, end, strides, axes, slice_mode): ``?`` axes stay ``?``."""
    data = tensor_arg("strided_slice", arg_types[0], "data")
    shape = list(data.shape)
    for axis, begin, end, stride in slice_plan("strided_slice", data, attrs):
        dim = shape[axis]
        shape[axis] = Any() if isinstance(dim, Any) else len(_slice_len(dim, begin, end, stride))
    return TensorType(shape, data.dtype)


def _strided_slice(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    (x,) = args
    index: list[slice] = [slice(None)] * x.ndim
    for axis, begin, end, stride in slice_plan("strided_slice", TensorType(x.shape), attrs):
        index[axis] = slice(begin, end, stride)
    return x[tuple(index)]


define(
    "strided_slice",
    ("data",),
    _strided_slice_rel,
    _strided_slice,
    INJECTIVE,
    doc="data[begin:end:strides] on each listed axis",
)


# --- take --------------------------------------------------------------------------------------


def _take_axes(op: str, data: TensorType, indices: TensorType, attrs: Attrs) -> tuple[int, int]:
    """The normalized ``(axis, batch_dims)``; ``axis`` is -1 when data is flattened."""
    batch_dims = attrs["batch_dims"]
    if batch_dims < 0:  # type: ignore[operator]
        batch_dims += indices.ndim  # type: ignore[operator]
    if not 0 <= batch_dims <= indices.ndim:  # type: ignore[operator]
        raise OpTypeError(
            f"{op}: attribute batch_dims={attrs['batch_dims']} is out of range for indices "
            f"{fmt_type(indices)}; expected a value in [{-indices.ndim}, {indices.ndim}]"
        )
    if attrs.get("axis") is None:
        if batch_dims:
            raise OpTypeError(f"{op}: batch_dims={batch_dims} needs an explicit axis")
        return -1, 0
    if data.ndim == 0:
        raise OpTypeError(f"{op}: cannot take along an axis of a scalar {fmt_type(data)}")
    axis = normalize_axis(op, attrs["axis"], data.ndim)  # type: ignore[arg-type]
    if batch_dims > axis:
        raise OpTypeError(f"{op}: attribute batch_dims={batch_dims} must not exceed axis={axis}")
    return axis, batch_dims  # type: ignore[return-value]


def _take_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """take(data, indices; axis, batch_dims, mode): gather along axis."""
    op = "take"
    data = tensor_arg(op, arg_types[0], "data")
    indices = tensor_arg(op, arg_types[1], "indices")
    require_dtype(op, indices, "indices", "int")
    axis, batch_dims = _take_axes(op, data, indices, attrs)
    if axis < 0:
        return TensorType(indices.shape, data.dtype)
    batch = []
    for i in range(batch_dims):
        what = f"batch dimension {i} of data {fmt_type(data)} and indices {fmt_type(indices)}"
        batch.append(merge_dims(op, what, data.shape[i], indices.shape[i]))
    shape = [
        *batch,
        *data.shape[batch_dims:axis],
        *indices.shape[batch_dims:],
        *data.shape[axis + 1 :],
    ]
    return TensorType(shape, data.dtype)


def _take(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    op = "take"
    x, indices = args
    axis, batch_dims = _take_axes(op, TensorType(x.shape), TensorType(indices.shape), attrs)
    if axis < 0:
        x, axis = x.reshape(-1), 0
    size = x.shape[axis]
    idx = indices.astype(np.int64)
    mode = attrs["mode"]
    if idx.size and size == 0:
        raise IndexError(f"{op}: cannot take from axis {axis} of size 0")
    if mode == "clip":
        idx = np.clip(idx, 0, size - 1)
    elif mode == "wrap":
        idx = np.mod(idx, size) if idx.size else idx
    else:
        bad = idx[(idx < 0) | (idx >= size)]
        if bad.size:
            raise IndexError(
                f"{op}: index {int(bad.reshape(-1)[0])} is out of range for axis {axis} of "
                f"size {size} (mode='fast' does not clip or wrap)"
            )
    if batch_dims == 0:
        return np.take(x, idx, axis=axis)
    batch_shape = x.shape[:batch_dims]
    count = int(np.prod(batch_shape))
    flat_x = x.reshape((count, *x.shape[batch_dims:]))
    flat_i = idx.reshape((count, *idx.shape[batch_dims:]))
    out_shape = (*x.shape[:axis], *idx.shape[batch_dims:], *x.shape[axis + 1 :])
    out = np.empty((count, *out_shape[batch_dims:]), dtype=x.dtype)
    for k in range(count):
        out[k] = np.take(flat_x[k], flat_i[k], axis=axis - batch_dims)
    return result(out.reshape(out_shape), x.dtype)


define(
    "take",
    ("data", "indices"),
    _take_rel,
    _take,
    INJECTIVE,
    doc="gather elements of data at indices along axis",
)
