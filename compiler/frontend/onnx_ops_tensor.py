"""ONNX operators that move or build data: constants, shapes, reshapes, slicing, gathering,
concatenation, splitting, broadcasting, tiling and padding.

Compiler layer (``compiler.frontend``); does not import ``onnx``. Operands that Relay
keeps as attributes (target shapes, axes, slice bounds, pads) must be known when the
model is imported; ``Shape`` of a statically shaped tensor is a constant, so the usual
``Shape -> Gather -> Concat -> Reshape`` chains of exported models fold away.
"""

from __future__ import annotations

import numpy as np

from compiler.frontend.onnx_context import NodeContext, Value
from compiler.frontend.onnx_registry import register
from compiler.ir.types import Any

#: Slice bounds are clamped to this magnitude (ONNX writes "to the end" as INT64_MAX);
#: Python's slice rules then give ONNX's clamping for every real dimension.
_BOUND = 2**31 - 1


def normalize_axis(node: NodeContext, axis: int, ndim: int, what: str = "axis") -> int:
    """``axis`` in ``[0, ndim)``; an error naming the node if it is out of range."""
    if not -ndim <= axis < ndim:
        raise node.error(f"{what} {axis} is out of range for a tensor of rank {ndim}")
    return axis + ndim if axis < 0 else axis


def axes_operand(node: NodeContext, index: int, attr_opset: int) -> list[int] | None:
    """``axes`` as an attribute before opset ``attr_opset``, else as optional input ``index``."""
    if node.opset < attr_opset:
        value = node.attr("axes")
        return None if value is None else [int(a) for a in value]
    return node.static_ints(index, "axes")


def shape_text(shape: tuple) -> str:
    return "(" + ", ".join("?" if isinstance(d, Any) else str(d) for d in shape) + ")"


# --- constants and shapes ----------------------------------------------------------------------


@register("Constant")
def _constant(node: NodeContext) -> Value:
    given = [key for key in node.attrs if key.startswith(("value", "sparse_value"))]
    if len(given) != 1:
        raise node.error(f"must have exactly one value attribute, found {given or 'none'}")
    key = given[0]
    value = node.attr(key)
    if key == "value":
        return node.const(value)
    if key == "value_float":
        return node.const(value, "float32")
    if key == "value_floats":
        return node.const(np.asarray(value, dtype="float32").reshape(-1))
    if key == "value_int":
        return node.const(value, "int64")
    if key == "value_ints":
        return node.const(np.asarray(value, dtype="int64").reshape(-1))
    raise node.unsupported(f"attribute {key!r} is not supported (no string or sparse constants)")


@register("ConstantOfShape")
def _constant_of_shape(node: NodeContext) -> Value:
    shape = node.static_ints(0, "shape") or []
    if any(d < 0 for d in shape):
        raise node.error(f"shape {tuple(shape)} has a negative dimension")
    fill = node.attr("value")
    if fill is None:
        fill = np.zeros((1,), dtype="float32")
    if fill.size != 1:
        raise node.error(f"attribute 'value' must hold one element, found {fill.size}")
    return node.const(np.full(shape, fill.reshape(-1)[0], dtype=fill.dtype))


def _static_dims(node: NodeContext, x: Value, dims: tuple, what: str) -> list[int]:
    if any(isinstance(d, Any) for d in dims):
        raise node.unsupported(
            f"{what} of input {node.input_name(0)!r} with shape {shape_text(x.shape)} is only "
            "known at run time; give the model's inputs static shapes (from_onnx's shape= "
            "argument) to import it"
        )
    return [int(d) for d in dims]


@register("Shape")
def _shape(node: NodeContext) -> Value:
    x = node.input(0)
    start = int(node.attr("start", 0)) if node.opset >= 15 else 0
    end = node.attr("end") if node.opset >= 15 else None
    dims = x.shape[slice(start, None if end is None else int(end))]
    return node.const(np.asarray(_static_dims(node, x, dims, "the shape"), dtype="int64"))


@register("Size")
def _size(node: NodeContext) -> Value:
    x = node.input(0)
    dims = _static_dims(node, x, x.shape, "the size")
    return node.const(np.asarray(int(np.prod(dims, dtype=np.int64)), dtype="int64"))


# --- reshaping ---------------------------------------------------------------------------------


@register("Reshape")
def _reshape(node: NodeContext) -> Value:
    x = node.input(0)
    if node.opset < 5:
        raise node.unsupported("Reshape before opset 5 (shape as an attribute) is not supported")
    shape = node.static_ints(1, "shape") or []
    if any(d < -1 for d in shape):
        raise node.error(f"target shape {tuple(shape)} has an entry below -1")
    if int(node.attr("allowzero", 0)) and 0 in shape:
        raise node.unsupported(
            f"allowzero=1 with a 0 in the target shape {tuple(shape)} (a tensor with no "
            "elements) is not supported"
        )
    # ONNX's 0 (copy the input dimension at the same position) and -1 (infer) mean the same
    # in Relay's reshape, so the target shape passes through unchanged.
    return node.call("reshape", x, newshape=tuple(shape))


@register("Flatten")
def _flatten(node: NodeContext) -> Value:
    x = node.input(0)
    axis = int(node.attr("axis", 1))
    if not -x.ndim <= axis <= x.ndim:
        raise node.error(f"axis {axis} is out of range for a tensor of rank {x.ndim}")
    axis = axis + x.ndim if axis < 0 else axis
    if axis == 1 and x.ndim >= 2:
        return node.call("nn.batch_flatten", x)
    left, right = x.shape[:axis], x.shape[axis:]
    if all(isinstance(d, int) for d in left):
        newshape = (int(np.prod(left, dtype=np.int64)), -1)
    elif all(isinstance(d, int) for d in right):
        newshape = (-1, int(np.prod(right, dtype=np.int64)))
    else:
        raise node.unsupported(
            f"flattening {shape_text(x.shape)} at axis {axis} needs the dimensions on one side "
            "of the axis to be known at import time"
        )
    return node.call("reshape", x, newshape=newshape)


@register("Transpose")
def _transpose(node: NodeContext) -> Value:
    perm = node.attr("perm")
    return node.call("transpose", node.input(0), axes=None if perm is None else tuple(perm))


@register("Squeeze")
def _squeeze(node: NodeContext) -> Value:
    x = node.input(0)
    axes = axes_operand(node, 1, 13)
    if axes is None:
        return node.call("squeeze", x)
    axes = sorted({normalize_axis(node, a, x.ndim, "squeeze axis") for a in axes})
    return node.call("squeeze", x, axis=tuple(axes))


@register("Unsqueeze")
def _unsqueeze(node: NodeContext) -> Value:
    x = node.input(0)
    axes = axes_operand(node, 1, 13)
    if not axes:
        raise node.error("needs at least one axis to insert")
    rank = x.ndim + len(axes)
    normalized = sorted(normalize_axis(node, a, rank, "unsqueeze axis") for a in axes)
    if len(set(normalized)) != len(normalized):
        raise node.error(f"axes {tuple(axes)} name the same output axis twice")
    # Inserting in increasing order keeps each later axis index valid in the output.
    out = x
    for axis in normalized:
        out = node.call("expand_dims", out, axis=axis)
    return out


# --- joining and splitting ---------------------------------------------------------------------


@register("Concat")
def _concat(node: NodeContext) -> Value:
    values = node.present_inputs()
    if not values:
        raise node.error("needs at least one input")
    axis = node.attr("axis")
    if axis is None:
        raise node.error("attribute 'axis' is required")
    return node.call("concatenate", values, axis=int(axis))


@register("Split")
def _split(node: NodeContext) -> list[Value]:
    x = node.input(0)
    axis = normalize_axis(node, int(node.attr("axis", 0)), x.ndim)
    dim = x.shape[axis]
    if node.opset < 13:
        sizes = node.attr("split")
    else:
        sizes = node.static_ints(1, "split")
    count = node.num_outputs
    if sizes is not None:
        sizes = [int(s) for s in sizes]
        if len(sizes) != count or any(s < 0 for s in sizes):
            raise node.error(
                f"split sizes {tuple(sizes)} must be {count} non-negative numbers (one per output)"
            )
        if isinstance(dim, int) and sum(sizes) != dim:
            raise node.error(
                f"split sizes {tuple(sizes)} add up to {sum(sizes)}, but axis {axis} of "
                f"{shape_text(x.shape)} has {dim} elements"
            )
    else:
        if node.opset >= 18:
            wanted = node.attr("num_outputs")
            if wanted is not None and int(wanted) != count:
                raise node.error(f"num_outputs={wanted} but the node has {count} outputs")
        if isinstance(dim, int) and dim % count:
            if node.opset < 18:
                raise node.error(
                    f"axis {axis} of {shape_text(x.shape)} does not split into {count} equal parts"
                )
            # Opset 18: every part has ceil(dim / count) elements but the last.
            chunk = -(-dim // count)
            sizes = [chunk] * (count - 1) + [dim - chunk * (count - 1)]
    if sizes is None or (len(set(sizes)) == 1 and isinstance(dim, Any)):
        sections: int | tuple[int, ...] = count
    else:
        sections = tuple(int(v) for v in np.cumsum(sizes)[:-1])
    parts = node.call("split", x, indices_or_sections=sections, axis=axis)
    return [node.item(parts, i) for i in range(count)]


def _clamp(value: int) -> int:
    return max(-_BOUND, min(_BOUND, int(value)))


@register("Slice")
def _slice(node: NodeContext) -> Value:
    x = node.input(0)
    if node.opset < 10:
        starts = [int(v) for v in node.attr("starts", [])]
        ends = [int(v) for v in node.attr("ends", [])]
        axes = node.attr("axes")
        steps = None
    else:
        starts = node.static_ints(1, "starts") or []
        ends = node.static_ints(2, "ends") or []
        axes = node.static_ints(3, "axes")
        steps = node.static_ints(4, "steps")
    if len(starts) != len(ends):
        raise node.error(f"starts {tuple(starts)} and ends {tuple(ends)} differ in length")
    axes = list(range(len(starts))) if axes is None else [int(a) for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    if len(axes) != len(starts) or len(steps) != len(starts):
        raise node.error(
            f"starts, ends, axes and steps must have one entry per sliced axis; found "
            f"{len(starts)}, {len(ends)}, {len(axes)} and {len(steps)}"
        )
    axes = [normalize_axis(node, a, x.ndim, "slice axis") for a in axes]
    if len(set(axes)) != len(axes):
        raise node.error(f"axes {tuple(axes)} repeat an axis")
    if 0 in steps:
        raise node.error(f"steps {tuple(steps)} contain 0")
    if not axes:
        return x
    return node.call(
        "strided_slice",
        x,
        begin=tuple(_clamp(v) for v in starts),
        end=tuple(_clamp(v) for v in ends),
        strides=tuple(int(s) for s in steps),
        axes=tuple(axes),
    )


@register("Gather")
def _gather(node: NodeContext) -> Value:
    data, indices = node.input(0), node.input(1)
    axis = normalize_axis(node, int(node.attr("axis", 0)), data.ndim)
    dim = data.shape[axis]
    if indices.static is not None and isinstance(dim, int):
        idx = np.asarray(indices.static).astype(np.int64)
        bad = idx[(idx < -dim) | (idx >= dim)]
        if bad.size:
            raise node.error(
                f"index {int(bad.reshape(-1)[0])} is out of range for axis {axis} of size {dim}"
            )
        if (idx < 0).any():
            indices = node.const(np.where(idx < 0, idx + dim, idx).astype(indices.dtype))
        return node.call("take", data, indices, axis=axis)
    # Negative indices count from the end in ONNX; "wrap" gives that for every valid index.
    return node.call("take", data, indices, axis=axis, mode="wrap")


# --- broadcasting, tiling, ranges --------------------------------------------------------------


@register("Expand")
def _expand(node: NodeContext) -> Value:
    x = node.input(0)
    shape = node.static_ints(1, "shape") or []
    static = x.static_shape()
    if static is not None:
        try:
            target = tuple(int(d) for d in np.broadcast_shapes(static, tuple(shape)))
        except ValueError:
            raise node.error(
                f"cannot broadcast input shape {shape_text(x.shape)} to {tuple(shape)}"
            ) from None
        if target == static:
            return x
        return node.call("broadcast_to", x, shape=target)
    # Some input dimensions are known only at run time: broadcasting against a constant of
    # the requested shape gives ONNX's bidirectional rule without knowing them.
    if x.dtype == "bool":
        return node.call("logical_or", x, node.call("zeros", shape=tuple(shape), dtype="bool"))
    return node.call("multiply", x, node.call("ones", shape=tuple(shape), dtype=x.dtype))


@register("Tile")
def _tile(node: NodeContext) -> Value:
    x = node.input(0)
    repeats = node.static_ints(1, "repeats") or []
    if len(repeats) != x.ndim or any(r < 0 for r in repeats):
        raise node.error(
            f"repeats {tuple(repeats)} must hold one non-negative count per axis of "
            f"{shape_text(x.shape)}"
        )
    if all(r == 1 for r in repeats):
        return x
    dims = _static_dims(node, x, x.shape, "the shape")
    # (d0, d1) tiled (r0, r1) is (1, d0, 1, d1) broadcast to (r0, d0, r1, d1), then merged.
    interleaved = tuple(v for d in dims for v in (1, d))
    target = tuple(v for r, d in zip(repeats, dims) for v in (r, d))
    out = node.call("reshape", x, newshape=interleaved)
    out = node.call("broadcast_to", out, shape=target)
    return node.call("reshape", out, newshape=tuple(r * d for r, d in zip(repeats, dims)))


@register("Range")
def _range(node: NodeContext) -> Value:
    start = node.static(0, "start")
    limit = node.static(1, "limit")
    delta = node.static(2, "delta")
    if np.asarray(delta).item() == 0:
        raise node.error("delta must not be 0")
    values = np.arange(start.item(), limit.item(), delta.item(), dtype=start.dtype)
    return node.const(values)


# --- padding -----------------------------------------------------------------------------------

_PAD_MODES = {"constant": "constant", "edge": "edge", "reflect": "reflect"}


@register("Pad")
def _pad(node: NodeContext) -> Value:
    x = node.input(0)
    mode = node.check_attr("mode", tuple(_PAD_MODES), "constant")
    if node.opset < 11:
        pads = [int(p) for p in node.attr("pads", [])]
        pad_value: Value = node.scalar(float(node.attr("value", 0.0)), x.dtype)
        axes = list(range(x.ndim))
    else:
        pads = node.static_ints(1, "pads") or []
        value = node.optional(2)
        if value is None:
            pad_value = node.scalar(0, x.dtype)
        else:
            if value.static is None and value.shape not in ((), (1,)):
                raise node.error(
                    f"constant_value must be a scalar, found {shape_text(value.shape)}"
                )
            pad_value = value if value.dtype == x.dtype else node.call("cast", value, dtype=x.dtype)
            if pad_value.shape != ():
                pad_value = node.call("reshape", pad_value, newshape=())
        axes_given = node.static_ints(3, "axes") if node.opset >= 18 else None
        axes = (
            list(range(x.ndim))
            if axes_given is None
            else [normalize_axis(node, a, x.ndim, "pad axis") for a in axes_given]
        )
    if len(pads) != 2 * len(axes):
        raise node.error(
            f"pads {tuple(pads)} must hold a begin and an end for each of the {len(axes)} axes"
        )
    width = [[0, 0] for _ in range(x.ndim)]
    for i, axis in enumerate(axes):
        width[axis] = [pads[i], pads[i + len(axes)]]
    grow = tuple((max(b, 0), max(e, 0)) for b, e in width)
    out = x
    if any(b or e for b, e in grow):
        out = node.call("nn.pad", out, pad_value, pad_width=grow, pad_mode=_PAD_MODES[mode])
    crop = [(axis, b, e) for axis, (b, e) in enumerate(width) if b < 0 or e < 0]
    if crop:
        # Negative pads remove elements: slice them off after padding the rest.
        out = node.call(
            "strided_slice",
            out,
            begin=tuple(-b if b < 0 else 0 for _, b, _ in crop),
            end=tuple(e if e < 0 else _BOUND for _, _, e in crop),
            axes=tuple(axis for axis, _, _ in crop),
        )
    return out
