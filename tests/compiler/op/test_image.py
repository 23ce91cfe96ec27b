"""``image.resize2d``: its shapes, its numpy reference in every coordinate mode and method,
its errors, and the text format.

Returns group: output shapes from ``size``; hand-computed resizes (nearest in each rounding,
linear and cubic at the borders, cropping with extrapolation, ``out_dtype``); the reference
against onnx's ``Resize`` definition where onnx is installed. Invalid group: wrong rank,
layout, dtype for the method, sizes, regions and coefficients, sizes computed at run time.
"""

from __future__ import annotations

import numpy as np
import pytest

from compiler import relay
from compiler.op.registry import OpTypeError
from compiler.typing import infer_expr
from tests.compiler.op._helpers import T, check_array, ref, rel

ROW = np.float32([[[[0, 10]]]])  # one row of two pixels

# --- returns -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "attrs", "expected"),
    [
        ((None, 3, 8, 8), {"size": (16, 12)}, (None, 3, 16, 12)),
        ((1, 3, None, None), {"size": 5}, (1, 3, 5, 5)),
        ((2, 1, 9, 9), {"size": (3, 4), "method": "cubic"}, (2, 1, 3, 4)),
        ((1, 1, 4, 4), {"size": (2, 2), "out_dtype": "float64"}, (1, 1, 2, 2)),
    ],
)
def test_resize2d_shapes(data, attrs, expected):
    dtype = attrs.get("out_dtype", "float32")
    assert rel("image.resize2d", T(data), **attrs) == T(expected, dtype)


@pytest.mark.parametrize(
    ("coord", "rounding", "columns"),
    [
        # half_pixel, 4 -> 8: coordinates -0.25, 0.25, 0.75, ... 3.25
        ("half_pixel", "floor", [0, 0, 0, 1, 1, 2, 2, 3]),
        ("half_pixel", "ceil", [0, 1, 1, 2, 2, 3, 3, 3]),
        ("half_pixel", "round_prefer_floor", [0, 0, 1, 1, 2, 2, 3, 3]),
        ("half_pixel", "", [0, 0, 0, 1, 1, 2, 2, 3]),  # TVM's default: floor
        # asymmetric, 4 -> 8: coordinates 0, 0.5, 1, ... 3.5: the ties decide
        ("asymmetric", "round_prefer_floor", [0, 0, 1, 1, 2, 2, 3, 3]),
        ("asymmetric", "round_prefer_ceil", [0, 1, 1, 2, 2, 3, 3, 3]),
        ("asymmetric", "round", [0, 1, 1, 2, 2, 3, 3, 3]),
        # align_corners, 4 -> 8: coordinates 3x/7; "" rounds
        ("align_corners", "", [0, 0, 1, 1, 2, 2, 3, 3]),
        ("tf_half_pixel_for_nn", "floor", [0, 0, 1, 1, 2, 2, 3, 3]),
    ],
)
def test_nearest_picks_the_pixel_its_rounding_names(coord, rounding, columns):
    data = np.int16([[[[10, 11, 12, 13]]]])
    out = ref(
        "image.resize2d", data, size=(1, 8), method="nearest_neighbor",
        coordinate_transformation_mode=coord, rounding_method=rounding,
    )  # fmt: skip
    check_array(out, [[[[10 + c for c in columns]]]], "int16")


@pytest.mark.parametrize(
    ("coord", "expected"),
    [
        ("half_pixel", [0, 2.5, 7.5, 10]),  # -0.25 and 1.25 clamp to the border pixels
        ("pytorch_half_pixel", [0, 2.5, 7.5, 10]),
        ("asymmetric", [0, 5, 10, 10]),
        ("align_corners", [0, 10 / 3, 20 / 3, 10]),
    ],
)
def test_linear_interpolates_two_neighbours_and_clamps_at_the_border(coord, expected):
    out = ref("image.resize2d", ROW, size=(1, 4), coordinate_transformation_mode=coord)
    check_array(out, [[[expected]]], "float32", rtol=1e-6)


def test_linear_resizes_rows_and_columns():
    data = np.float32([[[[0, 10], [20, 30]]]])
    out = ref("image.resize2d", data, size=(3, 3), coordinate_transformation_mode="align_corners")
    check_array(out, [[[[0, 5, 10], [10, 15, 20], [20, 25, 30]]]], "float32")


@pytest.mark.parametrize("exclude", [0, 1])
def test_cubic_keeps_a_constant_image_and_a_straight_line(exclude):
    flat = ref(
        "image.resize2d", np.full((1, 2, 5, 6), 3.0, "float32"), size=(9, 4), method="cubic",
        cubic_alpha=-0.75, cubic_exclude=exclude,
    )  # fmt: skip
    check_array(flat, np.full((1, 2, 9, 4), 3.0), "float32", rtol=1e-6)
    # Away from the borders Keys' kernel reproduces a linear ramp exactly.
    ramp = np.arange(8, dtype="float32").reshape(1, 1, 1, 8)
    out = ref("image.resize2d", ramp, size=(1, 16), method="cubic", cubic_exclude=exclude)
    check_array(out[..., 4:12], [[[np.arange(4, 12) * 0.5 - 0.25]]], "float32", rtol=1e-6)


def test_crop_and_resize_fills_samples_outside_the_input():
    data = np.float32([[[[0, 10, 20, 30]]]])
    out = ref(
        "image.resize2d", data, size=(1, 3), roi=(0.0, 0.5, 1.0, 1.5),
        coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-1.0,
    )  # fmt: skip
    # Columns 1.5, 3, 4.5 of the input: the last lies past it.
    check_array(out, [[[[15, 30, -1]]]], "float32")


def test_out_dtype_casts_the_result():
    out = ref("image.resize2d", ROW, size=(1, 4), out_dtype="int32")
    check_array(out, [[[[0, 2, 7, 10]]]], "int32")  # 2.5 and 7.5 truncated, as astype does


def test_float16_and_float64_data():
    for dtype in ("float16", "float64"):
        out = ref("image.resize2d", ROW.astype(dtype), size=(1, 4))
        check_array(out, [[[[0, 2.5, 7.5, 10]]]], dtype)


def test_the_reference_agrees_with_onnx_resize():
    pytest.importorskip("onnx")
    from onnx.reference.ops.op_resize import _interpolate_nd, _linear_coeffs

    data = np.random.default_rng(5).standard_normal((1, 1, 5, 7)).astype("float32")
    out = ref("image.resize2d", data, size=(8, 3), coordinate_transformation_mode="half_pixel")
    expected = _interpolate_nd(
        data, _linear_coeffs, output_size=[1, 1, 8, 3],
        coordinate_transformation_mode="half_pixel",
    )  # fmt: skip
    check_array(out, expected, "float32", rtol=1e-6)


def test_tvm_defaults_none_for_roi_and_out_dtype_are_accepted():
    x = relay.var("x", shape=(1, 3, 8, 8), dtype="float16")
    y = relay.image.resize2d(x, [4, 4], roi=None, out_dtype=None)
    assert infer_expr(relay.Function([x], y)).ret_type == T((1, 3, 4, 4), "float16")


def test_resize2d_prints_and_parses_back():
    x = relay.var("x", shape=(1, 3, 8, 8))
    y = relay.image.resize2d(
        x, (5, 6), roi=(0.1, 0.2, 0.9, 1.0), method="cubic",
        coordinate_transformation_mode="tf_crop_and_resize", cubic_alpha=-0.75,
        extrapolation_value=2.5,
    )  # fmt: skip
    mod = relay.IRModule.from_expr(relay.Function([x], y))
    again = relay.fromtext(mod.astext())
    assert relay.structural_equal(again, mod)
    assert infer_expr(again["main"]).ret_type == T((1, 3, 5, 6))


# --- invalid -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "attrs", "message"),
    [
        (T((1, 3, 4)), {"size": 2}, "image.resize2d: argument data must be a 4-D NCHW tensor"),
        (T((1, 3, 4, 4)), {"size": 2, "layout": "NHWC"}, "image.resize2d: attribute "
         "layout='NHWC' is not supported"),
        (T((1, 3, 4, 4), "int32"), {"size": 2}, "image.resize2d: argument data must be a "
         "floating-point"),
        (T((1, 3, 4, 4)), {"size": (2, 0)}, "image.resize2d: attribute size=(2, 0) must hold "
         "values >= 1"),
        (T((1, 3, 4, 4)), {"size": (1, 2, 3)}, "image.resize2d: attribute size=(1, 2, 3) must "
         "hold 1 or 2 ints"),
        (T((1, 3, 4, 4)), {"size": 2, "roi": (0.0, 1.0, 1.0)}, "image.resize2d: attribute "
         "roi=(0.0, 1.0, 1.0) must hold 4 numbers"),
        (T((1, 3, 4, 4)), {"size": 2, "cubic_alpha": float("nan")}, "image.resize2d: "
         "attribute cubic_alpha=nan must be finite"),
    ],
)  # fmt: skip
def test_resize2d_errors(data, attrs, message):
    with pytest.raises(OpTypeError) as info:
        rel("image.resize2d", data, **attrs)
    assert str(info.value).startswith(message)


def test_an_unknown_method_or_mode_is_named():
    x = relay.var("x", shape=(1, 1, 2, 2))
    with pytest.raises(TypeError, match=r"method of image\.resize2d must be one of"):
        relay.image.resize2d(x, 4, method="bilinear")
    with pytest.raises(TypeError, match=r"coordinate_transformation_mode of image\.resize2d"):
        relay.image.resize2d(x, 4, coordinate_transformation_mode="centre")
    with pytest.raises(TypeError, match="size computed at run time is not supported"):
        relay.image.resize2d(x, relay.var("s", shape=(2,), dtype="int64"))


def test_an_empty_image_cannot_be_resized():
    with pytest.raises(ValueError, match="an image with no rows or columns"):
        ref("image.resize2d", np.zeros((1, 1, 0, 3), "float32"), size=(2, 2))
