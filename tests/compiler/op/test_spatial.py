"""``nn.pad`` and ``nn.upsampling``, and the new ``nn`` operators in the text format."""

from __future__ import annotations

import math

import numpy as np
import pytest

from compiler import relay
from compiler.op.registry import OpTypeError
from compiler.typing import infer_expr
from tests.compiler.op._helpers import T, check_array, ref, rel

# --- nn.pad ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "pad_width", "mode", "expected"),
    [
        ((2, 3), ((1, 2), (0, 1)), "constant", (5, 4)),
        ((None, 3, 4, 4), ((0, 0), (0, 0), (1, 1), (2, 2)), "constant", (None, 3, 6, 8)),
        ((2, 3), ((1, 1), (2, 2)), "reflect", (4, 7)),
        ((1, None), ((0, 0), (5, 5)), "reflect", (1, None)),
        ((2, 3), ((3, 3), (0, 4)), "edge", (8, 7)),
        ((0, 3), ((0, 0), (1, 1)), "edge", (0, 5)),
        ((), (), "constant", ()),
    ],
)
def test_pad_shapes(data, pad_width, mode, expected):
    assert rel("nn.pad", T(data), T(()), pad_width=pad_width, pad_mode=mode) == T(expected)


def test_pad_value_may_have_another_dtype():
    assert rel("nn.pad", T((2,), "int8"), T((), "float32"), pad_width=((1, 1),)) == T((4,), "int8")


@pytest.mark.parametrize(
    ("data", "value", "attrs", "message"),
    [
        (T((2, 3)), T(()), {"pad_width": ((1, 1),)}, "nn.pad: attribute pad_width has 1 (before, "
         "after) pairs but data has rank 2; expected one pair per axis"),
        (T((2, 3)), T(()), {"pad_width": ((1, 1), (2,))}, "nn.pad: attribute pad_width must be a "
         "tuple of (before, after) int pairs ((before_1, after_1), ..., (before_N, after_N)); "
         "entry 1 is (2,)"),
        (T((2, 3)), T(()), {"pad_width": 1}, "nn.pad: attribute pad_width must be a tuple of "
         "(before, after) pairs"),
        (T((2, 3)), T(()), {"pad_width": ((0, 0), (-1, 0))}, "nn.pad: attribute pad_width entry 1 "
         "is (-1, 0); pad widths must not be negative"),
        (T((2, 3)), T((1,)), {"pad_width": ((0, 0), (1, 0))}, "nn.pad: argument pad_value must be "
         "a scalar (shape ()), found Tensor[(1,), float32]"),
        (T((2, 3)), T(()), {"pad_width": ((0, 0), (3, 0)), "pad_mode": "reflect"}, "nn.pad: "
         "pad_mode='reflect' needs pad widths smaller than the axis size, but axis 1 of "
         "Tensor[(2, 3), float32] has size 3 and pad_width (3, 0)"),
        (T((0, 3)), T(()), {"pad_width": ((1, 0), (0, 0)), "pad_mode": "edge"}, "nn.pad: "
         "pad_mode='edge' cannot pad axis 0 of Tensor[(0, 3), float32]: the axis is empty"),
    ],
)  # fmt: skip
def test_pad_errors(data, value, attrs, message):
    with pytest.raises(OpTypeError) as info:
        rel("nn.pad", data, value, **attrs)
    assert str(info.value).startswith(message)


def test_pad_mode_must_be_a_known_choice():
    x = relay.var("x", shape=(2,))
    with pytest.raises(TypeError, match=r"pad_mode of nn\.pad must be one of 'constant', 'edge', "):
        relay.nn.pad(x, ((1, 1),), pad_mode="wrap")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pad_references(dtype):
    x = np.array([[1, 2, 3], [4, 5, 6]], dtype)
    value = np.float32(-1)
    check_array(
        ref("nn.pad", x, value, pad_width=((1, 0), (0, 2))),
        [[-1, -1, -1, -1, -1], [1, 2, 3, -1, -1], [4, 5, 6, -1, -1]],
        dtype,
    )
    check_array(
        ref("nn.pad", x, value, pad_width=((0, 1), (2, 1)), pad_mode="edge"),
        [[1, 1, 1, 2, 3, 3], [4, 4, 4, 5, 6, 6], [4, 4, 4, 5, 6, 6]],
        dtype,
    )
    check_array(
        ref("nn.pad", x, value, pad_width=((1, 1), (2, 2)), pad_mode="reflect"),
        [[6, 5, 4, 5, 6, 5, 4], [3, 2, 1, 2, 3, 2, 1], [6, 5, 4, 5, 6, 5, 4],
         [3, 2, 1, 2, 3, 2, 1]],
        dtype,
    )  # fmt: skip


def test_pad_value_is_converted_to_the_data_dtype():
    out = ref("nn.pad", np.int8([1, 2]), np.float32(7.9), pad_width=((1, 0),))
    check_array(out, [7, 1, 2], "int8")
    with pytest.raises(ValueError, match=r"^nn\.pad: pad_mode='reflect' needs pad widths"):
        ref("nn.pad", np.ones(2, "float32"), np.float32(0), pad_width=((2, 0),), pad_mode="reflect")


def test_pad_builder():
    x = relay.var("x", shape=(2, 3))
    call = relay.nn.pad(x, [[1, 1], [0, 2]])
    assert call.attrs == {"pad_width": ((1, 1), (0, 2)), "pad_mode": "constant"}
    assert call.args[1].data.shape == () and call.args[1].data == 0
    width = relay.const(np.array([[0, 1], [2, 0]], dtype="int64"))
    assert relay.nn.pad(x, width, 1.5).attrs["pad_width"] == ((0, 1), (2, 0))
    assert infer_expr(relay.Function([x], call)).ret_type == T((4, 5))
    with pytest.raises(TypeError, match=r"nn\.pad: attribute pad_width must be a tuple"):
        relay.nn.pad(x, 3)


# --- nn.upsampling -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "attrs", "expected"),
    [
        ((None, 3, 8, 8), {"scale_h": 2, "scale_w": 2}, (None, 3, 16, 16)),
        ((1, 3, 3, 5), {"scale_h": 1.5, "scale_w": 1.5}, (1, 3, 4, 8)),  # 4.5 -> 4, 7.5 -> 8
        ((1, 3, 4, 4), {"scale_h": 0.5, "scale_w": 3}, (1, 3, 2, 12)),
        ((1, 3, None, 4), {"scale_h": 2, "scale_w": 2, "method": "bilinear"}, (1, 3, None, 8)),
        ((1, 3, 4, 4), {}, (1, 3, 4, 4)),
    ],
)
def test_upsampling_shapes(data, attrs, expected):
    assert rel("nn.upsampling", T(data), **attrs) == T(expected)


@pytest.mark.parametrize(
    ("data", "attrs", "message"),
    [
        (T((1, 3, 4)), {}, "nn.upsampling: argument data must be a 4-D NCHW tensor"),
        (T((1, 3, 4, 4)), {"scale_h": 0}, "nn.upsampling: attribute scale_h=0.0 must be > 0"),
        (T((1, 3, 4, 4)), {"scale_w": 0.1}, "nn.upsampling: attribute scale_w=0.1 turns the "
         "width 4 of data Tensor[(1, 3, 4, 4), float32] into 0; the output must have at least "
         "one element"),
        (T((1, 3, 4, 4), "int32"), {"method": "bilinear"}, "nn.upsampling: argument data must be "
         "a floating-point"),
        (T((1, 3, 4, 4)), {"layout": "NHWC"}, "nn.upsampling: attribute layout='NHWC' is not "
         "supported"),
    ],
)  # fmt: skip
def test_upsampling_errors(data, attrs, message):
    with pytest.raises(OpTypeError) as info:
        rel("nn.upsampling", data, **attrs)
    assert str(info.value).startswith(message)


def test_upsampling_method_must_be_known():
    x = relay.var("x", shape=(1, 1, 2, 2))
    with pytest.raises(TypeError, match=r"method of nn\.upsampling must be one of"):
        relay.nn.upsampling(x, 2, 2, method="bicubic")
    with pytest.raises(TypeError, match="a scale_h computed at run time is not supported"):
        relay.nn.upsampling(x, relay.var("s", shape=()), 2)
    assert relay.nn.upsampling(x, relay.const(2.0), 3).attrs["scale_h"] == 2.0


def naive_upsample(x, out_hw, method, align_corners):
    """TVM's coordinate rules, one output pixel at a time."""
    n, c, h, w = x.shape
    out = np.zeros((n, c, *out_hw))

    def coord(i, size, out_size):
        if align_corners:
            return i * (size - 1) / (out_size - 1) if out_size > 1 else 0.0
        return i * size / out_size

    for y in range(out_hw[0]):
        for xx in range(out_hw[1]):
            cy, cx = coord(y, h, out_hw[0]), coord(xx, w, out_hw[1])
            if method == "nearest_neighbor":
                pick = round if align_corners else (lambda v: math.floor(v + 1e-5))
                r, s = min(max(pick(cy), 0), h - 1), min(max(pick(cx), 0), w - 1)
                out[:, :, y, xx] = x[:, :, r, s]
                continue
            r0, s0 = math.floor(cy), math.floor(cx)
            fy, fx = cy - r0, cx - s0
            for dr, wy in ((0, 1 - fy), (1, fy)):
                for ds, wx in ((0, 1 - fx), (1, fx)):
                    r, s = min(r0 + dr, h - 1), min(s0 + ds, w - 1)
                    out[:, :, y, xx] += wy * wx * x[:, :, r, s].astype(np.float64)
    return out


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("method", ["nearest_neighbor", "bilinear"])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("scales", [(2, 2), (1.5, 3), (0.5, 1), (3, 1.7)])
def test_upsampling_reference_matches_naive_loops(dtype, method, align_corners, scales):
    x = np.random.default_rng(14).standard_normal((2, 2, 4, 5)).astype(dtype)
    attrs = {"scale_h": scales[0], "scale_w": scales[1], "method": method,
             "align_corners": align_corners}  # fmt: skip
    out = ref("nn.upsampling", x, **attrs)
    out_hw = rel("nn.upsampling", T(x.shape, dtype), **attrs).shape[2:]
    check_array(out, naive_upsample(x, out_hw, method, align_corners), dtype, rtol=1e-6)


def test_upsampling_known_values():
    x = np.float32([[[[1, 2], [3, 4]]]])
    nearest = ref("nn.upsampling", x, scale_h=2, scale_w=2)
    check_array(nearest, [[[[1, 1, 2, 2], [1, 1, 2, 2], [3, 3, 4, 4], [3, 3, 4, 4]]]], "float32")
    corners = ref("nn.upsampling", x, scale_h=1.5, scale_w=1.5, method="bilinear",
                  align_corners=True)  # fmt: skip
    check_array(corners, [[[[1, 1.5, 2], [2, 2.5, 3], [3, 3.5, 4]]]], "float32")
    row = ref("nn.upsampling", np.float32([[[[1, 2]]]]), scale_h=1, scale_w=2, method="bilinear")
    check_array(row, [[[[1, 1.5, 2, 2]]]], "float32")
    ints = ref("nn.upsampling", np.int8([[[[5, -3]]]]), scale_h=2, scale_w=1)
    check_array(ints, [[[[5, -3], [5, -3]]]], "int8")


# --- the text format ---------------------------------------------------------------------------


def test_new_operators_print_and_parse_back():
    x = relay.var("x", shape=(relay.Any(), 3, 16, 16))
    w = relay.var("w", shape=(8, 3, 3, 3))
    v = relay.var("v", shape=(8,))
    y = relay.nn.conv2d(x, w, strides=2, padding=1)
    y = relay.nn.batch_norm(y, v, v, v, v)[0]
    y = relay.nn.dropout(relay.nn.leaky_relu(y, 0.1))
    y = relay.nn.pad(y, ((0, 0), (0, 0), (1, 1), (1, 1)), pad_mode="reflect")
    y = relay.nn.max_pool2d(y, 3, 2, ceil_mode=True)
    y = relay.nn.upsampling(y, 2, 2, method="bilinear", align_corners=True)
    y = relay.nn.conv2d_transpose(y, relay.var("t", shape=(8, 4, 2, 2)), strides=2)
    y = relay.nn.adaptive_avg_pool2d(y, (2, 2))
    mod = relay.IRModule.from_expr(relay.Function(relay.analysis.free_vars(y), y))
    text = mod.astext()
    assert "pad_width=[[0, 0], [0, 0], [1, 1], [1, 1]]" in text
    again = relay.fromtext(text)
    assert relay.structural_equal(again, mod)
    assert infer_expr(again["main"]).ret_type == T((None, 4, 2, 2))
