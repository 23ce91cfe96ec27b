"""ONNX quantization: ``QuantizeLinear``, ``DequantizeLinear``, ``MatMulInteger``,
``QLinearMatMul`` and ``QLinearConv`` (8-bit models), as float arithmetic on exact integers.

Compiler layer (``compiler.frontend``); does not import ``onnx``. relayvm has no integer
product kernels, so the integer operators are computed in float64 on the zero-point-shifted
operands: every product of 8-bit values and every sum of them is an integer below 2**53,
so the accumulators are exact, as onnxruntime's int32 ones are. The requantization then
follows onnxruntime: the accumulator as float32, times the float32 multiplier
``a_scale * b_scale / y_scale``, rounded half to even, plus the zero point, saturated.
Scales and zero points may be per tensor or per axis (1-D).
"""

from __future__ import annotations

from compiler.frontend.onnx_context import NodeContext, Value
from compiler.frontend.onnx_ops_nn import _conv, _matmul
from compiler.frontend.onnx_ops_tensor import normalize_axis
from compiler.frontend.onnx_registry import register

#: Output ranges of the integer types a quantized tensor may have.
_RANGES = {
    "uint8": (0, 255),
    "int8": (-128, 127),
    "uint16": (0, 65535),
    "int16": (-32768, 32767),
}

#: ONNX TensorProto data types accepted by opset 21's ``output_dtype``.
_ONNX_DTYPES = {2: "uint8", 3: "int8", 4: "uint16", 5: "int16"}


def _along(node: NodeContext, param: Value, x: Value, axis: int, what: str) -> Value:
    """A scale or zero point shaped to broadcast against ``x``: a scalar as it is, a 1-D
    one along ``axis``."""
    if param.ndim == 0 or (param.ndim == 1 and param.shape[0] == 1 and x.ndim == 0):
        return param
    if param.ndim != 1:
        raise node.unsupported(
            f"{what} must be a scalar or 1-D (per axis); blocked quantization is not supported"
        )
    axis = normalize_axis(node, axis, x.ndim)
    if param.shape[0] == 1:
        return node.call("reshape", param, newshape=[])
    shape = [1] * x.ndim
    shape[axis] = -1
    return node.call("reshape", param, newshape=shape)


def _quantization_axis(node: NodeContext) -> int:
    """The ``axis`` of a QuantizeLinear/DequantizeLinear node; blocked quantization (opset
    21's ``block_size``) is refused."""
    if node.opset >= 21 and int(node.attr("block_size", 0)):
        raise node.unsupported("blocked quantization (block_size) is not supported")
    return int(node.attr("axis", 1))


def _zero_point(node: NodeContext, index: int, dtype: str) -> Value:
    zero = node.optional(index)
    return zero if zero is not None else node.scalar(0, dtype)


def _quantize(node: NodeContext, value: Value, zero: Value, dtype: str) -> Value:
    """``saturate(round(value) + zero)`` as ``dtype`` (``value`` already scaled, float32)."""
    if dtype not in _RANGES:
        raise node.unsupported(f"quantizing to {dtype} is not supported; supported: uint8, int8")
    low, high = _RANGES[dtype]
    rounded = node.call("round", value)
    shifted = node.call("add", rounded, node.call("cast", zero, dtype="float32"))
    return node.call("cast", node.call("clip", shifted, a_min=low, a_max=high), dtype=dtype)


@register("QuantizeLinear")
def _quantize_linear(node: NodeContext) -> Value:
    x = node.input(0)
    axis = _quantization_axis(node)
    zero = node.optional(2)
    if zero is not None:
        dtype = zero.dtype
    else:
        code = int(node.attr("output_dtype", 0)) if node.opset >= 21 else 0
        dtype = _ONNX_DTYPES.get(code, "uint8") if code else "uint8"
        zero = node.scalar(0, dtype)
    scale = _along(node, node.input(1), x, axis, "y_scale")
    scaled = node.call("divide", node.call("cast", x, dtype="float32"), scale)
    return _quantize(node, scaled, _along(node, zero, x, axis, "y_zero_point"), dtype)


@register("DequantizeLinear")
def _dequantize_linear(node: NodeContext) -> Value:
    x = node.input(0)
    axis = _quantization_axis(node)
    scale = node.input(1)
    zero = _along(node, _zero_point(node, 2, x.dtype), x, axis, "x_zero_point")
    # int32 inputs (biases) would lose bits in float32 before the subtraction.
    wide = "float64" if x.dtype in ("int32", "uint32") else "float32"
    shifted = node.call(
        "subtract", node.call("cast", x, dtype=wide), node.call("cast", zero, dtype=wide)
    )
    shifted = node.call("cast", shifted, dtype="float32")
    return node.call("multiply", shifted, _along(node, scale, x, axis, "x_scale"))


def _shifted(node: NodeContext, x: Value, zero: Value | None, axis: int, what: str) -> Value:
    """``x - zero`` in float64 (exact for 8-bit values), ``zero`` along ``axis``."""
    value = node.call("cast", x, dtype="float64")
    if zero is None:
        return value
    zero = _along(node, zero, x, axis, what)
    return node.call("subtract", value, node.call("cast", zero, dtype="float64"))


def _with_inputs(node: NodeContext, op_type: str, inputs: list[Value | None]) -> NodeContext:
    """``node`` seen as a float ``op_type`` node over ``inputs`` (for reusing its converter)."""
    return NodeContext(
        op_type,
        node.name,
        node.index,
        node.opset,
        inputs,
        [""] * len(inputs),
        node.attrs,
        node.outputs[:1],
    )


def _requantize(
    node: NodeContext, accumulator: Value, multiplier: Value, zero: Value, dtype: str
) -> Value:
    scaled = node.call("multiply", node.call("cast", accumulator, dtype="float32"), multiplier)
    return _quantize(node, scaled, zero, dtype)


@register("MatMulInteger")
def _matmul_integer(node: NodeContext) -> Value:
    a, b = node.input(0), node.input(1)
    # A's zero point is per row (axis -2 of a matrix), B's per column (its last axis).
    a = _shifted(node, a, node.optional(2), max(a.ndim - 2, 0), "a_zero_point")
    b = _shifted(node, b, node.optional(3), b.ndim - 1, "b_zero_point")
    product = _matmul(_with_inputs(node, "MatMul", [a, b]))
    return node.call("cast", product, dtype="int32")


@register("ConvInteger")
def _conv_integer(node: NodeContext) -> Value:
    x, w = node.input(0), node.input(1)
    x_shifted = _shifted(node, x, node.optional(2), 1, "x_zero_point")
    w_shifted = _shifted(node, w, node.optional(3), 0, "w_zero_point")
    accumulator = _conv(_with_inputs(node, "Conv", [x_shifted, w_shifted, None]))
    return node.call("cast", accumulator, dtype="int32")


@register("QLinearMatMul")
def _qlinear_matmul(node: NodeContext) -> Value:
    a, b = node.input(0), node.input(3)
    y_zero = node.input(7)
    a_shifted = _shifted(node, a, node.input(2), max(a.ndim - 2, 0), "a_zero_point")
    b_shifted = _shifted(node, b, node.input(5), b.ndim - 1, "b_zero_point")
    product = _matmul(_with_inputs(node, "MatMul", [a_shifted, b_shifted]))
    a_scale = _along(node, node.input(1), a, max(a.ndim - 2, 0), "a_scale")
    b_scale = _along(node, node.input(4), b, b.ndim - 1, "b_scale")
    multiplier = node.call("divide", node.call("multiply", a_scale, b_scale), node.input(6))
    return _requantize(node, product, multiplier, y_zero, y_zero.dtype)


@register("QLinearConv")
def _qlinear_conv(node: NodeContext) -> Value:
    x, w = node.input(0), node.input(3)
    y_zero = node.input(7)
    x_shifted = _shifted(node, x, node.input(2), 1, "x_zero_point")
    w_shifted = _shifted(node, w, node.input(5), 0, "w_zero_point")
    bias = node.optional(8)
    if bias is not None:
        bias = node.call("cast", bias, dtype="float64")
    accumulator = _conv(_with_inputs(node, "Conv", [x_shifted, w_shifted, bias]))
    # Per output channel scales broadcast along the accumulator's channel axis.
    w_scale = node.input(4)
    channel_scale = _along(node, w_scale, accumulator, 1, "w_scale")
    multiplier = node.call(
        "divide", node.call("multiply", node.input(1), channel_scale), node.input(6)
    )
    return _requantize(node, accumulator, multiplier, y_zero, y_zero.dtype)
