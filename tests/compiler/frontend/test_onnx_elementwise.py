"""ONNX element-wise operators imported by from_onnx agree with onnxruntime (returns).

Each test builds a one-node model, runs the imported module on the reference interpreter
and compares with onnxruntime.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import helper

from compiler import relay
from tests.compiler.frontend._onnx_helpers import check_against_ort, model, single_op

RNG = np.random.default_rng(7)


def randn(*shape: int, dtype: str = "float32") -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize(
    "op_type",
    ["Add", "Sub", "Mul", "Div", "Max", "Min", "Equal", "Less", "Greater", "LessOrEqual",
     "GreaterOrEqual"],
)  # fmt: skip
def test_binary_float_operators_broadcast_like_onnx(op_type):
    a = randn(2, 3, 4)
    b = randn(3, 1)
    b[0, 0] = a[0, 0, 0]  # make Equal and the non-strict comparisons see a tie
    check_against_ort(*single_op(op_type, {"a": a, "b": b}))


def test_pow_with_positive_base_and_integer_exponent_of_another_dtype():
    base = np.abs(randn(3, 4)) + 0.5
    exponent = np.array([2], dtype="int64")
    check_against_ort(*single_op("Pow", {"a": base}, constants={"e": exponent}))
    check_against_ort(*single_op("Pow", {"a": base, "b": randn(4)}))


def test_integer_division_truncates_toward_zero():
    a = np.array([[7, -7, 7, -7, 0]], dtype="int32")
    b = np.array([2, 2, -2, -2, 3], dtype="int32")
    check_against_ort(*single_op("Div", {"a": a, "b": b}))


@pytest.mark.parametrize("fmod", [0, 1])
def test_integer_mod_follows_the_fmod_attribute(fmod):
    a = np.array([7, -7, 7, -7, 5], dtype="int32")
    b = np.array([3, 3, -3, -3, 5], dtype="int32")
    check_against_ort(*single_op("Mod", {"a": a, "b": b}, {"fmod": fmod}))


def test_float_mod_with_fmod():
    check_against_ort(*single_op("Mod", {"a": randn(5) * 5, "b": randn(5) + 3}, {"fmod": 1}))


@pytest.mark.parametrize("op_type", ["And", "Or", "Xor"])
def test_logical_binary_operators(op_type):
    a = np.array([[True, False, True, False]])
    b = np.array([[True], [False]])
    check_against_ort(*single_op(op_type, {"a": a, "b": b}))


def test_not():
    check_against_ort(*single_op("Not", {"a": np.array([True, False, True])}))


@pytest.mark.parametrize(
    "op_type",
    ["Neg", "Abs", "Exp", "Sin", "Cos", "Tan", "Tanh", "Sigmoid", "Erf", "Floor", "Ceil",
     "Sign", "Relu", "Reciprocal", "Softplus", "Softsign", "Identity"],
)  # fmt: skip
def test_unary_float_operators(op_type):
    check_against_ort(*single_op(op_type, {"x": randn(3, 5) * 2}), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op_type", ["Log", "Sqrt"])
def test_unary_operators_on_positive_inputs(op_type):
    check_against_ort(*single_op(op_type, {"x": np.abs(randn(4, 4)) + 0.1}))


def test_round_takes_halves_to_even():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.4, -0.6], dtype="float32")
    check_against_ort(*single_op("Round", {"x": x}))


def test_isnan():
    x = np.array([1.0, np.nan, -np.inf, 0.0], dtype="float32")
    check_against_ort(*single_op("IsNaN", {"x": x}))


@pytest.mark.parametrize(
    ("op_type", "attrs"),
    [
        ("LeakyRelu", {}),
        ("LeakyRelu", {"alpha": 0.3}),
        ("Elu", {"alpha": 0.7}),
        ("Selu", {}),
        ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}),
        ("HardSwish", {}),
    ],
)
def test_activations_with_attributes(op_type, attrs):
    check_against_ort(*single_op(op_type, {"x": randn(2, 3, 4) * 3}, attrs))


@pytest.mark.parametrize(
    "slope",
    [
        RNG.standard_normal((3, 1, 1)).astype("float32"),  # per channel of NCHW
        RNG.standard_normal((1,)).astype("float32"),  # one slope for all
        RNG.standard_normal((5,)).astype("float32"),  # along the last axis
        RNG.standard_normal((3, 4, 5)).astype("float32"),  # element-wise
    ],
    ids=["per-channel", "scalar", "last-axis", "elementwise"],
)
def test_prelu_broadcasts_the_slope_unidirectionally(slope):
    check_against_ort(*single_op("PRelu", {"x": randn(2, 3, 4, 5)}, constants={"slope": slope}))


def test_prelu_with_a_per_channel_slope_uses_nn_prelu():
    slope = np.full((3, 1, 1), 0.1, dtype="float32")
    mod, _ = relay.frontend.from_onnx(
        single_op("PRelu", {"x": randn(1, 3, 2, 2)}, constants={"slope": slope})[0]
    )
    assert "nn.prelu" in mod.astext()


@pytest.mark.parametrize(
    ("constants", "order"),
    [
        ({"lo": np.array(-0.5, "float32"), "hi": np.array(0.7, "float32")}, ["x", "lo", "hi"]),
        ({"lo": np.array(-0.5, "float32")}, ["x", "lo"]),
        ({"hi": np.array(0.2, "float32")}, ["x", "", "hi"]),
        ({}, ["x"]),
        ({"lo": np.array(1.0, "float32"), "hi": np.array(0.0, "float32")}, ["x", "lo", "hi"]),
    ],
    ids=["both", "min-only", "max-only", "none", "min-above-max"],
)
def test_clip_with_bounds_as_constant_inputs(constants, order):
    proto, feeds = single_op("Clip", {"x": randn(4, 5)}, constants=constants, input_order=order)
    check_against_ort(proto, feeds)


def test_clip_with_bounds_computed_at_run_time():
    feeds = {"x": randn(4, 5), "lo": np.array(-0.3, "float32"), "hi": np.array(0.4, "float32")}
    check_against_ort(*single_op("Clip", feeds))


def test_clip_bounds_as_attributes_before_opset_11():
    proto, feeds = single_op("Clip", {"x": randn(6)}, {"min": -0.1, "max": 0.5}, opset=10)
    check_against_ort(proto, feeds)


def test_integer_clip():
    x = np.arange(-5, 5, dtype="int32")
    constants = {"lo": np.array(-2, "int32"), "hi": np.array(3, "int32")}
    check_against_ort(*single_op("Clip", {"x": x}, constants=constants))


@pytest.mark.parametrize("op_type", ["Max", "Min", "Sum", "Mean"])
def test_variadic_operators_fold_every_input(op_type):
    feeds = {"a": randn(2, 3), "b": randn(3), "c": randn(2, 1)}
    check_against_ort(*single_op(op_type, feeds))


def test_where_broadcasts_condition_and_branches():
    feeds = {"c": RNG.random((2, 3)) > 0.5, "x": randn(2, 3), "y": randn(3)}
    check_against_ort(*single_op("Where", feeds))


@pytest.mark.parametrize(
    ("dtype", "to"),
    [("float32", 6), ("float32", 9), ("int32", 1), ("float32", 11), ("bool", 1), ("int64", 6)],
)
def test_cast_between_element_types(dtype, to):
    x = (randn(3, 4) * 10).astype(dtype)
    check_against_ort(*single_op("Cast", {"x": x}, {"to": to}))


def test_cast_like_takes_the_dtype_of_its_second_input():
    feeds = {"x": randn(3) * 4, "like": np.zeros(1, dtype="int32")}
    check_against_ort(*single_op("CastLike", feeds))


def test_dropout_is_the_identity_and_its_mask_is_all_true():
    proto, feeds = single_op("Dropout", {"x": randn(3, 4)}, outputs=2, opset=13)
    check_against_ort(proto, feeds)
    proto, feeds = single_op("Dropout", {"x": randn(3, 4)}, {"ratio": 0.3}, opset=10)
    check_against_ort(proto, feeds)


def test_constants_fold_at_import_time():
    nodes = [
        helper.make_node("Constant", [], ["c"], value_floats=[1.0, 2.0, 3.0]),
        helper.make_node("Mul", ["c", "c"], ["c2"]),
        helper.make_node("Add", ["x", "c2"], ["y"]),
    ]
    proto = model(nodes, {"x": ("float32", [3])}, ["y"])
    check_against_ort(proto, {"x": randn(3)})
    mod, params = relay.frontend.from_onnx(proto)
    assert "multiply" not in mod.astext()
    assert params == {}
