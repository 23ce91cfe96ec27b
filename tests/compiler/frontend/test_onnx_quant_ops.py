"""ONNX quantization operators imported by from_onnx agree with onnxruntime and, without it,
with onnx's numpy reference (returns): QuantizeLinear and DequantizeLinear per tensor and per
axis, uint8 and int8; MatMulInteger; ConvInteger; QLinearMatMul; QLinearConv with
per-channel weight scales and a bias. Bad scales get errors naming them (invalid)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")

from compiler.frontend import OpNotImplemented
from tests.compiler.frontend._onnx_helpers import (
    HAVE_ORT,
    check_against_ort,
    check_against_reference,
    run_vm,
    single_op,
)

RNG = np.random.default_rng(11)


def check(proto, feeds, atol=0.0) -> None:
    # Quantized outputs are integers: equal, except where noted.
    check_against_reference(proto, feeds, rtol=0, atol=atol)
    if HAVE_ORT:
        check_against_ort(proto, feeds, rtol=0, atol=atol)


def ints(dtype: str, *shape: int) -> np.ndarray:
    low, high = (0, 256) if dtype == "uint8" else (-128, 128)
    return RNG.integers(low, high, shape).astype(dtype)


# ---- returns ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_quantize_linear_per_tensor_rounds_half_to_even_and_saturates(dtype):
    x = np.array([[-300.0, -1.5, -0.5, 0.5, 1.5, 2.5, 300.0, 0.26]], "float32")
    zero = np.array(3 if dtype == "uint8" else -2, dtype)
    proto, feeds = single_op(
        "QuantizeLinear", {"x": x}, {}, {"s": np.array(0.5, "float32"), "z": zero}
    )
    check(proto, feeds)


@pytest.mark.parametrize("axis", [0, 1])
def test_quantize_and_dequantize_per_axis(axis):
    x = RNG.standard_normal((3, 4)).astype("float32") * 4
    n = x.shape[axis]
    scale = RNG.uniform(0.02, 0.1, n).astype("float32")
    zero = RNG.integers(-5, 5, n).astype("int8")
    proto, feeds = single_op("QuantizeLinear", {"x": x}, {"axis": axis}, {"s": scale, "z": zero})
    check(proto, feeds)
    q = ints("int8", 3, 4)
    proto, feeds = single_op(
        "DequantizeLinear", {"q": q}, {"axis": axis}, {"s": scale, "z": zero}, opset=19
    )
    check(proto, feeds, atol=1e-6)


def test_dequantize_an_int32_bias_without_a_zero_point():
    q = RNG.integers(-(2**30), 2**30, (5,)).astype("int32")
    proto, feeds = single_op(
        "DequantizeLinear", {"q": q}, {}, {"s": np.array(1e-4, "float32")}, opset=19
    )
    check_against_reference(proto, feeds, rtol=1e-6, atol=0)


def test_matmul_integer_with_per_column_zero_points():
    a, b = ints("uint8", 4, 70), ints("uint8", 70, 5)
    constants = {"b": b, "az": np.array(17, "uint8"), "bz": ints("uint8", 5)}
    proto, feeds = single_op(
        "MatMulInteger", {"a": a}, {}, constants, input_order=["a", "b", "az", "bz"]
    )
    check(proto, feeds)


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_qlinear_matmul(dtype):
    a, b = ints(dtype, 2, 3, 40), ints(dtype, 40, 6)
    constants = {
        "as": np.array(0.02, "float32"), "az": np.array(4, dtype), "b": b,
        "bs": np.array(0.03, "float32"), "bz": np.array(-3 if dtype == "int8" else 7, dtype),
        "ys": np.array(0.5, "float32"), "yz": np.array(10, dtype),
    }  # fmt: skip
    proto, feeds = single_op(
        "QLinearMatMul", {"a": a}, {}, constants,
        input_order=["a", "as", "az", "b", "bs", "bz", "ys", "yz"],
    )  # fmt: skip
    check(proto, feeds)


def test_qlinear_conv_with_per_channel_scales_and_a_bias():
    x, w = ints("uint8", 1, 3, 9, 9), ints("int8", 4, 3, 3, 3)
    constants = {
        "xs": np.array(0.02, "float32"), "xz": np.array(120, "uint8"), "w": w,
        "ws": RNG.uniform(0.005, 0.02, 4).astype("float32"), "wz": np.zeros(4, "int8"),
        "ys": np.array(0.1, "float32"), "yz": np.array(128, "uint8"),
        "bias": RNG.integers(-500, 500, 4).astype("int32"),
    }  # fmt: skip
    attrs = {"pads": [1, 1, 1, 1], "strides": [2, 2]}
    proto, feeds = single_op(
        "QLinearConv", {"x": x}, attrs, constants,
        input_order=["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "bias"],
    )  # fmt: skip
    # Not onnxruntime: its x86 uint8 x int8 kernels may add pairs of products in saturating
    # 16 bits, so full-range weights give CPU-dependent answers (onnxruntime 1.32 on AMD
    # EPYC Zen 5: 23 of these 100 outputs off by up to 33 from the exact sums).
    check_against_reference(proto, feeds, rtol=0, atol=0)


@pytest.mark.parametrize("per_channel", [False, True])
def test_conv_integer_with_zero_points(per_channel):
    x, w = ints("uint8", 2, 3, 8, 7), ints("uint8", 5, 3, 3, 3)
    w_zero = ints("uint8", 5) if per_channel else np.array(9, "uint8")
    constants = {"w": w, "xz": np.array(130, "uint8"), "wz": w_zero}
    proto, feeds = single_op(
        "ConvInteger", {"x": x}, {"pads": [1, 0, 1, 2], "strides": [1, 2]}, constants,
        input_order=["x", "w", "xz", "wz"],
    )  # fmt: skip
    if per_channel:  # onnxruntime takes a per-tensor weight zero point only
        check_against_reference(proto, feeds, rtol=0, atol=0)
    else:
        check(proto, feeds)


def test_conv_integer_without_zero_points():
    x, w = ints("uint8", 1, 2, 6, 6), ints("uint8", 3, 2, 2, 2)
    check(*single_op("ConvInteger", {"x": x}, {}, {"w": w}))


# ---- invalid ------------------------------------------------------------------------------------


def test_a_scale_of_rank_two_is_named():
    x = np.ones((2, 3), "float32")
    proto, feeds = single_op(
        "QuantizeLinear",
        {"x": x},
        {},
        {"s": np.ones((2, 3), "float32"), "z": np.zeros((), "uint8")},
    )
    with pytest.raises(OpNotImplemented, match="y_scale must be a scalar or 1-D"):
        run_vm(proto, feeds)
