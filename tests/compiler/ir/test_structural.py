"""structural_equal and structural_hash: equal up to renaming of binders and sharing,
different on any change of operator, attribute, constant, dtype, shape or free variable."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from compiler import relay
from compiler.ir.expr import Call, Constant, Let, Var
from compiler.ir.module import IRModule
from compiler.ir.structural import structural_equal, structural_hash
from compiler.ir.types import IncompleteType, TensorType
from compiler.op.registry import get_op
from compiler.text.parser import fromtext, parse_expr

LIST = "type List[A] { Cons(A, List[A]), Nil }\n"


def mod(text: str) -> IRModule:
    return fromtext(text)


def fn(text: str):
    return parse_expr(text)


def assert_equal(a, b, map_free_vars=False):
    assert structural_equal(a, b, map_free_vars)
    assert structural_equal(b, a, map_free_vars)
    assert structural_hash(a, map_free_vars) == structural_hash(b, map_free_vars)


def assert_differ(a, b, map_free_vars=False):
    assert not structural_equal(a, b, map_free_vars)
    assert not structural_equal(b, a, map_free_vars)


# --- equal -------------------------------------------------------------------------------------

EQUAL = {
    "renamed_parameters": ("fn (%x: float32) { %x }", "fn (%y: float32) { %y }"),
    "renamed_let": ("fn () { let %a = 1; %a }", "fn () { let %b = 1; %b }"),
    "renamed_closure_parameters": (
        "fn (%x: int32) { fn (%y: int32) { %x + %y } }",
        "fn (%p: int32) { fn (%q: int32) { %p + %q } }",
    ),
    "renamed_type_parameters": ("fn [A](%x: A) -> A { %x }", "fn [B](%y: B) -> B { %y }"),
    "renamed_function_type_parameters": (
        "fn (%f: fn [A](A) -> A) { %f }",
        "fn (%g: fn [T](T) -> T) { %g }",
    ),
    "graph_binding_vs_copies": (
        "fn (%x: float32) { %0 = exp(%x); add(%0, %0) }",
        "fn (%x: float32) { add(exp(%x), exp(%x)) }",
    ),
    "shared_closure_vs_copies": (
        "fn (%x: float32) { %0 = fn (%y: float32) { %y }; (%0, %0) }",
        "fn (%x: float32) { (fn (%a: float32) { %a }, fn (%b: float32) { %b }) }",
    ),
    "default_attributes_given_or_not": (
        "fn (%x: Tensor[(2, 3), float32]) { sum(%x) }",
        "fn (%x: Tensor[(2, 3), float32]) { sum(%x, axis=None, keepdims=False) }",
    ),
    "nan_constants": ("fn () { meta[relay.Constant][0] }", "fn () { meta[relay.Constant][0] }"),
    "incomplete_types": ("fn (%x: _) { %x }", "fn (%y: _) { %y }"),
    "dynamic_dimensions": (
        "fn (%x: Tensor[(?, 3), float32]) { %x }",
        "fn (%y: Tensor[(?, 3), float32]) { %y }",
    ),
    "sequence_sugar_is_let": ("fn (%x: int32) { %x; %x }", "fn (%x: int32) { let %_ = %x; %x }"),
}


@pytest.mark.parametrize("name", sorted(EQUAL))
def test_equal(name):
    lhs, rhs = EQUAL[name]
    if name == "nan_constants":
        nan = np.array([np.nan, 1.0], dtype="float32")
        table_l = {"relay.Constant": [Constant(nan)]}
        table_r = {"relay.Constant": [Constant(nan.copy())]}
        assert_equal(
            parse_expr(lhs, init_meta_table=table_l), parse_expr(rhs, init_meta_table=table_r)
        )
        return
    assert_equal(fn(lhs), fn(rhs))


def test_match_pattern_variables_are_renamed():
    a = mod(LIST + "def @f(%l: List[int32]) { match (%l) { Cons(%h, Cons(_, %t)) => %h, _ => 0 } }")
    b = mod(LIST + "def @f(%m: List[int32]) { match (%m) { Cons(%x, Cons(_, %y)) => %x, _ => 0 } }")
    assert_equal(a, b)


def test_modules_compare_by_names_not_definition_order_or_tags():
    a = mod("type T { A }\ntype U { B }\ndef @f() { 1 }\ndef @g() { @f() }")
    b = mod("type U { B }\ntype T { A }\ndef @g() { @f() }\ndef @f() { 1 }")
    assert a.get_type("T")[1].tag != b.get_type("T")[1].tag
    assert_equal(a, b)


def test_builder_and_parser_make_equal_modules():
    x = relay.var("x", shape=(2, 3))
    built = IRModule.from_expr(relay.Function([x], relay.sum(relay.exp(x), axis=[1])))
    parsed = mod("def @main(%data: Tensor[(2, 3), float32]) { sum(exp(%data), axis=[1]) }")
    assert_equal(built, parsed)


def test_unnormalized_attributes_equal_normalized_ones():
    x = relay.var("x", shape=(2, 3))
    raw = Call(get_op("sum"), [x], {"axis": [1]})
    assert_equal(raw, relay.sum(x, axis=1))


def test_free_variables_equal_only_themselves_unless_mapped():
    x, y = relay.var("x"), relay.var("x")
    assert_equal(relay.exp(x), relay.exp(x))
    assert_differ(relay.exp(x), relay.exp(y))
    assert_equal(relay.exp(x), relay.exp(y), map_free_vars=True)


def test_mapped_free_variables_must_correspond_one_to_one():
    x, y, z = relay.var("x"), relay.var("y"), relay.var("z")
    assert_differ(relay.Tuple([x, x]), relay.Tuple([y, z]), map_free_vars=True)
    assert_differ(relay.Tuple([x, y]), relay.Tuple([z, z]), map_free_vars=True)
    assert_differ(relay.Tuple([x, y]), relay.Tuple([x, x]), map_free_vars=True)
    assert_equal(relay.Tuple([x, y]), relay.Tuple([y, x]), map_free_vars=True)


def test_mapped_free_variables_compare_their_types():
    a, b = relay.var("a", "float32"), relay.var("b", "int32")
    assert_differ(relay.exp(a), relay.exp(b), map_free_vars=True)


def test_lists_and_types_compare_structurally():
    a, b = relay.var("a"), relay.var("b")
    assert structural_equal([relay.exp(a), a], [relay.exp(b), b], map_free_vars=True)
    assert not structural_equal([a], [a, a])
    assert_equal(TensorType((1, 2), "float32"), TensorType((1, 2), "float32"))
    assert_equal(IncompleteType(), IncompleteType())


def test_ten_thousand_deep_let_chains_compare_and_hash():
    def chain(name: str):
        x = relay.var(name, "float32")
        body = x
        for index in range(10_000):
            body = Let(relay.var(f"{name}{index}", "float32"), x, body)
        return relay.Function([x], body)

    assert_equal(chain("a"), chain("b"))


def test_relay_namespace_exports():
    assert relay.structural_equal is structural_equal
    assert relay.structural_hash is structural_hash


# --- different ---------------------------------------------------------------------------------

DIFFERENT = {
    "attributes": (
        "fn (%x: Tensor[(2, 3), float32]) { sum(%x, axis=[0]) }",
        "fn (%x: Tensor[(2, 3), float32]) { sum(%x, axis=[1]) }",
    ),
    "boolean_attribute": (
        "fn (%x: Tensor[(2, 3), float32]) { sum(%x, keepdims=True) }",
        "fn (%x: Tensor[(2, 3), float32]) { sum(%x) }",
    ),
    "cast_dtype_attribute": (
        'fn (%x: float32) { cast(%x, dtype="int32") }',
        'fn (%x: float32) { cast(%x, dtype="int64") }',
    ),
    "annotation_dtypes": ("fn (%x: float32) { %x }", "fn (%x: float16) { %x }"),
    "annotation_shapes": (
        "fn (%x: Tensor[(1, 2), float32]) { %x }",
        "fn (%x: Tensor[(2, 1), float32]) { %x }",
    ),
    "static_vs_dynamic_dimension": (
        "fn (%x: Tensor[(1, 2), float32]) { %x }",
        "fn (%x: Tensor[(?, 2), float32]) { %x }",
    ),
    "annotation_present_or_not": ("fn (%x: float32) { %x }", "fn (%x) { %x }"),
    "return_type": ("fn (%x: int32) -> int32 { %x }", "fn (%x: int32) { %x }"),
    "constant_values": ("fn () { 1f }", "fn () { 2f }"),
    "constant_dtypes": ("fn () { 1 }", "fn () { 1i64 }"),
    "negative_zero": ("fn () { 0f }", "fn () { -0f }"),
    "operators": ("fn (%x: float32) { exp(%x) }", "fn (%x: float32) { negative(%x) }"),
    "argument_order": (
        "fn (%x: float32, %y: float32) { %x - %y }",
        "fn (%x: float32, %y: float32) { %y - %x }",
    ),
    "not_a_bijection": (
        "fn (%x: float32, %y: float32) { (%x, %x) }",
        "fn (%x: float32, %y: float32) { (%x, %y) }",
    ),
    "inner_binder_vs_outer": (
        "fn (%x: int32) { fn (%y: int32) { %x } }",
        "fn (%x: int32) { fn (%y: int32) { %y } }",
    ),
    "parameter_count": ("fn (%x: int32) { 1 }", "fn (%x: int32, %y: int32) { 1 }"),
    "type_parameter_use": (
        "fn [A, B](%x: A, %y: B) -> A { %x }",
        "fn [A, B](%x: A, %y: B) -> B { %y }",
    ),
    "tuple_index": ("fn (%t: (int32, int32)) { %t.0 }", "fn (%t: (int32, int32)) { %t.1 }"),
    "tuple_length": ("fn () { (1, 2) }", "fn () { (1, 2, 3) }"),
    "function_attributes": (
        "fn (%x: int32, Primitive=1) { %x }",
        "fn (%x: int32) { %x }",
    ),
    "if_branches_swapped": (
        "fn (%c: bool) { if (%c) { 1 } else { 2 } }",
        "fn (%c: bool) { if (%c) { 2 } else { 1 } }",
    ),
    "let_vs_direct": ("fn (%x: int32) { let %y = %x; %y }", "fn (%x: int32) { %x }"),
}


@pytest.mark.parametrize("name", sorted(DIFFERENT))
def test_different(name):
    lhs, rhs = DIFFERENT[name]
    a, b = fn(lhs), fn(rhs)
    assert_differ(a, b)
    assert_differ(a, b, map_free_vars=True)
    # Not required of a hash, but these all differ in content the hash covers.
    if name not in ("not_a_bijection", "inner_binder_vs_outer"):
        assert structural_hash(a) != structural_hash(b)


def test_constant_shapes_differ_even_with_equal_bytes():
    a = relay.const(np.zeros((2, 3), dtype="float32"))
    b = relay.const(np.zeros((3, 2), dtype="float32"))
    c = relay.const(np.zeros((6,), dtype="int32").view("float32").reshape(2, 3))
    assert_differ(a, b)
    assert_equal(a, c)
    assert structural_hash(a) != structural_hash(b)


def test_nan_payloads_are_compared_bitwise():
    quiet = np.array(np.nan, dtype="float32")
    other = np.array([0x7FC00001], dtype="uint32").view("float32").reshape(())
    assert_equal(relay.const(quiet), relay.const(quiet.copy()))
    assert_differ(relay.const(quiet), relay.const(other))


def test_match_completeness_differs():
    complete = mod(LIST + "def @f(%l: List[int32]) { match (%l) { Cons(%h, _) => %h } }")
    partial = mod(LIST + "def @f(%l: List[int32]) { match? (%l) { Cons(%h, _) => %h } }")
    assert_differ(complete, partial)


def test_constructors_compare_by_name_and_type():
    a = mod(LIST + "type Other[A] { Cons2(A), Nil2 }\ndef @f() { Nil() }")
    b = mod(LIST + "type Other[A] { Cons2(A), Nil2 }\ndef @f() { Nil2() }")
    assert_differ(a, b)
    same_name_other_type = mod("type Box { Nil }\ndef @f() { Nil() }")
    assert_differ(a["f"], same_name_other_type["f"])
    other_arity = mod("type List[A] { Cons(A), Nil }\ndef @f() { Cons(1) }")
    assert_differ(mod(LIST + "def @f() { Cons(1, Nil()) }")["f"].body.op, other_arity["f"].body.op)


def test_patterns_differ():
    base = LIST + "def @f(%l: List[int32]) { match (%l) { %s => 1, _ => 0 } }"
    variants = ["Cons(_, Nil)", "Cons(_, _)", "Cons(%h, Nil)", "Nil"]
    mods = [mod(base.replace("%s", v)) for v in variants]
    for i, a in enumerate(mods):
        for b in mods[i + 1 :]:
            assert_differ(a, b)


def test_modules_differ_in_names_functions_and_types():
    base = mod("type T { A }\ndef @f() { 1 }")
    assert_differ(base, mod("type T { A }\ndef @g() { 1 }"))
    assert_differ(base, mod("type T { A }\ndef @f() { 1 }\ndef @g() { 1 }"))
    assert_differ(base, mod("type T { A, B }\ndef @f() { 1 }"))
    assert_differ(base, mod("type T[X] { A }\ndef @f() { 1 }"))
    assert_differ(base, mod("type T { A(int32) }\ndef @f() { 1 }"))
    assert_differ(base, base["f"])


def test_global_calls_compare_by_name():
    a = mod("def @f() { 1 }\ndef @g() { 1 }\ndef @main() { @f() }")
    b = mod("def @f() { 1 }\ndef @g() { 1 }\ndef @main() { @g() }")
    assert_differ(a, b)


def test_var_bound_twice_in_one_side_is_not_a_bijection():
    x, y = relay.var("x", "int32"), relay.var("y", "int32")
    p = relay.var("p", "int32")
    lhs = relay.Function([x, y], relay.Tuple([x, y]))
    rhs = relay.Function([p, p], relay.Tuple([p, p]))
    assert_differ(lhs, rhs)


# --- hash --------------------------------------------------------------------------------------


def test_hash_of_a_dag_equals_hash_of_its_tree():
    x = relay.var("x", "float32")
    shared = relay.exp(x)
    dag = relay.Function([x], relay.Tuple([shared, shared]))
    y = relay.var("y", "float32")
    tree = relay.Function([y], relay.Tuple([relay.exp(y), relay.exp(y)]))
    assert structural_hash(dag) == structural_hash(tree)


def test_hash_is_the_same_in_another_process():
    text = LIST + (
        "def @main(%x: Tensor[(?, 3), float32], %l: List[int32]) {"
        " %0 = sum(%x, axis=[1]); match (%l) { Cons(%h, _) => (%0, %h), Nil => (%0, 0) } }"
    )
    code = (
        "from compiler.text.parser import fromtext\n"
        "from compiler.ir.structural import structural_hash\n"
        f"print(structural_hash(fromtext({text!r})))\n"
    )
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert int(out.stdout) == structural_hash(fromtext(text))


def test_hash_with_mapped_free_variables_ignores_their_names():
    a, b = relay.var("a", "float32"), relay.var("b", "float32")
    assert structural_hash(relay.exp(a), map_free_vars=True) == structural_hash(
        relay.exp(b), map_free_vars=True
    )
    assert structural_hash(relay.exp(a)) != structural_hash(relay.exp(b))


def test_equal_rejects_mixed_kinds():
    x = relay.var("x", "float32")
    assert not structural_equal(x, relay.const(1.0))
    assert not structural_equal(IRModule.from_expr(x), x)
    assert not structural_equal(Var("x"), None)


def test_assert_structural_equal_passes_quietly_or_shows_both_sides():
    from compiler.tvm import ir

    x = relay.var("x", shape=(2,))
    ir.assert_structural_equal(relay.Function([x], x + x), relay.Function([x], x + x))
    with pytest.raises(ValueError, match=r"not structurally equal(.|\n)*--- rhs ---"):
        ir.assert_structural_equal(relay.Function([x], x), relay.Function([x], x + x))
