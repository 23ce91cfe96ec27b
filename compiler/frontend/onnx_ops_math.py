"""ONNX element-wise operators: arithmetic, comparisons, logic, math functions, activations,
``Clip``, ``Where``, ``Cast``, ``Identity`` and ``Dropout``.

Compiler layer (``compiler.frontend``); does not import ``onnx``. ONNX's multidirectional
broadcasting is numpy's, which is also Relay's, so binary operators map one to one.
"""

from __future__ import annotations

import math

import numpy as np

from compiler.frontend.onnx_context import NodeContext, Value
from compiler.frontend.onnx_dtypes import relay_dtype
from compiler.frontend.onnx_registry import register
from compiler.op.typerel import FLOAT_DTYPES

_BINARY = {
    "Add": "add",
    "Sub": "subtract",
    "Mul": "multiply",
    "Div": "divide",
    "Equal": "equal",
    "Less": "less",
    "Greater": "greater",
    "LessOrEqual": "less_equal",
    "GreaterOrEqual": "greater_equal",
    "And": "logical_and",
    "Or": "logical_or",
    # For bools exclusive or is inequality.
    "Xor": "not_equal",
}

_UNARY = {
    "Neg": "negative",
    "Abs": "abs",
    "Exp": "exp",
    "Log": "log",
    "Sqrt": "sqrt",
    "Sin": "sin",
    "Cos": "cos",
    "Tanh": "tanh",
    "Sigmoid": "sigmoid",
    "Erf": "erf",
    "Floor": "floor",
    "Ceil": "ceil",
    "Round": "round",
    "Sign": "sign",
    "Relu": "nn.relu",
    "Not": "logical_not",
}


@register(*_BINARY)
def _binary(node: NodeContext) -> Value:
    return node.call(_BINARY[node.op_type], node.input(0), node.input(1))


@register("Pow")
def _pow(node: NodeContext) -> Value:
    base, exponent = node.input(0), node.input(1)
    # ONNX lets the exponent have its own type; Relay's power takes one dtype.
    if exponent.dtype != base.dtype:
        exponent = node.call("cast", exponent, dtype=base.dtype)
    return node.call("power", base, exponent)


@register("Mod")
def _mod(node: NodeContext) -> Value:
    fmod = node.check_attr("fmod", (0, 1), 0)
    a, b = node.input(0), node.input(1)
    if a.dtype in FLOAT_DTYPES and not fmod:
        raise node.error("Mod on floating-point inputs requires fmod=1")
    # fmod=1 is C's fmod (the sign of the dividend); fmod=0 is Python's % (the divisor's).
    return node.call("mod" if fmod else "floor_mod", a, b)


@register(*_UNARY)
def _unary(node: NodeContext) -> Value:
    return node.call(_UNARY[node.op_type], node.input(0))


@register("Identity")
def _identity(node: NodeContext) -> Value:
    return node.input(0)


@register("Reciprocal")
def _reciprocal(node: NodeContext) -> Value:
    x = node.input(0)
    return node.call("divide", node.scalar(1, x.dtype), x)


@register("Tan")
def _tan(node: NodeContext) -> Value:
    x = node.input(0)
    return node.call("divide", node.call("sin", x), node.call("cos", x))


@register("IsNaN")
def _isnan(node: NodeContext) -> Value:
    x = node.input(0)
    return node.call("not_equal", x, x)


# --- activations -------------------------------------------------------------------------------


@register("LeakyRelu")
def _leaky_relu(node: NodeContext) -> Value:
    return node.call("nn.leaky_relu", node.input(0), alpha=float(node.attr("alpha", 0.01)))


def _negative_part(node: NodeContext, x: Value, alpha: float) -> Value:
    """``alpha * (exp(x) - 1)``, the negative branch of Elu and Selu."""
    one = node.scalar(1, x.dtype)
    expm1 = node.call("subtract", node.call("exp", x), one)
    return node.call("multiply", node.scalar(alpha, x.dtype), expm1)


def _positive_where(node: NodeContext, x: Value, negative: Value) -> Value:
    """``x`` where ``x > 0``, else ``negative``."""
    positive = node.call("greater", x, node.scalar(0, x.dtype))
    return node.call("where", positive, x, negative)


@register("Elu")
def _elu(node: NodeContext) -> Value:
    x = node.input(0)
    return _positive_where(node, x, _negative_part(node, x, float(node.attr("alpha", 1.0))))


@register("Selu")
def _selu(node: NodeContext) -> Value:
    x = node.input(0)
    alpha = float(node.attr("alpha", 1.67326319217681884765625))
    gamma = float(node.attr("gamma", 1.05070102214813232421875))
    inner = _positive_where(node, x, _negative_part(node, x, alpha))
    return node.call("multiply", node.scalar(gamma, x.dtype), inner)


@register("Softplus")
def _softplus(node: NodeContext) -> Value:
    x = node.input(0)
    return node.call("log", node.call("add", node.call("exp", x), node.scalar(1, x.dtype)))


@register("Softsign")
def _softsign(node: NodeContext) -> Value:
    x = node.input(0)
    return node.call("divide", x, node.call("add", node.call("abs", x), node.scalar(1, x.dtype)))


def _hard_sigmoid(node: NodeContext, x: Value, alpha: float, beta: float) -> Value:
    """``clip(alpha * x + beta, 0, 1)``."""
    affine = node.call(
        "add", node.call("multiply", x, node.scalar(alpha, x.dtype)), node.scalar(beta, x.dtype)
    )
    return node.call("clip", affine, a_min=0.0, a_max=1.0)


@register("HardSigmoid")
def _hardsigmoid(node: NodeContext) -> Value:
    alpha = float(node.attr("alpha", 0.2))
    beta = float(node.attr("beta", 0.5))
    return _hard_sigmoid(node, node.input(0), alpha, beta)


@register("HardSwish")
def _hardswish(node: NodeContext) -> Value:
    x = node.input(0)
    return node.call("multiply", x, _hard_sigmoid(node, x, 1.0 / 6.0, 0.5))


@register("PRelu")
def _prelu(node: NodeContext) -> Value:
    x, slope = node.input(0), node.input(1)
    # nn.prelu takes a 1-D slope along one axis; find that axis after ONNX's unidirectional
    # broadcasting lines the slope's dimensions up with the data's trailing ones.
    if slope.ndim <= x.ndim:
        aligned = (1,) * (x.ndim - slope.ndim) + tuple(slope.shape)
        varying = [i for i, d in enumerate(aligned) if d != 1]
        if len(varying) == 1 and aligned[varying[0]] == x.shape[varying[0]]:
            axis = varying[0]
            vector = node.call("reshape", slope, newshape=(aligned[axis],))
            return node.call("nn.prelu", x, vector, axis=axis)
    negative = node.call("multiply", x, slope)
    is_negative = node.call("less", x, node.scalar(0, x.dtype))
    return node.call("where", is_negative, negative, x)


# --- clip, variadic, where, cast -------------------------------------------------------------


def _bound(node: NodeContext, index: int, attr: str, default: float) -> float | Value:
    """A Clip bound: an attribute before opset 11, an optional scalar input after."""
    if node.opset < 11:
        return float(node.attr(attr, default))
    value = node.optional(index)
    if value is None:
        return default
    if value.static is not None:
        return float(np.asarray(value.static).reshape(-1)[0])
    return value


@register("Clip")
def _clip(node: NodeContext) -> Value:
    x = node.input(0)
    lo = _bound(node, 1, "min", -math.inf)
    hi = _bound(node, 2, "max", math.inf)
    if isinstance(lo, float) and isinstance(hi, float) and lo <= hi:
        if lo == -math.inf and hi == math.inf:
            return x
        return node.call("clip", x, a_min=lo, a_max=hi)
    # Bounds known only at run time, or min > max (ONNX then gives max everywhere):
    # min(max(x, lo), hi) with the bounds as tensors.
    out = x
    if not (isinstance(lo, float) and lo == -math.inf):
        out = node.call("maximum", out, lo if isinstance(lo, Value) else node.scalar(lo, x.dtype))
    if not (isinstance(hi, float) and hi == math.inf):
        out = node.call("minimum", out, hi if isinstance(hi, Value) else node.scalar(hi, x.dtype))
    return out


@register("Max", "Min", "Sum", "Mean")
def _variadic(node: NodeContext) -> Value:
    values = node.present_inputs()
    if not values:
        raise node.error("needs at least one input")
    op = {"Max": "maximum", "Min": "minimum", "Sum": "add", "Mean": "add"}[node.op_type]
    out = values[0]
    for value in values[1:]:
        out = node.call(op, out, value)
    if node.op_type == "Mean" and len(values) > 1:
        out = node.call("divide", out, node.scalar(len(values), out.dtype))
    return out


@register("Where")
def _where(node: NodeContext) -> Value:
    return node.call("where", node.input(0), node.input(1), node.input(2))


def _cast(node: NodeContext, x: Value, dtype: str) -> Value:
    if dtype == x.dtype:
        return x
    return node.call("cast", x, dtype=dtype)


@register("Cast")
def _cast_op(node: NodeContext) -> Value:
    to = node.attr("to")
    if to is None:
        raise node.error("attribute 'to' is required")
    dtype = relay_dtype(int(to), f"the target type of ONNX {node.label}")
    return _cast(node, node.input(0), dtype)


@register("CastLike")
def _cast_like(node: NodeContext) -> Value:
    return _cast(node, node.input(0), node.input(1).dtype)


@register("Dropout")
def _dropout(node: NodeContext) -> list[Value]:
    x = node.input(0)
    if node.opset >= 12:
        training = node.optional_static(2, "training_mode")
        if training is not None and bool(np.asarray(training).reshape(-1)[0]):
            raise node.unsupported(
                "training_mode=True is not supported: only inference (no dropout) is"
            )
    # At inference Dropout is the identity and its mask is all true.
    outputs = [x]
    if node.wants_output(1):
        outputs.append(node.call("cast", node.call("ones_like", x), dtype="bool"))
    return outputs
