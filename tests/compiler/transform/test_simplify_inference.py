"""SimplifyInference: normalization and dropout become arithmetic with the same results."""

from __future__ import annotations

import numpy as np
import pytest

from compiler import relay
from tests.compiler.transform.util import (
    assert_results_match,
    assert_same,
    let_depth,
    op_names,
    parse,
)

simplify = relay.transform.SimplifyInference()
dce = relay.transform.DeadCodeElimination()

NORM_OPS = {"nn.batch_norm", "nn.dropout", "nn.layer_norm", "nn.group_norm"}
RNG = np.random.default_rng(7)


def _data(shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


def _positive(shape, dtype="float32"):
    return (RNG.random(shape) + 0.5).astype(dtype)


def _bn_module(shape, axis, center=True, scale=True, dtype="float32"):
    channels = shape[axis]
    x = relay.var("x", shape=shape, dtype=dtype)
    vecs = [relay.var(n, shape=(channels,), dtype=dtype) for n in ("g", "b", "m", "v")]
    bn = relay.nn.batch_norm(x, *vecs, axis=axis, center=center, scale=scale)
    mod = relay.IRModule.from_expr(relay.Function([x, *vecs], bn[0]))
    args = [_data(shape, dtype), _data(channels, dtype), _data(channels, dtype)]
    args += [_data(channels, dtype), _positive(channels, dtype)]
    return mod, args


# --- batch_norm ----------------------------------------------------------------------------------

BN_PARAMS = (
    "%x: Tensor[(2, 3, 4), float32], %g: Tensor[(3), float32], %b: Tensor[(3), float32], "
    "%m: Tensor[(3), float32], %v: Tensor[(3), float32]"
)


def test_batch_norm_output_becomes_a_scale_and_a_shift_along_the_axis():
    before = parse(f"def @main({BN_PARAMS}) {{ %0 = nn.batch_norm(%x, %g, %b, %m, %v); %0.0 }}")
    after = simplify(before)
    assert_same(
        after,
        f"""
        def @main({BN_PARAMS}) {{
          %0 = divide(1f, sqrt(add(%v, 1e-05f)));
          %1 = multiply(%0, %g);
          %2 = multiply(%x, expand_dims(%1, axis=1));
          %3 = add(multiply(negative(%m), %1), %b);
          add(%2, expand_dims(%3, axis=1))
        }}""",
    )


def test_batch_norm_without_center_and_scale_leaves_out_beta_and_gamma():
    before = parse(
        f"def @main({BN_PARAMS}) {{"
        " %0 = nn.batch_norm(%x, %g, %b, %m, %v, axis=1, epsilon=0.25f, center=False,"
        " scale=False); %0.0 }"
    )
    after = simplify(before)
    assert_same(
        after,
        f"""
        def @main({BN_PARAMS}) {{
          %0 = divide(1f, sqrt(add(%v, 0.25f)));
          %1 = multiply(%x, expand_dims(%0, axis=1));
          add(%1, expand_dims(multiply(negative(%m), %0), axis=1))
        }}""",
    )


@pytest.mark.parametrize(
    ("shape", "axis"),
    [((2, 3, 4, 5), 1), ((2, 3, 4), -1), ((6,), 0), ((5, 2), 0), ((2, 3, 4, 5), 3)],
)
@pytest.mark.parametrize(("center", "scale"), [(True, True), (False, True), (True, False)])
def test_batch_norm_rewrite_matches_the_operator(shape, axis, center, scale):
    before, args = _bn_module(shape, axis, center, scale)
    after = simplify(before)
    assert "nn.batch_norm" not in op_names(after)
    assert_results_match(before, after, args)


@pytest.mark.parametrize("dtype", ["float64", "float16"])
def test_batch_norm_rewrite_keeps_the_data_dtype(dtype):
    before, args = _bn_module((2, 3, 2), 1, dtype=dtype)
    after = simplify(before)
    assert_results_match(before, after, args, rtol=1e-2 if dtype == "float16" else 1e-10)


def test_let_bound_batch_norm_fields_are_all_rewritten_and_the_call_becomes_dead():
    before = parse(
        f"""
        def @main({BN_PARAMS}) {{
          let %t = nn.batch_norm(%x, %g, %b, %m, %v);
          let %y = %t.0;
          (%y, %t.1, %t.2)
        }}"""
    )
    after = dce(simplify(before))
    assert "nn.batch_norm" not in op_names(after)
    args = [_data((2, 3, 4)), _data(3), _data(3), _data(3), _positive(3)]
    assert_results_match(before, after, args)


def test_batch_norm_inside_local_functions_and_branches_is_rewritten():
    before = parse(
        f"""
        def @main({BN_PARAMS}, %c: bool) {{
          let %f = fn (%z: Tensor[(2, 3, 4), float32]) {{
            %0 = nn.batch_norm(%z, %g, %b, %m, %v);
            %0.0
          }};
          if (%c) {{ %f(%x) }} else {{ %1 = nn.batch_norm(%x, %g, %b, %m, %v); %1.0 }}
        }}"""
    )
    after = simplify(before)
    assert "nn.batch_norm" not in op_names(after)
    args = [_data((2, 3, 4)), _data(3), _data(3), _data(3), _positive(3)]
    assert_results_match(before, after, [*args, True])
    assert_results_match(before, after, [*args, False])


# --- dropout -------------------------------------------------------------------------------------


def test_dropout_output_becomes_its_input_and_its_mask_ones():
    before = parse(
        "def @main(%x: Tensor[(2, 3), float32]) { %0 = nn.dropout(%x, rate=0.3f); (%0.0, %0.1) }"
    )
    after = simplify(before)
    assert_same(after, "def @main(%x: Tensor[(2, 3), float32]) { (%x, ones_like(%x)) }")
    assert_results_match(before, after, [_data((2, 3))])


def test_builder_dropout_chain_disappears():
    x = relay.var("x", shape=(4,))
    expr = relay.nn.dropout(relay.nn.relu(relay.nn.dropout(x, 0.5)), 0.1)
    before = relay.IRModule.from_expr(relay.Function([x], expr))
    after = simplify(before)
    assert_same(after, "def @main(%x: Tensor[(4), float32]) { nn.relu(%x) }")


# --- layer_norm and group_norm -------------------------------------------------------------------


def test_layer_norm_becomes_mean_and_variance_arithmetic():
    params = "%x: Tensor[(2, 5), float32], %g: Tensor[(5), float32], %b: Tensor[(5), float32]"
    before = parse(f"def @main({params}) {{ nn.layer_norm(%x, %g, %b) }}")
    after = simplify(before)
    assert_same(
        after,
        f"""
        def @main({params}) {{
          %0 = subtract(%x, mean(%x, axis=[1], keepdims=True));
          %1 = mean(multiply(%0, %0), axis=[1], keepdims=True);
          %2 = divide(%0, sqrt(add(%1, 1e-05f)));
          add(multiply(%2, %g), %b)
        }}""",
    )


@pytest.mark.parametrize(("shape", "axis"), [((2, 5), -1), ((2, 3, 4), 1), ((4, 2, 3), 0)])
@pytest.mark.parametrize(("center", "scale"), [(True, True), (False, False)])
def test_layer_norm_rewrite_matches_the_operator(shape, axis, center, scale):
    x = relay.var("x", shape=shape)
    g, b = relay.var("g", shape=(shape[axis],)), relay.var("b", shape=(shape[axis],))
    expr = relay.nn.layer_norm(x, g, b, axis=axis, epsilon=1e-3, center=center, scale=scale)
    before = relay.IRModule.from_expr(relay.Function([x, g, b], expr))
    after = simplify(before)
    assert "nn.layer_norm" not in op_names(after)
    assert_results_match(before, after, [_data(shape), _data(shape[axis]), _data(shape[axis])])


def test_kept_norms_stay_operators_and_the_rest_still_become_arithmetic():
    params = "%x: Tensor[(2, 4), float32], %g: Tensor[(4), float32], %b: Tensor[(4), float32]"
    before = parse(
        f"def @main({params}) {{ add(nn.layer_norm(%x, %g, %b), nn.group_norm(%x, %g, %b, "
        "num_groups=2)) }"
    )
    after = relay.transform.SimplifyInference(keep=["nn.layer_norm"])(before)
    names = op_names(after)
    assert "nn.layer_norm" in names and "nn.group_norm" not in names
    args = [_data((2, 4)), _data(4), _data(4)]
    assert_results_match(before, after, args)
    # Keeping only what is there leaves the module as it was.
    only = parse(f"def @main({params}) {{ nn.layer_norm(%x, %g, %b) }}")
    assert_same(relay.transform.SimplifyInference(keep=["nn.layer_norm"])(only), only)


def test_keeping_an_operator_the_pass_does_not_rewrite_is_an_error():
    mod = parse("def @main(%x: Tensor[(4), float32]) { nn.relu(%x) }")
    message = "can keep only nn.layer_norm, nn.group_norm, not nn.relu"
    with pytest.raises(ValueError, match=message):
        relay.transform.SimplifyInference(keep=["nn.relu"])(mod)


@pytest.mark.parametrize(
    ("shape", "groups", "axis"), [((2, 6, 3, 2), 3, 1), ((2, 4), 2, 1), ((3, 2, 8), 4, -1)]
)
def test_group_norm_rewrite_matches_the_operator(shape, groups, axis):
    channels = shape[axis]
    x = relay.var("x", shape=shape)
    g, b = relay.var("g", shape=(channels,)), relay.var("b", shape=(channels,))
    expr = relay.nn.group_norm(x, g, b, num_groups=groups, axis=axis)
    before = relay.IRModule.from_expr(relay.Function([x, g, b], expr))
    after = simplify(before)
    assert "nn.group_norm" not in op_names(after)
    assert_results_match(before, after, [_data(shape), _data(channels), _data(channels)])


def test_group_norm_with_run_time_dimensions_reshapes_with_special_values():
    x = relay.var("x", shape=(relay.Any(), 6, relay.Any()))
    g, b = relay.var("g", shape=(6,)), relay.var("b", shape=(6,))
    expr = relay.nn.group_norm(x, g, b, num_groups=2, axis=1, center=False)
    before = relay.IRModule.from_expr(relay.Function([x, g, b], expr))
    after = simplify(before)
    text = after.astext()
    assert "nn.group_norm" not in text
    assert "newshape=[0, -4, 2, -1, -2]" in text and "newshape=[0, -3, -2]" in text
    for shape in [(1, 6, 5), (3, 6, 2)]:
        assert_results_match(before, after, [_data(shape), _data(6), _data(6)])


# --- module-level behaviour ----------------------------------------------------------------------


def test_module_without_these_operators_is_returned_without_type_checking():
    before = parse("def @main(%x: Tensor[(2), float32]) { exp(%x) }")
    after = simplify(before)
    assert after is not before
    assert after["main"] is before["main"]


def test_input_module_is_not_modified():
    before = parse(f"def @main({BN_PARAMS}) {{ %0 = nn.batch_norm(%x, %g, %b, %m, %v); %0.0 }}")
    text = before.astext()
    simplify(before)
    assert before.astext() == text


def test_a_10000_deep_let_chain_of_dropouts_simplifies_without_recursion():
    x = relay.var("x", shape=(2,))
    pairs = 5_000
    tuples = [relay.var(f"t{i}") for i in range(pairs)]
    outs = [relay.var(f"y{i}") for i in range(pairs)]
    body: relay.Expr = outs[-1]
    for i in reversed(range(pairs)):
        prev = outs[i - 1] if i else x
        body = relay.Let(outs[i], relay.TupleGetItem(tuples[i], 0), body)
        body = relay.Let(tuples[i], relay.nn.dropout_raw(prev), body)
    before = relay.IRModule.from_expr(relay.Function([x], body))
    after = relay.transform.DeadCodeElimination(inline_once=True)(simplify(before))
    assert let_depth(after["main"]) == 0
    assert_same(after, "def @main(%x: Tensor[(2), float32]) { %x }")
