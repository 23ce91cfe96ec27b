"""``nn.conv2d`` and ``nn.conv2d_transpose``: type relations, error messages, references."""

from __future__ import annotations

import numpy as np
import pytest

from compiler import relay
from compiler.op.registry import OpTypeError
from compiler.typing import infer_expr
from tests.compiler.op._helpers import T, check_array, ref, rel

# --- independent references: naive loops over tiny inputs ---------------------------------------


def naive_conv2d(x, w, strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1):
    """The convolution sum written out, reading padding as zeros by bounds checks."""
    n, _, h, wd = x.shape
    o, cg, kh, kw = w.shape
    top, left, bottom, right = padding
    oh = (h + top + bottom - (kh - 1) * dilation[0] - 1) // strides[0] + 1
    ow = (wd + left + right - (kw - 1) * dilation[1] - 1) // strides[1] + 1
    og = o // groups
    out = np.zeros((n, o, oh, ow), dtype=np.float64)
    for b in range(n):
        for oc in range(o):
            g = oc // og
            for y in range(oh):
                for xx in range(ow):
                    total = 0.0
                    for ci in range(cg):
                        for i in range(kh):
                            for j in range(kw):
                                r = y * strides[0] - top + i * dilation[0]
                                s = xx * strides[1] - left + j * dilation[1]
                                if 0 <= r < h and 0 <= s < wd:
                                    total += float(x[b, g * cg + ci, r, s]) * float(w[oc, ci, i, j])
                    out[b, oc, y, xx] = total
    return out


def naive_conv2d_transpose(
    x, w, strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1, output_padding=(0, 0)
):
    """Every input pixel adds weight * value at stride * position + dilation * offset."""
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    top, left, bottom, right = padding
    oh = (h - 1) * strides[0] - top - bottom + dilation[0] * (kh - 1) + output_padding[0] + 1
    ow = (wd - 1) * strides[1] - left - right + dilation[1] * (kw - 1) + output_padding[1] + 1
    cg = c // groups
    out = np.zeros((n, og * groups, oh, ow), dtype=np.float64)
    for b in range(n):
        for ci in range(c):
            g = ci // cg
            for y in range(h):
                for xx in range(wd):
                    for o in range(og):
                        for i in range(kh):
                            for j in range(kw):
                                r = y * strides[0] - top + i * dilation[0]
                                s = xx * strides[1] - left + j * dilation[1]
                                if 0 <= r < oh and 0 <= s < ow:
                                    out[b, g * og + o, r, s] += float(x[b, ci, y, xx]) * float(
                                        w[ci, o, i, j]
                                    )
    return out


def _ints(rng, shape, dtype):
    # Small integers keep float32 sums exact, so results compare equal whatever the order.
    return rng.integers(-3, 4, size=shape).astype(dtype)


# --- nn.conv2d: returns ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "weight", "attrs", "expected"),
    [
        ((1, 3, 224, 224), (64, 3, 7, 7), {"strides": (2, 2), "padding": (3, 3, 3, 3)},
         (1, 64, 112, 112)),
        ((None, 3, 224, 224), (64, 3, 7, 7), {"strides": (2, 2), "padding": (3, 3)},
         (None, 64, 112, 112)),
        ((2, 8, 10, 12), (16, 8, 3, 3), {}, (2, 16, 8, 10)),
        ((2, 8, 10, 12), (16, 8, 3, 3), {"padding": (1,)}, (2, 16, 10, 12)),
        ((2, 8, 10, 12), (16, 8, 3, 3), {"padding": 1}, (2, 16, 10, 12)),
        ((2, 8, 10, 12), (16, 8, 3, 3), {"padding": (1, 0)}, (2, 16, 10, 10)),
        ((2, 8, 10, 12), (16, 8, 3, 3), {"padding": (0, 1, 2, 3)}, (2, 16, 10, 14)),
        ((1, 8, 10, 10), (8, 4, 3, 3), {"groups": 2}, (1, 8, 8, 8)),
        ((1, 8, 10, 10), (16, 1, 3, 3), {"groups": 8, "padding": (1, 1)}, (1, 16, 10, 10)),
        ((1, 4, 10, 10), (4, 4, 3, 3), {"dilation": (2, 3)}, (1, 4, 6, 4)),
        ((1, 4, 10, 10), (4, 4, 3, 3), {"strides": (3, 2)}, (1, 4, 3, 4)),
        ((1, None, None, 10), (4, 2, 3, 3), {"groups": 2}, (1, 4, None, 8)),
        ((1, 4, 10, 10), (None, 4, None, 3), {"channels": 6, "kernel_size": (5, 3)},
         (1, 6, 6, 8)),
        ((1, 4, 10, 10), (6, 4, None, None), {}, (1, 6, None, None)),
        ((1, 4, 3, 3), (2, 4, 3, 3), {}, (1, 2, 1, 1)),
    ],
)  # fmt: skip
def test_conv2d_shapes(data, weight, attrs, expected):
    assert rel("nn.conv2d", T(data), T(weight), **attrs) == T(expected)


def test_conv2d_out_dtype_and_float64():
    assert rel(
        "nn.conv2d", T((1, 2, 3, 3), "int8"), T((1, 2, 1, 1), "int8"), out_dtype="int32"
    ) == T((1, 1, 3, 3), "int32")
    assert rel("nn.conv2d", T((1, 2, 3, 3), "float64"), T((1, 2, 1, 1), "float64")) == T(
        (1, 1, 3, 3), "float64"
    )


def test_conv2d_type_flows_through_inference_with_a_dynamic_batch():
    x = relay.var("x", shape=(relay.Any(), 3, 224, 224))
    w = relay.var("w", shape=(64, 3, 7, 7))
    y = relay.nn.conv2d(x, w, strides=2, padding=3, channels=64, kernel_size=7)
    assert infer_expr(relay.Function([x, w], y)).ret_type == T((None, 64, 112, 112))


# --- nn.conv2d: invalid ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "weight", "attrs", "message"),
    [
        (T((1, 3, 8)), T((4, 3, 3, 3)), {}, "nn.conv2d: argument data must be a 4-D NCHW tensor "
         "(batch, channels, height, width), found Tensor[(1, 3, 8), float32]"),
        (T((1, 3, 8, 8)), T((4, 3, 3)), {}, "nn.conv2d: argument weight must be a 4-D OIHW tensor "
         "(out_channels, in_channels / groups, kernel_height, kernel_width), found "
         "Tensor[(4, 3, 3), float32]"),
        (T((1, 3, 8, 8)), T((4, 3, 3, 3), "float64"), {}, "nn.conv2d: argument data has dtype "
         "float32 but argument weight has dtype float64"),
        (T((1, 3, 8, 8), "bool"), T((4, 3, 3, 3), "bool"), {}, "nn.conv2d: argument data must be "
         "a numeric"),
        (T((1, 3, 8, 8)), T((4, 2, 3, 3)), {}, "nn.conv2d: data Tensor[(1, 3, 8, 8), float32] has "
         "3 input channels, but weight Tensor[(4, 2, 3, 3), float32] with groups=1 expects 2 per "
         "group (2 in all; the weight's second dimension is in_channels / groups)"),
        (T((1, 6, 8, 8)), T((4, 3, 3, 3)), {"groups": 4}, "nn.conv2d: the 6 input channels of "
         "data Tensor[(1, 6, 8, 8), float32] are not divisible by groups=4"),
        (T((1, 6, 8, 8)), T((5, 2, 3, 3)), {"groups": 3}, "nn.conv2d: the 5 output channels of "
         "weight Tensor[(5, 2, 3, 3), float32] are not divisible by groups=3"),
        (T((1, 8, 8, 8)), T((8, 1, 3, 3)), {"groups": 4}, "nn.conv2d: data Tensor[(1, 8, 8, 8), "
         "float32] has 8 input channels, but weight Tensor[(8, 1, 3, 3), float32] with groups=4 "
         "expects 1 per group (4 in all"),
        (T((1, 3, 8, 8)), T((4, 3, 3, 3)), {"groups": 0}, "nn.conv2d: attribute groups=0 must be "
         ">= 1"),
        (T((1, 3, 8, 8)), T((4, 3, 3, 3)), {"channels": 5}, "nn.conv2d: attribute channels=5 "
         "does not match weight Tensor[(4, 3, 3, 3), float32] with 4 output channels"),
        (T((1, 3, 8, 8)), T((4, 3, 3, 3)), {"kernel_size": (5, 5)}, "nn.conv2d: attribute "
         "kernel_size=(5, 5) does not match weight Tensor[(4, 3, 3, 3), float32] with a 3x3 "
         "kernel"),
        (T((1, 3, 8, 8)), T((4, 3, 3, 3)), {"strides": (0, 1)}, "nn.conv2d: attribute "
         "strides=(0, 1) must hold values >= 1"),
        (T((1, 3, 8, 8)), T((4, 3, 3, 3)), {"strides": (1, 1, 1)}, "nn.conv2d: attribute "
         "strides=(1, 1, 1) must hold 1 or 2 ints (height, width), found 3"),
        (T((1, 3, 8, 8)), T((4, 3, 3, 3)), {"dilation": (1, 0)}, "nn.conv2d: attribute "
         "dilation=(1, 0) must hold values >= 1"),
        (T((1, 3, 8, 8)), T((4, 3, 3, 3)), {"padding": (1, 1, 1)}, "nn.conv2d: attribute "
         "padding=(1, 1, 1) must hold 1, 2 or 4 ints"),
        (T((1, 3, 8, 8)), T((4, 3, 3, 3)), {"padding": (-1, 0)}, "nn.conv2d: attribute "
         "padding=(-1, 0) must not be negative"),
        (T((1, 3, 2, 8)), T((4, 3, 3, 3)), {}, "nn.conv2d: the padded input height 2 of data "
         "Tensor[(1, 3, 2, 8), float32] is smaller than the dilated kernel height 3"),
        (T((1, 3, 8, 4)), T((4, 3, 3, 3)), {"dilation": (1, 2)}, "nn.conv2d: the padded input "
         "width 4 of data Tensor[(1, 3, 8, 4), float32] is smaller than the dilated kernel "
         "width 5"),
        (T((1, 3, 8, 8)), T((4, 3, 3, 3)), {"data_layout": "NHWC"}, "nn.conv2d: attribute "
         "data_layout='NHWC' is not supported; expected 'NCHW' (only the NCHW data layout is "
         "implemented)"),
        (T((1, 3, 8, 8)), T((4, 3, 3, 3)), {"kernel_layout": "HWIO"}, "nn.conv2d: attribute "
         "kernel_layout='HWIO' is not supported; expected 'OIHW'"),
        (T((1, 3, 8, 8)), T((4, 3, 3, 3)), {"out_layout": "NHWC"}, "nn.conv2d: attribute "
         "out_layout='NHWC' is not supported; expected '' or 'NCHW'"),
        (T((1, 3, 8, 8)), relay.TupleType([T((4,))]), {}, "nn.conv2d: argument weight must be a "
         "tensor, found (Tensor[(4,), float32],)"),
    ],
)  # fmt: skip
def test_conv2d_errors(data, weight, attrs, message):
    with pytest.raises(OpTypeError) as info:
        rel("nn.conv2d", data, weight, **attrs)
    assert str(info.value).startswith(message)


def test_conv2d_dynamic_sizes_are_checked_at_run_time():
    # Tensor[(1, ?, 8, 8)] type-checks against a (4, 3, 3, 3) weight; 2 channels do not.
    assert rel("nn.conv2d", T((1, None, 8, 8)), T((4, 3, 3, 3))) == T((1, 4, 6, 6))
    with pytest.raises(ValueError, match=r"^nn\.conv2d: data Tensor\[\(1, 2, 8, 8\), float32\] "
                       r"has 2 input channels"):  # fmt: skip
        ref("nn.conv2d", np.zeros((1, 2, 8, 8), "float32"), np.zeros((4, 3, 3, 3), "float32"))


def test_builder_normalizes_ints_and_padding_like_tvm():
    x = relay.var("x", shape=(1, 3, 8, 8))
    w = relay.var("w", shape=(4, 3, 3, 3))
    call = relay.nn.conv2d(x, w, strides=2, padding=(1, 2), dilation=1, kernel_size=3)
    assert call.attrs == {
        "strides": (2, 2), "padding": (1, 2, 1, 2), "dilation": (1, 1), "groups": 1,
        "channels": None, "kernel_size": (3, 3), "data_layout": "NCHW", "kernel_layout": "OIHW",
        "out_layout": "", "out_dtype": "",
    }  # fmt: skip
    assert relay.nn.conv2d(x, w).attrs["padding"] == (0, 0, 0, 0)
    assert relay.nn.conv2d(x, w, padding=[2]).attrs["padding"] == (2, 2, 2, 2)
    with pytest.raises(TypeError, match=r"attribute groups of nn\.conv2d must be an int"):
        relay.nn.conv2d(x, w, groups="2")


# --- nn.conv2d: references ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    ("data", "weight", "attrs"),
    [
        ((2, 3, 5, 6), (4, 3, 3, 3), {}),
        ((1, 3, 5, 6), (2, 3, 3, 2), {"padding": (1, 2, 0, 1)}),
        ((1, 2, 7, 7), (3, 2, 3, 3), {"strides": (2, 3), "padding": (1, 1, 1, 1)}),
        ((1, 2, 7, 8), (2, 2, 2, 3), {"dilation": (2, 3), "padding": (1, 0, 1, 0)}),
        ((1, 4, 5, 5), (6, 2, 3, 3), {"groups": 2, "padding": (1, 1, 1, 1)}),
        ((1, 3, 5, 5), (6, 1, 3, 3), {"groups": 3, "strides": (2, 2)}),  # depthwise, x2
        ((1, 2, 4, 4), (2, 2, 1, 1), {}),
    ],
)
def test_conv2d_reference_matches_naive_loops(dtype, data, weight, attrs):
    rng = np.random.default_rng(1)
    x = _ints(rng, data, dtype)
    w = _ints(rng, weight, dtype)
    pad = attrs.get("padding", (0, 0, 0, 0))
    expected = naive_conv2d(
        x, w, attrs.get("strides", (1, 1)), pad, attrs.get("dilation", (1, 1)),
        attrs.get("groups", 1),
    )  # fmt: skip
    check_array(ref("nn.conv2d", x, w, **attrs), expected, dtype)


def test_conv2d_reference_on_random_floats():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 4, 6, 6)).astype("float32")
    w = rng.standard_normal((4, 2, 3, 3)).astype("float32")
    attrs = {"groups": 2, "strides": (1, 2), "padding": (1, 1, 1, 1)}
    expected = naive_conv2d(x, w, (1, 2), (1, 1, 1, 1), (1, 1), 2)
    check_array(ref("nn.conv2d", x, w, **attrs), expected, "float32", rtol=1e-5)


def test_conv2d_accumulates_in_out_dtype():
    x = np.full((1, 2, 2, 2), 100, "int8")
    w = np.full((1, 2, 2, 2), 100, "int8")
    check_array(ref("nn.conv2d", x, w, out_dtype="int32"), [[[[80000]]]], "int32")


def test_conv2d_reference_handles_resnet_stem_size():
    x = np.ones((1, 3, 224, 224), "float32")
    w = np.ones((64, 3, 7, 7), "float32")
    out = ref("nn.conv2d", x, w, strides=(2, 2), padding=(3, 3, 3, 3))
    assert out.shape == (1, 64, 112, 112) and out.dtype == np.float32
    # Interior windows see 3 * 7 * 7 ones; the top-left corner only 3 * 4 * 4.
    assert out[0, 5, 50, 50] == 147 and out[0, 0, 0, 0] == 48


# --- nn.conv2d_transpose -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "weight", "attrs", "expected"),
    [
        ((1, 4, 5, 5), (4, 3, 3, 3), {}, (1, 3, 7, 7)),
        ((None, 4, 5, 5), (4, 3, 4, 4), {"strides": (2, 2), "padding": (1, 1, 1, 1)},
         (None, 3, 10, 10)),
        ((1, 4, 5, 5), (4, 2, 3, 3), {"strides": (2, 2), "padding": (1, 1, 1, 1),
         "output_padding": (1, 1), "groups": 2}, (1, 4, 10, 10)),
        ((1, 4, 5, 6), (4, 1, 3, 3), {"dilation": (2, 1), "padding": (0, 1)}, (1, 1, 9, 6)),
        ((1, 4, 5, 6), (4, 1, 3, 3), {"padding": (0, 1, 2, 0)}, (1, 1, 5, 7)),
        ((1, None, 5, 5), (4, None, 3, 3), {"channels": 8, "groups": 2}, (1, 8, 7, 7)),
        ((1, 4, None, 5), (4, 3, 3, None), {}, (1, 3, None, None)),
    ],
)  # fmt: skip
def test_conv2d_transpose_shapes(data, weight, attrs, expected):
    assert rel("nn.conv2d_transpose", T(data), T(weight), **attrs) == T(expected)


@pytest.mark.parametrize(
    ("data", "weight", "attrs", "message"),
    [
        (T((1, 4, 5, 5)), T((3, 2, 3, 3)), {}, "nn.conv2d_transpose: data Tensor[(1, 4, 5, 5), "
         "float32] has 4 input channels, but weight Tensor[(3, 2, 3, 3), float32] has 3 (the IOHW "
         "weight's first dimension is in_channels)"),
        (T((1, 4, 5, 5)), T((4, 2, 3, 3)), {"groups": 3}, "nn.conv2d_transpose: the 4 input "
         "channels of data Tensor[(1, 4, 5, 5), float32] are not divisible by groups=3"),
        (T((1, None, 5, 5)), T((6, 2, 3, 3)), {"groups": 4}, "nn.conv2d_transpose: the 6 input "
         "channels of weight Tensor[(6, 2, 3, 3), float32] are not divisible by groups=4"),
        (T((1, 4, 5, 5)), T((4, 2, 3, 3)), {"channels": 3}, "nn.conv2d_transpose: attribute "
         "channels=3 does not match weight Tensor[(4, 2, 3, 3), float32] with 2 output channels"),
        (T((1, 4, 5, 5)), T((4, None, 3, 3)), {"channels": 3, "groups": 2}, "nn.conv2d_transpose: "
         "attribute channels=3 is not divisible by groups=2"),
        (T((1, 4, 5, 5)), T((4, 2, 3, 3)), {"strides": (2, 2), "output_padding": (2, 0)},
         "nn.conv2d_transpose: attribute output_padding=(2, 0) must be smaller than the stride "
         "or the dilation in each dimension (strides=(2, 2), dilation=(1, 1))"),
        (T((1, 4, 5, 5)), T((4, 2, 3, 3)), {"output_padding": (0, -1)}, "nn.conv2d_transpose: "
         "attribute output_padding=(0, -1) must hold values >= 0"),
        (T((1, 4, 1, 5)), T((4, 2, 1, 3)), {"padding": (1, 0)}, "nn.conv2d_transpose: the output "
         "height of data Tensor[(1, 4, 1, 5), float32] would be -1: padding 1 + 1 removes the "
         "whole upsampled height 1"),
        (T((1, 4, 5, 5)), T((4, 2, 3, 3)), {"kernel_layout": "OIHW"}, "nn.conv2d_transpose: "
         "attribute kernel_layout='OIHW' is not supported; expected 'IOHW'"),
        (T((1, 4, 5, 5)), T((4, 2, 3)), {}, "nn.conv2d_transpose: argument weight must be a 4-D "
         "IOHW tensor (in_channels, out_channels / groups, kernel_height, kernel_width)"),
        (T((1, 4, 5, 5)), T((4, 2, 3, 3)), {"kernel_size": (3, 2)}, "nn.conv2d_transpose: "
         "attribute kernel_size=(3, 2) does not match weight"),
    ],
)  # fmt: skip
def test_conv2d_transpose_errors(data, weight, attrs, message):
    with pytest.raises(OpTypeError) as info:
        rel("nn.conv2d_transpose", data, weight, **attrs)
    assert str(info.value).startswith(message)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    ("data", "weight", "attrs"),
    [
        ((2, 3, 3, 4), (3, 2, 3, 3), {}),
        ((1, 2, 3, 3), (2, 3, 4, 4), {"strides": (2, 2), "padding": (1, 1, 1, 1)}),
        ((1, 4, 3, 3), (4, 1, 3, 3), {"strides": (2, 3), "padding": (1, 0, 0, 2),
         "output_padding": (1, 2), "groups": 2}),
        ((1, 2, 3, 4), (2, 2, 2, 3), {"dilation": (2, 2), "padding": (1, 1, 0, 0)}),
    ],
)  # fmt: skip
def test_conv2d_transpose_reference_matches_naive_loops(dtype, data, weight, attrs):
    rng = np.random.default_rng(3)
    x = _ints(rng, data, dtype)
    w = _ints(rng, weight, dtype)
    expected = naive_conv2d_transpose(
        x, w, attrs.get("strides", (1, 1)), attrs.get("padding", (0, 0, 0, 0)),
        attrs.get("dilation", (1, 1)), attrs.get("groups", 1), attrs.get("output_padding", (0, 0)),
    )  # fmt: skip
    check_array(ref("nn.conv2d_transpose", x, w, **attrs), expected, dtype)


def test_conv2d_transpose_is_the_adjoint_of_conv2d():
    # <conv2d(x, w), y> == <x, conv2d_transpose(y, w)>: an identity independent of either loop.
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 4, 7, 6))
    w = rng.standard_normal((6, 2, 3, 2))  # OIHW for conv2d == IOHW for the transpose
    attrs = {"strides": (2, 1), "padding": (1, 0, 1, 1), "dilation": (1, 2), "groups": 2}
    y_shape = ref("nn.conv2d", x, w, **attrs).shape
    y = rng.standard_normal(y_shape)
    forward = np.vdot(ref("nn.conv2d", x, w, **attrs), y)
    back = ref("nn.conv2d_transpose", y, w, **attrs)
    # The transpose may be one row short when the stride skipped the last input rows.
    assert back.shape[2] <= x.shape[2] and back.shape[3] <= x.shape[3]
    adjoint = np.vdot(x[:, :, : back.shape[2], : back.shape[3]], back)
    assert np.isclose(forward, adjoint, rtol=1e-10)


def test_conv2d_transpose_builder_stores_tvm_attrs():
    x = relay.var("x", shape=(1, 4, 5, 5))
    w = relay.var("w", shape=(4, 2, 3, 3))
    call = relay.nn.conv2d_transpose(x, w, strides=2, padding=1, output_padding=1)
    assert list(call.attrs) == [
        "channels", "kernel_size", "strides", "output_padding", "padding", "dilation", "groups",
        "data_layout", "kernel_layout", "out_layout", "out_dtype",
    ]  # fmt: skip
    assert call.attrs["strides"] == (2, 2)
    assert call.attrs["padding"] == (1, 1, 1, 1)
    assert call.attrs["output_padding"] == (1, 1)
    assert call.attrs["kernel_layout"] == "IOHW"
    assert infer_expr(relay.Function([x, w], call)).ret_type == T((1, 2, 10, 10))
