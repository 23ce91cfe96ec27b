"""Detection operators: ``vision.roi_align`` and ``vision.all_class_non_max_suppression``.

Compiler layer (``compiler.op``). Names, arguments and attributes are TVM's
(``relay.vision``); the arithmetic is onnxruntime's, done in the data's compute type
(float32 for float16 and float32), so that the VM's kernels
(``vm/kernels/emit_vision.py``) and these numpy references agree with onnxruntime.

``vision.roi_align(data, rois; pooled_size, spatial_scale, sample_ratio, layout, mode,
aligned)``: ``data`` is NCHW, each row of ``rois`` is (batch index, x1, y1, x2, y2) in
image coordinates times ``spatial_scale``. Each region is cut into ``pooled_size`` bins;
each bin averages (``mode="avg"``) or takes the maximum of (``"max"``) bilinear samples on
a ``sample_ratio`` square grid, or with ``sample_ratio <= 0`` on a grid of
``ceil(region size / bins)`` samples along each axis, per region. ``aligned`` shifts
coordinates by half a pixel (ONNX's ``half_pixel``, torchvision's ``aligned``); without it
a region is at least one pixel wide and high. A sample more than a pixel outside the
image counts as zero. Max mode takes the largest of the four weighted corner terms of each
sample, as onnxruntime does.

``vision.all_class_non_max_suppression(boxes, scores, max_output_boxes_per_class,
iou_threshold, score_threshold; output_format, center_point_box)``: for every batch and
class, boxes scoring above ``score_threshold`` (every box if it holds no value) are taken
in descending score order (ties: lower box index first) and kept unless their
intersection over union with a box already kept exceeds ``iou_threshold`` (in [0, 1]),
until ``max_output_boxes_per_class`` are kept (none if it is 0 or negative). Boxes are
``[y1, x1, y2, x2]`` corners in either order, or with ``center_point_box`` ``[x_centre,
y_centre, width, height]``. The result (``output_format="onnx"``, TVM's) is a
``(batch * classes * boxes, 3)`` int64 table whose first rows are the kept (batch, class,
box) triples in that order, the rest zero, and a one-element int64 count of those rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler.ir.attrs import Attrs
from compiler.ir.types import Any, TensorType, TupleType, Type
from compiler.op.defs_common import define, result
from compiler.op.defs_window import NCHW, check_layout, nchw_data, pair
from compiler.op.registry import OpPattern, OpTypeError
from compiler.op.typerel import (
    fmt_type,
    merge_dims,
    product,
    require_dtype,
    require_same_dtype,
    tensor_arg,
)

OPAQUE = OpPattern.OPAQUE

#: The most adaptive samples per bin along one axis (``vm/kernels/emit_vision.py``'s).
_MAX_GRID = 1 << 24


def _compute_type(dtype: np.dtype) -> type:
    """The scalar type arithmetic on ``dtype`` happens in (float32 for float16)."""
    return np.float64 if dtype == np.float64 else np.float32


def _one_value(op: str, array: np.ndarray, name: str, allow_none: bool = False) -> object:
    """The value of a scalar or one-element argument (``None`` if it holds none and that
    is allowed)."""
    values = np.asarray(array).reshape(-1)
    if values.size == 1:
        return values[0]
    if values.size == 0 and allow_none:
        return None
    wanted = "one value, or none" if allow_none else "one value"
    raise ValueError(f"{op}: {name} must hold {wanted}, found {values.size}")


def _scalar_arg(op: str, ty: Type, name: str, kind: str, lengths: tuple[int, ...]) -> None:
    """Argument ``name`` is a scalar, or a vector of one of ``lengths`` elements."""
    tensor = tensor_arg(op, ty, name)
    require_dtype(op, tensor, name, kind)
    fits = tensor.ndim == 0 or (
        tensor.ndim == 1 and (isinstance(tensor.shape[0], Any) or tensor.shape[0] in lengths)
    )
    if not fits:
        count = " or ".join(str(n) for n in lengths)
        raise OpTypeError(
            f"{op}: argument {name} must be a scalar or hold {count} element(s), found "
            f"{fmt_type(tensor)}"
        )


# --- vision.roi_align --------------------------------------------------------------------------


def _roi_align_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """vision.roi_align(data, rois; pooled_size, ...): (N, C, H, W) and (R, 5) ->
    (R, C, pooled height, pooled width)."""
    op = "vision.roi_align"
    data = nchw_data(op, arg_types[0])
    rois = tensor_arg(op, arg_types[1], "rois")
    require_dtype(op, data, "data", "float")
    require_same_dtype(op, [("data", data), ("rois", rois)])
    if rois.ndim != 2:
        raise OpTypeError(f"{op}: argument rois must be 2-D (regions, 5), found {fmt_type(rois)}")
    merge_dims(op, "rois columns (batch index, x1, y1, x2, y2)", rois.shape[1], 5)
    check_layout(op, attrs, "layout", (NCHW,))
    ph, pw = pair(op, attrs, "pooled_size")
    return TensorType((rois.shape[0], data.shape[1], ph, pw), data.dtype)


def _axis_samples(
    t: type, start: object, length: object, bins: int, grid: int, size: int
) -> tuple[np.ndarray, ...]:
    """For each of the ``bins * grid`` samples of a region along an axis of ``size``
    pixels: whether it lies within a pixel of the image, its low and high pixel, and their
    weights, computed as onnxruntime computes them (a NaN position counts as outside)."""
    b = np.repeat(np.arange(bins), grid).astype(t)
    g = np.tile(np.arange(grid), bins).astype(t)
    step = length / t(bins)
    with np.errstate(all="ignore"):
        y = start + b * step + (g + t(0.5)) * step / t(grid)
        inside = (y >= -1.0) & (y <= size)
        y = np.where(y <= 0, t(0), y).astype(t)
        low = np.where(inside, y, 0).astype(np.int64)
    last = low >= size - 1
    low = np.where(last, size - 1, low)
    high = np.where(last, low, low + 1)
    y = np.where(last, low.astype(t), y)
    w_high = (y - low.astype(t)).astype(t)
    w_low = (t(1) - w_high).astype(t)
    return inside, low, high, w_low, w_high


def _std_max(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C++'s ``std::max`` elementwise: ``a`` unless ``a < b``."""
    return np.where(a < b, b, a)


def _std_min(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C++'s ``std::min`` elementwise: ``a`` unless ``b < a``."""
    return np.where(b < a, b, a)


def _roi_align(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    op = "vision.roi_align"
    data, rois = args
    t = _compute_type(data.dtype)
    n, c, h, w = data.shape
    r = rois.shape[0]
    if rois.shape[1] != 5:
        raise ValueError(f"{op}: rois must have 5 columns (batch index, x1, y1, x2, y2)")
    if r and (h < 1 or w < 1):
        raise ValueError(f"{op}: data {data.shape} must have at least one row and column")
    ph, pw = pair(op, attrs, "pooled_size")
    ratio = int(attrs["sample_ratio"])  # type: ignore[call-overload]
    aligned = bool(attrs["aligned"])
    scale = t(attrs["spatial_scale"])
    offset = t(0.5 if aligned else 0.0)
    image = data.astype(t)
    regions = rois.astype(t)
    out = np.zeros((r, c, ph, pw), t)
    for k in range(r):
        if not 0 <= regions[k, 0] < n:
            raise ValueError(
                f"{op}: the batch index {regions[k, 0]} of region {k} (rois column 0) is "
                f"outside the batch of data ({n} images)"
            )
        batch = int(regions[k, 0])
        x0, y0, x1, y1 = (regions[k, j] * scale - offset for j in range(1, 5))
        rw, rh = x1 - x0, y1 - y0
        if not aligned:  # malformed regions are taken as 1 pixel wide or high
            rw, rh = (t(1) if v < t(1) else v for v in (rw, rh))
        grids = []
        for length, bins in ((rh, ph), (rw, pw)):
            if ratio > 0:
                grids.append(ratio)
                continue
            ceil = np.ceil(length / t(bins))
            if ceil > _MAX_GRID:
                raise ValueError(
                    f"{op}: region {k} is too large to sample adaptively (over {_MAX_GRID} "
                    "samples per bin along an axis); give a fixed sample_ratio"
                )
            grids.append(int(ceil) if ceil >= 1 else 0)
        gh, gw = grids
        count = max(gh * gw, 1)
        oky, ylo, yhi, wyl, wyh = _axis_samples(t, y0, rh, ph, gh, h)
        okx, xlo, xhi, wxl, wxh = _axis_samples(t, x0, rw, pw, gw, w)
        plane = image[batch]  # (C, H, W)
        # onnxruntime reads pixel (0, 0) with weight 0 for a sample outside the image.
        outside = t(0) * plane[:, 0:1, 0:1]
        acc = np.zeros((c, ph, pw), t)
        with np.errstate(all="ignore"):
            for iy in range(gh):
                ky = np.arange(ph) * gh + iy
                for ix in range(gw):
                    kx = np.arange(pw) * gw + ix
                    inside = oky[ky][:, None] & okx[kx][None, :]
                    terms = []
                    for (ys, wy), (xs, wx) in (
                        ((ylo, wyl), (xlo, wxl)),
                        ((ylo, wyl), (xhi, wxh)),
                        ((yhi, wyh), (xlo, wxl)),
                        ((yhi, wyh), (xhi, wxh)),
                    ):
                        weight = wy[ky][:, None] * wx[kx][None, :]
                        pixels = plane[:, ys[ky][:, None], xs[kx][None, :]]
                        terms.append(np.where(inside, weight * pixels, outside))
                    if attrs["mode"] == "avg":
                        acc = acc + (((terms[0] + terms[1]) + terms[2]) + terms[3])
                    else:
                        value = _std_max(_std_max(_std_max(terms[0], terms[1]), terms[2]), terms[3])
                        acc = value if iy == 0 and ix == 0 else _std_max(acc, value)
        out[k] = acc / t(count) if attrs["mode"] == "avg" else acc
    return result(out, data.dtype)


define(
    "vision.roi_align",
    ("data", "rois"),
    _roi_align_rel,
    _roi_align,
    OPAQUE,
    doc="bilinear samples of each region of interest, pooled to a fixed grid of bins",
)


# --- vision.all_class_non_max_suppression ------------------------------------------------------


def _nms_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """vision.all_class_non_max_suppression(boxes (B, N, 4), scores (B, C, N), ...):
    a (B * C * N, 3) int64 table of kept (batch, class, box) rows and their count."""
    op = "vision.all_class_non_max_suppression"
    boxes = tensor_arg(op, arg_types[0], "boxes")
    scores = tensor_arg(op, arg_types[1], "scores")
    require_dtype(op, boxes, "boxes", "float")
    require_same_dtype(op, [("boxes", boxes), ("scores", scores)])
    for name, tensor, layout in (
        ("boxes", boxes, "(batches, boxes, 4)"),
        ("scores", scores, "(batches, classes, boxes)"),
    ):
        if tensor.ndim != 3:
            raise OpTypeError(
                f"{op}: argument {name} must be 3-D {layout}, found {fmt_type(tensor)}"
            )
    merge_dims(op, "boxes coordinates (axis 2)", boxes.shape[2], 4)
    b = merge_dims(op, "scores batches (axis 0) against boxes", scores.shape[0], boxes.shape[0])
    n = merge_dims(
        op, "scores boxes (axis 2) against boxes (axis 1)", scores.shape[2], boxes.shape[1]
    )
    _scalar_arg(op, arg_types[2], "max_output_boxes_per_class", "int", (1,))
    _scalar_arg(op, arg_types[3], "iou_threshold", "float", (1,))
    _scalar_arg(op, arg_types[4], "score_threshold", "float", (0, 1))
    rows = product([b, scores.shape[1], n])
    return TupleType([TensorType((rows, 3), "int64"), TensorType((1,), "int64")])


def _box_edges(boxes: np.ndarray, t: type, center: bool) -> tuple[np.ndarray, ...]:
    """xmin, xmax, ymin, ymax and area of each box (N, 4), as onnxruntime computes them."""
    coords = boxes.astype(t)
    if center:
        half_w, half_h = coords[:, 2] / t(2), coords[:, 3] / t(2)
        xmin, xmax = coords[:, 0] - half_w, coords[:, 0] + half_w
        ymin, ymax = coords[:, 1] - half_h, coords[:, 1] + half_h
    else:
        edges = []
        for first, second in ((1, 3), (0, 2)):
            a, b = coords[:, first], coords[:, second]
            swap = a >= b
            edges += [np.where(swap, b, a), np.where(swap, a, b)]
        xmin, xmax, ymin, ymax = edges
    with np.errstate(all="ignore"):
        area = (xmax - xmin) * (ymax - ymin)
    return xmin, xmax, ymin, ymax, area


def _suppressed(top: int, kept: np.ndarray, edges: tuple[np.ndarray, ...], iou: object) -> bool:
    """Whether box ``top`` overlaps any of the boxes ``kept`` by more than ``iou``
    (onnxruntime's ``SuppressByIOU``, each early exit a condition)."""
    xmin, xmax, ymin, ymax, area = edges
    with np.errstate(all="ignore"):
        lo_x, hi_x = _std_max(xmin[top], xmin[kept]), _std_min(xmax[top], xmax[kept])
        lo_y, hi_y = _std_max(ymin[top], ymin[kept]), _std_min(ymax[top], ymax[kept])
        inter = (hi_x - lo_x) * (hi_y - lo_y)
        union = area[top] + area[kept] - inter
        ratio = inter / union
    overlapping = ~(hi_x <= lo_x) & ~(hi_y <= lo_y) & ~(inter <= 0)
    measurable = ~(area[top] <= 0) & ~(area[kept] <= 0) & ~(union <= 0)
    return bool(np.any(overlapping & measurable & (ratio > iou)))


def _nms(args: Sequence[np.ndarray], attrs: Attrs) -> tuple[np.ndarray, np.ndarray]:
    op = "vision.all_class_non_max_suppression"
    boxes, scores = args[0], args[1]
    t = _compute_type(boxes.dtype)
    b, n, coordinates = boxes.shape
    batches, c, count = scores.shape
    if coordinates != 4 or batches != b or count != n:
        raise ValueError(
            f"{op}: boxes {boxes.shape} must be (batches, boxes, 4) and scores {scores.shape} "
            "(batches, classes, boxes) with the same batches and boxes"
        )
    limit = int(_one_value(op, args[2], "max_output_boxes_per_class"))  # type: ignore[call-overload]
    iou = t(_one_value(op, args[3], "iou_threshold"))
    if not 0 <= iou <= 1:
        raise ValueError(f"{op}: iou_threshold must be between 0 and 1, found {iou}")
    threshold = _one_value(op, args[4], "score_threshold", allow_none=True)
    center = bool(attrs["center_point_box"])
    rows: list[tuple[int, int, int]] = []
    for bi in range(b):
        edges = _box_edges(boxes[bi], t, center)
        for ci in range(c):
            line = scores[bi, ci].astype(t)
            candidates = np.arange(n) if threshold is None else np.flatnonzero(line > t(threshold))
            # Descending score; the stable sort keeps equal scores in box order.
            order = candidates[np.argsort(-line[candidates], kind="stable")]
            kept: list[int] = []
            for top in order.tolist():
                if len(kept) >= limit:
                    break
                if kept and _suppressed(top, np.array(kept), edges, iou):
                    continue
                kept.append(top)
                rows.append((bi, ci, top))
    table = np.zeros((b * c * n, 3), np.int64)
    if rows:
        table[: len(rows)] = rows
    return table, np.array([len(rows)], np.int64)


define(
    "vision.all_class_non_max_suppression",
    ("boxes", "scores", "max_output_boxes_per_class", "iou_threshold", "score_threshold"),
    _nms_rel,
    _nms,
    OPAQUE,
    doc="the boxes kept by greedy non-maximum suppression, per batch and class",
)
