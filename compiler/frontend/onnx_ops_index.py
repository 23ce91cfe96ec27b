"""ONNX operators that index, select or rearrange: ``GatherElements``, ``GatherND``,
``OneHot``, ``Trilu``, ``CumSum``, ``DepthToSpace``, ``SpaceToDepth``, ``Hardmax``,
``TopK``, ``ReverseSequence`` and ``Einsum``.

Compiler layer (``compiler.frontend``); does not import ``onnx``. The gathers become
Relay's ``gather`` and ``gather_nd`` (index tuples moved to the front, TVM's layout), so
any size but the index depth may be known only at run time; indices known at import are
checked here, the rest by the kernels. ``OneHot``, ``Trilu``, ``Hardmax`` and
``CumSum`` compare or multiply with constant index grids. ``Einsum`` folds its operands
pairwise into ``nn.batch_matmul`` calls between transposes and reshapes.
"""

from __future__ import annotations

import numpy as np

from compiler.frontend.onnx_context import NodeContext, Value
from compiler.frontend.onnx_ops_tensor import normalize_axis, shape_text
from compiler.frontend.onnx_registry import register
from compiler.ir.types import Any


def _static_shape(node: NodeContext, value: Value, what: str) -> tuple[int, ...]:
    if any(isinstance(d, Any) for d in value.shape):
        raise node.unsupported(
            f"{what} {shape_text(value.shape)} has dimensions known only at run time; it must "
            "be known at import time (give static input shapes with from_onnx's shape= argument)"
        )
    return tuple(int(d) for d in value.shape)


def _int_indices(node: NodeContext, indices: Value) -> Value:
    if indices.dtype not in ("int32", "int64"):
        raise node.error(f"indices must be int32 or int64, found {indices.dtype}")
    return indices


def _wrap_negative(node: NodeContext, indices: Value, size: Value | int) -> Value:
    """``indices`` with negative entries counted from the end of an axis of ``size``."""
    bound = size if isinstance(size, Value) else node.scalar(size, indices.dtype)
    negative = node.call("less", indices, node.scalar(0, indices.dtype))
    return node.call(
        "add", indices, node.call("where", negative, bound, node.scalar(0, indices.dtype))
    )


def _check_static_range(node: NodeContext, indices: Value, sizes: np.ndarray, what: str) -> None:
    """An import-time error for known indices outside ``[-size, size)``."""
    if indices.static is None:
        return
    idx = np.asarray(indices.static)
    bad = (idx < -sizes) | (idx >= sizes)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise node.error(
            f"{what} {int(idx[where])} at position {where} is out of range "
            f"(axis size {int(np.broadcast_to(sizes, idx.shape)[where])})"
        )


@register("GatherElements")
def _gather_elements(node: NodeContext) -> Value:
    data, indices = node.input(0), _int_indices(node, node.input(1))
    if len(data.shape) != len(indices.shape):
        raise node.error(
            f"data {shape_text(data.shape)} and indices {shape_text(indices.shape)} must have "
            "the same rank"
        )
    axis = normalize_axis(node, int(node.attr("axis", 0)), len(data.shape))
    if not isinstance(data.shape[axis], Any):
        _check_static_range(node, indices, np.asarray(data.shape[axis]), "index")
    return node.call("gather", data, indices, axis=axis)


def index_tuples_first(node: NodeContext, indices: Value) -> tuple[Value, int]:
    """ONNX's ``(..., M)`` index tuples moved to TVM's ``(M, ...)`` layout, and ``M``."""
    if not indices.shape or isinstance(indices.shape[-1], Any):
        raise node.error(
            f"indices {shape_text(indices.shape)} need a last axis of known length (the "
            "index depth)"
        )
    rank = len(indices.shape)
    moved = node.call("transpose", indices, axes=(rank - 1, *range(rank - 1)))
    return moved, int(indices.shape[-1])


@register("GatherND")
def _gather_nd(node: NodeContext) -> Value:
    data, indices = node.input(0), _int_indices(node, node.input(1))
    batch = int(node.attr("batch_dims", 0)) if node.opset >= 12 else 0
    moved, depth = index_tuples_first(node, indices)
    if batch < 0 or batch >= min(len(data.shape), len(indices.shape)):
        raise node.error(
            f"batch_dims={batch} must be below the ranks of data {shape_text(data.shape)} and "
            f"indices {shape_text(indices.shape)}"
        )
    if depth > len(data.shape) - batch:
        raise node.error(
            f"indices {shape_text(indices.shape)} address {depth} axes, but data "
            f"{shape_text(data.shape)} has only {len(data.shape) - batch} after the batch axes"
        )
    indexed = data.shape[batch : batch + depth]
    if all(not isinstance(d, Any) for d in indexed):
        _check_static_range(node, indices, np.asarray(indexed, dtype=np.int64), "index")
    return node.call("gather_nd", data, moved, batch_dims=batch, index_rank=depth)


@register("OneHot")
def _one_hot(node: NodeContext) -> Value:
    indices, values = node.input(0), node.input(2)
    depth_array = node.static(1, "depth").reshape(-1)
    if depth_array.size != 1:
        raise node.error(f"depth must hold one value, found {depth_array.size}")
    depth = int(depth_array[0])
    if depth < 1:
        raise node.error(f"depth must be positive, found {depth}")
    if values.shape not in ((2,), (Any(),)) and not (
        values.ndim == 1 and isinstance(values.shape[0], Any)
    ):
        raise node.error(f"values must be a vector [off, on], found {shape_text(values.shape)}")
    rank = indices.ndim + 1
    axis = normalize_axis(node, int(node.attr("axis", -1)), rank)
    if indices.dtype not in ("int32", "int64"):
        # Non-integer indices are truncated toward zero, as a cast does.
        indices = node.call("cast", indices, dtype="int64")
    idx = _wrap_negative(node, indices, depth)
    idx = node.call("expand_dims", idx, axis=axis)
    shape = [1] * rank
    shape[axis] = depth
    grid = node.const(np.arange(depth, dtype=idx.dtype).reshape(shape))
    hot = node.call("equal", idx, grid)
    off = node.call(
        "reshape", node.call("take", values, node.const(np.int64(0)), axis=0), newshape=()
    )
    on = node.call(
        "reshape", node.call("take", values, node.const(np.int64(1)), axis=0), newshape=()
    )
    return node.call("where", hot, on, off)


@register("Trilu")
def _trilu(node: NodeContext) -> Value:
    x = node.input(0)
    if x.ndim < 2:
        raise node.error(f"input {shape_text(x.shape)} must have rank >= 2")
    rows, cols = x.shape[-2:]
    if isinstance(rows, Any) or isinstance(cols, Any):
        raise node.unsupported(
            f"the matrix dimensions of {shape_text(x.shape)} must be known at import time"
        )
    k_array = node.optional_static(1, "k")
    k = 0 if k_array is None else int(np.asarray(k_array).reshape(-1)[0])
    upper = bool(int(node.attr("upper", 1)))
    diagonal = np.arange(cols)[None, :] - np.arange(rows)[:, None]
    keep = diagonal >= k if upper else diagonal <= k
    zero = node.scalar(0, x.dtype) if x.dtype != "bool" else node.scalar(False, "bool")
    return node.call("where", node.const(keep), x, zero)


@register("CumSum")
def _cumsum(node: NodeContext) -> Value:
    x = node.input(0)
    axis_array = node.static(1, "axis").reshape(-1)
    if axis_array.size != 1:
        raise node.error(f"axis must hold one value, found {axis_array.size}")
    if x.ndim == 0:
        raise node.error("input must have rank >= 1")
    axis = normalize_axis(node, int(axis_array[0]), x.ndim)
    size = x.shape[axis]
    if isinstance(size, Any):
        raise node.unsupported(
            f"axis {axis} of {shape_text(x.shape)} must have a length known at import time"
        )
    exclusive = bool(int(node.attr("exclusive", 0)))
    reverse = bool(int(node.attr("reverse", 0)))
    # out[o] = sum over i of x[i] * mask[o, i]: a constant triangle picks the summed terms.
    o = np.arange(size)[:, None]
    i = np.arange(size)[None, :]
    if reverse:
        mask = i > o if exclusive else i >= o
    else:
        mask = i < o if exclusive else i <= o
    shape = [1] * (x.ndim + 1)
    shape[axis], shape[axis + 1] = size, size
    terms = node.call("expand_dims", x, axis=axis)
    terms = node.call("multiply", terms, node.const(mask.reshape(shape).astype(x.dtype)))
    return node.call("sum", terms, axis=(axis + 1,))


def _block_shape(node: NodeContext, x: Value) -> tuple[int, tuple[int, int, int, int]]:
    block = node.attr("blocksize")
    if block is None or int(block) < 1:
        raise node.error(f"attribute blocksize must be a positive integer, found {block!r}")
    if x.ndim != 4:
        raise node.error(f"input {shape_text(x.shape)} must be NCHW (rank 4)")
    n, c, h, w = _static_shape(node, x, "the input shape")
    return int(block), (n, c, h, w)


@register("DepthToSpace")
def _depth_to_space(node: NodeContext) -> Value:
    x = node.input(0)
    b, (n, c, h, w) = _block_shape(node, x)
    if c % (b * b):
        raise node.error(f"{c} channels do not divide into blocks of {b}x{b}")
    mode = node.check_attr("mode", ("DCR", "CRD"), "DCR")
    depth = c // (b * b)
    if mode == "DCR":
        out = node.call("reshape", x, newshape=(n, b, b, depth, h, w))
        out = node.call("transpose", out, axes=(0, 3, 4, 1, 5, 2))
    else:
        out = node.call("reshape", x, newshape=(n, depth, b, b, h, w))
        out = node.call("transpose", out, axes=(0, 1, 4, 2, 5, 3))
    return node.call("reshape", out, newshape=(n, depth, h * b, w * b))


@register("SpaceToDepth")
def _space_to_depth(node: NodeContext) -> Value:
    x = node.input(0)
    b, (n, c, h, w) = _block_shape(node, x)
    if h % b or w % b:
        raise node.error(f"height {h} and width {w} must be multiples of blocksize {b}")
    out = node.call("reshape", x, newshape=(n, c, h // b, b, w // b, b))
    out = node.call("transpose", out, axes=(0, 3, 5, 1, 2, 4))
    return node.call("reshape", out, newshape=(n, c * b * b, h // b, w // b))


def _hardmax_along(node: NodeContext, x: Value, axis: int) -> Value:
    size = x.shape[axis]
    if isinstance(size, Any):
        raise node.unsupported(
            f"axis {axis} of {shape_text(x.shape)} must have a length known at import time"
        )
    index = node.call("argmax", x, axis=(axis,), keepdims=True)
    shape = [1] * x.ndim
    shape[axis] = int(size)
    grid = node.const(np.arange(int(size), dtype=index.dtype).reshape(shape))
    return node.call("cast", node.call("equal", index, grid), dtype=x.dtype)


@register("Hardmax")
def _hardmax(node: NodeContext) -> Value:
    x = node.input(0)
    if node.opset >= 13:
        return _hardmax_along(node, x, normalize_axis(node, int(node.attr("axis", -1)), x.ndim))
    # Before opset 13 the input is read as a matrix: the axes before `axis` are the rows.
    axis = normalize_axis(node, int(node.attr("axis", 1)), x.ndim)
    shape = _static_shape(node, x, "before opset 13, the input shape")
    rows = int(np.prod(shape[:axis], dtype=np.int64))
    flat = node.call("reshape", x, newshape=(rows, -1))
    return node.call("reshape", _hardmax_along(node, flat, 1), newshape=shape)


def _topk_at_run_time(node: NodeContext, x: Value, axis: int, largest: bool) -> list[Value]:
    """TopK with k known only when the model runs: ``dyn.topk`` sizes its outputs then,
    with ONNX's rule for k (``exact_k``: 0 keeps nothing, and a k below 0 or above the
    axis length fails when it runs, as in onnxruntime)."""
    k = node.input(1)
    if k.dtype != "int64":
        raise node.error(f"k must be an int64 tensor, found {k.dtype}")
    k = node.call("reshape", k, newshape=(1,))
    out = node.call(
        "dyn.topk", x, k, axis=axis, ret_type="both", is_ascend=not largest, dtype="int64",
        exact_k=True,
    )  # fmt: skip
    return [node.item(out, 0), node.item(out, 1)]


@register("TopK")
def _topk(node: NodeContext) -> list[Value]:
    x = node.input(0)
    axis = normalize_axis(node, int(node.attr("axis", -1)), x.ndim)
    largest = bool(int(node.attr("largest", 1))) if node.opset >= 11 else True
    if node.opset >= 10 and node.input(1).static is None:
        return _topk_at_run_time(node, x, axis, largest)
    if node.opset < 10:
        k = int(node.attr("k", -1))
    else:
        k_values = node.static_ints(1, "k") or []
        if len(k_values) != 1:
            raise node.error(f"k must hold one value, found {len(k_values)}")
        k = k_values[0]
    size = x.shape[axis]
    if k < 0 or (isinstance(size, int) and k > size):
        raise node.error(f"k={k} must be between 0 and the length {size} of axis {axis}")
    if k == 0:
        raise node.unsupported("k=0 (empty outputs) is not supported")
    # sorted=0 lets any order through; the sorted one is such an order.
    out = node.call(
        "topk", x, k=k, axis=axis, ret_type="both", is_ascend=not largest, dtype="int64"
    )
    return [node.item(out, 0), node.item(out, 1)]


@register("NonZero")
def _nonzero(node: NodeContext) -> Value:
    x = node.input(0)
    if x.static is not None:
        return node.const(np.asarray(np.nonzero(np.asarray(x.static)), dtype="int64"))
    if x.ndim == 0:
        raise node.unsupported("a scalar input (NonZero of rank 0) is not supported")
    # argwhere gives one row per element; ONNX wants one row per axis, as int64.
    rows = node.call("cast", node.call("argwhere", x), dtype="int64")
    return node.call("transpose", rows, axes=(1, 0))


@register("ReverseSequence")
def _reverse_sequence(node: NodeContext) -> Value:
    x, lengths = node.input(0), _int_indices(node, node.input(1))
    shape = _static_shape(node, x, "the input shape")
    if len(shape) < 2:
        raise node.error(f"input {shape_text(shape)} must have rank >= 2")
    batch_axis = int(node.attr("batch_axis", 1))
    time_axis = int(node.attr("time_axis", 0))
    if {batch_axis, time_axis} != {0, 1}:
        raise node.error(
            f"batch_axis={batch_axis} and time_axis={time_axis} must be 0 and 1 in some order"
        )
    if lengths.shape != (shape[batch_axis],):
        raise node.error(
            f"sequence_lens {shape_text(lengths.shape)} must hold one length per batch entry "
            f"({shape[batch_axis]})"
        )
    if lengths.static is not None:
        bad = np.asarray(lengths.static)
        bad = bad[(bad < 0) | (bad > shape[time_axis])]
        if bad.size:
            raise node.error(f"sequence length {int(bad[0])} is outside [0, {shape[time_axis]}]")
    # Along the time axis, t < len[b] reads len[b] - 1 - t and later steps stay in place;
    # as a GatherElements-style flat take with constant strides and offsets.
    steps = shape[time_axis]
    grid_shape = [1] * len(shape)
    grid_shape[time_axis] = steps
    t = node.const(np.arange(steps, dtype=lengths.dtype).reshape(grid_shape))
    lens_shape = [1] * len(shape)
    lens_shape[batch_axis] = shape[batch_axis]
    lens = node.call("reshape", lengths, newshape=tuple(lens_shape))
    flipped = node.call("subtract", node.call("subtract", lens, node.scalar(1, lengths.dtype)), t)
    source = node.call("where", node.call("less", t, lens), flipped, t)
    strides = [int(np.prod(shape[d + 1 :], dtype=np.int64)) for d in range(len(shape))]
    grid = np.indices(shape, dtype=np.int64)
    offset = sum(grid[d] * strides[d] for d in range(len(shape)) if d != time_axis)
    flat = node.call(
        "add",
        node.call("multiply", source, node.scalar(strides[time_axis], lengths.dtype)),
        node.const(np.asarray(offset).astype(lengths.dtype)),
    )
    return node.call("take", node.call("reshape", x, newshape=(-1,)), flat, axis=0)


# --- Einsum ------------------------------------------------------------------------------------


def _einsum_terms(node: NodeContext, equation: str, ranks: list[int]) -> tuple[list[str], str]:
    """The operands' and the output's subscripts, each ellipsis spelled as capital letters."""
    text = equation.replace(" ", "")
    if "->" in text:
        inputs_text, output = text.split("->", 1)
    else:
        inputs_text, output = text, None
    terms = inputs_text.split(",")
    if len(terms) != len(ranks):
        raise node.error(
            f"equation {equation!r} names {len(terms)} operands, the node has {len(ranks)}"
        )
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    spare = [c for c in letters if c not in text]
    ellipsis_rank = 0
    for term, rank in zip(terms, ranks):
        if "..." in term:
            ellipsis_rank = max(ellipsis_rank, rank - (len(term) - 3))
    batch = "".join(spare[:ellipsis_rank])
    spelled = []
    for term, rank in zip(terms, ranks):
        if "..." in term:
            own = rank - (len(term) - 3)
            term = term.replace("...", batch[ellipsis_rank - own :])
        if any(c not in letters for c in term):
            raise node.error(f"equation {equation!r}: subscripts must be letters")
        if len(term) != rank:
            raise node.error(
                f"equation {equation!r}: subscripts {term!r} do not match an operand of rank {rank}"
            )
        spelled.append(term)
    if output is None:
        counts: dict[str, int] = {}
        for term in spelled:
            for c in term:
                counts[c] = counts.get(c, 0) + 1
        out = batch + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in batch))
    else:
        out = output.replace("...", batch)
        if not all(c in "".join(spelled) for c in out) or len(set(out)) != len(out):
            raise node.error(f"equation {equation!r}: the output subscripts {output!r} are invalid")
    for term in spelled:
        if len(set(term)) != len(term):
            raise node.unsupported(
                f"equation {equation!r}: a subscript repeated within one operand (a diagonal) "
                "is not supported"
            )
    return spelled, out


def _reduce_to(node: NodeContext, x: Value, term: str, keep: str) -> tuple[Value, str]:
    """Sum ``x`` (subscripts ``term``) over the letters not in ``keep``."""
    drop = tuple(i for i, c in enumerate(term) if c not in keep)
    if not drop:
        return x, term
    return node.call("sum", x, axis=drop), "".join(c for c in term if c in keep)


def _permute(node: NodeContext, x: Value, term: str, order: str) -> Value:
    if term == order:
        return x
    return node.call("transpose", x, axes=tuple(term.index(c) for c in order))


def _einsum_pair(
    node: NodeContext, a: Value, ta: str, b: Value, tb: str, keep: str
) -> tuple[Value, str]:
    """The product of two operands summed over their shared letters not in ``keep``."""
    a, ta = _reduce_to(node, a, ta, keep + tb)
    b, tb = _reduce_to(node, b, tb, keep + ta)
    sizes: dict[str, int] = {}
    for x, term in ((a, ta), (b, tb)):
        for c, d in zip(term, _static_shape(node, x, "an Einsum operand's shape")):
            if c in sizes and sizes[c] != d and 1 not in (sizes[c], d):
                raise node.error(f"subscript {c!r} stands for sizes {sizes[c]} and {d}")
            sizes[c] = max(sizes.get(c, d), d)
    batch = "".join(c for c in ta if c in tb and c in keep)
    contract = "".join(c for c in ta if c in tb and c not in keep)
    a_only = "".join(c for c in ta if c not in tb)
    b_only = "".join(c for c in tb if c not in ta)

    def prepared(x: Value, term: str, order: str) -> Value:
        x = _permute(node, x, term, order)
        target = tuple(sizes[c] for c in order)
        if tuple(x.shape) != target:
            x = node.call("broadcast_to", x, shape=target)
        return x

    def size(letters: str) -> int:
        return int(np.prod([sizes[c] for c in letters], dtype=np.int64))

    a3 = node.call(
        "reshape", prepared(a, ta, batch + a_only + contract),
        newshape=(size(batch), size(a_only), size(contract)),
    )  # fmt: skip
    b3 = node.call(
        "reshape", prepared(b, tb, batch + contract + b_only),
        newshape=(size(batch), size(contract), size(b_only)),
    )  # fmt: skip
    out = node.call("nn.batch_matmul", a3, b3, transpose_b=False)
    term = batch + a_only + b_only
    return node.call("reshape", out, newshape=tuple(sizes[c] for c in term)), term


@register("Einsum")
def _einsum(node: NodeContext) -> Value:
    operands = node.present_inputs()
    if not operands:
        raise node.error("needs at least one operand")
    equation = node.attr("equation")
    if not equation:
        raise node.error("attribute 'equation' is required")
    equation = equation.decode() if isinstance(equation, bytes) else str(equation)
    dtypes = {v.dtype for v in operands}
    if len(dtypes) != 1:
        raise node.error(f"operands must share one type, found {sorted(dtypes)}")
    terms, out_term = _einsum_terms(node, equation, [v.ndim for v in operands])
    value, term = operands[0], terms[0]
    for i in range(1, len(operands)):
        later = "".join(terms[i + 1 :])
        value, term = _einsum_pair(node, value, term, operands[i], terms[i], out_term + later)
    value, term = _reduce_to(node, value, term, out_term)
    return _permute(node, value, term, out_term)
