"""ONNX ``Resize`` in every coordinate transformation, nearest rounding and interpolation mode.

Compiler layer (``compiler.frontend``); does not import ``onnx``. Resizing NCHW height and
width at scales ``image.resize2d`` derives from the sizes (sizes given, or scales whose
product with the input size is the output size exactly) imports as that operator, whose
arithmetic is onnxruntime's; so does a resize to constant sizes of an input whose height and
width are known only at run time (the kernel makes its tables when it runs). Other resizes
(other axes, scales that do not divide out, cropping of batch or channels) are built from
``take``: resizing is separable, each resized axis is interpolated on its own, one after
the other, and with the input shape known at import time the source positions and weights
of every output index along an axis are computed here with numpy
(:func:`compiler.op.defs_image.axis_taps`), so an axis becomes a few ``take`` calls with
constant indices (one per interpolation tap), each scaled by a constant weight vector and
summed.
"""

from __future__ import annotations

import math

import numpy as np

from compiler.frontend.onnx_context import NodeContext, Value
from compiler.frontend.onnx_ops_tensor import normalize_axis, shape_text
from compiler.frontend.onnx_registry import register
from compiler.ir.types import Any
from compiler.op.defs_image import axis_taps, source_coordinates

_COORD_MODES = (
    "half_pixel",
    "half_pixel_symmetric",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
    "tf_crop_and_resize",
)
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _static_shape(node: NodeContext, x: Value) -> tuple[int, ...]:
    if any(isinstance(d, Any) for d in x.shape):
        raise node.unsupported(
            f"resizing input {shape_text(x.shape)} with dimensions known only at run time is "
            "supported for NCHW height and width resized to constant sizes; give the model's "
            "inputs static shapes (from_onnx's shape= argument)"
        )
    return tuple(int(d) for d in x.shape)


def _plan(node: NodeContext, x: Value) -> tuple[list[int], list[float], list[tuple[float, float]]]:
    """Output sizes, scales and regions of interest of every axis of a Resize."""
    dims = _static_shape(node, x)
    rank = len(dims)
    if node.opset < 11:
        scales = node.static(1, "scales").reshape(-1)
        sizes = None
        axes = list(range(rank))
        roi = None
    else:
        roi = node.optional_static(1, "roi")
        scales = node.optional_static(2, "scales")
        sizes = node.optional_static(3, "sizes")
        given_axes = node.attr("axes") if node.opset >= 18 else None
        axes = (
            list(range(rank))
            if given_axes is None
            else [normalize_axis(node, int(a), rank, "resize axis") for a in given_axes]
        )
        if len(set(axes)) != len(axes):
            raise node.error(f"axes {tuple(axes)} repeat an axis")
        scales = None if scales is None or scales.size == 0 else scales.reshape(-1)
        sizes = None if sizes is None or sizes.size == 0 else sizes.reshape(-1)
    if (scales is None) == (sizes is None):
        raise node.error("needs exactly one of the scales and sizes inputs (a non-empty one)")
    count = len(axes)
    given = scales if scales is not None else sizes
    if given.size != count:  # type: ignore[union-attr]
        raise node.error(
            f"scales or sizes hold {given.size} values; expected one per resized axis "  # type: ignore[union-attr]
            f"({count}, input {shape_text(x.shape)})"
        )
    out = list(dims)
    full_scales = [1.0] * rank
    if scales is not None:
        if any(not float(s) > 0 for s in scales):
            raise node.error(f"scales {tuple(float(s) for s in scales)} must all be positive")
        for axis, scale in zip(axes, scales):
            full_scales[axis] = float(scale)
            # The product in float32, as onnxruntime sizes its output.
            out[axis] = math.floor(np.float32(scale) * np.float32(dims[axis]))
    else:
        wanted = [int(s) for s in sizes]  # type: ignore[union-attr]
        if any(s <= 0 for s in wanted):
            raise node.error(f"sizes {tuple(wanted)} must all be positive")
        policy = "stretch"
        if node.opset >= 18:
            policy = node.check_attr(
                "keep_aspect_ratio_policy", ("stretch", "not_larger", "not_smaller"), "stretch"
            )
        ratios = [float(np.float32(s) / np.float32(dims[a])) for s, a in zip(wanted, axes)]
        if policy == "stretch":
            for axis, size, ratio in zip(axes, wanted, ratios):
                out[axis], full_scales[axis] = size, ratio
        else:
            ratio = min(ratios) if policy == "not_larger" else max(ratios)
            for axis in axes:
                out[axis] = math.floor(dims[axis] * ratio + 0.5)
                full_scales[axis] = ratio
    if any(o < 1 for o in out):
        raise node.error(f"the output shape {tuple(out)} has an empty axis")
    regions = [(0.0, 1.0)] * rank
    if roi is not None and roi.size:
        values = [float(v) for v in roi.reshape(-1)]
        if len(values) != 2 * count:
            raise node.error(
                f"roi holds {len(values)} values; expected a start and an end for each of the "
                f"{count} resized axes"
            )
        for i, axis in enumerate(axes):
            regions[axis] = (values[i], values[i + count])
    return out, full_scales, regions


def _resize2d_fits(
    x: Value, dims: list[int], out: list[int], scales: list[float],
    regions: list[tuple[float, float]], coord: str,
) -> bool:  # fmt: skip
    """Whether ``image.resize2d`` computes this Resize exactly: NCHW height and width
    resized, at scales it derives from the sizes (``out / in`` in float32, the scale
    onnxruntime uses when sizes are given)."""
    if len(dims) != 4 or out[:2] != list(dims[:2]) or any(s != 1.0 for s in scales[:2]):
        return False
    if coord == "tf_crop_and_resize" and any(r != (0.0, 1.0) for r in regions[:2]):
        return False
    f = np.float32
    return all(f(out[a]) / f(dims[a]) == f(scales[a]) for a in (2, 3))


def _run_time_size(node: NodeContext, x: Value, coord: str) -> tuple[int, int] | None:
    """The constant output (height, width) of a Resize of NCHW ``x`` whose height or width
    is known only at run time, when ``image.resize2d`` computes it exactly: sizes given
    (not scales), stretched, for the height and width alone. Else None."""
    if x.ndim != 4 or node.opset < 11 or coord == "tf_crop_and_resize":
        return None
    scales = node.known(2) if node.has_input(2) else None
    if (scales is not None and scales.size) or not node.has_input(3):
        return None
    sizes = node.known(3)
    if sizes is None or (node.opset >= 18 and node.attr("keep_aspect_ratio_policy", "stretch")
                         != "stretch"):  # fmt: skip
        return None
    wanted = [int(v) for v in sizes.reshape(-1)]
    axes = node.attr("axes") if node.opset >= 18 else None
    if axes is not None and [int(a) % 4 for a in axes] == [2, 3] and len(wanted) == 2:
        out = wanted
    elif axes is None and len(wanted) == 4 and wanted[:2] == list(x.shape[:2]):
        out = wanted[2:]
    else:
        return None
    if min(out) < 1:
        raise node.error(f"sizes {tuple(wanted)} must all be positive")
    return out[0], out[1]


def _resize_axis(
    node: NodeContext, x: Value, axis: int, indices: np.ndarray, weights: np.ndarray
) -> Value:
    shape = [1] * x.ndim
    shape[axis] = indices.shape[1]
    out: Value | None = None
    for tap in range(indices.shape[0]):
        picked = node.call("take", x, node.const(indices[tap]), axis=axis)
        w = weights[tap]
        if not np.all(w == 1.0):
            picked = node.call("multiply", picked, node.const(w.reshape(shape).astype(x.dtype)))
        out = picked if out is None else node.call("add", out, picked)
    assert out is not None
    return out


@register("Resize")
def _resize(node: NodeContext) -> Value:
    x = node.input(0)
    method = node.check_attr("mode", ("nearest", "linear", "cubic"), "nearest")
    if x.dtype not in ("float32", "float64", "float16") and method != "nearest":
        raise node.unsupported(f"{method} resizing of a {x.dtype} tensor is not supported")
    if node.opset < 11:
        coord, rounding = "asymmetric", "floor"
        if method == "cubic":
            raise node.error("mode='cubic' needs opset 11 or later")
    else:
        coord = node.check_attr("coordinate_transformation_mode", _COORD_MODES, "half_pixel")
        rounding = node.check_attr("nearest_mode", _NEAREST_MODES, "round_prefer_floor")
    if node.opset >= 18 and int(node.attr("antialias", 0)):
        raise node.unsupported("antialias=1 is not supported")
    cubic_a = float(node.attr("cubic_coeff_a", -0.75))
    exclude = bool(int(node.attr("exclude_outside", 0)))
    extrapolation = float(node.attr("extrapolation_value", 0.0))
    if coord == "tf_crop_and_resize" and not node.has_input(1):
        raise node.error("coordinate_transformation_mode='tf_crop_and_resize' needs the roi input")
    method_2d = {"nearest": "nearest_neighbor"}.get(method, method)
    if any(isinstance(d, Any) for d in x.shape[2:]):
        # The kernel makes its tables when it runs, from the sizes it is given.
        size = _run_time_size(node, x, coord)
        if size is not None:
            return node.call(
                "image.resize2d", x, size=size, method=method_2d,
                coordinate_transformation_mode=coord, rounding_method=rounding,
                cubic_alpha=cubic_a, cubic_exclude=int(exclude),
            )  # fmt: skip
    out_shape, scales, regions = _plan(node, x)
    dims = list(_static_shape(node, x))
    # Every transformation but cropping maps index i to i at scale 1: the input comes back.
    if out_shape == dims and coord != "tf_crop_and_resize" and all(s == 1.0 for s in scales):
        return x
    if _resize2d_fits(x, dims, out_shape, scales, regions, coord):
        return node.call(
            "image.resize2d",
            x,
            size=(out_shape[2], out_shape[3]),
            roi=(regions[2][0], regions[3][0], regions[2][1], regions[3][1]),
            method=method_2d,
            coordinate_transformation_mode=coord,
            rounding_method=rounding,
            cubic_alpha=cubic_a,
            cubic_exclude=int(exclude),
            extrapolation_value=extrapolation,
        )
    out = x
    masks: list[tuple[int, np.ndarray]] = []
    for axis in range(x.ndim):
        if out_shape[axis] == dims[axis] and scales[axis] == 1.0 and coord != "tf_crop_and_resize":
            continue
        coords = source_coordinates(coord, out_shape[axis], dims[axis], scales[axis], regions[axis])
        indices, weights, outside = axis_taps(
            method,
            coords,
            dims[axis],
            rounding=rounding,
            cubic_a=cubic_a,
            exclude_outside=exclude,
            extrapolate=coord == "tf_crop_and_resize",
        )
        out = _resize_axis(node, out, axis, indices, weights)
        if outside is not None:
            masks.append((axis, outside))
    if masks:
        # An output takes the extrapolation value when any of its coordinates is outside.
        outside_all = np.zeros(out_shape, dtype=bool)
        for axis, outside in masks:
            shape = [1] * x.ndim
            shape[axis] = outside.size
            outside_all = outside_all | outside.reshape(shape)
        out = node.call("where", node.const(outside_all), node.scalar(extrapolation, x.dtype), out)
    return out
