"""SinkReshape: reshapes move below the elementwise operators that read them."""

from __future__ import annotations

import numpy as np
import pytest

from compiler import relay
from tests.compiler.transform.util import assert_results_match, assert_same, calls, parse

sink_reshape = relay.transform.SinkReshape()
RNG = np.random.default_rng(17)


def _data(*shapes: tuple[int, ...]) -> list[np.ndarray]:
    return [RNG.standard_normal(shape).astype("float32") for shape in shapes]


# ---- returns: rewritten ------------------------------------------------------------------------


def test_a_reshape_moves_below_an_operator_with_a_scalar() -> None:
    before = parse(
        """
        def @main(%x: Tensor[(2, 6), float32]) {
          multiply(reshape(%x, newshape=[1, 2, 3, 2]), 2f)
        }
        """
    )
    after = sink_reshape(before)
    assert_same(
        after,
        """
        def @main(%x: Tensor[(2, 6), float32]) {
          reshape(multiply(%x, 2f), newshape=[1, 2, 3, 2])
        }
        """,
    )
    assert_results_match(before, after, _data((2, 6)))


def test_reshapes_of_one_shape_meet_below_a_binary_operator() -> None:
    before = parse(
        """
        def @main(%x: Tensor[(3, 4), float32], %y: Tensor[(3, 4), float32]) {
          subtract(reshape(%x, newshape=[12]), reshape(%y, newshape=[12]))
        }
        """
    )
    after = sink_reshape(before)
    assert_same(
        after,
        """
        def @main(%x: Tensor[(3, 4), float32], %y: Tensor[(3, 4), float32]) {
          reshape(subtract(%x, %y), newshape=[12])
        }
        """,
    )
    assert_results_match(before, after, _data((3, 4), (3, 4)))


def test_a_whole_operand_is_reshaped_to_meet_its_own_reshape() -> None:
    # A residual stream kept as (batch, tokens, features) between products on rows.
    before = parse(
        """
        def @main(%x: Tensor[(4, 8), float32], %y: Tensor[(4, 8), float32],
                  %z: Tensor[(1, 4, 8), float32]) {
          %0 = add(reshape(%x, newshape=[1, 4, 8]), reshape(%y, newshape=[1, 4, 8]));
          add(reshape(%x, newshape=[1, 4, 8]), %z)
        }
        """
    )
    after = sink_reshape(before)
    assert_same(
        after,
        """
        def @main(%x: Tensor[(4, 8), float32], %y: Tensor[(4, 8), float32],
                  %z: Tensor[(1, 4, 8), float32]) {
          reshape(add(%x, reshape(%z, newshape=[4, 8])), newshape=[1, 4, 8])
        }
        """,
    )
    assert_results_match(before, after, _data((4, 8), (4, 8), (1, 4, 8)))


def test_a_residual_after_a_reshape_joins_the_product_and_the_reshapes_go() -> None:
    before = parse(
        """
        def @main(%x: Tensor[(4, 8), float32], %w: Tensor[(8, 8), float32]) {
          %0 = reshape(%x, newshape=[1, 4, 8]);
          %1 = reshape(nn.dense(%x, %w), newshape=[1, 4, 8]);
          %2 = add(%1, %0);
          %3 = reshape(nn.dense(reshape(%2, newshape=[4, 8]), %w), newshape=[1, 4, 8]);
          reshape(add(%3, %2), newshape=[4, 8])
        }
        """
    )
    after = sink_reshape(before)
    assert not calls(after["main"], "reshape")
    assert_results_match(before, after, _data((4, 8), (8, 8)))


def test_an_operand_on_trailing_axes_both_shapes_share_broadcasts_to_either() -> None:
    # GPT-2's attention: the scores of (heads, tokens, tokens) reshaped to a batch of one,
    # plus the causal mask of (tokens, tokens).
    before = parse(
        """
        def @main(%s: Tensor[(2, 3, 3), float32], %mask: Tensor[(3, 3), float32]) {
          add(reshape(%s, newshape=[1, 2, 3, 3]), %mask)
        }
        """
    )
    after = sink_reshape(before)
    assert_same(
        after,
        """
        def @main(%s: Tensor[(2, 3, 3), float32], %mask: Tensor[(3, 3), float32]) {
          reshape(add(%s, %mask), newshape=[1, 2, 3, 3])
        }
        """,
    )
    assert_results_match(before, after, _data((2, 3, 3), (3, 3)))


def test_a_reshape_undone_after_the_chain_disappears() -> None:
    # GPT-2's MLP: the product's rows reshaped to (batch, tokens, features) for the gelu,
    # and back for the next product.
    before = parse(
        """
        def @main(%x: Tensor[(4, 8), float32], %w: Tensor[(16, 8), float32]) {
          %0 = nn.dense(%x, %w);
          %1 = reshape(%0, newshape=[1, 4, 16]);
          %2 = multiply(%1, 0.5f);
          %3 = multiply(multiply(%1, %1), %1);
          %4 = add(%1, multiply(%3, 0.044715f));
          %5 = add(tanh(multiply(%4, 0.797885f)), 1f);
          reshape(multiply(%2, %5), newshape=[-1, 16])
        }
        """
    )
    after = sink_reshape(before)
    assert not calls(after["main"], "reshape")
    assert_results_match(before, after, _data((4, 8), (16, 8)))


def test_a_let_bound_reshape_moves_too() -> None:
    before = parse(
        """
        def @main(%x: Tensor[(2, 6), float32]) {
          let %r = reshape(%x, newshape=[3, 4]);
          let %s = sigmoid(%r);
          clip(%s, a_min=0.1f, a_max=0.9f)
        }
        """
    )
    after = sink_reshape(before)
    (clip,) = calls(after["main"], "clip")
    assert not calls(clip, "reshape")
    assert_results_match(before, after, _data((2, 6)))


def test_a_reshape_to_its_own_shape_disappears() -> None:
    before = parse("def @main(%x: Tensor[(3, 4), float32]) { reshape(%x, newshape=[3, -1]) }")
    assert_same(sink_reshape(before), "def @main(%x: Tensor[(3, 4), float32]) { %x }")


def test_the_pipeline_fuses_a_gelu_behind_a_reshape_into_the_dense_kernel() -> None:
    x = relay.var("x", shape=(8, 16), dtype="float32")
    weight = relay.const(_data((32, 16))[0])
    v = relay.reshape(relay.nn.dense(x, weight), (1, 8, 32))

    def c(value: float) -> relay.Expr:
        return relay.const(np.float32(value))

    inner = (v + v * v * v * c(0.044715)) * c(0.7978846)
    body = relay.reshape(v * c(0.5) * (relay.tanh(inner) + c(1.0)), (-1, 32))
    mod = relay.IRModule.from_expr(relay.Function([x], body))
    with relay.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod)
    names = [primitive.name for primitive in exe.primitives]
    assert len(names) == 1 and "dense" in names[0] and "tanh" in names[0], names
    data = _data((8, 16))[0]
    got = relay.vm.VirtualMachine(exe).invoke("main", data).numpy()
    with relay.transform.PassContext(opt_level=3, disabled_pass=["SinkReshape"]):
        unmoved = relay.vm.compile(mod)
    assert len(unmoved.primitives) == 2
    want = relay.vm.VirtualMachine(unmoved).invoke("main", data).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


# ---- returns: left alone -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        # The other operand broadcasts along axes the two shapes do not share.
        "def @main(%x: Tensor[(2, 6), float32], %y: Tensor[(1, 4), float32]) {"
        " add(reshape(%x, newshape=[3, 4]), %y) }",
        # It has more axes than the reshape's input.
        "def @main(%x: Tensor[(6, 4), float32], %y: Tensor[(1, 1, 4), float32]) {"
        " add(reshape(%x, newshape=[2, 3, 4]), %y) }",
        # Reshapes of tensors of different shapes.
        "def @main(%x: Tensor[(2, 6), float32], %y: Tensor[(12), float32]) {"
        " add(reshape(%x, newshape=[3, 4]), reshape(%y, newshape=[3, 4])) }",
        # A single element with more dimensions than the reshape's input.
        "def @main(%x: Tensor[(12), float32], %y: Tensor[(1, 1, 1), float32]) {"
        " add(reshape(%x, newshape=[2, 3, 2]), %y) }",
        # An operator whose attribute names an axis.
        "def @main(%x: Tensor[(2, 6), float32], %b: Tensor[(4), float32]) {"
        " nn.bias_add(reshape(%x, newshape=[3, 4]), %b, axis=1) }",
        # A shape known only at run time.
        "def @main(%x: Tensor[(?, 6), float32]) { negative(reshape(%x, newshape=[-1, 3])) }",
    ],
    ids=[
        "broadcast-operand",
        "wider-operand",
        "other-shape",
        "wider-scalar",
        "axis-attribute",
        "dynamic",
    ],
)
def test_reshapes_stay_above_operators_that_depend_on_the_shape(text: str) -> None:
    before = parse(text)
    assert_same(sink_reshape(before), before)


def test_a_module_without_reshapes_is_returned_as_it_is() -> None:
    before = parse("def @main(%x: Tensor[(3, 4), float32]) { negative(%x) }")
    assert_same(sink_reshape(before), before)
