"""Type inference on programs written in the Relay text format (parser + inference together)."""

from __future__ import annotations

import pytest

from compiler import relay
from compiler.typing import RelayTypeError, infer_types
from tests.compiler.typing._programs import text

LIST = """#[version = "0.0.5"]
type List[A] {
  Cons(A, List[A]),
  Nil,
}
def @map[A, B](%f: fn (A) -> B, %l: List[A]) -> List[B] {
  match (%l) {
    Cons(%h, %t) => Cons(%f(%h), @map(%f, %t)),
    Nil => Nil(),
  }
}
def @sum_list(%l: List[int32]) {
  match (%l) {
    Cons(%h, %t) => %h + @sum_list(%t),
    Nil => 0,
  }
}
"""


def test_polymorphic_map_recursion_and_dynamic_dimensions_from_text():
    src = LIST + (
        "def @main(%x: Tensor[(?, 10), float32]) {\n"
        "  let %l = Cons(%x, Cons(%x, Nil()));\n"
        '  let %m = @map(fn (%y) { cast(%y, dtype="int32") }, %l);\n'
        "  (%m, @sum_list(Cons(1, Nil())))\n"
        "}\n"
    )
    typed = infer_types(relay.fromtext(src))
    assert (
        text(typed["sum_list"].checked_type) == "fn (List[Tensor[(), int32]]) -> Tensor[(), int32]"
    )
    assert text(typed["main"].checked_type) == (
        "fn (Tensor[(?, 10), float32]) -> (List[Tensor[(?, 10), int32]], Tensor[(), int32])"
    )


def test_typed_module_prints_and_parses_back_to_the_same_types():
    src = LIST + "def @main() { @sum_list(Cons(1, Cons(2, Nil()))) }\n"
    typed = infer_types(relay.fromtext(src))
    again = infer_types(relay.fromtext(typed.astext()))
    for name in ("map", "sum_list", "main"):
        assert text(again[name].checked_type) == text(typed[name].checked_type)


def test_error_position_comes_from_the_source():
    src = LIST + "def @main() {\n  @sum_list(Cons(1f, Nil()))\n}\n"
    with pytest.raises(RelayTypeError) as info:
        infer_types(relay.fromtext(src))
    msg = str(info.value)
    line = src.count("\n", 0, src.index("@sum_list(Cons(1f")) + 1
    assert f"type mismatch at {line}:" in msg
    assert "expected List[Tensor[(), int32]], found List[Tensor[(), float32]]" in msg


def test_the_prelude_type_checks():
    mod = relay.IRModule()
    relay.Prelude(mod)
    typed = infer_types(mod)
    assert text(typed["map"].checked_type) == "fn [A, B](fn (A) -> B, List[A]) -> List[B]"
    for gv in typed.get_global_vars():
        assert typed[gv].checked_type is not None
