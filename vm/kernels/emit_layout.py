"""Kernel rules for layout operators: reshape, squeeze, expand_dims, nn.batch_flatten,
transpose, concatenate, stack, split, strided_slice and take.

Runtime layer, kernel generator (``vm.kernels``); standard library only.

These operators move elements without arithmetic, so they work on raw storage (a
``float16`` tensor is copied as its bits). The reshape-like ones (``reshape``, ``squeeze``,
``expand_dims``, ``nn.batch_flatten``) copy the flat data; inside a fused kernel their
intermediate results are views that share the input's memory. Semantics mirror
``compiler/op/defs_transform.py`` and ``defs_nn.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from vm.kernels import dtypes
from vm.kernels import shape_rules as sr
from vm.kernels.newshape import newshape_plan, newshape_rank
from vm.kernels.rules import (
    Attr,
    OpRule,
    RuleError,
    RuleSet,
    Spec,
    norm_axes,
    norm_axis,
    require_kind,
    require_rank,
    require_same_dtype,
)
from vm.kernels.source import (
    C_ARRAY,
    STRIDED_VIEW,
    EmitCtx,
    ShapeCtx,
    index,
    product,
    shape_tuple,
)

#: The rules this module defines (gathered by :mod:`vm.kernels.table`).
RULES = RuleSet()

# --- reshape-like: flat copies and views -------------------------------------------------------


def emit_flat_copy(ctx: EmitCtx) -> None:
    """Copy the input's elements, in order, into the output (same element count)."""
    src = ctx.src
    n = src.fresh("n")
    src.line(f"{n} = {product(ctx.out_dims[0])}")
    a, b = src.fresh("f"), src.fresh("f")
    src.line(f"{a} = {ctx.args[0]}.reshape({n})")
    src.line(f"{b} = {ctx.outs[0]}.reshape({n})")
    j = src.fresh("j")
    with src.block(f"for {j} in range({n}):"):
        src.line(f"{b}[{j}] = {a}[{j}]")


def _view(ctx: EmitCtx) -> str:
    return f"{ctx.args[0]}.reshape({shape_tuple(ctx.out_dims[0])})"


def _reshape_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    ndim = newshape_rank(attrs["newshape"], args[0].ndim)
    if ndim > dtypes.MAX_NDIM:
        raise RuleError(f"ndim out of range: reshape to rank {ndim}; at most {dtypes.MAX_NDIM}")
    return (Spec(args[0].dtype, ndim),)


def _reshape_shape(ctx: ShapeCtx) -> list[list[str]]:
    dims = ctx.arg_dims[0]
    out: list[str] = []
    infer_at = -1
    for piece in newshape_plan(ctx.attrs["newshape"], len(dims)):
        if piece.kind == "size":
            out.append(str(piece.value))
        elif piece.kind == "copy":
            out.append(dims[piece.src])
        elif piece.kind == "infer":
            infer_at = len(out)
            out.append("")
        elif piece.kind == "merge":
            out.append(ctx.let(f"{dims[piece.src]} * {dims[piece.src + 1]}"))
        else:  # split dims[src] into the two parts
            (d1, d2), dim = piece.parts, dims[piece.src]
            if d1 == -1 or d2 == -1:
                known = d2 if d1 == -1 else d1
                ctx.fail_if(f"{dim} % {known} != 0", f"-4 cannot split a dimension by {known}")
                other = ctx.let(f"{dim} // {known}")
                out.extend([other, str(d2)] if d1 == -1 else [str(d1), other])
            else:
                ctx.expect(dim, str(d1 * d2), f"-4 splits a dimension into {d1} x {d2}")
                out.extend([str(d1), str(d2)])
    total = ctx.let(product(dims))
    known = ctx.let(product([d for k, d in enumerate(out) if k != infer_at]))
    if infer_at >= 0:
        ctx.fail_if(f"{known} == 0", "cannot infer the -1 in newshape: other dimensions are 0")
        ctx.fail_if(f"{total} % {known} != 0", "the element count does not divide newshape")
        out[infer_at] = ctx.let(f"{total} // {known}")
    else:
        ctx.expect(known, total, "reshape element count")
    return [out]


RULES.register(
    OpRule(
        "reshape",
        1,
        (Attr("newshape", "ints", required=True),),
        _reshape_infer,
        _reshape_shape,
        emit=emit_flat_copy,
        view=_view,
    )
)


def _squeeze_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    data = args[0]
    if attrs["axis"] is None:
        # Which axes have size 1 is known only at run time; accept the declared rank.
        want = declared[0].ndim if declared else data.ndim
        return (Spec(data.dtype, min(want, data.ndim)),)
    axes = norm_axes("axis", attrs["axis"], data.ndim)
    return (Spec(data.dtype, data.ndim - len(axes)),)


def _squeeze_shape(ctx: ShapeCtx) -> list[list[str]]:
    dims = ctx.arg_dims[0]
    axis = ctx.attrs["axis"]
    if axis is not None:
        axes = norm_axes("axis", axis, len(dims))
        for a in axes:
            ctx.expect(dims[a], "1", f"size of squeezed axis {a}")
        return [[d for a, d in enumerate(dims) if a not in axes]]
    # Keep the dimensions that are not 1, in order; their count must be the declared rank.
    rank = ctx.out_specs[0].ndim
    src = ctx.src
    kept = src.fresh("sq")
    count = src.fresh("c")
    src.line(f"{kept} = np.ones({max(len(dims), 1)}, np.int64)")
    src.line(f"{count} = 0")
    for d in dims:
        with src.block(f"if {d} != 1:"):
            src.line(f"{kept}[min({count}, {max(len(dims), 1) - 1})] = {d}")
            src.line(f"{count} += 1")
    ctx.expect(count, str(rank), "number of axes of size other than 1")
    return [[ctx.let(f"{kept}[{k}]") for k in range(rank)]]


RULES.register(
    OpRule(
        "squeeze",
        1,
        (Attr("axis", "ints", None, optional=True),),
        _squeeze_infer,
        _squeeze_shape,
        emit=emit_flat_copy,
        view=_view,
    )
)


def _expand_dims_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    count = attrs["num_newaxis"]
    if count < 0:
        raise RuleError(f"attribute num_newaxis={count} must be >= 0")
    norm_axis("axis", attrs["axis"], args[0].ndim, extra=1)
    ndim = args[0].ndim + count
    if ndim > dtypes.MAX_NDIM:
        raise RuleError(f"ndim out of range: expand_dims to rank {ndim}; at most {dtypes.MAX_NDIM}")
    return (Spec(args[0].dtype, ndim),)


def _expand_dims_shape(ctx: ShapeCtx) -> list[list[str]]:
    dims = ctx.arg_dims[0]
    axis = norm_axis("axis", ctx.attrs["axis"], len(dims), extra=1)
    return [[*dims[:axis], *(["1"] * ctx.attrs["num_newaxis"]), *dims[axis:]]]


RULES.register(
    OpRule(
        "expand_dims",
        1,
        (Attr("axis", "int", required=True), Attr("num_newaxis", "int", 1)),
        _expand_dims_infer,
        _expand_dims_shape,
        emit=emit_flat_copy,
        view=_view,
    )
)


def _batch_flatten_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    require_rank("data", args[0], 1)
    return (Spec(args[0].dtype, 2),)


def _batch_flatten_shape(ctx: ShapeCtx) -> list[list[str]]:
    dims = ctx.arg_dims[0]
    return [[dims[0], ctx.let(product(dims[1:]))]]


RULES.register(
    OpRule(
        "nn.batch_flatten",
        1,
        (),
        _batch_flatten_infer,
        _batch_flatten_shape,
        emit=emit_flat_copy,
        view=_view,
    )
)


# --- transpose ---------------------------------------------------------------------------------


def transpose_perm(axes: tuple[int, ...] | None, ndim: int) -> list[int]:
    """The permutation ``transpose`` applies (reversed axes when ``axes`` is empty)."""
    if not axes:
        return list(range(ndim))[::-1]
    if len(axes) != ndim:
        raise RuleError(
            f"attribute axes={tuple(axes)} must list each of the {ndim} axes once, "
            f"found {len(axes)} entries"
        )
    return norm_axes("axes", axes, ndim)


def _transpose_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    transpose_perm(attrs["axes"], args[0].ndim)
    return (args[0],)


def _transpose_shape(ctx: ShapeCtx) -> list[list[str]]:
    dims = ctx.arg_dims[0]
    return [[dims[a] for a in transpose_perm(ctx.attrs["axes"], len(dims))]]


#: Side of the square tiles a transpose that moves the last axis copies in. A 16x16 tile of
#: float32 reads 16 cache lines and writes 16, so both sides stay in L1 while the tile is
#: copied; walking whole rows instead touches a new line of the input on every element.
TRANSPOSE_TILE = 16


def _transpose_emit(ctx: EmitCtx) -> None:
    perm = transpose_perm(ctx.attrs["axes"], len(ctx.arg_dims[0]))
    last = len(perm) - 1
    if last < 1 or perm[last] == last:
        # The innermost axis stays innermost: row-major order reads and writes in runs.
        with ctx.src.loops(ctx.out_dims[0]) as oi:
            ctx.src.line(f"{ctx.outs[0]}[{index(oi)}] = {ctx.args[0]}[{index(_source(perm, oi))}]")
        return
    if perm[last] == last - 1 and _pairs_apply(ctx):
        _transpose_pairs(ctx, perm)
    else:
        _transpose_moving_last(ctx, perm)


def _transpose_moving_last(ctx: EmitCtx, perm: list[int]) -> None:
    """A transpose that moves the input's last axis: register tiles or tiled loops."""
    last = len(perm) - 1
    groups = batched_transpose_groups(perm)
    # The register tiles read arrays numba holds contiguous; a strided view of a slice
    # (see vm.kernels.codegen.plan_strided) takes the tiled loops.
    strided = STRIDED_VIEW.fullmatch(ctx.args[0])
    if groups is None or ctx.arg_specs[0].dtype != "float32" or strided:
        _transpose_tiled(ctx, perm, perm.index(last))
        return
    # Contiguous float32: the register tiles of the runtime, shared between threads.
    dims = ctx.arg_dims[0]
    lead, split = groups
    x, out = ctx.args[0], ctx.outs[0]
    sizes = ", ".join(product(dims[a:b]) for a, b in ((0, lead), (lead, split), (split, None)))
    with ctx.src.block(f"if {x}.flags.c_contiguous and {out}.flags.c_contiguous:"):
        ctx.src.line(f"tr.batched_f32({x}, {out}, {sizes})")
    with ctx.src.block("else:"):
        _transpose_tiled(ctx, perm, perm.index(last))


def _transpose_pairs(ctx: EmitCtx, perm: list[int]) -> None:
    """A transpose whose output rows run along the input's second-to-last axis: when the
    input's last axis has 2 elements (a space-to-depth of 2x2 blocks, ConvNeXt's
    downsampling; see compiler.transform.alter_op_layout), each input row is split into
    the two output rows of its even and odd elements by vector shuffles
    (:func:`vm.kernels.runtime.packed.split_pairs`), where the tiled loops gathered such
    rows an element at a time; other sizes take :func:`_transpose_moving_last`."""
    src, x, out = ctx.src, ctx.args[0], ctx.outs[0]
    last = len(perm) - 1
    across = perm.index(last)
    dims = ctx.out_dims[0]
    pairs = f"{ctx.arg_dims[0][last]} == 2"
    with src.block(f"if {pairs} and {x}.flags.c_contiguous and {out}.flags.c_contiguous:"):
        outer = [k for k in range(len(dims)) if k not in (across, last)]
        with src.loops([dims[k] for k in outer]) as oi:
            full = [""] * len(dims)
            for k, name in zip(outer, oi):
                full[k] = name
            # The input's block of (row, pair) at these indices, and the two output rows.
            row = [name for name in _source(perm, full) if name]
            rows = [index([*full[:across], phase, *full[across + 1 : last]]) for phase in "01"]
            even, odd = (f"{out}[{r}].ctypes.data" for r in rows)
            src.line(f"pk.split_pairs({x}[{index(row)}].ctypes.data, {even}, {odd}, {dims[last]})")
        # Without a loop around it (a 2-D input), the line above is the input's last
        # use, and a temporary would be freed before the split reads it.
        src.line(f"cb.alive({x})")
    with src.block("else:"):
        _transpose_moving_last(ctx, perm)


def batched_transpose_groups(perm: list[int]) -> tuple[int, int] | None:
    """``(k, m)`` when ``perm`` keeps axes ``:k`` in place and moves the group ``m:`` in
    front of the group ``k:m`` (``(0, 2, 3, 1)``: NCHW to NHWC, ``k = 1, m = 2``): the
    transpose of a batch of matrices, rows ``k:m`` by columns ``m:``. None otherwise."""
    n = len(perm)
    k = 0
    while k < n and perm[k] == k:
        k += 1
    if k == n:
        return None
    m = perm[k]
    expected = list(range(k)) + list(range(m, n)) + list(range(k, m))
    return (k, m) if m > k and perm == expected else None


def _source(perm: list[int], out_index: list[str]) -> list[str]:
    source = [""] * len(perm)
    for k, a in enumerate(perm):
        source[a] = out_index[k]
    return source


def _transpose_tiled(ctx: EmitCtx, perm: list[int], across: int) -> None:
    """Copy in square tiles over the output's last axis and ``across``, the output axis
    that walks the input's last axis, so reads and writes both stay in runs."""
    src, dims, last = ctx.src, ctx.out_dims[0], len(perm) - 1
    outer = [k for k in range(len(dims)) if k not in (across, last)]
    t = TRANSPOSE_TILE
    with src.loops([dims[k] for k in outer]) as oi:
        ta, tl = src.fresh("ta"), src.fresh("tl")
        ea, el = src.fresh("ea"), src.fresh("el")
        ia, il = src.fresh("ia"), src.fresh("il")
        full = [""] * len(dims)
        for k, name in zip(outer, oi):
            full[k] = name
        full[across], full[last] = ia, il
        with (
            src.block(f"for {ta} in range(0, {dims[across]}, {t}):"),
            src.block(f"for {tl} in range(0, {dims[last]}, {t}):"),
        ):
            src.line(f"{ea} = min({ta} + {t}, {dims[across]})")
            src.line(f"{el} = min({tl} + {t}, {dims[last]})")
            with (
                src.block(f"for {ia} in range({ta}, {ea}):"),
                src.block(f"for {il} in range({tl}, {el}):"),
            ):
                src.line(
                    f"{ctx.outs[0]}[{index(full)}] = {ctx.args[0]}[{index(_source(perm, full))}]"
                )


RULES.register(
    OpRule(
        "transpose",
        1,
        (Attr("axes", "ints", None, optional=True),),
        _transpose_infer,
        _transpose_shape,
        emit=_transpose_emit,
    )
)


# --- concatenate, stack, split -----------------------------------------------------------------


def _concatenate_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    names = [f"data.{i}" for i in range(len(args))]
    dtype = require_same_dtype(names, args)
    require_rank("data.0", args[0], 1)
    for name, spec in zip(names, args):
        require_rank(name, spec, args[0].ndim, args[0].ndim)
    norm_axis("axis", attrs["axis"], args[0].ndim)
    return (Spec(dtype, args[0].ndim),)


def _concatenate_shape(ctx: ShapeCtx) -> list[list[str]]:
    first = ctx.arg_dims[0]
    axis = norm_axis("axis", ctx.attrs["axis"], len(first))
    for i, dims in enumerate(ctx.arg_dims[1:], start=1):
        for a, d in enumerate(dims):
            if a != axis:
                ctx.expect(d, first[a], f"dimension {a} of field {i} (off the concatenation axis)")
    out = list(first)
    out[axis] = ctx.let(" + ".join(dims[axis] for dims in ctx.arg_dims))
    return [out]


def _concatenate_emit(ctx: EmitCtx) -> None:
    src = ctx.src
    axis = norm_axis("axis", ctx.attrs["axis"], len(ctx.arg_dims[0]))
    out, out_dims = ctx.outs[0], ctx.out_dims[0]
    offset = src.fresh("off")
    src.line(f"{offset} = 0")
    flat = None
    for arg, dims in zip(ctx.args, ctx.arg_dims):
        if C_ARRAY.fullmatch(arg) and C_ARRAY.fullmatch(out):
            # For each index before the axis, a C-contiguous field is one run of elements
            # in the output too: copied flat, a loop LLVM vectorizes, where the loop nest
            # over the field's axes, indexed at an offset, kept most of it scalar (DeepLabV3's
            # pooled branch and 256 channels, 32768 elements, 59 us).
            if flat is None:
                flat = src.fresh("fo")
                src.line(f"{flat} = {out}.reshape({out}.size)")
            source, run, start = src.fresh("fa"), src.fresh("run"), src.fresh("at")
            o, q, to, of = src.fresh("o"), src.fresh("q"), src.fresh("to"), src.fresh("of")
            src.line(f"{source} = {arg}.reshape({arg}.size)")
            src.line(f"{run} = {product(dims[axis:])}")
            with src.block(f"for {o} in range({product(dims[:axis])}):"):
                src.line(
                    f"{start} = {o} * ({product(out_dims[axis:])}) + {offset} * "
                    f"({product(dims[axis + 1 :])})"
                )
                # Runs as slices, indexed by the loop's own counter: an index numba cannot
                # prove non-negative gets a wraparound test that keeps the loop scalar.
                src.line(f"{to} = {flat}[{start} : {start} + {run}]")
                src.line(f"{of} = {source}[{o} * {run} : ({o} + 1) * {run}]")
                with src.block(f"for {q} in range({run}):"):
                    src.line(f"{to}[{q}] = {of}[{q}]")
        else:
            with src.loops(dims) as ii:
                target = list(ii)
                target[axis] = f"{offset} + {ii[axis]}"
                src.line(f"{out}[{index(target)}] = {arg}[{index(ii)}]")
        src.line(f"{offset} += {dims[axis]}")


RULES.register(
    OpRule(
        "concatenate",
        None,
        (Attr("axis", "int", 0),),
        _concatenate_infer,
        _concatenate_shape,
        emit=_concatenate_emit,
    )
)


def _stack_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    names = [f"data.{i}" for i in range(len(args))]
    dtype = require_same_dtype(names, args)
    for name, spec in zip(names, args):
        require_rank(name, spec, args[0].ndim, args[0].ndim)
    norm_axis("axis", attrs["axis"], args[0].ndim, extra=1)
    if args[0].ndim + 1 > dtypes.MAX_NDIM:
        raise RuleError(f"ndim out of range: stack to rank {args[0].ndim + 1}")
    return (Spec(dtype, args[0].ndim + 1),)


def _stack_shape(ctx: ShapeCtx) -> list[list[str]]:
    first = ctx.arg_dims[0]
    axis = norm_axis("axis", ctx.attrs["axis"], len(first), extra=1)
    for i, dims in enumerate(ctx.arg_dims[1:], start=1):
        for a, d in enumerate(dims):
            ctx.expect(d, first[a], f"dimension {a} of field {i}")
    out = list(first)
    out.insert(axis, str(len(ctx.arg_dims)))
    return [out]


def _stack_emit(ctx: EmitCtx) -> None:
    axis = norm_axis("axis", ctx.attrs["axis"], len(ctx.arg_dims[0]), extra=1)
    for k, (arg, dims) in enumerate(zip(ctx.args, ctx.arg_dims)):
        with ctx.src.loops(dims) as ii:
            target = list(ii)
            target.insert(axis, str(k))
            ctx.src.line(f"{ctx.outs[0]}[{index(target)}] = {arg}[{index(ii)}]")


RULES.register(
    OpRule(
        "stack",
        None,
        (Attr("axis", "int", 0),),
        _stack_infer,
        _stack_shape,
        emit=_stack_emit,
    )
)


def _split_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    data = args[0]
    require_rank("data", data, 1)
    norm_axis("axis", attrs["axis"], data.ndim)
    spec = attrs["indices_or_sections"]
    if isinstance(spec, int):
        if spec < 1:
            raise RuleError(f"attribute indices_or_sections={spec} must be >= 1")
        count = spec
    else:
        begin = 0
        for value in spec:
            if value < begin:
                raise RuleError(
                    f"attribute indices_or_sections={tuple(spec)} must be non-decreasing and "
                    "non-negative"
                )
            begin = value
        count = len(spec) + 1
    if count > 4096:
        raise RuleError(f"split into {count} pieces; at most 4096 allowed")
    return tuple(Spec(data.dtype, data.ndim) for _ in range(count))


def _split_shape(ctx: ShapeCtx) -> list[list[str]]:
    dims = ctx.arg_dims[0]
    axis = norm_axis("axis", ctx.attrs["axis"], len(dims))
    spec = ctx.attrs["indices_or_sections"]
    dim = dims[axis]
    starts: list[str] = []
    sizes: list[str] = []
    if isinstance(spec, int):
        ctx.fail_if(f"{dim} % {spec} != 0", f"the split axis is not divisible by {spec}")
        size = ctx.let(f"{dim} // {spec}")
        for k in range(spec):
            starts.append(ctx.let(f"{k} * {size}"))
            sizes.append(size)
    else:
        begin = "0"
        for value in spec:
            ctx.fail_if(f"{value} > {dim}", f"split index {value} is beyond the split axis")
            starts.append(begin)
            sizes.append(str(value) if begin == "0" else f"{value - int(begin)}")
            begin = str(value)
        starts.append(begin)
        sizes.append(ctx.let(f"{dim} - {begin}"))
    ctx.extra["starts"] = starts
    out = []
    for size in sizes:
        piece = list(dims)
        piece[axis] = size
        out.append(piece)
    return out


def _split_emit(ctx: EmitCtx) -> None:
    axis = norm_axis("axis", ctx.attrs["axis"], len(ctx.arg_dims[0]))
    for out, dims, start in zip(ctx.outs, ctx.out_dims, ctx.extra["starts"]):
        with ctx.src.loops(dims) as oi:
            source = list(oi)
            source[axis] = f"{start} + {oi[axis]}"
            ctx.src.line(f"{out}[{index(oi)}] = {ctx.args[0]}[{index(source)}]")


RULES.register(
    OpRule(
        "split",
        1,
        (Attr("indices_or_sections", "int_or_ints", required=True), Attr("axis", "int", 0)),
        _split_infer,
        _split_shape,
        emit=_split_emit,
    )
)


# --- strided_slice -----------------------------------------------------------------------------


def slice_plan(
    attrs: Mapping[str, Any], ndim: int, what: str = "the input"
) -> list[tuple[int, int, int | None, int]]:
    """``(axis, begin, end, stride)`` per sliced axis (``end=None``: to the edge).

    The one reading of ``strided_slice``'s attributes: the kernel's, the run-time shape
    function's and the compiler's (type relation and numpy reference). Without ``axes``,
    ``begin`` covers the leading axes. Shorter ``end``/``strides`` lists mean "to the edge"
    and 1. ``slice_mode="size"`` reads ``end`` as sizes (-1: to the edge). ``what`` names
    the input in messages; :class:`RuleError` if the attributes do not fit rank ``ndim``.
    """
    begin = list(attrs["begin"])
    end = list(attrs["end"])
    strides = list(attrs["strides"] or ())
    if attrs["axes"] is None:
        if len(begin) > ndim:
            raise RuleError(
                f"attribute begin={tuple(begin)} has {len(begin)} entries but {what} has "
                f"rank {ndim}"
            )
        axes = list(range(len(begin)))
    else:
        axes = norm_axes("axes", attrs["axes"], ndim)
        if len(begin) != len(axes):
            raise RuleError(
                f"attribute begin={tuple(begin)} must have one entry per axis in "
                f"axes={tuple(attrs['axes'])}"
            )
    for name, values in (("end", end), ("strides", strides)):
        if len(values) > len(axes):
            raise RuleError(
                f"attribute {name}={tuple(values)} has more entries than begin={tuple(begin)}"
            )
    size_mode = attrs["slice_mode"] == "size"
    plan = []
    for i, axis in enumerate(axes):
        stride = strides[i] if i < len(strides) else 1
        stop: int | None = end[i] if i < len(end) else None
        if size_mode:
            stride = 1
            if stop is not None:
                start = begin[i]
                stop = None if stop < 0 else start + stop
                # A negative begin counts from the edge; its size must not wrap past it.
                if stop is not None and start < 0 and stop >= 0:
                    stop = None
        if stride == 0:
            raise RuleError(f"attribute strides has a 0 step for axis {axis}")
        plan.append((axis, begin[i], stop, stride))
    return plan


def _strided_slice_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    slice_plan(attrs, args[0].ndim)
    return (args[0],)


def _strided_slice_shape(ctx: ShapeCtx) -> list[list[str]]:
    dims = ctx.arg_dims[0]
    out = list(dims)
    starts: dict[int, tuple[str, int]] = {}
    for axis, begin, end, stride in slice_plan(ctx.attrs, len(dims)):
        start, count = ctx.src.fresh("st"), ctx.src.fresh("d")
        has_end = end is not None
        ctx.src.line(
            f"{start}, {count} = h.slice_start({dims[axis]}, {begin}, "
            f"{end if has_end else 0}, {has_end}, {stride})"
        )
        starts[axis] = (start, stride)
        out[axis] = count
    ctx.extra["starts"] = starts
    return [out]


def _strided_slice_emit(ctx: EmitCtx) -> None:
    starts = ctx.extra["starts"]
    src, x, out = ctx.src, ctx.args[0], ctx.outs[0]
    dims, last = ctx.out_dims[0], len(ctx.out_dims[0]) - 1

    def copy_all() -> None:
        with src.loops(dims) as oi:
            source = list(oi)
            for axis, (start, stride) in starts.items():
                source[axis] = f"{start} + {oi[axis]} * {stride}"
            src.line(f"{out}[{index(oi)}] = {x}[{index(source)}]")

    start, stride = starts.get(last, ("0", 1))
    if stride != 2 or not _pairs_apply(ctx):
        copy_all()
        return
    # Every other element of each row (a 1x1 convolution's stride 2, see
    # compiler.transform.alter_op_layout): numba's loop reads them one at a time, the
    # runtime's shuffles 16 at a time.
    width = ctx.arg_dims[0][last]
    with src.block(f"if {x}.flags.c_contiguous and {out}.flags.c_contiguous:"):
        count, whole = src.fresh("n"), src.fresh("n")
        src.line(f"{count} = {dims[last]}")
        # take_evens reads the odd element after each even one it keeps: the row's last
        # kept element, if it ends the row, is copied alone.
        src.line(f"{whole} = {count} if {start} + 2 * {count} <= {width} else {count} - 1")
        with src.loops(dims[:last]) as oi:
            source = list(oi)
            for axis, (first, step) in starts.items():
                if axis != last:
                    source[axis] = f"{first} + {oi[axis]} * {step}"
            row = f"{x}[{index(source)}]" if oi else x
            to = f"{out}[{index(oi)}]" if oi else out
            src.line(f"pk.take_evens({row}.ctypes.data + {start} * 4, {to}.ctypes.data, {whole})")
            with src.block(f"if {whole} < {count}:"):
                at = index([*oi, f"{count} - 1"])
                src.line(f"{out}[{at}] = {row}[{start} + 2 * ({count} - 1)]")
    with src.block("else:"):
        copy_all()


def _pairs_apply(ctx: EmitCtx) -> bool:
    """Whether the vector shuffles of :func:`vm.kernels.runtime.packed.split_pairs` may move
    this operator's elements: 4-byte elements in arrays of their own (not a strided view of
    a slice, which the shuffles could not walk)."""
    return ctx.arg_specs[0].dtype in _WORDS and not STRIDED_VIEW.fullmatch(ctx.args[0])


#: The dtypes whose elements the float32 shuffles move as they are.
_WORDS = ("float32", "int32", "uint32")


RULES.register(
    OpRule(
        "strided_slice",
        1,
        (
            Attr("begin", "ints", required=True),
            Attr("end", "ints", required=True),
            Attr("strides", "ints", None, optional=True),
            Attr("axes", "ints", None, optional=True),
            Attr("slice_mode", "str", "end", choices=("end", "size")),
        ),
        _strided_slice_infer,
        _strided_slice_shape,
        emit=_strided_slice_emit,
    )
)


# --- take --------------------------------------------------------------------------------------

_TAKE_MODES = {"clip": 0, "wrap": 1, "fast": 2}


def take_axes(attrs: dict, data_ndim: int, indices_ndim: int) -> tuple[int, int]:
    """``(axis, batch_dims)`` normalized; ``axis`` is -1 when data is flattened."""
    batch_dims = attrs["batch_dims"]
    if batch_dims < 0:
        batch_dims += indices_ndim
    if not 0 <= batch_dims <= indices_ndim:
        raise RuleError(
            f"attribute batch_dims={attrs['batch_dims']} is out of range for indices of rank "
            f"{indices_ndim}; expected a value in [{-indices_ndim}, {indices_ndim}]"
        )
    if attrs["axis"] is None:
        if batch_dims:
            raise RuleError(f"attribute batch_dims={batch_dims} needs an explicit axis")
        return -1, 0
    if data_ndim == 0:
        raise RuleError("ndim out of range: cannot take along an axis of a rank-0 tensor")
    axis = norm_axis("axis", attrs["axis"], data_ndim)
    if batch_dims > axis:
        raise RuleError(f"attribute batch_dims={batch_dims} must not exceed axis={axis}")
    return axis, batch_dims


def _take_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    data, indices = args
    require_kind("indices", indices, "int")
    axis, batch_dims = take_axes(attrs, data.ndim, indices.ndim)
    if axis < 0:
        return (Spec(data.dtype, indices.ndim),)
    ndim = data.ndim - 1 + indices.ndim - batch_dims
    if ndim > dtypes.MAX_NDIM:
        raise RuleError(f"ndim out of range: take gives rank {ndim}; at most {dtypes.MAX_NDIM}")
    return (Spec(data.dtype, ndim),)


def _take_shape(ctx: ShapeCtx) -> list[list[str]]:
    data, indices = ctx.arg_dims
    axis, batch_dims = take_axes(ctx.attrs, len(data), len(indices))
    if axis < 0:
        size = ctx.let(product(data))
        out = list(indices)
    else:
        for k in range(batch_dims):
            ctx.expect(indices[k], data[k], f"batch dimension {k} of indices")
        size = data[axis]
        out = [*data[:axis], *indices[batch_dims:], *data[axis + 1 :]]
    ctx.extra["size"] = size
    # A non-empty gather from an empty axis has nothing to clip or wrap to.
    with ctx.src.block(f"if {size} == 0 and {product(indices)} > 0:"):
        ctx.src.line(f"h.index_error({ctx.what('cannot take from an axis of size 0')})")
    return [out]


def _take_emit(ctx: EmitCtx) -> None:
    src = ctx.src
    data, indices = ctx.args
    data_dims, index_dims = ctx.arg_dims
    axis, batch_dims = take_axes(ctx.attrs, len(data_dims), len(index_dims))
    mode = _TAKE_MODES[ctx.attrs["mode"]]
    size = ctx.extra["size"]
    if axis < 0:
        flat = src.fresh("f")
        src.line(f"{flat} = {data}.reshape({size})")
        with src.loops(ctx.out_dims[0]) as oi:
            at = f"h.take_index({indices}[{index(oi)}], {size}, {mode})"
            src.line(f"{ctx.outs[0]}[{index(oi)}] = {flat}[{at}]")
        return
    gathered = len(index_dims) - batch_dims
    with src.loops(ctx.out_dims[0]) as oi:
        index_idx = [*oi[:batch_dims], *oi[axis : axis + gathered]]
        at = f"h.take_index({indices}[{index(index_idx)}], {size}, {mode})"
        data_idx = [*oi[:axis], at, *oi[axis + gathered :]]
        src.line(f"{ctx.outs[0]}[{index(oi)}] = {data}[{index(data_idx)}]")


RULES.register(
    OpRule(
        "take",
        2,
        (
            Attr("axis", "int", None, optional=True),
            Attr("batch_dims", "int", 0),
            Attr("mode", "str", "clip", choices=("clip", "wrap", "fast")),
        ),
        _take_infer,
        _take_shape,
        emit=_take_emit,
    )
)


# --- shapes as values --------------------------------------------------------------------------


def _shape_vector_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    require_kind("dtype", Spec(attrs["dtype"], 0), "int")
    return (Spec(attrs["dtype"], 1),)


def _shape_of_emit(ctx: EmitCtx) -> None:
    for k, dim in enumerate(ctx.arg_dims[0]):
        ctx.src.line(f"{ctx.outs[0]}[{k}] = {dim}")


RULES.register(
    OpRule(
        "shape_of",
        1,
        (Attr("dtype", "dtype", "int32"),),
        _shape_vector_infer,
        lambda ctx: [[str(len(ctx.arg_dims[0]))]],
        emit=_shape_of_emit,
    )
)


def _ndarray_size_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    require_kind("dtype", Spec(attrs["dtype"], 0), "int")
    return (Spec(attrs["dtype"], 0),)


RULES.register(
    OpRule(
        "ndarray_size",
        1,
        (Attr("dtype", "dtype", "int32"),),
        _ndarray_size_infer,
        lambda ctx: [[]],
        emit=lambda ctx: ctx.src.line(f"{ctx.outs[0]}[()] = {product(ctx.arg_dims[0])}"),
    )
)


# --- data-dependent output shapes: dyn.* and arange --------------------------------------------
#
# The output shape depends on the values of an input (a shape tensor, slice bounds, range
# bounds), so the machine sizes the outputs with the shape function (vm.shape_funcs), which
# reads those values, before it calls the kernel. The operators are never fused, so their
# value is output 0 of the kernel, and the kernel takes that array's shape; it checks every
# element it reads against the input's own shape.


def _output_dims(ndim: int) -> list[str]:
    return [f"out0.shape[{d}]" for d in range(ndim)]


def _declared_rank(op: str, declared: tuple) -> int:
    if not declared:
        raise RuleError(f"{op}: the output rank comes from the shape tensor's length; declare it")
    return declared[0].ndim


def _shape_arg(what: str, spec: Spec) -> None:
    require_kind(what, spec, "int")
    require_rank(what, spec, 1, 1)


def _dyn_reshape_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    _shape_arg("newshape", args[1])
    return (Spec(args[0].dtype, _declared_rank("dyn.reshape", declared)),)


RULES.register(
    OpRule(
        "dyn.reshape",
        2,
        (),
        _dyn_reshape_infer,
        lambda ctx: [_output_dims(ctx.out_specs[0].ndim)],
        emit=emit_flat_copy,
        view=_view,
    )
)


def _dyn_broadcast_to_infer(
    args: tuple[Spec, ...], attrs: dict, declared: tuple
) -> tuple[Spec, ...]:
    _shape_arg("shape", args[1])
    rank = _declared_rank("dyn.broadcast_to", declared)
    if args[0].ndim > rank:
        raise RuleError(f"ndim out of range: cannot broadcast rank {args[0].ndim} to rank {rank}")
    return (Spec(args[0].dtype, rank),)


def _dyn_broadcast_to_shape(ctx: ShapeCtx) -> list[list[str]]:
    out = _output_dims(ctx.out_specs[0].ndim)
    dims = ctx.arg_dims[0]
    offset = len(out) - len(dims)
    for k, d in enumerate(dims):
        ctx.fail_if(
            f"{d} != 1 and {d} != {out[offset + k]}", "cannot broadcast the input to the shape"
        )
    return [out]


def _dyn_broadcast_to_emit(ctx: EmitCtx) -> None:
    dims = ctx.arg_dims[0]
    with ctx.src.loops(ctx.out_dims[0]) as oi:
        offset = len(oi) - len(dims)
        # Each input size is 1 or the output's (checked above): min() picks 0 or the index
        # without the division of a modulo (Faster R-CNN's 1.9M-element broadcast took 15 ms).
        source = [f"min({oi[offset + k]}, {d} - 1)" for k, d in enumerate(dims)]
        ctx.src.line(f"{ctx.outs[0]}[{index(oi)}] = {ctx.args[0]}[{index(source)}]")


RULES.register(
    OpRule(
        "dyn.broadcast_to",
        2,
        (),
        _dyn_broadcast_to_infer,
        _dyn_broadcast_to_shape,
        emit=_dyn_broadcast_to_emit,
    )
)


def _emit_fill(ctx: EmitCtx, value: str) -> None:
    src = ctx.src
    n = src.fresh("n")
    src.line(f"{n} = {product(ctx.out_dims[0])}")
    flat, j = src.fresh("f"), src.fresh("j")
    src.line(f"{flat} = {ctx.outs[0]}.reshape({n})")
    with src.block(f"for {j} in range({n}):"):
        src.line(f"{flat}[{j}] = {value}")


def _dyn_init_infer(op: str):
    def infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
        _shape_arg("shape", args[0])
        return (Spec(attrs["dtype"], _declared_rank(op, declared)),)

    return infer


for _name, _fill_value in (("dyn.zeros", 0), ("dyn.ones", 1)):
    RULES.register(
        OpRule(
            _name,
            1,
            (Attr("dtype", "dtype", "float32"),),
            _dyn_init_infer(_name),
            lambda ctx: [_output_dims(ctx.out_specs[0].ndim)],
            emit=lambda ctx, v=_fill_value: _emit_fill(
                ctx, f"{dtypes.np_type(ctx.out_specs[0].dtype)}({v})"
            ),
            numeric=True,
        )
    )


def _dyn_full_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    require_rank("fill_value", args[0], 0, 0)
    _shape_arg("shape", args[1])
    dtype = attrs["dtype"] or args[0].dtype
    return (Spec(dtype, _declared_rank("dyn.full", declared)),)


RULES.register(
    OpRule(
        "dyn.full",
        2,
        (Attr("dtype", "dtype_or_empty", ""),),
        _dyn_full_infer,
        lambda ctx: [_output_dims(ctx.out_specs[0].ndim)],
        emit=lambda ctx: _emit_fill(
            ctx, f"{dtypes.np_type(ctx.out_specs[0].dtype)}({ctx.args[0]}[()])"
        ),
        numeric=True,
    )
)


def _dyn_strided_slice_infer(
    args: tuple[Spec, ...], attrs: dict, declared: tuple
) -> tuple[Spec, ...]:
    for name, spec in zip(("begin", "end", "strides"), args[1:]):
        _shape_arg(name, spec)
    return (args[0],)


def _dyn_strided_slice_emit(ctx: EmitCtx) -> None:
    src = ctx.src
    data, begin, end, strides = ctx.args
    dims = ctx.arg_dims[0]
    nb, ne, ns = (ctx.arg_dims[k][0] for k in (1, 2, 3))
    ctx.fail_if(f"{nb} > {len(dims)}", "begin has more entries than the data has axes")
    ctx.fail_if(f"{ne} != {nb}", "end must have one entry per entry of begin")
    ctx.fail_if(f"{ns} != {nb} and {ns} != 1", "strides must have one entry, or one per axis")
    size_mode = ctx.attrs["slice_mode"] == "size"
    starts, steps = [], []
    for axis, dim in enumerate(dims):
        start, count, step = src.fresh("st"), src.fresh("d"), src.fresh("sp")
        src.line(f"{start}, {count}, {step} = np.int64(0), np.int64({dim}), np.int64(1)")
        with src.block(f"if {axis} < {nb}:"):
            src.line(f"{step} = np.int64({strides}[{axis} if {ns} > 1 else 0])")
            lo, hi, has_end = src.fresh("b"), src.fresh("e"), src.fresh("h")
            src.line(f"{lo} = np.int64({begin}[{axis}])")
            src.line(f"{hi} = np.int64({end}[{axis}])")
            src.line(f"{has_end} = True")
            if size_mode:
                # end holds sizes (-1: to the edge), as strided_slice's slice_mode="size".
                src.line(f"{step} = np.int64(1)")
                with src.block(f"if {hi} < 0 or ({lo} < 0 and {lo} + {hi} >= 0):"):
                    src.line(f"{has_end} = False")
                with src.block("else:"):
                    src.line(f"{hi} = {lo} + {hi}")
            ctx.fail_if(f"{step} == 0", f"strides has a 0 step for axis {axis}")
            src.line(f"{start}, {count} = h.slice_start({dim}, {lo}, {hi}, {has_end}, {step})")
        src.line(
            f"h.expect({ctx.out_dims[0][axis]}, {count}, "
            f"{ctx.what(f'size of axis {axis} of the slice')})"
        )
        starts.append(start)
        steps.append(step)
    with src.loops(ctx.out_dims[0]) as oi:
        source = [f"{s} + {i} * {p}" for s, i, p in zip(starts, oi, steps)]
        src.line(f"{ctx.outs[0]}[{index(oi)}] = {data}[{index(source)}]")


RULES.register(
    OpRule(
        "dyn.strided_slice",
        4,
        (Attr("slice_mode", "str", "end", choices=("end", "size")),),
        _dyn_strided_slice_infer,
        lambda ctx: [_output_dims(ctx.out_specs[0].ndim)],
        emit=_dyn_strided_slice_emit,
    )
)


def _arange_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    dtype = attrs["dtype"]
    for name, spec in zip(("start", "stop", "step"), args):
        require_rank(name, spec, 0, 0)
        if spec.dtype != dtype:
            raise RuleError(f"dtype not allowed: {name} must be {dtype}, found {spec.dtype}")
    require_kind("dtype", Spec(dtype, 0), "numeric")
    return (Spec(dtype, 1),)


def _arange_emit(ctx: EmitCtx) -> None:
    src = ctx.src
    start, stop, step = (src.fresh(p) for p in ("a", "z", "p"))
    for name, arg in zip((start, stop, step), ctx.args):
        src.line(f"{name} = np.float64({arg}[()])")
    ctx.fail_if(f"{step} == 0", "step must not be 0")
    count = src.fresh("n")
    # The shape function's count, max(ceil((stop - start) / step), 0), in the same float64.
    src.line(f"{count} = max(np.int64(np.ceil(({stop} - {start}) / {step})), np.int64(0))")
    src.line(f"h.expect({ctx.out_dims[0][0]}, {count}, {ctx.what('length of the range')})")
    j = src.fresh("j")
    out_type = dtypes.np_type(ctx.out_specs[0].dtype)
    with src.block(f"for {j} in range({count}):"):
        src.line(f"{ctx.outs[0]}[{j}] = {out_type}({start} + {j} * {step})")


RULES.register(
    OpRule(
        "arange",
        3,
        (Attr("dtype", "dtype", "float32"),),
        _arange_infer,
        lambda ctx: [_output_dims(1)],
        emit=_arange_emit,
        numeric=True,
    )
)


def _argwhere_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    require_rank("condition", args[0], 1)
    return (Spec("int32", 2),)


def _argwhere_emit(ctx: EmitCtx) -> None:
    """Two passes: count the nonzero elements and check the count against the output's
    rows before writing any, so an output sized differently is an error, not a write past
    its end."""
    src = ctx.src
    cond, out = ctx.args[0], ctx.outs[0]
    dims = ctx.arg_dims[0]
    count, row = src.fresh("n"), src.fresh("row")
    src.line(f"{count} = 0")
    with src.loops(dims) as names, src.block(f"if {cond}[{index(names)}] != 0:"):
        src.line(f"{count} += 1")
    src.line(f"h.expect({ctx.out_dims[0][0]}, {count}, {ctx.what('number of nonzero elements')})")
    src.line(f"{row} = 0")
    with src.loops(dims) as names, src.block(f"if {cond}[{index(names)}] != 0:"):
        for axis, name in enumerate(names):
            src.line(f"{out}[{row}, {axis}] = np.int32({name})")
        src.line(f"{row} += 1")


RULES.register(
    OpRule(
        "argwhere",
        1,
        (),
        _argwhere_infer,
        lambda ctx: [_output_dims(2)],
        emit=_argwhere_emit,
        numeric=True,
    )
)


# --- argsort, topk -----------------------------------------------------------------------------


def _sort_infer(args: tuple[Spec, ...], attrs: dict) -> int:
    require_kind("data", args[0], "numeric")
    require_rank("data", args[0], 1)
    require_kind("dtype", Spec(attrs["dtype"], 0), "int")
    return norm_axis("axis", attrs["axis"], args[0].ndim)


def _emit_sorted(ctx: EmitCtx, keep: str, values_out: str | None, indices_out: str) -> None:
    """Sort each line along the axis (stably: equal elements keep their order) and write
    the first ``keep`` positions: the indices, and the values if ``values_out``. A long
    line is partitioned first when few positions are kept (:func:`h.sorted_positions`)."""
    src = ctx.src
    dims = ctx.arg_dims[0]
    axis = norm_axis("axis", ctx.attrs["axis"], len(dims))
    n = dims[axis]
    buf, order = src.fresh("buf"), src.fresh("ord")
    src.line(f"{buf} = np.empty({n}, {dtypes.np_type(ctx.arg_specs[0].dtype)})")
    outer = list(dims)
    outer[axis] = "1"
    with src.loops(outer) as oi:
        j = src.fresh("j")

        def at(position: str) -> str:
            return index([position if a == axis else i for a, i in enumerate(oi)])

        with src.block(f"for {j} in range({n}):"):
            src.line(f"{buf}[{j}] = {ctx.args[0]}[{at(j)}]")
        src.line(f"{order} = h.sorted_positions({buf}, {keep}, {bool(ctx.attrs['is_ascend'])})")
        with src.block(f"for {j} in range({keep}):"):
            src.line(f"{indices_out}[{at(j)}] = {order}[{j}]")
            if values_out is not None:
                src.line(f"{values_out}[{at(j)}] = {buf}[{order}[{j}]]")


def _argsort_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    _sort_infer(args, attrs)
    return (Spec(attrs["dtype"], args[0].ndim),)


RULES.register(
    OpRule(
        "argsort",
        1,
        (
            Attr("axis", "int", -1),
            Attr("is_ascend", "bool", True),
            Attr("dtype", "dtype", "int32"),
        ),
        _argsort_infer,
        lambda ctx: [list(ctx.arg_dims[0])],
        emit=lambda ctx: _emit_sorted(
            ctx,
            ctx.arg_dims[0][norm_axis("axis", ctx.attrs["axis"], len(ctx.arg_dims[0]))],
            None,
            ctx.outs[0],
        ),
        numeric=True,
    )
)


def _topk_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    _sort_infer(args, attrs)
    values = args[0]
    indices = Spec(attrs["dtype"], args[0].ndim)
    kind = attrs["ret_type"]
    return (values, indices) if kind == "both" else (values,) if kind == "values" else (indices,)


def _topk_shape(ctx: ShapeCtx) -> list[list[str]]:
    dims = list(ctx.arg_dims[0])
    axis = norm_axis("axis", ctx.attrs["axis"], len(dims))
    k = ctx.attrs["k"]
    if k >= 1:
        dims[axis] = ctx.let(f"min({k}, {dims[axis]})")
    return [dims, dims] if ctx.attrs["ret_type"] == "both" else [dims]


def _topk_emit(ctx: EmitCtx) -> None:
    axis = norm_axis("axis", ctx.attrs["axis"], len(ctx.arg_dims[0]))
    keep = ctx.out_dims[0][axis]
    kind = ctx.attrs["ret_type"]
    if kind == "both":
        _emit_sorted(ctx, keep, ctx.outs[0], ctx.outs[1])
    elif kind == "indices":
        _emit_sorted(ctx, keep, None, ctx.outs[0])
    else:
        scratch = ctx.src.fresh("idx")
        ctx.src.line(f"{scratch} = np.empty({shape_tuple(ctx.out_dims[0])}, np.int64)")
        _emit_sorted(ctx, keep, ctx.outs[0], scratch)


RULES.register(
    OpRule(
        "topk",
        1,
        (
            Attr("k", "int", 1),
            Attr("axis", "int", -1),
            Attr("ret_type", "str", "both", choices=("both", "values", "indices")),
            Attr("is_ascend", "bool", False),
            Attr("dtype", "dtype", "int32"),
        ),
        _topk_infer,
        _topk_shape,
        emit=_topk_emit,
        numeric=True,
    )
)


def _dyn_topk_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    require_kind("k", args[1], "int")
    require_rank("k", args[1], 0, 1)
    return _topk_infer(args[:1], attrs, declared)


def _dyn_topk_emit(ctx: EmitCtx) -> None:
    """topk with ``k`` a tensor: the outputs are sized by the shape function from k's value,
    and the kernel checks that size against the same rule (TVM's, or ``exact_k``) before
    writing."""
    axis = norm_axis("axis", ctx.attrs["axis"], len(ctx.arg_dims[0]))
    n = ctx.arg_dims[0][axis]
    k = ctx.src.fresh("k")
    if ctx.arg_specs[1].ndim == 0:
        ctx.src.line(f"{k} = np.int64({ctx.args[1]}[()])")
    else:
        ctx.fail_if(f"{ctx.arg_dims[1][0]} != 1", "k must hold one value")
        ctx.src.line(f"{k} = np.int64({ctx.args[1]}[0])")
    keep = ctx.out_dims[0][axis]
    if ctx.attrs["exact_k"]:
        ctx.fail_if(f"{k} < 0 or {k} > {n}", "k must lie between 0 and the length of the axis")
        ctx.src.line(f"h.expect({keep}, {k}, {ctx.what('k')})")
    else:
        ctx.src.line(f"h.expect({keep}, min({k}, {n}) if {k} >= 1 else {n}, {ctx.what('k')})")
    _topk_emit(ctx)


RULES.register(
    OpRule(
        "dyn.topk",
        2,
        (
            Attr("axis", "int", -1),
            Attr("ret_type", "str", "both", choices=("both", "values", "indices")),
            Attr("is_ascend", "bool", False),
            Attr("dtype", "dtype", "int32"),
            # TVM's rule keeps every element for k < 1; exact_k (ONNX's) keeps k of them,
            # none for 0, and fails for a k outside [0, length].
            Attr("exact_k", "bool", False),
        ),
        _dyn_topk_infer,
        # Both outputs (values, indices) have the shape the shape function gave output 0.
        lambda ctx: [_output_dims(ctx.out_specs[0].ndim)] * len(ctx.out_specs),
        emit=_dyn_topk_emit,
        numeric=True,
    )
)


# --- run-time shape rules (run by vm.shape_funcs) ----------------------------------------


@RULES.shape("reshape")
def _run_reshape(shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[sr.Shape]:
    return [sr.reshape_shape(shapes[0], sr.ints(attrs["newshape"]))]


@RULES.shape("squeeze")
def _run_squeeze(shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[sr.Shape]:
    dims = shapes[0]
    axis = attrs.get("axis")
    if axis is not None:
        axes = sr.axes_of(sr.ints(axis), len(dims))
        for a in axes:
            if dims[a] != 1:
                raise RuleError(f"cannot squeeze axis {a}: it has size {dims[a]}, expected 1")
        return [tuple(d for a, d in enumerate(dims) if a not in axes)]
    out = tuple(d for d in dims if d != 1)
    if ranks and len(out) != ranks[0]:
        # The type kept the dimensions not known to be 1; a kernel of that rank cannot
        # tell which of the run-time 1s to keep.
        raise RuleError(
            f"squeeze without axis leaves rank {len(out)}, but the program was compiled "
            f"for rank {ranks[0]}; name the axes to squeeze"
        )
    return [out]


@RULES.shape("expand_dims")
def _run_expand_dims(
    shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple
) -> list[sr.Shape]:
    dims = shapes[0]
    count = attrs["num_newaxis"]
    if count < 0:
        raise RuleError(f"attribute num_newaxis={count} must be >= 0")
    axis = sr.axis_of(attrs["axis"], len(dims), extra=1)
    return [(*dims[:axis], *([1] * count), *dims[axis:])]


@RULES.shape("nn.batch_flatten")
def _run_batch_flatten(
    shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple
) -> list[sr.Shape]:
    dims = shapes[0]
    sr.rank(dims, 1, None, "data")
    return [(dims[0], sr.prod(dims[1:]))]


@RULES.shape("transpose")
def _run_transpose(
    shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple
) -> list[sr.Shape]:
    dims = shapes[0]
    axes = attrs.get("axes")
    if not axes:
        perm = list(range(len(dims)))[::-1]
    else:
        if len(axes) != len(dims):
            raise RuleError(
                f"attribute axes={tuple(axes)} must list each of the {len(dims)} axes once"
            )
        perm = sr.axes_of(axes, len(dims), "axes")
    return [tuple(dims[a] for a in perm)]


@RULES.shape("concatenate")
def _run_concatenate(
    shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple
) -> list[sr.Shape]:
    first = shapes[0]
    sr.rank(first, 1, None, "field 0")
    axis = sr.axis_of(attrs["axis"], len(first))
    for i, dims in enumerate(shapes[1:], start=1):
        if len(dims) != len(first) or any(d != first[a] for a, d in enumerate(dims) if a != axis):
            raise RuleError(
                f"field {i} {sr.fmt_shape(dims)} differs from field 0 {sr.fmt_shape(first)} off "
                f"the concatenation axis {axis}"
            )
    out = list(first)
    out[axis] = sum(dims[axis] for dims in shapes)
    return [tuple(out)]


@RULES.shape("stack")
def _run_stack(shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[sr.Shape]:
    first = shapes[0]
    axis = sr.axis_of(attrs["axis"], len(first), extra=1)
    for i, dims in enumerate(shapes[1:], start=1):
        if dims != first:
            raise RuleError(
                f"field {i} {sr.fmt_shape(dims)} differs from field 0 {sr.fmt_shape(first)}"
            )
    out = list(first)
    out.insert(axis, len(shapes))
    return [tuple(out)]


@RULES.shape("split")
def _run_split(shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[sr.Shape]:
    dims = shapes[0]
    sr.rank(dims, 1, None, "data")
    axis = sr.axis_of(attrs["axis"], len(dims))
    dim = dims[axis]
    spec = attrs["indices_or_sections"]
    sizes: list[int] = []
    if isinstance(spec, int):
        if spec < 1 or dim % spec:
            raise RuleError(f"axis {axis} of size {dim} does not split into {spec} equal sections")
        sizes = [dim // spec] * spec
    else:
        begin = 0
        for index in spec:
            if index < begin or index > dim:
                raise RuleError(
                    f"split indices {tuple(spec)} must be non-decreasing and within axis "
                    f"{axis} of size {dim}"
                )
            sizes.append(index - begin)
            begin = index
        sizes.append(dim - begin)
    out = []
    for size in sizes:
        piece = list(dims)
        piece[axis] = size
        out.append(tuple(piece))
    return out


@RULES.shape("strided_slice")
def _run_strided_slice(
    shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple
) -> list[sr.Shape]:
    dims = shapes[0]
    # The kernel's own slice plan, so the shape function and the kernel cannot disagree.
    normalized = {
        "begin": sr.ints(attrs["begin"]),
        "end": sr.ints(attrs["end"]),
        "strides": sr.ints(attrs["strides"]) if attrs.get("strides") else None,
        "axes": sr.ints(attrs["axes"]) if attrs.get("axes") is not None else None,
        "slice_mode": attrs["slice_mode"],
    }
    try:
        plan = slice_plan(normalized, len(dims))
    except RuleError as err:
        raise RuleError(str(err)) from None
    out = list(dims)
    for axis, begin, stop, stride in plan:
        out[axis] = len(range(*slice(begin, stop, stride).indices(dims[axis])))
    return [tuple(out)]


@RULES.shape("take")
def _run_take(shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[sr.Shape]:
    data, indices = shapes
    batch_dims = attrs["batch_dims"]
    if batch_dims < 0:
        batch_dims += len(indices)
    if not 0 <= batch_dims <= len(indices):
        raise RuleError(f"attribute batch_dims={attrs.get('batch_dims')} is out of range")
    if attrs.get("axis") is None:
        return [indices]
    axis = sr.axis_of(attrs["axis"], len(data))
    if batch_dims > axis:
        raise RuleError(f"attribute batch_dims={batch_dims} must not exceed axis={axis}")
    for k in range(batch_dims):
        sr.expect(indices[k], data[k], f"batch dimension {k} of indices")
    return [(*data[:axis], *indices[batch_dims:], *data[axis + 1 :])]


@RULES.shape("shape_of")
def _run_shape_of(shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[sr.Shape]:
    return [(len(shapes[0]),)]


@RULES.shape("ndarray_size")
def _run_ndarray_size(
    shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple
) -> list[sr.Shape]:
    return [()]


def _run_sort_axis(shape: sr.Shape, attrs: Mapping[str, Any]) -> int:
    if not shape:
        raise RuleError("cannot sort a scalar")
    return sr.axis_of(int(attrs["axis"]), len(shape))


@RULES.shape("argsort")
def _run_argsort(shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[sr.Shape]:
    _run_sort_axis(shapes[0], attrs)
    return [shapes[0]]


@RULES.shape("topk")
def _run_topk(shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[sr.Shape]:
    data = shapes[0]
    axis = _run_sort_axis(data, attrs)
    k = int(attrs["k"])
    out = list(data)
    if k >= 1:
        out[axis] = min(k, data[axis])
    both = attrs["ret_type"] == "both"
    return [tuple(out), tuple(out)] if both else [tuple(out)]


# --- data-dependent run-time shape rules (run by vm.shape_funcs) ------------------------------


def _int_values(value: Any, name: str) -> tuple[int, ...]:
    array = np.asarray(value)
    if array.dtype.kind not in "iu":
        raise RuleError(f"argument {name} must hold integers, found dtype {array.dtype}")
    return tuple(int(v) for v in array.reshape(-1).tolist())


def _sizes(value: Any, name: str) -> sr.Shape:
    dims = _int_values(value, name)
    if any(d < 0 for d in dims):
        raise RuleError(f"argument {name}={sr.fmt_shape(dims)} holds a negative size")
    return dims


@RULES.value_shape("dyn.reshape", args=(1,))
def _run_dyn_reshape(
    shapes: list[sr.Shape], values: list[Any], attrs: Any, ranks: tuple
) -> list[sr.Shape]:
    return [sr.reshape_shape(shapes[0], _int_values(values[1], "newshape"))]


@RULES.value_shape("dyn.broadcast_to", args=(1,))
def _run_dyn_broadcast_to(
    shapes: list[sr.Shape], values: list[Any], attrs: Any, ranks: tuple
) -> list[sr.Shape]:
    return [sr.broadcast_to_shape(shapes[0], _sizes(values[1], "shape"))]


@RULES.value_shape("dyn.zeros", "dyn.ones", args=(0,))
def _run_dyn_init(
    shapes: list[sr.Shape], values: list[Any], attrs: Any, ranks: tuple
) -> list[sr.Shape]:
    return [_sizes(values[0], "shape")]


@RULES.value_shape("dyn.full", args=(1,))
def _run_dyn_full(
    shapes: list[sr.Shape], values: list[Any], attrs: Any, ranks: tuple
) -> list[sr.Shape]:
    sr.rank(shapes[0], 0, 0, "fill_value")
    return [_sizes(values[1], "shape")]


@RULES.value_shape("dyn.strided_slice", args=(1, 2, 3))
def _run_dyn_strided_slice(
    shapes: list[sr.Shape], values: list[Any], attrs: Any, ranks: tuple
) -> list[sr.Shape]:
    begin = _int_values(values[1], "begin")
    end = _int_values(values[2], "end")
    strides = _int_values(values[3], "strides")
    if len(strides) == 1:
        strides = strides * len(begin)
    if len(end) != len(begin) or len(strides) != len(begin):
        raise RuleError(
            f"begin {sr.fmt_shape(begin)}, end {sr.fmt_shape(end)} and strides "
            f"{sr.fmt_shape(strides)} must have one entry per sliced axis"
        )
    plain = {
        "begin": begin,
        "end": end,
        "strides": strides,
        "axes": None,
        "slice_mode": attrs["slice_mode"],
    }
    return _run_strided_slice([shapes[0]], plain, ranks)


@RULES.value_shape("arange", args=(0, 1, 2))
def _run_arange(
    shapes: list[sr.Shape], values: list[Any], attrs: Any, ranks: tuple
) -> list[sr.Shape]:
    for name, shape in zip(("start", "stop", "step"), shapes, strict=False):
        sr.rank(shape, 0, 0, name)
    start, stop, step = (np.asarray(v).item() for v in values)
    try:
        return [(sr.arange_length(start, stop, step),)]
    except (OverflowError, ValueError):
        raise RuleError(
            f"the bounds start={start}, stop={stop}, step={step} are not finite"
        ) from None


@RULES.value_shape("argwhere", args=(0,))
def _run_argwhere(
    shapes: list[sr.Shape], values: list[Any], attrs: Any, ranks: tuple
) -> list[sr.Shape]:
    condition = np.asarray(values[0])
    sr.rank(shapes[0], 1, None, "condition")
    return [(int(np.count_nonzero(condition)), len(shapes[0]))]


@RULES.value_shape("dyn.topk", args=(1,))
def _run_dyn_topk(
    shapes: list[sr.Shape], values: list[Any], attrs: Any, ranks: tuple
) -> list[sr.Shape]:
    ks = _int_values(values[1], "k")
    if len(ks) != 1:
        raise RuleError(f"argument k must hold one value, found {len(ks)}")
    dims = list(shapes[0])
    axis = sr.axis_of(attrs["axis"], len(dims))
    if attrs["exact_k"]:
        if not 0 <= ks[0] <= dims[axis]:
            raise RuleError(
                f"k={ks[0]} must lie between 0 and the length {dims[axis]} of axis {axis}"
            )
        dims[axis] = ks[0]
    elif ks[0] >= 1:
        dims[axis] = min(ks[0], dims[axis])
    count = 2 if attrs["ret_type"] == "both" else 1
    return [tuple(dims)] * count
