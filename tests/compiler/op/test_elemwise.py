"""Element-wise operators: type relations (broadcasting, dtypes, errors) and numpy references."""

from __future__ import annotations

import math
import operator
import warnings

import numpy as np
import pytest

from compiler.op.registry import OpTypeError
from tests.compiler.op._helpers import T, Tup, check_array, ref, rel, rel_text

ARITH = ["add", "subtract", "multiply", "divide", "floor_divide", "mod", "floor_mod", "power"]
MINMAX = ["maximum", "minimum"]
COMPARE = ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]
LOGICAL = ["logical_and", "logical_or"]
BINARY = ARITH + MINMAX + COMPARE + LOGICAL
FLOAT_UNARY = ["exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "erf"]
NUMERIC_UNARY = ["negative", "abs", "floor", "ceil", "round", "sign", "nn.relu"]
ANY_UNARY = ["copy", "zeros_like", "ones_like"]
INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOAT_DTYPES = ["float16", "float32", "float64"]


def _operand_dtype(op):
    return "bool" if op in LOGICAL else "float32"


# --- type relations: returns -------------------------------------------------------------------

BROADCAST_CASES = [
    ((2, 3), (2, 3), "(2, 3)"),
    ((2, 3), (3,), "(2, 3)"),
    ((2, 1), (1, 3), "(2, 3)"),
    ((), (4,), "(4,)"),
    ((5, 1, 4), (3, 1), "(5, 3, 4)"),
    ((None, 3), (1,), "(?, 3)"),
    ((None,), (5,), "(5,)"),
    ((5,), (None,), "(5,)"),
    ((None,), (None,), "(?,)"),
    ((1,), (None,), "(?,)"),
    ((0, 3), (1, 3), "(0, 3)"),
]


@pytest.mark.parametrize(("lhs", "rhs", "shape"), BROADCAST_CASES)
def test_binary_broadcasting_shapes(lhs, rhs, shape):
    for op in BINARY:
        dtype = _operand_dtype(op)
        out = "bool" if op in COMPARE + LOGICAL else dtype
        assert rel_text(op, T(lhs, dtype), T(rhs, dtype)) == f"Tensor[{shape}, {out}]", op


@pytest.mark.parametrize("dtype", INT_DTYPES + FLOAT_DTYPES)
def test_binary_result_dtypes(dtype):
    for op in ARITH + MINMAX:
        assert rel(op, T((2,), dtype), T((2,), dtype)).dtype == dtype
    for op in COMPARE:
        assert rel(op, T((2,), dtype), T((2,), dtype)).dtype == "bool"


def test_comparisons_and_min_max_accept_bool():
    for op in COMPARE + MINMAX:
        assert rel(op, T((2,), "bool"), T((), "bool")) == T((2,), "bool")


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint32", "float16", "float64"])
def test_unary_keeps_shape_and_dtype(dtype):
    ops = ANY_UNARY + (["logical_not"] if dtype == "bool" else NUMERIC_UNARY)
    if dtype.startswith("float"):
        ops = ops + FLOAT_UNARY
    for op in ops:
        assert rel(op, T((None, 3), dtype)) == T((None, 3), dtype), op


def test_clip_cast_and_fills():
    assert rel("clip", T((2, 3), "int8"), a_min=-1, a_max=1) == T((2, 3), "int8")
    assert rel("clip", T((2,)), a_min=1.5, a_max=1.5) == T((2,))
    assert rel("cast", T((None, 3), "uint8"), dtype="float32") == T((None, 3), "float32")
    assert rel("zeros", shape=(2, 0), dtype="int32") == T((2, 0), "int32")
    assert rel("ones", shape=()) == T(())
    assert rel("full", T((), "int8"), shape=(3,)) == T((3,), "int8")
    assert rel("full", T((), "int8"), shape=(3,), dtype="float64") == T((3,), "float64")
    assert rel("full_like", T((None, 2), "int32"), T((), "float32")) == T((None, 2), "int32")


def test_where_broadcasts_all_three():
    assert rel("where", T((3, 1), "bool"), T((4,)), T(())) == T((3, 4))
    assert rel("where", T((), "bool"), T((2, 1), "int8"), T((1, 5), "int8")) == T((2, 5), "int8")
    assert rel("where", T((None,), "bool"), T((1,)), T((1,))) == T((None,))


def test_broadcast_to():
    assert rel("broadcast_to", T((3,)), shape=(2, 3)) == T((2, 3))
    assert rel("broadcast_to", T((1, None)), shape=(4, 5)) == T((4, 5))
    assert rel("broadcast_to", T((), "bool"), shape=()) == T((), "bool")


# --- type relations: invalid -------------------------------------------------------------------


def test_broadcast_mismatch_names_both_types_and_dimensions():
    with pytest.raises(OpTypeError) as info:
        rel("add", T((2, 3)), T((4,)))
    assert str(info.value) == (
        "add: cannot broadcast Tensor[(2, 3), float32] and Tensor[(4,), float32]: dimension 3 vs 4"
    )
    with pytest.raises(OpTypeError, match=r"less: cannot broadcast .*: dimension 2 vs 5"):
        rel("less", T((2, 1)), T((5, 1)))


@pytest.mark.parametrize("op", BINARY)
def test_binary_dtype_mismatch_names_both_dtypes(op):
    with pytest.raises(OpTypeError, match=rf"{op}: argument lhs has dtype int32 but .*float32"):
        rel(op, T((2,), "int32"), T((2,), "float32"))


@pytest.mark.parametrize("op", ARITH)
def test_arithmetic_rejects_bool(op):
    with pytest.raises(OpTypeError, match=rf"{op}: argument lhs must be a numeric .*bool\]"):
        rel(op, T((2,), "bool"), T((2,), "bool"))


@pytest.mark.parametrize("op", [*LOGICAL, "logical_not"])
def test_logical_operators_need_bool(op):
    args = [T((2,), "int32")] * (1 if op == "logical_not" else 2)
    with pytest.raises(OpTypeError, match=rf"{op}: argument \w+ must be a bool tensor"):
        rel(op, *args)


@pytest.mark.parametrize("op", FLOAT_UNARY)
def test_math_functions_need_floats(op):
    with pytest.raises(OpTypeError) as info:
        rel(op, T((2,), "int32"))
    assert str(info.value) == (
        f"{op}: argument data must be a floating-point tensor, found Tensor[(2,), int32]"
    )


@pytest.mark.parametrize("op", [*NUMERIC_UNARY, "clip"])
def test_numeric_unary_rejects_bool(op):
    attrs = {"a_min": 0, "a_max": 1} if op == "clip" else {}
    with pytest.raises(OpTypeError, match=rf"{op}: argument data must be a numeric"):
        rel(op, T((2,), "bool"), **attrs)


def test_non_tensor_arguments_are_named():
    with pytest.raises(OpTypeError) as info:
        rel("add", T((2,)), Tup(T((2,))))
    assert str(info.value) == ("add: argument rhs must be a tensor, found (Tensor[(2,), float32],)")
    with pytest.raises(OpTypeError, match="exp: argument data must be a tensor"):
        rel("exp", Tup())


def test_clip_bounds_must_be_ordered():
    with pytest.raises(OpTypeError, match=r"clip: attribute a_min=3.0 must not exceed a_max=1.0"):
        rel("clip", T((2,)), a_min=3, a_max=1)


def test_cast_needs_a_dtype():
    with pytest.raises(OpTypeError, match="cast: attribute dtype is required"):
        rel("cast", T((2,)), dtype=None)


def test_fill_shapes_and_values_are_checked():
    with pytest.raises(OpTypeError, match=r"zeros: attribute shape=\(2, -1\) has a negative"):
        rel("zeros", shape=(2, -1))
    with pytest.raises(OpTypeError) as info:
        rel("full", T((1,)), shape=(2,))
    assert str(info.value) == (
        "full: argument fill_value must be a scalar (shape ()), found Tensor[(1,), float32]"
    )
    with pytest.raises(OpTypeError, match="full_like: argument fill_value must be a scalar"):
        rel("full_like", T((2,)), T((2,)))


def test_where_errors():
    with pytest.raises(OpTypeError, match="where: argument condition must be a bool tensor"):
        rel("where", T((2,), "int32"), T((2,)), T((2,)))
    with pytest.raises(OpTypeError, match="where: argument x has dtype float32 but argument y"):
        rel("where", T((2,), "bool"), T((2,)), T((2,), "float64"))
    with pytest.raises(OpTypeError, match=r"where: cannot broadcast Tensor\[\(3,\), bool\]"):
        rel("where", T((3,), "bool"), T((2,)), T((2,)))


def test_broadcast_to_errors():
    with pytest.raises(OpTypeError) as info:
        rel("broadcast_to", T((3,)), shape=(2, 4))
    assert str(info.value) == (
        "broadcast_to: cannot broadcast Tensor[(3,), float32] to shape (2, 4): dimension 3 vs 4"
    )
    with pytest.raises(OpTypeError, match="the tensor has rank 2 but the shape has rank 1"):
        rel("broadcast_to", T((1, 3)), shape=(3,))
    with pytest.raises(OpTypeError, match="dimension 3 vs 1"):
        rel("broadcast_to", T((3,)), shape=(1,))


# --- references: returns -----------------------------------------------------------------------

PY_OPS = {
    "add": operator.add,
    "subtract": operator.sub,
    "multiply": operator.mul,
    "maximum": max,
    "minimum": min,
    "equal": operator.eq,
    "not_equal": operator.ne,
    "less": operator.lt,
    "less_equal": operator.le,
    "greater": operator.gt,
    "greater_equal": operator.ge,
}


def _pairwise(fn, a, b, shape):
    """Apply a Python function to each broadcast pair, by explicit index arithmetic."""
    out = []
    a_full = np.broadcast_to(a, shape)
    b_full = np.broadcast_to(b, shape)
    for index in np.ndindex(*shape):
        out.append(fn(a_full[index].item(), b_full[index].item()))
    return np.array(out, dtype=object).reshape(shape)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8", "uint16", *FLOAT_DTYPES])
@pytest.mark.parametrize(("sa", "sb"), [((2, 3), (3,)), ((3, 1), (1, 4)), ((), (2,))])
def test_binary_references_match_python_arithmetic(dtype, sa, sb):
    rng = np.random.default_rng(7)
    low = 0 if dtype.startswith("u") else -5
    a = rng.integers(low, 6, size=sa).astype(dtype)
    b = rng.integers(low, 6, size=sb).astype(dtype)
    shape = np.broadcast_shapes(sa, sb)
    for op, fn in PY_OPS.items():
        if dtype.startswith("u") and op == "subtract":
            continue  # wraps; checked by hand below
        out_dtype = "bool" if op in COMPARE else dtype
        check_array(ref(op, a, b), _pairwise(fn, a, b, shape), out_dtype)


def test_unsigned_subtraction_wraps():
    check_array(ref("subtract", np.uint8([1, 5]), np.uint8([2, 5])), [255, 0], "uint8")
    check_array(ref("add", np.int8([127]), np.int8([1])), [-128], "int8")


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64"])
def test_integer_division_truncates_and_mod_takes_the_dividend_sign(dtype):
    a = np.array([7, -7, 7, -7, 6, 0], dtype)
    b = np.array([2, 2, -2, -2, 3, -5], dtype)
    check_array(ref("divide", a, b), [3, -3, -3, 3, 2, 0], dtype)
    check_array(ref("mod", a, b), [1, -1, 1, -1, 0, 0], dtype)
    check_array(ref("floor_divide", a, b), [3, -4, -4, 3, 2, 0], dtype)
    check_array(ref("floor_mod", a, b), [1, 1, -1, -1, 0, 0], dtype)


def test_integer_division_is_exact_for_large_int64():
    big = np.int64(2**62 + 1)
    check_array(ref("divide", np.array([big]), np.array([-3], "int64")), [-(big // 3)], "int64")
    check_array(ref("divide", np.array([-big]), np.array([1], "int64")), [-big], "int64")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_float_division_family(dtype):
    a = np.array([7.5, -7.5, 1.0, -1.0], dtype)
    b = np.array([2.0, 2.0, 0.0, 0.0], dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # division by zero is IEEE, not a numpy warning
        check_array(ref("divide", a, b), [3.75, -3.75, np.inf, -np.inf], dtype)
    c = np.array([7.5, -7.5, 7.5, -7.5], dtype)
    d = np.array([2.0, 2.0, -2.0, -2.0], dtype)
    check_array(ref("floor_divide", c, d), [3.0, -4.0, -4.0, 3.0], dtype)
    check_array(ref("mod", c, d), [1.5, -1.5, 1.5, -1.5], dtype)
    check_array(ref("floor_mod", c, d), [1.5, 0.5, -0.5, -1.5], dtype)


def test_power():
    check_array(ref("power", np.float32([2, 4, 9]), np.float32([3, 0.5, -1])),
                [8, 2, 1 / 9], "float32", rtol=1e-6)  # fmt: skip
    base = np.array([2, 3, 1, -1, -1, -2, 5], "int32")
    exponent = np.array([3, 0, -4, -3, -2, -1, 2], "int32")
    check_array(ref("power", base, exponent), [8, 1, 1, -1, 1, 0, 25], "int32")


def test_comparisons_with_nan_and_bools():
    nan = np.float32("nan")
    a = np.float32([nan, 1, 2])
    b = np.float32([nan, 1, 3])
    check_array(ref("equal", a, b), [False, True, False], "bool")
    check_array(ref("not_equal", a, b), [True, False, True], "bool")
    check_array(ref("less", a, b), [False, False, True], "bool")
    check_array(ref("greater_equal", a, b), [False, True, False], "bool")
    check_array(ref("maximum", np.bool_([True, False]), np.bool_([False, False])),
                [True, False], "bool")  # fmt: skip


def test_logical_truth_tables():
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    check_array(ref("logical_and", a, b), [True, False, False, False], "bool")
    check_array(ref("logical_or", a, b), [True, True, True, False], "bool")
    check_array(ref("logical_not", a), [False, False, True, True], "bool")


MATH = {
    "exp": math.exp,
    "log": math.log,
    "sqrt": math.sqrt,
    "rsqrt": lambda v: 1 / math.sqrt(v),
    "sin": math.sin,
    "cos": math.cos,
    "tanh": math.tanh,
    "sigmoid": lambda v: 0.5 * (1 + math.tanh(v / 2)),
    "erf": math.erf,
}


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op", FLOAT_UNARY)
def test_math_references_match_the_math_module(op, dtype):
    x = np.array([[0.25, 0.5, 1.0], [1.5, 2.0, 3.0]], dtype)
    expected = [[MATH[op](v) for v in row] for row in x.astype("float64").tolist()]
    rtol = {"float16": 2e-3, "float32": 2e-6, "float64": 1e-12}[dtype]
    check_array(ref(op, x), expected, dtype, rtol=rtol)
    check_array(ref(op, np.array(0.25, dtype)), MATH[op](0.25), dtype, rtol=rtol)


def test_sigmoid_is_stable_for_large_magnitudes():
    x = np.float32([-1000, -20, 0, 20, 1000])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = ref("sigmoid", x)
    check_array(out, [0, 1 / (1 + math.exp(20)), 0.5, 1 / (1 + math.exp(-20)), 1], "float32",
                rtol=1e-6)  # fmt: skip


def test_rounding_family():
    x = np.float32([0.5, 1.5, 2.5, -0.5, -1.5, -2.7, 2.7])
    check_array(ref("round", x), [0, 2, 2, -0.0, -2, -3, 3], "float32")
    check_array(ref("floor", x), [0, 1, 2, -1, -2, -3, 2], "float32")
    check_array(ref("ceil", x), [1, 2, 3, -0.0, -1, -2, 3], "float32")
    ints = np.array([-3, 0, 4], "int16")
    for op in ("round", "floor", "ceil"):
        check_array(ref(op, ints), [-3, 0, 4], "int16")


@pytest.mark.parametrize("dtype", ["int8", "int64", "float32", "float64"])
def test_sign_abs_negative_relu(dtype):
    x = np.array([-3, 0, 2], dtype)
    check_array(ref("sign", x), [-1, 0, 1], dtype)
    check_array(ref("abs", x), [3, 0, 2], dtype)
    check_array(ref("negative", x), [3, 0, -2], dtype)
    check_array(ref("nn.relu", x), [0, 0, 2], dtype)


def test_unary_on_unsigned():
    x = np.uint8([0, 3])
    check_array(ref("negative", x), [0, 253], "uint8")
    check_array(ref("sign", x), [0, 1], "uint8")
    check_array(ref("nn.relu", x), [0, 3], "uint8")


def test_nan_propagates_through_sign_and_relu_maps_it_to_zero():
    out = ref("sign", np.float32([np.nan]))
    assert np.isnan(out[0])
    # relu keeps x where x > 0 and gives 0 elsewhere, a NaN included, as the fused
    # kernels' epilogues do (tests/vm/kernels/test_epilogue.py); onnxruntime and PyTorch
    # keep the NaN.
    check_array(ref("nn.relu", np.float32([np.nan, -1.0, 2.0])), [0.0, 0.0, 2.0], "float32")


@pytest.mark.parametrize("dtype", ["bool", "int32", "float16"])
def test_copy_and_like_fills(dtype):
    x = np.array([[1, 0], [1, 1]], dtype)
    out = ref("copy", x)
    check_array(out, x, dtype)
    assert not np.shares_memory(out, x)
    check_array(ref("zeros_like", x), [[0, 0], [0, 0]], dtype)
    check_array(ref("ones_like", x), [[1, 1], [1, 1]], dtype)
    check_array(ref("full_like", x, np.float64(1.0)), [[1, 1], [1, 1]], dtype)


def test_clip():
    check_array(ref("clip", np.float32([-2, 0.5, 9]), a_min=0, a_max=6), [0, 0.5, 6], "float32")
    check_array(ref("clip", np.int32([-2, 1, 2, 9]), a_min=0.5, a_max=2.5), [1, 1, 2, 2], "int32")
    check_array(ref("clip", np.uint8([0, 200]), a_min=-5, a_max=1000), [0, 200], "uint8")
    check_array(ref("clip", np.int8([-100, 100]), a_min=-math.inf, a_max=math.inf),
                [-100, 100], "int8")  # fmt: skip
    nan = ref("clip", np.float32([np.nan]), a_min=0, a_max=1)
    assert np.isnan(nan[0])


def test_cast():
    check_array(ref("cast", np.float32([-1.7, 1.7, 0.0]), dtype="int32"), [-1, 1, 0], "int32")
    check_array(ref("cast", np.int32([0, 3, -1]), dtype="bool"), [False, True, True], "bool")
    check_array(ref("cast", np.bool_([True, False]), dtype="float16"), [1, 0], "float16")
    check_array(ref("cast", np.int32([300]), dtype="uint8"), [44], "uint8")
    x = np.float32([1.5])
    out = ref("cast", x, dtype="float32")
    assert not np.shares_memory(out, x)


def test_zeros_ones_full():
    check_array(ref("zeros", shape=(2, 1), dtype="int8"), [[0], [0]], "int8")
    check_array(ref("ones", shape=()), 1.0, "float32")
    check_array(ref("ones", shape=(0, 3), dtype="bool"), np.ones((0, 3), bool), "bool")
    check_array(ref("full", np.int8(4), shape=(3,)), [4, 4, 4], "int8")
    check_array(ref("full", np.float32(2.9), shape=(2,), dtype="int32"), [2, 2], "int32")


def test_where_and_broadcast_to():
    cond = np.array([[True], [False]])
    check_array(ref("where", cond, np.float32([1, 2, 3]), np.float32(0)),
                [[1, 2, 3], [0, 0, 0]], "float32")  # fmt: skip
    out = ref("broadcast_to", np.int16([1, 2]), shape=(3, 2))
    check_array(out, [[1, 2], [1, 2], [1, 2]], "int16")
    assert out.flags.writeable and out.flags.c_contiguous


def test_zero_sized_broadcast():
    check_array(ref("add", np.zeros((0, 3), "float32"), np.float32([1, 2, 3])),
                np.zeros((0, 3)), "float32")  # fmt: skip


# --- references: traps -------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["divide", "floor_divide", "mod", "floor_mod"])
def test_integer_division_by_zero_traps(op):
    with pytest.raises(ZeroDivisionError, match=rf"{op}: integer division by zero"):
        ref(op, np.int32([1, 2]), np.int32([1, 0]))


def test_zero_to_a_negative_integer_power_traps():
    with pytest.raises(ZeroDivisionError, match="power: zero raised to a negative power"):
        ref("power", np.int32([0]), np.int32([-1]))
