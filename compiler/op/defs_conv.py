"""Convolutions: ``nn.conv2d`` and ``nn.conv2d_transpose`` (NCHW data).

Compiler layer (``compiler.op``). Attributes, defaults and shapes follow TVM: ``nn.conv2d``
takes OIHW weights ``(out_channels, in_channels / groups, kh, kw)``, ``nn.conv2d_transpose``
takes IOHW weights ``(in_channels, out_channels / groups, kh, kw)``; ``padding`` has 1, 2 or 4
ints; ``groups`` splits the channels (``groups == in_channels`` is a depthwise convolution);
``out_dtype=""`` means the input dtype, and the references accumulate in ``out_dtype``.
Only the NCHW/OIHW (IOHW) layouts are implemented; others are rejected by name.

``nn.conv2d``'s reference is im2col and one matrix product per group; the transposed
convolution's scatters one matrix product per kernel offset into the output. Both stay short
and BLAS-fast for float data.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from compiler.ir.attrs import Attrs
from compiler.ir.types import Any, Dim, TensorType, Type
from compiler.op.defs_common import define, result
from compiler.op.defs_window import (
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
from compiler.op.typerel import (
    fmt_type,
    require_dtype,
    require_same_dtype,
    tensor_arg,
)


def _weight(op: str, ty: Type, layout: str, meaning: str) -> TensorType:
    weight = tensor_arg(op, ty, "weight")
    if weight.ndim != 4:
        raise OpTypeError(
            f"{op}: argument weight must be a 4-D {layout} tensor ({meaning}), "
            f"found {fmt_type(weight)}"
        )
    return weight


def _groups(op: str, attrs: Attrs) -> int:
    groups = attrs["groups"]
    if groups < 1:  # type: ignore[operator]
        raise OpTypeError(f"{op}: attribute groups={groups} must be >= 1")
    return groups  # type: ignore[return-value]


def _divisible(op: str, count: Dim, groups: int, what: str) -> None:
    if not isinstance(count, Any) and count % groups:
        raise OpTypeError(f"{op}: the {count} {what} are not divisible by groups={groups}")


def _kernel(op: str, attrs: Attrs, weight: TensorType) -> tuple[Dim, Dim]:
    """The kernel (height, width) from the weight, checked against ``kernel_size``."""
    kernel: list[Dim] = [weight.shape[2], weight.shape[3]]
    if attrs["kernel_size"] is None:
        return kernel[0], kernel[1]
    given = pair(op, attrs, "kernel_size")
    for i in range(2):
        if isinstance(kernel[i], Any):
            kernel[i] = given[i]
        elif kernel[i] != given[i]:
            raise OpTypeError(
                f"{op}: attribute kernel_size={fmt_attr(attrs['kernel_size'])} does not match "
                f"weight {fmt_type(weight)} with a {weight.shape[2]}x{weight.shape[3]} kernel"
            )
    return kernel[0], kernel[1]


def _channels(op: str, attrs: Attrs, weight: TensorType, out_channels: Dim) -> Dim:
    """The output channel count from the weight, checked against ``channels``."""
    channels = attrs["channels"]
    if channels is None:
        return out_channels
    if channels < 1:  # type: ignore[operator]
        raise OpTypeError(f"{op}: attribute channels={channels} must be >= 1")
    if not isinstance(out_channels, Any) and out_channels != channels:
        raise OpTypeError(
            f"{op}: attribute channels={channels} does not match weight {fmt_type(weight)} "
            f"with {out_channels} output channels"
        )
    return channels  # type: ignore[return-value]


def _common(
    op: str, arg_types: Sequence[Type], attrs: Attrs, kernel_layout: str, meaning: str
) -> tuple[TensorType, TensorType, str, tuple[int, int], tuple[int, int], tuple[int, ...], int]:
    """The checks both convolutions share: argument ranks and dtypes, layouts, strides,
    dilation, padding and groups."""
    data = nchw_data(op, arg_types[0])
    weight = _weight(op, arg_types[1], kernel_layout, meaning)
    dtype = require_same_dtype(op, [("data", data), ("weight", weight)])
    require_dtype(op, data, "data", "numeric")
    check_layout(op, attrs, "data_layout", (NCHW,))
    check_layout(op, attrs, "kernel_layout", (kernel_layout,))
    check_layout(op, attrs, "out_layout", OUT_LAYOUTS)
    strides = pair(op, attrs, "strides")
    dilation = pair(op, attrs, "dilation")
    padding = padding4(op, attrs)
    groups = _groups(op, attrs)
    return data, weight, dtype, strides, dilation, padding, groups


# --- nn.conv2d ---------------------------------------------------------------------------------

_OIHW = "out_channels, in_channels / groups, kernel_height, kernel_width"


def conv2d_relation(arg_types: Sequence[Type], attrs: Attrs, op: str = "nn.conv2d") -> Type:
    """nn.conv2d(data, weight): (N, C, H, W) x (O, C / groups, kh, kw) -> (N, O, OH, OW);
    errors name ``op`` (another operator computing a convolution checks with it)."""
    data, weight, dtype, strides, dilation, padding, groups = _common(
        op, arg_types, attrs, "OIHW", _OIHW
    )
    in_channels = data.shape[1]
    out_channels, group_channels = weight.shape[0], weight.shape[1]
    _divisible(op, in_channels, groups, f"input channels of data {fmt_type(data)}")
    _divisible(op, out_channels, groups, f"output channels of weight {fmt_type(weight)}")
    known = not isinstance(in_channels, Any) and not isinstance(group_channels, Any)
    if known and group_channels * groups != in_channels:
        raise OpTypeError(
            f"{op}: data {fmt_type(data)} has {in_channels} input channels, but weight "
            f"{fmt_type(weight)} with groups={groups} expects {group_channels} per group "
            f"({group_channels * groups} in all; the weight's second dimension is "
            "in_channels / groups)"
        )
    out_channels = _channels(op, attrs, weight, out_channels)
    kernel = _kernel(op, attrs, weight)
    top, left, bottom, right = padding
    out_h = window_output(op, data, 0, kernel[0], strides[0], dilation[0], top, bottom, "kernel")
    out_w = window_output(op, data, 1, kernel[1], strides[1], dilation[1], left, right, "kernel")
    return TensorType([data.shape[0], out_channels, out_h, out_w], attrs["out_dtype"] or dtype)


def _concrete(args: Sequence[np.ndarray]) -> list[Type]:
    return [TensorType(a.shape, a.dtype.name) for a in args]


def conv2d_reference(args: Sequence[np.ndarray], attrs: Attrs, op: str = "nn.conv2d") -> np.ndarray:
    """nn.conv2d's numpy reference; errors name ``op``."""
    data, weight = args
    out_type = conv2d_relation(_concrete(args), attrs, op)  # checks sizes that were ``?``
    dtype = out_type.dtype
    _, _, out_h, out_w = out_type.shape
    top, left, bottom, right = padding4(op, attrs)
    stride_h, stride_w = pair(op, attrs, "strides")
    dil_h, dil_w = pair(op, attrs, "dilation")
    groups: int = attrs["groups"]  # type: ignore[assignment]
    x = np.pad(data.astype(dtype), ((0, 0), (0, 0), (top, bottom), (left, right)))
    n = x.shape[0]
    out_channels, group_channels, kh, kw = weight.shape
    # im2col: every window as a column, (n, groups, C / groups * kh * kw, OH * OW), then one
    # batched matrix product per group with the flattened weights.
    span = ((kh - 1) * dil_h + 1, (kw - 1) * dil_w + 1)
    windows = sliding_window_view(x, span, axis=(2, 3))  # (n, C, .., .., span_h, span_w)
    windows = windows[
        :, :, : (out_h - 1) * stride_h + 1 : stride_h, : (out_w - 1) * stride_w + 1 : stride_w,
        ::dil_h, ::dil_w,
    ]  # fmt: skip
    columns = windows.reshape(n, groups, group_channels, out_h, out_w, kh, kw)
    columns = columns.transpose(0, 1, 2, 5, 6, 3, 4).reshape(n, groups, -1, out_h * out_w)
    w = weight.astype(dtype).reshape(groups, out_channels // groups, -1)
    with np.errstate(all="ignore"):
        out = np.matmul(w, columns)  # (n, groups, O / groups, OH * OW)
    return result(out.reshape(n, out_channels, out_h, out_w), dtype)


define(
    "nn.conv2d",
    ("data", "weight"),
    conv2d_relation,
    conv2d_reference,
    OpPattern.OUT_ELEMWISE_FUSABLE,
    doc="2-D convolution of NCHW data with OIHW weights",
)


# --- nn.conv2d_transpose -----------------------------------------------------------------------

_IOHW = "in_channels, out_channels / groups, kernel_height, kernel_width"


def _transpose_output(
    op: str,
    data: TensorType,
    axis: int,
    kernel: Dim,
    stride: int,
    dilation: int,
    pad_before: int,
    pad_after: int,
    output_padding: int,
) -> Dim:
    """``(in - 1) * stride - pads + dilation * (kernel - 1) + output_padding + 1``."""
    size = data.shape[2 + axis]
    if isinstance(size, Any) or isinstance(kernel, Any):
        return Any()
    full = (size - 1) * stride + dilation * (kernel - 1) + output_padding + 1
    out = full - pad_before - pad_after
    if out < 1:
        name = ("height", "width")[axis]
        raise OpTypeError(
            f"{op}: the output {name} of data {fmt_type(data)} would be {out}: padding "
            f"{pad_before} + {pad_after} removes the whole upsampled {name} {full}"
        )
    return out


def _conv2d_transpose_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """nn.conv2d_transpose(data, weight): (N, C, H, W) x (C, O / groups, kh, kw) -> (N, O, ..)."""
    op = "nn.conv2d_transpose"
    data, weight, dtype, strides, dilation, padding, groups = _common(
        op, arg_types, attrs, "IOHW", _IOHW
    )
    in_channels, group_out = data.shape[1], weight.shape[1]
    _divisible(op, in_channels, groups, f"input channels of data {fmt_type(data)}")
    weight_in = weight.shape[0]
    if not isinstance(in_channels, Any) and not isinstance(weight_in, Any):
        if weight_in != in_channels:
            raise OpTypeError(
                f"{op}: data {fmt_type(data)} has {in_channels} input channels, but weight "
                f"{fmt_type(weight)} has {weight_in} (the IOHW weight's first dimension is "
                "in_channels)"
            )
    else:
        _divisible(op, weight_in, groups, f"input channels of weight {fmt_type(weight)}")
    out_channels: Dim = Any() if isinstance(group_out, Any) else group_out * groups
    out_channels = _channels(op, attrs, weight, out_channels)
    if not isinstance(out_channels, Any) and out_channels % groups:
        raise OpTypeError(
            f"{op}: attribute channels={out_channels} is not divisible by groups={groups}"
        )
    kernel = _kernel(op, attrs, weight)
    output_padding = pair(op, attrs, "output_padding", minimum=0)
    for i in range(2):
        if output_padding[i] >= max(strides[i], dilation[i]):
            raise OpTypeError(
                f"{op}: attribute output_padding={fmt_attr(attrs['output_padding'])} must be "
                f"smaller than the stride or the dilation in each dimension "
                f"(strides={fmt_attr(attrs['strides'])}, "
                f"dilation={fmt_attr(attrs['dilation'])})"
            )
    top, left, bottom, right = padding
    out_h = _transpose_output(
        op, data, 0, kernel[0], strides[0], dilation[0], top, bottom, output_padding[0]
    )
    out_w = _transpose_output(
        op, data, 1, kernel[1], strides[1], dilation[1], left, right, output_padding[1]
    )
    return TensorType([data.shape[0], out_channels, out_h, out_w], attrs["out_dtype"] or dtype)


def _conv2d_transpose(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    op = "nn.conv2d_transpose"
    data, weight = args
    out_type = _conv2d_transpose_rel(_concrete(args), attrs)
    dtype = out_type.dtype
    _, out_channels, out_h, out_w = out_type.shape
    top, left, _, _ = padding4(op, attrs)
    stride_h, stride_w = pair(op, attrs, "strides")
    dil_h, dil_w = pair(op, attrs, "dilation")
    groups: int = attrs["groups"]  # type: ignore[assignment]
    n, in_channels, height, width = data.shape
    _, group_out, kh, kw = weight.shape
    group_in = in_channels // groups
    x = data.astype(dtype).reshape(n, groups, group_in, height * width)
    # (C, O / g, kh, kw) -> (g, O / g, C / g, kh, kw): each group maps its inputs to outputs.
    w = weight.astype(dtype).reshape(groups, group_in, group_out, kh, kw).transpose(0, 2, 1, 3, 4)
    # Scatter every input pixel's contribution into the full (unpadded) output, then crop.
    full_h = max((height - 1) * stride_h + dil_h * (kh - 1) + 1, top + out_h)
    full_w = max((width - 1) * stride_w + dil_w * (kw - 1) + 1, left + out_w)
    full = np.zeros((n, groups, group_out, full_h, full_w), dtype)
    with np.errstate(all="ignore"):
        for i in range(kh):
            for j in range(kw):
                rows = slice(i * dil_h, i * dil_h + (height - 1) * stride_h + 1, stride_h)
                cols = slice(j * dil_w, j * dil_w + (width - 1) * stride_w + 1, stride_w)
                part = np.matmul(w[:, :, :, i, j], x)  # (n, groups, O / groups, H * W)
                full[:, :, :, rows, cols] += part.reshape(n, groups, group_out, height, width)
    out = full[:, :, :, top : top + out_h, left : left + out_w]
    return result(out.reshape(n, out_channels, out_h, out_w), dtype)


define(
    "nn.conv2d_transpose",
    ("data", "weight"),
    _conv2d_transpose_rel,
    _conv2d_transpose,
    OpPattern.OUT_ELEMWISE_FUSABLE,
    doc="2-D transposed convolution of NCHW data with IOHW weights",
)
