"""Run-time shape functions: a kernel's output shapes computed from its input shapes.

Runtime layer (``vm``); imports numpy and the description validator of ``vm.kernels``
(standard library only, no numba), never ``compiler``.

When a primitive's output has a dimension known only at run time (``?``), the code
generator (:mod:`compiler.backend.dynamic`) calls a *shape function* before the kernel,
as TVM's Relay VM does: its inputs are the shapes of the kernel's inputs (``shape_of``),
its outputs the shapes of the kernel's outputs and their sizes in bytes, which then
size ``alloc_storage`` and shape ``alloc_tensor_reg``. A shape function is a primitive
too, so it is saved, verified and invoked like a kernel (``invoke_packed``, destination
passing), but it runs here, in plain Python, instead of as a numba kernel.

Description
-----------
A shape function's description (see also :mod:`vm.program`) names the kernel it computes
the shapes of::

    {
      "shape_func": <the kernel's description>,
      "inputs":  [["int64", 1], ...],      # one shape vector per kernel input
      "outputs": [["int64", 1], ...,       # one shape vector per kernel output (length ndim)
                  ["int64", 0], ...],      # then one byte size per kernel output
    }

:func:`shape_func_description` builds it; :func:`check_shape_func` validates one from a
file (the kernel description with :func:`vm.kernels.check_description`, every operator
having a shape rule here, and the signature above). :func:`check_primitive` and
:func:`load_primitive` dispatch between shape functions and numba kernels, for the
verifier and the machine.

Shape rules
-----------
:data:`SHAPE_RULES` has one pure function per operator, from the argument shapes (tuples
of ints) and the operator's attributes to its output shapes, mirroring the compiler's
type relations on concrete shapes (``compiler/op/defs_*.py``) and the shape checks of the
numba kernels (``vm/kernels/emit_*.py``). Each validates what the types could not know
before run time (broadcast compatibility, matrix product inner dimensions, element
counts of a reshape, window sizes) and raises :class:`ShapeFuncError`, a ``ValueError``
naming the operator and the shapes, which the machine reports as a ``vm.VMError``.
:func:`output_shapes` walks a (fused) kernel description node by node.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from vm.kernels import panels, windows
from vm.kernels.description import Description, KernelDescriptionError, parse_description
from vm.kernels.emit_layout import slice_plan
from vm.kernels.newshape import newshape_dims
from vm.kernels.rules import RuleError

__all__ = [
    "SHAPE_FUNC_KEY",
    "SHAPE_RULES",
    "ShapeFuncError",
    "ShapeFunction",
    "check_primitive",
    "check_shape_func",
    "is_shape_func",
    "load_primitive",
    "load_shape_function",
    "op_output_shapes",
    "output_shapes",
    "shape_func_description",
    "shape_func_ops",
    "value_inputs",
]

#: The key that marks a primitive description as a shape function.
SHAPE_FUNC_KEY = "shape_func"

Shape = tuple[int, ...]
#: ``rule(arg_shapes, attrs, out_ranks) -> output shapes``; ``out_ranks`` are the ranks the
#: description declares (``squeeze`` without ``axis`` needs them).
Rule = Callable[[list[Shape], Mapping[str, Any], tuple[int, ...]], list[Shape]]


class ShapeFuncError(ValueError):
    """Input shapes an operator cannot take; the message names the operator and the shapes."""


class _Bad(Exception):
    """Raised inside a rule; :func:`op_output_shapes` adds the operator and the shapes."""


def fmt_shape(shape: Sequence[int]) -> str:
    """``(2, 3)``; a one-dimensional shape keeps Python's trailing comma: ``(4,)``."""
    return str(tuple(int(d) for d in shape))


# ---- helpers shared by the rules -----------------------------------------------------------


def _norm_axis(axis: int, ndim: int, name: str = "axis", extra: int = 0) -> int:
    bound = ndim + extra
    if not -bound <= axis < bound:
        raise _Bad(f"attribute {name}={axis} is out of range for rank {ndim}")
    return axis + bound if axis < 0 else axis


def _norm_axes(axes: Sequence[int], ndim: int, name: str = "axis") -> list[int]:
    out: list[int] = []
    for axis in axes:
        a = _norm_axis(axis, ndim, name)
        if a in out:
            raise _Bad(f"attribute {name}={tuple(axes)} names axis {a} more than once")
        out.append(a)
    return out


def _ints(value: Any) -> tuple[int, ...]:
    """An ``ints`` attribute as a tuple (a single int becomes a 1-tuple)."""
    if isinstance(value, (list, tuple)):
        return tuple(int(v) for v in value)
    return (int(value),)


def _prod(dims: Sequence[int]) -> int:
    total = 1
    for d in dims:
        total *= d
    return total


def broadcast_shapes(shapes: Sequence[Shape]) -> Shape:
    """numpy broadcasting of ``shapes`` (right-aligned); :class:`_Bad` if they do not."""
    ndim = max((len(s) for s in shapes), default=0)
    out: list[int] = []
    for p in range(ndim):
        dim = 1
        for s in shapes:
            k = p - (ndim - len(s))
            if k < 0:
                continue
            d = s[k]
            if d == dim or d == 1:
                continue
            if dim != 1:
                raise _Bad(
                    f"cannot broadcast {' and '.join(fmt_shape(x) for x in shapes)}: "
                    f"dimension {p} of the result would be both {dim} and {d}"
                )
            dim = d
        out.append(dim)
    return tuple(out)


def _expect(found: int, expected: int, what: str) -> None:
    if found != expected:
        raise _Bad(f"{what}: expected {expected}, found {found}")


def _pair(value: Any, name: str, minimum: int = 1) -> tuple[int, int]:
    try:
        return windows.pair(name, _ints(value), minimum)
    except RuleError as err:
        raise _Bad(str(err)) from None


def _padding4(value: Any) -> tuple[int, int, int, int]:
    try:
        return windows.padding4(_ints(value))
    except RuleError as err:
        raise _Bad(str(err)) from None


_AXIS_NAMES = windows.AXIS_NAMES


def _window_output(
    size: int,
    window: int,
    stride: int,
    dilation: int,
    before: int,
    after: int,
    axis: int,
    what: str,
    ceil_mode: bool = False,
) -> int:
    """Window positions along a spatial axis (:func:`vm.kernels.windows.window_count`)."""
    if window < 1:
        raise _Bad(f"the {what} {_AXIS_NAMES[axis]} must be at least 1, found {window}")
    try:
        return windows.window_count(
            size, window, stride, dilation, before, after, axis, what, ceil_mode
        )
    except RuleError as err:
        raise _Bad(str(err)) from None


def _rank(shape: Shape, low: int, high: int | None, name: str) -> None:
    if len(shape) < low or (high is not None and len(shape) > high):
        want = str(low) if high == low else f"at least {low}" if high is None else f"{low}..{high}"
        raise _Bad(f"{name} {fmt_shape(shape)} must have rank {want}")


# ---- the rules -----------------------------------------------------------------------------

SHAPE_RULES: dict[str, Rule] = {}


def _rule(*names: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for name in names:
            if name in SHAPE_RULES:
                raise ValueError(f"shape rule {name} is registered twice")
            SHAPE_RULES[name] = fn
        return fn

    return register


_UNARY = (
    "abs", "ceil", "copy", "cos", "erf", "exp", "floor", "log", "logical_not", "negative",
    "nn.relu", "round", "rsqrt", "sigmoid", "sign", "sin", "sqrt", "tanh", "zeros_like",
    "ones_like", "cast", "clip", "nn.leaky_relu", "full_like",
)  # fmt: skip
_BINARY = (
    "add", "subtract", "multiply", "divide", "floor_divide", "mod", "floor_mod", "power",
    "maximum", "minimum", "equal", "not_equal", "less", "less_equal", "greater",
    "greater_equal", "logical_and", "logical_or", "where",
)  # fmt: skip


@_rule(*_UNARY)
def _same_as_first(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    return [shapes[0]]


@_rule(*_BINARY)
def _broadcast(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    return [broadcast_shapes(shapes)]


@_rule("nn.softmax", "nn.log_softmax")
def _softmax(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    _rank(shapes[0], 1, None, "data")
    _norm_axis(attrs.get("axis", -1), len(shapes[0]))
    return [shapes[0]]


@_rule("nn.dropout")
def _dropout(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    return [shapes[0], shapes[0]]


@_rule("nn.bias_add")
def _bias_add(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    data, bias = shapes
    _rank(data, 1, None, "data")
    _rank(bias, 1, 1, "bias")
    axis = _norm_axis(attrs.get("axis", 1), len(data))
    out = list(data)
    out[axis] = broadcast_shapes([(data[axis],), bias])[0]
    return [tuple(out)]


def _channel_vectors(data: Shape, vectors: Sequence[Shape], names: Sequence[str], axis: int):
    for name, vec in zip(names, vectors):
        if vec != (data[axis],):
            raise _Bad(
                f"{name} has shape {fmt_shape(vec)}, but axis {axis} of data "
                f"{fmt_shape(data)} has length {data[axis]}"
            )


@_rule("nn.prelu")
def _prelu(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    data, alpha = shapes
    _rank(data, 1, None, "data")
    axis = _norm_axis(attrs.get("axis", 1), len(data))
    _channel_vectors(data, [alpha], ["alpha"], axis)
    return [data]


@_rule("nn.layer_norm")
def _layer_norm(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    data = shapes[0]
    _rank(data, 1, None, "data")
    axis = _norm_axis(attrs.get("axis", -1), len(data))
    _channel_vectors(data, shapes[1:], ("gamma", "beta"), axis)
    return [data]


@_rule("nn.group_norm")
def _group_norm(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    data = shapes[0]
    _rank(data, 1, None, "data")
    axis = _norm_axis(attrs.get("axis", 1), len(data))
    _channel_vectors(data, shapes[1:], ("gamma", "beta"), axis)
    groups = attrs["num_groups"]
    if groups < 1 or data[axis] % groups:
        raise _Bad(
            f"the {data[axis]} channels on axis {axis} of data {fmt_shape(data)} are not "
            f"divisible by num_groups={groups}"
        )
    return [data]


@_rule("nn.batch_norm")
def _batch_norm(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    data = shapes[0]
    _rank(data, 1, None, "data")
    axis = _norm_axis(attrs.get("axis", 1), len(data))
    names = ("gamma", "beta", "moving_mean", "moving_var")
    _channel_vectors(data, shapes[1:], names, axis)
    return [data, (data[axis],), (data[axis],)]


# -- reductions --


def _reduce_axes(attrs: Mapping[str, Any], ndim: int) -> list[int]:
    axis = attrs.get("axis")
    if axis is None:
        return list(range(ndim))
    listed = _norm_axes(_ints(axis), ndim)
    if attrs.get("exclude", False):
        return [a for a in range(ndim) if a not in listed]
    return sorted(listed)


@_rule("sum", "mean", "prod", "max", "min", "all", "any", "argmax", "argmin")
def _reduce(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    dims = shapes[0]
    axes = _reduce_axes(attrs, len(dims))
    if attrs.get("keepdims", False):
        return [tuple(1 if a in axes else d for a, d in enumerate(dims))]
    return [tuple(d for a, d in enumerate(dims) if a not in axes)]


# -- reshape-like --


def reshape_shape(shape: Shape, newshape: Sequence[int]) -> Shape:
    """``reshape``'s output shape with TVM's special values (0, -1, -2, -3, -4)."""
    try:
        return newshape_dims(shape, newshape, fmt_shape(shape))  # type: ignore[return-value]
    except RuleError as err:
        raise _Bad(str(err)) from None


@_rule("reshape")
def _reshape(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    return [reshape_shape(shapes[0], _ints(attrs["newshape"]))]


@_rule("squeeze")
def _squeeze(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    dims = shapes[0]
    axis = attrs.get("axis")
    if axis is not None:
        axes = _norm_axes(_ints(axis), len(dims))
        for a in axes:
            if dims[a] != 1:
                raise _Bad(f"cannot squeeze axis {a}: it has size {dims[a]}, expected 1")
        return [tuple(d for a, d in enumerate(dims) if a not in axes)]
    out = tuple(d for d in dims if d != 1)
    if ranks and len(out) != ranks[0]:
        # The type kept the dimensions not known to be 1; a kernel of that rank cannot
        # tell which of the run-time 1s to keep.
        raise _Bad(
            f"squeeze without axis leaves rank {len(out)}, but the program was compiled "
            f"for rank {ranks[0]}; name the axes to squeeze"
        )
    return [out]


@_rule("expand_dims")
def _expand_dims(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    dims = shapes[0]
    count = attrs.get("num_newaxis", 1)
    if count < 0:
        raise _Bad(f"attribute num_newaxis={count} must be >= 0")
    axis = _norm_axis(attrs["axis"], len(dims), extra=1)
    return [(*dims[:axis], *([1] * count), *dims[axis:])]


@_rule("nn.batch_flatten")
def _batch_flatten(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    dims = shapes[0]
    _rank(dims, 1, None, "data")
    return [(dims[0], _prod(dims[1:]))]


# -- layout --


@_rule("transpose")
def _transpose(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    dims = shapes[0]
    axes = attrs.get("axes")
    if not axes:
        perm = list(range(len(dims)))[::-1]
    else:
        if len(axes) != len(dims):
            raise _Bad(f"attribute axes={tuple(axes)} must list each of the {len(dims)} axes once")
        perm = _norm_axes(axes, len(dims), "axes")
    return [tuple(dims[a] for a in perm)]


@_rule("concatenate")
def _concatenate(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    first = shapes[0]
    _rank(first, 1, None, "field 0")
    axis = _norm_axis(attrs.get("axis", 0), len(first))
    for i, dims in enumerate(shapes[1:], start=1):
        if len(dims) != len(first) or any(d != first[a] for a, d in enumerate(dims) if a != axis):
            raise _Bad(
                f"field {i} {fmt_shape(dims)} differs from field 0 {fmt_shape(first)} off "
                f"the concatenation axis {axis}"
            )
    out = list(first)
    out[axis] = sum(dims[axis] for dims in shapes)
    return [tuple(out)]


@_rule("stack")
def _stack(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    first = shapes[0]
    axis = _norm_axis(attrs.get("axis", 0), len(first), extra=1)
    for i, dims in enumerate(shapes[1:], start=1):
        if dims != first:
            raise _Bad(f"field {i} {fmt_shape(dims)} differs from field 0 {fmt_shape(first)}")
    out = list(first)
    out.insert(axis, len(shapes))
    return [tuple(out)]


@_rule("split")
def _split(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    dims = shapes[0]
    _rank(dims, 1, None, "data")
    axis = _norm_axis(attrs.get("axis", 0), len(dims))
    dim = dims[axis]
    spec = attrs["indices_or_sections"]
    sizes: list[int] = []
    if isinstance(spec, int):
        if spec < 1 or dim % spec:
            raise _Bad(f"axis {axis} of size {dim} does not split into {spec} equal sections")
        sizes = [dim // spec] * spec
    else:
        begin = 0
        for index in spec:
            if index < begin or index > dim:
                raise _Bad(
                    f"split indices {tuple(spec)} must be non-decreasing and within axis "
                    f"{axis} of size {dim}"
                )
            sizes.append(index - begin)
            begin = index
        sizes.append(dim - begin)
    out = []
    for size in sizes:
        piece = list(dims)
        piece[axis] = size
        out.append(tuple(piece))
    return out


@_rule("strided_slice")
def _strided_slice(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    dims = shapes[0]
    # The kernel's own slice plan, so the shape function and the kernel cannot disagree.
    normalized = {
        "begin": _ints(attrs["begin"]),
        "end": _ints(attrs["end"]),
        "strides": _ints(attrs["strides"]) if attrs.get("strides") else None,
        "axes": _ints(attrs["axes"]) if attrs.get("axes") is not None else None,
        "slice_mode": attrs.get("slice_mode", "end"),
    }
    try:
        plan = slice_plan(normalized, len(dims))
    except RuleError as err:
        raise _Bad(str(err)) from None
    out = list(dims)
    for axis, begin, stop, stride in plan:
        out[axis] = len(range(*slice(begin, stop, stride).indices(dims[axis])))
    return [tuple(out)]


@_rule("take")
def _take(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    data, indices = shapes
    batch_dims = attrs.get("batch_dims", 0)
    if batch_dims < 0:
        batch_dims += len(indices)
    if not 0 <= batch_dims <= len(indices):
        raise _Bad(f"attribute batch_dims={attrs.get('batch_dims')} is out of range")
    if attrs.get("axis") is None:
        return [indices]
    axis = _norm_axis(attrs["axis"], len(data))
    if batch_dims > axis:
        raise _Bad(f"attribute batch_dims={batch_dims} must not exceed axis={axis}")
    for k in range(batch_dims):
        _expect(indices[k], data[k], f"batch dimension {k} of indices")
    return [(*data[:axis], *indices[batch_dims:], *data[axis + 1 :])]


@_rule("broadcast_to")
def _broadcast_to(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    target = _ints(attrs["shape"])
    dims = shapes[0]
    offset = len(target) - len(dims)
    if offset < 0 or any(d not in (1, target[offset + k]) for k, d in enumerate(dims)):
        raise _Bad(f"cannot broadcast {fmt_shape(dims)} to shape {fmt_shape(target)}")
    return [target]


@_rule("zeros", "ones", "full")
def _fill(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    return [_ints(attrs["shape"])]


# -- matrix products and convolutions --


@_rule("nn.dense")
def _dense(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    data, weight = shapes
    _rank(data, 1, None, "data")
    _rank(weight, 2, 2, "weight")
    if weight[1] != data[-1]:
        raise _Bad(
            f"the input features differ: data {fmt_shape(data)} has {data[-1]} (last "
            f"dimension), weight {fmt_shape(weight)} has {weight[1]} (second dimension)"
        )
    units = attrs.get("units")
    if units is not None:
        _expect(weight[0], units, "output units of weight (attribute units)")
    return [(*data[:-1], weight[0])]


@_rule("nn.matmul")
def _matmul(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    a, b = shapes
    transpose_a = attrs.get("transpose_a", False)
    _rank(a, 2 if transpose_a else 1, 2 if transpose_a else None, "tensor_a")
    _rank(b, 2, 2, "tensor_b")
    lead, ka = ((a[1],), a[0]) if transpose_a else (a[:-1], a[-1])
    n, kb = (b[0], b[1]) if attrs.get("transpose_b", False) else (b[1], b[0])
    if ka != kb:
        raise _Bad(
            f"the reduction dimensions of tensor_a {fmt_shape(a)} and tensor_b {fmt_shape(b)} "
            "differ"
        )
    units = attrs.get("units")
    if units is not None:
        _expect(n, units, "output units of tensor_b (attribute units)")
    return [(*lead, n)]


@_rule("nn.contrib_dense_pack")
def _dense_pack(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    data, weight = shapes
    _rank(data, 1, None, "data")
    _rank(weight, 3, 3, "weight")
    layout = attrs.get("weight_layout", panels.LAYOUT)
    width = panels.panel_width(layout)
    if width is None:
        raise _Bad(panels.unsupported("weight_layout", layout))
    count, features, found = weight
    _expect(found, width, f"panel width of weight {fmt_shape(weight)} (third dimension)")
    if features != data[-1]:
        raise _Bad(
            f"the input features differ: data {fmt_shape(data)} has {data[-1]} (last "
            f"dimension), weight {fmt_shape(weight)} has {features} (second dimension)"
        )
    units = attrs.get("units")
    if units is None:
        return [(*data[:-1], count * width)]
    if not (count - 1) * width < units <= count * width:
        raise _Bad(f"attribute units={units} does not fit {count} panels of {width}")
    return [(*data[:-1], units)]


@_rule("layout_transform")
def _layout_transform(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    (data,) = shapes
    _rank(data, 2, 2, "data")
    layout = attrs.get("dst_layout", panels.LAYOUT)
    width = panels.panel_width(layout)
    if width is None or attrs.get("src_layout", "NC") != "NC":
        raise _Bad(panels.unsupported("dst_layout", layout))
    return [(-(-data[0] // width), data[1], width)]


@_rule("nn.batch_matmul")
def _batch_matmul(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    x, y = shapes
    _rank(x, 3, 3, "x")
    _rank(y, 3, 3, "y")
    batch = broadcast_shapes([(x[0],), (y[0],)])[0]
    m, kx = (x[2], x[1]) if attrs.get("transpose_a", False) else (x[1], x[2])
    n, ky = (y[1], y[2]) if attrs.get("transpose_b", True) else (y[2], y[1])
    if kx != ky:
        raise _Bad(f"the reduction dimensions of x {fmt_shape(x)} and y {fmt_shape(y)} differ")
    return [(batch, m, n)]


def _conv_attrs(attrs: Mapping[str, Any]) -> tuple:
    groups = attrs.get("groups", 1)
    if groups < 1:
        raise _Bad(f"attribute groups={groups} must be >= 1")
    return (
        _pair(attrs.get("strides", (1, 1)), "strides"),
        _pair(attrs.get("dilation", (1, 1)), "dilation"),
        _padding4(attrs.get("padding", (0, 0))),
        groups,
    )


def _check_kernel_attrs(attrs: Mapping[str, Any], out_channels: int, kh: int, kw: int) -> None:
    if attrs.get("channels") is not None:
        _expect(out_channels, attrs["channels"], "output channels (attribute channels)")
    if attrs.get("kernel_size") is not None:
        size = _pair(attrs["kernel_size"], "kernel_size")
        _expect(kh, size[0], "kernel height of weight (attribute kernel_size)")
        _expect(kw, size[1], "kernel width of weight (attribute kernel_size)")


@_rule("nn.conv2d")
def _conv2d(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    data, weight = shapes
    _rank(data, 4, 4, "data")
    _rank(weight, 4, 4, "weight")
    (n, c, h, w), (o, cg, kh, kw) = data, weight
    strides, dilation, (top, left, bottom, right), groups = _conv_attrs(attrs)
    if o % groups or cg * groups != c:
        raise _Bad(
            f"data {fmt_shape(data)} has {c} input channels, but weight {fmt_shape(weight)} "
            f"with groups={groups} expects {cg * groups} ({cg} per group) and output "
            "channels divisible by groups"
        )
    _check_kernel_attrs(attrs, o, kh, kw)
    out_h = _window_output(h, kh, strides[0], dilation[0], top, bottom, 0, "kernel")
    out_w = _window_output(w, kw, strides[1], dilation[1], left, right, 1, "kernel")
    return [(n, o, out_h, out_w)]


@_rule("nn.contrib_conv2d_gemm_without_weight_transform")
def _conv2d_packed(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    data, weight = shapes
    _rank(data, 4, 4, "data")
    _rank(weight, 3, 3, "weight")
    channels, kernel = attrs.get("channels"), attrs.get("kernel_size")
    if channels is None or kernel is None:
        raise _Bad("attributes channels and kernel_size are required")
    kh, kw = _pair(kernel, "kernel_size")
    _expect(weight[2], panels.PANEL, f"panel width of weight {fmt_shape(weight)}")
    _expect(weight[0], -(-channels // panels.PANEL), f"panels of weight {fmt_shape(weight)}")
    _expect(weight[1], data[1] * kh * kw, f"depth of weight {fmt_shape(weight)}")
    return _conv2d([data, (channels, data[1], kh, kw)], attrs, ranks)


@_rule("nn.contrib_conv2d_winograd_weight_transform")
def _winograd_weight_transform(
    shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple
) -> list[Shape]:
    (weight,) = shapes
    _rank(weight, 4, 4, "weight")
    o, i, kh, kw = weight
    if (kh, kw) != (3, 3):
        raise _Bad(f"weight {fmt_shape(weight)} must have a 3x3 kernel")
    tile = attrs.get("tile_size", 2)
    if tile not in (2, 4):
        raise _Bad(f"attribute tile_size={tile} is not supported; only 2 and 4 are")
    return [(tile + 2, tile + 2, o, i)]


@_rule("nn.contrib_conv2d_winograd_without_weight_transform")
def _winograd_conv2d(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    data, weight = shapes
    _rank(data, 4, 4, "data")
    _rank(weight, 4, 4, "weight")
    (n, c, h, w), (a, b, o, ci) = data, weight
    strides, dilation, (top, left, bottom, right), groups = _conv_attrs(attrs)
    alpha = attrs.get("tile_size", 2) + 2
    if (a, b) != (alpha, alpha) or ci != c:
        raise _Bad(
            f"data {fmt_shape(data)} has {c} input channels, but the transformed weight "
            f"{fmt_shape(weight)} must be ({alpha}, {alpha}, out_channels, {c})"
        )
    if strides != (1, 1) or dilation != (1, 1) or groups != 1:
        raise _Bad("strides, dilation and groups must be 1")
    if attrs.get("channels") is not None:
        _expect(o, attrs["channels"], "output channels (attribute channels)")
    out_h = _window_output(h, 3, 1, 1, top, bottom, 0, "kernel")
    out_w = _window_output(w, 3, 1, 1, left, right, 1, "kernel")
    return [(n, o, out_h, out_w)]


@_rule("nn.conv2d_transpose")
def _conv2d_transpose(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    data, weight = shapes
    _rank(data, 4, 4, "data")
    _rank(weight, 4, 4, "weight")
    (n, c, h, w), (cw, og, kh, kw) = data, weight
    strides, dilation, (top, left, bottom, right), groups = _conv_attrs(attrs)
    if c % groups or cw != c:
        raise _Bad(
            f"data {fmt_shape(data)} has {c} input channels, but the IOHW weight "
            f"{fmt_shape(weight)} has {cw} (and groups={groups} must divide them)"
        )
    o = og * groups
    _check_kernel_attrs(attrs, o, kh, kw)
    extra = _pair(attrs.get("output_padding", (0, 0)), "output_padding", minimum=0)
    sizes = []
    for axis, (size, kernel, before, after) in enumerate(
        ((h, kh, top, bottom), (w, kw, left, right))
    ):
        out = (size - 1) * strides[axis] + dilation[axis] * (kernel - 1) + extra[axis] + 1
        out -= before + after
        if out < 1:
            raise _Bad(f"the output {_AXIS_NAMES[axis]} would be {out}: the padding removes it all")
        sizes.append(out)
    return [(n, o, sizes[0], sizes[1])]


def _nchw(shape: Shape) -> Shape:
    _rank(shape, 4, 4, "data (NCHW)")
    return shape


@_rule("nn.max_pool2d", "nn.avg_pool2d")
def _pool(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    n, c, h, w = _nchw(shapes[0])
    pool = _pair(attrs.get("pool_size", (1, 1)), "pool_size")
    strides = _pair(attrs.get("strides", (1, 1)), "strides")
    dilation = _pair(attrs.get("dilation", (1, 1)), "dilation")
    top, left, bottom, right = _padding4(attrs.get("padding", (0, 0)))
    ceil_mode = bool(attrs.get("ceil_mode", False))
    out_h = _window_output(
        h, pool[0], strides[0], dilation[0], top, bottom, 0, "pool window", ceil_mode
    )
    out_w = _window_output(
        w, pool[1], strides[1], dilation[1], left, right, 1, "pool window", ceil_mode
    )
    return [(n, c, out_h, out_w)]


def _nonempty_spatial(shape: Shape) -> None:
    for axis in range(2):
        if shape[2 + axis] < 1:
            raise _Bad(f"data {fmt_shape(shape)} has an empty {_AXIS_NAMES[axis]}")


@_rule("nn.global_max_pool2d", "nn.global_avg_pool2d")
def _global_pool(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    n, c, _, _ = _nchw(shapes[0])
    _nonempty_spatial(shapes[0])
    return [(n, c, 1, 1)]


@_rule("nn.adaptive_avg_pool2d")
def _adaptive_pool(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    n, c, h, w = _nchw(shapes[0])
    _nonempty_spatial(shapes[0])
    value = attrs.get("output_size")
    if value is None or value == () or value == []:
        return [(n, c, h, w)]
    out_h, out_w = _pair(value, "output_size")
    return [(n, c, out_h, out_w)]


@_rule("nn.pad")
def _pad(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    data = shapes[0]
    pairs = [tuple(_ints(p)) for p in attrs["pad_width"]]
    if len(pairs) != len(data) or any(len(p) != 2 or min(p) < 0 for p in pairs):
        raise _Bad("attribute pad_width needs one (before, after) pair >= 0 per axis of data")
    mode = attrs.get("pad_mode", "constant")
    for axis, ((before, after), size) in enumerate(zip(pairs, data)):
        if before == after == 0:
            continue
        if mode == "edge" and size < 1:
            raise _Bad(f"pad_mode='edge' cannot pad axis {axis}: the axis is empty")
        if mode == "reflect" and max(before, after) >= size:
            raise _Bad(
                f"pad_mode='reflect' needs pad widths smaller than the axis size, but axis "
                f"{axis} has size {size} and pad_width ({before}, {after})"
            )
    return [tuple(d + b + a for d, (b, a) in zip(data, pairs))]


@_rule("nn.upsampling")
def _upsampling(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    n, c, h, w = _nchw(shapes[0])
    out = []
    for axis, (size, attr) in enumerate(((h, "scale_h"), (w, "scale_w"))):
        scale = float(attrs.get(attr, 1.0))
        value = round(size * scale)  # ties to even, as the compiler and TVM round
        if value < 1 and size > 0:
            raise _Bad(
                f"attribute {attr}={scale} turns the {_AXIS_NAMES[axis]} {size} into {value}"
            )
        out.append(value)
    return [(n, c, out[0], out[1])]


# -- shapes as values, sorting --


@_rule("shape_of")
def _shape_of(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    return [(len(shapes[0]),)]


@_rule("ndarray_size")
def _ndarray_size(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    return [()]


def _sort_axis(shape: Shape, attrs: Mapping[str, Any]) -> int:
    if not shape:
        raise _Bad("cannot sort a scalar")
    return _norm_axis(int(attrs.get("axis", -1)), len(shape))


@_rule("argsort")
def _argsort(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    _sort_axis(shapes[0], attrs)
    return [shapes[0]]


@_rule("topk")
def _topk(shapes: list[Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[Shape]:
    data = shapes[0]
    axis = _sort_axis(data, attrs)
    k = int(attrs.get("k", 1))
    out = list(data)
    if k >= 1:
        out[axis] = min(k, data[axis])
    both = attrs.get("ret_type", "both") == "both"
    return [tuple(out), tuple(out)] if both else [tuple(out)]


# ---- data-dependent rules ----------------------------------------------------------------------

#: ``rule(arg_shapes, arg_values, attrs, out_ranks) -> output shapes``, where ``arg_values``
#: holds the arrays of the arguments in :data:`VALUE_ARGS` (``None`` for the others).
ValueRule = Callable[[list[Shape], list[Any], Mapping[str, Any], tuple[int, ...]], list[Shape]]

#: Operators whose output shapes depend on the *values* of some arguments (TVM's
#: data-dependent shape functions): operator -> the positions of those arguments. The
#: shape function receives these arguments' arrays instead of their shapes.
VALUE_ARGS: dict[str, tuple[int, ...]] = {
    "dyn.reshape": (1,),
    "dyn.broadcast_to": (1,),
    "dyn.zeros": (0,),
    "dyn.ones": (0,),
    "dyn.full": (1,),
    "dyn.strided_slice": (1, 2, 3),
    "arange": (0, 1, 2),
}

VALUE_RULES: dict[str, ValueRule] = {}


def _value_rule(*names: str) -> Callable[[ValueRule], ValueRule]:
    def register(fn: ValueRule) -> ValueRule:
        for name in names:
            VALUE_RULES[name] = fn
        return fn

    return register


def _int_values(value: Any, name: str) -> tuple[int, ...]:
    array = np.asarray(value)
    if array.dtype.kind not in "iu":
        raise _Bad(f"argument {name} must hold integers, found dtype {array.dtype}")
    return tuple(int(v) for v in array.reshape(-1).tolist())


def _sizes(value: Any, name: str) -> Shape:
    dims = _int_values(value, name)
    if any(d < 0 for d in dims):
        raise _Bad(f"argument {name}={fmt_shape(dims)} holds a negative size")
    return dims


@_value_rule("dyn.reshape")
def _dyn_reshape(shapes: list[Shape], values: list[Any], attrs: Any, ranks: tuple) -> list[Shape]:
    return [reshape_shape(shapes[0], _int_values(values[1], "newshape"))]


@_value_rule("dyn.broadcast_to")
def _dyn_broadcast_to(shapes: list[Shape], values: list[Any], attrs: Any, ranks: tuple):
    return _broadcast_to([shapes[0]], {"shape": _sizes(values[1], "shape")}, ranks)


@_value_rule("dyn.zeros", "dyn.ones")
def _dyn_init(shapes: list[Shape], values: list[Any], attrs: Any, ranks: tuple) -> list[Shape]:
    return [_sizes(values[0], "shape")]


@_value_rule("dyn.full")
def _dyn_full(shapes: list[Shape], values: list[Any], attrs: Any, ranks: tuple) -> list[Shape]:
    _rank(shapes[0], 0, 0, "fill_value")
    return [_sizes(values[1], "shape")]


@_value_rule("dyn.strided_slice")
def _dyn_strided_slice(shapes: list[Shape], values: list[Any], attrs: Any, ranks: tuple):
    begin = _int_values(values[1], "begin")
    end = _int_values(values[2], "end")
    strides = _int_values(values[3], "strides")
    if len(strides) == 1:
        strides = strides * len(begin)
    if len(end) != len(begin) or len(strides) != len(begin):
        raise _Bad(
            f"begin {fmt_shape(begin)}, end {fmt_shape(end)} and strides {fmt_shape(strides)} "
            "must have one entry per sliced axis"
        )
    plain = {
        "begin": begin,
        "end": end,
        "strides": strides,
        "axes": None,
        "slice_mode": attrs.get("slice_mode", "end"),
    }
    return _strided_slice([shapes[0]], plain, ranks)


def arange_length(start: Any, stop: Any, step: Any) -> int:
    """TVM's element count of ``arange``: ``max(ceil((stop - start) / step), 0)``."""
    if step == 0:
        raise _Bad("step must not be 0")
    count = (stop - start) / step
    if not math.isfinite(count):
        raise _Bad(f"the bounds start={start}, stop={stop}, step={step} are not finite")
    return max(math.ceil(count), 0)


@_value_rule("arange")
def _arange(shapes: list[Shape], values: list[Any], attrs: Any, ranks: tuple) -> list[Shape]:
    for name, shape in zip(("start", "stop", "step"), shapes):
        _rank(shape, 0, 0, name)
    start, stop, step = (np.asarray(v).item() for v in values)
    try:
        return [(arange_length(start, stop, step),)]
    except (OverflowError, ValueError):
        raise _Bad(f"the bounds start={start}, stop={stop}, step={step} are not finite") from None


def shape_func_ops() -> list[str]:
    """Every operator with a shape rule, sorted."""
    return sorted({*SHAPE_RULES, *VALUE_RULES})


def op_output_shapes(
    op: str,
    arg_shapes: Sequence[Sequence[int]],
    attrs: Mapping[str, Any],
    out_ranks: Sequence[int] = (),
    arg_values: Sequence[Any] | None = None,
) -> list[Shape]:
    """The output shapes of operator ``op`` applied to arguments of ``arg_shapes``.

    Parameters
    ----------
    op : str
        The operator's name (``add``, ``nn.dense``, ...).
    arg_shapes : sequence of sequence of int
        One shape per tensor argument (a tuple argument's fields count one each).
    attrs : mapping
        The operator's attributes (lists or tuples for list attributes).
    out_ranks : sequence of int
        The output ranks the kernel was described with (only ``squeeze`` without ``axis``
        needs them).
    arg_values : sequence, optional
        For operators in :data:`VALUE_ARGS`: the arrays of the arguments read by value
        (``None`` for the others).

    Returns
    -------
    list of tuple of int

    Raises
    ------
    ShapeFuncError
        If the shapes do not fit the operator; the message names it and the shapes.
    KeyError
        If ``op`` has no shape rule.
    """
    shapes = [tuple(int(d) for d in s) for s in arg_shapes]
    try:
        if op in VALUE_RULES:
            values = list(arg_values) if arg_values is not None else [None] * len(shapes)
            missing = [p for p in VALUE_ARGS[op] if p >= len(values) or values[p] is None]
            if missing:
                raise _Bad(f"the values of argument(s) {missing} are needed and not given")
            return VALUE_RULES[op](shapes, values, attrs, tuple(out_ranks))
        return SHAPE_RULES[op](shapes, attrs, tuple(out_ranks))
    except _Bad as err:
        given = ", ".join(fmt_shape(s) for s in shapes)
        raise ShapeFuncError(f"{op}: {err} (input shapes {given})") from None


# ---- descriptions ------------------------------------------------------------------------------


def shape_func_description(kernel_description: Mapping[str, Any]) -> dict[str, Any]:
    """The description of the shape function of the kernel described by ``kernel_description``.

    One ``int64`` shape vector per kernel input; outputs are one ``int64`` shape vector per
    kernel output, then one ``int64`` scalar (the output's size in bytes) per output.
    """
    inputs = kernel_description["inputs"]
    n_out = len(kernel_description["outputs"])
    values = value_inputs(kernel_description)
    description = {
        SHAPE_FUNC_KEY: kernel_description,
        "inputs": [list(inputs[k]) if k in values else ["int64", 1] for k in range(len(inputs))],
        "outputs": [["int64", 1] for _ in range(n_out)] + [["int64", 0] for _ in range(n_out)],
    }
    if values:
        description["values"] = values
    return description


def value_inputs(kernel_description: Mapping[str, Any] | Description) -> list[int]:
    """The kernel inputs a shape function reads by value (arguments in :data:`VALUE_ARGS`).

    Raises
    ------
    vm.kernels.KernelDescriptionError
        If such an argument is not a kernel input (a value computed inside the kernel).
    """
    if isinstance(kernel_description, Description):
        n_in = len(kernel_description.inputs)
        nodes = [(n.index, n.op, list(n.args)) for n in kernel_description.nodes]
    else:
        n_in = len(kernel_description["inputs"])
        nodes = [(i, n["op"], list(n["args"])) for i, n in enumerate(kernel_description["nodes"])]
    found: set[int] = set()
    for index, op, args in nodes:
        for position in VALUE_ARGS.get(op, ()):
            if position >= len(args):
                continue  # the kernel validator reports the argument count
            if args[position] >= n_in:
                raise _error(
                    f"node {index} ({op}) reads argument {position} by value, so it must be "
                    f"a kernel input, found value {args[position]}"
                )
            found.add(args[position])
    return sorted(found)


def is_shape_func(description: object) -> bool:
    """Whether ``description`` describes a shape function (rather than a numba kernel)."""
    return isinstance(description, Mapping) and SHAPE_FUNC_KEY in description


def _error(problem: str) -> KernelDescriptionError:
    return KernelDescriptionError(f"shape function description: {problem}")


def check_shape_func(description: object) -> Description:
    """Validate a shape function's description; returns its kernel's parsed description.

    Raises
    ------
    vm.kernels.KernelDescriptionError
        If the keys, the signature or the kernel description are wrong, or an operator of
        the kernel has no shape rule.
    """
    if not isinstance(description, Mapping):
        raise _error(f"expected a mapping, found {type(description).__name__}")
    keys = {SHAPE_FUNC_KEY, "inputs", "outputs"}
    unknown = sorted(str(k) for k in description if k not in keys | {"values"})
    missing = sorted(k for k in keys if k not in description)
    if unknown or missing:
        raise _error(
            f"keys must be {', '.join(sorted(keys))}"
            + (f"; unknown {', '.join(unknown)}" if unknown else "")
            + (f"; missing {', '.join(missing)}" if missing else "")
        )
    try:
        kernel = parse_description(description[SHAPE_FUNC_KEY])
    except KernelDescriptionError as err:
        raise _error(f"the kernel it computes shapes for is invalid: {err}") from None
    for node in kernel.nodes:
        if node.op not in SHAPE_RULES and node.op not in VALUE_RULES:
            raise _error(f"node {node.index} ({node.op}) has no shape rule")
    n_in, n_out = len(kernel.inputs), len(kernel.outputs)
    values = value_inputs(kernel)
    if list(description.get("values", [])) != values:
        raise _error(
            f"values must list the inputs read by value, {values}, found "
            f"{description.get('values')!r}"
        )
    want_in = [
        [kernel.inputs[k].dtype, kernel.inputs[k].ndim] if k in values else ["int64", 1]
        for k in range(n_in)
    ]
    want_out = [["int64", 1]] * n_out + [["int64", 0]] * n_out
    for key, want in (("inputs", want_in), ("outputs", want_out)):
        got = description[key]
        if not isinstance(got, (list, tuple)) or [list(g) for g in got] != want:
            raise _error(
                f"{key} must be {want} (for a kernel of {n_in} inputs and {n_out} outputs), "
                f"found {got!r}"
            )
    return kernel


def output_shapes(
    kernel: Description | Mapping[str, Any],
    input_shapes: Sequence[Sequence[int]],
    input_values: Mapping[int, Any] | None = None,
):
    """The output shapes of a kernel given its input shapes: each node's rule in order.

    Parameters
    ----------
    kernel : Description or mapping
        The kernel's description (parsed, or plain data, which is validated first).
    input_shapes : sequence of sequence of int
        One shape per kernel input, of the declared ranks.
    input_values : mapping of int to array, optional
        The arrays of the inputs read by value (:func:`value_inputs`).

    Returns
    -------
    list of tuple of int
        One shape per kernel output.

    Raises
    ------
    ShapeFuncError
        If an input has the wrong rank, or a node's rule rejects its argument shapes.
    """
    if not isinstance(kernel, Description):
        kernel = parse_description(kernel)
    if len(input_shapes) != len(kernel.inputs):
        raise ShapeFuncError(
            f"the kernel takes {len(kernel.inputs)} inputs, given {len(input_shapes)} shapes"
        )
    values: list[Shape] = []
    for k, (shape, spec) in enumerate(zip(input_shapes, kernel.inputs)):
        dims = tuple(int(d) for d in shape)
        if len(dims) != spec.ndim or any(d < 0 for d in dims):
            raise ShapeFuncError(
                f"input {k} of the kernel has shape {fmt_shape(dims)}, but the kernel takes a "
                f"tensor of rank {spec.ndim}"
            )
        values.append(dims)
    for node in kernel.nodes:
        ranks = tuple(s.ndim for s in node.outputs)
        arrays = [input_values.get(a) for a in node.args] if input_values else None
        outs = op_output_shapes(node.op, [values[a] for a in node.args], node.attrs, ranks, arrays)
        if tuple(len(s) for s in outs) != ranks:  # a rule and the validator disagree: a bug
            raise ShapeFuncError(
                f"{node.op}: computed output shapes {', '.join(fmt_shape(s) for s in outs)} "
                f"do not have the declared ranks {ranks}"
            )
        values.extend(outs)
    return [values[r] for r in kernel.results]


# ---- the runnable form -------------------------------------------------------------------------

#: Shape results a shape function remembers, by input shapes (then it starts over).
CACHE_ENTRIES = 256


class ShapeFunction:
    """A validated shape function, called like a kernel: ``entry(*inputs, *outputs)``.

    Inputs are the kernel's input shapes (``int64`` vectors); outputs, written in place,
    are the kernel's output shapes (``int64`` vectors of the output ranks) and then their
    sizes in bytes (``int64`` scalars). Results are remembered per input shapes, so a
    program run again at the same shapes does no shape arithmetic.
    """

    def __init__(self, description: Mapping[str, Any]) -> None:
        self.kernel = check_shape_func(description)
        self.num_inputs = len(self.kernel.inputs)
        self.num_outputs = len(self.kernel.outputs)
        self.itemsizes = [np.dtype(s.dtype).itemsize for s in self.kernel.outputs]
        self.output_ndims = tuple(s.ndim for s in self.kernel.outputs)
        #: Inputs given as the tensors themselves (their values size the outputs).
        self.value_inputs = tuple(value_inputs(self.kernel))
        self._cache: dict[tuple, list[tuple[Shape, tuple[int], int]]] = {}

    def compute(
        self, input_shapes: Sequence[Sequence[int]], input_values: Mapping[int, Any] | None = None
    ) -> tuple[list[Shape], list[int]]:
        """The output shapes and their sizes in bytes for ``input_shapes`` (and, for the
        inputs read by value, ``input_values``)."""
        values = {k: np.asarray(v) for k, v in (input_values or {}).items()}
        key = tuple(
            tuple(values[k].reshape(-1).tolist()) if k in values else tuple(s)
            for k, s in enumerate(input_shapes)
        )
        writes = self._lookup(key, values)
        return [shape for shape, _, _ in writes], [size for _, _, size in writes]

    def _lookup(
        self, key: tuple, values: Mapping[int, Any] | None = None
    ) -> list[tuple[Shape, tuple[int], int]]:
        """Per output: its shape, the shape of the vector holding it, its size in bytes.

        ``key`` holds each input's shape, or its flattened values for an input read by
        value (whose shape the description fixes)."""
        writes = self._cache.get(key)
        if writes is None:
            if values:
                shapes_in = [
                    values[k].shape if k in values else shape for k, shape in enumerate(key)
                ]
                shapes = output_shapes(self.kernel, shapes_in, values)
            else:
                shapes = output_shapes(self.kernel, key)
            writes = [
                (shape, (len(shape),), _prod(shape) * itemsize)
                for shape, itemsize in zip(shapes, self.itemsizes)
            ]
            if len(self._cache) >= CACHE_ENTRIES:
                self._cache.clear()
            self._cache[key] = writes
        return writes

    def entry(self, *arrays: np.ndarray) -> None:
        """Compute into the output arrays (the calling convention of kernel entries)."""
        n_in, n_out = self.num_inputs, self.num_outputs
        if len(arrays) != n_in + 2 * n_out:
            raise ShapeFuncError(
                f"a shape function of {n_in} inputs and {n_out} outputs takes "
                f"{n_in + 2 * n_out} arrays, given {len(arrays)}"
            )
        # Called on every run of a dynamic kernel, so the common case is a dictionary hit.
        if self.value_inputs:
            values = {k: arrays[k] for k in self.value_inputs}
            key = tuple(
                [
                    tuple(a.reshape(-1).tolist()) if k in values else tuple(a.tolist())
                    for k, a in enumerate(arrays[:n_in])
                ]
            )
            writes = self._cache.get(key)
            if writes is None:
                writes = self._lookup(key, values)
        else:
            key = tuple([tuple(a.tolist()) for a in arrays[:n_in]])
            writes = self._cache.get(key)
            if writes is None:
                writes = self._lookup(key)
        k = n_in
        for shape, vector, size in writes:
            out = arrays[k]
            if out.shape != vector:
                raise ShapeFuncError(
                    f"output {k - n_in} of the shape function must be a vector of "
                    f"{len(shape)} elements, found shape {fmt_shape(out.shape)}"
                )
            out[...] = shape
            arrays[k + n_out][...] = size
            k += 1

    __call__ = entry


_TABLE: dict[str, ShapeFunction] = {}
_LOCK = threading.Lock()


def load_shape_function(description: Mapping[str, Any]) -> ShapeFunction:
    """The shape function of ``description``, validated once per process (thread-safe).

    Raises
    ------
    vm.kernels.KernelDescriptionError
        If the description is invalid.
    """
    key = json.dumps(description, sort_keys=True, separators=(",", ":"), default=str)
    function = _TABLE.get(key)
    if function is None:
        with _LOCK:
            function = _TABLE.get(key)
            if function is None:
                function = _TABLE[key] = ShapeFunction(description)
    return function


# ---- dispatch between shape functions and numba kernels -------------------------------------


def check_primitive(description: object) -> None:
    """Validate any primitive description: a shape function here, else a numba kernel's.

    Raises
    ------
    vm.kernels.KernelDescriptionError
        If it is invalid.
    """
    if is_shape_func(description):
        check_shape_func(description)
    else:
        from vm.kernels import check_description

        check_description(description)


def load_primitive(description: Mapping[str, Any]) -> Any:
    """The runnable form of a primitive: a :class:`ShapeFunction` or a compiled kernel.

    Both have ``entry(*inputs, *outputs)``. Numba is imported only for kernels.
    """
    if is_shape_func(description):
        return load_shape_function(description)
    from vm.kernels import load_kernel

    return load_kernel(description)
