"""SimplifyExpr: transposes of transposes become one, identity transposes and
concatenations of one non-empty tensor go away, each with the values unchanged, and average
pools over each whole plane become means; anything else is left alone."""

from __future__ import annotations

import numpy as np
import pytest

from compiler import relay
from tests.compiler.transform.util import assert_results_match, assert_same, calls, parse

simplify_expr = relay.transform.SimplifyExpr()
RNG = np.random.default_rng(7)


def _x(*shape: int) -> list[np.ndarray]:
    return [RNG.standard_normal(shape).astype("float32")]


# ---- returns: rewritten ------------------------------------------------------------------------


def test_two_transposes_become_one_with_the_composed_axes() -> None:
    before = parse(
        """
        def @main(%x: Tensor[(2, 3, 4, 5), float32]) {
          transpose(transpose(%x, axes=[0, 2, 1, 3]), axes=[0, 1, 3, 2])
        }
        """
    )
    after = simplify_expr(before)
    assert_same(
        after,
        "def @main(%x: Tensor[(2, 3, 4, 5), float32]) { transpose(%x, axes=[0, 2, 3, 1]) }",
    )
    assert_results_match(before, after, _x(2, 3, 4, 5))


def test_transposes_that_undo_each_other_and_identity_transposes_disappear() -> None:
    for body in (
        "transpose(transpose(%x, axes=[1, 2, 0]), axes=[2, 0, 1])",
        "transpose(transpose(%x))",  # axes omitted: reversed, twice
        "transpose(%x, axes=[0, -2, 2])",
    ):
        before = parse(f"def @main(%x: Tensor[(2, 3, 4), float32]) {{ {body} }}")
        after = simplify_expr(before)
        assert_same(after, "def @main(%x: Tensor[(2, 3, 4), float32]) { %x }")


def test_gpt2_keys_lose_the_empty_past_and_one_transpose() -> None:
    # The keys of GPT-2's attention as exported: heads out, the empty past joined, then
    # transposed again for the product with the queries.
    before = parse(
        """
        def @main(%x: Tensor[(1, 8, 2, 4), float32], %past: Tensor[(1, 2, 0, 4), float32]) {
          %0 = transpose(%x, axes=[0, 2, 1, 3]);
          %1 = concatenate((%past, %0), axis=-2);
          transpose(%1, axes=[0, 1, 3, 2])
        }
        """
    )
    after = simplify_expr(before)
    assert not calls(after["main"], "concatenate")
    assert len(calls(after["main"], "transpose")) == 1
    past = np.zeros((1, 2, 0, 4), "float32")
    assert_results_match(before, after, [*_x(1, 8, 2, 4), past])


def test_a_concatenation_of_one_tensor_is_the_tensor() -> None:
    before = parse("def @main(%x: Tensor[(3, 4), float32]) { concatenate((%x,), axis=1) }")
    assert_same(simplify_expr(before), "def @main(%x: Tensor[(3, 4), float32]) { %x }")


@pytest.mark.parametrize(
    "pool",
    [
        "nn.avg_pool2d(%x, pool_size=[7, 5])",
        "nn.avg_pool2d(%x, pool_size=[7, 5], strides=[2, 2], ceil_mode=True)",
        # transformers' EfficientNet pools with a window as wide as its channels
        "nn.avg_pool2d(%x, pool_size=[16, 16], strides=[16, 16], ceil_mode=True)",
        "nn.global_avg_pool2d(%x)",
        "nn.adaptive_avg_pool2d(%x, output_size=[1, 1])",
        "nn.adaptive_avg_pool2d(%x, output_size=1)",
    ],
)
def test_an_average_over_each_whole_plane_becomes_a_mean(pool: str) -> None:
    before = parse(f"def @main(%x: Tensor[(2, 3, 7, 5), float32]) {{ {pool} }}")
    after = simplify_expr(before)
    assert_same(
        after,
        "def @main(%x: Tensor[(2, 3, 7, 5), float32]) { mean(%x, axis=[2, 3], keepdims=True) }",
    )
    assert_results_match(before, after, _x(2, 3, 7, 5), rtol=1e-6)


# ---- returns: left alone -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        # Two non-empty pieces.
        "def @main(%x: Tensor[(3, 4), float32], %y: Tensor[(3, 2), float32]) {"
        " concatenate((%x, %y), axis=1) }",
        # The empty piece decides nothing, but its size along the axis is not known.
        "def @main(%x: Tensor[(3, 4), float32], %y: Tensor[(3, ?), float32]) {"
        " concatenate((%x, %y), axis=1) }",
        # A real permutation.
        "def @main(%x: Tensor[(3, 4), float32]) { transpose(%x, axes=[1, 0]) }",
    ],
    ids=["two-pieces", "unknown-size", "one-transpose"],
)
def test_layout_operators_that_move_data_stay(text: str) -> None:
    before = parse(text)
    after = simplify_expr(before)
    assert calls(after["main"], "concatenate") or calls(after["main"], "transpose")
    assert_same(after, before)


def test_the_pipeline_compiles_gpt2_keys_to_fewer_passes_over_them() -> None:
    x = relay.var("x", shape=(1, 8, 2, 4), dtype="float32")
    past = relay.const(np.zeros((1, 2, 0, 4), "float32"))
    keys = relay.transpose(x, axes=[0, 2, 1, 3])
    joined = relay.concatenate([past, keys], axis=-2)
    body = relay.multiply(relay.transpose(joined, axes=[0, 1, 3, 2]), relay.const(0.5))
    mod = relay.IRModule.from_expr(relay.Function([x], body))
    exe = relay.vm.compile(mod)
    (primitive,) = exe.primitives
    assert "concatenate" not in primitive.name
    assert primitive.name.count("transpose") == 1
    data = _x(1, 8, 2, 4)[0]
    got = relay.vm.VirtualMachine(exe).invoke("main", data).numpy()
    np.testing.assert_array_equal(got, data.transpose(0, 2, 3, 1) * np.float32(0.5))


@pytest.mark.parametrize(
    "pool",
    [
        "nn.avg_pool2d(%x, pool_size=[7, 4])",  # one column left out
        "nn.avg_pool2d(%x, pool_size=[7, 5], padding=[1, 1, 1, 1])",  # padded windows
        "nn.avg_pool2d(%x, pool_size=[3, 3], strides=[4, 4])",  # part of the plane
        "nn.adaptive_avg_pool2d(%x, output_size=[1, 2])",
    ],
)
def test_averages_of_part_of_a_plane_stay_pools(pool: str) -> None:
    before = parse(f"def @main(%x: Tensor[(2, 3, 7, 5), float32]) {{ {pool} }}")
    after = simplify_expr(before)
    assert not calls(after["main"], "mean")
