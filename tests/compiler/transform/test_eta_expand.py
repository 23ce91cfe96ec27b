"""Eta-expansion: constructors used as values become global wrapper functions."""

from __future__ import annotations

from compiler.ir.expr import Call, Clause, Constructor, GlobalVar, Pattern
from compiler.ir.visitor import children, post_order
from compiler.transform.eta_expand import eta_expand
from compiler.typing import infer_types
from tests.compiler.transform.util import assert_same, parse

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
