"""FoldExplicitPadding: a zero pad of a convolution's spatial axes becomes its padding;
other pads stay."""

from __future__ import annotations

import numpy as np
import pytest

from compiler import relay
from tests.compiler.transform.util import assert_results_match, assert_same, calls, parse

fold = relay.transform.FoldExplicitPadding()
RNG = np.random.default_rng(9)


# ---- returns: folded -----------------------------------------------------------------------------


def test_a_zero_spatial_pad_is_added_to_the_convolution_padding() -> None:
    before = parse(
        """
        def @main(%x: Tensor[(1, 4, 14, 14), float32], %w: Tensor[(4, 1, 3, 3), float32]) {
          %0 = nn.pad(%x, 0f, pad_width=[[0, 0], [0, 0], [1, 1], [0, 1]]);
          nn.conv2d(%0, %w, padding=[0, 1, 0, 0], groups=4, channels=4, kernel_size=[3, 3])
        }
        """
    )
    after = fold(before)
    assert_same(
        after,
        """
        def @main(%x: Tensor[(1, 4, 14, 14), float32], %w: Tensor[(4, 1, 3, 3), float32]) {
          %0 = nn.pad(%x, 0f, pad_width=[[0, 0], [0, 0], [1, 1], [0, 1]]);
          nn.conv2d(%x, %w, padding=[1, 1, 1, 1], groups=4, channels=4, kernel_size=[3, 3])
        }
        """,
    )
    inputs = [RNG.standard_normal((1, 4, 14, 14)).astype("float32"),
              RNG.standard_normal((4, 1, 3, 3)).astype("float32")]  # fmt: skip
    assert_results_match(before, after, inputs)
    cleaned = relay.transform.DeadCodeElimination()(after)
    assert not calls(cleaned["main"], "nn.pad")


def test_the_vm_pipeline_leaves_no_pad_kernel_before_a_convolution() -> None:
    x = relay.var("x", shape=(1, 8, 16, 16), dtype="float32")
    w = relay.const(RNG.standard_normal((8, 1, 3, 3)).astype("float32"))
    padded = relay.nn.pad(x, ((0, 0), (0, 0), (0, 1), (0, 1)))
    body = relay.nn.conv2d(padded, w, strides=(2, 2), groups=8, channels=8, kernel_size=(3, 3))
    mod = relay.IRModule.from_expr(relay.Function([x], body))
    exe = relay.vm.compile(mod)
    assert not any("pad" in name for name in exe.primitive_ops)
    import vm

    data = RNG.standard_normal((1, 8, 16, 16)).astype("float32")
    got = vm.VirtualMachine(exe).invoke("main", data).numpy()
    expected = relay.create_executor("debug", mod).evaluate()(data)
    np.testing.assert_allclose(got, np.asarray(expected.numpy()), rtol=1e-5, atol=1e-5)


# ---- returns: left alone -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "width", "mode"),
    [
        ("1f", "[[0, 0], [0, 0], [1, 1], [1, 1]]", "constant"),  # not zero
        ("0f", "[[0, 0], [1, 0], [1, 1], [1, 1]]", "constant"),  # pads channels
        ("0f", "[[0, 0], [0, 0], [1, 1], [1, 1]]", "edge"),  # not constant
    ],
    ids=["nonzero", "channel-axis", "edge-mode"],
)
def test_other_pads_stay(value: str, width: str, mode: str) -> None:
    channels = 5 if width.startswith("[[0, 0], [1, 0]") else 4
    before = parse(
        f"""
        def @main(%x: Tensor[(1, 4, 8, 8), float32], %w: Tensor[(4, {channels}, 3, 3), float32]) {{
          %0 = nn.pad(%x, {value}, pad_width={width}, pad_mode="{mode}");
          nn.conv2d(%0, %w, padding=[0, 0, 0, 0])
        }}
        """
    )
    after = relay.transform.DeadCodeElimination()(fold(before))
    assert calls(after["main"], "nn.pad")
