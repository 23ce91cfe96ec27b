"""ONNX ``ScatterElements`` (and the older ``Scatter``) and ``ScatterND``, every reduction.

Compiler layer (``compiler.frontend``); does not import ``onnx``. Both operators write
each update at one flat position of the data, computed like the element gathers' (a
run-time index times a constant stride plus a constant offset). When the indices are
known at import time the writes are planned here with numpy: each pass writes the k-th
update of every position at once (a ``take`` of the updates and a ``where``), so
repeated positions reduce in order. Indices known only at run time compare every update's
position with every output position: a (updates x data) matrix, so that path is limited
to :data:`MATCH_LIMIT` elements and larger tensors get an error saying so. Without a
reduction the last update of a repeated position wins on both paths.
"""

from __future__ import annotations

import numpy as np

from compiler.frontend.onnx_context import NodeContext, Value
from compiler.frontend.onnx_ops_index import _int_indices, _static_shape, _wrap_negative
from compiler.frontend.onnx_ops_tensor import normalize_axis, shape_text
from compiler.frontend.onnx_registry import register

#: The largest updates x data comparison matrix the run-time-indices path builds.
MATCH_LIMIT = 1 << 22

_COMBINE = {"add": "add", "mul": "multiply", "max": "maximum", "min": "minimum"}


def _reduction(node: NodeContext) -> str:
    if node.opset < 16:
        return "none"
    allowed = ("none", "add", "mul") if node.opset < 18 else ("none", "add", "mul", "max", "min")
    return node.check_attr("reduction", allowed, "none")


def _scatter_static(
    node: NodeContext, data: Value, updates: Value, positions: np.ndarray, reduction: str
) -> Value:
    """Writes at positions known at import time, one pass per repeat of a position."""
    dshape = _static_shape(node, data, "the data shape")
    size = int(np.prod(dshape, dtype=np.int64))
    flat_updates = node.call("reshape", updates, newshape=(-1,))
    out = node.call("reshape", data, newshape=(-1,))
    positions = positions.reshape(-1)
    if reduction == "none":
        # Later writes win: only the last update of each position is written.
        passes = [positions.size - 1 - np.unique(positions[::-1], return_index=True)[1]]
    else:
        # Pass r writes the r-th update of every position, so repeats reduce in order.
        order = np.argsort(positions, kind="stable")
        sorted_positions = positions[order]
        starts = np.flatnonzero(np.r_[True, sorted_positions[1:] != sorted_positions[:-1]])
        rank = np.arange(positions.size) - np.repeat(starts, np.diff(np.r_[starts, positions.size]))
        passes = [order[rank == r] for r in range(int(rank.max()) + 1)] if positions.size else []
    for chosen in passes:
        source = np.zeros(size, dtype=np.int64)
        hit = np.zeros(size, dtype=bool)
        source[positions[chosen]] = chosen
        hit[positions[chosen]] = True
        value = node.call("take", flat_updates, node.const(source), axis=0)
        if reduction != "none":
            value = node.call(_COMBINE[reduction], out, value)
        out = node.call("where", node.const(hit), value, out)
    return node.call("reshape", out, newshape=dshape)


def _identity_element(node: NodeContext, reduction: str, dtype: str) -> Value:
    if reduction == "add":
        return node.scalar(0, dtype)
    if reduction == "mul":
        return node.scalar(1, dtype)
    info = np.finfo(dtype) if dtype.startswith("float") else np.iinfo(dtype)
    extreme = info.min if reduction == "max" else info.max
    if dtype.startswith("float"):
        extreme = -np.inf if reduction == "max" else np.inf
    return node.scalar(extreme, dtype)


def _scatter_dynamic(
    node: NodeContext, data: Value, updates: Value, positions: Value, reduction: str
) -> Value:
    """Writes at run-time positions, by comparing each with every output position."""
    dshape = _static_shape(node, data, "the data shape")
    size = int(np.prod(dshape, dtype=np.int64))
    count = int(np.prod(_static_shape(node, updates, "the updates shape"), dtype=np.int64))
    if size * count > MATCH_LIMIT:
        raise node.unsupported(
            f"with indices known only at run time, scattering {count} updates into "
            f"{size} elements is limited to {MATCH_LIMIT} update-element pairs; make the "
            "indices a constant"
        )
    column = node.call("reshape", positions, newshape=(count, 1))
    grid = node.const(np.arange(size, dtype=positions.dtype).reshape(1, size))
    match = node.call("equal", column, grid)
    flat = node.call("reshape", data, newshape=(size,))
    hit = node.call("any", match, axis=(0,))
    if reduction == "none":
        # The last update of each position wins, as with constant indices.
        order = node.const(np.arange(count, dtype=np.int64).reshape(count, 1))
        candidates = node.call("where", match, order, node.scalar(-1, "int64"))
        last = node.call("max", candidates, axis=(0,))
        flat_updates = node.call("reshape", updates, newshape=(count,))
        written = node.call("take", flat_updates, last, axis=0)
    else:
        values = node.call("reshape", updates, newshape=(count, 1))
        neutral = _identity_element(node, reduction, data.dtype)
        spread = node.call("where", match, values, neutral)
        reduce_op = {"add": "sum", "mul": "prod", "max": "max", "min": "min"}[reduction]
        written = node.call(reduce_op, spread, axis=(0,))
        written = node.call(_COMBINE[reduction], flat, written)
    out = node.call("where", hit, written, flat)
    return node.call("reshape", out, newshape=dshape)


def _check_range(node: NodeContext, indices: Value, sizes: np.ndarray) -> np.ndarray | None:
    """The known indices wrapped into range, or None when they are known only at run time."""
    if indices.static is None:
        return None
    idx = np.asarray(indices.static).astype(np.int64)
    bad = (idx < -sizes) | (idx >= sizes)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise node.error(
            f"index {int(idx[where])} at position {where} is out of range "
            f"(axis size {int(np.broadcast_to(sizes, idx.shape)[where])})"
        )
    return np.where(idx < 0, idx + sizes, idx)


@register("ScatterElements", "Scatter")
def _scatter_elements(node: NodeContext) -> Value:
    data, indices, updates = node.input(0), _int_indices(node, node.input(1)), node.input(2)
    dshape = _static_shape(node, data, "the data shape")
    ishape = _static_shape(node, indices, "the indices shape")
    if updates.shape != indices.shape:
        raise node.error(
            f"updates {shape_text(updates.shape)} must have the shape of indices "
            f"{shape_text(ishape)}"
        )
    if updates.dtype != data.dtype:
        raise node.error(f"updates are {updates.dtype}, data {data.dtype}; they must match")
    if len(dshape) != len(ishape):
        raise node.error(
            f"data {shape_text(dshape)} and indices {shape_text(ishape)} must have the same rank"
        )
    axis = normalize_axis(node, int(node.attr("axis", 0)), len(dshape))
    for d, (a, b) in enumerate(zip(dshape, ishape)):
        if d != axis and b > a:
            raise node.error(
                f"indices {shape_text(ishape)} are larger than data {shape_text(dshape)} on "
                f"axis {d}"
            )
    reduction = _reduction(node) if node.op_type == "ScatterElements" else "none"
    strides = [int(np.prod(dshape[d + 1 :], dtype=np.int64)) for d in range(len(dshape))]
    grid = np.indices(ishape, dtype=np.int64)
    offset = np.zeros(ishape, dtype=np.int64)
    for d in range(len(dshape)):
        if d != axis:
            offset = offset + grid[d] * strides[d]
    known = _check_range(node, indices, np.asarray(dshape[axis]))
    if known is not None:
        return _scatter_static(node, data, updates, known * strides[axis] + offset, reduction)
    idx = _wrap_negative(node, indices, dshape[axis])
    positions = node.call(
        "add",
        node.call("multiply", idx, node.scalar(strides[axis], indices.dtype)),
        node.const(offset.astype(indices.dtype)),
    )
    return _scatter_dynamic(node, data, updates, positions, reduction)


@register("ScatterND")
def _scatter_nd(node: NodeContext) -> Value:
    data, indices, updates = node.input(0), _int_indices(node, node.input(1)), node.input(2)
    dshape = _static_shape(node, data, "the data shape")
    ishape = _static_shape(node, indices, "the indices shape")
    if not ishape or ishape[-1] > len(dshape):
        raise node.error(
            f"indices {shape_text(ishape)} must have rank >= 1 and address at most the "
            f"{len(dshape)} axes of data {shape_text(dshape)}"
        )
    depth = ishape[-1]
    expected = ishape[:-1] + dshape[depth:]
    if tuple(updates.shape) != expected:
        raise node.error(
            f"updates {shape_text(updates.shape)} must have shape {shape_text(expected)} "
            f"(indices {shape_text(ishape)}, data {shape_text(dshape)})"
        )
    if updates.dtype != data.dtype:
        raise node.error(f"updates are {updates.dtype}, data {data.dtype}; they must match")
    reduction = _reduction(node)
    indexed = np.asarray(dshape[:depth], dtype=np.int64)
    inner = int(np.prod(dshape[depth:], dtype=np.int64))
    strides = np.array(
        [int(np.prod(dshape[k + 1 : depth], dtype=np.int64)) for k in range(depth)],
        dtype=np.int64,
    )
    within = np.arange(inner, dtype=np.int64)
    known = _check_range(node, indices, indexed)
    if known is not None:
        rows = (known * strides).sum(axis=-1)
        positions = rows[..., None] * inner + within
        return _scatter_static(node, data, updates, positions, reduction)
    dt = indices.dtype
    wrapped = _wrap_negative(node, indices, node.const(indexed.astype(dt)))
    rows = node.call(
        "sum", node.call("multiply", wrapped, node.const(strides.astype(dt))), axis=(-1,)
    )
    rows = node.call("expand_dims", rows, axis=len(ishape) - 1)
    positions = node.call(
        "add",
        node.call("multiply", rows, node.scalar(inner, dt)),
        node.const(within.astype(dt)),
    )
    return _scatter_dynamic(node, data, updates, positions, reduction)
