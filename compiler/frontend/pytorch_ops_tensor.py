"""TorchScript shape and indexing converters: ``view``/``reshape``/``flatten``, ``permute``,
``transpose``, ``(un)squeeze``, ``cat``/``stack``, ``chunk``/``split``/``unbind``,
``slice``/``select``, ``expand``, ``embedding``, ``gather``/``scatter``, reductions.

Compiler layer (``compiler.frontend``); does not import ``torch``. Registers into
:data:`compiler.frontend.pytorch_ops.CONVERTERS`. Target shapes are computed here from the
static input shapes, so ``-1`` entries and ``flatten``'s ranges never reach Relay.
"""

from __future__ import annotations

from typing import Any as AnyT

import numpy as np

from compiler.frontend.onnx_context import Value
from compiler.frontend.pytorch_ops import SCALAR_TYPES, TorchNode, promote, register


def _reshape(node: TorchNode, x: Value, shape: list[int]) -> Value:
    dims = node.shape_of(x)
    size = int(np.prod(dims, dtype=np.int64))
    unknown = [i for i, d in enumerate(shape) if d == -1]
    known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
    if len(unknown) > 1 or any(d < -1 for d in shape):
        raise node.error(f"target shape {tuple(shape)} has more than one -1 or a negative size")
    if unknown:
        if known == 0 or size % known:
            raise node.error(f"cannot view a tensor of shape {dims} as {tuple(shape)}")
        shape = list(shape)
        shape[unknown[0]] = size // known
    if int(np.prod(shape, dtype=np.int64)) != size:
        raise node.error(f"cannot view a tensor of shape {dims} as {tuple(shape)}")
    if tuple(shape) == dims:
        return x
    return node.call("reshape", x, newshape=tuple(shape))


@register("aten::view", "aten::reshape", "aten::_reshape_alias")
def _view(node: TorchNode) -> Value:
    return _reshape(node, node.tensor(0), node.ints(1, "shape"))


@register("aten::view_as", "aten::reshape_as")
def _view_as(node: TorchNode) -> Value:
    return _reshape(node, node.tensor(0), list(node.shape_of(node.tensor(1))))


@register("aten::flatten")
def _flatten(node: TorchNode) -> Value:
    x = node.tensor(0)
    dims = node.shape_of(x)
    if x.ndim == 0:
        return _reshape(node, x, [1])
    start = node.axis(node.arg(1, 0), x.ndim)
    end = node.axis(node.arg(2, -1), x.ndim)
    if start > end:
        raise node.error(f"start_dim {start} is after end_dim {end}")
    merged = int(np.prod(dims[start : end + 1], dtype=np.int64))
    return _reshape(node, x, [*dims[:start], merged, *dims[end + 1 :]])


@register("aten::unflatten")
def _unflatten(node: TorchNode) -> Value:
    x = node.tensor(0)
    dims = list(node.shape_of(x))
    axis = node.axis(node.arg(1), x.ndim)
    return _reshape(node, x, dims[:axis] + node.ints(2, "sizes") + dims[axis + 1 :])


@register("aten::permute")
def _permute(node: TorchNode) -> Value:
    x = node.tensor(0)
    axes = [node.axis(a, x.ndim) for a in node.ints(1, "dims")]
    if sorted(axes) != list(range(x.ndim)):
        raise node.error(f"dims {axes} is not a permutation of the {x.ndim} axes")
    return node.call("transpose", x, axes=tuple(axes))


@register("aten::transpose", "aten::swapaxes")
def _transpose(node: TorchNode) -> Value:
    x = node.tensor(0)
    a, b = node.axis(node.arg(1), x.ndim), node.axis(node.arg(2), x.ndim)
    axes = list(range(x.ndim))
    axes[a], axes[b] = axes[b], axes[a]
    return x if a == b else node.call("transpose", x, axes=tuple(axes))


@register("aten::t", "aten::numpy_T")
def _t(node: TorchNode) -> Value:
    x = node.tensor(0)
    return x if x.ndim < 2 else node.call("transpose", x, axes=tuple(range(x.ndim))[::-1])


@register("aten::unsqueeze", "aten::unsqueeze_")
def _unsqueeze(node: TorchNode) -> Value:
    x = node.tensor(0)
    return node.call("expand_dims", x, axis=node.axis(node.arg(1), x.ndim + 1))


@register("aten::squeeze", "aten::squeeze_")
def _squeeze(node: TorchNode) -> Value:
    x = node.tensor(0)
    dims = node.shape_of(x)
    if len(node.args) < 2 or node.arg(1) is None:
        axes = [i for i, d in enumerate(dims) if d == 1]
    else:
        # torch leaves a named dimension that is not 1 in place.
        axes = [a for a in (node.axis(v, x.ndim) for v in node.ints(1, "dim")) if dims[a] == 1]
    return node.call("squeeze", x, axis=tuple(sorted(set(axes)))) if axes else x


def _tensors(node: TorchNode, index: int) -> list[Value]:
    values = node.arg(index)
    if not isinstance(values, (list, tuple)) or not values:
        raise node.error(f"operand {index} must be a non-empty list of tensors, found {values!r}")
    if not all(isinstance(v, Value) for v in values):
        raise node.error(f"operand {index} must hold only tensors, found {values!r}")
    dtypes = {v.dtype for v in values}
    if len(dtypes) > 1:
        target = max(dtypes, key=lambda d: (d.startswith("float"), d))
        values = [node.cast(v, target) for v in values]
    return list(values)


@register("aten::cat", "aten::concat", "aten::concatenate")
def _cat(node: TorchNode) -> Value:
    values = _tensors(node, 0)
    # torch skips 1-D empty tensors in cat (a legacy rule for torch.cat with torch.empty(0)).
    values = [v for v in values if not (v.ndim == 1 and node.shape_of(v)[0] == 0)] or values
    return node.call("concatenate", values, axis=node.axis(node.arg(1, 0), values[0].ndim))


@register("aten::stack")
def _stack(node: TorchNode) -> Value:
    values = _tensors(node, 0)
    return node.call("stack", values, axis=node.axis(node.arg(1, 0), values[0].ndim + 1))


def _split_at(node: TorchNode, x: Value, sizes: list[int], axis: int) -> list[Value]:
    dim = node.shape_of(x)[axis]
    if sum(sizes) != dim or any(s < 0 for s in sizes):
        raise node.error(f"split sizes {sizes} do not add up to the dimension's size {dim}")
    if len(sizes) == 1:
        return [x]
    indices = tuple(int(i) for i in np.cumsum(sizes)[:-1])
    parts = node.call("split", x, indices_or_sections=indices, axis=axis)
    return [node.item(parts, i) for i in range(len(sizes))]


@register("aten::chunk")
def _chunk(node: TorchNode) -> list[Value]:
    x = node.tensor(0)
    chunks = node.int_of(node.arg(1), "chunks")
    axis = node.axis(node.arg(2, 0), x.ndim)
    dim = node.shape_of(x)[axis]
    if chunks < 1:
        raise node.error(f"chunks must be >= 1, found {chunks}")
    step = -(-dim // chunks)
    sizes = [min(step, dim - start) for start in range(0, dim, step)] if dim else [0]
    return _split_at(node, x, sizes, axis)


@register("aten::split", "aten::split_with_sizes", "aten::unsafe_split")
def _split(node: TorchNode) -> list[Value]:
    x = node.tensor(0)
    axis = node.axis(node.arg(2, 0), x.ndim)
    dim = node.shape_of(x)[axis]
    given = node.arg(1)
    if isinstance(given, (list, tuple)):
        sizes = node.ints(1, "split sizes")
    else:
        size = node.int_of(given, "split size")
        if size < 1:
            raise node.error(f"split size must be >= 1, found {size}")
        sizes = [min(size, dim - start) for start in range(0, dim, size)] or [0]
    return _split_at(node, x, sizes, axis)


@register("aten::unbind")
def _unbind(node: TorchNode) -> list[Value]:
    x = node.tensor(0)
    axis = node.axis(node.arg(1, 0), x.ndim)
    parts = _split_at(node, x, [1] * node.shape_of(x)[axis], axis)
    return [node.call("squeeze", p, axis=(axis,)) for p in parts]


def _slice_bounds(dim: int, start: AnyT, end: AnyT) -> tuple[int, int]:
    start = 0 if start is None else int(start)
    end = dim if end is None else int(end)
    start = max(0, start + dim) if start < 0 else min(start, dim)
    end = max(0, end + dim) if end < 0 else min(end, dim)
    return start, max(start, end)


@register("aten::slice")
def _slice(node: TorchNode) -> AnyT:
    x = node.arg(0)
    if isinstance(x, list):  # list slicing in scripted code
        return x[node.arg(1) : node.arg(2) : node.arg(3, 1)]
    x = node.tensor(0)
    axis = node.axis(node.arg(1, 0), x.ndim)
    dim = node.shape_of(x)[axis]
    start = None if node.arg(2) is None else node.int_of(node.arg(2), "start")
    end = None if node.arg(3) is None else node.int_of(node.arg(3), "end")
    step = node.int_of(node.arg(4, 1), "step")
    if step < 1:
        raise node.error(f"slice step must be >= 1, found {step}")
    start, end = _slice_bounds(dim, start, end)
    if (start, end, step) == (0, dim, 1):
        return x
    return node.call("strided_slice", x, begin=(start,), end=(end,), strides=(step,), axes=(axis,))


@register("aten::select")
def _select(node: TorchNode) -> Value:
    x = node.tensor(0)
    axis = node.axis(node.arg(1), x.ndim)
    dim = node.shape_of(x)[axis]
    index = node.int_of(node.arg(2), "index")
    if not -dim <= index < dim:
        raise node.error(f"index {index} is out of range for dimension {axis} of size {dim}")
    index %= dim
    part = node.call(
        "strided_slice", x, begin=(index,), end=(index + 1,), strides=(1,), axes=(axis,)
    )
    return node.call("squeeze", part, axis=(axis,))


@register("aten::expand")
def _expand(node: TorchNode) -> Value:
    x = node.tensor(0)
    sizes = node.ints(1, "size")
    dims = node.shape_of(x)
    lead = len(sizes) - len(dims)
    if lead < 0:
        raise node.error(f"cannot expand a tensor of shape {dims} to {tuple(sizes)}")
    target = [
        d if s == -1 and i >= lead else s for i, (s, d) in enumerate(zip(sizes, (0,) * lead + dims))
    ]
    return x if tuple(target) == dims else node.call("broadcast_to", x, shape=tuple(target))


@register("aten::expand_as")
def _expand_as(node: TorchNode) -> Value:
    x = node.tensor(0)
    target = node.shape_of(node.tensor(1))
    return x if node.shape_of(x) == target else node.call("broadcast_to", x, shape=target)


@register("aten::embedding")
def _embedding(node: TorchNode) -> Value:
    weight, indices = node.tensor(0), node.tensor(1)
    if indices.dtype[0] not in "iu":
        raise node.error(f"indices must be integers, found {indices.dtype}")
    return node.call("take", weight, indices, axis=0, mode="clip")


@register("aten::gather")
def _gather(node: TorchNode) -> Value:
    x, indices = node.tensor(0), node.tensor(2)
    if indices.dtype[0] not in "iu":
        raise node.error(f"index must be integers, found {indices.dtype}")
    return node.call("gather", x, indices, axis=node.axis(node.arg(1), x.ndim))


#: torch's scatter ``reduce`` strings and ``scatter_reduce``'s, as scatter_elements' names.
_SCATTER_REDUCE = {
    "add": "add", "multiply": "mul", "sum": "add", "prod": "mul", "mean": "mean",
    "amax": "max", "amin": "min",
}  # fmt: skip


def _scatter_source(node: TorchNode, src: AnyT, indices: Value, like: Value) -> Value:
    """``src`` cut (or a scalar spread) to the shape of ``indices``: torch reads only that
    much of a larger ``src``."""
    shape = node.shape_of(indices)
    if not isinstance(src, Value) or src.ndim == 0:
        value = node.cast(node.as_value(src, like), like.dtype)
        return node.call("broadcast_to", value, shape=shape)
    value = node.cast(src, like.dtype)
    have = node.shape_of(value)
    if len(have) != len(shape) or any(h < s for h, s in zip(have, shape)):
        raise node.error(f"src of shape {have} is smaller than index of shape {shape}")
    if have != shape:
        value = node.call("strided_slice", value, begin=[0] * len(shape), end=list(shape))
    return value


@register("aten::scatter", "aten::scatter_", "aten::scatter_add", "aten::scatter_reduce")
def _scatter(node: TorchNode) -> Value:
    x, indices = node.tensor(0), node.tensor(2)
    if indices.dtype[0] not in "iu":
        raise node.error(f"index must be integers, found {indices.dtype}")
    axis = node.axis(node.arg(1), x.ndim)
    reduce = node.arg(4)
    if node.kind == "aten::scatter_add":
        reduction = "add"
    elif isinstance(reduce, str):
        if reduce not in _SCATTER_REDUCE:
            raise node.unsupported(f"reduce={reduce!r} is not supported")
        reduction = _SCATTER_REDUCE[reduce]
    else:
        reduction = "update"
    if node.kind == "aten::scatter_reduce" and not node.arg(5, True):
        raise node.unsupported("include_self=False is not supported")
    src = _scatter_source(node, node.arg(3), indices, x)
    return node.call("scatter_elements", x, indices, src, axis=axis, reduction=reduction)


def _reduce_axes(node: TorchNode, x: Value, index: int) -> tuple[int, ...] | None:
    dims = node.arg(index)
    if dims is None or dims == []:
        return None
    return tuple(sorted({node.axis(d, x.ndim) for d in node.ints(index, "dim")}))


@register("aten::mean", "aten::sum", "aten::prod", "aten::amax", "aten::amin")
def _reduce(node: TorchNode) -> Value:
    x = node.tensor(0)
    op = {"mean": "mean", "sum": "sum", "prod": "prod", "amax": "max", "amin": "min"}[
        node.kind.split("::")[1]
    ]
    # Overloads: (x, dtype) reduce everything; (x, dim, keepdim, dtype) reduce dims.
    if len(node.args) >= 3:
        axes = _reduce_axes(node, x, 1)
        keepdims = bool(node.arg(2, False))
        dtype = node.arg(3)
    else:
        axes, keepdims, dtype = None, False, node.arg(1)
    if op == "mean" and x.dtype[0] in "iub":
        raise node.error(f"mean of an integer tensor ({x.dtype}) needs a float dtype")
    out = node.call(op, x, axis=axes, keepdims=keepdims)
    if isinstance(dtype, int):
        out = node.cast(out, SCALAR_TYPES.get(dtype, out.dtype))
    elif op in ("sum", "prod") and x.dtype in ("bool", "int8", "int16", "int32", "uint8"):
        out = node.cast(out, "int64")
    return out


@register("aten::max", "aten::min")
def _max(node: TorchNode) -> AnyT:
    x = node.arg(0)
    if not isinstance(x, Value):
        values = x if len(node.args) == 1 else node.args
        return (max if node.kind == "aten::max" else min)(values)
    op = "max" if node.kind == "aten::max" else "min"
    if len(node.args) == 1:
        return node.call(op, x)
    other = node.arg(1)
    if isinstance(other, Value):
        return node.call("maximum" if op == "max" else "minimum", *promote(node, x, other))
    axis = node.axis(other, x.ndim)
    keepdims = bool(node.arg(2, False))
    values = node.call(op, x, axis=(axis,), keepdims=keepdims)
    indices = node.call("argmax" if op == "max" else "argmin", x, axis=(axis,), keepdims=keepdims)
    return [values, node.cast(indices, "int64")]


@register("aten::argmax", "aten::argmin")
def _argmax(node: TorchNode) -> Value:
    x = node.tensor(0)
    op = node.kind.split("::")[1]
    keepdims = bool(node.arg(2, False))
    if node.arg(1) is None:
        flat = node.call("reshape", x, newshape=(-1,))
        out = node.call(op, flat, axis=(0,), keepdims=False)
        if keepdims:
            out = node.call("reshape", out, newshape=(1,) * x.ndim)
    else:
        out = node.call(op, x, axis=(node.axis(node.arg(1), x.ndim),), keepdims=keepdims)
    return node.cast(out, "int64")
