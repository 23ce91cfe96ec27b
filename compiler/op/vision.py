"""The ``relay.vision`` namespace: builders for the detection operators.

Compiler layer (``compiler.op``). ``relay.vision.roi_align`` and
``relay.vision.all_class_non_max_suppression`` return ``Call``\\ s like the builders in
:mod:`compiler.op.api`, with TVM's names and argument order; what they compute is in
:mod:`compiler.op.defs_vision`. The suppression's result is a tuple: index the call
(``[0]`` the table of kept rows, ``[1]`` their count).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler.ir.expr import Call, Expr, const
from compiler.op.api import SCHEMA, call_op, schema_defaults

__all__ = ["all_class_non_max_suppression", "roi_align"]


@schema_defaults("vision.roi_align")
def roi_align(
    data: object, rois: object, pooled_size: int | Sequence[int], spatial_scale: float,
    sample_ratio: int = SCHEMA, layout: str = SCHEMA, mode: str = SCHEMA, aligned: bool = SCHEMA,
) -> Call:  # fmt: skip
    """Pool each region of interest of NCHW ``data`` to ``pooled_size`` bins.

    Parameters
    ----------
    data : Expr
        The images, ``(N, C, H, W)``, float.
    rois : Expr
        The regions, ``(R, 5)`` of ``data``'s dtype: batch index, x1, y1, x2, y2.
    pooled_size : int or (int, int)
        The bins per region, (height, width).
    spatial_scale : float
        The factor from region coordinates to pixels of ``data``.
    sample_ratio : int
        Samples per bin along each axis; 0 or less samples ``ceil(region size / bins)``
        along each axis, per region.
    layout : str
        ``"NCHW"``, the one supported.
    mode : str
        ``"avg"`` or ``"max"`` (onnxruntime's: the largest weighted corner term).
    aligned : bool
        Shift coordinates by half a pixel (ONNX's ``half_pixel``); without it, regions
        are at least one pixel wide and high.

    Returns
    -------
    Call
        ``(R, C, pooled height, pooled width)``.
    """
    return call_op(
        "vision.roi_align", [data, rois], pooled_size=pooled_size, spatial_scale=spatial_scale,
        sample_ratio=sample_ratio, layout=layout, mode=mode, aligned=aligned,
    )  # fmt: skip


@schema_defaults("vision.all_class_non_max_suppression")
def all_class_non_max_suppression(
    boxes: object, scores: object, max_output_boxes_per_class: int | Expr,
    iou_threshold: float | Expr, score_threshold: float | Expr | None = None,
    output_format: str = SCHEMA, center_point_box: bool = SCHEMA,
) -> Call:  # fmt: skip
    """Greedy non-maximum suppression of every class's boxes, as ONNX's
    ``NonMaxSuppression``.

    Parameters
    ----------
    boxes : Expr
        ``(B, N, 4)`` float: ``[y1, x1, y2, x2]`` corners in either order, or with
        ``center_point_box`` ``[x_centre, y_centre, width, height]``.
    scores : Expr
        ``(B, C, N)``, of ``boxes``' dtype.
    max_output_boxes_per_class : int or Expr
        The most boxes kept per batch and class (an integer scalar); 0 or less keeps none.
    iou_threshold : float or Expr
        A box overlapping a kept one by a larger intersection over union is dropped; in
        [0, 1] (a float scalar).
    score_threshold : float or Expr, optional
        Only boxes scoring above it are considered; ``None`` (or an empty float tensor)
        considers every box.
    output_format : str
        ``"onnx"`` (TVM's default, the one supported).
    center_point_box : bool
        Boxes are given by centre and size.

    Returns
    -------
    Call
        A tuple: a ``(B * C * N, 3)`` int64 table whose first rows are the kept (batch,
        class, box) triples, per batch, per class, in descending score order (the rest
        zero), and a one-element int64 count of those rows.
    """
    if not isinstance(max_output_boxes_per_class, Expr):
        max_output_boxes_per_class = const(np.int64(max_output_boxes_per_class))
    if not isinstance(iou_threshold, Expr):
        iou_threshold = const(np.float32(iou_threshold))
    if score_threshold is None:
        score_threshold = const(np.zeros(0, np.float32))
    elif not isinstance(score_threshold, Expr):
        score_threshold = const(np.float32(score_threshold))
    return call_op(
        "vision.all_class_non_max_suppression",
        [boxes, scores, max_output_boxes_per_class, iou_threshold, score_threshold],
        output_format=output_format, center_point_box=center_point_box,
    )  # fmt: skip
