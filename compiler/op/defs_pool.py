"""Pooling over the spatial axes of NCHW data: ``nn.max_pool2d``, ``nn.avg_pool2d``,
``nn.global_max_pool2d``, ``nn.global_avg_pool2d`` and ``nn.adaptive_avg_pool2d``.

Compiler layer (``compiler.op``). Attributes and defaults follow TVM. Output sizes are
``floor((in + pads - dilated_window) / stride) + 1``; with ``ceil_mode`` the division rounds
up but, as in PyTorch, a last window that would start in the right padding is dropped
(TVM's relation keeps it, and then pools over padding only). Max pooling pads with the
dtype's lowest value (``-inf`` for floats); average pooling divides by the number of input
elements in the window, or with ``count_include_pad`` by the number of input and padding
elements (never the part of a ``ceil_mode`` window hanging past the padding). A window that
holds no input element averages to 0. Average pools take floating-point data only.
``nn.adaptive_avg_pool2d`` uses PyTorch's bins: ``[floor(i * in / out), ceil((i + 1) * in /
out))``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler.ir.attrs import Attrs
from compiler.ir.types import Any, Dim, TensorType, Type
from compiler.op.defs_common import define, result
from compiler.op.defs_window import (
    AXIS_NAMES,
    NCHW,
    OUT_LAYOUTS,
    check_layout,
    fmt_attr,
    nchw_data,
    padding4,
    pair,
    window_output,
)
from compiler.op.registry import OpPattern, OpTypeError
from compiler.op.typerel import fmt_type, require_dtype

POOL = OpPattern.OUT_ELEMWISE_FUSABLE


def _pool_data(op: str, ty: Type, attrs: Attrs, kind: str) -> TensorType:
    data = nchw_data(op, ty)
    require_dtype(op, data, "data", kind)
    check_layout(op, attrs, "layout", (NCHW,))
    check_layout(op, attrs, "out_layout", OUT_LAYOUTS)
    return data


def _concrete(data: np.ndarray) -> list[Type]:
    return [TensorType(data.shape, data.dtype.name)]


# --- nn.max_pool2d and nn.avg_pool2d -----------------------------------------------------------


def _window_rel(op: str, kind: str):
    def rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
        data = _pool_data(op, arg_types[0], attrs, kind)
        pool = pair(op, attrs, "pool_size")
        strides = pair(op, attrs, "strides")
        dilation = pair(op, attrs, "dilation")
        top, left, bottom, right = padding4(op, attrs)
        ceil_mode = bool(attrs["ceil_mode"])
        out_h = window_output(
            op, data, 0, pool[0], strides[0], dilation[0], top, bottom, "pool window", ceil_mode
        )
        out_w = window_output(
            op, data, 1, pool[1], strides[1], dilation[1], left, right, "pool window", ceil_mode
        )
        return TensorType([data.shape[0], data.shape[1], out_h, out_w], data.dtype)

    rel.__doc__ = f"{op}(data): (N, C, H, W) -> (N, C, OH, OW) pooled over windows."
    return rel


class _Windows:
    """The geometry of one pooling call on concrete data: output size, padding, offsets."""

    def __init__(self, op: str, data: np.ndarray, attrs: Attrs, out_type: TensorType) -> None:
        self.out = (int(out_type.shape[2]), int(out_type.shape[3]))  # type: ignore[arg-type]
        self.size = data.shape[2:]
        self.pool = pair(op, attrs, "pool_size")
        self.strides = pair(op, attrs, "strides")
        self.dilation = pair(op, attrs, "dilation")
        top, left, bottom, right = padding4(op, attrs)
        self.before = (top, left)
        self.after = (bottom, right)

    def pad_widths(self) -> tuple[tuple[int, int], ...]:
        """Padding so that every window lies inside the padded array (``ceil_mode`` overhang
        included)."""
        widths = []
        for axis in range(2):
            need = (
                (self.out[axis] - 1) * self.strides[axis]
                + (self.pool[axis] - 1) * self.dilation[axis]
                + 1
            )
            after = max(need - self.before[axis] - self.size[axis], 0)
            widths.append((self.before[axis], after))
        return ((0, 0), (0, 0), *widths)

    def views(self, padded: np.ndarray):
        """For each window offset, the strided view of ``padded`` holding that element of
        every window."""
        for i in range(self.pool[0]):
            for j in range(self.pool[1]):
                starts = (i * self.dilation[0], j * self.dilation[1])
                rows, cols = (
                    slice(starts[a], starts[a] + (self.out[a] - 1) * self.strides[a] + 1,
                          self.strides[a])
                    for a in range(2)
                )  # fmt: skip
                yield padded[:, :, rows, cols]

    def counts(self, include_pad: bool) -> np.ndarray:
        """How many elements each window averages over, shaped (OH, OW)."""
        per_axis = []
        for axis in range(2):
            starts = np.arange(self.out[axis]) * self.strides[axis] - self.before[axis]
            offsets = np.arange(self.pool[axis]) * self.dilation[axis]
            positions = starts[:, None] + offsets[None, :]
            if include_pad:
                low, high = -self.before[axis], self.size[axis] + self.after[axis]
            else:
                low, high = 0, self.size[axis]
            per_axis.append(((positions >= low) & (positions < high)).sum(axis=1))
        return per_axis[0][:, None] * per_axis[1][None, :]


def _lowest(dtype: np.dtype) -> object:
    if np.issubdtype(dtype, np.floating):
        return -np.inf
    return np.iinfo(dtype).min


def _max_pool2d(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    (data,) = args
    out_type = _max_pool2d_rel(_concrete(data), attrs)
    windows = _Windows("nn.max_pool2d", data, attrs, out_type)  # type: ignore[arg-type]
    lowest = _lowest(data.dtype)
    padded = np.pad(data, windows.pad_widths(), constant_values=lowest)
    out = np.full(data.shape[:2] + windows.out, lowest, dtype=data.dtype)
    for view in windows.views(padded):
        out = np.maximum(out, view)
    return result(out, data.dtype)


def _avg_pool2d(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    (data,) = args
    out_type = _avg_pool2d_rel(_concrete(data), attrs)
    windows = _Windows("nn.avg_pool2d", data, attrs, out_type)  # type: ignore[arg-type]
    # float16 sums in float32, as the kernels do; wider floats sum in their own dtype.
    acc = np.promote_types(data.dtype, np.float32)
    padded = np.pad(data.astype(acc), windows.pad_widths())
    total = np.zeros(data.shape[:2] + windows.out, dtype=acc)
    for view in windows.views(padded):
        total += view
    counts = windows.counts(bool(attrs["count_include_pad"]))
    with np.errstate(all="ignore"):
        out = total / np.maximum(counts, 1).astype(acc)
    return result(out, data.dtype)


_max_pool2d_rel = _window_rel("nn.max_pool2d", "numeric")
_avg_pool2d_rel = _window_rel("nn.avg_pool2d", "float")

define(
    "nn.max_pool2d",
    ("data",),
    _max_pool2d_rel,
    _max_pool2d,
    POOL,
    doc="maximum over 2-D windows of NCHW data",
)
define(
    "nn.avg_pool2d",
    ("data",),
    _avg_pool2d_rel,
    _avg_pool2d,
    POOL,
    doc="average over 2-D windows of NCHW data",
)


# --- global pools ------------------------------------------------------------------------------


def _check_spatial(op: str, data: TensorType) -> None:
    for axis in range(2):
        size = data.shape[2 + axis]
        if not isinstance(size, Any) and size < 1:
            raise OpTypeError(
                f"{op}: data {fmt_type(data)} has an empty {AXIS_NAMES[axis]}; pooling needs "
                "at least one element per window"
            )


def _global_rel(op: str, kind: str):
    def rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
        data = _pool_data(op, arg_types[0], attrs, kind)
        _check_spatial(op, data)
        return TensorType([data.shape[0], data.shape[1], 1, 1], data.dtype)

    rel.__doc__ = f"{op}(data): (N, C, H, W) -> (N, C, 1, 1)."
    return rel


def _global_max_pool2d(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    (data,) = args
    _global_max_rel(_concrete(data), attrs)
    return result(np.max(data, axis=(2, 3), keepdims=True), data.dtype)


def _global_avg_pool2d(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    (data,) = args
    _global_avg_rel(_concrete(data), attrs)
    acc = np.promote_types(data.dtype, np.float32)
    return result(np.mean(data, axis=(2, 3), keepdims=True, dtype=acc), data.dtype)


_global_max_rel = _global_rel("nn.global_max_pool2d", "numeric")
_global_avg_rel = _global_rel("nn.global_avg_pool2d", "float")

define(
    "nn.global_max_pool2d",
    ("data",),
    _global_max_rel,
    _global_max_pool2d,
    POOL,
    doc="maximum over the whole height and width of NCHW data",
)
define(
    "nn.global_avg_pool2d",
    ("data",),
    _global_avg_rel,
    _global_avg_pool2d,
    POOL,
    doc="average over the whole height and width of NCHW data",
)


# --- nn.adaptive_avg_pool2d --------------------------------------------------------------------


def _output_size(op: str, attrs: Attrs, data: TensorType) -> tuple[Dim, Dim]:
    """``output_size`` as (height, width): None or () keeps the input size, one int is square."""
    value = attrs["output_size"]
    if value is None or value == ():
        return data.shape[2], data.shape[3]
    sizes = tuple(value) if isinstance(value, tuple) else (value,)
    if len(sizes) == 1:
        sizes = sizes * 2
    if len(sizes) != 2:
        raise OpTypeError(
            f"{op}: attribute output_size={fmt_attr(value)} must hold 1 or 2 ints "
            f"(height, width), found {len(sizes)}"
        )
    if min(sizes) < 1:
        raise OpTypeError(f"{op}: attribute output_size={fmt_attr(value)} must hold values >= 1")
    return sizes[0], sizes[1]


def _adaptive_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """nn.adaptive_avg_pool2d(data): (N, C, H, W) -> (N, C, *output_size)."""
    op = "nn.adaptive_avg_pool2d"
    data = _pool_data(op, arg_types[0], attrs, "float")
    _check_spatial(op, data)
    out_h, out_w = _output_size(op, attrs, data)
    return TensorType([data.shape[0], data.shape[1], out_h, out_w], data.dtype)


def _bins(size: int, out: int) -> list[tuple[int, int]]:
    """PyTorch's adaptive bins: ``[floor(i * size / out), ceil((i + 1) * size / out))``."""
    return [((i * size) // out, -(-((i + 1) * size) // out)) for i in range(out)]


def _adaptive_avg_pool2d(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    (data,) = args
    out_type = _adaptive_rel(_concrete(data), attrs)
    out_h, out_w = int(out_type.shape[2]), int(out_type.shape[3])  # type: ignore[arg-type]
    acc = np.promote_types(data.dtype, np.float32)
    out = np.empty(data.shape[:2] + (out_h, out_w), dtype=acc)
    for i, (h0, h1) in enumerate(_bins(data.shape[2], out_h)):
        for j, (w0, w1) in enumerate(_bins(data.shape[3], out_w)):
            out[:, :, i, j] = np.mean(data[:, :, h0:h1, w0:w1], axis=(2, 3), dtype=acc)
    return result(out, data.dtype)


define(
    "nn.adaptive_avg_pool2d",
    ("data",),
    _adaptive_rel,
    _adaptive_avg_pool2d,
    POOL,
    doc="average over output_size adaptive bins of NCHW data",
)
