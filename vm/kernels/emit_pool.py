"""Kernel rules for pooling NCHW data: nn.max_pool2d, nn.avg_pool2d, nn.global_max_pool2d,
nn.global_avg_pool2d and nn.adaptive_avg_pool2d.

Runtime layer, kernel generator (``vm.kernels``); standard library only.

Output sizes follow ``compiler/op/defs_pool.py`` (``ceil_mode`` rounds up but drops a last
window that would start in the right padding); the loops are in
:mod:`vm.kernels.runtime.pool_loops`. Max pooling treats padding as the dtype's lowest value
and lets a NaN win; average pooling sums float16 and float32 data in float32 and float64
data in float64, in window order, and divides by the number of input elements in the
window (with ``count_include_pad``, input and padding elements); global and adaptive
averages sum in float64.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from vm.kernels import dtypes
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
from vm.kernels.source import EmitCtx, ShapeCtx, const, plain
from vm.kernels.windows import NCHW, check_layout, padding4, pair, window_output

#: The rules this module defines (gathered by :mod:`vm.kernels.table`).
RULES = RuleSet()

_LAYOUT_ATTRS = (Attr("layout", "str", NCHW), Attr("out_layout", "str", ""))


def _pool_infer(kind: str) -> Callable:
    def infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
        require_kind("data", args[0], kind)
        require_rank("data", args[0], 4, 4)
        check_layout(attrs, "layout", (NCHW,))
        check_layout(attrs, "out_layout", ("", NCHW))
        if "pool_size" in attrs:
            pair("pool_size", attrs["pool_size"])
            pair("strides", attrs["strides"])
            pair("dilation", attrs["dilation"])
            padding4(attrs["padding"])
        if "output_size" in attrs:
            _output_size(attrs)
        return (args[0],)

    return infer


# --- nn.max_pool2d and nn.avg_pool2d -----------------------------------------------------------


def _window_shape(ctx: ShapeCtx) -> list[list[str]]:
    n, c, h, w = ctx.arg_dims[0]
    ph, pw = pair("pool_size", ctx.attrs["pool_size"])
    sh, sw = pair("strides", ctx.attrs["strides"])
    dh, dw = pair("dilation", ctx.attrs["dilation"])
    top, left, bottom, right = padding4(ctx.attrs["padding"])
    ceil = ctx.attrs["ceil_mode"]
    out_h = window_output(ctx, 0, h, str(ph), sh, dh, top, bottom, "pool window", ceil)
    out_w = window_output(ctx, 1, w, str(pw), sw, dw, left, right, "pool window", ceil)
    return [[n, c, out_h, out_w]]


def _window_args(attrs: dict) -> str:
    ph, pw = pair("pool_size", attrs["pool_size"])
    sh, sw = pair("strides", attrs["strides"])
    dh, dw = pair("dilation", attrs["dilation"])
    top, left, _, _ = padding4(attrs["padding"])
    return ", ".join(plain(v) for v in (ph, pw, sh, sw, dh, dw, top, left))


def _max_pool_emit(ctx: EmitCtx) -> None:
    dtype = ctx.arg_specs[0].dtype
    x, out, window = ctx.args[0], ctx.outs[0], _window_args(ctx.attrs)
    if dtype in dtypes.FLOATS:
        ctx.src.line(f"pool.max_pool2d_float({x}, {out}, {window})")
        return
    lowest = const(dtypes.int_range(dtype)[0], dtype)
    planes = f"{ctx.arg_dims[0][0]} * {ctx.arg_dims[0][1]}"
    ctx.src.line(f"pool.max_pool2d({x}, {out}, {window}, {lowest}, {plain(0)}, {planes})")


def _avg_pool_emit(ctx: EmitCtx) -> None:
    _, _, bottom, right = padding4(ctx.attrs["padding"])
    include = ctx.attrs["count_include_pad"]
    ctx.src.line(
        f"pool.avg_pool2d_float({ctx.args[0]}, {ctx.outs[0]}, {_window_args(ctx.attrs)}, "
        f"{plain(bottom)}, {plain(right)}, {plain(include)})"
    )


_WINDOW_ATTRS = (
    Attr("pool_size", "ints", (1, 1)),
    Attr("strides", "ints", (1, 1)),
    Attr("dilation", "ints", (1, 1)),
    Attr("padding", "ints", (0, 0)),
    *_LAYOUT_ATTRS,
    Attr("ceil_mode", "bool", False),
)

RULES.register(
    OpRule(
        "nn.max_pool2d",
        1,
        _WINDOW_ATTRS,
        _pool_infer("numeric"),
        _window_shape,
        emit=_max_pool_emit,
        numeric=True,
    )
)
RULES.register(
    OpRule(
        "nn.avg_pool2d",
        1,
        (*_WINDOW_ATTRS, Attr("count_include_pad", "bool", False)),
        _pool_infer("float"),
        _window_shape,
        emit=_avg_pool_emit,
        numeric=True,
    )
)


# --- global pools ------------------------------------------------------------------------------


def _global_shape(ctx: ShapeCtx) -> list[list[str]]:
    n, c, h, w = ctx.arg_dims[0]
    ctx.fail_if(f"{h} < 1 or {w} < 1", "pooling needs at least one element per window")
    return [[n, c, "1", "1"]]


def _call(function: str) -> Callable[[EmitCtx], None]:
    def emit(ctx: EmitCtx) -> None:
        ctx.src.line(f"pool.{function}({ctx.args[0]}, {ctx.outs[0]})")

    return emit


for _name, _kind in (("nn.global_max_pool2d", "numeric"), ("nn.global_avg_pool2d", "float")):
    RULES.register(
        OpRule(
            _name,
            1,
            _LAYOUT_ATTRS,
            _pool_infer(_kind),
            _global_shape,
            emit=_call(_name[3:]),
            numeric=True,
        )
    )


# --- nn.adaptive_avg_pool2d --------------------------------------------------------------------


def _output_size(attrs: dict) -> tuple[int, int] | None:
    """``output_size`` as (height, width), or ``None`` to keep the input's size."""
    value = attrs["output_size"]
    if value is None or value == ():
        return None
    if len(value) == 1:
        value = value * 2
    if len(value) != 2:
        raise RuleError(
            f"attribute output_size={attrs['output_size']!r} must hold 1 or 2 ints "
            f"(height, width), found {len(value)}"
        )
    if min(value) < 1:
        raise RuleError(f"attribute output_size={attrs['output_size']!r} must hold values >= 1")
    return value[0], value[1]


def _adaptive_shape(ctx: ShapeCtx) -> list[list[str]]:
    n, c, h, w = ctx.arg_dims[0]
    ctx.fail_if(f"{h} < 1 or {w} < 1", "pooling needs at least one element per window")
    size = _output_size(ctx.attrs)
    if size is None:
        return [[n, c, h, w]]
    return [[n, c, str(size[0]), str(size[1])]]


RULES.register(
    OpRule(
        "nn.adaptive_avg_pool2d",
        1,
        (Attr("output_size", "ints", None, optional=True), *_LAYOUT_ATTRS),
        _pool_infer("float"),
        _adaptive_shape,
        emit=_call("adaptive_avg_pool2d"),
        numeric=True,
    )
)


# --- run-time shape rules (run by vm.shape_funcs) ----------------------------------------


@RULES.shape("nn.max_pool2d", "nn.avg_pool2d")
def _run_pool(shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[sr.Shape]:
    n, c, h, w = sr.nchw(shapes[0])
    pool = sr.pair(attrs["pool_size"], "pool_size")
    strides = sr.pair(attrs["strides"], "strides")
    dilation = sr.pair(attrs["dilation"], "dilation")
    top, left, bottom, right = sr.padding4(attrs["padding"])
    ceil_mode = bool(attrs["ceil_mode"])
    out_h = sr.window_output(
        h, pool[0], strides[0], dilation[0], top, bottom, 0, "pool window", ceil_mode
    )
    out_w = sr.window_output(
        w, pool[1], strides[1], dilation[1], left, right, 1, "pool window", ceil_mode
    )
    return [(n, c, out_h, out_w)]


def _run_nonempty_spatial(shape: sr.Shape) -> None:
    for axis in range(2):
        if shape[2 + axis] < 1:
            raise RuleError(f"data {sr.fmt_shape(shape)} has an empty {sr.AXIS_NAMES[axis]}")


@RULES.shape("nn.global_max_pool2d", "nn.global_avg_pool2d")
def _run_global_pool(
    shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple
) -> list[sr.Shape]:
    n, c, _, _ = sr.nchw(shapes[0])
    _run_nonempty_spatial(shapes[0])
    return [(n, c, 1, 1)]


@RULES.shape("nn.adaptive_avg_pool2d")
def _run_adaptive_pool(
    shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple
) -> list[sr.Shape]:
    n, c, h, w = sr.nchw(shapes[0])
    _run_nonempty_spatial(shapes[0])
    value = attrs.get("output_size")
    if value is None or value == () or value == []:
        return [(n, c, h, w)]
    out_h, out_w = sr.pair(value, "output_size")
    return [(n, c, out_h, out_w)]
