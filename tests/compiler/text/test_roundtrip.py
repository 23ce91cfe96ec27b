"""Text -> module -> text -> module gives a structurally equal module and the same text,
for every syntax form and for random well-typed programs."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from compiler.ir.structural import structural_equal, structural_hash
from compiler.text.parser import fromtext

from .program_strategies import modules

LIST = "type List[A] { Cons(A, List[A]), Nil }\n"

FORMS = {
    "tvm_example": (
        "def @main(%a: Tensor[(1, 2), uint8], %b: Tensor[(1, 2), float32],"
        ' %c: Tensor[(1, 2), float32]) { %0 = cast(%a, dtype="float32") + %b * %c; %0 }'
    ),
    "type_params_and_return_type": "def @id[A, B](%x: A, %y: B) -> A { %x }",
    "adt_definition": LIST + "type Pair[A, B] { MkPair(A, B) }\ntype Unit { U }",
    "fn_closure": (
        "def @main(%x: float32) { let %f = fn (%y: float32) -> float32 { %y * %x }; %f(%x) }"
    ),
    "closure_returned": "def @main() -> fn (int32) -> int32 { fn (%y: int32) { %y } }",
    "closure_attributes": "def @main() { fn (%x: float32, Primitive=1) { exp(%x) } }",
    "let_with_annotation": "def @main(%x: float32) { let %y: float32 = %x; let %z = %y; %z }",
    "nested_let_value": "def @main() { let %y = (let %x = 1; %x); %y }",
    "sequence": "def @main(%x: int32) { %x; %x }",
    "graph_bindings_dag": "def @main(%x: float32) { %0 = exp(%x); %1 = %0 + %0; (%1, %0) }",
    "if_else": "def @main(%c: bool) { if (%c) { 1f } else if (%c == False) { 2f } else { 3f } }",
    "shared_across_branches": (
        "def @main(%c: bool, %x: float32) { %0 = exp(%x); if (%c) { %0 } else { -%0 } }"
    ),
    "match_nested": LIST + (
        "def @f(%l: List[int32]) -> int32 { match (%l) { Cons(%h, Cons(_, %t)) => %h,"
        " Cons(%h: int32, _) => { %h }, Nil => 0 } }"
    ),
    "match_tuple_of_values": LIST + (
        "def @f(%a: List[int32], %b: List[int32]) -> int32 {"
        " match (%a, %b) { (Cons(%x, _), Nil) => %x, (_, Cons(%y, Nil)) => %y, _ => 0 } }"
    ),
    "match_tuple_bound_before": LIST + (
        "def @f(%a: List[int32]) { %0 = (%a, %a); match (%0) { (Nil, _) => %0.0, _ => %0.1 } }"
    ),
    "nullary_constructors_bare_called_and_as_values": LIST + (
        "type nat { z, s(nat) }\n"
        "def @main() { (Nil, Nil(), s(z), fn Nil, fn z, Cons, fn Cons) }"
    ),
    "match_partial_tuple_pattern": "def @f(%p: (int32, float32)) { match? (%p) { (%a, _) => %a } }",
    "match_wildcard_and_tuple_in_constructor": LIST + (
        "def @f(%l: List[(int32, int32)]) {"
        " match (%l) { Cons((%a, %b), _) => %a + %b, _ => 0 } }"
    ),
    "tuples_and_projection": (
        "def @main(%t: ((int32, int32), int32)) { ((), (%t.1,), %t.0.1, (%t.0, %t.1)) }"
    ),
    "projection_of_call": "def @f() -> (int32, int32) { (1, 2) }\ndef @main() { @f().1 }",
    "calls": LIST + (
        "def @g(%x: int32) { %x }\n"
        "def @main(%f: fn (int32) -> int32) { (@g(1), %f(2), Cons(3, Nil()), Nil) }"
    ),
    "operator_attributes": (
        "def @main(%x: Tensor[(2, 3), float32], %w: Tensor[(4, 3), float32]) {"
        " (sum(%x, axis=[1], keepdims=True), cast(%x, dtype=\"int8\"),"
        " nn.dense(%x, %w, units=4), clip(%x, a_min=-1.5, a_max=0.1), mean(%x, exclude=True)) }"
    ),
    "infix_and_unary": (
        "def @main(%a: float32, %b: float32) { (%a + %b * %a - %a / %b, %a < %b, %a > %b,"
        " %a <= %b, %a >= %b, %a == %b, %a != %b, -%a, -1f) }"
    ),
    "literals": (
        "def @main() { (1, -1, 1.5, 1f, -0f, 2i64, 1f16, 2.5f64, 7i8, 7i16, 7i32, 255u8,"
        " 9u16, 9u32, 9u64, 1e-30f, True, False) }"
    ),
    "types": (
        LIST + "def @main(%a: Tensor[(?, 10), float32], %b: Tensor[(5), int64], %c: (),"
        " %d: (bool,), %e: fn (int32, List[float32]) -> (), %f: fn [T](T) -> T, %g: _) { %a }"
    ),
    "comments": "// a comment\ndef @main(/* inline */ %x: int32) { %x /* nested /* ok */ */ }",
    "quoted_names": 'def @"my-func"(%"input.1": float32) { %"input.1" }',
    "mutual_recursion": (
        "def @even(%n: int32) -> bool { if (%n == 0) { True } else { @odd(%n - 1) } }\n"
        "def @odd(%n: int32) -> bool { if (%n == 0) { False } else { @even(%n - 1) } }"
    ),
    "recursive_let": (
        "def @main(%n: int32) { let %f = fn (%i: int32) -> int32 {"
        " if (%i == 0) { 0 } else { %f(%i - 1) } }; %f(%n) }"
    ),
    "meta_constants": (
        "def @main() { (meta[relay.Constant][0], meta[relay.Constant][0]) }\n#[metadata]\n"
        '{"relay.Constant": [{"dtype": "float32", "shape": [2], "data": "AACAPwAAAEA="}]}'
    ),
}  # fmt: skip


def assert_round_trips(mod):
    text = mod.astext()
    parsed = fromtext(text)
    assert structural_equal(parsed, mod), text
    assert parsed.astext() == text
    assert structural_hash(parsed) == structural_hash(mod)


@pytest.mark.parametrize("name", sorted(FORMS))
def test_each_syntax_form_round_trips(name):
    assert_round_trips(fromtext(FORMS[name]))


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(modules())
def test_random_well_typed_programs_round_trip(mod):
    assert_round_trips(mod)
