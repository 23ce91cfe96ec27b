"""The Relay text printer: TVM's graph style, attributes, names, literals, types, meta data."""

from __future__ import annotations

import numpy as np
import pytest

from compiler import relay
from compiler.ir.expr import Call, Clause, Let, PatternConstructor, PatternVar, PatternWildcard
from compiler.ir.module import IRModule
from compiler.ir.structural import structural_equal
from compiler.op.registry import get_op
from compiler.text.parser import fromtext, parse_expr
from compiler.text.printer import expr_to_text, module_to_text, type_to_text


def main_text(body: str, params: str = "") -> str:
    return f'#[version = "0.0.5"]\ndef @main({params}) {{\n{body}\n}}\n'


def test_tvm_example_prints_in_graph_style():
    a = relay.var("a", shape=(1, 2), dtype="uint8")
    b = relay.var("b", shape=(1, 2))
    c = relay.var("c", shape=(1, 2))
    mod = IRModule.from_expr(relay.Function([a, b, c], relay.cast(a, "float32") + b * c))
    assert mod.astext() == main_text(
        '  %0 = cast(%a, dtype="float32");\n  %1 = multiply(%b, %c);\n  add(%0, %1)',
        "%a: Tensor[(1, 2), uint8], %b: Tensor[(1, 2), float32], %c: Tensor[(1, 2), float32]",
    )
    assert str(mod) == mod.astext() == module_to_text(mod)


def test_attributes_print_only_when_not_default_in_schema_order():
    x = relay.var("x", shape=(2, 3))
    out_of_order = Call(get_op("sum"), [x], {"keepdims": True, "exclude": False, "axis": (1,)})
    expr = relay.Tuple([relay.sum(x), relay.sum(x, axis=[0]), out_of_order])
    text = expr_to_text(expr, show_free_vars=False)
    assert "%0 = sum(%x);" in text
    assert "%1 = sum(%x, axis=[0]);" in text
    assert "%2 = sum(%x, axis=[1], keepdims=True);" in text


def test_shared_subexpression_is_bound_once_and_reused():
    x = relay.var("x", "float32")
    shared = x + x
    mod = IRModule.from_expr(relay.Function([x], relay.Tuple([shared, shared])))
    assert mod.astext() == main_text("  %0 = add(%x, %x);\n  (%0, %0)", "%x: float32")
    body = fromtext(mod.astext())["main"].body
    assert body.fields[0] is body.fields[1]


def test_shared_node_used_in_both_branches_is_bound_before_the_if():
    c = relay.var("c", "bool")
    x = relay.var("x", "float32")
    shared = relay.exp(x)
    mod = IRModule.from_expr(relay.Function([c, x], relay.If(c, shared, relay.negative(shared))))
    assert mod.astext() == main_text(
        "  %0 = exp(%x);\n  if (%c) {\n    %0\n  } else {\n    negative(%0)\n  }",
        "%c: bool, %x: float32",
    )
    parsed = fromtext(mod.astext())["main"].body
    assert parsed.true_branch is parsed.false_branch.args[0]


def test_shared_node_using_a_branch_local_variable_stays_in_that_branch():
    c = relay.var("c", "bool")
    x = relay.var("x", "float32")
    v = relay.var("v", "float32")
    shared = v * v
    then = relay.Let(v, relay.exp(x), shared + shared)
    mod = IRModule.from_expr(relay.Function([c, x], relay.If(c, then, x)))
    text = mod.astext()
    assert text == main_text(
        "  if (%c) {\n"
        "    let %v: float32 = exp(%x);\n"
        "    %0 = multiply(%v, %v);\n"
        "    add(%0, %0)\n"
        "  } else {\n"
        "    %x\n"
        "  }",
        "%c: bool, %x: float32",
    )
    assert structural_equal(fromtext(text), mod)


def test_let_values_print_inline_and_nested_lets_in_parentheses():
    x = relay.var("x", "float32")
    y = relay.var("y")
    z = relay.var("z")
    inner = relay.Let(z, x, z)
    mod = IRModule.from_expr(relay.Function([x], relay.Let(y, inner, y + x)))
    assert mod.astext() == main_text(
        "  let %y = (\n    let %z = %x;\n    %z\n  );\n  add(%y, %x)", "%x: float32"
    )
    assert structural_equal(fromtext(mod.astext()), mod)


def test_two_variables_with_the_same_name_get_fresh_names():
    x1 = relay.var("x", "float32")
    x2 = relay.var("x", "float32")
    x3 = relay.var("x_1", "float32")
    func = relay.Function([x1, x2, x3], relay.Tuple([x2, x1, x3]))
    text = IRModule.from_expr(func).astext()
    assert "def @main(%x: float32, %x_1: float32, %x_1_1: float32)" in text
    assert "(%x_1, %x, %x_1_1)" in text
    assert structural_equal(fromtext(text)["main"], func)


def test_names_that_are_not_identifiers_are_quoted():
    x = relay.var("input.1", "float32")
    mod = IRModule({"my-func": relay.Function([x], x)})
    text = mod.astext()
    assert 'def @"my-func"(%"input.1": float32)' in text
    assert fromtext(text)["my-func"].params[0].name_hint == "input.1"


def test_temporaries_skip_numbers_taken_by_variables():
    zero = relay.var("0", "float32")
    func = relay.Function([zero], relay.exp(zero) + zero)
    text = IRModule.from_expr(func).astext()
    assert "%1 = exp(%0);" in text
    assert structural_equal(fromtext(text)["main"], func)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (np.int32(7), "7"),
        (np.int32(-3), "-3"),
        (np.int8(-128), "-128i8"),
        (np.int16(300), "300i16"),
        (np.int64(-(2**63)), "-9223372036854775808i64"),
        (np.uint8(255), "255u8"),
        (np.uint16(1), "1u16"),
        (np.uint32(2**32 - 1), "4294967295u32"),
        (np.uint64(2**64 - 1), "18446744073709551615u64"),
        (np.float32(1.0), "1f"),
        (np.float32(0.1), "0.1f"),
        (np.float32(-2.5), "-2.5f"),
        (np.float32(-0.0), "-0f"),
        (np.float32(1e-30), "1e-30f"),
        (np.float32(3.4028235e38), "3.4028235e38f"),
        (np.float16(1.0), "1f16"),
        (np.float16(65504), "65500f16"),  # shortest text that reads back as 65504
        (np.float64(0.1), "0.1f64"),
        (np.float64(1e300), "1e300f64"),
        (np.bool_(True), "True"),
        (np.bool_(False), "False"),
    ],
)
def test_every_scalar_literal_form_round_trips(value, text):
    const = relay.const(np.asarray(value))
    assert expr_to_text(const) == text
    back = parse_expr(text)
    assert back.data.dtype == const.data.dtype
    assert back.data.tobytes() == const.data.tobytes()


def test_tensor_and_non_finite_constants_go_to_the_meta_section():
    weights = relay.const(np.arange(6, dtype="float32").reshape(2, 3))
    nan = relay.const(np.float32("nan"))
    empty = relay.const(np.zeros((0, 4), dtype="int8"))
    func = relay.Function([], relay.Tuple([weights, nan, weights, empty]))
    text = IRModule.from_expr(func).astext()
    assert (
        "(meta[relay.Constant][0], meta[relay.Constant][1], meta[relay.Constant][0], "
        "meta[relay.Constant][2])" in text
    )
    meta = text[text.index("#[metadata]") :]
    assert '"dtype": "float32", "shape": [2, 3]' in meta
    assert '"dtype": "int8", "shape": [0, 4], "data": ""' in meta
    body = fromtext(text)["main"].body
    np.testing.assert_array_equal(body.fields[0].data, weights.data)
    assert np.isnan(body.fields[1].data) and body.fields[0] is body.fields[2]
    assert body.fields[3].data.shape == (0, 4)


def test_meta_section_can_be_omitted_for_display():
    mod = IRModule.from_expr(relay.Function([], relay.const(np.ones(3, dtype="float32"))))
    text = module_to_text(mod, show_meta_data=False)
    assert "meta[relay.Constant][0]" in text and "#[metadata]" not in text
    assert "meta data omitted" in text


def test_astext_takes_tvm_show_meta_data_on_modules_and_expressions():
    func = relay.Function([], relay.const(np.ones(3, dtype="float32")))
    mod = IRModule.from_expr(func)
    assert mod.astext(show_meta_data=False) == module_to_text(mod, show_meta_data=False)
    assert mod.astext() == module_to_text(mod) == str(mod)
    assert "#[metadata]" not in func.astext(show_meta_data=False)
    assert "#[metadata]" in func.astext()
    with pytest.raises(TypeError, match="annotate"):
        mod.astext(annotate=lambda expr: "")


def test_types_print_in_tvm_form():
    mod = fromtext(
        "type List[A] { Cons(A, List[A]), Nil }\n"
        "def @f[T](%a: Tensor[(?, 10), float32], %b: Tensor[(5,), int64], %c: (int32,),"
        " %d: (), %e: fn (T, bool) -> List[T], %g: _) -> T { %c.0; @f(%a, %b, %c, %d, %e, %g) }"
    )
    text = mod.astext()
    assert "type List[A] {\n  Cons(A, List[A]),\n  Nil,\n}\n" in text
    assert (
        "def @f[T](%a: Tensor[(?, 10), float32], %b: Tensor[(5), int64], %c: (int32,), "
        "%d: (), %e: fn (T, bool) -> List[T], %g: _) -> T {" in text
    )
    assert type_to_text(mod.get_type_data("List")).startswith("type List[A] {")
    assert str(relay.FuncType([relay.scalar_type("int32")], relay.TupleType([]))) == (
        "fn (int32) -> ()"
    )


def test_distinct_type_parameters_with_one_name_get_fresh_names():
    a1, a2 = relay.TypeVar("A"), relay.TypeVar("A")
    x = relay.var("x", a1)
    y = relay.var("y", a2)
    func = relay.Function([x, y], x, ret_type=a1, type_params=[a1, a2])
    text = IRModule.from_expr(func).astext()
    assert "def @main[A, A_1](%x: A, %y: A_1) -> A {" in text
    assert structural_equal(fromtext(text)["main"], func)


def test_expression_text_declares_free_variables_and_parses_back():
    x = relay.var("x", shape=(2,))
    y = relay.var("y")
    expr = relay.exp(x) + y
    text = str(expr)
    assert text == ("free_var %x: Tensor[(2), float32];\nfree_var %y;\n%0 = exp(%x);\nadd(%0, %y)")
    assert structural_equal(parse_expr(text), expr, map_free_vars=True)
    assert expr_to_text(expr, show_free_vars=False) == "%0 = exp(%x);\nadd(%0, %y)"


def test_patterns_and_clauses_print_on_their_own():
    mod = fromtext("type List[A] { Cons(A, List[A]), Nil }")
    _, cons, nil = mod.get_type("List")
    h = relay.var("h", "int32")
    pattern = PatternConstructor(cons, [PatternVar(h), PatternConstructor(nil)])
    assert str(pattern) == "Cons(%h: int32, Nil)"
    assert str(PatternWildcard()) == "_"
    clause = Clause(pattern, h)
    assert str(clause) == "Cons(%h: int32, Nil) => {\n  %h\n}"


def test_function_attributes_print_after_parameters():
    x = relay.var("x", "float32")
    func = relay.Function([x], x, attrs={"Primitive": 1, "Name": "f"})
    text = expr_to_text(func)
    assert text == 'fn (%x: float32, Primitive=1, Name="f") {\n  %x\n}'
    assert structural_equal(parse_expr(text), func)


def test_closure_called_in_place_is_bound_to_a_temporary():
    x = relay.var("x", "float32")
    p = relay.var("p", "float32")
    call = Call(relay.Function([p], relay.negative(p)), [x])
    text = expr_to_text(relay.Function([x], call))
    assert text == (
        "fn (%x: float32) {\n  %0 = fn (%p: float32) {\n    negative(%p)\n  };\n  %0(%x)\n}"
    )


def test_let_chain_of_ten_thousand_bindings_prints_and_parses():
    x = relay.var("x", "float32")
    body = x
    for index in reversed(range(10_000)):
        v = relay.var(f"v{index}", "float32")
        body = Let(v, x + relay.const(float(index)), body)
    mod = IRModule.from_expr(relay.Function([x], body))
    text = mod.astext()
    assert text.count("\n  let %v") == 10_000
    parsed = fromtext(text)
    assert structural_equal(parsed, mod)
    assert parsed.astext() == text


def test_ten_thousand_nested_calls_print_flat_in_graph_style():
    x = relay.var("x", shape=(2,))
    expr = x
    for _ in range(10_000):
        expr = relay.negative(expr)
    mod = IRModule.from_expr(relay.Function([x], expr))
    text = mod.astext()
    assert "  %9998 = negative(%9997);\n  negative(%9998)\n}" in text
    assert structural_equal(fromtext(text), mod)


def test_deeply_nested_ifs_print_and_parse_without_recursion():
    c = relay.var("c", "bool")
    x = relay.var("x", "float32")
    expr = x
    for _ in range(3_000):
        expr = relay.If(c, expr, x)
    mod = IRModule.from_expr(relay.Function([c, x], expr))
    text = mod.astext()
    parsed = fromtext(text)
    assert structural_equal(parsed, mod)
    assert parsed.astext() == text
