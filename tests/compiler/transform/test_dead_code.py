"""DeadCodeElimination (unused bindings, inlining) and RemoveUnusedFunctions."""

from __future__ import annotations

import numpy as np
import pytest

from compiler import relay
from tests.compiler.transform.util import assert_results_match, assert_same, let_depth, parse

dce = relay.transform.DeadCodeElimination()
inline = relay.transform.DeadCodeElimination(inline_once=True)


# --- unused bindings -----------------------------------------------------------------------------


def test_unused_bindings_are_removed_and_used_ones_kept():
    before = parse(
        """
        def @main(%x: Tensor[(2), float32]) {
          let %unused = exp(%x);
          let %y = negative(%x);
          add(%y, %y)
        }"""
    )
    after = dce(before)
    assert_same(
        after,
        """
        def @main(%x: Tensor[(2), float32]) {
          let %y = negative(%x);
          add(%y, %y)
        }""",
    )
    assert_results_match(before, after, [np.array([1.0, 2.0], "float32")])


def test_bindings_only_dead_code_uses_are_removed_too():
    before = parse(
        """
        def @main(%x: Tensor[(2), float32]) {
          let %a = exp(%x);
          let %b = multiply(%a, %a);
          let %c = (%b, %a);
          %x
        }"""
    )
    assert_same(dce(before), "def @main(%x: Tensor[(2), float32]) { %x }")


def test_bindings_used_in_branches_clauses_and_closures_are_kept():
    text = """
        def @main(%x: Tensor[(2), float32], %c: bool) {
          let %a = exp(%x);
          let %b = negative(%x);
          let %f = fn (%z: Tensor[(2), float32]) { add(%z, %b) };
          if (%c) { %a } else { %f(%x) }
        }"""
    assert_same(dce(parse(text)), text)


def test_unused_recursive_local_function_is_removed():
    before = parse(
        """
        def @main(%n: Tensor[(), int32]) {
          let %loop = fn (%i: Tensor[(), int32]) -> Tensor[(), int32] {
            if (less(%i, 10)) { %loop(add(%i, 1)) } else { %i }
          };
          %n
        }"""
    )
    assert_same(dce(before), "def @main(%n: Tensor[(), int32]) { %n }")


def test_used_recursive_local_function_is_kept():
    text = """
        def @main(%n: Tensor[(), int32]) {
          let %loop = fn (%i: Tensor[(), int32]) -> Tensor[(), int32] {
            if (less(%i, 10)) { %loop(add(%i, 1)) } else { %i }
          };
          %loop(%n)
        }"""
    before = parse(text)
    after = dce(before)
    assert_same(after, text)
    assert_results_match(before, after, [np.array(3, "int32")])


def test_unused_bindings_inside_nested_scopes_are_removed():
    before = parse(
        """
        def @main(%x: Tensor[(2), float32], %c: bool) {
          let %f = fn (%z: Tensor[(2), float32]) { let %dead = exp(%z); %z };
          if (%c) { let %dead2 = negative(%x); %f(%x) } else { %x }
        }"""
    )
    assert_same(
        dce(before),
        """
        def @main(%x: Tensor[(2), float32], %c: bool) {
          let %f = fn (%z: Tensor[(2), float32]) { %z };
          if (%c) { %f(%x) } else { %x }
        }""",
    )


def test_operators_of_unknown_effect_are_kept_unless_impurity_is_ignored():
    effect = relay.Op("test.print")
    x = relay.var("x", shape=())
    kept = relay.var("kept")
    pure = relay.var("pure")
    body = relay.Let(kept, relay.Call(effect, [x]), relay.Let(pure, relay.exp(x), x))
    mod = relay.IRModule.from_expr(relay.Function([x], body))
    after = dce(mod)
    assert let_depth(after["main"]) == 1 and after["main"].body.var is kept
    everything = relay.transform.DeadCodeElimination(ignore_impurity=True)(mod)
    assert let_depth(everything["main"]) == 0


def test_module_without_dead_code_is_unchanged():
    before = parse("def @main(%x: Tensor[(2), float32]) { let %a = exp(%x); %a }")
    after = dce(before)
    assert after["main"] is before["main"] and after is not before


# --- inline_once ---------------------------------------------------------------------------------


def test_bindings_used_once_are_inlined_and_others_kept():
    before = parse(
        """
        def @main(%x: Tensor[(2), float32]) {
          let %a = exp(%x);
          let %b = negative(%a);
          let %twice = add(%b, 1f);
          multiply(%twice, %twice)
        }"""
    )
    after = inline(before)
    assert_same(
        after,
        """
        def @main(%x: Tensor[(2), float32]) {
          let %twice = add(negative(exp(%x)), 1f);
          multiply(%twice, %twice)
        }""",
    )
    assert_results_match(before, after, [np.array([0.0, 1.0], "float32")])


def test_bindings_are_not_inlined_into_local_functions():
    text = """
        def @main(%x: Tensor[(2), float32]) {
          let %a = exp(%x);
          let %f = fn (%z: Tensor[(2), float32]) { add(%z, %a) };
          (%f(%x), %f(%x))
        }"""
    assert_same(inline(parse(text)), text)


def test_recursive_functions_are_not_inlined():
    text = """
        def @main(%n: Tensor[(), int32]) {
          let %loop = fn (%i: Tensor[(), int32]) -> Tensor[(), int32] {
            if (less(%i, 10)) { %loop(add(%i, 1)) } else { %i }
          };
          %loop(%n)
        }"""
    assert_same(inline(parse(text)), text)


def test_inlining_into_a_branch_of_the_same_function():
    before = parse(
        """
        def @main(%x: Tensor[(2), float32], %c: bool) {
          let %a = exp(%x);
          if (%c) { %a } else { %x }
        }"""
    )
    after = inline(before)
    assert_same(
        after,
        "def @main(%x: Tensor[(2), float32], %c: bool) { if (%c) { exp(%x) } else { %x } }",
    )
    assert_results_match(before, after, [np.array([0.0, 1.0], "float32"), True])


# --- deep programs -------------------------------------------------------------------------------


def _chain(n: int, use_last: bool) -> relay.IRModule:
    x = relay.var("x", shape=(), dtype="int32")
    names = [relay.var(f"v{i}") for i in range(n)]
    body: relay.Expr = names[-1] if use_last else x
    for i in reversed(range(n)):
        prev = names[i - 1] if i else x
        body = relay.Let(names[i], relay.add(prev, relay.const(1)), body)
    return relay.IRModule.from_expr(relay.Function([x], body))


def test_a_10000_deep_dead_chain_is_removed_in_one_pass():
    after = dce(_chain(10_000, use_last=False))
    assert let_depth(after["main"]) == 0


def test_a_10000_deep_live_chain_is_kept_and_can_be_inlined():
    mod = _chain(10_000, use_last=True)
    assert let_depth(dce(mod)["main"]) == 10_000
    inlined = inline(mod)["main"]
    assert let_depth(inlined) == 0
    assert (
        relay.create_executor("debug", relay.IRModule.from_expr(inlined)).evaluate()(
            np.array(5, "int32")
        )
        == 10_005
    )


# --- RemoveUnusedFunctions -----------------------------------------------------------------------

FUNCS = """
    def @leaf(%a: Tensor[(), float32]) { exp(%a) }
    def @mid(%a: Tensor[(), float32]) { @leaf(%a) }
    def @even(%n: Tensor[(), int32]) -> bool {
      if (equal(%n, 0)) { True } else { @odd(subtract(%n, 1)) }
    }
    def @odd(%n: Tensor[(), int32]) -> bool {
      if (equal(%n, 0)) { False } else { @even(subtract(%n, 1)) }
    }
    def @orphan(%a: Tensor[(), float32]) { @leaf(%a) }
    def @main(%x: Tensor[(), float32]) { @mid(%x) }
"""


def _names(mod: relay.IRModule) -> list[str]:
    return [g.name_hint for g in mod.get_global_vars()]


def test_functions_unreachable_from_main_are_removed():
    mod = parse(FUNCS)
    after = relay.transform.RemoveUnusedFunctions()(mod)
    assert _names(after) == ["leaf", "mid", "main"]
    assert len(_names(mod)) == 6  # the input is unchanged


def test_each_entry_function_keeps_what_it_reaches():
    after = relay.transform.RemoveUnusedFunctions(["even"])(parse(FUNCS))
    assert _names(after) == ["even", "odd"]
    both = relay.transform.RemoveUnusedFunctions(["main", "orphan"])(parse(FUNCS))
    assert _names(both) == ["leaf", "mid", "orphan", "main"]


def test_type_definitions_are_kept():
    mod = relay.IRModule()
    relay.Prelude(mod)
    x = relay.var("x", shape=())
    mod["main"] = relay.Function([x], x)
    after = relay.transform.RemoveUnusedFunctions()(mod)
    assert _names(after) == ["main"]
    assert after.get_type("List")[0] is mod.get_type("List")[0]


def test_missing_entry_function_is_an_error_naming_it():
    with pytest.raises(ValueError, match=r"@nope not found in the module \(it has @leaf"):
        relay.transform.RemoveUnusedFunctions(["nope"])(parse(FUNCS))


def test_entry_functions_must_be_a_list_of_names():
    with pytest.raises(TypeError, match="list of names"):
        relay.transform.RemoveUnusedFunctions("main")
