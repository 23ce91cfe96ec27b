"""ONNX ``Resize`` in every coordinate transformation, nearest rounding and interpolation mode.

Compiler layer (``compiler.frontend``); does not import ``onnx``. Resizing is separable:
each resized axis is interpolated on its own, one after the other. With the input shape
known at import time, the source positions and weights of every output index along an
axis are computed here with numpy, so an axis becomes a few ``take`` calls with constant
indices (one per interpolation tap), each scaled by a constant weight vector and summed.
The cases ``nn.upsampling`` computes exactly (whole-number upscaling of NCHW height and
width in the modes it implements) use it instead.
"""

from __future__ import annotations

import math

import numpy as np

from compiler.frontend.onnx_context import NodeContext, Value
from compiler.frontend.onnx_ops_tensor import normalize_axis, shape_text
from compiler.frontend.onnx_registry import register
from compiler.ir.types import Any

_COORD_MODES = (
    "half_pixel",
    "half_pixel_symmetric",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
    "tf_crop_and_resize",
)
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def source_coordinates(
    mode: str,
    out_size: int,
    in_size: int,
    scale: float,
    roi: tuple[float, float] = (0.0, 1.0),
) -> np.ndarray:
    """The input coordinate each output index of one axis samples (ONNX's transformation).

    Parameters
    ----------
    mode : str
        ``coordinate_transformation_mode``.
    out_size, in_size : int
        The axis length after and before resizing.
    scale : float
        The axis's scale (given, or ``out_size / in_size`` when sizes were given).
    roi : (float, float)
        The axis's region of interest, normalized (``tf_crop_and_resize`` only).

    Returns
    -------
    numpy.ndarray
        ``out_size`` float32 coordinates.
    """
    # In float32, operation by operation as onnxruntime computes them, so that coordinates
    # landing on a rounding boundary round the same way.
    f = np.float32
    x = np.arange(out_size, dtype=f)
    scale = f(scale)
    if mode == "half_pixel":
        return (x + f(0.5)) / scale - f(0.5)
    if mode == "half_pixel_symmetric":
        adjustment = f(out_size) / (scale * f(in_size))
        offset = f(in_size) / f(2) * (f(1) - adjustment)
        return offset + (x + f(0.5)) / scale - f(0.5)
    if mode == "pytorch_half_pixel":
        return (x + f(0.5)) / scale - f(0.5) if out_size > 1 else np.zeros_like(x)
    if mode == "align_corners":
        if out_size == 1:
            return np.zeros_like(x)
        return x * f(in_size - 1) / f(out_size - 1)
    if mode == "asymmetric":
        return x / scale
    start, end = f(roi[0]), f(roi[1])
    if out_size == 1:
        return np.full_like(x, f(0.5) * (start + end) * f(in_size - 1))
    return start * f(in_size - 1) + x * (end - start) * f(in_size - 1) / f(out_size - 1)


def nearest_index(coords: np.ndarray, rounding: str) -> np.ndarray:
    """The input index ``nearest_mode`` picks for each coordinate (before clamping)."""
    if rounding == "floor":
        return np.floor(coords)
    if rounding == "ceil":
        return np.ceil(coords)
    tie = coords - np.floor(coords) == 0.5
    if rounding == "round_prefer_floor":
        return np.where(tie, np.floor(coords), np.floor(coords + 0.5))
    return np.where(tie, np.ceil(coords), np.floor(coords + 0.5))


def cubic_weights(frac: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution weights of the taps at offsets -1, 0, 1, 2 (shape (4, n))."""
    s = frac
    w0 = ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a
    w1 = ((a + 2) * s - (a + 3)) * s * s + 1
    t = 1 - s
    w2 = ((a + 2) * t - (a + 3)) * t * t + 1
    w3 = ((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a
    return np.stack([w0, w1, w2, w3])


def axis_taps(
    mode: str,
    coords: np.ndarray,
    in_size: int,
    *,
    rounding: str = "round_prefer_floor",
    cubic_a: float = -0.75,
    exclude_outside: bool = False,
    extrapolate: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The input indices and weights that make each output index of one axis.

    Returns
    -------
    (indices, weights, outside)
        ``indices`` (int64) and ``weights`` (float64) of shape (taps, out_size), indices
        clamped into the axis; ``outside`` is a bool vector of the outputs whose coordinate
        falls outside the input (they take the extrapolation value), or None.
    """
    outside = None
    if extrapolate:
        outside = (coords < 0) | (coords > in_size - 1)
        if not outside.any():
            outside = None
    last = in_size - 1
    if mode == "nearest":
        index = np.clip(nearest_index(coords, rounding), 0, last).astype(np.int64)
        return index[None, :], np.ones((1, coords.size)), outside
    if mode == "linear":
        x = np.clip(coords, 0, last)
        base = np.floor(x)
        frac = x - base
        lo = base.astype(np.int64)
        hi = np.minimum(lo + 1, last)
        return np.stack([lo, hi]), np.stack([1 - frac, frac]), outside
    base = np.floor(coords)
    weights = cubic_weights(coords - base, cubic_a)
    raw = base.astype(np.int64)[None, :] + np.arange(-1, 3)[:, None]
    if exclude_outside:
        weights = np.where((raw < 0) | (raw > last), 0.0, weights)
        weights = weights / weights.sum(axis=0, keepdims=True)
    return np.clip(raw, 0, last), weights, outside


def _static_shape(node: NodeContext, x: Value) -> tuple[int, ...]:
    if any(isinstance(d, Any) for d in x.shape):
        raise node.unsupported(
            f"resizing input {shape_text(x.shape)} with dimensions known only at run time is "
            "not supported; give the model's inputs static shapes (from_onnx's shape= argument)"
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


def _upsampling_fits(
    x: Value, dims: list[int], out: list[int], scales: list[float], method: str, coord: str,
    rounding: str,
) -> str | None:  # fmt: skip
    """The ``nn.upsampling`` method that computes this Resize exactly, or None."""
    if len(dims) != 4 or out[:2] != list(dims[:2]) or x.dtype != "float32":
        return None
    whole = all(
        scales[a] == math.floor(scales[a]) and scales[a] >= 1 and out[a] == dims[a] * scales[a]
        for a in (2, 3)
    )
    if not whole:
        return None
    if method == "nearest":
        # At whole-number scales a half-pixel sample rounded to nearest is the pixel an
        # asymmetric sample rounded down picks.
        half = coord in ("half_pixel", "pytorch_half_pixel", "half_pixel_symmetric")
        if (half and rounding in ("round_prefer_floor", "round_prefer_ceil")) or (
            coord == "asymmetric" and rounding == "floor"
        ):
            return "nearest_neighbor"
        return None
    if method == "linear" and coord in ("asymmetric", "align_corners"):
        return "bilinear"
    return None


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
    out_shape, scales, regions = _plan(node, x)
    dims = list(_static_shape(node, x))
    # Every transformation but cropping maps index i to i at scale 1: the input comes back.
    if out_shape == dims and coord != "tf_crop_and_resize" and all(s == 1.0 for s in scales):
        return x
    fast = _upsampling_fits(x, dims, out_shape, scales, method, coord, rounding)
    if fast is not None and not exclude:
        return node.call(
            "nn.upsampling",
            x,
            scale_h=float(scales[2]),
            scale_w=float(scales[3]),
            method=fast,
            align_corners=coord == "align_corners",
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
