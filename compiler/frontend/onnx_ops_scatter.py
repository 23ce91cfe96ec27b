"""ONNX ``ScatterElements`` (and the older ``Scatter``) and ``ScatterND``, every reduction.

Compiler layer (``compiler.frontend``); does not import ``onnx``. They become Relay's
``scatter_elements`` and ``scatter_nd`` (ONNX's ``none`` reduction is TVM's ``update``;
``ScatterND``'s index tuples move to the front, TVM's layout), whose kernels apply the
updates in order, so any size but the index depth may be known only at run time and
repeated positions reduce as in onnxruntime. Indices known at import are checked here.
"""

from __future__ import annotations

import numpy as np

from compiler.frontend.onnx_context import NodeContext, Value
from compiler.frontend.onnx_ops_index import _check_static_range, _int_indices, index_tuples_first
from compiler.frontend.onnx_ops_tensor import normalize_axis, shape_text
from compiler.frontend.onnx_registry import register
from compiler.ir.types import Any

_REDUCTIONS = {"none": "update", "add": "add", "mul": "mul", "max": "max", "min": "min"}


def _reduction(node: NodeContext) -> str:
    if node.opset < 16:
        return "update"
    allowed = ("none", "add", "mul") if node.opset < 18 else ("none", "add", "mul", "max", "min")
    return _REDUCTIONS[node.check_attr("reduction", allowed, "none")]


def _same_dtype(node: NodeContext, data: Value, updates: Value) -> None:
    if updates.dtype != data.dtype:
        raise node.error(f"updates are {updates.dtype}, data {data.dtype}; they must match")


@register("ScatterElements", "Scatter")
def _scatter_elements(node: NodeContext) -> Value:
    data, indices, updates = node.input(0), _int_indices(node, node.input(1)), node.input(2)
    _same_dtype(node, data, updates)
    if not len(data.shape) == len(indices.shape) == len(updates.shape):
        raise node.error(
            f"data {shape_text(data.shape)}, indices {shape_text(indices.shape)} and updates "
            f"{shape_text(updates.shape)} must have the same rank"
        )
    axis = normalize_axis(node, int(node.attr("axis", 0)), len(data.shape))
    if not isinstance(data.shape[axis], Any):
        _check_static_range(node, indices, np.asarray(data.shape[axis]), "index")
    reduction = _reduction(node) if node.op_type == "ScatterElements" else "update"
    return node.call("scatter_elements", data, indices, updates, axis=axis, reduction=reduction)


@register("ScatterND")
def _scatter_nd(node: NodeContext) -> Value:
    data, indices, updates = node.input(0), _int_indices(node, node.input(1)), node.input(2)
    _same_dtype(node, data, updates)
    moved, depth = index_tuples_first(node, indices)
    if depth > len(data.shape):
        raise node.error(
            f"indices {shape_text(indices.shape)} address {depth} axes, but data "
            f"{shape_text(data.shape)} has {len(data.shape)}"
        )
    indexed = data.shape[:depth]
    if all(not isinstance(d, Any) for d in indexed):
        _check_static_range(node, indices, np.asarray(indexed, dtype=np.int64), "index")
    return node.call("scatter_nd", data, moved, updates, mode=_reduction(node))
