"""The Relay text parser builds the expected IR for every syntax form."""

from __future__ import annotations

import numpy as np
import pytest

from compiler import relay
from compiler.ir.expr import (
    Call,
    Constant,
    Constructor,
    Function,
    GlobalVar,
    If,
    Let,
    Match,
    Op,
    PatternConstructor,
    PatternTuple,
    PatternVar,
    PatternWildcard,
    Tuple,
    TupleGetItem,
    Var,
)
from compiler.ir.structural import structural_equal
from compiler.ir.types import (
    Any,
    FuncType,
    GlobalTypeVar,
    IncompleteType,
    TensorType,
    TupleType,
    TypeCall,
    TypeVar,
)
from compiler.text.parser import fromtext, parse_expr, parse_type

TVM_EXAMPLE = """#[version = "0.0.5"]
def @main(%a: Tensor[(1, 2), uint8], %b: Tensor[(1, 2), float32], %c: Tensor[(1, 2), float32]) {
  %0 = cast(%a, dtype="float32") + %b * %c;
  %0
}
"""

LIST = "type List[A] { Cons(A, List[A]), Nil }\n"


def op_name(expr: object) -> str:
    assert isinstance(expr, Call) and isinstance(expr.op, Op), expr
    return expr.op.name


# --- returns: the structure built ------------------------------------------------------------


def test_tvm_example_parses_to_cast_multiply_add():
    main = fromtext(TVM_EXAMPLE)["main"]
    a, b, c = main.params
    assert [p.name_hint for p in main.params] == ["a", "b", "c"]
    assert a.type_annotation == TensorType((1, 2), "uint8")
    assert c.type_annotation == TensorType((1, 2), "float32")
    body = main.body
    assert op_name(body) == "add"
    cast, product = body.args
    assert op_name(cast) == "cast" and cast.args[0] is a
    assert cast.attrs["dtype"] == "float32"
    assert op_name(product) == "multiply" and product.args == (b, c)


def test_tvm_example_equals_the_same_program_built_with_relay():
    a = relay.var("a", shape=(1, 2), dtype="uint8")
    b = relay.var("b", shape=(1, 2))
    c = relay.var("c", shape=(1, 2))
    built = relay.IRModule.from_expr(relay.Function([a, b, c], relay.cast(a, "float32") + b * c))
    assert structural_equal(fromtext(TVM_EXAMPLE), built)


def test_version_header_is_optional():
    without = TVM_EXAMPLE.replace('#[version = "0.0.5"]\n', "")
    assert structural_equal(fromtext(without), fromtext(TVM_EXAMPLE))


def test_version_0_0_4_of_tvms_own_prelude_reads_as_0_0_5():
    older = TVM_EXAMPLE.replace('"0.0.5"', '"0.0.4"')
    assert structural_equal(fromtext(older), fromtext(TVM_EXAMPLE))


def test_graph_binding_is_shared_node_not_let():
    main = fromtext("def @main(%x: float32) { %0 = add(%x, %x); %1 = (%0, %0); %1 }")["main"]
    assert isinstance(main.body, Tuple)
    first, second = main.body.fields
    assert first is second and op_name(first) == "add"


def test_let_binds_a_new_variable_and_shadowing_sees_the_outer_one():
    main = fromtext("def @main(%x: float32) { let %x = %x + 1f; let %y: float32 = %x; %y }")["main"]
    outer = main.params[0]
    first = main.body
    assert isinstance(first, Let) and first.var is not outer
    assert first.value.args[0] is outer
    second = first.body
    assert isinstance(second, Let) and second.value is first.var
    assert second.var.type_annotation == TensorType((), "float32")
    assert second.body is second.var


def test_semicolon_sequence_is_let_of_underscore():
    body = fromtext("def @main(%x: float32) { %x; %x }")["main"].body
    assert isinstance(body, Let) and body.var.name_hint == "_"


def test_let_of_fn_may_call_itself():
    main = fromtext(
        "def @main(%n: int32) { let %f = fn (%i: int32) -> int32 {"
        " if (%i == 0) { 0 } else { %f(%i - 1) } }; %f(%n) }"
    )["main"]
    let = main.body
    recursive_call = let.value.body.false_branch
    assert recursive_call.op is let.var


def test_if_else_and_else_if_chain():
    main = fromtext(
        "def @main(%c: bool, %d: bool) { if (%c) { 1 } else if (%d) { 2 } else { 3 } }"
    )["main"]
    outer = main.body
    assert isinstance(outer, If) and outer.cond is main.params[0]
    assert isinstance(outer.false_branch, If)
    assert int(outer.false_branch.false_branch.data) == 3


def test_match_with_nested_constructor_tuple_variable_and_wildcard_patterns():
    mod = fromtext(
        LIST
        + """def @f(%l: List[int32], %p: (int32, int32)) -> int32 {
          %0 = match (%l) {
            Cons(%h, Cons(_, %t)) => %h,
            Cons(%h: int32, %t) => { %h },
            Nil => 0,
          };
          match? (%p) { (%a, _) => %a + %0 }
        }"""
    )
    body = mod["f"].body
    assert isinstance(body, Match) and not body.complete
    (tuple_clause,) = body.clauses
    assert isinstance(tuple_clause.lhs, PatternTuple)
    a_pattern, wildcard = tuple_clause.lhs.patterns
    assert isinstance(a_pattern, PatternVar) and isinstance(wildcard, PatternWildcard)
    assert tuple_clause.rhs.args[0] is a_pattern.var
    inner = tuple_clause.rhs.args[1]
    assert isinstance(inner, Match) and inner.complete
    nested = inner.clauses[0].lhs
    assert isinstance(nested, PatternConstructor) and nested.constructor.name_hint == "Cons"
    head, tail = nested.patterns
    assert isinstance(head, PatternVar) and inner.clauses[0].rhs is head.var
    assert isinstance(tail, PatternConstructor)
    assert isinstance(tail.patterns[0], PatternWildcard)
    annotated = inner.clauses[1].lhs.patterns[0]
    assert annotated.var.type_annotation == TensorType((), "int32")
    assert inner.clauses[2].lhs.patterns == ()


def test_match_on_a_tuple_of_values_takes_tuple_patterns():
    mod = fromtext(
        LIST
        + """def @f(%a: List[int32], %b: List[int32]) -> int32 {
          match (%a, %b) {
            (Cons(%x, _), Nil) => %x,
            (_, Cons(%y, Nil)) => %y,
            _ => 0,
          }
        }"""
    )
    body = mod["f"].body
    a, b = mod["f"].params
    assert isinstance(body, Match) and body.complete
    assert isinstance(body.data, Tuple) and body.data.fields == (a, b)
    first = body.clauses[0].lhs
    assert isinstance(first, PatternTuple)
    cons, nil = first.patterns
    assert cons.constructor.name_hint == "Cons" and isinstance(cons.patterns[0], PatternVar)
    assert nil.constructor.name_hint == "Nil" and nil.patterns == ()
    assert isinstance(body.clauses[2].lhs, PatternWildcard)


def test_match_on_one_parenthesized_value_and_without_a_space():
    mod = fromtext(LIST + "def @f(%a: List[int32]) { match(%a) { _ => 0 } }")
    assert mod["f"].body.data is mod["f"].params[0]


def test_bare_constructor_without_fields_is_that_constructor_applied():
    mod = fromtext(
        LIST + "type Option[A] { Some(A), None }\ntype nat { z, s(nat) }\n"
        "def @main() { (Nil, None, z, s(z), Nil(), Cons(1, Nil)) }"
    )
    nil, none, zero, one, nil_call, cons = mod["main"].body.fields
    for call, name in ((nil, "Nil"), (none, "None"), (zero, "z"), (nil_call, "Nil")):
        assert isinstance(call, Call) and call.args == ()
        assert isinstance(call.op, Constructor) and call.op.name_hint == name
    assert isinstance(one.args[0], Call) and one.args[0].op.name_hint == "z"
    assert isinstance(cons.args[1], Call) and cons.args[1].op.name_hint == "Nil"
    assert structural_equal(nil, nil_call)


def test_fn_before_a_constructor_name_is_the_constructor_as_a_function():
    mod = fromtext(LIST + "def @main() { (fn Nil, fn Cons, Cons) }")
    nil_value, cons_value, bare_cons = mod["main"].body.fields
    _, cons, nil = mod.get_type("List")
    assert nil_value is nil and cons_value is cons and bare_cons is cons


def test_type_definition_with_parameters_registers_constructors_with_tags():
    mod = fromtext("type Pair[A, B] { MkPair(A, B), Neither }\ntype Bit { Zero, One }")
    pair, mk, neither = mod.get_type("Pair")
    assert isinstance(pair, GlobalTypeVar) and pair.name_hint == "Pair"
    data = mod.get_type_data("Pair")
    a, b = data.type_vars
    assert mk.inputs == (a, b) and mk.belong_to is pair and neither.inputs == ()
    tags = [c.tag for c in mod.constructors]
    assert tags == [1, 2, 3, 4]


def test_globals_may_be_used_before_their_definition_and_types_after_use():
    mod = fromtext(
        "def @main() -> Box { @make(1) }\n"
        "def @make(%x: int32) -> Box { Wrap(%x) }\n"
        "type Box { Wrap(int32) }"
    )
    call = mod["main"].body
    assert isinstance(call.op, GlobalVar) and call.op is mod.get_global_var("make")
    assert isinstance(mod["make"].body.op, Constructor)


def test_fn_closure_with_type_params_return_type_and_attributes():
    expr = parse_expr('fn [A](%x: A, %y, Primitive=1, Name="f") -> A { %x }')
    assert isinstance(expr, Function)
    (tv,) = expr.type_params
    assert isinstance(tv, TypeVar) and expr.params[0].type_annotation is tv
    assert expr.ret_type is tv and expr.params[1].type_annotation is None
    assert dict(expr.attrs) == {"Primitive": 1, "Name": "f"}


def test_tuples_and_projection_on_variables_calls_and_chains():
    mod = fromtext(
        "def @f(%x: int32) -> (int32, (int32,)) { (%x, (%x,)) }\n"
        "def @main(%t: ((int32, int32), int32)) {"
        " (%t.0.1, @f(1).1, (), (%t.1,)) }"
    )
    body = mod["main"].body
    chained, on_call, empty, single = body.fields
    assert isinstance(chained, TupleGetItem) and chained.index == 1
    assert isinstance(chained.tuple_value, TupleGetItem) and chained.tuple_value.index == 0
    assert isinstance(on_call.tuple_value, Call) and on_call.index == 1
    assert isinstance(empty, Tuple) and empty.fields == ()
    assert isinstance(single, Tuple) and len(single.fields) == 1


def test_calls_of_globals_locals_constructors_and_dotted_operators():
    mod = fromtext(
        LIST + "def @id(%x: int32) { %x }\n"
        "def @main(%f: fn (int32) -> int32, %d: Tensor[(1, 4), float32],"
        " %w: Tensor[(3, 4), float32]) {"
        " (@id(1), %f(2), Cons(3, Nil()), Cons, nn.dense(%d, %w, units=3)) }"
    )
    glob, local, ctor, bare_ctor, dense = mod["main"].body.fields
    assert isinstance(glob.op, GlobalVar)
    assert isinstance(local.op, Var)
    assert isinstance(ctor.op, Constructor) and isinstance(ctor.args[1], Call)
    assert isinstance(bare_ctor, Constructor) and bare_ctor.name_hint == "Cons"
    assert op_name(dense) == "nn.dense" and dense.attrs["units"] == 3


def test_operator_attributes_are_normalized_by_the_schema():
    call = parse_expr("free_var %x: Tensor[(2, 3), float32]; sum(%x, axis=[1])")
    assert dict(call.attrs) == {"axis": (1,), "keepdims": False, "exclude": False}
    assert structural_equal(call, relay.sum(call.args[0], axis=[1]), map_free_vars=False)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("axis=[1, 2]", (1, 2)),
        ("axis=[]", ()),
        ("axis=None", None),
        ("axis=2", (2,)),
    ],
)
def test_attribute_lists_become_tuples(text, value):
    call = parse_expr(f"free_var %x: Tensor[(2, 3, 4), float32]; sum(%x, {text})")
    assert call.attrs["axis"] == value


def test_attribute_values_of_every_kind_on_functions():
    fn = parse_expr(
        'fn (%x, I=-3, F=2.5, E=1e-05, S="a\\"b\\n", T=True, N=None,'
        " L=[1, [2.5, [False]], []], P=(1, 2)) { %x }"
    )
    assert dict(fn.attrs) == {
        "I": -3,
        "F": 2.5,
        "E": 1e-05,
        "S": 'a"b\n',
        "T": True,
        "N": None,
        "L": (1, (2.5, (False,)), ()),
        "P": (1, 2),
    }
    assert type(fn.attrs["F"]) is float and type(fn.attrs["I"]) is int


def test_float_attributes_keep_double_precision():
    call = parse_expr("free_var %x: float32; clip(%x, a_min=0.1, a_max=1e300)")
    assert call.attrs["a_min"] == 0.1 and call.attrs["a_max"] == 1e300


def test_infix_precedence_and_associativity():
    expr = parse_expr(
        "free_var %a: float32; free_var %b: float32; free_var %c: float32; %a + %b * %c - %a / %b"
    )
    assert op_name(expr) == "subtract"
    lhs, rhs = expr.args
    assert op_name(lhs) == "add" and op_name(lhs.args[1]) == "multiply"
    assert op_name(rhs) == "divide"


@pytest.mark.parametrize(
    ("infix", "op"),
    [
        ("<", "less"),
        (">", "greater"),
        ("<=", "less_equal"),
        (">=", "greater_equal"),
        ("==", "equal"),
        ("!=", "not_equal"),
        ("+", "add"),
        ("-", "subtract"),
        ("*", "multiply"),
        ("/", "divide"),
    ],
)
def test_infix_operators_map_to_relay_operators(infix, op):
    expr = parse_expr(f"free_var %a: float32; free_var %b: float32; %a {infix} %b")
    assert op_name(expr) == op


def test_comparison_binds_looser_than_arithmetic_and_equality_loosest():
    expr = parse_expr("free_var %a: float32; free_var %b: float32; %a + 1f < %b == %a * 2f > %b")
    assert op_name(expr) == "equal"
    assert op_name(expr.args[0]) == "less" and op_name(expr.args[0].args[0]) == "add"
    assert op_name(expr.args[1]) == "greater"


def test_unary_minus_negates_expressions_but_folds_into_literals():
    expr = parse_expr("free_var %a: float32; (-%a, -1, - -2f, -%a.0)")
    neg_var, neg_lit, double, neg_proj = expr.fields
    assert op_name(neg_var) == "negative"
    assert isinstance(neg_lit, Constant) and neg_lit.data.dtype == np.int32
    assert int(neg_lit.data) == -1
    assert op_name(double) == "negative" and float(double.args[0].data) == -2.0
    assert op_name(neg_proj) == "negative" and isinstance(neg_proj.args[0], TupleGetItem)


@pytest.mark.parametrize(
    ("text", "dtype", "value"),
    [
        ("1", "int32", 1),
        ("-2147483648", "int32", -(2**31)),
        ("1.5", "float32", 1.5),
        ("1f", "float32", 1.0),
        ("-0.25f32", "float32", -0.25),
        ("2i64", "int64", 2),
        ("9223372036854775807i64", "int64", 2**63 - 1),
        ("-8i8", "int8", -8),
        ("300i16", "int16", 300),
        ("7i32", "int32", 7),
        ("255u8", "uint8", 255),
        ("1u16", "uint16", 1),
        ("4294967295u32", "uint32", 2**32 - 1),
        ("18446744073709551615u64", "uint64", 2**64 - 1),
        ("1f16", "float16", 1.0),
        ("6.5504e4f16", "float16", 65504.0),
        ("2.5f64", "float64", 2.5),
        ("1e-300f64", "float64", 1e-300),
        ("True", "bool", True),
        ("False", "bool", False),
    ],
)
def test_literals_have_the_dtype_of_their_suffix(text, dtype, value):
    const = parse_expr(text)
    assert isinstance(const, Constant)
    assert const.data.dtype.name == dtype and const.data.shape == ()
    assert const.data.item() == value


def test_negative_zero_literal_keeps_its_sign():
    const = parse_expr("-0f")
    assert np.signbit(const.data)


def test_float32_literal_is_correctly_rounded_from_decimal():
    # Halfway between two float32 values after rounding to float64 first (double rounding).
    const = parse_expr("1.00000005960464477539062500000001f")
    assert const.data == np.nextafter(np.float32(1), np.float32(2))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Tensor[(1, 2), float32]", TensorType((1, 2), "float32")),
        ("Tensor[(?, 10), float32]", TensorType((Any(), 10), "float32")),
        ("Tensor[(5), int64]", TensorType((5,), "int64")),
        ("Tensor[(5,), int64]", TensorType((5,), "int64")),
        ("Tensor[(), bool]", TensorType((), "bool")),
        ("float16", TensorType((), "float16")),
        ("(int32, float32)", TupleType([TensorType((), "int32"), TensorType((), "float32")])),
        ("(int32,)", TupleType([TensorType((), "int32")])),
        ("()", TupleType([])),
        ("(int32)", TensorType((), "int32")),
        (
            "fn (int32, float32) -> bool",
            FuncType([TensorType((), "int32"), TensorType((), "float32")], TensorType((), "bool")),
        ),
        ("fn () -> ()", FuncType([], TupleType([]))),
    ],
)
def test_types(text, expected):
    assert parse_type(text) == expected


def test_type_calls_type_variables_and_incomplete_types():
    mod = fromtext(
        LIST + "def @f[B](%x: List[B], %y: fn [C](C) -> List[C], %z: _, %w: List) { %x }"
    )
    x, y, z, w = mod["f"].params
    (b,) = mod["f"].type_params
    assert isinstance(x.type_annotation, TypeCall) and x.type_annotation.args == (b,)
    fn_type = y.type_annotation
    assert isinstance(fn_type, FuncType)
    (c,) = fn_type.type_params
    assert fn_type.arg_types == (c,) and fn_type.ret_type.args == (c,)
    assert isinstance(z.type_annotation, IncompleteType)
    assert w.type_annotation == mod.get_global_type_var("List")


def test_comments_are_ignored_and_block_comments_nest():
    mod = fromtext(
        "// leading comment\n"
        "def @main(/* x */ %x: float32) {\n"
        "  /* outer /* inner */ still comment */ %x // trailing\n"
        "}\n"
    )
    assert mod["main"].body is mod["main"].params[0]


def test_quoted_names_keep_any_characters():
    mod = fromtext('def @"my-func"(%"input.1": float32) { %"input.1" }')
    func = mod["my-func"]
    assert func.params[0].name_hint == "input.1" and func.body is func.params[0]


def test_meta_section_constants_are_decoded():
    text = (
        "def @main() { (meta[relay.Constant][0], meta[relay.Constant][1],"
        " meta[relay.Constant][0]) }\n"
        "#[metadata]\n"
        '{"relay.Constant": ['
        '{"dtype": "float32", "shape": [2], "data": "AACAPwAAAEA="},'
        '{"dtype": "bool", "shape": [1, 1], "data": "AQ=="}]}'
    )
    first, second, again = fromtext(text)["main"].body.fields
    np.testing.assert_array_equal(first.data, np.array([1.0, 2.0], dtype="float32"))
    assert second.data.dtype == np.bool_ and second.data.shape == (1, 1) and second.data.all()
    assert again is first


def test_init_meta_table_supplies_meta_references():
    weights = relay.const(np.ones((2, 2), dtype="float32"))
    mod = fromtext(
        "def @main() { meta[relay.Constant][0] }",
        init_meta_table={"relay.Constant": [weights]},
    )
    assert mod["main"].body is weights


def test_init_module_names_are_visible_and_the_module_is_not_changed():
    base = fromtext(LIST + "def @one() -> int32 { 1 }")
    mod = fromtext("def @main() { Cons(@one(), Nil()) }", init_module=base)
    assert sorted(g.name_hint for g in mod.get_global_vars()) == ["main", "one"]
    assert [g.name_hint for g in base.get_global_vars()] == ["one"]
    call = mod["main"].body
    assert call.op is base.get_type("List")[1]


def test_parse_expr_with_free_var_declarations():
    expr = parse_expr("free_var %x: Tensor[(2), float32];\nfree_var %y;\n%x + %y")
    x, y = expr.args
    assert x.type_annotation == TensorType((2,), "float32") and y.type_annotation is None


def test_spans_record_line_and_column():
    main = fromtext("def @main(%x: float32) {\n  %0 = negative(%x);\n  %0\n}")["main"]
    span = main.body.span
    assert (span.line, span.column) == (2, 16)
    assert main.params[0].span.line == 1


def test_relay_namespace_exports_the_parser():
    assert relay.fromtext is fromtext
    assert structural_equal(relay.parse(TVM_EXAMPLE), fromtext(TVM_EXAMPLE))
    assert issubclass(relay.RelaySyntaxError, SyntaxError)
