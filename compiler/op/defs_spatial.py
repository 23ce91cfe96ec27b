"""Injective operators that move data spatially: ``nn.pad`` and ``nn.upsampling``.

Compiler layer (``compiler.op``).

``nn.pad(data, pad_value; pad_width, pad_mode)`` follows TVM: ``pad_width`` holds one
``(before, after)`` pair of non-negative ints per axis, ``pad_value`` is a scalar tensor
argument (converted to data's dtype), and ``pad_mode`` is ``constant``, ``edge`` (repeat the
border element) or ``reflect`` (mirror without repeating the border, so each pad must be
smaller than its axis).

``nn.upsampling`` scales the height and width of NCHW data by ``scale_h`` and ``scale_w``;
the output size is ``round(size * scale)`` (ties to even, as TVM rounds). Source
coordinates are TVM's: ``asymmetric`` (``out_index * in / out``) by default, or with
``align_corners`` ``out_index * (in - 1) / (out - 1)`` (0 when the output has one row or
column). ``nearest_neighbor`` takes ``floor(coordinate + 1e-5)`` (``round`` with
``align_corners``), clamped to the input; ``bilinear`` interpolates the two neighbours on
each axis, clamping indices at the border.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler.ir.attrs import Attrs
from compiler.ir.types import Any, Dim, TensorType, Type
from compiler.op.defs_common import define, required, result
from compiler.op.defs_window import (
    AXIS_NAMES,
    NCHW,
    check_layout,
    fmt_attr,
    nchw_data,
    pad_pairs,
)
from compiler.op.registry import OpPattern, OpTypeError
from compiler.op.typerel import fmt_type, require_dtype, tensor_arg
from vm.kernels.emit_spatial import PAD_MODES, UPSAMPLING_METHODS

# --- nn.pad ------------------------------------------------------------------------------------


def _choice(op: str, attrs: Attrs, name: str, choices: Sequence[str]) -> str:
    """Re-check a choice attribute: a hand-built call may hold any value."""
    value = attrs[name]
    if value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise OpTypeError(f"{op}: attribute {name}={fmt_attr(value)} must be one of {allowed}")
    return value  # type: ignore[return-value]


def _check_mode_sizes(op: str, data: TensorType, pairs, mode: str) -> None:
    """``edge`` needs a non-empty axis to copy from; ``reflect`` needs pads < the axis size."""
    where = fmt_type(data)
    for axis, ((before, after), size) in enumerate(zip(pairs, data.shape)):
        if isinstance(size, Any) or before == after == 0:
            continue
        if mode == "edge" and size < 1:
            raise OpTypeError(
                f"{op}: pad_mode='edge' cannot pad axis {axis} of {where}: the axis is empty"
            )
        if mode == "reflect" and max(before, after) >= size:
            raise OpTypeError(
                f"{op}: pad_mode='reflect' needs pad widths smaller than the axis size, but "
                f"axis {axis} of {where} has size {size} and pad_width ({before}, {after})"
            )


def _pad_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """nn.pad(data, pad_value; pad_width, pad_mode): each axis grows by before + after."""
    op = "nn.pad"
    data = tensor_arg(op, arg_types[0], "data")
    value = tensor_arg(op, arg_types[1], "pad_value")
    if value.shape != ():
        raise OpTypeError(
            f"{op}: argument pad_value must be a scalar (shape ()), found {fmt_type(value)}"
        )
    pairs = pad_pairs(op, required(op, attrs, "pad_width"), data.ndim)
    mode = _choice(op, attrs, "pad_mode", PAD_MODES)
    _check_mode_sizes(op, data, pairs, mode)
    shape: list[Dim] = [
        d if isinstance(d, Any) else d + before + after
        for d, (before, after) in zip(data.shape, pairs)
    ]
    return TensorType(shape, data.dtype)


def _pad(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    data, value = args
    # The relation on the concrete shapes checks what ``?`` dimensions hid from type checking.
    _pad_rel([TensorType(a.shape, a.dtype.name) for a in args], attrs)
    pairs = pad_pairs("nn.pad", attrs["pad_width"], data.ndim)
    mode: str = attrs["pad_mode"]  # type: ignore[assignment]
    if mode == "constant":
        with np.errstate(all="ignore"):
            fill = np.asarray(value).astype(data.dtype)
        return result(np.pad(data, pairs, mode="constant", constant_values=fill), data.dtype)
    return result(np.pad(data, pairs, mode=mode), data.dtype)


define(
    "nn.pad",
    ("data", "pad_value"),
    _pad_rel,
    _pad,
    OpPattern.INJECTIVE,
    doc="pad each axis with pad_value, the edge value or a reflection",
)


# --- nn.upsampling -----------------------------------------------------------------------------


def _scaled(op: str, data: TensorType, axis: int, scale: float, attr: str) -> Dim:
    size = data.shape[2 + axis]
    if isinstance(size, Any):
        return Any()
    out = round(size * scale)  # Python rounds ties to even, like TVM's round
    if out < 1 and size > 0:
        raise OpTypeError(
            f"{op}: attribute {attr}={scale} turns the {AXIS_NAMES[axis]} {size} of data "
            f"{fmt_type(data)} into {out}; the output must have at least one element"
        )
    return out


def _upsampling_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """nn.upsampling(data; scale_h, scale_w, ...): (N, C, H, W) -> (N, C, H*sh, W*sw)."""
    op = "nn.upsampling"
    data = nchw_data(op, arg_types[0])
    check_layout(op, attrs, "layout", (NCHW,))
    method = _choice(op, attrs, "method", UPSAMPLING_METHODS)
    require_dtype(op, data, "data", "float" if method == "bilinear" else "numeric")
    for attr in ("scale_h", "scale_w"):
        scale = attrs[attr]
        if not scale > 0:  # type: ignore[operator]
            raise OpTypeError(f"{op}: attribute {attr}={fmt_attr(scale)} must be > 0")
    out_h = _scaled(op, data, 0, attrs["scale_h"], "scale_h")  # type: ignore[arg-type]
    out_w = _scaled(op, data, 1, attrs["scale_w"], "scale_w")  # type: ignore[arg-type]
    return TensorType([data.shape[0], data.shape[1], out_h, out_w], data.dtype)


def _source(size: int, out: int, align_corners: bool) -> np.ndarray:
    """The input coordinate each output row/column samples, as float64."""
    index = np.arange(out, dtype=np.float64)
    if align_corners:
        return index * ((size - 1) / (out - 1)) if out > 1 else np.zeros(out)
    return index * (size / out)


def _nearest(coords: np.ndarray, size: int, align_corners: bool) -> np.ndarray:
    index = np.rint(coords) if align_corners else np.floor(coords + 1e-5)
    return np.clip(index.astype(np.int64), 0, size - 1)


def _upsampling(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    (data,) = args
    out_type = _upsampling_rel([TensorType(data.shape, data.dtype.name)], attrs)
    out_h, out_w = int(out_type.shape[2]), int(out_type.shape[3])  # type: ignore[arg-type]
    height, width = data.shape[2:]
    if out_h == 0 or out_w == 0:
        return np.zeros(data.shape[:2] + (out_h, out_w), data.dtype)
    align = bool(attrs["align_corners"])
    ys, xs = _source(height, out_h, align), _source(width, out_w, align)
    if attrs["method"] == "nearest_neighbor":
        rows, cols = _nearest(ys, height, align), _nearest(xs, width, align)
        return result(data[:, :, rows][:, :, :, cols], data.dtype)
    y0, x0 = np.floor(ys).astype(np.int64), np.floor(xs).astype(np.int64)
    wy, wx = (ys - y0)[:, None], (xs - x0)[None, :]
    r0, r1 = np.clip(y0, 0, height - 1), np.clip(y0 + 1, 0, height - 1)
    c0, c1 = np.clip(x0, 0, width - 1), np.clip(x0 + 1, 0, width - 1)
    x = data.astype(np.float64)
    top = x[:, :, r0][:, :, :, c0] * (1 - wx) + x[:, :, r0][:, :, :, c1] * wx
    bottom = x[:, :, r1][:, :, :, c0] * (1 - wx) + x[:, :, r1][:, :, :, c1] * wx
    return result(top * (1 - wy) + bottom * wy, data.dtype)


define(
    "nn.upsampling",
    ("data",),
    _upsampling_rel,
    _upsampling,
    OpPattern.INJECTIVE,
    doc="scale the height and width of NCHW data (nearest neighbour or bilinear)",
)
