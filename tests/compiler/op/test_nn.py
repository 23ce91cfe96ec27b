"""``nn.*`` operators: dense, matmul, bias_add, relu, softmax, log_softmax, batch_flatten,
batch_matmul."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from compiler.op.registry import OpTypeError
from tests.compiler.op._helpers import T, check_array, ref, rel

# --- nn.dense ----------------------------------------------------------------------------------


def test_dense_shapes():
    assert rel("nn.dense", T((2, 3)), T((4, 3))) == T((2, 4))
    assert rel("nn.dense", T((5, 2, 3)), T((4, 3))) == T((5, 2, 4))
    assert rel("nn.dense", T((3,)), T((4, 3))) == T((4,))
    assert rel("nn.dense", T((None, 3)), T((4, None)), units=4) == T((None, 4))
    assert rel("nn.dense", T((2, 3)), T((None, 3)), units=7) == T((2, 7))
    assert rel("nn.dense", T((2, 3), "int8"), T((4, 3), "int8"), out_dtype="int32") == T(
        (2, 4), "int32"
    )


@pytest.mark.parametrize(
    ("data", "weight", "attrs", "message"),
    [
        (T((2, 3)), T((4, 5)), {}, "nn.dense: the input features of data Tensor[(2, 3), float32] "
         "(last dimension) and weight Tensor[(4, 5), float32] (second dimension) differ: "
         "dimension 3 vs 5"),
        (T((2, 3)), T((3,)), {}, "nn.dense: argument weight must be a 2-D tensor of shape "
         "(units, in_features), found Tensor[(3,), float32]"),
        (T(()), T((4, 3)), {}, "nn.dense: argument data must have rank >= 1"),
        (T((2, 3)), T((4, 3)), {"units": 5}, "nn.dense: attribute units=5 does not match weight "
         "Tensor[(4, 3), float32] with 4 output units"),
        (T((2, 3)), T((4, 3), "float16"), {}, "nn.dense: argument data has dtype float32 but "
         "argument weight has dtype float16"),
        (T((2, 3), "bool"), T((4, 3), "bool"), {}, "nn.dense: argument data must be a numeric"),
    ],
)  # fmt: skip
def test_dense_errors(data, weight, attrs, message):
    with pytest.raises(OpTypeError) as info:
        rel("nn.dense", data, weight, **attrs)
    assert str(info.value).startswith(message)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_dense_reference_matches_explicit_dot_products(dtype):
    rng = np.random.default_rng(0)
    data = rng.integers(-3, 4, size=(2, 3)).astype(dtype)
    weight = rng.integers(-3, 4, size=(4, 3)).astype(dtype)
    expected = [
        [sum(d * w for d, w in zip(row, unit)) for unit in weight.tolist()] for row in data.tolist()
    ]
    check_array(ref("nn.dense", data, weight), expected, dtype)


def test_dense_accumulates_in_out_dtype():
    data = np.full((1, 4), 100, "int8")
    weight = np.full((2, 4), 100, "int8")
    check_array(ref("nn.dense", data, weight, out_dtype="int32"), [[40000, 40000]], "int32")
    batched = ref("nn.dense", np.ones((2, 3, 2), "float32"), np.ones((5, 2), "float32"))
    check_array(batched, np.full((2, 3, 5), 2.0), "float32")


# --- nn.bias_add and nn.relu -------------------------------------------------------------------


def test_bias_add():
    assert rel("nn.bias_add", T((2, 3, 4)), T((3,))) == T((2, 3, 4))
    assert rel("nn.bias_add", T((2, None)), T((5,)), axis=-1) == T((2, None))
    out = ref("nn.bias_add", np.zeros((2, 3), "float32"), np.float32([1, 2, 3]))
    check_array(out, [[1, 2, 3], [1, 2, 3]], "float32")
    out = ref("nn.bias_add", np.zeros((2, 3), "int16"), np.int16([5, 6]), axis=0)
    check_array(out, [[5, 5, 5], [6, 6, 6]], "int16")


@pytest.mark.parametrize(
    ("data", "bias", "attrs", "message"),
    [
        (T((2, 3)), T((2,)), {}, "nn.bias_add: bias Tensor[(2,), float32] does not match axis 1 "
         "of data Tensor[(2, 3), float32]: dimension 3 vs 2"),
        (T((2, 3)), T((1, 3)), {}, "nn.bias_add: argument bias must be a 1-D tensor"),
        (T((2, 3)), T((3,)), {"axis": 2}, "nn.bias_add: attribute axis=2 is out of range"),
        (T((2, 3)), T((3,), "int32"), {}, "nn.bias_add: argument data has dtype float32"),
        (T(()), T((1,)), {}, "nn.bias_add: argument data must have rank >= 1"),
    ],
)  # fmt: skip
def test_bias_add_errors(data, bias, attrs, message):
    with pytest.raises(OpTypeError) as info:
        rel("nn.bias_add", data, bias, **attrs)
    assert str(info.value).startswith(message)


# --- softmax -----------------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["nn.softmax", "nn.log_softmax"])
def test_softmax_type_relation(op):
    assert rel(op, T((None, 10))) == T((None, 10))
    assert rel(op, T((2, 3), "float16"), axis=0) == T((2, 3), "float16")
    with pytest.raises(OpTypeError, match=rf"{op}: argument data must be a floating-point"):
        rel(op, T((2,), "int32"))
    with pytest.raises(OpTypeError, match=rf"{op}: attribute axis=2 is out of range"):
        rel(op, T((2, 3)), axis=2)
    with pytest.raises(OpTypeError, match=rf"{op}: argument data must have rank >= 1"):
        rel(op, T(()))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_softmax_references(dtype):
    x = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]], dtype)
    denominators = [sum(math.exp(v) for v in row) for row in x.astype("float64").tolist()]
    expected = [
        [math.exp(v) / den for v in row]
        for row, den in zip(x.astype("float64").tolist(), denominators)
    ]
    rtol = 2e-3 if dtype == "float16" else 1e-6
    check_array(ref("nn.softmax", x), expected, dtype, rtol=rtol)
    check_array(ref("nn.log_softmax", x), np.log(np.array(expected)), dtype, rtol=rtol)
    by_column = ref("nn.softmax", x, axis=0)
    check_array(by_column.sum(axis=0), [1, 1, 1], dtype, rtol=rtol)


def test_softmax_is_stable_for_large_inputs():
    x = np.float32([[1000, 1000], [-1000, 0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_array(ref("nn.softmax", x), [[0.5, 0.5], [0, 1]], "float32", rtol=1e-6)
        check_array(ref("nn.log_softmax", x), [[-math.log(2)] * 2, [-1000, 0]], "float32",
                    rtol=1e-6)  # fmt: skip


# --- nn.batch_flatten --------------------------------------------------------------------------


def test_batch_flatten():
    assert rel("nn.batch_flatten", T((2, 3, 4))) == T((2, 12))
    assert rel("nn.batch_flatten", T((None, 3, 4))) == T((None, 12))
    assert rel("nn.batch_flatten", T((2, None))) == T((2, None))
    assert rel("nn.batch_flatten", T((2,))) == T((2, 1))
    assert rel("nn.batch_flatten", T((2, 0, None))) == T((2, 0))
    with pytest.raises(OpTypeError, match=r"nn\.batch_flatten: argument data must have rank >= 1"):
        rel("nn.batch_flatten", T(()))
    x = np.arange(8, dtype="int8").reshape(2, 2, 2)
    check_array(ref("nn.batch_flatten", x), [[0, 1, 2, 3], [4, 5, 6, 7]], "int8")


# --- nn.matmul ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "attrs", "expected"),
    [
        ((2, 3), (3, 4), {}, (2, 4)),
        ((5, 2, 3), (3, 4), {}, (5, 2, 4)),
        ((3,), (3, 4), {}, (4,)),
        ((2, 3), (4, 3), {"transpose_b": True}, (2, 4)),
        ((3, 2), (3, 4), {"transpose_a": True}, (2, 4)),
        ((3, 2), (4, 3), {"transpose_a": True, "transpose_b": True}, (2, 4)),
        ((None, 3), (3, None), {"units": 4}, (None, 4)),
    ],
)
def test_matmul_shapes(a, b, attrs, expected):
    assert rel("nn.matmul", T(a), T(b), **attrs) == T(expected)


@pytest.mark.parametrize(
    ("a", "b", "attrs", "message"),
    [
        (T((2, 3)), T((4, 3)), {}, "nn.matmul: the reduction dimensions of tensor_a "
         "Tensor[(2, 3), float32] and tensor_b Tensor[(4, 3), float32] differ (transpose_a=False, "
         "transpose_b=False): dimension 3 vs 4"),
        (T((2, 3)), T((3,)), {}, "nn.matmul: argument tensor_b must be a 2-D tensor of shape "
         "(K, N)"),
        (T((2, 3)), T((3,)), {"transpose_b": True}, "nn.matmul: argument tensor_b must be a 2-D "
         "tensor of shape (N, K)"),
        (T((2, 3, 4)), T((3, 5)), {"transpose_a": True}, "nn.matmul: with transpose_a=True "
         "argument tensor_a must be a 2-D tensor (K, M)"),
        (T(()), T((3, 4)), {}, "nn.matmul: argument tensor_a must have rank >= 1"),
        (T((2, 3)), T((3, 4)), {"units": 5}, "nn.matmul: attribute units=5 does not match "
         "tensor_b"),
        (T((2, 3)), T((3, 4), "float64"), {}, "nn.matmul: argument tensor_a has dtype float32 "
         "but argument tensor_b has dtype float64"),
    ],
)  # fmt: skip
def test_matmul_errors(a, b, attrs, message):
    with pytest.raises(OpTypeError) as info:
        rel("nn.matmul", a, b, **attrs)
    assert str(info.value).startswith(message)


@pytest.mark.parametrize(("transpose_a", "transpose_b"), [(False, False), (True, True)])
def test_matmul_reference(transpose_a, transpose_b):
    rng = np.random.default_rng(6)
    a = rng.integers(-3, 4, size=(2, 3)).astype("float32")  # (M, K)
    b = rng.integers(-3, 4, size=(3, 4)).astype("float32")  # (K, N)
    expected = [[sum(a[i, p] * b[p, j] for p in range(3)) for j in range(4)] for i in range(2)]
    x = a.T.copy() if transpose_a else a
    y = b.T.copy() if transpose_b else b
    out = ref("nn.matmul", x, y, transpose_a=transpose_a, transpose_b=transpose_b)
    check_array(out, expected, "float32")


def test_matmul_accumulates_in_out_dtype():
    x = np.full((1, 3), 100, "int8")
    check_array(ref("nn.matmul", x, x.T.copy(), out_dtype="int32"), [[30000]], "int32")


# --- nn.batch_matmul ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "y", "attrs", "expected"),
    [
        ((4, 2, 3), (4, 5, 3), {}, (4, 2, 5)),
        ((1, 2, 3), (4, 5, 3), {}, (4, 2, 5)),
        ((4, 2, 3), (1, 3, 5), {"transpose_b": False}, (4, 2, 5)),
        ((4, 3, 2), (4, 5, 3), {"transpose_a": True}, (4, 2, 5)),
        ((None, 2, 3), (1, None, 3), {}, (None, 2, None)),
    ],
)
def test_batch_matmul_shapes(x, y, attrs, expected):
    assert rel("nn.batch_matmul", T(x), T(y), **attrs) == T(expected)


@pytest.mark.parametrize(
    ("x", "y", "attrs", "message"),
    [
        (T((2, 2, 3)), T((4, 5, 3)), {}, "nn.batch_matmul: the batch dimensions of x "
         "Tensor[(2, 2, 3), float32] and y Tensor[(4, 5, 3), float32] do not broadcast: "
         "dimension 2 vs 4"),
        (T((1, 2, 3)), T((1, 5, 4)), {}, "nn.batch_matmul: the reduction dimensions of x "
         "Tensor[(1, 2, 3), float32] and y Tensor[(1, 5, 4), float32] differ (transpose_a=False, "
         "transpose_b=True): dimension 3 vs 4"),
        (T((2, 3)), T((1, 5, 3)), {}, "nn.batch_matmul: argument x must be a 3-D tensor"),
        (T((1, 2, 3)), T((1, 3, 2), "float64"), {}, "nn.batch_matmul: argument x has dtype "
         "float32 but argument y has dtype float64"),
    ],
)  # fmt: skip
def test_batch_matmul_errors(x, y, attrs, message):
    with pytest.raises(OpTypeError) as info:
        rel("nn.batch_matmul", x, y, **attrs)
    assert str(info.value).startswith(message)


@pytest.mark.parametrize(("transpose_a", "transpose_b"), [(False, True), (True, False)])
def test_batch_matmul_reference(transpose_a, transpose_b):
    rng = np.random.default_rng(5)
    a = rng.integers(-3, 4, size=(2, 2, 3)).astype("float32")  # (B, M, K)
    b = rng.integers(-3, 4, size=(1, 3, 4)).astype("float32")  # (1, K, N)
    expected = np.einsum("bmk,kn->bmn", a, b[0])
    x = np.swapaxes(a, 1, 2) if transpose_a else a
    y = np.swapaxes(b, 1, 2) if transpose_b else b
    out = ref("nn.batch_matmul", x, y, transpose_a=transpose_a, transpose_b=transpose_b)
    check_array(out, expected, "float32")


def test_batch_matmul_out_dtype():
    x = np.full((1, 1, 3), 100, "int8")
    out = ref("nn.batch_matmul", x, x, out_dtype="int32")
    check_array(out, [[[30000]]], "int32")
