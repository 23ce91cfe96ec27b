"""``nn.leaky_relu``, ``nn.prelu``, ``nn.dropout``, and GELU built from existing operators."""

from __future__ import annotations

import math

import numpy as np
import pytest

from compiler import relay
from compiler.ir.expr import Call, TupleGetItem
from compiler.op.registry import OpTypeError, get_op
from compiler.typing import infer_expr
from tests.compiler.op._helpers import T, Tup, check_array, ref, rel

# --- nn.leaky_relu -----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_leaky_relu(dtype):
    assert rel("nn.leaky_relu", T((None, 3), dtype)) == T((None, 3), dtype)
    x = np.array([-2.0, -0.5, 0.0, 3.0], dtype)
    expected = [v if v > 0 else 0.2 * v for v in x.tolist()]
    check_array(ref("nn.leaky_relu", x, alpha=0.2), expected, dtype, rtol=1e-7)
    check_array(ref("nn.leaky_relu", x), [-0.02, -0.005, 0, 3], dtype, rtol=1e-7)


def test_leaky_relu_errors_and_builder():
    with pytest.raises(OpTypeError, match=r"^nn\.leaky_relu: argument data must be a floating"):
        rel("nn.leaky_relu", T((2,), "int32"))
    x = relay.var("x", shape=(2,))
    assert relay.nn.leaky_relu(x).attrs == {"alpha": 0.01}
    assert relay.nn.leaky_relu(x, 1).attrs == {"alpha": 1.0}


# --- nn.prelu ----------------------------------------------------------------------------------


def test_prelu_types():
    assert rel("nn.prelu", T((None, 3, 4, 4)), T((3,))) == T((None, 3, 4, 4))
    assert rel("nn.prelu", T((2, 5)), T((5,)), axis=-1) == T((2, 5))
    assert rel("nn.prelu", T((2, None)), T((5,)), axis=1) == T((2, None))


@pytest.mark.parametrize(
    ("data", "alpha", "attrs", "message"),
    [
        (T((2, 3)), T((4,)), {}, "nn.prelu: alpha Tensor[(4,), float32] does not match axis 1 of "
         "data Tensor[(2, 3), float32]: dimension 3 vs 4"),
        (T((2, 3)), T((1, 3)), {}, "nn.prelu: argument alpha must be a 1-D tensor"),
        (T((2, 3)), T((3,), "float64"), {}, "nn.prelu: argument data has dtype float32 but "
         "argument alpha has dtype float64"),
        (T((2, 3), "int32"), T((3,), "int32"), {}, "nn.prelu: argument data must be a floating"),
        (T((2, 3)), T((3,)), {"axis": 2}, "nn.prelu: attribute axis=2 is out of range"),
        (T(()), T((1,)), {}, "nn.prelu: argument data must have rank >= 1"),
    ],
)  # fmt: skip
def test_prelu_errors(data, alpha, attrs, message):
    with pytest.raises(OpTypeError) as info:
        rel("nn.prelu", data, alpha, **attrs)
    assert str(info.value).startswith(message)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_prelu_reference_scales_negatives_per_channel(dtype):
    x = np.array([[[-1.0, 2.0]], [[-3.0, -4.0]]], dtype).reshape(1, 2, 1, 2)
    alpha = np.array([0.5, 0.25], dtype)
    check_array(ref("nn.prelu", x, alpha), [[[[-0.5, 2.0]], [[-0.75, -1.0]]]], dtype)
    last = ref("nn.prelu", x.reshape(2, 2), alpha, axis=-1)
    check_array(last, [[-0.5, 2.0], [-1.5, -1.0]], dtype)
    with pytest.raises(ValueError, match=r"^nn\.prelu: alpha has shape \(2,\), but axis 1"):
        ref("nn.prelu", np.ones((1, 3), dtype), alpha)


# --- nn.dropout --------------------------------------------------------------------------------


def test_dropout_is_a_tuple_of_output_and_mask():
    assert rel("nn.dropout", T((None, 8))) == Tup(T((None, 8)), T((None, 8)))
    assert rel("nn.dropout", T((2,), "float64"), rate=0.1) == Tup(
        T((2,), "float64"), T((2,), "float64")
    )
    with pytest.raises(OpTypeError, match=r"^nn\.dropout: attribute rate=1\.5 must be between"):
        rel("nn.dropout", T((2,)), rate=1.5)
    with pytest.raises(OpTypeError, match=r"^nn\.dropout: argument data must be a floating"):
        rel("nn.dropout", T((2,), "int32"))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dropout_reference_is_the_identity_at_inference(dtype):
    x = np.random.default_rng(13).standard_normal((3, 4)).astype(dtype)
    out, mask = ref("nn.dropout", x, rate=0.9)
    check_array(out, x, dtype)
    check_array(mask, np.ones((3, 4)), dtype)
    assert not np.shares_memory(out, x)


def test_dropout_builders_follow_tvm():
    x = relay.var("x", shape=(2, 3))
    raw = relay.nn.dropout_raw(x, 0.25)
    assert isinstance(raw, Call) and raw.op is get_op("nn.dropout")
    assert raw.attrs == {"rate": 0.25}
    out = relay.nn.dropout(x)
    assert isinstance(out, TupleGetItem) and out.index == 0
    assert out.tuple_value.op is get_op("nn.dropout")
    assert infer_expr(relay.Function([x], out)).ret_type == T((2, 3))
    result = relay.create_executor(
        "debug", mod=relay.IRModule.from_expr(relay.Function([x], out))
    ).evaluate()(np.float32([[1, 2, 3], [4, 5, 6]]))
    check_array(np.asarray(result), [[1, 2, 3], [4, 5, 6]], "float32")


# --- GELU from existing operators --------------------------------------------------------------


def _gelu_erf(x, dtype):
    c = lambda v: relay.const(v, dtype)  # noqa: E731
    return relay.multiply(
        relay.multiply(x, c(0.5)), relay.add(c(1.0), relay.erf(relay.multiply(x, c(2**-0.5))))
    )


def _gelu_tanh(x, dtype):
    c = lambda v: relay.const(v, dtype)  # noqa: E731
    cube = relay.multiply(relay.multiply(x, x), x)
    inner = relay.multiply(
        c(math.sqrt(2 / math.pi)), relay.add(x, relay.multiply(c(0.044715), cube))
    )
    return relay.multiply(relay.multiply(c(0.5), x), relay.add(c(1.0), relay.tanh(inner)))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("form", ["erf", "tanh"])
def test_gelu_composes_from_existing_operators(dtype, form):
    x = relay.var("x", shape=(9,), dtype=dtype)
    body = _gelu_erf(x, dtype) if form == "erf" else _gelu_tanh(x, dtype)
    func = relay.Function([x], body)
    assert infer_expr(func).ret_type == T((9,), dtype)
    values = np.linspace(-4, 4, 9).astype(dtype)
    out = relay.create_executor("debug", mod=relay.IRModule.from_expr(func)).evaluate()(values)
    if form == "erf":
        expected = [0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in values.tolist()]
    else:
        k = math.sqrt(2 / math.pi)
        expected = [0.5 * v * (1 + math.tanh(k * (v + 0.044715 * v**3))) for v in values.tolist()]
    check_array(np.asarray(out), expected, dtype, rtol=1e-6 if dtype == "float32" else 1e-12)
