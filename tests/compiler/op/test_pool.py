"""Pools: ``nn.max_pool2d``, ``nn.avg_pool2d``, global pools and ``nn.adaptive_avg_pool2d``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from compiler import relay
from compiler.op.registry import OpTypeError
from compiler.typing import infer_expr
from tests.compiler.op._helpers import T, check_array, ref, rel

# --- independent references --------------------------------------------------------------------


def naive_pool(x, kind, pool, strides, padding, dilation, out_hw, count_include_pad=False):
    """Visit every window position; padding is skipped for max and for the average's sum."""
    n, c, h, w = x.shape
    top, left, bottom, right = padding
    out = np.zeros((n, c, *out_hw), dtype=np.float64)
    for b in range(n):
        for ch in range(c):
            for oy in range(out_hw[0]):
                for ox in range(out_hw[1]):
                    values, in_pad = [], 0
                    for i in range(pool[0]):
                        for j in range(pool[1]):
                            r = oy * strides[0] - top + i * dilation[0]
                            s = ox * strides[1] - left + j * dilation[1]
                            if 0 <= r < h and 0 <= s < w:
                                values.append(float(x[b, ch, r, s]))
                            elif -top <= r < h + bottom and -left <= s < w + right:
                                in_pad += 1
                    if kind == "max":
                        out[b, ch, oy, ox] = max(values) if values else -math.inf
                    else:
                        count = len(values) + (in_pad if count_include_pad else 0)
                        out[b, ch, oy, ox] = sum(values) / count if count else 0.0
    return out


def naive_adaptive(x, out_hw):
    n, c, h, w = x.shape
    out = np.zeros((n, c, *out_hw), dtype=np.float64)
    for oy in range(out_hw[0]):
        h0, h1 = math.floor(oy * h / out_hw[0]), math.ceil((oy + 1) * h / out_hw[0])
        for ox in range(out_hw[1]):
            w0, w1 = math.floor(ox * w / out_hw[1]), math.ceil((ox + 1) * w / out_hw[1])
            out[:, :, oy, ox] = x[:, :, h0:h1, w0:w1].astype(np.float64).mean(axis=(2, 3))
    return out


# --- max_pool2d / avg_pool2d: shapes -----------------------------------------------------------


@pytest.mark.parametrize("op", ["nn.max_pool2d", "nn.avg_pool2d"])
@pytest.mark.parametrize(
    ("data", "attrs", "expected"),
    [
        ((None, 64, 112, 112), {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1)},
         (None, 64, 56, 56)),
        ((1, 2, 5, 5), {"pool_size": (2, 2), "strides": (2, 2)}, (1, 2, 2, 2)),
        ((1, 2, 5, 5), {"pool_size": (2, 2), "strides": (2, 2), "ceil_mode": True}, (1, 2, 3, 3)),
        ((1, 2, 6, 6), {"pool_size": (3, 3), "strides": (2, 2), "padding": (1,),
         "ceil_mode": True}, (1, 2, 4, 4)),
        # ceil_mode: a last window starting in the right padding is dropped.
        ((1, 2, 5, 5), {"pool_size": (2, 2), "strides": (2, 2), "padding": (1,),
         "ceil_mode": True}, (1, 2, 3, 3)),
        ((1, 2, 4, 4), {"strides": (2, 2), "ceil_mode": True}, (1, 2, 2, 2)),
        ((1, 2, 7, 9), {"pool_size": (2, 3), "strides": (1, 2), "padding": (0, 1, 2, 0)},
         (1, 2, 8, 4)),
        ((1, 2, 9, 9), {"pool_size": (3, 3), "dilation": (2, 3)}, (1, 2, 5, 3)),
        ((1, 2, None, 9), {"pool_size": (3, 3)}, (1, 2, None, 7)),
        ((1, 2, 3, 3), {}, (1, 2, 3, 3)),
    ],
)  # fmt: skip
def test_window_pool_shapes(op, data, attrs, expected):
    assert rel(op, T(data), **attrs) == T(expected)


def test_pool_types_flow_through_inference():
    x = relay.var("x", shape=(relay.Any(), 64, 112, 112))
    y = relay.nn.max_pool2d(x, pool_size=3, strides=2, padding=1)
    z = relay.nn.adaptive_avg_pool2d(relay.nn.avg_pool2d(y, 2, 2), (3, 3))
    assert infer_expr(relay.Function([x], z)).ret_type == T((None, 64, 3, 3))
    assert infer_expr(relay.Function([x], relay.nn.global_avg_pool2d(y))).ret_type == T(
        (None, 64, 1, 1)
    )


def test_max_pool_accepts_integers_avg_pool_needs_floats():
    assert rel("nn.max_pool2d", T((1, 1, 4, 4), "int8"), pool_size=(2, 2)) == T(
        (1, 1, 3, 3), "int8"
    )
    message = r"nn\.avg_pool2d: argument data must be a floating-point tensor, found Tensor\["
    with pytest.raises(OpTypeError, match=message):
        rel("nn.avg_pool2d", T((1, 1, 4, 4), "int32"))


@pytest.mark.parametrize(
    ("op", "data", "attrs", "message"),
    [
        ("nn.max_pool2d", T((1, 2, 5)), {}, "nn.max_pool2d: argument data must be a 4-D NCHW "
         "tensor (batch, channels, height, width), found Tensor[(1, 2, 5), float32]"),
        ("nn.max_pool2d", T((1, 2, 5, 5)), {"pool_size": (0, 2)}, "nn.max_pool2d: attribute "
         "pool_size=(0, 2) must hold values >= 1"),
        ("nn.avg_pool2d", T((1, 2, 5, 5)), {"strides": (1, 2, 3)}, "nn.avg_pool2d: attribute "
         "strides=(1, 2, 3) must hold 1 or 2 ints (height, width), found 3"),
        ("nn.max_pool2d", T((1, 2, 5, 5)), {"padding": (1, 2, 3)}, "nn.max_pool2d: attribute "
         "padding=(1, 2, 3) must hold 1, 2 or 4 ints"),
        ("nn.avg_pool2d", T((1, 2, 5, 5)), {"dilation": (0,)}, "nn.avg_pool2d: attribute "
         "dilation=(0,) must hold values >= 1"),
        ("nn.max_pool2d", T((1, 2, 2, 5)), {"pool_size": (3, 3)}, "nn.max_pool2d: the padded "
         "input height 2 of data Tensor[(1, 2, 2, 5), float32] is smaller than the dilated pool "
         "window height 3"),
        ("nn.avg_pool2d", T((1, 2, 5, 5)), {"layout": "NHWC"}, "nn.avg_pool2d: attribute "
         "layout='NHWC' is not supported; expected 'NCHW'"),
        ("nn.max_pool2d", T((1, 2, 5, 5)), {"out_layout": "NHWC"}, "nn.max_pool2d: attribute "
         "out_layout='NHWC' is not supported; expected '' or 'NCHW'"),
        ("nn.max_pool2d", T((1, 2, 5, 5), "bool"), {}, "nn.max_pool2d: argument data must be a "
         "numeric"),
    ],
)  # fmt: skip
def test_window_pool_errors(op, data, attrs, message):
    with pytest.raises(OpTypeError) as info:
        rel(op, data, **attrs)
    assert str(info.value).startswith(message)


# --- max_pool2d / avg_pool2d: references -------------------------------------------------------

_POOL_CASES = [
    {"pool_size": (2, 2), "strides": (2, 2)},
    {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1)},
    {"pool_size": (3, 2), "strides": (2, 1), "padding": (1, 0, 2, 1), "ceil_mode": True},
    {"pool_size": (2, 2), "strides": (2, 2), "padding": (1, 1, 1, 1), "ceil_mode": True},
    {"pool_size": (2, 3), "strides": (1, 2), "dilation": (2, 1), "padding": (1, 1, 0, 0)},
    {"pool_size": (3, 3), "strides": (3, 3), "ceil_mode": True},
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("attrs", _POOL_CASES)
def test_max_pool_reference_matches_naive_loops(dtype, attrs):
    x = np.random.default_rng(5).standard_normal((2, 3, 7, 8)).astype(dtype)
    out = ref("nn.max_pool2d", x, **attrs)
    expected = naive_pool(
        x, "max", attrs["pool_size"], attrs["strides"], attrs.get("padding", (0, 0, 0, 0)),
        attrs.get("dilation", (1, 1)), out.shape[2:],
    )  # fmt: skip
    assert out.shape[2:] == rel("nn.max_pool2d", T(x.shape), **attrs).shape[2:]
    check_array(out, expected, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("count_include_pad", [False, True])
@pytest.mark.parametrize("attrs", _POOL_CASES)
def test_avg_pool_reference_matches_naive_loops(dtype, count_include_pad, attrs):
    x = np.random.default_rng(6).standard_normal((2, 3, 7, 8)).astype(dtype)
    out = ref("nn.avg_pool2d", x, count_include_pad=count_include_pad, **attrs)
    expected = naive_pool(
        x, "avg", attrs["pool_size"], attrs["strides"], attrs.get("padding", (0, 0, 0, 0)),
        attrs.get("dilation", (1, 1)), out.shape[2:], count_include_pad,
    )  # fmt: skip
    check_array(out, expected, dtype, rtol=1e-6 if dtype == "float32" else 1e-12)


def test_max_pool_pads_with_the_lowest_value():
    x = np.full((1, 1, 2, 2), -5.0, "float32")
    out = ref("nn.max_pool2d", x, pool_size=(2, 2), padding=(1, 1, 1, 1))
    check_array(out, np.full((1, 1, 3, 3), -5.0), "float32")
    xi = np.array([[[[-128, -100], [-90, -128]]]], "int8")
    out = ref("nn.max_pool2d", xi, pool_size=(2, 2), padding=(1, 1, 1, 1))
    check_array(out, [[[[-128, -100, -100], [-90, -90, -100], [-90, -90, -128]]]], "int8")


def test_avg_pool_divisor_with_and_without_padding():
    x = np.ones((1, 1, 2, 2), "float32")
    # Each 2x2 window over 1-padded data overlaps one input element in the corners.
    out = ref("nn.avg_pool2d", x, pool_size=(2, 2), strides=(2, 2), padding=(1, 1, 1, 1))
    check_array(out, np.ones((1, 1, 2, 2)), "float32")
    out = ref(
        "nn.avg_pool2d", x, pool_size=(2, 2), strides=(2, 2), padding=(1, 1, 1, 1),
        count_include_pad=True,
    )  # fmt: skip
    check_array(out, np.full((1, 1, 2, 2), 0.25), "float32")
    # ceil_mode overhang past the padding never counts, even with count_include_pad.
    x = np.arange(9, dtype="float64").reshape(1, 1, 3, 3)
    out = ref(
        "nn.avg_pool2d", x, pool_size=(2, 2), strides=(2, 2), ceil_mode=True,
        count_include_pad=True,
    )  # fmt: skip
    check_array(out, [[[[2.0, 3.5], [6.5, 8.0]]]], "float64")


def test_window_pool_dynamic_height_is_checked_at_run_time():
    assert rel("nn.max_pool2d", T((1, 1, None, 4)), pool_size=(3, 3)) == T((1, 1, None, 2))
    with pytest.raises(ValueError, match=r"^nn\.max_pool2d: the padded input height 2"):
        ref("nn.max_pool2d", np.zeros((1, 1, 2, 4), "float32"), pool_size=(3, 3))


def test_pool_builders_expand_ints_like_tvm():
    x = relay.var("x", shape=(1, 1, 8, 8))
    call = relay.nn.max_pool2d(x, pool_size=3, strides=2, padding=1)
    assert call.attrs == {
        "pool_size": (3, 3), "strides": (2, 2), "dilation": (1, 1), "padding": (1, 1, 1, 1),
        "layout": "NCHW", "out_layout": "", "ceil_mode": False,
    }  # fmt: skip
    assert relay.nn.avg_pool2d(x, (2, 2), count_include_pad=True).attrs["count_include_pad"]
    assert relay.nn.global_max_pool2d(x).attrs == {"layout": "NCHW", "out_layout": ""}
    assert relay.nn.adaptive_avg_pool2d(x).attrs["output_size"] is None
    assert relay.nn.adaptive_avg_pool2d(x, 7).attrs["output_size"] == (7,)


# --- global pools ------------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["nn.global_max_pool2d", "nn.global_avg_pool2d"])
def test_global_pool_shapes_and_errors(op):
    assert rel(op, T((None, 512, 7, 7))) == T((None, 512, 1, 1))
    assert rel(op, T((2, 3, None, None), "float64")) == T((2, 3, 1, 1), "float64")
    with pytest.raises(OpTypeError, match=rf"{op}: argument data must be a 4-D NCHW tensor"):
        rel(op, T((2, 3, 4)))
    with pytest.raises(OpTypeError, match=rf"{op}: data Tensor\[\(2, 3, 0, 4\), float32\] has "
                       "an empty height; pooling needs at least one element"):  # fmt: skip
        rel(op, T((2, 3, 0, 4)))
    with pytest.raises(OpTypeError, match=rf"{op}: attribute layout='NHWC' is not supported"):
        rel(op, T((2, 3, 4, 4)), layout="NHWC")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_global_pool_references(dtype):
    x = np.random.default_rng(7).standard_normal((2, 3, 4, 5)).astype(dtype)
    expected_max = [[[[max(x[b, c].ravel().tolist())]] for c in range(3)] for b in range(2)]
    expected_avg = [
        [[[sum(x[b, c].astype(np.float64).ravel().tolist()) / 20]] for c in range(3)]
        for b in range(2)
    ]
    check_array(ref("nn.global_max_pool2d", x), expected_max, dtype)
    check_array(ref("nn.global_avg_pool2d", x), expected_avg, dtype, rtol=1e-6)
    check_array(ref("nn.global_max_pool2d", np.int16([[[[3, -7], [9, 1]]]])), [[[[9]]]], "int16")
    with pytest.raises(OpTypeError, match=r"nn\.global_avg_pool2d: argument data must be a "
                       "floating-point"):  # fmt: skip
        rel("nn.global_avg_pool2d", T((1, 1, 2, 2), "int16"))


# --- adaptive_avg_pool2d -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "output_size", "expected"),
    [
        ((None, 512, 7, 7), (1, 1), (None, 512, 1, 1)),
        ((1, 3, 10, 9), (4,), (1, 3, 4, 4)),
        ((1, 3, 10, 9), (4, 2), (1, 3, 4, 2)),
        ((1, 3, 10, 9), None, (1, 3, 10, 9)),
        ((1, 3, 10, 9), (), (1, 3, 10, 9)),
        ((1, 3, None, None), (5, 6), (1, 3, 5, 6)),
        ((1, 3, None, 9), None, (1, 3, None, 9)),
    ],
)
def test_adaptive_avg_pool_shapes(data, output_size, expected):
    assert rel("nn.adaptive_avg_pool2d", T(data), output_size=output_size) == T(expected)


@pytest.mark.parametrize(
    ("data", "attrs", "message"),
    [
        (T((1, 3, 4, 4)), {"output_size": (1, 2, 3)}, "nn.adaptive_avg_pool2d: attribute "
         "output_size=(1, 2, 3) must hold 1 or 2 ints (height, width), found 3"),
        (T((1, 3, 4, 4)), {"output_size": (0, 2)}, "nn.adaptive_avg_pool2d: attribute "
         "output_size=(0, 2) must hold values >= 1"),
        (T((1, 3, 4, 0)), {"output_size": (2, 2)}, "nn.adaptive_avg_pool2d: data "
         "Tensor[(1, 3, 4, 0), float32] has an empty width"),
        (T((1, 3, 4, 4), "int32"), {}, "nn.adaptive_avg_pool2d: argument data must be a "
         "floating-point"),
        (T((3, 4, 4)), {}, "nn.adaptive_avg_pool2d: argument data must be a 4-D NCHW tensor"),
        (T((1, 3, 4, 4)), {"layout": "NHWC"}, "nn.adaptive_avg_pool2d: attribute layout='NHWC' "
         "is not supported"),
    ],
)  # fmt: skip
def test_adaptive_avg_pool_errors(data, attrs, message):
    with pytest.raises(OpTypeError) as info:
        rel("nn.adaptive_avg_pool2d", data, **attrs)
    assert str(info.value).startswith(message)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("output_size", [(1, 1), (3, 2), (4, 7), (10, 9), (7, 3)])
def test_adaptive_avg_pool_reference_uses_overlapping_bins(dtype, output_size):
    x = np.random.default_rng(8).standard_normal((2, 3, 10, 9)).astype(dtype)
    out = ref("nn.adaptive_avg_pool2d", x, output_size=output_size)
    check_array(out, naive_adaptive(x, output_size), dtype, rtol=1e-6)


def test_adaptive_bins_overlap_when_the_input_does_not_divide():
    x = np.float32([[[[1, 2, 3, 4, 5]]]])
    # Width 5 into 3 bins: [0, 2), [1, 4), [3, 5).
    check_array(ref("nn.adaptive_avg_pool2d", x, output_size=(1, 3)), [[[[1.5, 3, 4.5]]]],
                "float32")  # fmt: skip


def test_hand_built_attributes_may_hold_a_plain_int_output_size():
    from compiler.ir.attrs import Attrs
    from compiler.op.registry import get_def

    opdef = get_def("nn.adaptive_avg_pool2d")
    attrs = Attrs({"output_size": 3, "layout": "NCHW", "out_layout": ""})
    assert opdef.type_rel([T((1, 2, 7, 7))], attrs) == T((1, 2, 3, 3))
    assert opdef.reference([np.ones((1, 2, 7, 7), "float32")], attrs).shape == (1, 2, 3, 3)
