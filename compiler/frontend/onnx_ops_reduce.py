"""ONNX reductions: ``ReduceSum``, ``ReduceMean``, ``ReduceMax``, ``ReduceMin``,
``ReduceProd``, ``ReduceL1``, ``ReduceL2``, ``ReduceSumSquare``, ``ReduceLogSum``,
``ReduceLogSumExp``, ``ArgMax`` and ``ArgMin``.

Compiler layer (``compiler.frontend``); does not import ``onnx``. The axes are an
attribute until opset 13 for ``ReduceSum`` and until opset 18 for the others, and an
optional input after.
"""

from __future__ import annotations

from compiler.frontend.onnx_context import NodeContext, Value
from compiler.frontend.onnx_ops_tensor import axes_operand, normalize_axis
from compiler.frontend.onnx_registry import register

_DIRECT = {
    "ReduceSum": "sum",
    "ReduceMean": "mean",
    "ReduceMax": "max",
    "ReduceMin": "min",
    "ReduceProd": "prod",
}
_COMPOSED = ("ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp")


def _axes(node: NodeContext, x: Value) -> tuple[int, ...] | None:
    """The normalized axes to reduce; ``None`` means all, ``()`` means none (identity)."""
    axes = axes_operand(node, 1, 13 if node.op_type == "ReduceSum" else 18)
    if not axes:
        noop = int(node.attr("noop_with_empty_axes", 0))
        return () if noop else None
    normalized = sorted({normalize_axis(node, a, x.ndim, "reduction axis") for a in axes})
    if len(normalized) != len(axes):
        raise node.error(f"axes {tuple(axes)} repeat an axis")
    return tuple(normalized)


@register(*_DIRECT, *_COMPOSED)
def _reduce(node: NodeContext) -> Value:
    x = node.input(0)
    axes = _axes(node, x)
    if axes == ():
        return x
    keepdims = bool(node.attr("keepdims", 1))
    kind = node.op_type
    if kind in _DIRECT:
        return node.call(_DIRECT[kind], x, axis=axes, keepdims=keepdims)
    if kind == "ReduceL1":
        return node.call("sum", node.call("abs", x), axis=axes, keepdims=keepdims)
    if kind in ("ReduceL2", "ReduceSumSquare"):
        squares = node.call("sum", node.call("multiply", x, x), axis=axes, keepdims=keepdims)
        return node.call("sqrt", squares) if kind == "ReduceL2" else squares
    if kind == "ReduceLogSum":
        return node.call("log", node.call("sum", x, axis=axes, keepdims=keepdims))
    # ReduceLogSumExp, shifted by the maximum so that large inputs do not overflow.
    peak = node.call("max", x, axis=axes, keepdims=True)
    total = node.call(
        "sum", node.call("exp", node.call("subtract", x, peak)), axis=axes, keepdims=keepdims
    )
    if not keepdims:
        peak = node.call("squeeze", peak, axis=axes)
    return node.call("add", node.call("log", total), peak)


@register("ArgMax", "ArgMin")
def _arg(node: NodeContext) -> Value:
    x = node.input(0)
    axis = normalize_axis(node, int(node.attr("axis", 0)), x.ndim)
    op = "argmax" if node.op_type == "ArgMax" else "argmin"
    index = node.call(
        op,
        x,
        axis=(axis,),
        keepdims=bool(node.attr("keepdims", 1)),
        select_last_index=bool(node.attr("select_last_index", 0)),
    )
    # Relay's arg reductions give int32; ONNX's give int64.
    return node.call("cast", index, dtype="int64")
