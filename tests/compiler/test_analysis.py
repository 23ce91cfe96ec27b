"""relay.analysis: variable queries and free type variables."""

from __future__ import annotations

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
