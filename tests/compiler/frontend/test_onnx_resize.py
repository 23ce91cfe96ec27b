"""ONNX Resize imported by from_onnx agrees with onnxruntime in every coordinate
transformation, nearest rounding and interpolation mode, and with onnx's numpy reference
(without onnxruntime) in the common ones (returns); malformed scales, sizes and regions get
errors naming them (invalid)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

pytest.importorskip("onnx")

from onnx import helper

from compiler import relay
from compiler.frontend import OnnxImportError, OpNotImplemented
from tests.compiler.frontend._onnx_helpers import (
    check_against_ort,
    check_against_reference,
    model,
    needs_ort,
    run_ort,
    run_vm,
    single_op,
)

RNG = np.random.default_rng(23)

COORDS = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"]
ROUNDINGS = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
# Up, down, fractional, and one axis resized to a single element.
SCALES = [(1, 1, 2, 3), (1, 1, 0.5, 0.75), (1, 1, 1.7, 0.6), (1, 1, 0.2, 1.5)]


def randn(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def _scaled(attrs: dict, scales: tuple, shape=(1, 2, 5, 4), opset: int = 13) -> tuple:
    constants = {"roi": np.zeros(0, "float32"), "s": np.array(scales, dtype="float32")}
    return single_op("Resize", {"x": randn(*shape)}, attrs, constants, opset=opset)


def _sized(attrs: dict, sizes: tuple, shape=(1, 2, 5, 4), opset: int = 13) -> tuple:
    constants = {"z": np.array(sizes, dtype="int64")}
    return single_op(
        "Resize", {"x": randn(*shape)}, attrs, constants, input_order=["x", "", "", "z"],
        opset=opset,
    )  # fmt: skip


# --- returns -----------------------------------------------------------------------------------


@needs_ort
@pytest.mark.parametrize(("coord", "rounding"), list(itertools.product(COORDS, ROUNDINGS)))
@pytest.mark.parametrize("scales", SCALES, ids=["up", "down", "fractional", "to-one"])
def test_nearest_in_every_coordinate_and_rounding_mode(coord, rounding, scales):
    attrs = {"mode": "nearest", "coordinate_transformation_mode": coord, "nearest_mode": rounding}
    check_against_ort(*_scaled(attrs, scales))


@needs_ort
@pytest.mark.parametrize("coord", COORDS)
@pytest.mark.parametrize("scales", SCALES, ids=["up", "down", "fractional", "to-one"])
def test_linear_in_every_coordinate_mode(coord, scales):
    attrs = {"mode": "linear", "coordinate_transformation_mode": coord}
    check_against_ort(*_scaled(attrs, scales), rtol=1e-5, atol=1e-5)


@needs_ort
@pytest.mark.parametrize("coord", COORDS)
@pytest.mark.parametrize("exclude_outside", [0, 1])
@pytest.mark.parametrize("cubic_a", [-0.75, -0.5])
def test_cubic_with_coefficient_and_exclude_outside(coord, exclude_outside, cubic_a):
    attrs = {
        "mode": "cubic",
        "coordinate_transformation_mode": coord,
        "exclude_outside": exclude_outside,
        "cubic_coeff_a": cubic_a,
    }
    check_against_ort(*_scaled(attrs, (1, 1, 1.6, 0.7)), rtol=1e-4, atol=1e-5)


@needs_ort
def test_deeplab_style_half_pixel_linear_upsampling_to_sizes():
    # The DeepLabV3 head: bilinear, half_pixel, to an explicit output size.
    attrs = {"mode": "linear", "coordinate_transformation_mode": "half_pixel"}
    proto, feeds = _sized(attrs, (1, 3, 17, 23), shape=(1, 3, 5, 6))
    check_against_ort(proto, feeds, rtol=1e-5, atol=1e-5)


@needs_ort
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_tf_crop_and_resize_with_extrapolation(mode):
    roi = np.array([0, 0, -0.2, 0.1, 1, 1, 0.8, 1.3], dtype="float32")
    constants = {"roi": roi, "s": np.array([1, 1, 1.5, 1.25], dtype="float32")}
    attrs = {
        "mode": mode,
        "coordinate_transformation_mode": "tf_crop_and_resize",
        "extrapolation_value": 7.5,
    }
    proto, feeds = single_op("Resize", {"x": randn(1, 2, 6, 4)}, attrs, constants, opset=13)
    check_against_ort(proto, feeds, rtol=1e-4, atol=1e-5)


@needs_ort
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_half_pixel_symmetric_and_axes_at_opset_19(mode):
    attrs = {"mode": mode, "coordinate_transformation_mode": "half_pixel_symmetric", "axes": [3, 2]}
    constants = {"s": np.array([0.6, 1.8], dtype="float32")}
    proto, feeds = single_op(
        "Resize", {"x": randn(1, 2, 5, 4)}, attrs, constants, input_order=["x", "", "s"],
        opset=19,
    )  # fmt: skip
    check_against_ort(proto, feeds, rtol=1e-4, atol=1e-5)


@needs_ort
@pytest.mark.parametrize("policy", ["stretch", "not_larger", "not_smaller"])
def test_sizes_with_keep_aspect_ratio_policy(policy):
    attrs = {"mode": "linear", "keep_aspect_ratio_policy": policy, "axes": [2, 3]}
    check_against_ort(*_sized(attrs, (9, 11), opset=18), rtol=1e-5, atol=1e-5)


@needs_ort
@pytest.mark.parametrize("opset", [10, 11, 13, 18])
def test_every_opset_version(opset):
    if opset == 10:
        proto, feeds = single_op(
            "Resize", {"x": randn(1, 2, 3, 4)}, {"mode": "linear"},
            {"s": np.array([1, 1, 1.5, 2.5], "float32")}, opset=10,
        )  # fmt: skip
    else:
        proto, feeds = _scaled({"mode": "linear"}, (1, 1, 1.5, 2.5), opset=opset)
    check_against_ort(proto, feeds, rtol=1e-5, atol=1e-5)


@needs_ort
def test_resizing_rank_3_and_the_channel_axis():
    attrs = {"mode": "linear", "coordinate_transformation_mode": "asymmetric"}
    check_against_ort(*_scaled(attrs, (1, 2.5, 0.5), shape=(2, 3, 6)), atol=1e-5)


@needs_ort
def test_integer_input_resized_by_nearest():
    x = RNG.integers(-50, 50, (1, 1, 3, 4)).astype("int32")
    constants = {"roi": np.zeros(0, "float32"), "s": np.array([1, 1, 1.5, 0.5], "float32")}
    check_against_ort(*single_op("Resize", {"x": x}, {"mode": "nearest"}, constants))


def _imports_as_resize2d(proto) -> bool:
    mod, _ = relay.frontend.from_onnx(proto)
    text = mod.astext()
    assert ("image.resize2d" in text) != ("take(" in text)
    return "image.resize2d" in text


@needs_ort
@pytest.mark.parametrize("coord", [*COORDS, "half_pixel_symmetric", "tf_crop_and_resize"])
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_sized_resizes_import_as_resize2d_and_agree(coord, mode):
    # Sizes give the scales image.resize2d derives; every mode and method maps to it.
    attrs = {"mode": mode, "coordinate_transformation_mode": coord, "cubic_coeff_a": -0.5}
    if coord == "tf_crop_and_resize":
        roi = np.array([0, 0, 0.1, -0.3, 1, 1, 0.8, 1.2], "float32")
        constants = {"roi": roi, "z": np.array((1, 2, 11, 6), "int64")}
        attrs["extrapolation_value"] = 2.5
        proto, feeds = single_op(
            "Resize", {"x": randn(1, 2, 5, 4)}, attrs, constants,
            input_order=["x", "roi", "", "z"], opset=19,
        )  # fmt: skip
    else:
        proto, feeds = _sized(attrs, (1, 2, 11, 3), opset=19)
    assert _imports_as_resize2d(proto)
    expected = check_against_ort(proto, feeds, rtol=1e-5, atol=1e-5)
    if mode == "linear":  # and the VM's kernel, bit for bit
        np.testing.assert_array_equal(run_vm(proto, feeds)[0], expected[0])


@needs_ort
@pytest.mark.parametrize("rounding", ROUNDINGS)
def test_whole_scales_import_as_resize2d_in_every_rounding(rounding):
    # PyTorch's nearest export: asymmetric coordinates, floor, scales of two.
    attrs = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
             "nearest_mode": rounding}  # fmt: skip
    proto, feeds = _scaled(attrs, (1, 1, 2, 2), shape=(1, 3, 4, 5))
    assert _imports_as_resize2d(proto)
    check_against_ort(proto, feeds)


def _any_size_model(constants: dict, order: list[str], opset: int = 13, **attrs) -> object:
    node = helper.make_node("Resize", order, ["y"], **attrs)
    return model([node], {"x": ("float32", (1, 3, "h", "w"))}, ["y"], constants, opset=opset)


@needs_ort
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_an_image_of_any_size_resized_to_constant_sizes_runs_on_the_vm(mode):
    # A preprocessing graph: whatever the image's size, the kernel makes its tables when it
    # runs; one executable takes every size.
    import vm

    sizes = np.array([1, 3, 12, 9], "int64")
    proto = _any_size_model({"z": sizes}, ["x", "", "", "z"], mode=mode)
    mod, params = relay.frontend.from_onnx(proto)
    assert "image.resize2d" in mod.astext()
    machine = vm.VirtualMachine(relay.vm.compile(mod, params=params))
    for shape in [(1, 3, 5, 4), (1, 3, 30, 17)]:
        feeds = {"x": randn(*shape)}
        expected = run_ort(proto, feeds)[0]
        got = machine.invoke("main", **feeds).numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_scales_on_an_image_of_any_size_are_refused_by_name():
    scales = np.array([1, 1, 2, 2], "float32")
    proto = _any_size_model({"roi": np.zeros(0, "float32"), "s": scales}, ["x", "roi", "s"])
    with pytest.raises(OpNotImplemented, match="resized to constant sizes"):
        relay.frontend.from_onnx(proto)


def test_scales_that_do_not_divide_out_keep_the_take_chain():
    # 5 * 1.7 is 8.5, floored to 8 rows: the scale onnxruntime samples with is not 8 / 5.
    proto, _ = _scaled({"mode": "linear"}, (1, 1, 1.7, 2))
    assert not _imports_as_resize2d(proto)


@needs_ort
def test_half_pixel_linear_runs_on_the_vm():
    attrs = {"mode": "linear", "coordinate_transformation_mode": "half_pixel"}
    proto, feeds = _sized(attrs, (1, 2, 9, 7))
    expected = check_against_ort(proto, feeds, atol=1e-5)
    np.testing.assert_allclose(run_vm(proto, feeds)[0], expected[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("method", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("coord", ["half_pixel", "asymmetric"])
@pytest.mark.parametrize("scales", [(1, 1, 2, 3), (1, 1, 0.5, 0.75)], ids=["up", "down"])
def test_common_modes_agree_with_the_onnx_reference(method, coord, scales):
    # Runs without onnxruntime; onnx's reference and onnxruntime agree on these modes.
    attrs = {"mode": method, "coordinate_transformation_mode": coord}
    check_against_reference(*_scaled(attrs, scales), rtol=1e-4, atol=1e-5)


# --- invalid -----------------------------------------------------------------------------------


def test_scales_of_the_wrong_length_are_named():
    node = helper.make_node("Resize", ["x", "", "s"], ["y"], name="resize_0", mode="linear")
    constants = {"s": np.array([1, 2, 2], "float32")}
    proto = model(
        [node], {"x": ("float32", (1, 1, 2, 2))}, {"y": ("float32", (1, 1, 2, 2))}, constants
    )
    with pytest.raises(OnnxImportError, match=r"resize_0.*hold 3 values; expected one per"):
        relay.frontend.from_onnx(proto)


def test_non_positive_scales_and_sizes_are_named():
    proto, _ = _scaled({"mode": "nearest"}, (1, 1, 0, 2))
    with pytest.raises(OnnxImportError, match=r"resize_0.*scales .* must all be positive"):
        relay.frontend.from_onnx(proto)
    proto, _ = _sized({"mode": "nearest"}, (1, 2, -3, 4))
    with pytest.raises(OnnxImportError, match=r"resize_0.*sizes .* must all be positive"):
        relay.frontend.from_onnx(proto)


def test_tf_crop_and_resize_roi_of_the_wrong_length_is_named():
    constants = {"roi": np.zeros(3, "float32"), "s": np.array([1, 1, 2, 2], "float32")}
    attrs = {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize"}
    proto, _ = single_op("Resize", {"x": randn(1, 1, 2, 2)}, attrs, constants, opset=13)
    with pytest.raises(OnnxImportError, match=r"roi holds 3 values; expected a start and an end"):
        relay.frontend.from_onnx(proto)


def test_antialias_is_named_as_unsupported():
    attrs = {"mode": "linear", "antialias": 1}
    proto, _ = _scaled(attrs, (1, 1, 0.5, 0.5), opset=18)
    with pytest.raises(OpNotImplemented, match=r"resize_0.*antialias=1 is not supported"):
        relay.frontend.from_onnx(proto)
