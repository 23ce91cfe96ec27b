"""TorchScript neural-network converters: convolutions, pools, normalizations, dense
layers and matrix products, softmax, attention and upsampling.

Compiler layer (``compiler.frontend``); does not import ``torch``. Registers into
:data:`compiler.frontend.pytorch_ops.CONVERTERS`. Where ONNX has the same operator the ONNX
frontend's converter builds it (``node.onnx``), with torch's operands turned into ONNX
attributes: torch's symmetric ``padding`` ``(ph, pw)`` is ONNX's ``pads`` ``(ph, pw, ph,
pw)``.
"""

from __future__ import annotations

import math
from typing import Any as AnyT

import numpy as np

from compiler.frontend.onnx_context import Value
from compiler.frontend.pytorch_ops import SCALAR_TYPES, TorchNode, register


def _pair(node: TorchNode, index: int, rank: int, what: str, default: int) -> list[int]:
    if node.arg(index) is None:
        return [default] * rank
    values = node.ints(index, what)
    if len(values) == 1:
        values = values * rank
    if len(values) != rank:
        raise node.error(f"{what} {tuple(values)} must hold {rank} values")
    return values


# --- convolution -------------------------------------------------------------------------------


def _conv(
    node: TorchNode,
    transposed: bool,
    output_padding_index: int | None,
    groups_index: int,
    dilation_index: int = 5,
) -> Value:
    x, w = node.tensor(0), node.tensor(1)
    bias = node.arg(2)
    rank = w.ndim - 2
    strides = _pair(node, 3, rank, "stride", 1)
    dilations = _pair(node, dilation_index, rank, "dilation", 1)
    attrs: dict[str, AnyT] = {
        "strides": strides,
        "dilations": dilations,
        "group": node.int_of(node.arg(groups_index, 1), "groups"),
    }
    padding = node.arg(4)
    if padding == "valid":
        attrs["pads"] = [0] * (2 * rank)
    elif padding == "same":
        # torch puts the odd padding element at the end, as ONNX's SAME_UPPER does.
        attrs["auto_pad"] = "SAME_UPPER"
    else:
        pads = _pair(node, 4, rank, "padding", 0)
        attrs["pads"] = pads + pads
    if x.ndim != rank + 2:
        raise node.error(f"input of rank {x.ndim} for a {rank}-D convolution weight")
    inputs = [x, w, bias if isinstance(bias, Value) else None]
    if not transposed:
        return node.onnx("Conv", inputs, **attrs)
    if output_padding_index is not None:
        attrs["output_padding"] = _pair(node, output_padding_index, rank, "output_padding", 0)
    return node.onnx("ConvTranspose", inputs, **attrs)


@register("aten::conv1d", "aten::conv2d", "aten::_convolution_mode")
def _conv_nd(node: TorchNode) -> Value:
    return _conv(node, False, None, 6)


@register("aten::conv_transpose1d", "aten::conv_transpose2d")
def _conv_transpose_nd(node: TorchNode) -> Value:
    # (input, weight, bias, stride, padding, output_padding, groups, dilation)
    return _conv(node, True, 5, 6, dilation_index=7)


@register("aten::_convolution", "aten::convolution")
def _convolution(node: TorchNode) -> Value:
    # (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, ...)
    return _conv(node, bool(node.arg(6)), 7, 8)


# --- normalization -----------------------------------------------------------------------------


def _ones_like_channel(node: TorchNode, size: int, dtype: str, value: float) -> Value:
    return node.const(np.full((size,), value, dtype=dtype))


@register("aten::batch_norm")
def _batch_norm(node: TorchNode) -> Value:
    # (input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn)
    x = node.tensor(0)
    mean, var = node.arg(3), node.arg(4)
    if not isinstance(mean, Value) or not isinstance(var, Value):
        raise node.unsupported("batch norm without running statistics (track_running_stats=False)")
    channels = node.shape_of(mean)[0]
    weight = node.arg(1)
    bias = node.arg(2)
    weight = weight if isinstance(weight, Value) else _ones_like_channel(node, channels, x.dtype, 1)
    bias = bias if isinstance(bias, Value) else _ones_like_channel(node, channels, x.dtype, 0)
    return node.onnx(
        "BatchNormalization", [x, weight, bias, mean, var], epsilon=float(node.arg(7, 1e-5))
    )


@register("aten::layer_norm")
def _layer_norm(node: TorchNode) -> Value:
    # (input, normalized_shape, weight, bias, eps, cudnn_enable)
    x = node.tensor(0)
    shape = node.ints(1, "normalized_shape")
    dims = node.shape_of(x)
    if tuple(shape) != dims[len(dims) - len(shape) :]:
        raise node.error(f"normalized_shape {tuple(shape)} does not end the input shape {dims}")
    weight, bias = node.arg(2), node.arg(3)
    if not isinstance(weight, Value):
        weight = node.const(np.ones(shape, dtype=x.dtype))
    inputs = [x, weight, bias if isinstance(bias, Value) else None]
    return node.onnx(
        "LayerNormalization", inputs, axis=-len(shape), epsilon=float(node.arg(4, 1e-5))
    )


@register("aten::group_norm")
def _group_norm(node: TorchNode) -> Value:
    # (input, num_groups, weight, bias, eps, cudnn_enable)
    x = node.tensor(0)
    channels = node.shape_of(x)[1]
    weight, bias = node.arg(2), node.arg(3)
    weight = weight if isinstance(weight, Value) else _ones_like_channel(node, channels, x.dtype, 1)
    bias = bias if isinstance(bias, Value) else _ones_like_channel(node, channels, x.dtype, 0)
    return node.call(
        "nn.group_norm",
        x,
        weight,
        bias,
        num_groups=node.int_of(node.arg(1), "num_groups"),
        axis=1,
        epsilon=float(node.arg(4, 1e-5)),
    )


# --- pools -------------------------------------------------------------------------------------


def _pool_attrs(node: TorchNode, rank: int) -> dict[str, AnyT]:
    kernel = _pair(node, 1, rank, "kernel_size", 1)
    stride = node.arg(2)
    strides = kernel if stride in (None, []) else _pair(node, 2, rank, "stride", 1)
    pads = _pair(node, 3, rank, "padding", 0)
    return {"kernel_shape": kernel, "strides": strides, "pads": pads + pads}


@register("aten::max_pool1d", "aten::max_pool2d")
def _max_pool(node: TorchNode) -> Value:
    # (input, kernel_size, stride, padding, dilation, ceil_mode)
    rank = 1 if node.kind.endswith("1d") else 2
    attrs = _pool_attrs(node, rank)
    attrs["dilations"] = _pair(node, 4, rank, "dilation", 1)
    attrs["ceil_mode"] = int(bool(node.arg(5, False)))
    return node.onnx("MaxPool", [node.tensor(0)], **attrs)


@register("aten::avg_pool1d", "aten::avg_pool2d")
def _avg_pool(node: TorchNode) -> Value:
    # (input, kernel_size, stride, padding, ceil_mode, count_include_pad[, divisor_override])
    rank = 1 if node.kind.endswith("1d") else 2
    if node.arg(6) is not None:
        raise node.unsupported("divisor_override is not supported")
    attrs = _pool_attrs(node, rank)
    attrs["ceil_mode"] = int(bool(node.arg(4, False)))
    attrs["count_include_pad"] = int(bool(node.arg(5, True)))
    return node.onnx("AveragePool", [node.tensor(0)], **attrs)


def _output_size(node: TorchNode, x: Value) -> tuple[int, int]:
    dims = node.shape_of(x)
    given = node.arg(1)
    values = [given] * 2 if isinstance(given, int) or given is None else list(given)
    if len(values) != 2:
        raise node.error(f"output_size {given!r} must hold 2 values")
    return tuple(dims[2 + i] if v is None else int(v) for i, v in enumerate(values))  # type: ignore[return-value]


@register("aten::adaptive_avg_pool2d")
def _adaptive_avg_pool(node: TorchNode) -> Value:
    x = node.tensor(0)
    if x.ndim != 4:
        raise node.unsupported(f"adaptive pooling of a rank-{x.ndim} input (only NCHW)")
    size = _output_size(node, x)
    if size == (1, 1):
        return node.call("nn.global_avg_pool2d", x)
    return node.call("nn.adaptive_avg_pool2d", x, output_size=size)


@register("aten::adaptive_max_pool2d")
def _adaptive_max_pool(node: TorchNode) -> AnyT:
    x = node.tensor(0)
    if x.ndim != 4 or _output_size(node, x) != (1, 1):
        raise node.unsupported("adaptive max pooling to a size other than 1x1")
    out = node.call("nn.global_max_pool2d", x)
    # The indices output: only the pooled values are supported.
    return [out, _NoIndices()] if node.num_outputs == 2 else out


class _NoIndices:
    """The indices of adaptive max pooling, which the frontend does not compute."""

    def __repr__(self) -> str:
        return "<indices of adaptive_max_pool2d (not supported)>"


# --- dense layers and matrix products ----------------------------------------------------------


def _add_bias(node: TorchNode, out: Value, bias: AnyT) -> Value:
    return node.call("add", out, bias) if isinstance(bias, Value) else out


@register("aten::linear")
def _linear(node: TorchNode) -> Value:
    x, w = node.tensor(0), node.tensor(1)
    if w.ndim != 2:
        raise node.error(f"the weight must be a matrix, found rank {w.ndim}")
    if x.ndim == 1:
        out = node.call("nn.dense", node.call("expand_dims", x, axis=0), w)
        out = node.call("squeeze", out, axis=(0,))
    else:
        out = node.call("nn.dense", x, w)
    return _add_bias(node, out, node.arg(2))


@register("aten::addmm")
def _addmm(node: TorchNode) -> Value:
    # beta * input + alpha * (mat1 @ mat2)
    bias, a, b = node.tensor(0), node.tensor(1), node.tensor(2)
    beta, alpha = float(node.arg(3, 1)), float(node.arg(4, 1))
    out = node.call("nn.dense", a, node.call("transpose", b, axes=(1, 0)))
    if alpha != 1.0:
        out = node.call("multiply", out, node.scalar(alpha, out.dtype))
    if beta == 0.0:
        return out
    if beta != 1.0:
        bias = node.call("multiply", bias, node.scalar(beta, bias.dtype))
    return node.call("add", out, bias)


@register("aten::matmul")
def _matmul(node: TorchNode) -> Value:
    a, b = node.tensor(0), node.tensor(1)
    if a.ndim == 1 and b.ndim == 1:
        return node.call("sum", node.call("multiply", a, b), axis=(0,), keepdims=False)
    return node.onnx("MatMul", [a, b])


@register("aten::mm")
def _mm(node: TorchNode) -> Value:
    a, b = node.tensor(0), node.tensor(1)
    return node.call("nn.dense", a, node.call("transpose", b, axes=(1, 0)))


@register("aten::bmm")
def _bmm(node: TorchNode) -> Value:
    return node.call("nn.batch_matmul", node.tensor(0), node.tensor(1), transpose_b=False)


# --- softmax and attention ---------------------------------------------------------------------


@register("aten::softmax", "aten::log_softmax", "aten::_softmax", "aten::_log_softmax")
def _softmax(node: TorchNode) -> Value:
    x = node.tensor(0)
    dtype = node.arg(2)
    if isinstance(dtype, int) and not isinstance(dtype, bool):
        x = node.cast(x, SCALAR_TYPES.get(dtype, x.dtype))
    op = "nn.log_softmax" if "log_softmax" in node.kind else "nn.softmax"
    return node.call(op, x, axis=node.axis(node.arg(1), x.ndim))


@register("aten::scaled_dot_product_attention")
def _attention(node: TorchNode) -> Value:
    # (query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    q, k, v = node.tensor(0), node.tensor(1), node.tensor(2)
    mask = node.arg(3)
    if node.arg(7, False):
        raise node.unsupported("enable_gqa=True is not supported")
    scale = node.arg(6)
    scale = 1.0 / math.sqrt(node.shape_of(q)[-1]) if scale is None else float(scale)
    axes = list(range(k.ndim))
    axes[-1], axes[-2] = axes[-2], axes[-1]
    scores = node.onnx("MatMul", [q, node.call("transpose", k, axes=tuple(axes))])
    scores = node.call("multiply", scores, node.scalar(scale, scores.dtype))
    length_q, length_k = node.shape_of(scores)[-2:]
    if node.arg(5, False):
        causal = np.tril(np.ones((length_q, length_k), dtype=bool))
        mask = node.const(causal)
    if isinstance(mask, Value):
        if mask.dtype == "bool":
            fill = node.scalar(-np.inf, scores.dtype)
            scores = node.call("where", mask, scores, fill)
        else:
            scores = node.call("add", scores, node.cast(mask, scores.dtype))
    weights = node.call("nn.softmax", scores, axis=scores.ndim - 1)
    return node.onnx("MatMul", [weights, v])


# --- upsampling --------------------------------------------------------------------------------


def _upsample_scales(node: TorchNode, x: Value, sizes_index: int, scales_index: int) -> tuple:
    dims = node.shape_of(x)
    sizes = node.arg(sizes_index)
    if sizes is not None:
        out = node.ints(sizes_index, "output_size")
        return out[0] / dims[2], out[1] / dims[3]
    scales = node.arg(scales_index)
    if scales is None:
        raise node.error("needs either output_size or scale_factors")
    scales = [float(s) for s in scales]
    if len(scales) == 1:
        scales = scales * 2
    return scales[0], scales[1]


@register("aten::upsample_nearest2d")
def _upsample_nearest(node: TorchNode) -> Value:
    # (input, output_size, scale_factors) or (input, output_size, scales_h, scales_w)
    x = node.tensor(0)
    if x.ndim != 4:
        raise node.unsupported(f"upsampling of a rank-{x.ndim} input (only NCHW)")
    if len(node.args) == 4:
        scales = (
            _upsample_scales(node, x, 1, 99)
            if node.arg(1) is not None
            else (float(node.arg(2)), float(node.arg(3)))
        )
    else:
        scales = _upsample_scales(node, x, 1, 2)
    return node.call(
        "nn.upsampling", x, scale_h=scales[0], scale_w=scales[1], method="nearest_neighbor"
    )


def _resize_size(node: TorchNode, x: Value, scales: tuple[float, float]) -> tuple[int, int]:
    """The output size PyTorch gives for ``scales``, when it samples at exactly those
    scales: ``image.resize2d`` derives its scale from the sizes."""
    dims = node.shape_of(x)
    out = (math.floor(dims[2] * scales[0]), math.floor(dims[3] * scales[1]))
    if out[0] != dims[2] * scales[0] or out[1] != dims[3] * scales[1]:
        raise node.unsupported(
            f"interpolating {dims[2]}x{dims[3]} by scale factors {scales} makes "
            f"{out[0]}x{out[1]}, which PyTorch samples at the given factors; give the size "
            "instead"
        )
    return out


def _interpolated(node: TorchNode, method: str) -> Value:
    """``aten::upsample_bilinear2d`` or ``aten::upsample_bicubic2d``: (input, output_size,
    align_corners, scale_factors) or (..., scales_h, scales_w)."""
    x = node.tensor(0)
    if x.ndim != 4:
        raise node.unsupported(f"upsampling of a rank-{x.ndim} input (only NCHW)")
    corners = bool(node.arg(2))
    if len(node.args) == 5 and node.arg(1) is None:
        scales = (float(node.arg(3)), float(node.arg(4)))
    else:
        scales = _upsample_scales(node, x, 1, 3)
    if method == "linear" and corners:
        return node.call(
            "nn.upsampling", x, scale_h=scales[0], scale_w=scales[1], method="bilinear",
            align_corners=True,
        )  # fmt: skip
    if node.arg(1) is not None:
        size = tuple(node.ints(1, "output_size"))
    else:
        size = _resize_size(node, x, scales)
    # PyTorch's half-pixel sampling is ONNX's pytorch_half_pixel; its bicubic kernel is Keys'
    # with a = -0.75, taps clamped into the image.
    return node.call(
        "image.resize2d", x, size=size, method=method, cubic_alpha=-0.75,
        coordinate_transformation_mode="align_corners" if corners else "pytorch_half_pixel",
    )  # fmt: skip


@register("aten::upsample_bilinear2d")
def _upsample_bilinear(node: TorchNode) -> Value:
    return _interpolated(node, "linear")


@register("aten::upsample_bicubic2d")
def _upsample_bicubic(node: TorchNode) -> Value:
    return _interpolated(node, "cubic")


@register("aten::pixel_shuffle")
def _pixel_shuffle(node: TorchNode) -> Value:
    x = node.tensor(0)
    r = node.int_of(node.arg(1), "upscale_factor")
    dims = node.shape_of(x)
    if len(dims) != 4 or r < 1 or dims[1] % (r * r):
        raise node.error(f"cannot pixel-shuffle a tensor of shape {dims} by {r}")
    n, c, h, w = dims
    out = node.call("reshape", x, newshape=(n, c // (r * r), r, r, h, w))
    out = node.call("transpose", out, axes=(0, 1, 4, 2, 5, 3))
    return node.call("reshape", out, newshape=(n, c // (r * r), h * r, w * r))
