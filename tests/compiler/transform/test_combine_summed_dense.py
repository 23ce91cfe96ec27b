"""CombineSummedDense: a sum of dense layers with constant weights becomes one dense layer of
the joined data and weights, with the same results; the sums it cannot join stay."""

from __future__ import annotations

import numpy as np
import pytest

import vm
from compiler import relay
from tests.compiler.transform.util import assert_results_match, calls

combine = relay.transform.CombineSummedDense()
RNG = np.random.default_rng(29)


def weight(units: int, features: int, dtype: str = "float32") -> relay.Constant:
    return relay.const(RNG.standard_normal((units, features)).astype(dtype))


def data(*shape: int, dtype: str = "float32") -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def summed(
    x_shape: tuple = (2, 6),
    h_shape: tuple = (2, 4),
    units: tuple = (5, 5),
    dtypes: tuple = ("float32", "float32"),
    constant: bool = True,
) -> relay.IRModule:
    """``main(x, h) = dense(x, W) + dense(h, U) + b``, the gates of a recurrent cell."""
    x = relay.var("x", shape=x_shape, dtype=dtypes[0])
    h = relay.var("h", shape=h_shape, dtype=dtypes[1])
    params = [x, h]
    w = weight(units[0], x_shape[-1], dtypes[0])
    if constant:
        u = weight(units[1], h_shape[-1], dtypes[1])
    else:
        u = relay.var("u", shape=(units[1], h_shape[-1]), dtype=dtypes[1])
        params.append(u)
    bias = relay.const(RNG.standard_normal(units[0]).astype(dtypes[0]))
    body = relay.nn.dense(x, w) + relay.nn.dense(h, u) + bias
    return relay.IRModule.from_expr(relay.Function(params, body))


# ---- returns: rewritten ------------------------------------------------------------------------


def test_a_sum_of_two_dense_layers_becomes_one_of_the_joined_data_and_weights() -> None:
    before = summed()
    after = combine(before)
    (product,) = calls(after["main"], "nn.dense")
    (joined,) = calls(after["main"], "concatenate")
    assert joined.attrs["axis"] == -1 and product.args[0] is joined
    w, u = (c.args[1].data for c in calls(before["main"], "nn.dense"))
    np.testing.assert_array_equal(product.args[1].data, np.concatenate([w, u], axis=1))
    assert_results_match(before, after, [data(2, 6), data(2, 4)])


def test_let_bound_products_used_once_are_joined() -> None:
    x = relay.var("x", shape=(3, 8), dtype="float32")
    h = relay.var("h", shape=(3, 2), dtype="float32")
    a, b = relay.var("a"), relay.var("b")
    body = relay.Let(
        a, relay.nn.dense(x, weight(4, 8)), relay.Let(b, relay.nn.dense(h, weight(4, 2)), a + b)
    )
    before = relay.IRModule.from_expr(relay.Function([x, h], body))
    after = relay.transform.DeadCodeElimination()(combine(before))
    assert len(calls(after["main"], "nn.dense")) == 1
    assert_results_match(before, after, [data(3, 8), data(3, 2)])


def test_a_sum_of_three_products_becomes_one_product() -> None:
    xs = [relay.var(f"x{i}", shape=(1, 3 + i), dtype="float32") for i in range(3)]
    products = [relay.nn.dense(x, weight(6, 3 + i)) for i, x in enumerate(xs)]
    before = relay.IRModule.from_expr(relay.Function(xs, products[0] + products[1] + products[2]))
    after = combine(before)
    (product,) = calls(after["main"], "nn.dense")
    assert product.args[1].data.shape == (6, 12)
    assert_results_match(before, after, [data(1, 3), data(1, 4), data(1, 5)])


def test_batched_data_of_three_axes_is_joined_on_the_last() -> None:
    before = summed(x_shape=(2, 3, 6), h_shape=(2, 3, 4))
    after = combine(before)
    assert len(calls(after["main"], "nn.dense")) == 1
    assert_results_match(before, after, [data(2, 3, 6), data(2, 3, 4)])


def test_integer_products_with_a_wider_out_dtype_are_joined_exactly() -> None:
    x = relay.var("x", shape=(2, 6), dtype="int8")
    h = relay.var("h", shape=(2, 4), dtype="int8")
    w = relay.const(RNG.integers(-3, 3, (5, 6)).astype("int8"))
    u = relay.const(RNG.integers(-3, 3, (5, 4)).astype("int8"))
    first = relay.nn.dense(x, w, out_dtype="int32")
    body = first + relay.nn.dense(h, u, units=5, out_dtype="int32")
    before = relay.IRModule.from_expr(relay.Function([x, h], body))
    after = combine(before)
    (product,) = calls(after["main"], "nn.dense")
    assert product.attrs["out_dtype"] == "int32"
    args = [RNG.integers(-9, 9, (2, 6)).astype("int8"), RNG.integers(-9, 9, (2, 4)).astype("int8")]
    assert_results_match(before, after, args, rtol=0)


@pytest.mark.parametrize("opt_level", [1, 2, 3])
def test_the_vm_runs_one_product_from_the_default_opt_level(opt_level: int) -> None:
    mod = summed(x_shape=(1, 128), h_shape=(1, 128), units=(512, 512))
    with relay.transform.PassContext(opt_level=opt_level):
        exe = relay.vm.compile(mod)
    products = [p.name for p in exe.primitives if "dense" in p.name]
    assert len(products) == (1 if opt_level >= 2 else 2), products
    args = [data(1, 128), data(1, 128)]
    want = relay.create_executor("debug", mod).evaluate()(*args)
    got = vm.VirtualMachine(exe, vm.cpu()).invoke("main", *args)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


# ---- returns: left alone -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes",
    [
        {"constant": False},  # the joined weight could not be computed now
        {"units": (5, 1)},  # a broadcasting sum
        {"x_shape": (2, 6), "h_shape": (1, 4)},  # data rows differ: a broadcasting sum too
    ],
)
def test_sums_the_products_cannot_be_joined_for_stay(changes: dict) -> None:
    before = summed(**changes)
    after = combine(before)
    assert len(calls(after["main"], "nn.dense")) == 2
    assert not calls(after["main"], "concatenate")


def test_a_product_used_elsewhere_too_is_not_computed_twice() -> None:
    x = relay.var("x", shape=(2, 6), dtype="float32")
    h = relay.var("h", shape=(2, 4), dtype="float32")
    shared = relay.nn.dense(x, weight(5, 6))
    body = relay.Tuple([shared + relay.nn.dense(h, weight(5, 4)), relay.exp(shared)])
    before = relay.IRModule.from_expr(relay.Function([x, h], body))
    after = combine(before)
    assert len(calls(after["main"], "nn.dense")) == 2
    assert not calls(after["main"], "concatenate")
    assert_results_match(before, after, [data(2, 6), data(2, 4)])


def test_products_of_data_of_two_dtypes_stay() -> None:
    x = relay.var("x", shape=(2, 6), dtype="float16")
    h = relay.var("h", shape=(2, 4), dtype="float32")
    first = relay.nn.dense(x, weight(5, 6, "float16"), out_dtype="float32")
    body = first + relay.nn.dense(h, weight(5, 4))
    before = relay.IRModule.from_expr(relay.Function([x, h], body))
    after = combine(before)
    assert len(calls(after["main"], "nn.dense")) == 2
    assert not calls(after["main"], "concatenate")
    assert_results_match(before, after, [data(2, 6, dtype="float16"), data(2, 4)], rtol=1e-3)


def test_data_of_an_unknown_batch_stays() -> None:
    before = summed(x_shape=(relay.Any(), 6), h_shape=(relay.Any(), 4))
    after = combine(before)
    assert len(calls(after["main"], "nn.dense")) == 2
    assert not calls(after["main"], "concatenate")
