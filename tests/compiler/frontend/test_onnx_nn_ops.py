"""ONNX neural-network operators imported by from_onnx agree with onnxruntime (returns):
matrix products, convolutions, pools, normalizations, softmax and resizing."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import helper, numpy_helper

from compiler import relay
from tests.compiler.frontend._onnx_helpers import check_against_ort, model, single_op

RNG = np.random.default_rng(5)


def randn(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


# --- MatMul and Gemm ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ((3, 4), (4, 5)),
        ((2, 3, 4), (4, 5)),
        ((4,), (4, 5)),
        ((3, 4), (4,)),
        ((4,), (4,)),
        ((2, 3, 4), (2, 4, 5)),
        ((1, 3, 4), (2, 4, 5)),
        ((2, 1, 3, 4), (5, 4, 2)),
        ((3, 4), (2, 4, 5)),
        ((4,), (2, 4, 5)),
    ],
)
def test_matmul_with_every_rank_combination(a, b):
    check_against_ort(*single_op("MatMul", {"a": randn(*a), "b": randn(*b)}), rtol=1e-4)


def test_matmul_with_a_constant_weight_is_a_dense_layer():
    proto, feeds = single_op("MatMul", {"a": randn(2, 4)}, constants={"w": randn(4, 3)})
    check_against_ort(proto, feeds, rtol=1e-5)
    mod, params = relay.frontend.from_onnx(proto)
    assert "nn.dense(%a, %0)" in mod.astext()
    assert set(params) == {"w"}


def test_matmul_with_a_constant_node_weight_folds_the_transpose():
    weight = randn(4, 3)
    nodes = [
        helper.make_node("Constant", [], ["w"], value=numpy_helper.from_array(weight)),
        helper.make_node("MatMul", ["a", "w"], ["y"]),
    ]
    proto = model(nodes, {"a": ("float32", [2, 4])}, ["y"])
    check_against_ort(proto, {"a": randn(2, 4)})
    mod, params = relay.frontend.from_onnx(proto)
    text = mod.astext()
    assert "transpose" not in text and "nn.dense(%a, meta[relay.Constant][0])" in text
    assert params == {}


@pytest.mark.parametrize(
    "attrs",
    [
        {},
        {"transA": 1},
        {"transB": 1},
        {"alpha": 0.5, "beta": 2.0},
        {"transA": 1, "transB": 1, "alpha": 1.5, "beta": 0.0},
    ],
)
def test_gemm_attributes(attrs):
    a = randn(4, 3) if attrs.get("transA") else randn(3, 4)
    b = randn(5, 4) if attrs.get("transB") else randn(4, 5)
    proto, feeds = single_op("Gemm", {"a": a}, attrs, constants={"b": b, "c": randn(5)})
    check_against_ort(proto, feeds, rtol=1e-5)


def test_gemm_without_c():
    proto, feeds = single_op("Gemm", {"a": randn(3, 4), "b": randn(4, 2)}, {"alpha": 2.0})
    check_against_ort(proto, feeds)


# --- convolutions ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "w", "attrs"),
    [
        ((1, 3, 8, 8), (4, 3, 3, 3), {}),
        ((2, 3, 9, 7), (4, 3, 3, 2), {"strides": [2, 1], "pads": [1, 0, 2, 1]}),
        ((1, 4, 8, 8), (4, 1, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}),
        ((1, 4, 8, 8), (6, 2, 3, 3), {"group": 2, "dilations": [2, 1]}),
        ((1, 3, 7, 7), (2, 3, 3, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
        ((1, 3, 8, 8), (2, 3, 4, 4), {"auto_pad": "SAME_LOWER"}),
        ((1, 3, 8, 8), (2, 3, 3, 3), {"auto_pad": "VALID", "kernel_shape": [3, 3]}),
        ((2, 3, 10), (4, 3, 3), {"strides": [2], "pads": [1, 2]}),
    ],
    ids=["plain", "strided-padded", "depthwise", "grouped-dilated", "same-upper",
         "same-lower", "valid", "conv1d"],
)  # fmt: skip
def test_conv(x, w, attrs):
    proto, feeds = single_op(
        "Conv", {"x": randn(*x)}, attrs, constants={"w": randn(*w), "b": randn(w[0])}
    )
    check_against_ort(proto, feeds, rtol=1e-4, atol=1e-5)


def test_conv_without_bias_and_with_a_run_time_weight():
    check_against_ort(*single_op("Conv", {"x": randn(1, 2, 5, 5), "w": randn(3, 2, 2, 2)}))


@pytest.mark.parametrize(
    ("x", "w", "attrs"),
    [
        ((1, 3, 4, 4), (3, 2, 3, 3), {}),
        ((1, 3, 4, 5), (3, 2, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
        ((1, 4, 4, 4), (4, 1, 2, 2), {"strides": [2, 2], "group": 2, "output_padding": [1, 1]}),
        ((1, 2, 3, 3), (2, 2, 3, 3), {"strides": [2, 2], "output_shape": [6, 6]}),
        ((1, 2, 3, 3), (2, 2, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
        ((1, 2, 5), (2, 3, 3), {"strides": [2]}),
    ],
    ids=["plain", "strided-padded", "grouped-output-padding", "output-shape", "same-upper",
         "1d"],
)  # fmt: skip
def test_conv_transpose(x, w, attrs):
    proto, feeds = single_op(
        "ConvTranspose",
        {"x": randn(*x)},
        attrs,
        constants={"w": randn(*w), "b": randn(w[1] * attrs.get("group", 1))},
    )
    check_against_ort(proto, feeds, rtol=1e-4, atol=1e-5)


# --- pools -------------------------------------------------------------------------------------


@pytest.mark.parametrize("op_type", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize(
    "attrs",
    [
        {"kernel_shape": [2, 2]},
        {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
        {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1},
        {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER", "strides": [2, 2]},
        {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1},
        # EfficientNet's pooler as transformers exports it: a window far wider than the input.
        {"kernel_shape": [1280, 1280], "strides": [1280, 1280], "ceil_mode": 1},
    ],
    ids=["plain", "strided-padded", "ceil", "same-upper", "count-include-pad", "overhanging"],
)
def test_pools(op_type, attrs):
    if op_type == "MaxPool" and "count_include_pad" in attrs:
        attrs = {k: v for k, v in attrs.items() if k != "count_include_pad"}
    check_against_ort(*single_op(op_type, {"x": randn(2, 3, 7, 8)}, attrs))


def test_max_pool_with_dilation_and_1d_pool():
    attrs = {"kernel_shape": [2, 2], "dilations": [2, 1]}
    check_against_ort(*single_op("MaxPool", {"x": randn(1, 2, 7, 7)}, attrs))
    check_against_ort(*single_op("AveragePool", {"x": randn(1, 2, 9)}, {"kernel_shape": [3]}))


@pytest.mark.parametrize("op_type", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(2, 3, 5, 4), (2, 3, 6)])
def test_global_pools(op_type, shape):
    check_against_ort(*single_op(op_type, {"x": randn(*shape)}))


# --- normalization and softmax -----------------------------------------------------------------


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (4, 3)])
def test_batch_normalization_at_inference(shape):
    constants = {
        "scale": randn(3),
        "bias": randn(3),
        "mean": randn(3),
        "var": np.abs(randn(3)) + 0.5,
    }
    proto, feeds = single_op(
        "BatchNormalization", {"x": randn(*shape)}, {"epsilon": 1e-3}, constants
    )
    check_against_ort(proto, feeds, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("axis", "outputs", "with_bias"),
    [(-1, 1, True), (-1, 1, False), (1, 1, True), (-1, 3, True)],
    ids=["last-axis", "no-bias", "two-axes", "statistics-outputs"],
)
def test_layer_normalization(axis, outputs, with_bias):
    x = randn(2, 3, 4)
    norm_shape = x.shape[axis:]
    constants = {"scale": randn(*norm_shape)}
    if with_bias:
        constants["bias"] = randn(*norm_shape)
    proto, feeds = single_op(
        "LayerNormalization", {"x": x}, {"axis": axis, "epsilon": 1e-4}, constants, outputs=outputs
    )
    check_against_ort(proto, feeds, rtol=1e-4, atol=1e-5)


def test_instance_normalization():
    constants = {"scale": randn(3), "bias": randn(3)}
    proto, feeds = single_op("InstanceNormalization", {"x": randn(2, 3, 4, 5)}, {}, constants)
    check_against_ort(proto, feeds, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op_type", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize(("opset", "axis"), [(13, -1), (13, 1), (11, 1), (11, 2), (11, 0)])
def test_softmax_axis_semantics_change_at_opset_13(op_type, opset, axis):
    proto, feeds = single_op(op_type, {"x": randn(2, 3, 4)}, {"axis": axis}, opset=opset)
    check_against_ort(proto, feeds, rtol=1e-5)


# --- resizing ----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_upsample_with_scales_input(mode):
    scales = np.array([1, 1, 2, 3], dtype="float32")
    proto, feeds = single_op(
        "Upsample", {"x": randn(1, 2, 3, 4)}, {"mode": mode}, {"s": scales}, opset=9
    )
    check_against_ort(proto, feeds, rtol=1e-5, atol=1e-6)


def test_upsample_with_scales_attribute_in_opset_7():
    attrs = {"mode": "nearest", "scales": [1.0, 1.0, 3.0, 2.0]}
    check_against_ort(*single_op("Upsample", {"x": randn(1, 2, 3, 4)}, attrs, opset=7))


@pytest.mark.parametrize(
    ("attrs", "scales"),
    [
        ({"mode": "nearest"}, [1, 1, 2, 2]),
        ({"mode": "nearest"}, [1, 1, 3, 2]),
        ({"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
          "nearest_mode": "floor"}, [1, 1, 2, 3]),
        ({"mode": "linear", "coordinate_transformation_mode": "align_corners"}, [1, 1, 2, 2]),
        ({"mode": "linear", "coordinate_transformation_mode": "asymmetric"}, [1, 1, 2, 3]),
    ],
    ids=["nearest-half-pixel", "nearest-3x2", "nearest-asymmetric", "linear-align-corners",
         "linear-asymmetric"],
)  # fmt: skip
def test_resize_with_scales(attrs, scales):
    constants = {"roi": np.zeros(0, "float32"), "s": np.array(scales, dtype="float32")}
    proto, feeds = single_op("Resize", {"x": randn(1, 2, 3, 4)}, attrs, constants)
    check_against_ort(proto, feeds, rtol=1e-5, atol=1e-6)


def test_resize_with_sizes():
    sizes = np.array([1, 2, 6, 8], dtype="int64")
    proto, feeds = single_op(
        "Resize", {"x": randn(1, 2, 3, 4)}, {"mode": "nearest"}, {"s": sizes},
        input_order=["x", "", "", "s"],
    )  # fmt: skip
    check_against_ort(proto, feeds)
