"""The Winograd contrib operators: references against nn.conv2d, type relations, errors."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.op.registry import OpTypeError
from tests.compiler.op._helpers import T, ref, rel

TRANSFORM = "nn.contrib_conv2d_winograd_weight_transform"
CONV = "nn.contrib_conv2d_winograd_without_weight_transform"
RNG = np.random.default_rng(5)


# ---- returns ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "out_channels", "padding"),
    [
        ((2, 3, 7, 9), 5, (1, 1, 1, 1)),  # odd output sizes: the last tiles are cropped
        ((1, 8, 14, 14), 4, (1, 1, 1, 1)),
        ((1, 2, 6, 5), 3, (0, 0, 0, 0)),
        ((1, 2, 5, 5), 2, (2, 1, 0, 1)),
        ((1, 1, 3, 3), 1, (0, 0, 0, 0)),  # one output pixel
    ],
)
@pytest.mark.parametrize("tile", [2, 4])
def test_the_transform_then_the_convolution_equal_nn_conv2d(
    data, out_channels, padding, tile
) -> None:
    x = RNG.standard_normal(data).astype("float32")
    w = RNG.standard_normal((out_channels, data[1], 3, 3)).astype("float32")
    u = ref(TRANSFORM, w, tile_size=tile)
    assert u.shape == (tile + 2, tile + 2, out_channels, data[1]) and u.dtype == np.float32
    got = ref(CONV, x, u, padding=padding, kernel_size=(3, 3), tile_size=tile)
    want = ref("nn.conv2d", x, w, padding=padding)
    assert got.dtype == np.float32 and got.shape == want.shape
    # The transformed weights are rounded to float32; F(4x4, 3x3)'s larger coefficients
    # amplify that rounding more than F(2x2, 3x3)'s.
    tolerance = 1e-5 if tile == 2 else 1e-4
    np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("tile", [2, 4])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_transform_is_g_w_g_transposed_for_each_kernel(tile: int, dtype: str) -> None:
    from compiler.op.defs_winograd import _MATRICES

    g = _MATRICES[tile][0]
    w = RNG.standard_normal((5, 3, 3, 3)).astype(dtype)
    u = ref(TRANSFORM, w, tile_size=tile)
    assert u.dtype == w.dtype
    want = np.array([[g @ w[o, i].astype(np.float64) @ g.T for i in range(3)] for o in range(5)])
    want = want.transpose(2, 3, 0, 1).astype(dtype)
    if dtype == "float32":
        # Computed in float64 and rounded once: at most an ulp from the definition's rounding.
        np.testing.assert_array_max_ulp(u, want, maxulp=1)
    else:
        np.testing.assert_allclose(u, want, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("tile", [2, 4])
def test_a_weight_with_its_planes_in_panels_gives_the_same_convolution(tile: int) -> None:
    from compiler.op.defs_packed import pack

    x = RNG.standard_normal((1, 8, 10, 10)).astype("float32")
    w = RNG.standard_normal((40, 8, 3, 3)).astype("float32")
    u = ref(TRANSFORM, w, tile_size=tile)
    planes = u.reshape(-1, 40, 8)
    panels = np.concatenate([pack(plane, 32) for plane in planes])  # 40 -> 2 panels each
    assert panels.shape == ((tile + 2) ** 2 * 2, 8, 32)
    attrs = {"padding": (1, 1), "kernel_size": (3, 3), "tile_size": tile}
    got = ref(CONV, x, panels, channels=40, **attrs)
    np.testing.assert_array_equal(got, ref(CONV, x, u, **attrs))


def test_types_follow_tvm() -> None:
    assert rel(TRANSFORM, T((64, 32, 3, 3))) == T((4, 4, 64, 32))
    assert rel(TRANSFORM, T((64, 32, 3, 3)), tile_size=4) == T((6, 6, 64, 32))
    assert rel(TRANSFORM, T((None, 32, 3, 3), "float64")) == T((4, 4, None, 32), "float64")
    out = rel(CONV, T((None, 32, 14, 14)), T((4, 4, 64, 32)), padding=(1, 1), kernel_size=(3, 3))
    assert out == T((None, 64, 14, 14))
    # Each plane packed in panels of 32 output channels (relayvm's extension).
    packed = rel(CONV, T((1, 32, 14, 14)), T((32, 32, 32)), channels=40, padding=(1, 1),
                 kernel_size=(3, 3))  # fmt: skip
    assert packed == T((1, 40, 14, 14))


# ---- invalid ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "attrs", "message"),
    [
        ((T((4, 8, 3, 3)),), {"tile_size": 3}, "tile_size=3 is not supported"),
        ((T((4, 8, 5, 5)),), {}, "3x3 kernel"),
        ((T((4, 8, 3, 3), "int32"),), {}, "float"),
    ],
)
def test_the_transform_refuses_what_it_cannot_do(args, attrs, message) -> None:
    with pytest.raises(OpTypeError, match=message):
        rel(TRANSFORM, *args, **attrs)


@pytest.mark.parametrize(
    ("weight", "attrs", "message"),
    [
        (T((4, 4, 16, 8)), {"strides": (2, 2)}, "strides=.* must be 1"),
        (T((4, 4, 16, 8)), {"dilation": (2, 2)}, "dilation=.* must be 1"),
        (T((4, 4, 16, 8)), {"groups": 2}, "groups=2 must be 1"),
        (T((4, 4, 16, 8)), {"kernel_size": None}, "kernel_size must be"),
        (T((16, 8, 3, 3)), {}, "transformed"),
        (T((4, 4, 16, 8)), {"tile_size": 4}, r"transformed \(6, 6"),
        (T((4, 4, 16, 4)), {}, "has 8 channels, but weight"),
        (T((4, 4, 16, 8)), {"channels": 32}, "channels=32 does not match"),
        (T((16, 8, 32)), {}, "needs an attribute channels"),
        (T((16, 8, 32)), {"channels": 40}, r"needs \(32, in_channels, 32\)"),
        (T((16, 8, 16)), {"channels": 16}, r"needs \(16, in_channels, 32\)"),
        (T((16, 4, 32)), {"channels": 16}, "has 8 channels, but weight"),
    ],
)
def test_the_convolution_refuses_what_it_cannot_do(weight, attrs, message) -> None:
    full = {"kernel_size": (3, 3), "padding": (1, 1), **attrs}
    with pytest.raises(OpTypeError, match=message):
        rel(CONV, T((1, 8, 14, 14)), weight, **full)
