"""The ``relay.nn`` namespace: builders for the neural-network operators.

Compiler layer (``compiler.op``). ``relay.nn.dense(data, weight)`` and friends return
``Call(get_op("nn.dense"), args, attrs)`` with attributes normalized, like the builders in
:mod:`compiler.op.api`; signatures and argument order follow TVM's ``tvm.relay.nn``.

Like TVM's builders, the window builders store an int size, stride or dilation as a
(height, width) pair and ``padding`` in its 4-int (top, left, bottom, right) form.
Operators with a tuple result (``batch_norm``, ``dropout_raw``) return the call itself:
index it (``relay.nn.batch_norm(...)[0]``) for a field.
"""

from __future__ import annotations

from collections.abc import Sequence

from compiler.ir.expr import Call, Constant, TupleGetItem
from compiler.op.api import SCHEMA, call_op, schema_defaults, static_attr
from compiler.op.defs_window import pad_pairs, padding_tuple, pair_tuple
from compiler.op.layouts import from_nchw, kernel_to_oihw, output_layout, to_nchw

__all__ = [
    "adaptive_avg_pool2d", "avg_pool2d", "batch_flatten", "batch_matmul", "batch_norm",
    "bias_add", "contrib_conv2d_gemm_without_weight_transform",
    "contrib_conv2d_winograd_weight_transform",
    "contrib_conv2d_winograd_without_weight_transform", "contrib_dense_pack", "conv2d",
    "conv2d_transpose", "dense", "dropout", "dropout_raw",
    "global_avg_pool2d", "global_max_pool2d", "group_norm", "layer_norm", "leaky_relu",
    "log_softmax", "matmul", "max_pool2d", "pad", "prelu", "relu", "softmax", "upsampling",
]  # fmt: skip

IntOrPair = int | Sequence[int]


@schema_defaults("nn.contrib_dense_pack")
def contrib_dense_pack(
    data: object,
    weight: object,
    units: int | None = SCHEMA,
    out_dtype: str = SCHEMA,
    weight_layout: str = SCHEMA,
) -> Call:
    """``data @ w.T`` with ``w`` given as ``weight`` in the ``NC{n}n`` panel layout that
    ``layout_transform(w, "NC", weight_layout)`` makes; ``units`` defaults to every panel
    row."""
    return call_op(
        "nn.contrib_dense_pack",
        [data, weight],
        units=units,
        out_dtype=out_dtype,
        weight_layout=weight_layout,
    )


@schema_defaults("nn.dense")
def dense(
    data: object, weight: object, units: int | None = SCHEMA, out_dtype: str = SCHEMA
) -> Call:
    """``data @ weight.T`` with ``weight`` of shape ``(units, in_features)``.

    ``out_dtype=""`` keeps the input dtype; otherwise the product accumulates in ``out_dtype``.
    """
    return call_op("nn.dense", [data, weight], units=units, out_dtype=out_dtype)


@schema_defaults("nn.matmul")
def matmul(
    tensor_a: object,
    tensor_b: object,
    units: int | None = SCHEMA,
    out_dtype: str = SCHEMA,
    transpose_a: bool = SCHEMA,
    transpose_b: bool = SCHEMA,
) -> Call:
    """``tensor_a @ tensor_b`` with ``tensor_b`` of shape ``(in_features, units)``.

    ``transpose_b=True`` takes ``tensor_b`` as ``(units, in_features)`` (``nn.dense``);
    ``transpose_a=True`` takes a 2-D ``tensor_a`` as ``(in_features, rows)``.
    """
    return call_op(
        "nn.matmul",
        [tensor_a, tensor_b],
        units=units,
        out_dtype=out_dtype,
        transpose_a=transpose_a,
        transpose_b=transpose_b,
    )


@schema_defaults("nn.bias_add")
def bias_add(data: object, bias: object, axis: int = SCHEMA) -> Call:
    """Add the 1-D ``bias`` along ``axis`` of ``data``."""
    return call_op("nn.bias_add", [data, bias], axis=axis)


def relu(data: object) -> Call:
    """``max(data, 0)``."""
    return call_op("nn.relu", [data])


@schema_defaults("nn.softmax")
def softmax(data: object, axis: int = SCHEMA) -> Call:
    """Softmax along ``axis`` (floating point)."""
    return call_op("nn.softmax", [data], axis=axis)


@schema_defaults("nn.log_softmax")
def log_softmax(data: object, axis: int = SCHEMA) -> Call:
    """Log of the softmax along ``axis`` (floating point)."""
    return call_op("nn.log_softmax", [data], axis=axis)


def batch_flatten(data: object) -> Call:
    """Flatten every axis but the first: ``(N, d1, d2, ...) -> (N, d1 * d2 * ...)``."""
    return call_op("nn.batch_flatten", [data])


@schema_defaults("nn.batch_matmul")
def batch_matmul(
    tensor_a: object,
    tensor_b: object,
    out_dtype: str = SCHEMA,
    transpose_a: bool = SCHEMA,
    transpose_b: bool = SCHEMA,
) -> Call:
    """Batched matrix product of 3-D tensors; by default ``tensor_b`` is ``(batch, N, K)``."""
    return call_op(
        "nn.batch_matmul",
        [tensor_a, tensor_b],
        out_dtype=out_dtype,
        transpose_a=transpose_a,
        transpose_b=transpose_b,
    )


# --- convolutions ------------------------------------------------------------------------------


@schema_defaults("nn.conv2d")
def conv2d(
    data: object,
    weight: object,
    strides: IntOrPair = SCHEMA,
    padding: IntOrPair = SCHEMA,
    dilation: IntOrPair = SCHEMA,
    groups: int = SCHEMA,
    channels: int | None = SCHEMA,
    kernel_size: IntOrPair | None = SCHEMA,
    data_layout: str = SCHEMA,
    kernel_layout: str = SCHEMA,
    out_layout: str = SCHEMA,
    out_dtype: str = SCHEMA,
) -> Call:
    """2-D convolution of NCHW ``data`` with OIHW ``weight`` ``(O, C / groups, kh, kw)``.

    ``padding`` is 1, 2 or 4 ints (all sides; top/bottom and left/right; top, left, bottom,
    right); ``groups == C`` with weight ``(C * multiplier, 1, kh, kw)`` is depthwise.
    ``data_layout="NHWC"`` (or ``out_layout``) and another order of the kernel's letters
    (``"HWIO"``...) build the NCHW convolution between transposes
    (:mod:`compiler.op.layouts`).
    """
    attrs = _conv2d_attrs(
        strides, padding, dilation, groups, channels, kernel_size, data_layout, kernel_layout,
        out_layout, out_dtype,
    )  # fmt: skip
    op = "nn.conv2d"
    if (data_layout, kernel_layout, out_layout) in (("NCHW", "OIHW", ""), ("NCHW", "OIHW", "NCHW")):
        return call_op(op, [data, weight], **attrs)
    result_layout = output_layout(op, data_layout, out_layout)
    attrs.update(data_layout="NCHW", kernel_layout="OIHW", out_layout="")
    data = to_nchw(op, data, data_layout)
    weight = kernel_to_oihw(op, weight, kernel_layout)
    return from_nchw(op, call_op(op, [data, weight], **attrs), result_layout)


def _conv2d_attrs(
    strides: IntOrPair,
    padding: IntOrPair,
    dilation: IntOrPair,
    groups: int,
    channels: int | None,
    kernel_size: IntOrPair | None,
    data_layout: str,
    kernel_layout: str,
    out_layout: str,
    out_dtype: str,
) -> dict:
    """``nn.conv2d``'s attributes in TVM's stored form (also the Winograd convolution's)."""
    return {
        "strides": pair_tuple(strides),
        "padding": padding_tuple(padding),
        "dilation": pair_tuple(dilation),
        "groups": groups,
        "channels": channels,
        "kernel_size": pair_tuple(kernel_size),
        "data_layout": data_layout,
        "kernel_layout": kernel_layout,
        "out_layout": out_layout,
        "out_dtype": out_dtype,
    }


@schema_defaults("nn.contrib_conv2d_gemm_without_weight_transform")
def contrib_conv2d_gemm_without_weight_transform(
    data: object,
    weight: object,
    channels: int,
    kernel_size: IntOrPair,
    strides: IntOrPair = SCHEMA,
    padding: IntOrPair = SCHEMA,
    dilation: IntOrPair = SCHEMA,
    groups: int = SCHEMA,
    data_layout: str = SCHEMA,
    kernel_layout: str = SCHEMA,
    out_layout: str = SCHEMA,
    out_dtype: str = SCHEMA,
) -> Call:
    """``nn.conv2d`` of NCHW float32 ``data`` by OIHW weights ``w`` given as ``weight``
    ``= layout_transform(reshape(w, (channels, -1)), "NC", "NC32n")``."""
    attrs = _conv2d_attrs(
        strides, padding, dilation, groups, channels, kernel_size, data_layout, kernel_layout,
        out_layout, out_dtype,
    )  # fmt: skip
    name = "nn.contrib_conv2d_gemm_without_weight_transform"
    return call_op(name, [data, weight], **attrs)


@schema_defaults("nn.contrib_conv2d_winograd_weight_transform")
def contrib_conv2d_winograd_weight_transform(weight: object, tile_size: int = SCHEMA) -> Call:
    """OIHW 3x3 ``weight`` transformed for Winograd F(2x2, 3x3): ``(4, 4, O, I)``."""
    return call_op("nn.contrib_conv2d_winograd_weight_transform", [weight], tile_size=tile_size)


@schema_defaults("nn.contrib_conv2d_winograd_without_weight_transform")
def contrib_conv2d_winograd_without_weight_transform(
    data: object,
    weight: object,
    tile_size: int = SCHEMA,
    strides: IntOrPair = SCHEMA,
    padding: IntOrPair = SCHEMA,
    dilation: IntOrPair = SCHEMA,
    groups: int = SCHEMA,
    channels: int | None = SCHEMA,
    kernel_size: IntOrPair | None = (3, 3),
    data_layout: str = SCHEMA,
    kernel_layout: str = SCHEMA,
    out_layout: str = SCHEMA,
    out_dtype: str = SCHEMA,
) -> Call:
    """A 3x3, stride-1 ``nn.conv2d`` of NCHW ``data`` whose ``weight`` is already transformed
    by :func:`contrib_conv2d_winograd_weight_transform`."""
    attrs = _conv2d_attrs(
        strides, padding, dilation, groups, channels, kernel_size, data_layout, kernel_layout,
        out_layout, out_dtype,
    )  # fmt: skip
    name = "nn.contrib_conv2d_winograd_without_weight_transform"
    return call_op(name, [data, weight], tile_size=tile_size, **attrs)


@schema_defaults("nn.conv2d_transpose")
def conv2d_transpose(
    data: object,
    weight: object,
    strides: IntOrPair = SCHEMA,
    padding: IntOrPair = SCHEMA,
    dilation: IntOrPair = SCHEMA,
    groups: int = SCHEMA,
    channels: int | None = SCHEMA,
    kernel_size: IntOrPair | None = SCHEMA,
    data_layout: str = SCHEMA,
    kernel_layout: str = SCHEMA,
    out_layout: str = SCHEMA,
    output_padding: IntOrPair = SCHEMA,
    out_dtype: str = SCHEMA,
) -> Call:
    """Transposed 2-D convolution of NCHW ``data`` with IOHW ``weight`` ``(C, O / groups, kh,
    kw)``; each output side is ``(in - 1) * stride - pads + dilation * (k - 1) +
    output_padding + 1``."""
    return call_op(
        "nn.conv2d_transpose",
        [data, weight],
        channels=channels,
        kernel_size=pair_tuple(kernel_size),
        strides=pair_tuple(strides),
        output_padding=pair_tuple(output_padding),
        padding=padding_tuple(padding),
        dilation=pair_tuple(dilation),
        groups=groups,
        data_layout=data_layout,
        kernel_layout=kernel_layout,
        out_layout=out_layout,
        out_dtype=out_dtype,
    )


# --- pools -------------------------------------------------------------------------------------


@schema_defaults("nn.max_pool2d")
def max_pool2d(
    data: object,
    pool_size: IntOrPair = SCHEMA,
    strides: IntOrPair = SCHEMA,
    dilation: IntOrPair = SCHEMA,
    padding: IntOrPair = SCHEMA,
    layout: str = SCHEMA,
    out_layout: str = SCHEMA,
    ceil_mode: bool = SCHEMA,
) -> Call:
    """Maximum over ``pool_size`` windows of NCHW ``data`` (padding never wins); an NHWC
    ``layout`` builds the NCHW pool between transposes (:mod:`compiler.op.layouts`)."""
    data, layout, out_layout, back = _channels_first("nn.max_pool2d", data, layout, out_layout)
    return back(
        call_op(
            "nn.max_pool2d",
            [data],
            pool_size=pair_tuple(pool_size),
            strides=pair_tuple(strides),
            dilation=pair_tuple(dilation),
            padding=padding_tuple(padding),
            layout=layout,
            out_layout=out_layout,
            ceil_mode=ceil_mode,
        )
    )


@schema_defaults("nn.avg_pool2d")
def avg_pool2d(
    data: object,
    pool_size: IntOrPair = SCHEMA,
    strides: IntOrPair = SCHEMA,
    dilation: IntOrPair = SCHEMA,
    padding: IntOrPair = SCHEMA,
    layout: str = SCHEMA,
    out_layout: str = SCHEMA,
    ceil_mode: bool = SCHEMA,
    count_include_pad: bool = SCHEMA,
) -> Call:
    """Average over ``pool_size`` windows of NCHW ``data``; padding counts in the divisor only
    with ``count_include_pad``; an NHWC ``layout`` builds the NCHW pool between transposes."""
    data, layout, out_layout, back = _channels_first("nn.avg_pool2d", data, layout, out_layout)
    return back(
        call_op(
            "nn.avg_pool2d",
            [data],
            pool_size=pair_tuple(pool_size),
            strides=pair_tuple(strides),
            dilation=pair_tuple(dilation),
            padding=padding_tuple(padding),
            layout=layout,
            out_layout=out_layout,
            ceil_mode=ceil_mode,
            count_include_pad=count_include_pad,
        )
    )


@schema_defaults("nn.global_max_pool2d")
def global_max_pool2d(data: object, layout: str = SCHEMA, out_layout: str = SCHEMA) -> Call:
    """Maximum over the height and width of NCHW ``data``: ``(N, C, 1, 1)`` (an NHWC
    ``layout``: the NCHW pool between transposes)."""
    op = "nn.global_max_pool2d"
    data, layout, out_layout, back = _channels_first(op, data, layout, out_layout)
    return back(call_op(op, [data], layout=layout, out_layout=out_layout))


@schema_defaults("nn.global_avg_pool2d")
def global_avg_pool2d(data: object, layout: str = SCHEMA, out_layout: str = SCHEMA) -> Call:
    """Average over the height and width of NCHW ``data``: ``(N, C, 1, 1)`` (an NHWC
    ``layout``: the NCHW pool between transposes)."""
    op = "nn.global_avg_pool2d"
    data, layout, out_layout, back = _channels_first(op, data, layout, out_layout)
    return back(call_op(op, [data], layout=layout, out_layout=out_layout))


@schema_defaults("nn.adaptive_avg_pool2d")
def adaptive_avg_pool2d(
    data: object,
    output_size: IntOrPair | None = SCHEMA,
    layout: str = SCHEMA,
    out_layout: str = SCHEMA,
) -> Call:
    """Average of NCHW ``data`` over an ``output_size`` grid of adaptive bins (``None`` keeps
    the input size; one int makes a square; an NHWC ``layout``: the NCHW pool between
    transposes)."""
    op = "nn.adaptive_avg_pool2d"
    data, layout, out_layout, back = _channels_first(op, data, layout, out_layout)
    return back(call_op(op, [data], output_size=output_size, layout=layout, out_layout=out_layout))


def _channels_first(op: str, data: object, layout: str, out_layout: str) -> tuple:
    """A pool's ``(data, layout, out_layout, back)`` for its NCHW operator: ``data``
    transposed from ``layout``, and ``back`` turning the NCHW result into the layout asked
    for (:mod:`compiler.op.layouts`); all unchanged for an NCHW pool."""
    result_layout = output_layout(op, layout, out_layout)
    if layout == "NCHW" and result_layout == "NCHW":
        return data, layout, out_layout, lambda result: result
    data = to_nchw(op, data, layout)
    return data, "NCHW", "", lambda result: from_nchw(op, result, result_layout)


# --- normalization -----------------------------------------------------------------------------


@schema_defaults("nn.batch_norm")
def batch_norm(
    data: object,
    gamma: object,
    beta: object,
    moving_mean: object,
    moving_var: object,
    axis: int = SCHEMA,
    epsilon: float = SCHEMA,
    center: bool = SCHEMA,
    scale: bool = SCHEMA,
) -> Call:
    """Batch normalization with moving statistics; a tuple (normalized data, moving_mean,
    moving_var): index the call, ``relay.nn.batch_norm(...)[0]``."""
    return call_op(
        "nn.batch_norm",
        [data, gamma, beta, moving_mean, moving_var],
        axis=axis,
        epsilon=epsilon,
        center=center,
        scale=scale,
    )


@schema_defaults("nn.layer_norm")
def layer_norm(
    data: object,
    gamma: object,
    beta: object,
    axis: int = SCHEMA,
    epsilon: float = SCHEMA,
    center: bool = SCHEMA,
    scale: bool = SCHEMA,
) -> Call:
    """Normalize ``data`` along ``axis``, then scale by ``gamma`` and shift by ``beta``."""
    return call_op(
        "nn.layer_norm",
        [data, gamma, beta],
        axis=axis,
        epsilon=epsilon,
        center=center,
        scale=scale,
    )


@schema_defaults("nn.group_norm")
def group_norm(
    data: object,
    gamma: object,
    beta: object,
    num_groups: int,
    axis: int = SCHEMA,
    epsilon: float = SCHEMA,
    center: bool = SCHEMA,
    scale: bool = SCHEMA,
) -> Call:
    """Normalize each of ``num_groups`` groups of channels (axis ``axis``) separately."""
    return call_op(
        "nn.group_norm",
        [data, gamma, beta],
        num_groups=num_groups,
        axis=axis,
        epsilon=epsilon,
        center=center,
        scale=scale,
    )


# --- padding, resizing, activations ------------------------------------------------------------


@schema_defaults("nn.pad")
def pad(
    data: object,
    pad_width: object,
    pad_value: object = 0.0,
    pad_mode: str = SCHEMA,
) -> Call:
    """Pad each axis by ``pad_width[axis] = (before, after)``; ``pad_mode`` is ``constant``
    (with the scalar ``pad_value``), ``edge`` or ``reflect``."""
    if isinstance(pad_width, Constant):
        pad_width = pad_width.data.tolist()
    pairs = pad_pairs("nn.pad", pad_width)
    return call_op("nn.pad", [data, pad_value], pad_width=pairs, pad_mode=pad_mode)


@schema_defaults("nn.upsampling")
def upsampling(
    data: object,
    scale_h: float = SCHEMA,
    scale_w: float = SCHEMA,
    layout: str = SCHEMA,
    method: str = SCHEMA,
    align_corners: bool = SCHEMA,
) -> Call:
    """Scale the height and width of NCHW ``data`` (``nearest_neighbor`` or ``bilinear``)."""
    return call_op(
        "nn.upsampling",
        [data],
        scale_h=static_attr("nn.upsampling", "scale_h", scale_h),
        scale_w=static_attr("nn.upsampling", "scale_w", scale_w),
        layout=layout,
        method=method,
        align_corners=align_corners,
    )


@schema_defaults("nn.leaky_relu")
def leaky_relu(data: object, alpha: float = SCHEMA) -> Call:
    """``data`` where positive, ``alpha * data`` elsewhere."""
    return call_op("nn.leaky_relu", [data], alpha=alpha)


@schema_defaults("nn.prelu")
def prelu(data: object, alpha: object, axis: int = SCHEMA) -> Call:
    """``data`` where positive, else ``alpha * data`` with the 1-D ``alpha`` along ``axis``."""
    return call_op("nn.prelu", [data, alpha], axis=axis)


@schema_defaults("nn.dropout")
def dropout_raw(data: object, rate: float = SCHEMA) -> Call:
    """The ``nn.dropout`` call itself: a tuple (output, mask); at inference the output is
    ``data`` and the mask is all ones."""
    return call_op("nn.dropout", [data], rate=rate)


@schema_defaults("nn.dropout")
def dropout(data: object, rate: float = SCHEMA) -> TupleGetItem:
    """Dropout's output (field 0 of :func:`dropout_raw`), as TVM's ``relay.nn.dropout``."""
    return TupleGetItem(dropout_raw(data, rate), 0)
