"""``nn.batch_norm``, ``nn.layer_norm`` and ``nn.group_norm``: types, errors, references."""

from __future__ import annotations

import math

import numpy as np
import pytest

from compiler import relay
from compiler.op.registry import OpTypeError
from compiler.typing import infer_expr
from tests.compiler.op._helpers import T, Tup, check_array, ref, rel


def _normalize_list(values, eps):
    """(v - mean) / sqrt(var + eps) of a list of floats, with the biased variance."""
    mean = sum(values) / len(values)
    var = sum((v - mean) ** 2 for v in values) / len(values)
    return [(v - mean) / math.sqrt(var + eps) for v in values]


# --- nn.batch_norm -----------------------------------------------------------------------------


def test_batch_norm_returns_a_tuple_of_data_and_statistics():
    v = T((4,))
    assert rel("nn.batch_norm", T((None, 4, 5, 5)), v, v, v, v) == Tup(T((None, 4, 5, 5)), v, v)
    assert rel("nn.batch_norm", T((2, None)), v, v, v, T((None,))) == Tup(T((2, None)), v, v)
    v3 = T((3,), "float64")
    assert rel("nn.batch_norm", T((2, 5, 3), "float64"), v3, v3, v3, v3, axis=-1) == Tup(
        T((2, 5, 3), "float64"), v3, v3
    )
    q = T((None,))
    assert rel("nn.batch_norm", T((2, None)), q, q, q, q) == Tup(T((2, None)), q, q)


@pytest.mark.parametrize(
    ("args", "attrs", "message"),
    [
        ((T((2, 4)), T((3,)), T((4,)), T((4,)), T((4,))), {}, "nn.batch_norm: argument gamma "
         "Tensor[(3,), float32] does not match axis 1 of data Tensor[(2, 4), float32]: "
         "dimension 4 vs 3"),
        ((T((2, 4)), T((4,)), T((4,)), T((4,)), T((5,))), {}, "nn.batch_norm: argument "
         "moving_var Tensor[(5,), float32] does not match axis 1"),
        ((T((2, 4)), T((4,)), T((4, 1)), T((4,)), T((4,))), {}, "nn.batch_norm: argument beta "
         "must be a 1-D tensor, found Tensor[(4, 1), float32]"),
        ((T((2, 4)), T((4,)), T((4,)), T((4,), "float64"), T((4,))), {}, "nn.batch_norm: "
         "argument data has dtype float32 but argument moving_mean has dtype float64"),
        ((T((2, 4), "int32"),) + (T((4,), "int32"),) * 4, {}, "nn.batch_norm: argument data "
         "must be a floating-point tensor"),
        ((T((2, 4)),) + (T((4,)),) * 4, {"axis": 2}, "nn.batch_norm: attribute axis=2 is out "
         "of range for a tensor of rank 2"),
        ((T(()),) + (T((4,)),) * 4, {}, "nn.batch_norm: argument data must have rank >= 1"),
        ((T((2, 4)),) + (T((4,)),) * 4, {"epsilon": -1.0}, "nn.batch_norm: attribute "
         "epsilon=-1.0 must not be negative"),
    ],
)  # fmt: skip
def test_batch_norm_errors(args, attrs, message):
    with pytest.raises(OpTypeError) as info:
        rel("nn.batch_norm", *args, **attrs)
    assert str(info.value).startswith(message)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("center", "scale"), [(True, True), (False, True), (True, False)])
def test_batch_norm_reference_uses_the_moving_statistics(dtype, center, scale):
    rng = np.random.default_rng(10)
    x = rng.standard_normal((2, 3, 2, 2)).astype(dtype)
    gamma, beta = np.array([0.5, 2, -1], dtype), np.array([1, 0, 3], dtype)
    mean, var = np.array([0.1, -0.2, 0.3], dtype), np.array([1, 0.5, 4], dtype)
    out, new_mean, new_var = ref(
        "nn.batch_norm", x, gamma, beta, mean, var, epsilon=1e-3, center=center, scale=scale
    )
    expected = np.empty(x.shape)
    for idx in np.ndindex(x.shape):
        c = idx[1]
        value = (float(x[idx]) - float(mean[c])) / math.sqrt(float(var[c]) + 1e-3)
        value = value * float(gamma[c]) if scale else value
        expected[idx] = value + float(beta[c]) if center else value
    check_array(out, expected, dtype, rtol=1e-6)
    check_array(new_mean, mean, dtype)
    check_array(new_var, var, dtype)
    assert not np.shares_memory(new_mean, mean)


def test_batch_norm_along_the_last_axis_and_builder_projection():
    x = relay.var("x", shape=(relay.Any(), 3))
    vecs = [relay.var(n, shape=(3,)) for n in ("g", "b", "m", "v")]
    call = relay.nn.batch_norm(x, *vecs, axis=-1)
    assert call.attrs == {"axis": -1, "epsilon": 1e-5, "center": True, "scale": True}
    assert infer_expr(relay.Function([x, *vecs], call[0])).ret_type == T((None, 3))
    data = np.float32([[1, 2, 3], [3, 6, 9]])
    ones, zeros = np.ones(3, "float32"), np.zeros(3, "float32")
    out, _, _ = ref("nn.batch_norm", data, ones, zeros, np.float32([2, 4, 6]), ones, axis=-1,
                    epsilon=0.0)  # fmt: skip
    check_array(out, [[-1, -2, -3], [1, 2, 3]], "float32")


def test_batch_norm_dynamic_lengths_are_checked_at_run_time():
    v = np.ones(2, "float32")
    with pytest.raises(ValueError, match=r"^nn\.batch_norm: argument gamma has shape \(2,\), but "
                       r"axis 1 of data with shape \(1, 3\) has length 3"):  # fmt: skip
        ref("nn.batch_norm", np.ones((1, 3), "float32"), v, v, v, v)


# --- nn.layer_norm -----------------------------------------------------------------------------


def test_layer_norm_types_and_errors():
    assert rel("nn.layer_norm", T((None, 7, 16)), T((16,)), T((16,))) == T((None, 7, 16))
    assert rel("nn.layer_norm", T((2, 7, 16)), T((7,)), T((None,)), axis=1) == T((2, 7, 16))
    with pytest.raises(OpTypeError, match=r"^nn\.layer_norm: argument gamma Tensor\[\(7,\), "
                       r"float32\] does not match axis 2 of data"):  # fmt: skip
        rel("nn.layer_norm", T((2, 7, 16)), T((7,)), T((16,)))
    with pytest.raises(OpTypeError, match=r"^nn\.layer_norm: argument beta must be a 1-D"):
        rel("nn.layer_norm", T((2, 16)), T((16,)), T(()))
    with pytest.raises(OpTypeError, match=r"^nn\.layer_norm: argument data must be a floating"):
        rel("nn.layer_norm", T((2, 16), "int8"), T((16,), "int8"), T((16,), "int8"))
    with pytest.raises(OpTypeError, match=r"^nn\.layer_norm: attribute axis=-3 is out of range"):
        rel("nn.layer_norm", T((2, 16)), T((16,)), T((16,)), axis=-3)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_layer_norm_reference_normalizes_one_axis(dtype, axis):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((3, 4, 5)).astype(dtype)
    size = x.shape[axis]
    gamma = rng.standard_normal(size).astype(dtype)
    beta = rng.standard_normal(size).astype(dtype)
    out = ref("nn.layer_norm", x, gamma, beta, axis=axis, epsilon=1e-4)
    moved = np.moveaxis(x.astype(np.float64), axis, -1)
    expected = np.empty(moved.shape)
    for idx in np.ndindex(moved.shape[:-1]):
        normed = _normalize_list(moved[idx].tolist(), 1e-4)
        expected[idx] = [v * float(g) + float(b) for v, g, b in zip(normed, gamma, beta)]
    check_array(out, np.moveaxis(expected, -1, axis), dtype, rtol=1e-5)
    plain = ref("nn.layer_norm", x, gamma, beta, axis=axis, epsilon=1e-4, center=False,
                scale=False)  # fmt: skip
    check_array(plain.mean(axis=axis), np.zeros(np.delete(x.shape, axis % 3)), dtype, rtol=1e-5)


# --- nn.group_norm -----------------------------------------------------------------------------


def test_group_norm_types_and_errors():
    assert rel("nn.group_norm", T((None, 8, 4, 4)), T((8,)), T((8,)), num_groups=4) == T(
        (None, 8, 4, 4)
    )
    assert rel("nn.group_norm", T((2, None, 4)), T((6,)), T((6,)), num_groups=3) == T((2, None, 4))
    message = (
        r"^nn\.group_norm: the 6 channels on axis 1 of data Tensor\[\(2, 6, 4\), float32\] are "
        "not divisible by num_groups=4"
    )
    with pytest.raises(OpTypeError, match=message):
        rel("nn.group_norm", T((2, 6, 4)), T((6,)), T((6,)), num_groups=4)
    with pytest.raises(OpTypeError, match=r"^nn\.group_norm: attribute num_groups=0 must be >= 1"):
        rel("nn.group_norm", T((2, 6, 4)), T((6,)), T((6,)), num_groups=0)
    with pytest.raises(TypeError, match=r"operator nn\.group_norm requires attribute num_groups"):
        rel("nn.group_norm", T((2, 6, 4)), T((6,)), T((6,)))
    with pytest.raises(OpTypeError, match=r"^nn\.group_norm: argument beta Tensor\[\(4,\)"):
        rel("nn.group_norm", T((2, 6, 4)), T((6,)), T((4,)), num_groups=2)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("num_groups", "axis"), [(1, 1), (2, 1), (6, 1), (3, -1)])
def test_group_norm_reference_normalizes_each_group(dtype, num_groups, axis):
    rng = np.random.default_rng(12)
    x = rng.standard_normal((2, 6, 3, 6)).astype(dtype)
    gamma = rng.standard_normal(6).astype(dtype)
    beta = rng.standard_normal(6).astype(dtype)
    out = ref("nn.group_norm", x, gamma, beta, num_groups=num_groups, axis=axis, epsilon=1e-5)
    a = axis % x.ndim
    per_group = 6 // num_groups
    expected = np.empty(x.shape)
    for batch_idx in np.ndindex(x.shape[:a]):
        for g in range(num_groups):
            channels = range(g * per_group, (g + 1) * per_group)
            cells = [
                (*batch_idx, c, *rest)
                for c in channels
                for rest in np.ndindex(x.shape[a + 1 :])
            ]  # fmt: skip
            normed = _normalize_list([float(x[c]) for c in cells], 1e-5)
            for cell, value in zip(cells, normed):
                c = cell[a]
                expected[cell] = value * float(gamma[c]) + float(beta[c])
    check_array(out, expected, dtype, rtol=1e-5)


def test_group_norm_builder():
    x = relay.var("x", shape=(1, 4, 2, 2))
    g = relay.var("g", shape=(4,))
    call = relay.nn.group_norm(x, g, g, 2)
    assert call.attrs == {
        "num_groups": 2, "axis": 1, "epsilon": 1e-5, "center": True, "scale": True,
    }  # fmt: skip
    assert infer_expr(relay.Function([x, g], call)).ret_type == T((1, 4, 2, 2))
    ln = relay.nn.layer_norm(x, g, g, axis=1, epsilon=1e-6)
    assert ln.attrs == {"axis": 1, "epsilon": 1e-6, "center": True, "scale": True}
