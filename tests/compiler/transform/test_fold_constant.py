"""FoldConstant: what folds (returns), what is left alone, and that meaning is preserved."""

from __future__ import annotations

import numpy as np
import pytest

from compiler import relay
from compiler.ir.expr import Constant, Tuple
from tests.compiler.transform.util import assert_results_match, assert_same, calls, parse

fold = relay.transform.FoldConstant()


# --- folds ---------------------------------------------------------------------------------------


def test_constant_arithmetic_folds_into_one_constant():
    before = parse(
        """
        def @main(%x: Tensor[(2), float32]) {
          %0 = add(1f, 2f);
          %1 = multiply(%0, 2f);
          multiply(%x, %1)
        }"""
    )
    after = fold(before)
    assert_same(after, "def @main(%x: Tensor[(2), float32]) { multiply(%x, 6f) }")
    assert_results_match(before, after, [np.array([1.5, -2.0], "float32")])


@pytest.mark.parametrize(
    ("text", "dtype", "value"),
    [
        ("add(250u8, 10u8)", "uint8", 4),  # wraps around like the run-time kernel
        ("add(1i8, 2i8)", "int8", 3),
        ("multiply(3i64, 4i64)", "int64", 12),
        ("divide(7, -2)", "int32", -3),  # integer division truncates toward zero
        ("add(1f16, 2f16)", "float16", 3.0),
        ('cast(1.75f, dtype="int16")', "int16", 1),
        ("less(1f, 2f)", "bool", True),
    ],
)
def test_folded_constant_keeps_the_operators_result_dtype(text, dtype, value):
    after = fold(parse(f"def @main() {{ {text} }}"))
    body = after["main"].body
    assert isinstance(body, Constant)
    assert body.data.dtype == np.dtype(dtype) and body.data.shape == ()
    assert body.data.item() == value


def test_folded_constant_keeps_the_broadcast_shape():
    c = relay.const(np.arange(6, dtype="float64").reshape(2, 3))
    row = relay.const(np.array([10.0, 20.0, 30.0], "float64"))
    mod = relay.IRModule.from_expr(relay.Function([], relay.add(c, row)))
    body = fold(mod)["main"].body
    assert isinstance(body, Constant)
    assert body.data.dtype == np.float64 and body.data.shape == (2, 3)
    np.testing.assert_array_equal(body.data, c.data + row.data)


def test_reductions_and_shape_operators_fold():
    c = relay.const(np.arange(12, dtype="int32").reshape(3, 4))
    expr = relay.sum(relay.transpose(relay.reshape(c, (4, 3))), axis=1, keepdims=True)
    body = fold(relay.IRModule.from_expr(relay.Function([], expr)))["main"].body
    assert isinstance(body, Constant)
    want = np.arange(12, dtype="int32").reshape(4, 3).T.sum(axis=1, keepdims=True)
    assert body.data.dtype == np.int32 and body.data.shape == (3, 1)
    np.testing.assert_array_equal(body.data, want)


def test_let_bound_constants_are_substituted_and_their_bindings_removed():
    before = parse(
        """
        def @main(%x: Tensor[(2), float32]) {
          let %a = add(1f, 1f);
          let %b = multiply(%a, 3f);
          let %y = add(%x, %b);
          multiply(%y, %a)
        }"""
    )
    after = fold(before)
    assert_same(
        after,
        """
        def @main(%x: Tensor[(2), float32]) {
          let %y = add(%x, 6f);
          multiply(%y, 2f)
        }""",
    )
    assert_results_match(before, after, [np.array([0.5, 4.0], "float32")])


def test_constant_captured_by_a_local_function_is_substituted_inside_it():
    before = parse(
        """
        def @main(%x: Tensor[(), float32]) {
          let %c = add(1f, 1f);
          let %f = fn (%y: Tensor[(), float32]) { multiply(%y, %c) };
          %f(%x)
        }"""
    )
    after = fold(before)
    assert_same(
        after,
        """
        def @main(%x: Tensor[(), float32]) {
          let %f = fn (%y: Tensor[(), float32]) { multiply(%y, 2f) };
          %f(%x)
        }""",
    )
    assert_results_match(before, after, [np.array(3.0, "float32")])


def test_projection_of_a_constant_tuple_folds():
    before = parse(
        """
        def @main(%x: Tensor[(), float32]) {
          let %t = (1f, add(2f, 3f));
          add(%t.1, %x)
        }"""
    )
    after = fold(before)
    assert_same(after, "def @main(%x: Tensor[(), float32]) { add(5f, %x) }")
    assert_results_match(before, after, [np.array(1.0, "float32")])


def test_operator_with_a_tuple_argument_folds():
    a = relay.const(np.array([1, 2], "int32"))
    b = relay.const(np.array([3], "int32"))
    mod = relay.IRModule.from_expr(relay.Function([], relay.concatenate([a, relay.add(b, b)])))
    body = fold(mod)["main"].body
    assert isinstance(body, Constant)
    np.testing.assert_array_equal(body.data, np.array([1, 2, 6], "int32"))


def test_operator_with_a_tuple_result_folds_to_a_tuple_of_constants():
    c = relay.const(np.arange(6, dtype="float32"))
    mod = relay.IRModule.from_expr(relay.Function([], relay.split(c, 3)))
    body = fold(mod)["main"].body
    assert isinstance(body, Tuple) and len(body.fields) == 3
    for i, field in enumerate(body.fields):
        assert isinstance(field, Constant)
        np.testing.assert_array_equal(field.data, np.arange(6, dtype="float32")[2 * i : 2 * i + 2])


def test_projection_of_a_folded_tuple_result_folds():
    c = relay.const(np.arange(4, dtype="float32"))
    x = relay.var("x", shape=(2,))
    before = relay.IRModule.from_expr(relay.Function([x], relay.add(x, relay.split(c, 2)[1])))
    after = fold(before)
    (const,) = [a for a in after["main"].body.args if isinstance(a, Constant)]
    np.testing.assert_array_equal(const.data, np.array([2, 3], "float32"))
    assert_results_match(before, after, [np.array([1, 1], "float32")])


def test_if_with_a_constant_condition_becomes_the_branch_taken():
    before = parse(
        """
        def @main(%x: Tensor[(), float32]) {
          if (less(1f, 2f)) { %x } else { negative(%x) }
        }"""
    )
    assert_same(fold(before), "def @main(%x: Tensor[(), float32]) { %x }")
    other = parse(
        """
        def @main(%x: Tensor[(), float32]) {
          if (greater(1f, 2f)) { %x } else { negative(%x) }
        }"""
    )
    assert_same(fold(other), "def @main(%x: Tensor[(), float32]) { negative(%x) }")


def test_every_function_of_the_module_is_folded():
    before = parse(
        """
        def @helper(%y: Tensor[(), int32]) { add(%y, add(1, 2)) }
        def @main(%x: Tensor[(), int32]) { @helper(multiply(%x, subtract(5, 3))) }"""
    )
    after = fold(before)
    assert_same(
        after,
        """
        def @helper(%y: Tensor[(), int32]) { add(%y, 3) }
        def @main(%x: Tensor[(), int32]) { @helper(multiply(%x, 2)) }""",
    )
    assert_results_match(before, after, [np.array(7, "int32")])


# --- left alone ----------------------------------------------------------------------------------


def test_calls_of_functions_with_constant_arguments_are_not_evaluated():
    text = """
        def @g(%a: Tensor[(), float32]) { add(%a, 1f) }
        def @main() {
          let %f = fn (%b: Tensor[(), float32]) { multiply(%b, 2f) };
          (@g(1f), %f(2f))
        }"""
    assert_same(fold(parse(text)), text)


def test_function_parameters_are_not_constants():
    text = "def @main(%x: Tensor[(), float32]) { add(%x, 1f) }"
    assert_same(fold(parse(text)), text)


def test_constructor_calls_are_not_folded():
    mod = relay.IRModule()
    prelude = relay.Prelude(mod)
    cons, nil = prelude.get_type("List")[1:3]
    body = relay.Call(cons, [relay.add(relay.const(1), relay.const(1)), relay.Call(nil, [])])
    mod["main"] = relay.Function([], body)
    after = fold(mod)
    out = after["main"].body
    assert out.op is cons and isinstance(out.args[0], Constant) and out.args[0].data == 2
    assert out.args[1].op is nil


@pytest.mark.parametrize(
    "text",
    [
        'zeros(shape=[2, 3], dtype="float32")',
        'ones(shape=[4], dtype="int32")',
        'full(1f, shape=[2, 2], dtype="float32")',
    ],
)
def test_creation_operators_are_not_materialized(text):
    before = parse(f"def @main() {{ {text} }}")
    assert_same(fold(before), before)


def test_failing_evaluation_is_left_for_run_time():
    text = "def @main() { divide(1, 0) }"
    assert_same(fold(parse(text)), text)


def test_ill_typed_constant_call_is_left_for_the_type_checker():
    mod = relay.IRModule.from_expr(
        relay.Function([], relay.Call(relay.op.get_op("add"), [relay.const(1.0), relay.const(1)]))
    )
    after = fold(mod)
    assert after["main"].body.op.name == "add" and len(calls(after["main"])) == 1


def test_operators_outside_the_registry_are_not_evaluated():
    unknown = relay.Op("test.effectful")
    mod = relay.IRModule.from_expr(relay.Function([], relay.Call(unknown, [relay.const(1.0)])))
    after = fold(mod)
    assert after["main"].body.op is unknown


def test_primitive_function_bodies_are_not_touched():
    a = relay.var("a", shape=())
    inner = relay.add(a, relay.add(relay.const(1.0), relay.const(2.0)))
    prim = relay.Function([a], inner, attrs={"Primitive": 1})
    x = relay.var("x", shape=())
    mod = relay.IRModule.from_expr(relay.Function([x], relay.Call(prim, [x])))
    after = fold(mod)
    assert after["main"].body.op is prim


def test_input_module_is_not_modified():
    before = parse(
        """
        def @main(%x: Tensor[(2), float32]) {
          let %a = add(1f, 1f);
          multiply(%x, %a)
        }"""
    )
    text = before.astext()
    body = before["main"].body
    after = fold(before)
    assert before.astext() == text and before["main"].body is body
    assert after is not before


def test_a_10000_deep_let_chain_folds_without_recursion():
    names = [relay.var(f"v{i}") for i in range(10_000)]
    body: relay.Expr = names[-1]
    for i in reversed(range(10_000)):
        prev = names[i - 1] if i else relay.const(0)
        body = relay.Let(names[i], relay.add(prev, relay.const(1)), body)
    mod = relay.IRModule.from_expr(relay.Function([], body))
    out = fold(mod)["main"].body
    assert isinstance(out, Constant) and out.data.item() == 10_000
    assert out.data.dtype == np.int32


def test_folding_preserves_results_of_a_mixed_program():
    before = parse(
        """
        def @main(%x: Tensor[(2, 3), float32], %flag: bool) {
          let %scale = exp(0f);
          let %w = multiply(%x, add(%scale, 1f));
          if (%flag) { sum(%w, axis=[1]) } else { max(%w, axis=[1]) }
        }"""
    )
    after = fold(before)
    assert "exp" not in after.astext()
    x = np.arange(6, dtype="float32").reshape(2, 3) - 2.5
    assert_results_match(before, after, [x, True])
    assert_results_match(before, after, [x, False])
