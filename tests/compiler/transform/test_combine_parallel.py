"""CombineParallelDense, CombineParallelConv2D and CombineParallelBatchMatmul: dense layers
(convolutions, batched products) with their own weights reading one input become one such
call, with the joined bias add (from ``nn.bias_add`` or an imported layer's ``add`` of a
constant), and slices, with the same results; the ones they cannot join stay; TVM's
signatures and defaults (3 branches), and a branch count below 2 refused by name."""

from __future__ import annotations

import numpy as np
import pytest

import vm
from compiler import relay
from tests.compiler.transform.util import assert_results_match, assert_same, calls

# relay.vm.compile's count: two projections are joined.
combine = relay.transform.CombineParallelDense(min_num_branches=2)
RNG = np.random.default_rng(41)


def array(*shape: int, dtype: str = "float32") -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def sliced(whole: relay.Expr, begin: int, end: int, axis: int = 1) -> relay.Expr:
    return relay.strided_slice(whole, begin=[begin], end=[end], strides=[1], axes=[axis])


def projections(
    units: tuple = (4, 4, 6), bias: bool = True, shape: tuple = (3, 5)
) -> tuple[relay.IRModule, list[np.ndarray], list[np.ndarray]]:
    """``main(x) = (x W0^T + b0, x W1^T + b1, ...)``: an attention block's projections."""
    x = relay.var("x", shape=shape)
    weights = [array(u, shape[-1]) for u in units]
    biases = [array(u) for u in units]
    outs = []
    for w, b in zip(weights, biases):
        out = relay.nn.dense(x, relay.const(w))
        outs.append(relay.nn.bias_add(out, relay.const(b), axis=-1) if bias else out)
    return relay.IRModule.from_expr(relay.Function([x], relay.Tuple(outs))), weights, biases


# ---- returns: rewritten ------------------------------------------------------------------------


def test_three_projections_with_biases_become_one_dense_layer_and_slices() -> None:
    before, weights, biases = projections()
    after = combine(before)
    x = relay.var("x", shape=(3, 5))
    whole = relay.nn.bias_add(
        relay.nn.dense(x, relay.const(np.concatenate(weights))),
        relay.const(np.concatenate(biases)),
        axis=-1,
    )
    expected = relay.Function(
        [x], relay.Tuple([sliced(whole, 0, 4), sliced(whole, 4, 8), sliced(whole, 8, 14)])
    )
    assert_same(after, relay.IRModule.from_expr(expected))
    assert_results_match(before, after, [array(3, 5)])


def test_projections_without_biases_become_one_dense_layer_and_slices() -> None:
    before, weights, _ = projections(units=(2, 3), bias=False)
    after = combine(before)
    x = relay.var("x", shape=(3, 5))
    whole = relay.nn.dense(x, relay.const(np.concatenate(weights)))
    expected = relay.Function([x], relay.Tuple([sliced(whole, 0, 2), sliced(whole, 2, 5)]))
    assert_same(after, relay.IRModule.from_expr(expected))
    assert_results_match(before, after, [array(3, 5)])


def test_batched_data_of_three_axes_is_sliced_on_the_last() -> None:
    before, _, _ = projections(shape=(2, 3, 5))
    after = combine(before)
    assert len(calls(after["main"], "nn.dense")) == 1
    slices = calls(after["main"], "strided_slice")
    assert len(slices) == 3 and all(list(s.attrs["axes"]) == [2] for s in slices)
    assert_results_match(before, after, [array(2, 3, 5)])


def test_let_bound_projections_are_joined_and_their_biases_too() -> None:
    x = relay.var("x", shape=(3, 5))
    w, b = [array(4, 5) for _ in range(2)], [array(4) for _ in range(2)]
    d0, d1, y0, y1 = (relay.var(n) for n in ("d0", "d1", "y0", "y1"))
    body = relay.Let(
        d0,
        relay.nn.dense(x, relay.const(w[0])),
        relay.Let(
            y0,
            relay.nn.bias_add(d0, relay.const(b[0])),
            relay.Let(
                d1,
                relay.nn.dense(x, relay.const(w[1])),
                relay.Let(y1, relay.nn.bias_add(d1, relay.const(b[1])), relay.Tuple([y0, y1])),
            ),
        ),
    )
    before = relay.IRModule.from_expr(relay.Function([x], body))
    after = relay.transform.DeadCodeElimination()(combine(before))
    assert len(calls(after["main"], "nn.dense")) == 1
    assert len(calls(after["main"], "nn.bias_add")) == 1
    assert_results_match(before, after, [array(3, 5)])


def test_a_projection_used_elsewhere_too_keeps_its_own_bias_add() -> None:
    x = relay.var("x", shape=(3, 5))
    shared = relay.nn.dense(x, relay.const(array(4, 5)))
    other = relay.nn.dense(x, relay.const(array(4, 5)))
    body = relay.Tuple([relay.nn.bias_add(shared, relay.const(array(4))), relay.exp(shared), other])
    before = relay.IRModule.from_expr(relay.Function([x], body))
    after = combine(before)
    assert len(calls(after["main"], "nn.dense")) == 1
    assert len(calls(after["main"], "nn.bias_add")) == 1  # the shared one's, on its slice
    assert_results_match(before, after, [array(3, 5)])


def test_an_imported_linear_layers_add_of_a_bias_joins_as_a_bias_add() -> None:
    # ONNX's MatMul + Add: the constant on either side, 1-D or with leading axes of 1.
    x = relay.var("x", shape=(2, 3, 5))
    weights, biases = [array(4, 5) for _ in range(3)], [array(4) for _ in range(3)]
    dense = [relay.nn.dense(x, relay.const(w)) for w in weights]
    outs = [
        relay.add(dense[0], relay.const(biases[0])),
        relay.add(relay.const(biases[1].reshape(1, 4)), dense[1]),
        relay.add(dense[2], relay.const(biases[2].reshape(1, 1, 4))),
    ]
    before = relay.IRModule.from_expr(relay.Function([x], relay.Tuple(outs)))
    after = combine(before)
    assert len(calls(after["main"], "nn.dense")) == 1
    (joined,) = calls(after["main"], "nn.bias_add")
    np.testing.assert_array_equal(joined.args[1].data, np.concatenate(biases))
    assert not calls(after["main"], "add")
    assert_results_match(before, after, [array(2, 3, 5)])


def test_an_add_that_broadcasts_beyond_the_last_axis_stays_after_its_slice() -> None:
    # A constant over the rows (3, 1), and one that adds an axis (1, 1, 4) to a 2-D product:
    # neither is a bias along the units; the products still join, the adds read the slices.
    x = relay.var("x", shape=(3, 5))
    dense = [relay.nn.dense(x, relay.const(array(4, 5))) for _ in range(2)]
    outs = [
        relay.add(dense[0], relay.const(array(3, 1))),
        relay.add(dense[1], relay.const(array(1, 1, 4))),
    ]
    before = relay.IRModule.from_expr(relay.Function([x], relay.Tuple(outs)))
    after = combine(before)
    assert len(calls(after["main"], "nn.dense")) == 1
    assert not calls(after["main"], "nn.bias_add")
    assert len(calls(after["main"], "add")) == 2
    assert_results_match(before, after, [array(3, 5)])


def test_biased_and_unbiased_projections_form_separate_groups() -> None:
    x = relay.var("x", shape=(3, 5))
    outs = [relay.nn.bias_add(relay.nn.dense(x, relay.const(array(4, 5))), relay.const(array(4)))]
    outs.append(
        relay.nn.bias_add(relay.nn.dense(x, relay.const(array(2, 5))), relay.const(array(2)))
    )
    outs.append(relay.nn.dense(x, relay.const(array(3, 5))))
    before = relay.IRModule.from_expr(relay.Function([x], relay.Tuple(outs)))
    after = combine(before)
    products = calls(after["main"], "nn.dense")
    assert sorted(p.args[1].data.shape[0] for p in products) == [3, 6]
    assert_results_match(before, after, [array(3, 5)])


@pytest.mark.parametrize("opt_level", [2, 3])
def test_the_vm_runs_one_product_for_the_projections(opt_level: int) -> None:
    before, _, _ = projections(units=(64, 64, 64), shape=(8, 64))
    with relay.transform.PassContext(opt_level=opt_level):
        exe = relay.vm.compile(before)
    products = [p.name for p in exe.primitives if "dense" in p.name]
    assert len(products) == 1, products
    x = array(8, 64)
    want = relay.create_executor("debug", before).evaluate()(x)
    got = vm.VirtualMachine(exe, vm.cpu()).invoke("main", x)
    for w, g in zip(want, got):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-4)


# ---- returns: left alone -----------------------------------------------------------------------


def _left_alone(before: relay.IRModule, args: list[np.ndarray], products: int) -> None:
    after = combine(before)
    assert len(calls(after["main"], "nn.dense")) == products
    assert not calls(after["main"], "strided_slice")
    assert_results_match(before, after, args)


def test_a_single_projection_stays() -> None:
    before, _, _ = projections(units=(4,))
    _left_alone(before, [array(3, 5)], 1)


def test_projections_of_different_inputs_stay() -> None:
    x, y = relay.var("x", shape=(3, 5)), relay.var("y", shape=(3, 5))
    body = relay.Tuple(
        [relay.nn.dense(x, relay.const(array(4, 5))), relay.nn.dense(y, relay.const(array(4, 5)))]
    )
    _left_alone(relay.IRModule.from_expr(relay.Function([x, y], body)), [array(3, 5)] * 2, 2)


def test_a_weight_that_is_not_constant_stays_apart() -> None:
    x, w = relay.var("x", shape=(3, 5)), relay.var("w", shape=(4, 5))
    body = relay.Tuple([relay.nn.dense(x, relay.const(array(4, 5))), relay.nn.dense(x, w)])
    _left_alone(
        relay.IRModule.from_expr(relay.Function([x, w], body)), [array(3, 5), array(4, 5)], 2
    )


def test_projections_of_different_out_dtypes_stay() -> None:
    x = relay.var("x", shape=(3, 5), dtype="int8")
    w = [relay.const(RNG.integers(-9, 9, (4, 5)).astype("int8")) for _ in range(2)]
    body = relay.Tuple([relay.nn.dense(x, w[0], out_dtype="int32"), relay.nn.dense(x, w[1])])
    args = [RNG.integers(-3, 3, (3, 5)).astype("int8")]
    _left_alone(relay.IRModule.from_expr(relay.Function([x], body)), args, 2)


def test_a_projection_inside_a_branch_is_not_joined_with_one_outside() -> None:
    x, flag = relay.var("x", shape=(3, 5)), relay.var("flag", shape=(), dtype="bool")
    outside = relay.nn.dense(x, relay.const(array(4, 5)))
    inside = relay.nn.dense(x, relay.const(array(4, 5)))
    body = relay.If(flag, inside, outside)
    before = relay.IRModule.from_expr(relay.Function([x, flag], body))
    _left_alone(before, [array(3, 5), np.array(True)], 2)


def test_tvms_default_joins_three_projections_and_leaves_two() -> None:
    # TVM's CombineParallelDense(min_num_branches=3, to_batch=True); to_batch is accepted.
    two, _, _ = projections(units=(4, 4))
    three, _, _ = projections(units=(4, 4, 4))
    tvm_default = relay.transform.CombineParallelDense(min_num_branches=3, to_batch=True)
    assert len(calls(tvm_default(two)["main"], "nn.dense")) == 2
    assert len(calls(relay.transform.CombineParallelDense()(three)["main"], "nn.dense")) == 1


# ---- returns: convolutions ---------------------------------------------------------------------


def branches(
    channels: tuple = (8, 4, 6), kernel: int = 1, bias: str = "bias_add", **attrs
) -> tuple[relay.IRModule, list[np.ndarray], list[np.ndarray]]:
    """``main(x) = (conv(x, W0) + b0, ...)``: an Inception block's branches on one input."""
    x = relay.var("x", shape=(1, 5, 9, 9))
    weights = [array(c, 5, kernel, kernel) for c in channels]
    biases = [array(c) for c in channels]
    outs = []
    for w, b in zip(weights, biases):
        out = relay.nn.conv2d(x, relay.const(w), **attrs)
        if bias == "bias_add":
            out = relay.nn.bias_add(out, relay.const(b))
        elif bias == "add":
            out = relay.add(out, relay.const(b.reshape(-1, 1, 1)))
        outs.append(relay.nn.relu(out))
    return relay.IRModule.from_expr(relay.Function([x], relay.Tuple(outs))), weights, biases


@pytest.mark.parametrize("bias", ["bias_add", "add", "none"])
def test_three_convolutions_of_one_input_become_one_and_channel_slices(bias: str) -> None:
    before, weights, biases = branches(kernel=3, bias=bias, padding=(1, 1), strides=(2, 2))
    after = relay.transform.CombineParallelConv2D()(before)
    (conv,) = calls(after["main"], "nn.conv2d")
    np.testing.assert_array_equal(conv.args[1].data, np.concatenate(weights))
    slices = calls(after["main"], "strided_slice")
    assert sorted((s.attrs["begin"][0], s.attrs["end"][0]) for s in slices) == [
        (0, 8),
        (8, 12),
        (12, 18),
    ]
    assert all(tuple(s.attrs["axes"]) == (1,) for s in slices)
    if bias != "none":
        (joined,) = calls(after["main"], "nn.bias_add")
        np.testing.assert_array_equal(joined.args[1].data, np.concatenate(biases))
    assert_results_match(before, after, [array(1, 5, 9, 9)])


def test_combined_convolutions_run_in_the_vm_as_before() -> None:
    before, _, _ = branches(channels=(16, 16, 32), kernel=1)
    seq = relay.transform.Sequential([relay.transform.CombineParallelConv2D(min_num_branches=3)])
    with relay.transform.PassContext(opt_level=3):
        after = seq(before)
        exe = relay.vm.compile(after)
    x = array(1, 5, 9, 9)
    want = relay.create_executor("debug", before).evaluate()(x)
    got = vm.VirtualMachine(exe, vm.cpu()).invoke("main", x)
    for w, g in zip(want, got):
        np.testing.assert_allclose(g.numpy(), np.asarray(w), rtol=1e-4, atol=1e-4)


def test_convolutions_that_differ_stay_apart() -> None:
    # Other kernel sizes, strides or groups, or only two branches under TVM's default.
    x = relay.var("x", shape=(1, 4, 8, 8))
    body = relay.Tuple(
        [
            relay.nn.conv2d(x, relay.const(array(4, 4, 1, 1))),
            relay.nn.conv2d(x, relay.const(array(4, 4, 3, 3)), padding=(1, 1)),
            relay.nn.conv2d(x, relay.const(array(4, 4, 1, 1)), strides=(2, 2)),
            relay.nn.conv2d(x, relay.const(array(4, 2, 1, 1)), groups=2),
            relay.nn.conv2d(x, relay.const(array(6, 4, 1, 1))),
        ]
    )
    before = relay.IRModule.from_expr(relay.Function([x], body))
    after = relay.transform.CombineParallelConv2D()(before)
    assert len(calls(after["main"], "nn.conv2d")) == 5
    joined = relay.transform.CombineParallelConv2D(min_num_branches=2)(before)
    assert len(calls(joined["main"], "nn.conv2d")) == 4  # the two plain 1x1 ones
    assert_results_match(before, joined, [array(1, 4, 8, 8)])


# ---- returns: batched products ------------------------------------------------------------------


def test_three_batched_products_of_parameters_become_one_of_their_concatenation() -> None:
    # TVM's own case: y1, y2, y3 are parameters, joined on every call by a concatenate.
    x = relay.var("x", shape=(2, 6, 4))
    ys = [relay.var(f"y{i}", shape=(2, n, 4)) for i, n in enumerate((3, 5, 2))]
    body = relay.Tuple([relay.nn.batch_matmul(x, y) for y in ys])
    before = relay.IRModule.from_expr(relay.Function([x, *ys], body))
    after = relay.transform.CombineParallelBatchMatmul()(before)
    whole = relay.nn.batch_matmul(x, relay.concatenate(ys, axis=1))
    expected = relay.Function(
        [x, *ys],
        relay.Tuple([sliced(whole, 0, 3, 2), sliced(whole, 3, 8, 2), sliced(whole, 8, 10, 2)]),
    )
    assert_same(after, relay.IRModule.from_expr(expected))
    assert_results_match(
        before, after, [array(2, 6, 4), array(2, 3, 4), array(2, 5, 4), array(2, 2, 4)]
    )


def test_constant_batched_products_untransposed_join_their_columns_and_biases() -> None:
    x = relay.var("x", shape=(1, 3, 4))
    ys = [array(1, 4, n) for n in (2, 3, 4)]
    biases = [array(n) for n in (2, 3, 4)]
    outs = [
        relay.nn.bias_add(
            relay.nn.batch_matmul(x, relay.const(y), transpose_b=False), relay.const(b), axis=-1
        )
        for y, b in zip(ys, biases)
    ]
    before = relay.IRModule.from_expr(relay.Function([x], relay.Tuple(outs)))
    after = relay.transform.CombineParallelBatchMatmul(min_num_branches=3)(before)
    (product,) = calls(after["main"], "nn.batch_matmul")
    np.testing.assert_array_equal(product.args[1].data, np.concatenate(ys, axis=2))
    (joined,) = calls(after["main"], "nn.bias_add")
    np.testing.assert_array_equal(joined.args[1].data, np.concatenate(biases))
    assert not calls(after["main"], "concatenate")
    assert_results_match(before, after, [array(1, 3, 4)])


def test_batched_products_that_differ_or_read_computed_operands_stay_apart() -> None:
    x = relay.var("x", shape=(2, 6, 4))
    y = relay.var("y", shape=(2, 3, 4))
    body = relay.Tuple(
        [
            relay.nn.batch_matmul(x, relay.const(array(2, 3, 4))),
            relay.nn.batch_matmul(x, relay.const(array(1, 3, 4))),  # another batch
            relay.nn.batch_matmul(x, relay.const(array(2, 4, 3)), transpose_b=False),
            relay.nn.batch_matmul(x, relay.nn.relu(y)),  # computed, not a parameter
            relay.nn.batch_matmul(relay.nn.relu(x), y),  # another input
        ]
    )
    before = relay.IRModule.from_expr(relay.Function([x, y], body))
    after = relay.transform.CombineParallelBatchMatmul(min_num_branches=2)(before)
    assert len(calls(after["main"], "nn.batch_matmul")) == 5
    two = relay.Tuple([relay.nn.batch_matmul(x, y), relay.nn.batch_matmul(x, y)])
    two_mod = relay.IRModule.from_expr(relay.Function([x, y], two))
    assert (
        len(calls(relay.transform.CombineParallelBatchMatmul()(two_mod)["main"], "nn.batch_matmul"))
        == 2
    )


# ---- invalid -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "error"), [(1, ValueError), (0, ValueError), (2.5, TypeError), (True, TypeError)]
)
@pytest.mark.parametrize(
    "make",
    [
        relay.transform.CombineParallelDense,
        relay.transform.CombineParallelConv2D,
        relay.transform.CombineParallelBatchMatmul,
    ],
)
def test_a_branch_count_below_two_or_not_an_int_is_refused_by_name(make, value, error) -> None:
    with pytest.raises(error, match="min_num_branches"):
        make(min_num_branches=value)
