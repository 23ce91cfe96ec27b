"""TransposeIntoBatchMatmul: a batch product reads its transposed second operand through
``transpose_b``, the chain that makes it swapped to the other way round."""

from __future__ import annotations

import numpy as np

from compiler import relay
from tests.compiler.transform.util import assert_results_match, assert_same, parse

transpose_into_batch_matmul = relay.transform.TransposeIntoBatchMatmul()
RNG = np.random.default_rng(23)


def _data(*shapes: tuple[int, ...]) -> list[np.ndarray]:
    return [RNG.standard_normal(shape).astype("float32") for shape in shapes]


# ---- returns: rewritten ------------------------------------------------------------------------


def test_an_attention_layers_keys_are_read_with_transpose_b() -> None:
    # The keys split into 2 heads of 4 by 3 positions, transposed to (heads, 4, positions),
    # scaled, merged to (2, 4, 3): made the other way round, (2, 3, 4), and read transposed.
    before = parse(
        """
        def @main(%q: Tensor[(2, 3, 4), float32], %k: Tensor[(1, 3, 8), float32]) {
          %0 = reshape(%k, newshape=[1, 3, 2, 4]);
          %1 = transpose(%0, axes=[0, 2, 3, 1]);
          %2 = reshape(multiply(%1, 0.5f), newshape=[2, 4, 3]);
          nn.batch_matmul(%q, %2, transpose_b=False)
        }
        """
    )
    after = transpose_into_batch_matmul(before)
    assert_same(
        after,
        """
        def @main(%q: Tensor[(2, 3, 4), float32], %k: Tensor[(1, 3, 8), float32]) {
          %0 = reshape(%k, newshape=[1, 3, 2, 4]);
          %1 = transpose(%0, axes=[0, 2, 1, 3]);
          %2 = reshape(multiply(%1, 0.5f), newshape=[2, 3, 4]);
          nn.batch_matmul(%q, %2, transpose_b=True)
        }
        """,
    )
    assert_results_match(before, after, _data((2, 3, 4), (1, 3, 8)))


def test_a_transpose_of_the_last_two_axes_goes() -> None:
    before = parse(
        """
        def @main(%x: Tensor[(2, 3, 5), float32], %y: Tensor[(2, 4, 5), float32]) {
          nn.batch_matmul(%x, transpose(%y, axes=[0, 2, 1]), transpose_b=False)
        }
        """
    )
    after = transpose_into_batch_matmul(before)
    assert_same(
        after,
        """
        def @main(%x: Tensor[(2, 3, 5), float32], %y: Tensor[(2, 4, 5), float32]) {
          nn.batch_matmul(%x, %y, transpose_b=True)
        }
        """,
    )
    assert_results_match(before, after, _data((2, 3, 5), (2, 4, 5)))


def test_the_compiled_attention_score_matches_numpy() -> None:
    q, k = _data((1, 6, 16), (1, 6, 16))
    mod = parse(
        """
        def @main(%q: Tensor[(1, 6, 16), float32], %k: Tensor[(1, 6, 16), float32]) {
          %0 = transpose(reshape(%q, newshape=[1, 6, 2, 8]), axes=[0, 2, 1, 3]);
          %1 = transpose(reshape(%k, newshape=[1, 6, 2, 8]), axes=[0, 2, 3, 1]);
          %2 = reshape(multiply(%0, 0.25f), newshape=[2, 6, 8]);
          %3 = reshape(multiply(%1, 0.25f), newshape=[2, 8, 6]);
          nn.batch_matmul(%2, %3, transpose_b=False)
        }
        """
    )
    import vm

    with relay.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod)
    assert "transpose_b=False" not in str(relay.vm.optimize(mod)[0])
    got = vm.VirtualMachine(exe).invoke("main", q, k).numpy()
    heads_q = (q.reshape(6, 2, 8).transpose(1, 0, 2)) * 0.25
    heads_k = (k.reshape(6, 2, 8).transpose(1, 0, 2)) * 0.25
    np.testing.assert_allclose(got, heads_q @ heads_k.transpose(0, 2, 1), rtol=1e-5, atol=1e-5)


# ---- returns: left as they are -----------------------------------------------------------------


def _unchanged(text: str, *shapes: tuple[int, ...]) -> None:
    before = parse(text)
    after = transpose_into_batch_matmul(before)
    assert_same(after, before)
    assert_results_match(before, after, _data(*shapes))


def test_keys_read_elsewhere_too_are_left() -> None:
    # The transposed keys are also a result: swapping them would compute them twice.
    _unchanged(
        """
        def @main(%q: Tensor[(2, 3, 4), float32], %k: Tensor[(2, 3, 4), float32]) {
          %0 = transpose(%k, axes=[0, 2, 1]);
          (nn.batch_matmul(%q, %0, transpose_b=False), %0)
        }
        """,
        (2, 3, 4),
        (2, 3, 4),
    )


def test_a_transpose_that_keeps_the_last_axis_last_is_left() -> None:
    # An attention layer's values: swapped, their split would become a transposed copy.
    _unchanged(
        """
        def @main(%a: Tensor[(2, 3, 3), float32], %v: Tensor[(1, 3, 8), float32]) {
          %0 = transpose(reshape(%v, newshape=[1, 3, 2, 4]), axes=[0, 2, 1, 3]);
          nn.batch_matmul(%a, reshape(%0, newshape=[2, 3, 4]), transpose_b=False)
        }
        """,
        (2, 3, 3),
        (1, 3, 8),
    )


def test_a_reshape_of_the_last_two_axes_or_a_broadcast_operand_stops_the_rewrite() -> None:
    _unchanged(
        """
        def @main(%q: Tensor[(2, 3, 4), float32], %k: Tensor[(2, 2, 6), float32]) {
          nn.batch_matmul(%q, reshape(transpose(%k, axes=[0, 2, 1]), newshape=[2, 4, 3]),
                          transpose_b=False)
        }
        """,
        (2, 3, 4),
        (2, 2, 6),
    )
    _unchanged(
        """
        def @main(%q: Tensor[(2, 3, 4), float32], %k: Tensor[(2, 3, 4), float32],
                  %s: Tensor[(4, 1), float32]) {
          nn.batch_matmul(%q, multiply(transpose(%k, axes=[0, 2, 1]), %s), transpose_b=False)
        }
        """,
        (2, 3, 4),
        (2, 3, 4),
        (4, 1),
    )


def test_empty_keys_are_left() -> None:
    # A swapped newshape would hold a 0, which reshape reads as "keep this dimension".
    _unchanged(
        """
        def @main(%q: Tensor[(2, 3, 4), float32], %k: Tensor[(1, 0, 8), float32]) {
          %0 = transpose(reshape(%k, newshape=[1, -1, 2, 4]), axes=[0, 2, 3, 1]);
          nn.batch_matmul(%q, reshape(%0, newshape=[2, 4, -1]), transpose_b=False)
        }
        """,
        (2, 3, 4),
        (1, 0, 8),
    )


def test_products_already_reading_transposed_or_without_a_transpose_are_left() -> None:
    _unchanged(
        """
        def @main(%q: Tensor[(2, 3, 4), float32], %k: Tensor[(2, 4, 3), float32]) {
          %0 = nn.batch_matmul(%q, transpose(%k, axes=[0, 2, 1]), transpose_b=True);
          nn.batch_matmul(%0, exp(%0), transpose_b=False)
        }
        """,
        (2, 3, 4),
        (2, 4, 3),
    )
