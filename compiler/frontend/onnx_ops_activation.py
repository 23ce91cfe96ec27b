"""ONNX activations and normalizations composed from element-wise operators: ``Gelu``,
``Mish``, ``Celu``, ``ThresholdedRelu``, ``Shrink``, ``LRN`` and ``GroupNormalization``.

Compiler layer (``compiler.frontend``); does not import ``onnx``. Each follows the formula
in the ONNX operator specification, written with Relay's element-wise operators so the
fusion pass merges it into one kernel.
"""

from __future__ import annotations

import math

from compiler.frontend.onnx_context import NodeContext, Value
from compiler.frontend.onnx_ops_tensor import shape_text
from compiler.frontend.onnx_registry import register
from compiler.ir.types import Any
from compiler.op.typerel import FLOAT_DTYPES


def _float_input(node: NodeContext) -> Value:
    x = node.input(0)
    if x.dtype not in FLOAT_DTYPES:
        raise node.error(f"input must be a floating-point tensor, found {x.dtype}")
    return x


@register("Gelu")
def _gelu(node: NodeContext) -> Value:
    x = _float_input(node)
    approximate = node.check_attr("approximate", ("none", "tanh"), "none")
    half = node.scalar(0.5, x.dtype)
    one = node.scalar(1.0, x.dtype)
    if approximate == "none":
        inner = node.call("erf", node.call("multiply", x, node.scalar(1 / math.sqrt(2), x.dtype)))
    else:
        cube = node.call("multiply", node.call("multiply", x, x), x)
        poly = node.call("add", x, node.call("multiply", cube, node.scalar(0.044715, x.dtype)))
        inner = node.call(
            "tanh", node.call("multiply", poly, node.scalar(math.sqrt(2 / math.pi), x.dtype))
        )
    return node.call("multiply", node.call("multiply", half, x), node.call("add", one, inner))


@register("Mish")
def _mish(node: NodeContext) -> Value:
    x = _float_input(node)
    softplus = node.call("log", node.call("add", node.call("exp", x), node.scalar(1, x.dtype)))
    return node.call("multiply", x, node.call("tanh", softplus))


@register("Celu")
def _celu(node: NodeContext) -> Value:
    x = _float_input(node)
    alpha = float(node.attr("alpha", 1.0))
    if alpha == 0:
        raise node.error("alpha must not be 0")
    scaled = node.call("divide", x, node.scalar(alpha, x.dtype))
    expm1 = node.call("subtract", node.call("exp", scaled), node.scalar(1, x.dtype))
    negative = node.call(
        "minimum",
        node.scalar(0, x.dtype),
        node.call("multiply", node.scalar(alpha, x.dtype), expm1),
    )
    return node.call("add", node.call("maximum", x, node.scalar(0, x.dtype)), negative)


@register("ThresholdedRelu")
def _thresholded_relu(node: NodeContext) -> Value:
    x = _float_input(node)
    alpha = node.scalar(float(node.attr("alpha", 1.0)), x.dtype)
    return node.call("where", node.call("greater", x, alpha), x, node.scalar(0, x.dtype))


@register("Shrink")
def _shrink(node: NodeContext) -> Value:
    x = node.input(0)
    if x.dtype == "bool":
        raise node.error("input must be numeric, found bool")
    bias = float(node.attr("bias", 0.0))
    lambd = float(node.attr("lambd", 0.5))
    zero = node.scalar(0, x.dtype)
    # The bounds compare in the input's type, as the specification's formula reads for
    # integer inputs too.
    below = node.call("less", node.call("cast", x, dtype="float64"), node.scalar(-lambd, "float64"))
    above = node.call(
        "greater", node.call("cast", x, dtype="float64"), node.scalar(lambd, "float64")
    )
    shifted_up = node.call("add", x, node.scalar(bias, x.dtype))
    shifted_down = node.call("subtract", x, node.scalar(bias, x.dtype))
    return node.call("where", below, shifted_up, node.call("where", above, shifted_down, zero))


@register("LRN")
def _lrn(node: NodeContext) -> Value:
    x = _float_input(node)
    size = node.attr("size")
    if size is None or int(size) < 1:
        raise node.error(f"attribute size must be a positive integer, found {size!r}")
    size = int(size)
    if x.ndim < 3:
        raise node.error(f"input {shape_text(x.shape)} must be (N, C, D1, ...)")
    channels = x.shape[1]
    if isinstance(channels, Any):
        raise node.unsupported("the channel count of the input must be known at import time")
    alpha = float(node.attr("alpha", 1e-4))
    beta = float(node.attr("beta", 0.75))
    bias = float(node.attr("bias", 1.0))
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    square = node.call("multiply", x, x)
    width = tuple((before, after) if d == 1 else (0, 0) for d in range(x.ndim))
    padded = node.call("nn.pad", square, node.scalar(0, x.dtype), pad_width=width)
    total: Value | None = None
    for start in range(size):
        window = node.call(
            "strided_slice", padded, begin=(start,), end=(start + int(channels),), axes=(1,)
        )
        total = window if total is None else node.call("add", total, window)
    assert total is not None
    scaled = node.call("multiply", total, node.scalar(alpha / size, x.dtype))
    denom = node.call(
        "power", node.call("add", scaled, node.scalar(bias, x.dtype)), node.scalar(beta, x.dtype)
    )
    return node.call("divide", x, denom)


@register("GroupNormalization")
def _group_norm(node: NodeContext) -> Value:
    x, scale, bias = _float_input(node), node.input(1), node.input(2)
    groups = node.attr("num_groups")
    if groups is None or int(groups) < 1:
        raise node.error(f"attribute num_groups must be a positive integer, found {groups!r}")
    groups = int(groups)
    if x.ndim < 3:
        raise node.error(f"input {shape_text(x.shape)} must be (N, C, D1, ...)")
    channels = x.shape[1]
    if isinstance(channels, Any):
        raise node.unsupported("the channel count of the input must be known at import time")
    channels = int(channels)
    if channels % groups:
        raise node.error(f"{channels} channels do not divide into {groups} groups")
    if node.opset < 21:
        # onnx's checker rejects these models: opset 21 replaced the per-group scale and bias.
        raise node.unsupported(
            "GroupNormalization before opset 21 (one scale and bias per group) is not supported"
        )
    for name, value in (("scale", scale), ("bias", bias)):
        if value.shape != (channels,):
            raise node.error(
                f"{name} {shape_text(value.shape)} must hold {channels} values (one per channel)"
            )
    return node.call(
        "nn.group_norm",
        x,
        scale,
        bias,
        num_groups=groups,
        axis=1,
        epsilon=float(node.attr("epsilon", 1e-5)),
    )
