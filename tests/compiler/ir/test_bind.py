"""relay.bind_params_by_name: named parameters become constants and leave the parameter list;
relay.bind: variables become expressions, a function losing the parameters bound."""

from __future__ import annotations

import numpy as np
import pytest

from compiler import relay
from compiler.ir.visitor import post_order
from compiler.typing import infer_types


def _func():
    x = relay.var("x", shape=(2,))
    w = relay.var("w", shape=(2,))
    b = relay.var("b", shape=(), dtype="float32")
    return relay.Function([x, w, b], relay.add(relay.multiply(x, w), b)), x, w, b


def test_bound_parameters_are_removed_and_replaced_by_constants():
    func, x, w, b = _func()
    weights = np.array([1.0, 2.0], dtype="float32")
    out = relay.bind_params_by_name(func, {"w": weights, "b": 0.5})
    assert out.params == (x,)
    constants = [n for n in post_order(out.body) if isinstance(n, relay.Constant)]
    assert len(constants) == 2
    np.testing.assert_array_equal(constants[0].data, weights)
    assert constants[1].data.dtype == np.float32 and float(constants[1].data) == 0.5
    assert not any(n is w or n is b for n in post_order(out.body))
    typed = infer_types(relay.IRModule.from_expr(out))
    assert typed["main"].checked_type == relay.FuncType([x.type_annotation], x.type_annotation)


def test_original_function_is_unchanged():
    func, x, w, b = _func()
    relay.bind_params_by_name(func, {"w": np.ones(2, "float32")})
    assert func.params == (x, w, b)


def test_unknown_names_are_ignored():
    func, *_ = _func()
    assert relay.bind_params_by_name(func, {"nope": np.ones(2)}) is func


def test_python_scalar_takes_the_annotated_dtype():
    n = relay.var("n", shape=(), dtype="int64")
    func = relay.Function([n], n)
    out = relay.bind_params_by_name(func, {"n": 3})
    assert out.params == ()
    assert out.body.data.dtype == np.int64 and int(out.body.data) == 3


def test_unannotated_parameter_takes_the_value_as_given():
    v = relay.var("v")
    out = relay.bind_params_by_name(relay.Function([v], v), {"v": 2.0})
    assert out.body.data.dtype == np.float32


def test_dynamic_dimension_accepts_any_size():
    d = relay.var("d", shape=(relay.Any(), 3))
    out = relay.bind_params_by_name(relay.Function([d], d), {"d": np.zeros((7, 3), "float32")})
    assert out.body.data.shape == (7, 3)


def test_two_parameters_sharing_a_bound_name_is_an_error():
    a1, a2 = relay.var("a", shape=()), relay.var("a", shape=())
    func = relay.Function([a1, a2], relay.add(a1, a2))
    with pytest.raises(ValueError, match="2 parameters with that name"):
        relay.bind_params_by_name(func, {"a": 1.0})
    # Sharing a name is fine when that name is not bound.
    assert relay.bind_params_by_name(func, {"other": 1.0}) is func


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (np.ones(2, dtype="float64"), "has dtype float64"),
        (np.ones(3, dtype="float32"), r"has shape \(3,\)"),
        (np.ones((2, 1), dtype="float32"), r"has shape \(2, 1\)"),
    ],
)
def test_value_contradicting_the_annotation_is_an_error(value, match):
    func, *_ = _func()
    with pytest.raises(ValueError, match=f"parameter 'w'.*{match}"):
        relay.bind_params_by_name(func, {"w": value})


def test_rejects_a_non_function():
    with pytest.raises(TypeError, match=r"expects a relay\.Function"):
        relay.bind_params_by_name(relay.const(1), {})


# --- relay.bind ----------------------------------------------------------------------------------


def test_bind_replaces_variables_and_drops_bound_parameters():
    x, y = relay.var("x", shape=(2,)), relay.var("y", shape=(2,))
    one = relay.const(np.ones(2, "float32"))
    func = relay.Function([x, y], x + y)
    assert relay.structural_equal(relay.bind(func, {x: one}), relay.Function([y], one + y))
    assert relay.structural_equal(relay.bind(x * y, {y: one}), x * one)
    assert relay.bind(func, {}) is func


def test_bind_refuses_what_is_not_a_variable_or_an_expression():
    x = relay.var("x")
    with pytest.raises(TypeError, match=r"is not a relay\.Var"):
        relay.bind(x, {"x": relay.const(1.0)})
    with pytest.raises(TypeError, match="value for %x must be a relay expression"):
        relay.bind(x, {x: np.ones(2)})
