"""ONNX reductions imported by from_onnx agree with onnxruntime (returns): axes as an
attribute (before opset 13 for ReduceSum, 18 for the others) or an input, keepdims,
noop_with_empty_axes, and ArgMax/ArgMin."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from tests.compiler.frontend._onnx_helpers import check_against_ort, single_op

RNG = np.random.default_rng(3)
X = RNG.standard_normal((2, 3, 4)).astype("float32")
OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
       "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp"]  # fmt: skip


@pytest.mark.parametrize("op_type", OPS)
@pytest.mark.parametrize(("axes", "keepdims"), [([1], 1), ([0, -1], 0), (None, 0), (None, 1)])
def test_reductions_with_axes_as_attribute(op_type, axes, keepdims):
    attrs = {"keepdims": keepdims}
    if axes is not None:
        attrs["axes"] = axes
    opset = 11 if op_type == "ReduceSum" else 13
    proto, feeds = single_op(op_type, {"x": X}, attrs, opset=opset)
    check_against_ort(proto, feeds, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op_type", OPS)
def test_reductions_with_axes_as_input_in_opset_18(op_type):
    proto, feeds = single_op(
        op_type, {"x": X}, {"keepdims": 0}, constants={"a": np.array([2, 0], "int64")}, opset=18
    )
    check_against_ort(proto, feeds, rtol=1e-5, atol=1e-6)


def test_reduce_log_sum_of_positive_values():
    proto, feeds = single_op("ReduceLogSum", {"x": np.abs(X) + 0.1}, {"axes": [1]}, opset=13)
    check_against_ort(proto, feeds, rtol=1e-5)


def test_reduce_sum_axes_input_in_opset_13_and_empty_axes():
    axes = {"a": np.array([1], "int64")}
    check_against_ort(*single_op("ReduceSum", {"x": X}, constants=axes, opset=13))
    check_against_ort(*single_op("ReduceSum", {"x": X}, opset=13))
    check_against_ort(*single_op("ReduceSum", {"x": X}, {"noop_with_empty_axes": 1}, opset=13))


def test_integer_reduction():
    x = RNG.integers(-5, 5, (3, 4)).astype("int64")
    check_against_ort(*single_op("ReduceMax", {"x": x}, {"axes": [0]}, opset=13))


@pytest.mark.parametrize("op_type", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize(
    "attrs", [{}, {"axis": -1, "keepdims": 0}, {"axis": 1, "select_last_index": 1}]
)
def test_arg_reductions_give_int64_indices(op_type, attrs):
    x = np.array([[[1, 3, 3], [2, 2, 0]], [[0, 0, 5], [5, 1, 5]]], dtype="float32")
    check_against_ort(*single_op(op_type, {"x": x}, attrs))
