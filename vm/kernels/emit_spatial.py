"""Kernel rules for nn.pad and nn.upsampling.

Runtime layer, kernel generator (``vm.kernels``); standard library only.

``nn.pad`` moves elements without arithmetic, so it works on raw storage (a float16
tensor is copied as its bits): ``constant`` fills the output with ``pad_value`` converted
to data's dtype (numpy's ``astype``) and copies the input into the middle; ``edge`` and
``reflect`` map every output index to the input index it repeats. ``nn.upsampling``
rounds the output size half to even and samples with TVM's coordinates (loops in
:mod:`vm.kernels.runtime.resample`). Semantics mirror ``compiler/op/defs_spatial.py``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from vm.kernels import shape_rules as sr
from vm.kernels.rules import (
    Attr,
    OpRule,
    RuleError,
    RuleSet,
    Spec,
    require_kind,
    require_rank,
)
from vm.kernels.source import EmitCtx, ShapeCtx, cast, float_literal, index, plain, product
from vm.kernels.windows import NCHW, check_layout

#: The rules this module defines (gathered by :mod:`vm.kernels.table`).
RULES = RuleSet()

# --- nn.pad ------------------------------------------------------------------------------------

PAD_MODES = ("constant", "edge", "reflect")


def _pad_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    data, value = args
    require_rank("pad_value", value, 0, 0)
    pairs = attrs["pad_width"]
    if len(pairs) != data.ndim:
        raise RuleError(
            f"attribute pad_width has {len(pairs)} (before, after) pairs but data has rank "
            f"{data.ndim}; expected one pair per axis"
        )
    for axis, (before, after) in enumerate(pairs):
        if before < 0 or after < 0:
            raise RuleError(
                f"attribute pad_width entry {axis} is ({before}, {after}); pad widths must not "
                "be negative"
            )
    return (data,)


def _pad_shape(ctx: ShapeCtx) -> list[list[str]]:
    dims = ctx.arg_dims[0]
    mode = ctx.attrs["pad_mode"]
    out = []
    for axis, (dim, (before, after)) in enumerate(zip(dims, ctx.attrs["pad_width"])):
        if before or after:
            if mode == "edge":
                ctx.fail_if(
                    f"{dim} < 1",
                    f"pad_mode='edge' cannot pad axis {axis}: the axis is empty",
                )
            elif mode == "reflect":
                ctx.fail_if(
                    f"{dim} <= {max(before, after)}",
                    f"pad_mode='reflect' needs pad widths smaller than the axis size, but "
                    f"axis {axis} has pad_width ({before}, {after})",
                )
        out.append(ctx.let(f"{dim} + {before + after}") if before or after else dim)
    return [out]


def _fill_value(ctx: EmitCtx) -> str:
    """``pad_value`` converted to data's dtype, in data's storage form."""
    data_dtype, value_dtype = ctx.arg_specs[0].dtype, ctx.arg_specs[1].dtype
    value = f"{ctx.args[1]}[()]"
    if value_dtype == "float16":
        value = f"h.f16_to_f32({value})"
    value = cast(value, value_dtype, data_dtype)
    if data_dtype == "float16":
        value = f"h.f32_to_f16({value})"
    name = ctx.src.fresh("fill")
    ctx.src.line(f"{name} = {value}")
    return name


def _pad_emit(ctx: EmitCtx) -> None:
    s = ctx.src
    data, out = ctx.args[0], ctx.outs[0]
    dims, out_dims = ctx.arg_dims[0], ctx.out_dims[0]
    pairs = ctx.attrs["pad_width"]
    if ctx.attrs["pad_mode"] == "constant":
        fill, flat, n, j = _fill_value(ctx), s.fresh("f"), s.fresh("n"), s.fresh("j")
        s.line(f"{n} = {product(out_dims)}")
        s.line(f"{flat} = {out}.reshape({n})")
        with s.block(f"for {j} in range({n}):"):
            s.line(f"{flat}[{j}] = {fill}")
        if not dims:
            s.line(f"{out}[()] = {data}[()]")
            return
        with s.loops(dims) as ii:
            target = [f"{i} + {before}" if before else i for i, (before, _) in zip(ii, pairs)]
            s.line(f"{out}[{index(target)}] = {data}[{index(ii)}]")
        return
    reflect = ctx.attrs["pad_mode"] == "reflect"
    if not out_dims:
        s.line(f"{out}[()] = {data}[()]")
        return
    with s.loops(out_dims) as oi:
        source = []
        for o, dim, (before, after) in zip(oi, dims, pairs):
            if not before and not after:
                source.append(o)
                continue
            name = s.fresh("src")
            s.line(f"{name} = {o} - {before}")
            if reflect:
                s.line(f"{name} = -{name} if {name} < 0 else {name}")
                s.line(f"{name} = 2 * ({dim} - 1) - {name} if {name} >= {dim} else {name}")
            else:
                s.line(f"{name} = min(max({name}, 0), {dim} - 1)")
            source.append(name)
        s.line(f"{out}[{index(oi)}] = {data}[{index(source)}]")


RULES.register(
    OpRule(
        "nn.pad",
        2,
        (
            Attr("pad_width", "pairs", required=True),
            Attr("pad_mode", "str", "constant", choices=PAD_MODES),
        ),
        _pad_infer,
        _pad_shape,
        emit=_pad_emit,
    )
)


# --- nn.upsampling -----------------------------------------------------------------------------

UPSAMPLING_METHODS = ("nearest_neighbor", "bilinear")


def _upsampling_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    data = args[0]
    require_rank("data", data, 4, 4)
    check_layout(attrs, "layout", (NCHW,))
    require_kind("data", data, "float" if attrs["method"] == "bilinear" else "numeric")
    for name in ("scale_h", "scale_w"):
        scale = attrs[name]
        if not scale > 0 or math.isinf(scale):
            raise RuleError(f"attribute {name}={scale} must be a finite number > 0")
    return (data,)


def _upsampling_shape(ctx: ShapeCtx) -> list[list[str]]:
    n, c, h, w = ctx.arg_dims[0]
    sizes = []
    for size, attr in ((h, "scale_h"), (w, "scale_w")):
        scale = ctx.attrs[attr]
        # Rounded half to even, like Python's round and TVM.
        out = ctx.let(f"np.int64(np.rint({size} * {float_literal(scale)}))")
        ctx.fail_if(
            f"{out} < 1 and {size} > 0",
            f"attribute {attr}={scale} leaves the output with no rows or columns",
        )
        sizes.append(out)
    return [[n, c, *sizes]]


def _upsampling_emit(ctx: EmitCtx) -> None:
    function = "upsample_bilinear" if ctx.attrs["method"] == "bilinear" else "upsample_nearest"
    ctx.src.line(
        f"rs.{function}({ctx.args[0]}, {ctx.outs[0]}, {plain(ctx.attrs['align_corners'])})"
    )


RULES.register(
    OpRule(
        "nn.upsampling",
        1,
        (
            Attr("scale_h", "float", 1.0),
            Attr("scale_w", "float", 1.0),
            Attr("layout", "str", NCHW),
            Attr("method", "str", "nearest_neighbor", choices=UPSAMPLING_METHODS),
            Attr("align_corners", "bool", False),
        ),
        _upsampling_infer,
        _upsampling_shape,
        emit=_upsampling_emit,
        numeric=True,
    )
)


# --- run-time shape rules (run by vm.shape_funcs) ----------------------------------------


@RULES.shape("nn.pad")
def _run_pad(shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[sr.Shape]:
    data = shapes[0]
    pairs = [tuple(sr.ints(p)) for p in attrs["pad_width"]]
    if len(pairs) != len(data) or any(len(p) != 2 or min(p) < 0 for p in pairs):
        raise RuleError("attribute pad_width needs one (before, after) pair >= 0 per axis of data")
    mode = attrs["pad_mode"]
    for axis, ((before, after), size) in enumerate(zip(pairs, data)):
        if before == after == 0:
            continue
        if mode == "edge" and size < 1:
            raise RuleError(f"pad_mode='edge' cannot pad axis {axis}: the axis is empty")
        if mode == "reflect" and max(before, after) >= size:
            raise RuleError(
                f"pad_mode='reflect' needs pad widths smaller than the axis size, but axis "
                f"{axis} has size {size} and pad_width ({before}, {after})"
            )
    return [tuple(d + b + a for d, (b, a) in zip(data, pairs))]


@RULES.shape("nn.upsampling")
def _run_upsampling(
    shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple
) -> list[sr.Shape]:
    n, c, h, w = sr.nchw(shapes[0])
    out = []
    for axis, (size, attr) in enumerate(((h, "scale_h"), (w, "scale_w"))):
        scale = float(attrs.get(attr, 1.0))
        value = round(size * scale)  # ties to even, as the compiler and TVM round
        if value < 1 and size > 0:
            raise RuleError(
                f"attribute {attr}={scale} turns the {sr.AXIS_NAMES[axis]} {size} into {value}"
            )
        out.append(value)
    return [(n, c, out[0], out[1])]
