"""Kernel rules for gathers and scatters by index tensors: ``gather``, ``gather_nd``,
``scatter_elements`` and ``scatter_nd``.

Runtime layer, kernel generator (``vm.kernels``); standard library only.

Names, arguments and index layouts are TVM's; semantics mirror
``compiler/op/defs_index.py``. ``gather`` and ``scatter_elements`` pair every index with
its own position (ONNX's ``GatherElements``/``ScatterElements``, torch's ``gather`` and
``scatter``); ``gather_nd`` and ``scatter_nd`` read their index tuples along the *first*
axis of ``indices`` (TVM's layout; ONNX puts them last, and its frontend transposes).

An index counts from the end when negative; one outside ``[-size, size)`` raises
``IndexError`` naming the node, the index and the axis size, before any later element is
written (the output is a fresh buffer, so nothing the caller holds changes).

The scatters copy ``data`` to the output and then apply the updates one at a time in C
order of ``updates``, so with ``reduction="update"`` the last update of a repeated
position wins, and a reduction combines repeats in order (what onnxruntime and numpy's
``ufunc.at`` do). ``mean`` replaces each position written by the mean of its old value and
every update to it. Their output shapes follow from the input shapes alone, so they run
with sizes known only at run time; they are never fused (a write goes anywhere).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vm.kernels import dtypes
from vm.kernels import shape_rules as sr
from vm.kernels.rules import (
    Attr,
    OpRule,
    RuleError,
    RuleSet,
    Spec,
    norm_axis,
    require_kind,
    require_rank,
)
from vm.kernels.source import EmitCtx, ShapeCtx, Source, index, product, wrap

#: The rules this module defines (gathered by :mod:`vm.kernels.table`).
RULES = RuleSet()

SCATTER_ELEMENTS_REDUCTIONS = ("update", "add", "mul", "mean", "min", "max")
SCATTER_ND_MODES = ("update", "add", "mul", "min", "max")


def _checked(ctx: EmitCtx, value: str, size: str, detail: str) -> str:
    """A fresh variable holding index ``value`` into an axis of ``size``, negative ones
    counted from the end; anything else outside the axis raises. Inline, so the common
    path is two compares (a helper call per element cost more than the copy)."""
    src, name = ctx.src, ctx.src.fresh("j")
    src.line(f"{name} = np.int64({value})")
    with src.block(f"if {name} < 0:"):
        src.line(f"{name} += {size}")
    with src.block(f"if {name} < 0 or {name} >= {size}:"):
        src.line(f"h.index_out_of_range({ctx.what(detail)}, {value}, {size})")
    return name


def _same_rank(op: str, named: list[tuple[str, Spec]]) -> None:
    first_name, first = named[0]
    for name, spec in named[1:]:
        if spec.ndim != first.ndim:
            raise RuleError(
                f"ndim out of range: {op} needs {name} of the rank of {first_name} "
                f"({first.ndim}), found {spec.ndim}"
            )


def _not_longer(ctx: ShapeCtx, inner: list[str], outer: list[str], axis: int, what: str) -> None:
    """Every dimension of ``inner`` but ``axis`` is at most ``outer``'s, at run time."""
    for d, (a, b) in enumerate(zip(inner, outer)):
        if d != axis:
            ctx.fail_if(f"{a} > {b}", f"{what} are longer than data on axis {d}")


def _run_not_longer(inner: sr.Shape, outer: sr.Shape, axis: int, what: str) -> None:
    for d, (a, b) in enumerate(zip(inner, outer)):
        if d != axis and a > b:
            raise RuleError(
                f"{what} {sr.fmt_shape(inner)} are longer than data {sr.fmt_shape(outer)} "
                f"on axis {d}"
            )


# --- gather ------------------------------------------------------------------------------------


def _gather_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    data, indices = args
    require_kind("indices", indices, "int")
    require_rank("data", data, 1)
    _same_rank("gather", [("data", data), ("indices", indices)])
    norm_axis("axis", attrs["axis"], data.ndim)
    return (Spec(data.dtype, data.ndim),)


def _gather_shape(ctx: ShapeCtx) -> list[list[str]]:
    data, indices = ctx.arg_dims
    axis = norm_axis("axis", ctx.attrs["axis"], len(data))
    _not_longer(ctx, indices, data, axis, "indices")
    return [list(indices)]


def _gather_emit(ctx: EmitCtx) -> None:
    data, indices = ctx.args
    dims = ctx.arg_dims[0]
    axis = norm_axis("axis", ctx.attrs["axis"], len(dims))
    with ctx.src.loops(ctx.out_dims[0]) as oi:
        j = _checked(ctx, f"{indices}[{index(oi)}]", dims[axis], f"gather along axis {axis}")
        at = [*oi[:axis], j, *oi[axis + 1 :]]
        ctx.src.line(f"{ctx.outs[0]}[{index(oi)}] = {data}[{index(at)}]")


RULES.register(
    OpRule(
        "gather",
        2,
        (Attr("axis", "int", 0),),
        _gather_infer,
        _gather_shape,
        emit=_gather_emit,
        doc="data at indices along axis, every other index the element's own",
    )
)


@RULES.shape("gather")
def _run_gather(shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[sr.Shape]:
    data, indices = shapes
    axis = sr.axis_of(attrs["axis"], len(data))
    _run_not_longer(indices, data, axis, "indices")
    return [indices]


# --- gather_nd ---------------------------------------------------------------------------------


def _nd_layout(op: str, data: int, indices: int, batch: int, depth: int) -> int:
    """Check the ranks of a gather_nd/scatter_nd; returns how many axes index tuples span."""
    if batch < 0:
        raise RuleError(f"attribute batch_dims={batch} must not be negative")
    tuples = indices - 1 - batch
    if tuples < 0:
        raise RuleError(
            f"ndim out of range: {op} indices of rank {indices} leave no room for the index "
            f"depth and batch_dims={batch}"
        )
    if not 1 <= depth <= data - batch:
        raise RuleError(
            f"ndim out of range: {op} index tuples of length {depth} must address between 1 "
            f"and the {data - batch} axes of data after batch_dims={batch}"
        )
    return tuples


def _depth_from_ranks(data_rank: int, indices_rank: int, batch: int, out_rank: int) -> int:
    """The index depth gather_nd's ranks imply: the output has the batch axes, the index
    tuple axes (``indices_rank - 1 - batch``) and the data axes the tuples do not index."""
    return data_rank + (indices_rank - 1 - batch) - out_rank


def _gather_nd_depth(data: Spec, indices: Spec, attrs: dict, declared: tuple) -> int:
    """The length of gather_nd's index tuples: ``index_rank``, or from the declared output."""
    if attrs.get("index_rank") is not None:
        return attrs["index_rank"]
    if not declared:
        raise RuleError("gather_nd: give index_rank or declare the output's rank")
    return _depth_from_ranks(data.ndim, indices.ndim, attrs["batch_dims"], declared[0].ndim)


def _gather_nd_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    data, indices = args
    require_kind("indices", indices, "int")
    require_rank("indices", indices, 1)
    batch = attrs["batch_dims"]
    depth = _gather_nd_depth(data, indices, attrs, declared)
    tuples = _nd_layout("gather_nd", data.ndim, indices.ndim, batch, depth)
    ndim = data.ndim - depth + tuples
    if ndim > dtypes.MAX_NDIM:
        raise RuleError(f"ndim out of range: gather_nd gives rank {ndim}; at most 32")
    return (Spec(data.dtype, ndim),)


def _gather_nd_parts(ctx: ShapeCtx | EmitCtx) -> tuple[int, int, int]:
    """(batch_dims, index depth, index tuple axes) of a gather_nd whose output is known."""
    data, indices = ctx.arg_dims
    batch = ctx.attrs["batch_dims"]
    depth = _depth_from_ranks(len(data), len(indices), batch, ctx.out_specs[0].ndim)
    return batch, depth, len(indices) - 1 - batch


def _gather_nd_shape(ctx: ShapeCtx) -> list[list[str]]:
    data, indices = ctx.arg_dims
    batch, depth, _ = _gather_nd_parts(ctx)
    ctx.expect(indices[0], str(depth), "the index depth (indices' first axis)")
    for k in range(batch):
        ctx.expect(indices[1 + k], data[k], f"batch axis {k} of indices")
    return [[*data[:batch], *indices[1 + batch :], *data[batch + depth :]]]


def _gather_nd_emit(ctx: EmitCtx) -> None:
    src = ctx.src
    data, indices = ctx.args
    dims = ctx.arg_dims[0]
    batch, depth, tuples = _gather_nd_parts(ctx)
    out_dims = ctx.out_dims[0]
    with src.loops(out_dims[: batch + tuples]) as outer:
        at = [*outer[:batch]]
        for k in range(depth):
            value = f"{indices}[{index([str(k), *outer])}]"
            at.append(_checked(ctx, value, dims[batch + k], f"gather_nd on axis {batch + k}"))
        with src.loops(out_dims[batch + tuples :]) as inner:
            src.line(f"{ctx.outs[0]}[{index([*outer, *inner])}] = {data}[{index([*at, *inner])}]")


RULES.register(
    OpRule(
        "gather_nd",
        2,
        (Attr("batch_dims", "int", 0), Attr("index_rank", "int", None, optional=True)),
        _gather_nd_infer,
        _gather_nd_shape,
        emit=_gather_nd_emit,
        doc="data at the index tuples along indices' first axis (TVM's layout)",
    )
)


@RULES.shape("gather_nd")
def _run_gather_nd(
    shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple
) -> list[sr.Shape]:
    data, indices = shapes
    batch = attrs["batch_dims"]
    if not indices:
        raise RuleError("indices must have rank at least 1")
    depth = indices[0]
    _nd_layout("gather_nd", len(data), len(indices), batch, depth)
    for k in range(batch):
        sr.expect(indices[1 + k], data[k], f"batch axis {k} of indices")
    return [(*data[:batch], *indices[1 + batch :], *data[batch + depth :])]


# --- the scatters ------------------------------------------------------------------------------


def _scatter_dtypes(op: str, data: Spec, indices: Spec, updates: Spec, reduction: str) -> None:
    require_kind("indices", indices, "int")
    if updates.dtype != data.dtype:
        raise RuleError(
            f"dtype not allowed: {op} updates have dtype {updates.dtype} but data {data.dtype}"
        )
    if reduction != "update":
        require_kind(f"data of reduction {reduction!r}", data, "numeric")
    if reduction == "mean":
        require_kind("data of reduction 'mean'", data, "float")


def _combine(src: Source, target: str, update: str, dtype: str, reduction: str) -> None:
    """``target = reduction(target, update)`` on one element, in ``dtype``'s compute type."""
    if reduction == "update":
        src.line(f"{target} = {update}")
        return
    old, new = f"{target}", update
    if dtype == "float16":
        old, new = f"h.f16_to_f32({old})", f"h.f16_to_f32({new})"
    ctype = dtypes.np_type(dtype)
    a, b = src.fresh("a"), src.fresh("b")
    src.line(f"{a} = {ctype}({old})")
    src.line(f"{b} = {ctype}({new})")
    if reduction in ("add", "mean"):
        value = f"{a} + {b}"
    elif reduction == "mul":
        value = f"{a} * {b}"
    else:
        # numpy's maximum/minimum: a NaN on either side wins.
        better = f"{b} > {a}" if reduction == "max" else f"{b} < {a}"
        if dtypes.kind(dtype) == "float":
            better = f"({better} or {b} != {b})"
        value = f"({b} if {better} else {a})"
    if dtype == "float16":
        value = f"h.f32_to_f16(np.float32({value}))"
    else:
        value = wrap(value, dtype)
    src.line(f"{target} = {value}")


def _copy_data(ctx: EmitCtx, size: str) -> None:
    flat = ctx.src.fresh("f")
    ctx.src.line(f"{flat} = {ctx.outs[0]}.reshape({size})")
    ctx.src.line(f"{flat}[:] = {ctx.args[0]}.reshape({size})")


def _mean_counts(ctx: EmitCtx, size: str) -> str:
    counts = ctx.src.fresh("c")
    ctx.src.line(f"{counts} = np.zeros({size}, np.int64)")
    return counts


def _finish_mean(ctx: EmitCtx, counts: str, size: str) -> None:
    """Divide each written position by one more than its update count."""
    src, dtype = ctx.src, ctx.out_specs[0].dtype
    flat, k = src.fresh("f"), src.fresh("k")
    src.line(f"{flat} = {ctx.outs[0]}.reshape({size})")
    with src.block(f"for {k} in range({size}):"), src.block(f"if {counts}[{k}] > 0:"):
        if dtype == "float16":
            value = f"h.f16_to_f32({flat}[{k}]) / np.float32({counts}[{k}] + 1)"
            src.line(f"{flat}[{k}] = h.f32_to_f16(np.float32({value}))")
        else:
            ctype = dtypes.np_type(dtype)
            src.line(f"{flat}[{k}] = {ctype}({flat}[{k}] / {ctype}({counts}[{k}] + 1))")


def _flat_position(at: list[str], dims: list[str]) -> str:
    """The C-order flat position of index ``at`` in an array of ``dims``."""
    text = at[0]
    for i, d in zip(at[1:], dims[1:]):
        text = f"({text}) * {d} + {i}"
    return text


def _scatter_elements_infer(
    args: tuple[Spec, ...], attrs: dict, declared: tuple
) -> tuple[Spec, ...]:
    data, indices, updates = args
    require_rank("data", data, 1)
    _same_rank("scatter_elements", [("data", data), ("indices", indices), ("updates", updates)])
    _scatter_dtypes("scatter_elements", data, indices, updates, attrs["reduction"])
    norm_axis("axis", attrs["axis"], data.ndim)
    return (Spec(data.dtype, data.ndim),)


def _scatter_elements_shape(ctx: ShapeCtx) -> list[list[str]]:
    data, indices, updates = ctx.arg_dims
    axis = norm_axis("axis", ctx.attrs["axis"], len(data))
    for d, (i, u) in enumerate(zip(indices, updates)):
        ctx.expect(u, i, f"axis {d} of updates (the indices' size)")
    _not_longer(ctx, indices, data, axis, "indices")
    return [list(data)]


def _scatter_elements_emit(ctx: EmitCtx) -> None:
    src = ctx.src
    _, indices, updates = ctx.args
    dims, index_dims = ctx.arg_dims[0], ctx.arg_dims[1]
    dtype, reduction = ctx.out_specs[0].dtype, ctx.attrs["reduction"]
    axis = norm_axis("axis", ctx.attrs["axis"], len(dims))
    size = product(dims)
    _copy_data(ctx, size)
    counts = _mean_counts(ctx, size) if reduction == "mean" else None
    with src.loops(index_dims) as ii:
        j = _checked(ctx, f"{indices}[{index(ii)}]", dims[axis], f"scatter along axis {axis}")
        at = [*ii[:axis], j, *ii[axis + 1 :]]
        _combine(src, f"{ctx.outs[0]}[{index(at)}]", f"{updates}[{index(ii)}]", dtype, reduction)
        if counts is not None:
            src.line(f"{counts}[{_flat_position(at, dims)}] += 1")
    if counts is not None:
        _finish_mean(ctx, counts, size)


RULES.register(
    OpRule(
        "scatter_elements",
        3,
        (
            Attr("axis", "int", 0),
            Attr("reduction", "str", "update", choices=SCATTER_ELEMENTS_REDUCTIONS),
        ),
        _scatter_elements_infer,
        _scatter_elements_shape,
        emit=_scatter_elements_emit,
        doc="data with updates written (or reduced) at indices along axis",
    )
)


@RULES.shape("scatter_elements")
def _run_scatter_elements(
    shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple
) -> list[sr.Shape]:
    data, indices, updates = shapes
    axis = sr.axis_of(attrs["axis"], len(data))
    if updates != indices:
        raise RuleError(
            f"updates {sr.fmt_shape(updates)} must have the shape of indices "
            f"{sr.fmt_shape(indices)}"
        )
    _run_not_longer(indices, data, axis, "indices")
    return [data]


def _scatter_nd_depth(data: int, indices: int, updates: int) -> int:
    """The index depth M: updates are (tuples..., data axes from M on)."""
    return data - updates + indices - 1


def _scatter_nd_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    data, indices, updates = args
    require_rank("indices", indices, 1)
    _scatter_dtypes("scatter_nd", data, indices, updates, attrs["mode"])
    _nd_layout(
        "scatter_nd", data.ndim, indices.ndim, 0,
        _scatter_nd_depth(data.ndim, indices.ndim, updates.ndim),
    )  # fmt: skip
    return (Spec(data.dtype, data.ndim),)


def _scatter_nd_shape(ctx: ShapeCtx) -> list[list[str]]:
    data, indices, updates = ctx.arg_dims
    depth = _scatter_nd_depth(len(data), len(indices), len(updates))
    ctx.expect(indices[0], str(depth), "the index depth (indices' first axis)")
    tuples = len(indices) - 1
    for d in range(tuples):
        ctx.expect(updates[d], indices[1 + d], f"axis {d} of updates (indices' axis {d + 1})")
    for d in range(depth, len(data)):
        ctx.expect(updates[tuples + d - depth], data[d], f"axis {tuples + d - depth} of updates")
    return [list(data)]


def _scatter_nd_emit(ctx: EmitCtx) -> None:
    src = ctx.src
    _, indices, updates = ctx.args
    dims, index_dims, update_dims = ctx.arg_dims
    dtype, mode = ctx.out_specs[0].dtype, ctx.attrs["mode"]
    depth = _scatter_nd_depth(len(dims), len(index_dims), len(update_dims))
    tuples = len(index_dims) - 1
    _copy_data(ctx, product(dims))
    with src.loops(update_dims[:tuples]) as outer:
        at = []
        for k in range(depth):
            value = f"{indices}[{index([str(k), *outer])}]"
            at.append(_checked(ctx, value, dims[k], f"scatter_nd on axis {k}"))
        with src.loops(update_dims[tuples:]) as inner:
            target = f"{ctx.outs[0]}[{index([*at, *inner])}]"
            _combine(src, target, f"{updates}[{index([*outer, *inner])}]", dtype, mode)


RULES.register(
    OpRule(
        "scatter_nd",
        3,
        (Attr("mode", "str", "update", choices=SCATTER_ND_MODES),),
        _scatter_nd_infer,
        _scatter_nd_shape,
        emit=_scatter_nd_emit,
        doc="data with updates written (or reduced) at the index tuples along indices' "
        "first axis (TVM's layout)",
    )
)


@RULES.shape("scatter_nd")
def _run_scatter_nd(
    shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple
) -> list[sr.Shape]:
    data, indices, updates = shapes
    if not indices:
        raise RuleError("indices must have rank at least 1")
    depth = _scatter_nd_depth(len(data), len(indices), len(updates))
    _nd_layout("scatter_nd", len(data), len(indices), 0, depth)
    expected = (*indices[1:], *data[depth:])
    if indices[0] != depth or updates != expected:
        raise RuleError(
            f"indices {sr.fmt_shape(indices)} and updates {sr.fmt_shape(updates)} do not "
            f"fit data {sr.fmt_shape(data)}: index tuples of length {depth} along indices' "
            f"first axis need updates of shape {sr.fmt_shape(expected)}"
        )
    return [data]
