"""Gathers and scatters by index tensors: ``gather``, ``gather_nd``, ``scatter_elements``
and ``scatter_nd``.

Compiler layer (``compiler.op``). Names, arguments, attributes and index layouts are
TVM's; the VM's kernels are in ``vm/kernels/emit_index.py``, whose docstring gives the
rules both follow.

``gather(data, indices; axis)``: ``out[i][j][k] = data[i][indices[i][j][k]][k]`` for
``axis=1``; ``indices`` has the rank of ``data`` and is no longer on any other axis.
``gather_nd(data, indices; batch_dims, index_rank)``: ``indices`` is ``(M, B..., Y...)``,
each of its ``Y`` positions an index tuple of length ``M`` into the axes of ``data`` after
the ``B`` batch axes; the result is ``(B..., Y..., rest of data)``. ``index_rank`` gives
``M`` where ``indices``' first axis is ``?``.
``scatter_elements(data, indices, updates; axis, reduction)`` writes ``updates`` where
``gather`` would read; ``scatter_nd(data, indices, updates; mode)`` where ``gather_nd``
would read (no batch axes). Indices count from the end when negative.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler.ir.attrs import Attrs
from compiler.ir.types import Any, Dim, TensorType, Type
from compiler.op.defs_common import define, result
from compiler.op.registry import OpPattern, OpTypeError
from compiler.op.typerel import (
    fmt_type,
    merge_dims,
    normalize_axis,
    require_dtype,
    tensor_arg,
)

_UFUNC_AT = {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}


def _known_longer(a: Dim, b: Dim) -> bool:
    return not isinstance(a, Any) and not isinstance(b, Any) and a > b


def _same_rank(op: str, first: tuple[str, TensorType], *others: tuple[str, TensorType]) -> None:
    for name, ty in others:
        if ty.ndim != first[1].ndim:
            raise OpTypeError(
                f"{op}: {name} {fmt_type(ty)} must have the rank of {first[0]} {fmt_type(first[1])}"
            )


def _not_longer(op: str, indices: TensorType, data: TensorType, axis: int) -> None:
    for d, (a, b) in enumerate(zip(indices.shape, data.shape)):
        if d != axis and _known_longer(a, b):
            raise OpTypeError(
                f"{op}: indices {fmt_type(indices)} are longer than data {fmt_type(data)} on "
                f"axis {d}"
            )


def _wrapped(op: str, indices: np.ndarray, size: int, axis: int) -> np.ndarray:
    """``indices`` into an axis of ``size`` with negatives counted from the end, checked."""
    idx = np.asarray(indices).astype(np.int64)
    bad = (idx < -size) | (idx >= size)
    if bad.any():
        raise IndexError(
            f"{op}: index {int(idx[bad][0])} is out of range for axis {axis} of size {size}"
        )
    return np.where(idx < 0, idx + size, idx)


def _last_of_each(positions: np.ndarray) -> np.ndarray:
    """Where in ``positions`` each distinct value last occurs (so later writes win)."""
    return positions.size - 1 - np.unique(positions[::-1], return_index=True)[1]


def _scatter_flat(
    out: np.ndarray, positions: np.ndarray, updates: np.ndarray, reduction: str
) -> np.ndarray:
    """Apply ``updates`` (rows) at row ``positions`` of the 2-D view ``out`` in order."""
    if reduction == "update":
        last = _last_of_each(positions)
        out[positions[last]] = updates[last]
    elif reduction == "mean":
        original = out.copy()
        np.add.at(out, positions, updates)
        counts = np.bincount(positions, minlength=out.shape[0]).reshape(-1, 1)
        divided = out / (counts + 1).astype(out.dtype)
        out[...] = np.where(counts > 0, divided, original)
    else:
        _UFUNC_AT[reduction].at(out, positions, updates)
    return out


def _scatter_dtypes(
    op: str, data: TensorType, indices: TensorType, updates: TensorType, reduction: str
) -> None:
    require_dtype(op, indices, "indices", "int")
    if updates.dtype != data.dtype:
        raise OpTypeError(
            f"{op}: updates {fmt_type(updates)} must have the dtype of data {fmt_type(data)}"
        )
    if reduction != "update":
        require_dtype(op, data, f"data of reduction {reduction!r}", "numeric")
    if reduction == "mean":
        require_dtype(op, data, "data of reduction 'mean'", "float")


# --- gather --------------------------------------------------------------------------------------


def _gather_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """gather(data, indices; axis): data at indices along axis."""
    op = "gather"
    data = tensor_arg(op, arg_types[0], "data")
    indices = tensor_arg(op, arg_types[1], "indices")
    require_dtype(op, indices, "indices", "int")
    if data.ndim == 0:
        raise OpTypeError(f"{op}: cannot gather from a scalar {fmt_type(data)}")
    _same_rank(op, ("data", data), ("indices", indices))
    axis = normalize_axis(op, attrs["axis"], data.ndim)  # type: ignore[arg-type]
    _not_longer(op, indices, data, axis)
    return TensorType(indices.shape, data.dtype)


def _gather(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    data, indices = args
    axis = normalize_axis("gather", attrs["axis"], data.ndim)  # type: ignore[arg-type]
    idx = _wrapped("gather", indices, data.shape[axis], axis)
    # take_along_axis broadcasts the other axes; gather reads only the indices' extent.
    window = tuple(slice(None) if d == axis else slice(0, n) for d, n in enumerate(idx.shape))
    return result(np.take_along_axis(data[window], idx, axis=axis), data.dtype)


define(
    "gather",
    ("data", "indices"),
    _gather_rel,
    _gather,
    OpPattern.INJECTIVE,
    doc="data at indices along axis, every other index the element's own",
)


# --- gather_nd -----------------------------------------------------------------------------------


def _gather_nd_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """gather_nd(data, indices; batch_dims, index_rank): data at index tuples."""
    op = "gather_nd"
    data = tensor_arg(op, arg_types[0], "data")
    indices = tensor_arg(op, arg_types[1], "indices")
    require_dtype(op, indices, "indices", "int")
    batch = attrs["batch_dims"]
    if indices.ndim == 0:
        raise OpTypeError(f"{op}: indices {fmt_type(indices)} need an index-tuple axis first")
    depth = indices.shape[0]
    given = attrs.get("index_rank")
    if isinstance(depth, Any):
        if given is None:
            raise OpTypeError(
                f"{op}: the index depth (first axis of indices {fmt_type(indices)}) is "
                "unknown; give index_rank"
            )
        depth = given
    elif given is not None and given != depth:
        raise OpTypeError(f"{op}: index_rank={given} but indices {fmt_type(indices)}")
    if batch < 0 or indices.ndim - 1 - batch < 0:  # type: ignore[operator]
        raise OpTypeError(f"{op}: batch_dims={batch} does not fit indices {fmt_type(indices)}")
    if not 1 <= depth <= data.ndim - batch:  # type: ignore[operator]
        raise OpTypeError(
            f"{op}: index tuples of length {depth} must address between 1 and the "
            f"{data.ndim - batch} axes of data {fmt_type(data)} after batch_dims={batch}"  # type: ignore[operator]
        )
    shape = [
        merge_dims(op, f"batch axis {k} of data and indices", data.shape[k], indices.shape[1 + k])
        for k in range(batch)  # type: ignore[call-overload]
    ]
    shape += [*indices.shape[1 + batch :], *data.shape[batch + depth :]]  # type: ignore[operator]
    return TensorType(shape, data.dtype)


def _gather_nd(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    data, indices = args
    batch = int(attrs["batch_dims"])  # type: ignore[arg-type]
    depth = indices.shape[0]
    idx = np.stack(
        [_wrapped("gather_nd", indices[k], data.shape[batch + k], batch + k) for k in range(depth)]
    )
    count = int(np.prod(data.shape[:batch], dtype=np.int64))
    tuples = idx.shape[1 + batch :]
    flat_data = data.reshape((count, *data.shape[batch:]))
    flat_idx = idx.reshape((depth, count, *tuples))
    pieces = [flat_data[b][tuple(flat_idx[:, b])] for b in range(count)]
    out_shape = (*data.shape[:batch], *tuples, *data.shape[batch + depth :])
    out = np.stack(pieces) if pieces else np.zeros((0, *out_shape[batch:]), data.dtype)
    return result(out.reshape(out_shape), data.dtype)


define(
    "gather_nd",
    ("data", "indices"),
    _gather_nd_rel,
    _gather_nd,
    OpPattern.INJECTIVE,
    doc="data at the index tuples along indices' first axis (TVM's layout)",
)


# --- scatter_elements ----------------------------------------------------------------------------


def _scatter_elements_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """scatter_elements(data, indices, updates; axis, reduction)."""
    op = "scatter_elements"
    data = tensor_arg(op, arg_types[0], "data")
    indices = tensor_arg(op, arg_types[1], "indices")
    updates = tensor_arg(op, arg_types[2], "updates")
    _scatter_dtypes(op, data, indices, updates, attrs["reduction"])  # type: ignore[arg-type]
    if data.ndim == 0:
        raise OpTypeError(f"{op}: cannot scatter into a scalar {fmt_type(data)}")
    _same_rank(op, ("data", data), ("indices", indices), ("updates", updates))
    for d, (a, b) in enumerate(zip(indices.shape, updates.shape)):
        merge_dims(op, f"axis {d} of indices and updates", a, b)
    axis = normalize_axis(op, attrs["axis"], data.ndim)  # type: ignore[arg-type]
    _not_longer(op, indices, data, axis)
    return data


def _scatter_elements(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    data, indices, updates = args
    op = "scatter_elements"
    axis = normalize_axis(op, attrs["axis"], data.ndim)  # type: ignore[arg-type]
    idx = _wrapped(op, indices, data.shape[axis], axis)
    grid = list(np.indices(idx.shape, dtype=np.int64))
    grid[axis] = idx
    positions = np.ravel_multi_index(tuple(grid), data.shape).reshape(-1) if idx.size else (
        np.zeros(0, np.int64)
    )  # fmt: skip
    out = data.reshape(-1, 1).copy()
    _scatter_flat(out, positions, updates.reshape(-1, 1), attrs["reduction"])  # type: ignore[arg-type]
    return result(out.reshape(data.shape), data.dtype)


define(
    "scatter_elements",
    ("data", "indices", "updates"),
    _scatter_elements_rel,
    _scatter_elements,
    OpPattern.OPAQUE,
    doc="data with updates written (or reduced) at indices along axis",
)


# --- scatter_nd ----------------------------------------------------------------------------------


def _scatter_nd_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """scatter_nd(data, indices, updates; mode)."""
    op = "scatter_nd"
    data = tensor_arg(op, arg_types[0], "data")
    indices = tensor_arg(op, arg_types[1], "indices")
    updates = tensor_arg(op, arg_types[2], "updates")
    _scatter_dtypes(op, data, indices, updates, attrs["mode"])  # type: ignore[arg-type]
    depth = data.ndim - updates.ndim + indices.ndim - 1
    if indices.ndim == 0 or not 1 <= depth <= data.ndim:
        raise OpTypeError(
            f"{op}: the ranks of data {fmt_type(data)}, indices {fmt_type(indices)} and "
            f"updates {fmt_type(updates)} do not fit: updates must be (index positions..., "
            "data axes after the index depth)"
        )
    merge_dims(op, "the index depth (first axis of indices)", indices.shape[0], depth)
    expected = (*indices.shape[1:], *data.shape[depth:])
    for d, (a, b) in enumerate(zip(updates.shape, expected)):
        merge_dims(op, f"axis {d} of updates {fmt_type(updates)}", a, b)
    return data


def _scatter_nd(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    data, indices, updates = args
    op = "scatter_nd"
    depth = indices.shape[0]
    lead = data.shape[:depth]
    count = int(np.prod(indices.shape[1:], dtype=np.int64))
    idx = [_wrapped(op, indices[k], data.shape[k], k).reshape(count) for k in range(depth)]
    positions = np.ravel_multi_index(tuple(idx), lead)
    inner = int(np.prod(data.shape[depth:], dtype=np.int64))
    out = data.reshape(int(np.prod(lead, dtype=np.int64)), inner).copy()
    _scatter_flat(out, positions, updates.reshape(count, inner), attrs["mode"])  # type: ignore[arg-type]
    return result(out.reshape(data.shape), data.dtype)


define(
    "scatter_nd",
    ("data", "indices", "updates"),
    _scatter_nd_rel,
    _scatter_nd,
    OpPattern.OPAQUE,
    doc="data with updates written (or reduced) at the index tuples along indices' first "
    "axis (TVM's layout)",
)
