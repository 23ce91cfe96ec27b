"""The reference interpreter over builder-made IR: values, control flow, closures, ADTs, traps,
and depth (no Python recursion proportional to the program or to its recursion depth)."""

from __future__ import annotations

import contextlib
import inspect
import sys

import numpy as np
import pytest

from compiler import relay
from compiler.interpreter import (
    ConstructorValue,
    Interpreter,
    InterpreterClosure,
    InterpreterError,
)
from vm.objects import ADT

I32 = relay.scalar_type("int32")


@contextlib.contextmanager
def shallow_python_stack(headroom: int = 120):
    """Run with Python's recursion limit just above the current depth, so any recursion
    proportional to the program would fail."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack(0)) + headroom)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def i32(value: int) -> np.ndarray:
    return np.array(value, dtype="int32")


class ListModule:
    """A module with ``List[A] { Cons(A, List[A]), Nil }`` built with the IR builder."""

    def __init__(self) -> None:
        self.mod = relay.IRModule()
        self.list = relay.GlobalTypeVar("List")
        a = relay.TypeVar("A")
        self.cons = relay.Constructor("Cons", [a, relay.TypeCall(self.list, [a])], self.list)
        self.nil = relay.Constructor("Nil", [], self.list)
        self.mod.add_type_def(self.list, relay.TypeData(self.list, [a], [self.cons, self.nil]))

    def value(self, items: list[int]) -> ADT:
        out = ADT(self.nil.tag, [], "Nil")
        for item in reversed(items):
            out = ADT(self.cons.tag, [i32(item), out], "Cons")
        return out

    def expr(self, items: list[int]) -> relay.Expr:
        out: relay.Expr = relay.Call(self.nil, [])
        for item in reversed(items):
            out = relay.Call(self.cons, [relay.const(item), out])
        return out

    @staticmethod
    def to_python(value: ADT) -> list[int]:
        out = []
        while value.constructor == "Cons":
            out.append(int(value[0]))
            value = value[1]
        assert value.constructor == "Nil"
        return out

    def cons_pattern(self, head: relay.Pattern, tail: relay.Pattern) -> relay.PatternConstructor:
        return relay.PatternConstructor(self.cons, [head, tail])

    def nil_pattern(self) -> relay.PatternConstructor:
        return relay.PatternConstructor(self.nil, [])

    def add_sum(self, name: str = "sum") -> relay.GlobalVar:
        """``sum(xs) = match xs { Cons(h, t) => h + sum(t), Nil => 0 }`` (not tail recursive)."""
        gv = relay.GlobalVar(name)
        xs, h, t = relay.var("xs"), relay.var("h"), relay.var("t")
        body = relay.Match(
            xs,
            [
                relay.Clause(
                    self.cons_pattern(relay.PatternVar(h), relay.PatternVar(t)),
                    h + relay.Call(gv, [t]),
                ),
                relay.Clause(self.nil_pattern(), relay.const(0)),
            ],
        )
        self.mod[gv] = relay.Function([xs], body)
        return gv


# --- returns: tensors, tuples, let, if -----------------------------------------------------------


def test_constant_evaluates_to_its_array():
    value = Interpreter().evaluate(relay.const(np.arange(6, dtype="float32").reshape(2, 3)))
    np.testing.assert_array_equal(value, np.arange(6, dtype="float32").reshape(2, 3))


def test_tvm_cast_multiply_add_example_matches_numpy():
    a = relay.var("a", shape=(1, 2), dtype="uint8")
    b = relay.var("b", shape=(1, 2))
    c = relay.var("c", shape=(1, 2))
    mod = relay.IRModule()
    mod["main"] = relay.Function([a, b, c], relay.cast(a, "float32") + b * c)
    av = np.array([[1, 250]], dtype="uint8")
    bv = np.array([[0.5, -2.0]], dtype="float32")
    cv = np.array([[4.0, 3.0]], dtype="float32")
    out = Interpreter(mod).call("main", av, bv, cv)
    np.testing.assert_allclose(out, av.astype("float32") + bv * cv)
    assert out.dtype == np.float32


def test_operator_attributes_are_passed_to_the_reference():
    x = relay.var("x", shape=(2, 3))
    f = relay.Function([x], relay.sum(x, axis=1, keepdims=True))
    data = np.arange(6, dtype="float32").reshape(2, 3)
    out = Interpreter().evaluate(relay.Call(f, [relay.const(data)]))
    np.testing.assert_array_equal(out, data.sum(axis=1, keepdims=True))


def test_tuple_and_projection():
    t = relay.Tuple([relay.const(1), relay.Tuple([relay.const(2.0), relay.const(True)])])
    value = Interpreter().evaluate(t)
    assert isinstance(value, tuple) and len(value) == 2
    assert int(value[0]) == 1 and float(value[1][0]) == 2.0 and bool(value[1][1])
    assert float(Interpreter().evaluate(relay.TupleGetItem(t, 1)[0])) == 2.0
    assert Interpreter().evaluate(relay.Tuple([])) == ()


def test_let_binds_and_shadows_by_identity():
    x1, x2 = relay.var("x"), relay.var("x")
    expr = relay.Let(x1, relay.const(1.0), relay.Let(x2, x1 + relay.const(2.0), x2 * x1))
    assert float(Interpreter().evaluate(expr)) == 3.0


def test_if_selects_a_branch():
    c = relay.var("c", "bool")
    f = relay.Function([c], relay.If(c, relay.const(1), relay.const(2)))
    interp = Interpreter()
    fv = interp.evaluate(f)
    assert int(interp.call(fv, np.array(True))) == 1
    assert int(interp.call(fv, np.array(False))) == 2


def test_evaluate_with_bindings_for_free_variables():
    x = relay.var("x", shape=())
    assert float(Interpreter().evaluate(x * x, {x: np.array(3.0, "float32")})) == 9.0


def _counting_operators(monkeypatch) -> list[str]:
    calls: list[str] = []
    run_op = Interpreter._run_op

    def counted(self, call, args):
        calls.append(call.op.name)
        return run_op(self, call, args)

    monkeypatch.setattr(Interpreter, "_run_op", counted)
    return calls


def test_a_node_with_many_users_is_computed_once(monkeypatch):
    # Graph form (what the ONNX frontend makes): each node used twice by the next. As a
    # tree this is 2**12 - 1 additions; as the graph it means, twelve.
    calls = _counting_operators(monkeypatch)
    x = relay.var("x", shape=())
    h = x
    for _ in range(12):
        h = relay.add(h, h)
    pair = relay.Tuple([h, h])
    interp = Interpreter()
    func = interp.evaluate(relay.Function([x], relay.Tuple([pair, pair[0]])))
    out = interp.call(func, np.array(1.0, "float32"))
    assert float(out[0][0]) == float(out[0][1]) == float(out[1]) == 2.0**12
    assert calls == ["add"] * 12


def test_a_shared_node_is_computed_afresh_in_each_call(monkeypatch):
    calls = _counting_operators(monkeypatch)
    mod = relay.IRModule()
    y = relay.var("y", shape=())
    twice = relay.multiply(y, relay.const(2.0))
    mod["double_sum"] = relay.Function([y], twice + twice)
    f = relay.GlobalVar("double_sum")
    x = relay.var("x", shape=())
    mod["main"] = relay.Function([x], relay.Call(f, [x]) - relay.Call(f, [x + x]))
    assert float(Interpreter(mod).call("main", np.array(3.0, "float32"))) == 12.0 - 24.0
    assert calls.count("multiply") == 2


# --- returns: functions, closures, recursion -----------------------------------------------------


def test_closure_captures_its_environment_and_curries():
    x, y = relay.var("x", shape=()), relay.var("y", shape=())
    add = relay.Function([x], relay.Function([y], x - y))
    interp = Interpreter()
    expr = relay.Call(relay.Call(add, [relay.const(10.0)]), [relay.const(3.0)])
    assert float(interp.evaluate(expr)) == 7.0
    partial = interp.evaluate(relay.Call(add, [relay.const(5.0)]))
    assert isinstance(partial, InterpreterClosure) and partial.arity == 1
    assert float(interp.call(partial, np.array(1.0, "float32"))) == 4.0
    assert float(interp.call(partial, np.array(2.0, "float32"))) == 3.0


def test_higher_order_function_applies_its_argument_twice():
    f = relay.var("f")
    x = relay.var("x", shape=())
    twice = relay.Function([f, x], relay.Call(f, [relay.Call(f, [x])]))
    y = relay.var("y", shape=())
    double = relay.Function([y], y + y)
    assert float(Interpreter().evaluate(relay.Call(twice, [double, relay.const(3.0)]))) == 12.0


def test_global_recursion_factorial():
    mod = relay.IRModule()
    fact = relay.GlobalVar("fact")
    n = relay.var("n", I32)
    mod[fact] = relay.Function(
        [n],
        relay.If(
            relay.equal(n, relay.const(0)),
            relay.const(1),
            n * relay.Call(fact, [n - relay.const(1)]),
        ),
    )
    assert int(Interpreter(mod).call("fact", i32(10))) == 3628800
    assert int(Interpreter(mod).evaluate(relay.Call(fact, [relay.const(5)]))) == 120


def test_mutual_recursion_between_globals():
    mod = relay.IRModule()
    even, odd = relay.GlobalVar("even"), relay.GlobalVar("odd")
    n, m = relay.var("n", I32), relay.var("m", I32)
    mod[even] = relay.Function(
        [n],
        relay.If(relay.equal(n, relay.const(0)), relay.const(True), relay.Call(odd, [n - 1])),
    )
    mod[odd] = relay.Function(
        [m],
        relay.If(relay.equal(m, relay.const(0)), relay.const(False), relay.Call(even, [m - 1])),
    )
    interp = Interpreter(mod)
    assert bool(interp.call("even", i32(10))) and not bool(interp.call("odd", i32(10)))
    assert bool(interp.call(mod.get_global_var("odd"), i32(7)))


def test_let_bound_local_function_recurses_through_its_own_variable():
    loop = relay.var("loop")
    n, acc = relay.var("n", I32), relay.var("acc", I32)
    body = relay.If(
        relay.equal(n, relay.const(0)),
        acc,
        relay.Call(loop, [n - relay.const(1), acc + n]),
    )
    expr = relay.Let(
        loop, relay.Function([n, acc], body), relay.Call(loop, [relay.const(100), relay.const(0)])
    )
    assert int(Interpreter().evaluate(expr)) == 5050


def test_global_function_as_a_value():
    mod = relay.IRModule()
    x = relay.var("x", shape=())
    mod["double"] = relay.Function([x], x + x)
    f = relay.var("f")
    apply = relay.Function([f], relay.Call(f, [relay.const(4.0)]))
    interp = Interpreter(mod)
    assert float(interp.evaluate(relay.Call(apply, [mod.get_global_var("double")]))) == 8.0
    assert interp.evaluate(mod.get_global_var("double")).name == "double"


# --- returns: ADTs and match ---------------------------------------------------------------------


def test_constructors_build_adt_values_with_module_tags():
    lm = ListModule()
    value = Interpreter(lm.mod).evaluate(lm.expr([1, 2, 3]))
    assert isinstance(value, ADT)
    assert value.tag == lm.cons.tag and value.constructor == "Cons"
    assert lm.to_python(value) == [1, 2, 3]
    nil = Interpreter(lm.mod).evaluate(relay.Call(lm.nil, []))
    assert isinstance(nil, ADT) and nil.tag == lm.nil.tag and len(nil) == 0


def test_constructor_with_fields_is_a_function_value():
    lm = ListModule()
    f = relay.var("f")
    apply = relay.Function([f], relay.Call(f, [relay.const(7), relay.Call(lm.nil, [])]))
    interp = Interpreter(lm.mod)
    assert lm.to_python(interp.evaluate(relay.Call(apply, [lm.cons]))) == [7]
    value = interp.evaluate(lm.cons)
    assert isinstance(value, ConstructorValue) and value.arity == 2
    assert lm.to_python(interp.call(value, i32(1), lm.value([2]))) == [1, 2]
    # A nullary constructor outside call position is a function of no arguments, as its
    # type ``fn () -> List[A]`` says.
    nil = interp.evaluate(lm.nil)
    assert isinstance(nil, ConstructorValue) and nil.arity == 0
    assert interp.call(nil).constructor == "Nil"


def test_match_takes_the_first_matching_clause_with_nested_patterns():
    lm = ListModule()
    xs, a, b = relay.var("xs"), relay.var("a"), relay.var("b")
    PV = relay.PatternVar
    pairs = relay.Match(
        xs,
        [
            relay.Clause(lm.nil_pattern(), relay.const(-1)),
            relay.Clause(
                lm.cons_pattern(PV(a), lm.cons_pattern(PV(b), relay.PatternWildcard())), a * b
            ),
            relay.Clause(lm.cons_pattern(PV(a), relay.PatternWildcard()), a),
        ],
    )
    lm.mod["f"] = relay.Function([xs], pairs)
    interp = Interpreter(lm.mod)
    assert int(interp.call("f", lm.value([]))) == -1
    assert int(interp.call("f", lm.value([5]))) == 5
    assert int(interp.call("f", lm.value([3, 4, 100]))) == 12


def test_match_on_tuples_of_adts():
    lm = ListModule()
    xs, ys, x, y = relay.var("xs"), relay.var("ys"), relay.var("x"), relay.var("y")
    W, PV = relay.PatternWildcard, relay.PatternVar
    body = relay.Match(
        relay.Tuple([xs, ys]),
        [
            relay.Clause(
                relay.PatternTuple([lm.cons_pattern(PV(x), W()), lm.cons_pattern(PV(y), W())]),
                x + y,
            ),
            relay.Clause(relay.PatternTuple([W(), W()]), relay.const(0)),
        ],
    )
    lm.mod["heads"] = relay.Function([xs, ys], body)
    interp = Interpreter(lm.mod)
    assert int(interp.call("heads", lm.value([1, 2]), lm.value([10]))) == 11
    assert int(interp.call("heads", lm.value([1]), lm.value([]))) == 0


def test_adts_built_outside_the_interpreter_are_matched_by_tag():
    lm = ListModule()
    gv = lm.add_sum()
    assert int(Interpreter(lm.mod).call(gv, lm.value([1, 2, 3, 4]))) == 10


# --- traps ---------------------------------------------------------------------------------------


def partial_head(lm: ListModule) -> relay.Match:
    x = relay.var("x")
    return relay.Match(
        relay.var("xs"),
        [relay.Clause(lm.cons_pattern(relay.PatternVar(x), relay.PatternWildcard()), x)],
        complete=False,
    )


def test_non_exhaustive_match_traps_naming_the_constructor_and_function():
    lm = ListModule()
    match = partial_head(lm)
    lm.mod["hd"] = relay.Function([match.data], match)
    interp = Interpreter(lm.mod)
    with pytest.raises(InterpreterError, match=r"match\?.* in hd matches .*constructor Nil"):
        interp.call("hd", lm.value([]))
    # The interpreter stays usable after the trap.
    assert int(interp.call("hd", lm.value([42]))) == 42


def test_non_exhaustive_match_message_names_the_source_position():
    lm = ListModule()
    match = partial_head(lm)
    match.span = relay.Span(12, 5, "lists.rly")
    lm.mod["hd"] = relay.Function([match.data], match)
    with pytest.raises(InterpreterError, match=r"at lists\.rly:12:5"):
        Interpreter(lm.mod).call("hd", lm.value([]))


def test_trap_deep_inside_recursion_leaves_the_interpreter_usable():
    lm = ListModule()
    hd = relay.GlobalVar("hd")
    match = partial_head(lm)
    lm.mod[hd] = relay.Function([match.data], match)
    # walk(xs) recurses to the end of the list and then takes hd(Nil), 500 calls deep.
    xs, t = relay.var("xs"), relay.var("t")
    last = relay.GlobalVar("walk")
    lm.mod[last] = relay.Function(
        [xs],
        relay.Match(
            xs,
            [
                relay.Clause(
                    lm.cons_pattern(relay.PatternWildcard(), relay.PatternVar(t)),
                    relay.Call(last, [t]),
                ),
                relay.Clause(lm.nil_pattern(), relay.Call(hd, [xs])),
            ],
        ),
    )
    interp = Interpreter(lm.mod)
    with pytest.raises(InterpreterError, match="Nil"):
        interp.call("walk", lm.value(list(range(500))))
    assert int(interp.call("hd", lm.value([9, 8]))) == 9


def test_operator_failure_traps_naming_the_operator():
    x = relay.var("x", shape=(4,))
    # Not type-checked: the interpreter itself must report the bad reshape.
    f = relay.Function([x], relay.reshape(x, newshape=(3,)))
    interp = Interpreter()
    with pytest.raises(InterpreterError, match="operator reshape"):
        interp.call(interp.evaluate(f), np.zeros(4, "float32"))


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        (relay.Call(relay.const(1.0), []), "must be a function, found a tensor"),
        (relay.TupleGetItem(relay.const(1.0), 0), "expects a tuple, found a tensor"),
        (relay.TupleGetItem(relay.Tuple([relay.const(1.0)]), 3), "out of range"),
        (relay.If(relay.const(np.ones(2, "bool")), relay.const(1), relay.const(2)), "bool scalar"),
        (relay.var("ghost"), "variable %ghost .*not bound"),
        (relay.Call(relay.GlobalVar("missing"), []), "@missing is not defined"),
    ],
)
def test_ill_formed_programs_trap_with_a_clear_message(expr, message):
    with pytest.raises(InterpreterError, match=message):
        Interpreter().evaluate(expr)


def test_wrong_number_of_arguments_traps():
    x = relay.var("x", shape=())
    f = relay.Function([x], x)
    with pytest.raises(InterpreterError, match=r"takes 1 argument\(s\), got 2"):
        Interpreter().evaluate(relay.Call(f, [relay.const(1.0), relay.const(2.0)]))


def test_runaway_recursion_hits_the_frame_limit_and_recovers():
    mod = relay.IRModule()
    gv = relay.GlobalVar("forever")
    n = relay.var("n", I32)
    mod[gv] = relay.Function([n], relay.const(1) + relay.Call(gv, [n]))
    interp = Interpreter(mod, max_frames=5_000)
    with pytest.raises(InterpreterError, match=r"exceeded 5000 continuation frames.*forever"):
        interp.call("forever", i32(0))
    mod["ok"] = relay.Function([n], n)
    assert int(interp.call("ok", i32(3))) == 3


# --- depth: no Python recursion ------------------------------------------------------------------


def test_ten_thousand_deep_let_chain():
    x = relay.var("x", I32)
    names = [relay.var(f"v{i}", I32) for i in range(10_000)]
    body: relay.Expr = names[-1]
    for i in reversed(range(len(names))):
        body = relay.Let(names[i], (names[i - 1] if i else x) + relay.const(1), body)
    mod = relay.IRModule()
    mod["main"] = relay.Function([x], body)
    with shallow_python_stack():
        assert int(Interpreter(mod).call("main", i32(5))) == 10_005


def test_ten_thousand_deep_nested_expression():
    expr: relay.Expr = relay.const(0)
    for _ in range(10_000):
        expr = relay.add(relay.const(1), expr)
    with shallow_python_stack():
        assert int(Interpreter().evaluate(expr)) == 10_000


def test_ten_thousand_deep_non_tail_recursion_sums_a_list():
    lm = ListModule()
    gv = lm.add_sum()
    items = list(range(10_000))
    value = lm.value(items)
    with shallow_python_stack():
        assert int(Interpreter(lm.mod).call(gv, value)) == sum(items)


def test_tail_recursion_runs_in_constant_frames():
    lm = ListModule()
    # loop(xs, acc) = match xs { Cons(h, t) => loop(t, acc + h), Nil => acc }
    gv = relay.GlobalVar("loop")
    xs, acc, h, t = relay.var("xs"), relay.var("acc", I32), relay.var("h"), relay.var("t")
    lm.mod[gv] = relay.Function(
        [xs, acc],
        relay.Match(
            xs,
            [
                relay.Clause(
                    lm.cons_pattern(relay.PatternVar(h), relay.PatternVar(t)),
                    relay.Call(gv, [t, acc + h]),
                ),
                relay.Clause(lm.nil_pattern(), acc),
            ],
        ),
    )
    items = list(range(20_000))
    interp = Interpreter(lm.mod, max_frames=50)  # far fewer frames than list elements
    assert int(interp.call(gv, lm.value(items), i32(0))) == sum(items)


def test_building_a_ten_thousand_element_list_in_the_program():
    lm = ListModule()
    # build(n) = if n == 0 { Nil } else { Cons(n, build(n - 1)) }
    gv = relay.GlobalVar("build")
    n = relay.var("n", I32)
    lm.mod[gv] = relay.Function(
        [n],
        relay.If(
            relay.equal(n, relay.const(0)),
            relay.Call(lm.nil, []),
            relay.Call(lm.cons, [n, relay.Call(gv, [n - relay.const(1)])]),
        ),
    )
    with shallow_python_stack():
        value = Interpreter(lm.mod).call(gv, i32(10_000))
    assert lm.to_python(value) == list(range(10_000, 0, -1))


# --- lowered IR --------------------------------------------------------------------------------


def test_lowered_module_evaluates_to_the_same_values():
    """After ANF, primitive wrapping and lambda lifting (Closure=1 globals, Primitive=1
    functions) the interpreter still gives the original program's answer."""
    base = relay.IRModule()
    relay.Prelude(base)
    mod = relay.fromtext(
        '#[version = "0.0.5"]\n'
        "def @main(%xs: List[int32], %k: int32) {\n"
        "  let %scale = fn (%x: int32) { %x * %k };\n"
        "  (@sum(@map(%scale, %xs)), @foldr(Cons, Nil(), %xs))\n"
        "}",
        init_module=base,
    )
    _, cons, nil = mod.get_type("List")
    xs = ADT(nil.tag, [], "Nil")
    for i in reversed(range(5)):
        xs = ADT(cons.tag, [i32(i), xs], "Cons")
    lowered, _ = relay.vm.optimize(mod)
    assert any(f.attrs.get("Closure") for f in lowered.functions.values())
    for module in (mod, lowered):
        total, copied = Interpreter(module).call("main", xs, i32(3))
        assert int(total) == 3 * 10
        assert ListModule.to_python(copied) == [0, 1, 2, 3, 4]  # foldr(Cons) copies
