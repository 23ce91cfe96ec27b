"""ONNX detection operators: ``NonMaxSuppression`` and ``RoiAlign``, through
``relay.vision``.

Compiler layer (``compiler.frontend``); does not import ``onnx``.

``NonMaxSuppression`` becomes ``vision.all_class_non_max_suppression``, whose table of
kept (batch, class, box) rows has room for every box, followed by a ``dyn.strided_slice``
of its first rows up to the count it returns, as TVM's frontend builds it: the slice's
shape function reads the count when the model runs, so one executable serves inputs that
keep any number of boxes. Absent optional inputs take ONNX's defaults: no boxes kept
(``max_output_boxes_per_class`` 0), ``iou_threshold`` 0, and no score threshold (an empty
``score_threshold``).

``RoiAlign`` becomes ``vision.roi_align`` with the batch indices as the first column of the
regions (TVM's layout); ``half_pixel`` coordinates are its ``aligned`` mode, and
``sampling_ratio=0`` its adaptive sampling.
"""

from __future__ import annotations

import numpy as np

from compiler.frontend.onnx_context import NodeContext, Value
from compiler.frontend.onnx_registry import register


@register("NonMaxSuppression")
def _non_max_suppression(node: NodeContext) -> Value:
    boxes, scores = node.input(0), node.input(1)
    center = node.check_attr("center_point_box", (0, 1), 0)
    defaults = (
        node.scalar(0, "int64"),
        node.scalar(0.0, "float32"),
        node.const(np.zeros(0, "float32")),
    )
    limit, iou, threshold = (
        node.input(k) if node.has_input(k) else default for k, default in enumerate(defaults, 2)
    )
    out = node.call(
        "vision.all_class_non_max_suppression", boxes, scores, limit, iou, threshold,
        center_point_box=bool(center),
    )  # fmt: skip
    table, count = node.item(out, 0), node.item(out, 1)
    first, step = node.const(np.array([0], "int64")), node.const(np.array([1], "int64"))
    return node.call("dyn.strided_slice", table, first, count, step)


@register("RoiAlign")
def _roi_align(node: NodeContext) -> Value:
    x, rois, indices = node.input(0), node.input(1), node.input(2)
    if node.opset >= 16:
        transform = node.check_attr(
            "coordinate_transformation_mode", ("half_pixel", "output_half_pixel"), "half_pixel"
        )
    else:
        transform = "output_half_pixel"
    mode = node.check_attr("mode", ("avg", "max"), "avg")
    if indices.dtype not in ("int32", "int64"):
        raise node.error(f"batch_indices must be int64 (or int32), found {indices.dtype}")
    column = node.call("expand_dims", node.call("cast", indices, dtype=x.dtype), axis=1)
    regions = node.call("concatenate", [column, node.call("cast", rois, dtype=x.dtype)], axis=1)
    return node.call(
        "vision.roi_align", x, regions,
        pooled_size=(int(node.attr("output_height", 1)), int(node.attr("output_width", 1))),
        spatial_scale=float(node.attr("spatial_scale", 1.0)),
        sample_ratio=int(node.attr("sampling_ratio", 0)),
        mode=mode,
        aligned=transform == "half_pixel",
    )  # fmt: skip
