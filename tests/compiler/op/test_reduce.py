"""Reductions: axis/keepdims/exclude shapes with ``?`` dims, errors, and numpy references."""

from __future__ import annotations

import functools
import math
import operator
import warnings

import numpy as np
import pytest

from compiler.op.registry import OpTypeError
from tests.compiler.op._helpers import T, check_array, ref, rel, rel_text

VALUE_REDUCTIONS = ["sum", "mean", "max", "min", "prod"]
BOOL_REDUCTIONS = ["all", "any"]
ARG_REDUCTIONS = ["argmax", "argmin"]

# --- type relations: returns -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "attrs", "expected"),
    [
        ((2, 3, 4), {}, "()"),
        ((2, 3, 4), {"keepdims": True}, "(1, 1, 1)"),
        ((2, 3, 4), {"axis": 1}, "(2, 4)"),
        ((2, 3, 4), {"axis": -1}, "(2, 3)"),
        ((2, 3, 4), {"axis": (0, 2)}, "(3,)"),
        ((2, 3, 4), {"axis": (2, 0), "keepdims": True}, "(1, 3, 1)"),
        ((2, 3, 4), {"axis": 1, "exclude": True}, "(3,)"),
        ((2, 3, 4), {"axis": (0, 1), "exclude": True, "keepdims": True}, "(2, 3, 1)"),
        ((2, 3, 4), {"axis": (), "exclude": False}, "(2, 3, 4)"),
        ((None, 3), {"axis": 1}, "(?,)"),
        ((None, 3), {"axis": 0, "keepdims": True}, "(1, 3)"),
        ((None, None), {"axis": 0}, "(?,)"),
        ((), {}, "()"),
        ((0, 5), {"axis": 0}, "(5,)"),
    ],
)
def test_reduction_shapes(shape, attrs, expected):
    for op in VALUE_REDUCTIONS:
        assert rel_text(op, T(shape, "int32"), **attrs) == f"Tensor[{expected}, int32]", op
    for op in BOOL_REDUCTIONS:
        assert rel_text(op, T(shape, "bool"), **attrs) == f"Tensor[{expected}, bool]", op
    for op in ARG_REDUCTIONS:
        assert rel_text(op, T(shape, "float16"), **attrs) == f"Tensor[{expected}, int32]", op


@pytest.mark.parametrize("dtype", ["int8", "uint64", "float16", "float64"])
def test_value_reductions_keep_the_dtype(dtype):
    for op in VALUE_REDUCTIONS:
        assert rel(op, T((3,), dtype)) == T((), dtype)


def test_max_min_and_arg_reductions_accept_bool():
    for op in ["max", "min", *ARG_REDUCTIONS]:
        assert rel(op, T((3,), "bool"), axis=0).shape == ()


# --- type relations: invalid -------------------------------------------------------------------


@pytest.mark.parametrize("op", VALUE_REDUCTIONS + ARG_REDUCTIONS)
def test_axis_out_of_range(op):
    with pytest.raises(OpTypeError) as info:
        rel(op, T((2, 3)), axis=2)
    assert str(info.value) == (
        f"{op}: attribute axis=2 is out of range for a tensor of rank 2; "
        "expected a value in [-2, 1]"
    )


def test_duplicate_axes():
    with pytest.raises(OpTypeError, match=r"sum: attribute axis=\(1, -1\) names axis 1 more"):
        rel("sum", T((2, 3)), axis=(1, -1))


@pytest.mark.parametrize("op", ["sum", "mean", "prod"])
def test_arithmetic_reductions_reject_bool(op):
    with pytest.raises(OpTypeError, match=rf"{op}: argument data must be a numeric .*bool\]"):
        rel(op, T((2,), "bool"))


@pytest.mark.parametrize("op", BOOL_REDUCTIONS)
def test_all_any_need_bool(op):
    with pytest.raises(OpTypeError, match=rf"{op}: argument data must be a bool tensor"):
        rel(op, T((2,), "int32"))


# --- references: returns -----------------------------------------------------------------------


def _py_reduce(x, axes, fn, keepdims=False):
    """Group elements by their kept coordinates and fold each group with a Python function."""
    groups = {}
    for index in np.ndindex(*x.shape):
        key = tuple(i for a, i in enumerate(index) if a not in axes)
        groups.setdefault(key, []).append(x[index].item())
    kept_shape = tuple(d for a, d in enumerate(x.shape) if a not in axes)
    out = np.empty(kept_shape, dtype=object)
    for key in np.ndindex(*kept_shape):
        out[key] = fn(groups[key])
    if keepdims:
        out = out.reshape(tuple(1 if a in axes else d for a, d in enumerate(x.shape)))
    return out


PY_FOLDS = {
    "sum": sum,
    "prod": lambda vs: functools.reduce(operator.mul, vs, 1),
    "max": max,
    "min": min,
    "mean": lambda vs: sum(vs) / len(vs),
}


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint16", "float32", "float64"])
@pytest.mark.parametrize(
    ("axis", "keepdims", "exclude", "axes"),
    [
        (None, False, False, (0, 1, 2)),
        (1, False, False, (1,)),
        ((0, 2), True, False, (0, 2)),
        (-1, False, True, (0, 1)),
        ((), False, False, ()),
    ],
)
def test_value_reductions_match_python_folds(dtype, axis, keepdims, exclude, axes):
    rng = np.random.default_rng(3)
    low = 0 if dtype.startswith("u") else -3
    x = rng.integers(low, 4, size=(2, 3, 2)).astype(dtype)
    for op, fold in PY_FOLDS.items():
        out = ref(op, x, axis=axis, keepdims=keepdims, exclude=exclude)
        expected = _py_reduce(x, axes, fold, keepdims)
        if op == "mean" and not dtype.startswith("float"):
            # Integer mean: the exact mean truncated toward zero.
            expected = np.vectorize(lambda v: math.trunc(v), otypes=[object])(expected)
        check_array(out, expected, dtype, rtol=1e-6 if dtype.startswith("float") else 0)


def test_bool_reductions():
    x = np.array([[True, False, True], [True, True, True]])
    check_array(ref("all", x, axis=1), [False, True], "bool")
    check_array(ref("any", x, axis=0), [True, True, True], "bool")
    check_array(ref("all", x), False, "bool")
    check_array(ref("any", ~x, axis=1, keepdims=True), [[True], [False]], "bool")
    check_array(ref("max", x, axis=1), [True, True], "bool")
    check_array(ref("min", x, axis=1), [False, True], "bool")


def test_small_integer_sums_wrap_in_their_dtype():
    check_array(ref("sum", np.int8([100, 100])), -56, "int8")
    check_array(ref("prod", np.uint8([16, 17])), 16, "uint8")
    # mean uses an exact wide sum, so it does not wrap.
    check_array(ref("mean", np.int8([100, 100, -1])), 66, "int8")
    check_array(ref("mean", np.int8([-7, 0])), -3, "int8")


def test_float16_mean():
    check_array(ref("mean", np.float16([1, 2, 4])), 7 / 3, "float16", rtol=1e-3)


@pytest.mark.parametrize(
    ("op", "dtype", "expected"),
    [
        ("sum", "float32", 0),
        ("prod", "int32", 1),
        ("max", "float32", -np.inf),
        ("min", "float64", np.inf),
        ("max", "int8", -128),
        ("min", "uint16", 65535),
        ("all", "bool", True),
        ("any", "bool", False),
    ],
)
def test_empty_reductions_give_the_identity(op, dtype, expected):
    out = ref(op, np.zeros((0, 2), dtype), axis=0)
    check_array(out, [expected, expected], dtype)


def test_empty_float_mean_is_nan():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = ref("mean", np.zeros((0,), "float32"))
    assert out.dtype == np.float32 and out.shape == () and np.isnan(out)


def test_nan_propagates_through_max():
    out = ref("max", np.float32([1, np.nan, 3]))
    assert np.isnan(out)


def test_argmax_argmin():
    x = np.array([[1, 5, 5], [7, 0, 7]], "float32")
    check_array(ref("argmax", x, axis=1), [1, 0], "int32")
    check_array(ref("argmax", x, axis=1, select_last_index=True), [2, 2], "int32")
    check_array(ref("argmin", x, axis=0), [0, 1, 0], "int32")
    check_array(ref("argmin", x, axis=0, keepdims=True), [[0, 1, 0]], "int32")
    # No axis: the row-major index into the whole tensor.
    check_array(ref("argmax", x), 3, "int32")
    check_array(ref("argmax", x, select_last_index=True), 5, "int32")
    check_array(ref("argmax", x, keepdims=True), [[3]], "int32")
    check_array(ref("argmin", x, axis=1, exclude=True), [0, 1, 0], "int32")


def test_argmax_over_several_axes_is_row_major_within_them():
    x = np.zeros((2, 3, 4), "int32")
    x[0, 2, 1] = 9
    x[1, 1, 3] = 9
    # Reducing axes 1 and 2 of shape (3, 4): position (2, 1) -> 9, (1, 3) -> 7.
    check_array(ref("argmax", x, axis=(1, 2)), [9, 7], "int32")
    check_array(ref("argmax", x, axis=(0,), exclude=True), [9, 7], "int32")


# --- references: traps -------------------------------------------------------------------------


def test_integer_mean_over_nothing_traps():
    with pytest.raises(ValueError, match="mean: cannot average an integer tensor over zero"):
        ref("mean", np.zeros((2, 0), "int32"), axis=1)


@pytest.mark.parametrize("op", ARG_REDUCTIONS)
def test_arg_reduction_over_nothing_traps(op):
    with pytest.raises(ValueError, match=rf"{op}: cannot take {op} over zero elements"):
        ref(op, np.zeros((2, 0), "float32"), axis=1)
