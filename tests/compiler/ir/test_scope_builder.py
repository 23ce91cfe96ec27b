"""relay.ScopeBuilder: lets and if/else scopes become the nested expression TVM's builder makes
(returns), and misuse is refused naming what was wrong (invalid)."""

from __future__ import annotations

import numpy as np
import pytest

from compiler import relay


def _run(params, body, *args):
    mod = relay.IRModule.from_expr(relay.Function(params, body))
    return relay.create_executor("debug", mod).evaluate()(*args)


# --- returns -------------------------------------------------------------------------------------


def test_lets_and_an_if_else_become_one_expression():
    x = relay.var("x", shape=(2,))
    sb = relay.ScopeBuilder()
    t = sb.let("t", relay.add(x, x))
    with sb.if_scope(relay.greater(relay.sum(t), relay.const(0.0))):
        u = sb.let(("u", relay.TensorType((2,), "float32")), relay.negative(t))
        sb.ret(u)
    with sb.else_scope():
        sb.ret(t)
    body = sb.get()
    assert isinstance(body, relay.Let) and body.var is t
    assert isinstance(body.body, relay.If) and isinstance(body.body.true_branch, relay.Let)
    np.testing.assert_allclose(_run([x], body, np.array([1.0, 2.0], "float32")), [-2.0, -4.0])
    np.testing.assert_allclose(_run([x], body, np.array([-1.0, -2.0], "float32")), [-2.0, -4.0])


def test_scopes_nest():
    x = relay.var("x", shape=())
    sb = relay.ScopeBuilder()
    with sb.if_scope(relay.less(x, relay.const(0.0))):
        sb.ret(relay.const(-1.0))
    with sb.else_scope():
        with sb.if_scope(relay.equal(x, relay.const(0.0))):
            sb.ret(relay.const(0.0))
        with sb.else_scope():
            sb.ret(relay.const(1.0))
    sign = sb.get()
    for value, want in ((-3.0, -1.0), (0.0, 0.0), (2.5, 1.0)):
        assert _run([x], sign, np.float32(value)) == want


# --- invalid -------------------------------------------------------------------------------------


def test_misuse_is_refused_naming_what_was_wrong():
    x = relay.var("x")
    sb = relay.ScopeBuilder()
    sb.ret(x)
    with pytest.raises(RuntimeError, match="already has its result"):
        sb.ret(x)
    with (
        pytest.raises(RuntimeError, match="else_scope must follow an if_scope"),
        relay.ScopeBuilder().else_scope(),
    ):
        pass
    with pytest.raises(RuntimeError, match="no result"):
        relay.ScopeBuilder().get()
    sb = relay.ScopeBuilder()
    with sb.if_scope(relay.const(True)):
        with pytest.raises(RuntimeError, match="outside every if/else scope"):
            sb.get()
        sb.ret(x)
    with pytest.raises(RuntimeError, match="if_scope has no else_scope"):
        sb.get()
    with (
        pytest.raises(RuntimeError, match=r"the if scope ended without sb\.ret"),
        relay.ScopeBuilder().if_scope(relay.const(True)),
    ):
        pass
    with pytest.raises(ValueError, match="name must be a str"):
        relay.ScopeBuilder().let(3, x)
    with pytest.raises(TypeError, match="'y' must be a relay expression"):
        relay.ScopeBuilder().let("y", np.ones(2))


def test_an_error_inside_a_scope_leaves_the_builder_usable():
    x = relay.var("x")
    sb = relay.ScopeBuilder()
    with pytest.raises(TypeError), sb.if_scope(relay.const(True)):
        sb.ret(np.ones(2))
    sb.ret(x)
    assert sb.get() is x
