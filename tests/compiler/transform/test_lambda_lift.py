"""Lambda lifting with closure conversion: captures first, currying, recursion, polymorphism."""

from __future__ import annotations

from compiler import relay
from compiler.ir.expr import Function
from compiler.transform.lambda_lift import lambda_lift
from compiler.transform.to_anf import to_anf
from compiler.transform.typed_rewrite import is_closure
from compiler.typing import infer_types
from tests.compiler.transform.util import assert_same, parse


def lift(text: str):  # type: ignore[no-untyped-def]
    """ANF, inference, lifting: the pipeline's order."""
    return lambda_lift(infer_types(to_anf(parse(text))))


def test_capture_free_function_becomes_a_global_and_its_let_disappears() -> None:
    out = lift("""
    def @main(%x: float32) -> float32 {
      let %double = fn (%y: float32) -> float32 { %y + %y };
      %double(%x)
    }""")
    expected = """
    def @main(%x: float32) -> float32 {
      let %r = @main_lifted_0(%x);
      %r
    }
    def @main_lifted_0(%y: float32) -> float32 {
      let %a = add(%y, %y);
      %a
    }"""
    assert_same(out, expected)


def test_capturing_function_becomes_a_closure_global_called_with_its_captures() -> None:
    out = lift("""
    def @main(%x: float32, %z: float32) -> float32 {
      let %addz = fn (%y: float32) -> float32 { %y + %z };
      %addz(%x)
    }""")
    expected = """
    def @main(%x: float32, %z: float32) -> float32 {
      let %addz = @main_lifted_0(%z);
      let %r = %addz(%x);
      %r
    }
    def @main_lifted_0(%z: float32, Closure=1) -> fn (float32) -> float32 {
      fn (%y: float32) -> float32 {
        let %a = add(%y, %z);
        %a
      }
    }"""
    assert_same(infer_types(out), expected)
    assert is_closure(out["main_lifted_0"])


def test_curried_function_lifts_each_level_and_captures_the_outer_parameters() -> None:
    out = lift("""
    def @main(%x: float32) -> fn (float32) -> fn (float32) -> float32 {
      fn (%y: float32) -> fn (float32) -> float32 {
        fn (%z: float32) -> float32 { %x + %y + %z }
      }
    }""")
    expected = """
    def @main(%x: float32) -> fn (float32) -> fn (float32) -> float32 {
      let %f = @main_lifted_0(%x);
      %f
    }
    def @main_lifted_0(%x: float32, Closure=1) -> fn (float32) -> fn (float32) -> float32 {
      fn (%y: float32) -> fn (float32) -> float32 {
        let %g = @main_lifted_1(%x, %y);
        %g
      }
    }
    def @main_lifted_1(%x: float32, %y: float32, Closure=1) -> fn (float32) -> float32 {
      fn (%z: float32) -> float32 {
        let %a = add(%x, %y);
        let %b = add(%a, %z);
        %b
      }
    }"""
    assert_same(infer_types(out), expected)


def test_recursive_capture_free_local_function_calls_its_global_directly() -> None:
    out = lift("""
    def @main(%n: int32) -> int32 {
      let %count = fn (%i: int32) -> int32 {
        if (%i == 0) { %i } else { %count(%i - 1) }
      };
      %count(%n)
    }""")
    expected = """
    def @main(%n: int32) -> int32 {
      let %r = @main_lifted_0(%n);
      %r
    }
    def @main_lifted_0(%i: int32) -> int32 {
      let %c = equal(%i, 0);
      let %v = if (%c) {
        %i
      } else {
        let %j = subtract(%i, 1);
        let %k = @main_lifted_0(%j);
        %k
      };
      %v
    }"""
    assert_same(out, expected)


def test_recursive_capturing_local_function_rebuilds_its_closure_inside() -> None:
    out = lift("""
    def @main(%n: int32, %step: int32) -> int32 {
      let %count = fn (%i: int32) -> int32 {
        if (%i <= 0) { %i } else { %count(%i - %step) }
      };
      %count(%n)
    }""")
    expected = """
    def @main(%n: int32, %step: int32) -> int32 {
      let %count = @main_lifted_0(%step);
      let %r = %count(%n);
      %r
    }
    def @main_lifted_0(%step: int32, Closure=1) -> fn (int32) -> int32 {
      fn (%i: int32) -> int32 {
        let %self = @main_lifted_0(%step);
        let %c = less_equal(%i, 0);
        let %v = if (%c) {
          %i
        } else {
          let %j = subtract(%i, %step);
          let %k = %self(%j);
          %k
        };
        %v
      }
    }"""
    assert_same(infer_types(out), expected)


def test_function_using_only_lifted_capture_free_functions_captures_nothing() -> None:
    out = lift("""
    def @main(%x: float32) -> float32 {
      let %inc = fn (%y: float32) -> float32 { %y + 1f };
      let %twice = fn (%y: float32) -> float32 { %inc(%inc(%y)) };
      %twice(%x)
    }""")
    assert not any(is_closure(f) for f in out.functions.values())
    expected = """
    def @main(%x: float32) -> float32 {
      let %r = @main_lifted_1(%x);
      %r
    }
    def @main_lifted_0(%y: float32) -> float32 {
      let %a = add(%y, 1f);
      %a
    }
    def @main_lifted_1(%y: float32) -> float32 {
      let %a = @main_lifted_0(%y);
      let %b = @main_lifted_0(%a);
      %b
    }"""
    assert_same(out, expected)


def test_polymorphic_capture_gets_the_enclosing_type_parameters() -> None:
    out = lift("""
    def @compose[A, B, C](%f: fn (B) -> C, %g: fn (A) -> B) -> fn (A) -> C {
      fn (%x: A) -> C { %f(%g(%x)) }
    }""")
    lifted = out["compose_lifted_0"]
    assert is_closure(lifted)
    # Captures come in order of first use (%g is called first), type parameters in order
    # of appearance in the captured types.
    assert [p.name_hint for p in lifted.params] == ["g", "f"]
    assert [tv.name_hint for tv in lifted.type_params] == ["A", "B", "C"]
    typed = infer_types(out)  # the lifted module type-checks on its own
    assert isinstance(typed["compose"], Function)


def test_unannotated_parameters_of_lifted_functions_get_their_inferred_types() -> None:
    out = lift("""
    def @main(%x: float32) -> float32 {
      let %inc = fn (%y) { %y + 1f };
      %inc(%x)
    }""")
    (param,) = out["main_lifted_0"].params
    assert param.type_annotation == relay.scalar_type("float32")


def test_lifted_names_never_collide_with_existing_globals() -> None:
    out = lift("""
    def @main_lifted_0(%y: float32) -> float32 { %y }
    def @main(%x: float32) -> float32 {
      let %inc = fn (%y: float32) -> float32 { @main_lifted_0(%y) };
      %inc(%x)
    }""")
    assert [g.name_hint for g in out.get_global_vars()] == [
        "main_lifted_0",
        "main",
        "main_lifted_1",
    ]


def test_primitive_functions_are_not_lifted() -> None:
    text = """
    def @main(%x: float32) -> float32 {
      %0 = fn (%p: float32, Primitive=1) -> float32 { negative(%p) };
      let %a = %0(%x);
      %a
    }"""
    assert_same(lift(text), text)


def test_the_input_module_is_not_modified() -> None:
    mod = infer_types(
        to_anf(
            parse("""
            def @main(%x: float32, %z: float32) -> float32 {
              let %addz = fn (%y: float32) -> float32 { %y + %z };
              %addz(%x)
            }""")
        )
    )
    before = mod.astext()
    lambda_lift(mod)
    assert mod.astext() == before
    assert [g.name_hint for g in mod.get_global_vars()] == ["main"]


def test_lifting_is_deterministic() -> None:
    text = """
    def @main(%x: float32) -> fn (float32) -> float32 {
      let %a = fn (%y: float32) -> float32 { %y + %x };
      let %b = fn (%y: float32) -> float32 { %a(%y) * %x };
      %b
    }"""
    assert lift(text).astext() == lift(text).astext()


def test_local_polymorphic_function_keeps_its_own_type_parameters() -> None:
    out = lift("""
    def @main(%x: int32) -> int32 {
      let %ident = fn [T](%v: T) -> T { %v };
      %ident(%x)
    }""")
    assert [tv.name_hint for tv in out["main_lifted_0"].type_params] == ["T"]
    infer_types(out)
