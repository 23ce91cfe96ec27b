"""EliminateCommonSubexpr: repeated pure operator calls are computed once, within scope."""

from __future__ import annotations

import numpy as np

from compiler import relay
from compiler.ir.expr import Call, Function
from tests.compiler.transform.util import (
    assert_results_match,
    assert_same,
    calls,
    let_depth,
    parse,
)

cse = relay.transform.EliminateCommonSubexpr()


def _two(shape=(2,)):
    return [np.arange(np.prod(shape), dtype="float32").reshape(shape) - 1, np.ones(shape, "f4")]


# --- merges --------------------------------------------------------------------------------------


def test_repeated_dataflow_calls_become_one_shared_node():
    before = parse(
        """
        def @main(%x: Tensor[(2), float32], %y: Tensor[(2), float32]) {
          %0 = add(%x, %y);
          %1 = add(%x, %y);
          (exp(%0), exp(%1))
        }"""
    )
    after = cse(before)
    body = after["main"].body
    assert body.fields[0] is body.fields[1]
    assert len(calls(after["main"], "add")) == 1 and len(calls(after["main"], "exp")) == 1
    assert len(calls(before["main"], "add")) == 2  # the input keeps its two calls
    assert_results_match(before, after, _two())


def test_let_bound_repeat_becomes_the_first_variable():
    before = parse(
        """
        def @main(%x: Tensor[(2), float32], %y: Tensor[(2), float32]) {
          let %a = add(%x, %y);
          let %b = add(%x, %y);
          let %c = multiply(%a, 2f);
          let %d = multiply(%b, 2f);
          subtract(%c, %d)
        }"""
    )
    after = cse(before)
    assert_same(
        after,
        """
        def @main(%x: Tensor[(2), float32], %y: Tensor[(2), float32]) {
          let %a = add(%x, %y);
          let %c = multiply(%a, 2f);
          subtract(%c, %c)
        }""",
    )
    assert_results_match(before, after, _two())


def test_dataflow_repeat_of_a_let_bound_call_uses_the_variable():
    before = parse(
        """
        def @main(%x: Tensor[(2), float32]) {
          let %a = exp(%x);
          add(exp(%x), %a)
        }"""
    )
    assert_same(
        cse(before),
        """
        def @main(%x: Tensor[(2), float32]) {
          let %a = exp(%x);
          add(%a, %a)
        }""",
    )


def test_small_constants_compare_by_value():
    before = parse(
        """
        def @main(%x: Tensor[(2), float32]) {
          let %a = add(%x, 1f);
          let %b = add(%x, 1f);
          let %c = add(%x, 2f);
          (%a, %b, %c)
        }"""
    )
    assert_same(
        cse(before),
        """
        def @main(%x: Tensor[(2), float32]) {
          let %a = add(%x, 1f);
          let %c = add(%x, 2f);
          (%a, %a, %c)
        }""",
    )


def test_attributes_are_compared_with_defaults_filled_in():
    x = relay.var("x", shape=(2, 3))
    built = relay.sum(x, axis=1)
    by_hand = Call(relay.op.get_op("sum"), [x], {"axis": (1,)})
    other_axis = relay.sum(x, axis=0)
    body = relay.Tuple([built, by_hand, other_axis])
    after = cse(relay.IRModule.from_expr(relay.Function([x], body)))
    fields = after["main"].body.fields
    assert fields[0] is fields[1] and fields[2] is not fields[0]


def test_repeated_projections_merge():
    before = parse(
        """
        def @main(%x: Tensor[(6), float32]) {
          let %t = split(%x, indices_or_sections=2);
          let %a = %t.0;
          let %b = %t.0;
          let %c = %t.1;
          (%a, %b, %c)
        }"""
    )
    assert_same(
        cse(before),
        """
        def @main(%x: Tensor[(6), float32]) {
          let %t = split(%x, indices_or_sections=2);
          let %a = %t.0;
          let %c = %t.1;
          (%a, %a, %c)
        }""",
    )


def test_outer_binding_is_reused_inside_branches_and_local_functions():
    before = parse(
        """
        def @main(%x: Tensor[(2), float32], %c: bool) {
          let %a = negative(%x);
          let %f = fn (%z: Tensor[(2), float32]) { add(negative(%x), %z) };
          if (%c) { %f(negative(%x)) } else { %a }
        }"""
    )
    after = cse(before)
    assert_same(
        after,
        """
        def @main(%x: Tensor[(2), float32], %c: bool) {
          let %a = negative(%x);
          let %f = fn (%z: Tensor[(2), float32]) { add(%a, %z) };
          if (%c) { %f(%a) } else { %a }
        }""",
    )
    x = np.array([1.0, -3.0], "float32")
    assert_results_match(before, after, [x, True])
    assert_results_match(before, after, [x, False])


# --- kept apart ----------------------------------------------------------------------------------


def test_binding_in_one_branch_is_not_reused_in_the_other():
    text = """
        def @main(%x: Tensor[(2), float32], %c: bool) {
          if (%c) { let %a = exp(%x); %a } else { let %b = exp(%x); add(%b, 1f) }
        }"""
    after = cse(parse(text))
    assert_same(after, text)


def test_binding_is_not_reused_after_its_scope_ends():
    text = """
        def @main(%x: Tensor[(2), float32]) {
          let %r = (let %a = exp(%x); %a);
          let %b = exp(%x);
          add(%r, %b)
        }"""
    assert_same(cse(parse(text)), text)


def test_different_operators_and_arguments_are_not_merged():
    text = """
        def @main(%x: Tensor[(2), float32], %y: Tensor[(2), float32]) {
          let %a = add(%x, %y);
          let %b = add(%y, %x);
          let %c = subtract(%x, %y);
          (%a, %b, %c)
        }"""
    assert_same(cse(parse(text)), text)


def test_fskip_keeps_chosen_calls_apart():
    text = """
        def @main(%x: Tensor[(2), float32]) {
          let %a = exp(%x);
          let %b = exp(%x);
          let %c = negative(%x);
          let %d = negative(%x);
          (%a, %b, %c, %d)
        }"""
    skip_exp = relay.transform.EliminateCommonSubexpr(fskip=lambda call: call.op.name == "exp")
    assert_same(
        skip_exp(parse(text)),
        """
        def @main(%x: Tensor[(2), float32]) {
          let %a = exp(%x);
          let %b = exp(%x);
          let %c = negative(%x);
          (%a, %b, %c, %c)
        }""",
    )


def test_operators_outside_the_registry_are_not_merged():
    unknown = relay.Op("test.random")
    x = relay.var("x", shape=())
    body = relay.Tuple([relay.Call(unknown, [x]), relay.Call(unknown, [x])])
    after = cse(relay.IRModule.from_expr(relay.Function([x], body)))
    fields = after["main"].body.fields
    assert fields[0] is not fields[1]


def test_calls_of_functions_are_not_merged():
    text = """
        def @g(%a: Tensor[(), float32]) { exp(%a) }
        def @main(%x: Tensor[(), float32]) {
          let %a = @g(%x);
          let %b = @g(%x);
          (%a, %b)
        }"""
    assert_same(cse(parse(text)), text)


def test_primitive_function_bodies_are_not_touched():
    a = relay.var("a", shape=())
    prim = relay.Function([a], relay.Tuple([relay.exp(a), relay.exp(a)]), attrs={"Primitive": 1})
    x = relay.var("x", shape=())
    after = cse(relay.IRModule.from_expr(relay.Function([x], relay.Call(prim, [x]))))
    assert after["main"].body.op is prim
    assert isinstance(after["main"].body.op, Function)


def test_a_10000_deep_let_chain_of_repeats_collapses_without_recursion():
    x = relay.var("x", shape=())
    names = [relay.var(f"v{i}") for i in range(10_000)]
    body: relay.Expr = names[-1]
    for name in reversed(names):
        body = relay.Let(name, relay.add(x, relay.const(1.0)), body)
    after = cse(relay.IRModule.from_expr(relay.Function([x], body)))
    func = after["main"]
    assert let_depth(func) == 1 and func.body.body is func.body.var
