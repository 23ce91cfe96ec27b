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
    fill = node.attr("value")
    if fill is None:
        fill = np.zeros((1,), dtype="float32")
    if fill.size != 1:
        raise node.error(f"attribute 'value' must hold one element, found {fill.size}")
    if node.known(0) is None:
        shape = _shape_operand(node, 0, "shape")
        return node.call("dyn.full", node.scalar(fill.reshape(-1)[0], fill.dtype.name), shape)
    shape = node.static_ints(0, "shape") or []
    if any(d < 0 for d in shape):
        raise node.error(f"shape {tuple(shape)} has a negative dimension")
    return node.const(np.full(shape, fill.reshape(-1)[0], dtype=fill.dtype))


def _shape_operand(node: NodeContext, index: int, what: str) -> Value:
    """Input ``index``, a shape computed at run time: a 1-D int64 tensor of known length."""
    value = node.input(index)
    if value.ndim != 1 or isinstance(value.shape[0], Any):
        raise node.unsupported(
            f"input {index} ({what}) is computed at run time with shape "
            f"{shape_text(value.shape)}; only a 1-D shape of known length is supported"
        )
    if value.dtype not in ("int32", "int64"):
        raise node.error(f"input {index} ({what}) must be an integer tensor, found {value.dtype}")
    return value if value.dtype == "int64" else node.call("cast", value, dtype="int64")


@register("Shape")
def _shape(node: NodeContext) -> Value:
    x = node.input(0)
    start = int(node.attr("start", 0)) if node.opset >= 15 else 0
    end = node.attr("end") if node.opset >= 15 else None
    dims = x.shape[slice(start, None if end is None else int(end))]
    if not any(isinstance(d, Any) for d in dims):
        return node.const(np.asarray([int(d) for d in dims], dtype="int64"))
    # Some dimension is known only when the model runs (after NonZero, TopK with a
    # run-time k, ...): the shape is read then, and its consumers take their dynamic forms.
    shape = node.call("shape_of", x, dtype="int64")
    if (start, end) == (0, None):
        return shape
    begin, stop, _ = slice(start, None if end is None else int(end)).indices(x.ndim)
    return node.call("strided_slice", shape, begin=(begin,), end=(max(begin, stop),), strides=(1,))


@register("Size")
def _size(node: NodeContext) -> Value:
    x = node.input(0)
    dims = x.shape
    if any(isinstance(d, Any) for d in dims):
        return node.call("ndarray_size", x, dtype="int64")
    return node.const(np.asarray(int(np.prod([int(d) for d in dims], dtype=np.int64)), "int64"))


# --- reshaping ---------------------------------------------------------------------------------


@register("Reshape")
def _reshape(node: NodeContext) -> Value:
    x = node.input(0)
    if node.opset < 5:
        raise node.unsupported("Reshape before opset 5 (shape as an attribute) is not supported")
    if node.known(1) is None:
        if int(node.attr("allowzero", 0)):
            raise node.unsupported("allowzero=1 with a target shape computed at run time")
        return node.call("dyn.reshape", x, _shape_operand(node, 1, "shape"))
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
        if (
            node.known(1) is None
            or node.known(2) is None
            or (node.has_input(4) and node.known(4) is None)
        ):
            return _slice_at_run_time(node, x)
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


def _slice_at_run_time(node: NodeContext, x: Value) -> Value:
    """Slice with starts, ends or steps computed at run time: ``dyn.strided_slice`` over the
    axes up to the last one sliced, the others taken whole. The axes must be constants."""
    starts = _shape_operand(node, 1, "starts")
    ends = _shape_operand(node, 2, "ends")
    count = int(starts.shape[0])
    given = node.static_ints(3, "axes")
    axes = list(range(count)) if given is None else given
    if len(axes) != count or int(ends.shape[0]) != count:
        raise node.error("starts, ends and axes must have one entry per sliced axis")
    axes = [normalize_axis(node, a, x.ndim, "slice axis") for a in axes]
    if len(set(axes)) != len(axes):
        raise node.error(f"axes {tuple(axes)} repeat an axis")
    steps = node.optional(4)
    if steps is None:
        steps = node.const(np.ones(count, "int64"))
    else:
        steps = _shape_operand(node, 4, "steps")
    span = max(axes) + 1 if axes else 0
    if span == 0:
        return x
    # Position of each of the first `span` axes in the given lists (0 where not sliced; the
    # mask then picks the whole-axis default instead).
    where_given = np.zeros(span, "int64")
    mask = np.zeros(span, bool)
    for i, axis in enumerate(axes):
        where_given[axis], mask[axis] = i, True

    def spread(values: Value, default: int) -> Value:
        if values.dtype != "int64":
            values = node.call("cast", values, dtype="int64")
        picked = node.call("take", values, node.const(where_given), axis=0)
        return node.call(
            "where", node.const(mask), picked, node.const(np.full(span, default, "int64"))
        )

    return node.call(
        "dyn.strided_slice", x, spread(starts, 0), spread(ends, _BOUND), spread(steps, 1)
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
    if node.known(1) is None:
        return _expand_at_run_time(node, x, _shape_operand(node, 1, "shape"))
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


def _expand_at_run_time(node: NodeContext, x: Value, shape: Value) -> Value:
    """Expand to a shape computed at run time: both shapes are aligned on the right and
    each pair of dimensions broadcast (ONNX's bidirectional rule; a pair that is neither
    equal nor has a 1 fails in ``dyn.broadcast_to`` when it runs)."""
    rank = max(x.ndim, int(shape.shape[0]))
    ones = lambda n: node.const(np.ones(n, "int64"))  # noqa: E731
    own = node.call("shape_of", x, dtype="int64")
    if x.ndim < rank:
        own = node.call("concatenate", [ones(rank - x.ndim), own], axis=0)
    if int(shape.shape[0]) < rank:
        shape = node.call("concatenate", [ones(rank - int(shape.shape[0])), shape], axis=0)
    # A 1 yields to the other side (even to 0); otherwise the requested size stands, and
    # dyn.broadcast_to refuses it when it differs from the input's.
    requested = node.call("where", node.call("equal", shape, ones(rank)), own, shape)
    target = node.call("where", node.call("equal", own, ones(rank)), shape, requested)
    return node.call("dyn.broadcast_to", x, target)


def _tile_at_run_time(node: NodeContext, x: Value, repeats: Value) -> Value:
    """Tile with repeats or input dimensions known only at run time: the same interleaved
    reshape, broadcast and merge as the static form, on shape tensors."""
    dims = node.call("shape_of", x, dtype="int64")
    ones = node.const(np.ones(x.ndim, "int64"))

    def interleave(first: Value, second: Value) -> Value:
        pairs = node.call("stack", [first, second], axis=1)
        return node.call("reshape", pairs, newshape=(2 * x.ndim,))

    out = node.call("dyn.reshape", x, interleave(ones, dims))
    out = node.call("dyn.broadcast_to", out, interleave(repeats, dims))
    return node.call("dyn.reshape", out, node.call("multiply", repeats, dims))


@register("Tile")
def _tile(node: NodeContext) -> Value:
    x = node.input(0)
    if node.known(1) is None:
        repeats_value = _shape_operand(node, 1, "repeats")
        if int(repeats_value.shape[0]) != x.ndim:
            raise node.error(
                f"repeats has {repeats_value.shape[0]} entries, one per axis of "
                f"{shape_text(x.shape)} expected"
            )
        return _tile_at_run_time(node, x, repeats_value)
    repeats = node.static_ints(1, "repeats") or []
    if len(repeats) != x.ndim or any(r < 0 for r in repeats):
        raise node.error(
            f"repeats {tuple(repeats)} must hold one non-negative count per axis of "
            f"{shape_text(x.shape)}"
        )
    if all(r == 1 for r in repeats):
        return x
    if x.static_shape() is None:
        return _tile_at_run_time(node, x, node.const(np.asarray(repeats, "int64")))
    dims = [int(d) for d in x.shape]
    # (d0, d1) tiled (r0, r1) is (1, d0, 1, d1) broadcast to (r0, d0, r1, d1), then merged.
    interleaved = tuple(v for d in dims for v in (1, d))
    target = tuple(v for r, d in zip(repeats, dims) for v in (r, d))
    out = node.call("reshape", x, newshape=interleaved)
    out = node.call("broadcast_to", out, shape=target)
    return node.call("reshape", out, newshape=tuple(r * d for r, d in zip(repeats, dims)))


@register("Range")
def _range(node: NodeContext) -> Value:
    known = [node.known(i) for i in range(3)]
    if any(k is None for k in known):
        parts = [node.input(i) for i in range(3)]
        for i, part in enumerate(parts):
            if part.shape not in ((), (1,)):
                raise node.error(f"input {i} must be a scalar, found {shape_text(part.shape)}")
        scalars = [p if p.shape == () else node.call("reshape", p, newshape=()) for p in parts]
        return node.call("arange", *scalars, dtype=parts[0].dtype)
    start, limit, delta = known
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
