"""ONNX detection operators through ``relay.vision``: ``RoiAlign``.

Compiler layer (``compiler.frontend``); does not import ``onnx``.

``RoiAlign`` becomes ``vision.roi_align`` with the batch indices as the first column of the
regions (TVM's layout); ``half_pixel`` coordinates are its ``aligned`` mode, and
``sampling_ratio=0`` its adaptive sampling.
"""

from __future__ import annotations

from compiler.frontend.onnx_context import NodeContext, Value
from compiler.frontend.onnx_registry import register


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
