"""Image operators: ``image.resize2d``.

Compiler layer (``compiler.op``). The name, attributes and defaults are TVM's
(``relay.image.resize2d``); the arithmetic is onnxruntime's, so that ONNX ``Resize`` imports
as this operator and agrees with onnxruntime, and the VM's kernels
(``vm/kernels/emit_image.py``) agree with these numpy references bit for bit.

``image.resize2d(data; size, roi, layout, method, coordinate_transformation_mode,
rounding_method, cubic_alpha, cubic_exclude, extrapolation_value, out_dtype)`` resizes the
height and width of NCHW ``data`` to ``size``. Along each axis the scale is ``out / in``
(float32), and output index ``x`` samples input coordinate ``(x + 0.5) / scale - 0.5``
(``half_pixel``; ``pytorch_half_pixel`` gives 0 for a one-element output),
``x * (in - 1) / (out - 1)`` (``align_corners``), ``x / scale`` (``asymmetric``),
``(x + 0.5) / scale`` (``tf_half_pixel_for_nn``), ONNX's ``half_pixel_symmetric``, or with
``tf_crop_and_resize`` a point of the region ``roi`` (start_h, start_w, end_h, end_w,
normalized), whose outputs sampling outside the input take ``extrapolation_value``.
Coordinates are float32, computed operation by operation as onnxruntime does.
``nearest_neighbor`` rounds the coordinate by ``rounding_method`` (``round``: ties away from
zero; ``floor``; ``ceil``; ``round_prefer_floor``; ``round_prefer_ceil``; ``""`` is TVM's
choice, ``round`` for ``align_corners`` and ``floor`` otherwise; unlike TVM, ``floor`` and
``ceil`` are exact, without TVM's 1e-5 nudge) and copies the input pixel, clamped into the
image; it takes any numeric dtype. ``linear`` clamps the coordinate into the image and
interpolates its two neighbours; ``cubic`` weighs four neighbours (indices clamped) with Keys'
kernel of coefficient ``cubic_alpha``, and with ``cubic_exclude`` drops taps outside the
image and renormalizes. Weights are float32; interpolation runs along the columns first,
then the rows, in float32 (float64 for float64 data). The result is cast to ``out_dtype``
(``""``: data's dtype).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler.ir.attrs import Attrs
from compiler.ir.types import TensorType, Type
from compiler.op.defs_common import define, result
from compiler.op.defs_window import NCHW, check_layout, fmt_attr, nchw_data, pair
from compiler.op.registry import OpPattern, OpTypeError
from compiler.op.typerel import require_dtype
from vm.kernels.emit_image import (
    COORDINATE_MODES,
    RESIZE_METHODS,
    ROUNDING_METHODS,
    check_resize2d,
    resolved_rounding,
)
from vm.kernels.rules import RuleError

#: ``method`` as :func:`axis_taps` names it.
_TAPS_MODE = {"nearest_neighbor": "nearest", "linear": "linear", "cubic": "cubic"}


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
        ``coordinate_transformation_mode``: ONNX's, or TVM's ``tf_half_pixel_for_nn``.
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
    if mode == "tf_half_pixel_for_nn":
        return (x + f(0.5)) / scale
    start, end = f(roi[0]), f(roi[1])
    if out_size == 1:
        return np.full_like(x, f(0.5) * (start + end) * f(in_size - 1))
    return start * f(in_size - 1) + x * (end - start) * f(in_size - 1) / f(out_size - 1)


def nearest_index(coords: np.ndarray, rounding: str) -> np.ndarray:
    """The input index ``rounding`` picks for each coordinate (before clamping): ONNX's
    ``nearest_mode`` (``floor``, ``ceil``, ``round_prefer_floor``, ``round_prefer_ceil``) or
    ``round`` (ties away from zero)."""
    if rounding == "floor":
        return np.floor(coords)
    if rounding == "ceil":
        return np.ceil(coords)
    tie = coords - np.floor(coords) == 0.5
    if rounding == "round_prefer_floor":
        return np.where(tie, np.floor(coords), np.floor(coords + 0.5))
    if rounding == "round_prefer_ceil":
        return np.where(tie, np.ceil(coords), np.floor(coords + 0.5))
    # "round": ties away from zero
    away = np.where(coords > 0, np.ceil(coords), np.floor(coords))
    return np.where(tie, away, np.floor(coords + 0.5))


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
        ``indices`` (int64) and ``weights`` (float32; ones for nearest) of shape (taps,
        out_size), indices
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
        # Far outside the input (tf_crop_and_resize's filled outputs) no tap is left: 0 / 0.
        with np.errstate(invalid="ignore"):
            weights = weights / weights.sum(axis=0, keepdims=True)
    return np.clip(raw, 0, last), weights, outside


def _choice(attrs: Attrs, name: str, choices: Sequence[str]) -> str:
    """Re-check a choice attribute: a hand-built call may hold any value."""
    value = attrs[name]
    if value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        raise OpTypeError(
            f"image.resize2d: attribute {name}={fmt_attr(value)} must be one of {allowed}"
        )
    return value  # type: ignore[return-value]


def _resize2d_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """image.resize2d(data; size, ...): (N, C, H, W) -> (N, C, size[0], size[1])."""
    op = "image.resize2d"
    data = nchw_data(op, arg_types[0])
    check_layout(op, attrs, "layout", (NCHW,))
    method = _choice(attrs, "method", RESIZE_METHODS)
    _choice(attrs, "coordinate_transformation_mode", COORDINATE_MODES)
    _choice(attrs, "rounding_method", ROUNDING_METHODS)
    require_dtype(op, data, "data", "numeric" if method == "nearest_neighbor" else "float")
    try:
        check_resize2d(attrs)
    except RuleError as error:
        raise OpTypeError(f"{op}: {error}") from None
    out_h, out_w = pair(op, attrs, "size")
    return TensorType(
        [data.shape[0], data.shape[1], out_h, out_w], attrs["out_dtype"] or data.dtype
    )


def _resize2d(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    (data,) = args
    out_type = _resize2d_rel([TensorType(data.shape, data.dtype.name)], attrs)
    out_dtype = out_type.dtype  # type: ignore[attr-defined]
    n, c, height, width = data.shape
    out_h, out_w = pair("image.resize2d", attrs, "size")
    if n * c == 0:
        return np.zeros((n, c, out_h, out_w), out_dtype)
    if height < 1 or width < 1:
        raise ValueError(
            f"image.resize2d: cannot resize data {data.shape}, an image with no rows or "
            f"columns, to size ({out_h}, {out_w})"
        )
    method = _TAPS_MODE[attrs["method"]]  # type: ignore[index]
    coord = str(attrs["coordinate_transformation_mode"])
    roi = attrs["roi"]
    tables = []
    for axis, (size, out) in enumerate(((height, out_h), (width, out_w))):
        scale = np.float32(out) / np.float32(size)
        region = (roi[axis], roi[axis + 2])  # type: ignore[index]
        coords = source_coordinates(coord, out, size, scale, region)
        tables.append(
            axis_taps(
                method,
                coords,
                size,
                rounding=resolved_rounding(attrs),
                cubic_a=float(attrs["cubic_alpha"]),  # type: ignore[arg-type]
                exclude_outside=bool(attrs["cubic_exclude"]),
                extrapolate=coord == "tf_crop_and_resize",
            )
        )
    (rows, row_w, out_rows), (cols, col_w, out_cols) = tables
    if method == "nearest":
        value = data[:, :, rows[0]][:, :, :, cols[0]]
    else:
        t = np.float64 if data.dtype == np.float64 else np.float32
        x = data.astype(t)
        row_w, col_w = row_w.astype(t), col_w.astype(t)  # float32 weights, widened for float64
        across = x[:, :, :, cols[0]] * col_w[0]
        for k in range(1, len(cols)):
            across = across + x[:, :, :, cols[k]] * col_w[k]
        value = across[:, :, rows[0], :] * row_w[0][:, None]
        for k in range(1, len(rows)):
            value = value + across[:, :, rows[k], :] * row_w[k][:, None]
    value = result(value, out_dtype)
    if coord == "tf_crop_and_resize":
        outside = np.zeros((out_h, out_w), bool)
        for mask, shape in ((out_rows, (out_h, 1)), (out_cols, (1, out_w))):
            if mask is not None:
                outside = outside | mask.reshape(shape)
        fill = np.asarray(float(attrs["extrapolation_value"])).astype(out_dtype)  # type: ignore[arg-type]
        value = np.where(outside, fill, value).astype(out_dtype)
    return value


define(
    "image.resize2d",
    ("data",),
    _resize2d_rel,
    _resize2d,
    OpPattern.INJECTIVE,
    doc="resize the height and width of NCHW data (nearest, linear or cubic)",
)
