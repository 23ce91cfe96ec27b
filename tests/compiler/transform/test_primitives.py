"""Primitive extraction: each operator call becomes a call of a typed primitive function."""

from __future__ import annotations

from compiler.ir.expr import Call, Function, Op
from compiler.ir.visitor import post_order
from compiler.transform.primitives import wrap_primitives
from compiler.transform.typed_rewrite import is_primitive
from compiler.typing import infer_types
from tests.compiler.transform.util import assert_same, parse


def wrap(text: str):  # type: ignore[no-untyped-def]
    return wrap_primitives(infer_types(parse(text)))


def test_operator_call_becomes_a_call_of_a_primitive_function_with_typed_parameters() -> None:
    out = wrap("def @main(%x: Tensor[(2), float32]) -> Tensor[(2), float32] { %x + 1f }")
    expected = """
    def @main(%x: Tensor[(2), float32]) -> Tensor[(2), float32] {
      %0 = fn (%p0: Tensor[(2), float32], %p1: float32, Primitive=1) -> Tensor[(2), float32] {
        add(%p0, %p1)
      };
      %0(%x, 1f)
    }"""
    assert_same(out, expected)


def test_nested_operator_calls_become_one_primitive_each() -> None:
    out = wrap("def @main(%x: float32) -> float32 { exp(negative(%x)) }")
    expected = """
    def @main(%x: float32) -> float32 {
      %0 = fn (%p0: float32, Primitive=1) -> float32 { negative(%p0) };
      %1 = fn (%p0: float32, Primitive=1) -> float32 { exp(%p0) };
      %1(%0(%x))
    }"""
    assert_same(out, expected)


def test_attributes_are_kept_on_the_operator_call_inside() -> None:
    out = wrap('def @main(%x: Tensor[(2, 3), int32]) { sum(cast(%x, dtype="float32"), axis=[1]) }')
    expected = """
    def @main(%x: Tensor[(2, 3), int32]) -> Tensor[(2), float32] {
      %0 = fn (%p0: Tensor[(2, 3), int32], Primitive=1) -> Tensor[(2, 3), float32] {
        cast(%p0, dtype="float32")
      };
      %1 = fn (%p0: Tensor[(2, 3), float32], Primitive=1) -> Tensor[(2), float32] {
        sum(%p0, axis=[1])
      };
      %1(%0(%x))
    }"""
    assert_same(out, expected)


def test_tuple_literal_argument_is_passed_field_by_field() -> None:
    out = wrap("""
    def @main(%a: Tensor[(2), float32], %b: Tensor[(3), float32]) -> Tensor[(5), float32] {
      concatenate((%a, %b), axis=0)
    }""")
    expected = """
    def @main(%a: Tensor[(2), float32], %b: Tensor[(3), float32]) -> Tensor[(5), float32] {
      %0 = fn (%p0: Tensor[(2), float32], %p1: Tensor[(3), float32], Primitive=1)
          -> Tensor[(5), float32] {
        concatenate((%p0, %p1), axis=0)
      };
      %0(%a, %b)
    }"""
    assert_same(out, expected)


def test_tuple_valued_argument_becomes_one_tuple_typed_parameter() -> None:
    out = wrap("""
    def @main(%t: (Tensor[(2), float32], Tensor[(2), float32])) -> Tensor[(4), float32] {
      concatenate(%t, axis=0)
    }""")
    expected = """
    def @main(%t: (Tensor[(2), float32], Tensor[(2), float32])) -> Tensor[(4), float32] {
      %0 = fn (%p0: (Tensor[(2), float32], Tensor[(2), float32]), Primitive=1)
          -> Tensor[(4), float32] {
        concatenate(%p0, axis=0)
      };
      %0(%t)
    }"""
    assert_same(out, expected)


def test_an_argument_passed_twice_becomes_one_parameter() -> None:
    out = wrap("def @main(%x: float32) -> float32 { %x * %x }")
    expected = """
    def @main(%x: float32) -> float32 {
      %0 = fn (%p0: float32, Primitive=1) -> float32 { multiply(%p0, %p0) };
      %0(%x)
    }"""
    assert_same(out, expected)


def test_operator_calls_inside_existing_primitive_functions_are_left_alone() -> None:
    text = """
    def @main(%x: float32) -> float32 {
      %0 = fn (%p0: float32, Primitive=1) -> float32 { exp(negative(%p0)) };
      %0(%x)
    }"""
    assert_same(wrap(text), text)


def test_operators_are_only_called_inside_primitive_functions_afterwards() -> None:
    out = wrap("""
    def @f(%x: float32, %c: bool) -> float32 {
      let %g = fn (%y: float32) -> float32 { %y * 2f };
      if (%c) { %g(%x + 1f) } else { exp(%x) }
    }""")
    for node in post_order(out["f"], descend=lambda n: not is_primitive(n)):
        if isinstance(node, Call):
            assert not isinstance(node.op, Op), f"unwrapped operator call {node}"
    assert sum(1 for n in post_order(out["f"]) if isinstance(n, Function) and is_primitive(n)) == 3


def test_primitive_calls_keep_the_type_of_the_operator_call() -> None:
    out = wrap("def @main(%x: Tensor[(2), float32]) -> Tensor[(2), bool] { %x < %x }")
    body = out["main"].body
    assert isinstance(body, Call) and is_primitive(body.op)
    assert str(body.checked_type) == "Tensor[(2), bool]"


def test_the_input_module_is_not_modified() -> None:
    mod = infer_types(parse("def @main(%x: float32) -> float32 { %x + %x }"))
    before = mod.astext()
    wrap_primitives(mod)
    assert mod.astext() == before
