"""Eta-expansion: constructors used as values become global wrapper functions."""

from __future__ import annotations

import numpy as np

from compiler.ir.expr import Call, Clause, Constructor, Function, GlobalVar, Pattern
from compiler.ir.visitor import children, post_order
from compiler.transform.eta_expand import EtaExpand, eta_expand
from compiler.typing import infer_types
from tests.compiler.transform.util import assert_results_match, assert_same, parse

LIST = "type List[A] { Cons(A, List[A]), Nil }\n"
FOLD = """
def @foldr[A, B](%f: fn (A, B) -> B, %acc: B, %xs: List[A]) -> B {
  match (%xs) {
    Cons(%x, %rest) => %f(%x, @foldr(%f, %acc, %rest)),
    Nil => %acc,
  }
}
"""


def test_constructor_passed_as_a_value_becomes_a_generic_global_wrapper() -> None:
    mod = parse(
        LIST
        + FOLD
        + """
    def @main(%xs: List[int32]) -> List[int32] { @foldr(Cons, Nil(), %xs) }"""
    )
    out = eta_expand(mod)
    expected = (
        LIST
        + FOLD
        + """
    def @main(%xs: List[int32]) -> List[int32] { @foldr(@eta_Cons, Nil(), %xs) }
    def @eta_Cons[T](%x0: T, %x1: List[T]) -> List[T] { Cons(%x0, %x1) }"""
    )
    assert_same(out, expected)
    infer_types(out)  # the wrapper is well typed and used at List[int32]


def test_one_wrapper_per_constructor_however_often_it_is_used() -> None:
    mod = parse(
        LIST
        + FOLD
        + """
    def @main(%xs: List[int32]) -> (List[int32], List[int32]) {
      (@foldr(Cons, Nil(), %xs), @foldr(Cons, %xs, %xs))
    }"""
    )
    out = eta_expand(mod)
    assert [g.name_hint for g in out.get_global_vars()] == ["foldr", "main", "eta_Cons"]


def test_nullary_constructor_named_as_a_value_is_a_function_too() -> None:
    mod = parse(LIST + "def @main() -> List[int32] { let %make = fn Nil; %make() }")
    expected = (
        LIST
        + """
    def @main() -> List[int32] { let %make = @eta_Nil; %make() }
    def @eta_Nil[T]() -> List[T] { Nil() }"""
    )
    assert_same(eta_expand(mod), expected)


def test_constructors_in_calls_and_patterns_are_left_alone() -> None:
    text = (
        LIST
        + """
    def @main(%xs: List[int32]) -> List[int32] {
      match (%xs) {
        Cons(%x, %rest) => Cons(%x, %rest),
        Nil => Nil(),
      }
    }"""
    )
    out = eta_expand(parse(text))
    assert_same(out, text)
    assert [g.name_hint for g in out.get_global_vars()] == ["main"]


def test_no_constructor_value_remains_outside_call_position() -> None:
    mod = parse(
        LIST
        + FOLD
        + """
    def @main(%xs: List[int32]) -> List[int32] {
      let %c = Cons;
      @foldr(%c, Nil(), %xs)
    }"""
    )
    out = eta_expand(mod)
    for node in post_order(out["main"]):
        if isinstance(node, (Pattern, Clause)):
            continue
        values = children(node)[1:] if isinstance(node, Call) else children(node)
        assert not any(isinstance(v, Constructor) for v in values), f"constructor value in {node}"
    assert isinstance(out.get_global_var("eta_Cons"), GlobalVar)


def test_the_input_module_is_not_modified() -> None:
    mod = parse(
        LIST + FOLD + "def @main(%xs: List[int32]) -> List[int32] { @foldr(Cons, Nil(), %xs) }"
    )
    before = mod.astext()
    eta_expand(mod)
    assert mod.astext() == before
    assert "eta_Cons" not in mod


# --- TVM's pass object ---------------------------------------------------------------------------

GLOBALS = """
def @double(%x: Tensor[(2), float32]) -> Tensor[(2), float32] { add(%x, %x) }
def @apply(%f: fn (Tensor[(2), float32]) -> Tensor[(2), float32], %x: Tensor[(2), float32])
    -> Tensor[(2), float32] { %f(%x) }
"""


def test_a_global_used_as_a_value_becomes_a_local_function_calling_it() -> None:
    mod = parse(GLOBALS + "def @main(%x: Tensor[(2), float32]) { @apply(@double, %x) }")
    out = EtaExpand(expand_global_var=True)(mod)
    expected = (
        GLOBALS
        + """
    def @main(%x: Tensor[(2), float32]) {
      @apply(fn (%x0: Tensor[(2), float32]) -> Tensor[(2), float32] { @double(%x0) }, %x)
    }"""
    )
    assert_same(out, expected)
    assert_results_match(mod, out, [np.array([1.0, 2.0], "float32")])


def test_a_generic_global_gets_a_generic_wrapper() -> None:
    mod = parse(
        LIST
        + FOLD
        + "def @main(%xs: List[int32]) -> fn (fn (int32, int32) -> int32, int32, List[int32])"
        " -> int32 { @foldr }"
    )
    out = EtaExpand(expand_global_var=True)(mod)
    wrapper = out["main"].body
    assert isinstance(wrapper, Function) and len(wrapper.type_params) == 2
    infer_types(out)


def test_eta_expand_does_nothing_unless_asked_and_both_at_once() -> None:
    source = (
        LIST
        + FOLD
        + GLOBALS
        + """
    def @main(%xs: List[int32], %x: Tensor[(2), float32]) {
      (@foldr(Cons, Nil(), %xs), @apply(@double, %x))
    }"""
    )
    mod = parse(source)
    assert_same(EtaExpand()(mod), source)
    both = EtaExpand(expand_constructor=True, expand_global_var=True)(mod)
    names = {g.name_hint for g in both.get_global_vars()}
    assert "eta_Cons" in names
    uses = [n for n in post_order(both["main"]) if isinstance(n, GlobalVar)]
    # Globals are left in callee position only: @foldr and @apply are called, @double and
    # the constructor's wrapper @eta_Cons are called by the local functions standing in.
    assert all(
        any(isinstance(c, Call) and c.op is g for c in post_order(both["main"])) for g in uses
    ), both["main"]
    infer_types(both)
