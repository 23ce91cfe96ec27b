"""relay.analysis: variable queries, free type variables, well-formedness, operator counts and
multiply-accumulate counts."""

from __future__ import annotations

import pytest

from compiler import relay


def _program():
    x = relay.var("x", shape=())
    y = relay.var("y", shape=())
    z = relay.var("z")
    inner = relay.Function([y], relay.add(x, y))
    return relay.Let(z, inner, relay.Call(z, [x])), x, y, z


def test_free_bound_and_all_vars():
    expr, x, y, z = _program()
    assert relay.analysis.free_vars(expr) == [x]
    assert set(relay.analysis.bound_vars(expr)) == {y, z}
    assert set(relay.analysis.all_vars(expr)) == {x, y, z}


def test_post_order_visit_sees_children_before_parents():
    expr, *_ = _program()
    seen = []
    relay.analysis.post_order_visit(expr, seen.append)
    assert seen[-1] is expr
    assert seen.index(expr.value) < seen.index(expr)
    assert len(seen) == len({id(n) for n in seen})


def test_free_type_vars_of_types():
    a, b = relay.TypeVar("A"), relay.TypeVar("B")
    t = relay.TupleType([a, relay.FuncType([b], a, [b])])
    assert relay.analysis.free_type_vars(t) == [a]


def test_free_type_vars_of_expressions_respect_type_params():
    a, b = relay.TypeVar("A"), relay.TypeVar("B")
    p = relay.var("p", a)
    q = relay.var("q", b)
    inner = relay.Function([q], q, b)
    func = relay.Function([p], relay.Tuple([p, inner]), None, [a])
    assert relay.analysis.free_type_vars(func) == [b]
    assert relay.analysis.free_type_vars(relay.Function([q], q, b, [b])) == []
    assert relay.analysis.free_type_vars(inner) == [b]


# --- well_formed, list_op_freqs, get_total_mac_number ---------------------------------------------


def test_well_formed_refuses_a_variable_bound_twice():
    x, t = relay.var("x", shape=(2,)), relay.var("t")
    good = relay.Function([x], relay.Let(t, x + x, t * t))
    assert relay.analysis.well_formed(good)
    twice = relay.Function([x], relay.Let(t, x, relay.Let(t, x + x, t)))
    assert not relay.analysis.well_formed(twice)
    assert not relay.analysis.well_formed(relay.Function([x], relay.Function([x], x)))


def test_list_op_freqs_counts_each_call_once():
    x = relay.var("x", shape=(2,))
    shared = relay.exp(x)
    mod = relay.IRModule.from_expr(relay.Function([x], relay.add(shared, shared) + x))
    assert relay.analysis.list_op_freqs(mod) == {"exp": 1, "add": 2}


def test_get_total_mac_number_counts_convolutions_and_products():
    x = relay.var("x", shape=(2, 3, 8, 8))
    w = relay.var("w", shape=(4, 3, 3, 3))
    conv = relay.nn.conv2d(x, w, padding=(1, 1))  # 2*4*8*8 outputs of 3*3*3
    flat = relay.reshape(conv, (2, 256))
    dense = relay.nn.dense(flat, relay.var("d", shape=(10, 256)))  # 2*10 of 256
    a = relay.var("a", shape=(5, 6, 7))
    batched = relay.nn.batch_matmul(a, relay.var("b", shape=(5, 4, 7)))  # 5*6*4 of 7
    y = relay.var("y", shape=(1, 4, 5, 5))
    up = relay.nn.conv2d_transpose(y, relay.var("u", shape=(4, 2, 3, 3)))  # 100 inputs * 18
    func = relay.Function(relay.analysis.free_vars(relay.Tuple([dense, batched, up])),
                          relay.Tuple([dense, batched, up]))  # fmt: skip
    want = 2 * 4 * 8 * 8 * 27 + 2 * 10 * 256 + 5 * 6 * 4 * 7 + 100 * 18
    assert relay.analysis.get_total_mac_number(func) == want


def test_get_total_mac_number_refuses_a_dynamic_shape_by_name():
    x = relay.var("x", shape=(relay.Any(), 4))
    func = relay.Function([x], relay.nn.dense(x, relay.var("w", shape=(3, 4))))
    with pytest.raises(ValueError, match=r"nn\.dense operand has no static shape"):
        relay.analysis.get_total_mac_number(func)
