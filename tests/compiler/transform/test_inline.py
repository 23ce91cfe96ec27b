"""Inline: calls of global functions marked ``Inline=1`` become their bodies bound to the
arguments, with fresh variables per copy, callees first; a reference that is not a call
becomes the function; the marked functions nothing uses any more are removed, entry points
never (returns); recursive functions, unmarked ones, and marked ones that call what cannot
be inlined stay (returns: left alone)."""

from __future__ import annotations

from collections import Counter

import numpy as np

import vm
from compiler import relay
from compiler.ir.expr import GlobalVar
from compiler.ir.visitor import bound_vars, post_order
from tests.compiler.transform.util import assert_results_match

X = relay.var("x", shape=(3,))


def marked(params, body, mark=True):
    func = relay.Function(params, body)
    return func.with_attr("Inline", 1) if mark else func


def global_calls(func) -> set[str]:
    return {n.name_hint for n in post_order(func) if isinstance(n, GlobalVar)}


def square_plus_one() -> relay.Function:
    a = relay.var("a", shape=(3,))
    t = relay.var("t")
    return marked([a], relay.Let(t, relay.multiply(a, a), relay.add(t, relay.const(1.0))))


# ---- returns -------------------------------------------------------------------------------------


def test_a_marked_function_called_twice_is_inlined_with_fresh_variables_and_removed() -> None:
    mod = relay.IRModule()
    f = relay.GlobalVar("f")
    mod[f] = square_plus_one()
    mod["main"] = relay.Function([X], relay.add(relay.Call(f, [X]), relay.Call(f, [X])))
    after = relay.transform.Inline()(mod)
    assert [gv.name_hint for gv in after.get_global_vars()] == ["main"]
    assert not global_calls(after["main"])
    bound = Counter(bound_vars(after["main"]))
    assert len(bound) == 3 and set(bound.values()) == {1}  # x, and one t per copy
    assert_results_match(mod, after, [np.arange(3, dtype="float32")])


def test_marked_functions_calling_marked_functions_are_inlined_callees_first() -> None:
    mod = relay.IRModule()
    f, g = relay.GlobalVar("f"), relay.GlobalVar("g")
    mod[f] = square_plus_one()
    b = relay.var("b", shape=(3,))
    mod[g] = marked([b], relay.subtract(relay.Call(f, [b]), b))
    mod["main"] = relay.Function([X], relay.Call(g, [relay.Call(f, [X])]))
    after = relay.transform.Inline()(mod)
    assert [gv.name_hint for gv in after.get_global_vars()] == ["main"]
    assert not global_calls(after["main"])
    x = np.array([1.0, -2.0, 0.5], "float32")
    assert_results_match(mod, after, [x])
    exe = relay.vm.compile(after)
    got = vm.VirtualMachine(exe, vm.cpu()).invoke("main", x).numpy()
    once = x * x + 1
    np.testing.assert_allclose(got, (once * once + 1) - once, rtol=1e-6)


def test_a_marked_function_used_as_a_value_becomes_a_function_literal() -> None:
    mod = relay.IRModule()
    f = relay.GlobalVar("f")
    mod[f] = square_plus_one()
    h = relay.var("h")
    apply = relay.Function([h], relay.Call(h, [X]))
    mod["main"] = relay.Function([X], relay.Call(apply, [f]))
    after = relay.transform.Inline()(mod)
    assert "f" not in after and not global_calls(after["main"])
    assert_results_match(mod, after, [np.ones(3, "float32")])


# ---- returns: left alone -----------------------------------------------------------------------


def test_recursive_unmarked_and_blocked_functions_stay_and_main_is_never_removed() -> None:
    mod = relay.IRModule()
    loop, plain, blocked = (
        relay.GlobalVar("loop"),
        relay.GlobalVar("plain"),
        relay.GlobalVar("blocked"),
    )
    n = relay.var("n", shape=(), dtype="int32")
    mod[loop] = marked(
        [n],
        relay.If(
            relay.greater(n, relay.const(0)),
            relay.Call(loop, [relay.subtract(n, relay.const(1))]),
            n,
        ),
    )
    a = relay.var("a", shape=(3,))
    mod[plain] = marked([a], relay.negative(a), mark=False)
    c = relay.var("c", shape=(3,))
    mod[blocked] = marked([c], relay.Call(plain, [c]))
    k = relay.var("k", shape=(), dtype="int32")
    body = relay.Tuple([relay.Call(loop, [k]), relay.Call(blocked, [X])])
    mod["main"] = marked([X, k], body)
    after = relay.transform.Inline()(mod)
    assert sorted(gv.name_hint for gv in after.get_global_vars()) == [
        "blocked", "loop", "main", "plain",
    ]  # fmt: skip
    assert global_calls(after["main"]) == {"loop", "blocked"}
    assert_results_match(mod, after, [np.ones(3, "float32"), np.array(3, "int32")])
