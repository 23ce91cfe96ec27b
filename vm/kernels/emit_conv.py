"""Kernel rules for nn.conv2d, nn.conv2d_transpose and the contrib convolutions by
transformed weights (NCHW data; OIHW / IOHW weights).

Runtime layer, kernel generator (``vm.kernels``); standard library only.

A float convolution runs image by image, each image one call through
:mod:`vm.kernels.runtime.bridge` to :func:`vm.kernels.runtime.convolution.conv_image`: per group,
im2col plus one matrix product through BLAS (the 1x1, stride-1, unpadded case multiplies the input
itself, without a copy), both split between threads by output rows; direct loops, split by groups,
when every group reads a single input channel (depthwise). Ungrouped 3x3, stride-1 convolutions with
enough channels and output use Winograd F(2x2, 3x3) instead (:mod:`vm.kernels.runtime.winograd`),
which needs 2.25 times fewer multiplications. Float convolutions with ``groups > 1`` whose groups
read few channels (depthwise, ResNeXt-style) run direct vectorized loops instead
(:mod:`vm.kernels.runtime.depthwise`), with the epilogue per group or per image.
``nn.contrib_conv2d_gemm_without_weight_transform`` takes float32 weights packed ahead of time in
32-wide panels and multiplies the im2col matrix by them in register tiles
(:func:`vm.kernels.runtime.convolution.conv_packed`, :mod:`vm.kernels.runtime.packed`). Integer
convolutions run compiled loops (:mod:`vm.kernels.runtime.conv_loops`) with 64-bit accumulation, one
(image, group) block at a time. The transposed convolution multiplies first and scatters the
contributions with col2im. After each image (integers: each block) the kernel calls the epilogue
hook, so an elementwise chain fused after the convolution (bias, folded batch norm, residual add,
relu) is applied while the output is in cache (see :mod:`vm.kernels.codegen`). Semantics mirror
``compiler/op/defs_conv.py``: ``out_dtype`` converts both operands first and the product accumulates
in it.
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
    require_same_dtype,
)
from vm.kernels.runtime import panels
from vm.kernels.runtime.panels import PANEL
from vm.kernels.source import EmitCtx, ShapeCtx, cast, plain, product
from vm.kernels.windows import NCHW, check_layout, padding4, pair, window_output

#: The rules this module defines (gathered by :mod:`vm.kernels.table`).
RULES = RuleSet()

_OUT_LAYOUTS = ("", NCHW)


def _common_infer(args: tuple[Spec, ...], attrs: dict, kernel_layout: str) -> str:
    """Checks both convolutions share; returns the output dtype."""
    dtype = require_same_dtype(["data", "weight"], args)
    require_kind("data", args[0], "numeric")
    require_rank("data", args[0], 4, 4)
    require_rank("weight", args[1], 4, 4)
    check_layout(attrs, "data_layout", (NCHW,))
    check_layout(attrs, "kernel_layout", (kernel_layout,))
    check_layout(attrs, "out_layout", _OUT_LAYOUTS)
    pair("strides", attrs["strides"])
    pair("dilation", attrs["dilation"])
    padding4(attrs["padding"])
    if attrs["groups"] < 1:
        raise RuleError(f"attribute groups={attrs['groups']} must be >= 1")
    if attrs["channels"] is not None and attrs["channels"] < 1:
        raise RuleError(f"attribute channels={attrs['channels']} must be >= 1")
    if attrs["kernel_size"] is not None:
        pair("kernel_size", attrs["kernel_size"])
    out_dtype = attrs["out_dtype"] or dtype
    if out_dtype == "bool":
        raise RuleError(
            "dtype not allowed: attribute out_dtype must be a numeric dtype, found bool"
        )
    return out_dtype


def _check_kernel_attrs(ctx: ShapeCtx, out_channels: str, kh: str, kw: str) -> None:
    channels = ctx.attrs["channels"]
    if channels is not None:
        ctx.expect(out_channels, str(channels), "output channels (attribute channels)")
    if ctx.attrs["kernel_size"] is not None:
        size = pair("kernel_size", ctx.attrs["kernel_size"])
        ctx.expect(kh, str(size[0]), "kernel height of weight (attribute kernel_size)")
        ctx.expect(kw, str(size[1]), "kernel width of weight (attribute kernel_size)")


def _int_block(dtype: str, transposed: bool) -> str:
    """The :mod:`vm.kernels.runtime.conv_loops` step for integer arrays of dtype ``dtype``."""
    base = "conv_transpose_block" if transposed else "conv_block"
    return f"cv.{base}_unsigned" if dtype in dtypes.UNSIGNED else f"cv.{base}_signed"


def _converted(ctx: EmitCtx, array: str, dims: list[str], src: str, dst: str) -> str:
    """``array`` (compute dtype of ``src``) as a fresh array of ``dst``'s compute dtype."""
    if src == dst:
        return array
    s = ctx.src
    name, flat_in, flat_out, n, j = (s.fresh(p) for p in ("cvt", "f", "f", "n", "j"))
    s.line(f"{n} = {product(dims)}")
    s.line(f"{name} = np.empty({array}.shape, {dtypes.np_type(dst)})")
    s.line(f"{flat_in} = {array}.reshape({n})")
    s.line(f"{flat_out} = {name}.reshape({n})")
    with s.block(f"for {j} in range({n}):"):
        s.line(f"{flat_out}[{j}] = {cast(f'{flat_in}[{j}]', src, dst)}")
    return name


# --- nn.conv2d ---------------------------------------------------------------------------------


def _conv2d_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    return (Spec(_common_infer(args, attrs, "OIHW"), 4),)


def _conv2d_shape(ctx: ShapeCtx) -> list[list[str]]:
    (n, c, h, w), (o, cg, kh, kw) = ctx.arg_dims
    groups = ctx.attrs["groups"]
    ctx.fail_if(
        f"{o} % {groups} != 0",
        f"the output channels of weight are not divisible by groups={groups}",
    )
    ctx.expect(
        f"{cg} * {groups}",
        c,
        f"input channels of data (weight's in_channels / groups times groups={groups})",
    )
    _check_kernel_attrs(ctx, o, kh, kw)
    sh, sw = pair("strides", ctx.attrs["strides"])
    dh, dw = pair("dilation", ctx.attrs["dilation"])
    top, left, bottom, right = padding4(ctx.attrs["padding"])
    out_h = window_output(ctx, 0, h, kh, sh, dh, top, bottom, "kernel")
    out_w = window_output(ctx, 1, w, kw, sw, dw, left, right, "kernel")
    return [[n, o, out_h, out_w]]


def _conv2d_emit(ctx: EmitCtx) -> None:
    s = ctx.src
    (n, _, _, _), (o, cg, kh, kw) = ctx.arg_dims
    _, _, out_h, out_w = ctx.out_dims[0]
    in_dtype, out_dtype = ctx.arg_specs[0].dtype, ctx.out_specs[0].dtype
    x = _converted(ctx, ctx.args[0], ctx.arg_dims[0], in_dtype, out_dtype)
    weight = _converted(ctx, ctx.args[1], ctx.arg_dims[1], in_dtype, out_dtype)
    groups = ctx.attrs["groups"]
    sh, sw = pair("strides", ctx.attrs["strides"])
    dh, dw = pair("dilation", ctx.attrs["dilation"])
    top, left, _, _ = padding4(ctx.attrs["padding"])
    og, k, p = s.fresh("og"), s.fresh("k"), s.fresh("p")
    s.line(f"{og} = {o} // {groups}")
    s.line(f"{k} = {cg} * {kh} * {kw}")
    s.line(f"{p} = {out_h} * {out_w}")
    w3, o3 = s.fresh("w"), s.fresh("o")
    s.line(f"{w3} = {weight}.reshape(({groups}, {og}, {k}))")
    s.line(f"{o3} = {ctx.outs[0]}.reshape(({n}, {o}, {p}))")
    # The column matrix is skipped for depthwise groups and for 1x1 kernels that need
    # neither stride nor padding (the input is its own column matrix).
    need = f"{cg} != 1"
    if (sh, sw) == (1, 1) and padding4(ctx.attrs["padding"]) == (0, 0, 0, 0):
        need = f"{cg} != 1 and not ({kh} == 1 and {kw} == 1)"
    rows = s.fresh("kc")
    s.line(f"{rows} = {k} if {need} else 0")
    compute = dtypes.compute(out_dtype)
    b = s.fresh("b")
    window = ", ".join(plain(v) for v in (sh, sw, top, left, dh, dw))
    if compute not in dtypes.FLOATS:
        # Integers: compiled blocks, one (image, group) at a time.
        cols = s.fresh("cols")
        s.line(f"{cols} = np.empty(({rows}, {p} if {rows} else 0), {dtypes.np_type(out_dtype)})")
        g = s.fresh("g")
        with s.block(f"for {b} in range({n}):"), s.block(f"for {g} in range({groups}):"):
            s.line(
                f"{_int_block(compute, transposed=False)}({x}, {w3}, {o3}, {cols}, {b}, {g}, "
                f"{cg}, {og}, {kh}, {kw}, {window}, {out_h}, {out_w})"
            )
            if ctx.epilogue is not None:
                ctx.epilogue([b, f"{g} * {og}", "0", "0"], ["1", og, out_h, out_w])
        return
    # Floats: one call per image through the bridge (BLAS and the worker threads).
    call = (
        f"convolution.conv_image_into({x}, {w3}, {o3}, {rows}, {b}, {cg}, {kh}, {kw}, {window}, "
        f"{out_h}, {out_w})"
    )
    if groups > 1:
        _grouped_emit(ctx, x, w3, o3, cg, b, call)
        return
    winograd = None
    if groups == 1 and (sh, sw, dh, dw) == (1, 1, 1, 1):
        winograd = s.fresh("wino")
        s.line(f"{winograd} = {_winograd_condition(cg, o, kh, kw, out_h, out_w)}")
    with s.block(f"for {b} in range({n}):"):
        if winograd is None:
            s.line(call)
        else:
            with s.block(f"if {winograd}:"):
                pads = f"{plain(top)}, {plain(left)}"
                s.line(
                    f"convolution.conv_winograd_into({x}, {weight}, {o3}, {b}, {pads}, "
                    f"{out_h}, {out_w})"
                )
            with s.block("else:"):
                s.line(call)
        if ctx.epilogue is not None:
            ctx.epilogue([b, "0", "0", "0"], ["1", o, out_h, out_w])


#: Grouped convolutions whose groups read at most this many input channels run as direct
#: loops (:mod:`vm.kernels.runtime.depthwise`); wider groups have enough depth for im2col and a
#: product to win.
DIRECT_MAX_GROUP_CHANNELS = 4


#: Dilated (or unequally strided) depthwise outputs narrower than this many columns run
#: channels-last (:func:`vm.kernels.runtime.depthwise.image_channels_last`): their rows are too
#: short to fill a vector register, the channels are not. From 28 columns on, the two
#: layout copies cost more than the short rows (benchmarks/NOTES.md). Without dilation,
#: whole planes run instead (:func:`vm.kernels.runtime.depthwise.plane_by_plane`).
CHANNELS_LAST_MAX_WIDTH = 16


def _grouped_emit(ctx: EmitCtx, x: str, w3: str, o3: str, cg: str, b: str, call: str) -> None:
    """A float convolution with ``groups > 1``: depthwise with narrow outputs, direct loops
    across channels per image; groups of at most :data:`DIRECT_MAX_GROUP_CHANNELS` input
    channels, direct loops per group, the groups of an image shared between threads
    (:func:`vm.kernels.runtime.depthwise.image_groups`); otherwise, float32, bands of output
    rows by im2col and register tiles (:func:`vm.kernels.runtime.convolution.grouped_f32`),
    else ``call`` (im2col and products) for each image ``b``. An epilogue the loops cannot
    apply as they store runs on each image once it is complete."""
    s = ctx.src
    n, o, out_h, out_w = ctx.out_dims[0]
    (_, _, kh, kw) = ctx.arg_dims[1]
    sh, sw = pair("strides", ctx.attrs["strides"])
    dh, dw = pair("dilation", ctx.attrs["dilation"])
    top, left, _, _ = padding4(ctx.attrs["padding"])
    window = ", ".join(plain(v) for v in (sh, sw, top, left, dh, dw))
    # Without dilation and with equal strides, planes run whole (dwc._plane_range).
    planes = (dh, dw) == (1, 1) and sh == sw
    narrow = "False" if planes else f"{cg} == 1 and {out_w} < {CHANNELS_LAST_MAX_WIDTH}"
    # float32 reaches the loops through entry points compiled once (no per-kernel compile),
    # which apply the chain's bias and clamp as they store, when it is just that.
    f32 = ctx.arg_specs[0].dtype == "float32"
    post = f", {_post_array(ctx)}" if f32 else ""
    suffix = "_f32" if f32 else ""
    fused = f32 and ctx.post is not None
    with s.block(f"if {narrow}:"), s.block(f"for {b} in range({n}):"):
        s.line(
            f"dwc.image_channels_last{suffix}({x}, {w3}, {o3}, {kh}, {kw}, {window}, {out_h}, "
            f"{out_w}, {b}{post})"
        )
        if ctx.epilogue is not None and not fused:
            ctx.epilogue([b, "0", "0", "0"], ["1", o, out_h, out_w])
    with s.block(f"elif {cg} <= {DIRECT_MAX_GROUP_CHANNELS}:"), s.block(f"for {b} in range({n}):"):
        s.line(
            f"dwc.image_groups{suffix}({x}, {w3}, {o3}, {kh}, {kw}, {window}, {out_h}, "
            f"{out_w}, {b}{post})"
        )
        if ctx.epilogue is not None and not fused:
            ctx.epilogue([b, "0", "0", "0"], ["1", o, out_h, out_w])
    # Wider float32 groups skip the bridge to Python (conv_image) for the entry point of
    # its compiled loops, which apply the chain's bias and clamp to each band of output
    # rows as they store it. RegNetY's layers with bias and relu, two threads, least of 30
    # (AMD EPYC Zen 4): 512 channels at 14x14 718 -> 674 us, 1088 at 7x7 447 -> 410; at
    # 28x28 and above within the host's noise.
    wide = f32 and ctx.out_specs[0].dtype == "float32"
    with s.block("else:"), s.block(f"for {b} in range({n}):"):
        if wide:
            s.line(
                f"convolution.grouped_f32({x}, {w3}, {o3}, {b}, {kh}, {kw}, {window}, {out_h}, "
                f"{out_w}{post})"
            )
        else:
            s.line(call)
        if ctx.epilogue is not None and not (wide and fused):
            ctx.epilogue([b, "0", "0", "0"], ["1", o, out_h, out_w])


#: Winograd F(2x2, 3x3) pays for transforming the weights on every call only with enough
#: output tiles to reuse them, and for its input and output transforms only with enough
#: channels (measured on ResNet-18's layers: it wins at 14x14 and above).
WINOGRAD_MIN_TILES = 40
WINOGRAD_MIN_CHANNELS = 8


def _winograd_condition(cg: str, o: str, kh: str, kw: str, out_h: str, out_w: str) -> str:
    tiles = f"(({out_h} + 1) // 2) * (({out_w} + 1) // 2)"
    return (
        f"{kh} == 3 and {kw} == 3 and {cg} >= {WINOGRAD_MIN_CHANNELS} and "
        f"{o} >= {WINOGRAD_MIN_CHANNELS} and {tiles} >= {WINOGRAD_MIN_TILES}"
    )


_CONV_LAYOUT_ATTRS = (
    Attr("data_layout", "str", NCHW),
    Attr("kernel_layout", "str", "OIHW"),
    Attr("out_layout", "str", ""),
    Attr("out_dtype", "dtype_or_empty", ""),
)

#: nn.conv2d's attributes, which the Winograd convolution shares (after its tile size).
_CONV2D_ATTRS = (
    Attr("strides", "ints", (1, 1)),
    Attr("padding", "ints", (0, 0)),
    Attr("dilation", "ints", (1, 1)),
    Attr("groups", "int", 1),
    Attr("channels", "int", None, optional=True),
    Attr("kernel_size", "ints", None, optional=True),
    *_CONV_LAYOUT_ATTRS,
)

RULES.register(
    OpRule(
        "nn.conv2d",
        2,
        _CONV2D_ATTRS,
        _conv2d_infer,
        _conv2d_shape,
        emit=_conv2d_emit,
        numeric=True,
        epilogue=True,
        post="channels",
    )
)


# --- nn.contrib_conv2d_winograd_without_weight_transform -----------------------------------------


def _winograd_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    dtype = require_same_dtype(["data", "weight"], args)
    require_kind("data", args[0], "float")
    require_rank("data", args[0], 4, 4)
    require_rank("weight", args[1], 3, 4)
    check_layout(attrs, "data_layout", (NCHW,))
    check_layout(attrs, "kernel_layout", ("OIHW",))
    check_layout(attrs, "out_layout", _OUT_LAYOUTS)
    if args[1].ndim == 3 and (dtype != "float32" or attrs["channels"] is None):
        raise RuleError(
            "a weight packed in panels (rank 3) needs float32 and an attribute channels"
        )
    if attrs["tile_size"] not in (2, 4):
        raise RuleError(
            f"attribute tile_size={attrs['tile_size']} is not supported; only 2 and 4 are"
        )
    for name in ("strides", "dilation"):
        if pair(name, attrs[name]) != (1, 1):
            raise RuleError(f"attribute {name}={attrs[name]} must be 1")
    if attrs["groups"] != 1:
        raise RuleError(f"attribute groups={attrs['groups']} must be 1")
    if attrs["kernel_size"] is None or pair("kernel_size", attrs["kernel_size"]) != (3, 3):
        raise RuleError(f"attribute kernel_size={attrs['kernel_size']} must be (3, 3)")
    padding4(attrs["padding"])
    if attrs["out_dtype"] not in ("", dtype):
        raise RuleError(f"attribute out_dtype={attrs['out_dtype']} must be {dtype}")
    return (Spec(dtype, 4),)


def _winograd_shape(ctx: ShapeCtx) -> list[list[str]]:
    (n, c, h, w), weight = ctx.arg_dims
    alpha = ctx.attrs["tile_size"] + 2
    if len(weight) == 3:
        # Each plane packed in panels: (alpha * alpha * ceil(O / 32), I, 32).
        planes, ci, lanes = weight
        o = str(ctx.attrs["channels"])
        panels = -(-ctx.attrs["channels"] // PANEL)
        ctx.expect(planes, str(alpha * alpha * panels), "panels of the packed weight's planes")
        ctx.expect(lanes, str(PANEL), "panel width of the packed weight")
        ctx.expect(ci, c, "input channels of data (the packed weight's second dimension)")
    else:
        a, b, o, ci = weight
        ctx.expect(a, str(alpha), "first dimension of the transformed weight (tile size + 2)")
        ctx.expect(b, str(alpha), "second dimension of the transformed weight (tile size + 2)")
        ctx.expect(ci, c, "input channels of data (the transformed weight's last dimension)")
        if ctx.attrs["channels"] is not None:
            ctx.expect(o, str(ctx.attrs["channels"]), "output channels (attribute channels)")
    top, left, bottom, right = padding4(ctx.attrs["padding"])
    out_h = window_output(ctx, 0, h, "3", 1, 1, top, bottom, "kernel")
    out_w = window_output(ctx, 1, w, "3", 1, 1, left, right, "kernel")
    return [[n, o, out_h, out_w]]


def _winograd_emit(ctx: EmitCtx) -> None:
    s = ctx.src
    (_, c, _, _), weight = ctx.arg_dims
    _, o, out_h, out_w = ctx.out_dims[0]
    top, left, _, _ = padding4(ctx.attrs["padding"])
    u = s.fresh("u")
    alpha = ctx.attrs["tile_size"] + 2
    if len(weight) == 3:
        # (planes, panels, in channels, 32): the runtime tells the packed form by its rank.
        panels = -(-ctx.attrs["channels"] // PANEL)
        s.line(f"{u} = {ctx.args[1]}.reshape(({alpha * alpha}, {panels}, {c}, {PANEL}))")
    else:
        s.line(f"{u} = {ctx.args[1]}.reshape(({alpha * alpha}, {o}, {c}))")
    post = _post_array(ctx)
    _per_image(
        ctx,
        lambda o3, b: (
            f"convolution.conv_winograd_transformed_into({ctx.args[0]}, {u}, {o3}, {b}, "
            f"{plain(top)}, {plain(left)}, {out_h}, {out_w}, {post})"
        ),
        fused=ctx.post is not None,
    )


def _per_image(ctx: EmitCtx, call: Callable[[str, str], str], fused: bool = False) -> None:
    """Emit ``call(out3, b)`` for each image ``b`` of the output, viewed as ``out3``
    ``(images, channels, pixels)``, each followed by the fused epilogue on that image
    unless ``call`` applies it itself (``fused``)."""
    s = ctx.src
    n, o, out_h, out_w = ctx.out_dims[0]
    o3, b = s.fresh("o"), s.fresh("b")
    s.line(f"{o3} = {ctx.outs[0]}.reshape(({n}, {o}, {out_h} * {out_w}))")
    with s.block(f"for {b} in range({n}):"):
        s.line(call(o3, b))
        if ctx.epilogue is not None and not fused:
            ctx.epilogue([b, "0", "0", "0"], ["1", o, out_h, out_w])


RULES.register(
    OpRule(
        "nn.contrib_conv2d_winograd_without_weight_transform",
        2,
        (Attr("tile_size", "int", 2), *_CONV2D_ATTRS),
        _winograd_infer,
        _winograd_shape,
        emit=_winograd_emit,
        numeric=True,
        epilogue=True,
        post="channels",
    )
)


# --- nn.contrib_conv2d_gemm_without_weight_transform --------------------------------------------
# OIHW weights flattened to (O, I * KH * KW) and packed in NC32n panels (vm.kernels.runtime.panels).


def _packed_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    require_same_dtype(["data", "weight"], args)
    if args[0].dtype != "float32":
        raise RuleError(f"dtype not allowed: data must be float32, found {args[0].dtype}")
    require_rank("data", args[0], 4, 4)
    require_rank("weight", args[1], 3, 3)
    check_layout(attrs, "data_layout", (NCHW,))
    check_layout(attrs, "kernel_layout", ("OIHW",))
    check_layout(attrs, "out_layout", _OUT_LAYOUTS)
    pair("strides", attrs["strides"])
    pair("dilation", attrs["dilation"])
    padding4(attrs["padding"])
    if attrs["groups"] != 1:
        raise RuleError(f"attribute groups={attrs['groups']} must be 1")
    for name in ("channels", "kernel_size"):
        if attrs[name] is None:
            raise RuleError(f"attribute {name} is required (the packed weight lacks it)")
    if attrs["channels"] < 1:
        raise RuleError(f"attribute channels={attrs['channels']} must be >= 1")
    pair("kernel_size", attrs["kernel_size"])
    if attrs["out_dtype"] not in ("", "float32"):
        raise RuleError(f"attribute out_dtype={attrs['out_dtype']} must be float32")
    return (Spec("float32", 4),)


def _packed_shape(ctx: ShapeCtx) -> list[list[str]]:
    (n, c, h, w), (panels, depth, width) = ctx.arg_dims
    channels = ctx.attrs["channels"]
    kh, kw = pair("kernel_size", ctx.attrs["kernel_size"])
    ctx.expect(width, str(PANEL), "panel width of weight (third dimension)")
    ctx.expect(panels, str(-(-channels // PANEL)), f"panels of weight for channels={channels}")
    ctx.expect(depth, f"{c} * {kh * kw}", "depth of weight (input channels times kernel taps)")
    sh, sw = pair("strides", ctx.attrs["strides"])
    dh, dw = pair("dilation", ctx.attrs["dilation"])
    top, left, bottom, right = padding4(ctx.attrs["padding"])
    out_h = window_output(ctx, 0, h, str(kh), sh, dh, top, bottom, "kernel")
    out_w = window_output(ctx, 1, w, str(kw), sw, dw, left, right, "kernel")
    return [[n, str(channels), out_h, out_w]]


def _packed_emit(ctx: EmitCtx) -> None:
    (_, c, _, _), _ = ctx.arg_dims
    _, _, out_h, out_w = ctx.out_dims[0]
    kh, kw = pair("kernel_size", ctx.attrs["kernel_size"])
    sh, sw = pair("strides", ctx.attrs["strides"])
    dh, dw = pair("dilation", ctx.attrs["dilation"])
    padding = padding4(ctx.attrs["padding"])
    # A 1x1 kernel without stride or padding reads the input as its own column matrix.
    direct = (kh, kw, sh, sw) == (1, 1, 1, 1) and padding == (0, 0, 0, 0)
    rows = plain(0) if direct else f"{c} * {kh * kw}"
    window = ", ".join(plain(v) for v in (sh, sw, padding[0], padding[1], dh, dw))
    post = _post_array(ctx)
    _per_image(
        ctx,
        lambda o3, b: (
            f"convolution.conv_packed_into({ctx.args[0]}, {ctx.args[1]}, {o3}, {rows}, "
            f"{b}, {c}, {plain(kh)}, {plain(kw)}, {window}, {out_h}, {out_w}, {post})"
        ),
        fused=ctx.post is not None,
    )


def _post_array(ctx: EmitCtx) -> str:
    """The epilogue array the runtime's loops apply as they store (``ctx.post``), or an
    empty one for none."""
    if ctx.post is not None:
        return ctx.post
    empty = ctx.src.fresh("post")
    ctx.src.line(f"{empty} = np.empty(0, np.float32)")
    return empty


RULES.register(
    OpRule(
        "nn.contrib_conv2d_gemm_without_weight_transform",
        2,
        _CONV2D_ATTRS,
        _packed_infer,
        _packed_shape,
        emit=_packed_emit,
        numeric=True,
        epilogue=True,
        post="channels",
    )
)


def _weight_transform_infer(
    args: tuple[Spec, ...], attrs: dict, declared: tuple
) -> tuple[Spec, ...]:
    require_kind("weight", args[0], "float")
    require_rank("weight", args[0], 4, 4)
    if attrs["tile_size"] not in (2, 4):
        raise RuleError(
            f"attribute tile_size={attrs['tile_size']} is not supported; only 2 and 4 are"
        )
    return (args[0],)


def _weight_transform_shape(ctx: ShapeCtx) -> list[list[str]]:
    ((o, i, kh, kw),) = ctx.arg_dims
    ctx.expect(kh, "3", "kernel height of weight")
    ctx.expect(kw, "3", "kernel width of weight")
    alpha = str(ctx.attrs["tile_size"] + 2)
    return [[alpha, alpha, o, i]]


def _weight_transform_emit(ctx: EmitCtx) -> None:
    tile = ctx.attrs["tile_size"]
    ctx.src.line(f"wino.weight_transform({ctx.args[0]}, {ctx.outs[0]}, {tile})")


RULES.register(
    OpRule(
        "nn.contrib_conv2d_winograd_weight_transform",
        1,
        (Attr("tile_size", "int", 2),),
        _weight_transform_infer,
        _weight_transform_shape,
        emit=_weight_transform_emit,
        numeric=True,
    )
)


# --- nn.conv2d_transpose -----------------------------------------------------------------------


def _conv2d_transpose_infer(
    args: tuple[Spec, ...], attrs: dict, declared: tuple
) -> tuple[Spec, ...]:
    out_dtype = _common_infer(args, attrs, "IOHW")
    strides = pair("strides", attrs["strides"])
    dilation = pair("dilation", attrs["dilation"])
    output_padding = pair("output_padding", attrs["output_padding"], minimum=0)
    for axis in range(2):
        if output_padding[axis] >= max(strides[axis], dilation[axis]):
            raise RuleError(
                f"attribute output_padding={attrs['output_padding']!r} must be smaller than "
                f"the stride or the dilation in each dimension (strides={attrs['strides']!r}, "
                f"dilation={attrs['dilation']!r})"
            )
    return (Spec(out_dtype, 4),)


def _conv2d_transpose_shape(ctx: ShapeCtx) -> list[list[str]]:
    (n, c, h, w), (cw, og, kh, kw) = ctx.arg_dims
    groups = ctx.attrs["groups"]
    ctx.fail_if(
        f"{c} % {groups} != 0",
        f"the input channels of data are not divisible by groups={groups}",
    )
    ctx.expect(cw, c, "input channels of weight (the IOHW weight's first dimension)")
    o = ctx.let(f"{og} * {groups}")
    _check_kernel_attrs(ctx, o, kh, kw)
    strides = pair("strides", ctx.attrs["strides"])
    dilation = pair("dilation", ctx.attrs["dilation"])
    extra = pair("output_padding", ctx.attrs["output_padding"], minimum=0)
    top, left, bottom, right = padding4(ctx.attrs["padding"])
    sizes = []
    spatial = ((h, kh, top, bottom), (w, kw, left, right))
    for axis, (size, kernel, before, after) in enumerate(spatial):
        name = ("height", "width")[axis]
        out = ctx.let(
            f"({size} - 1) * {strides[axis]} + {dilation[axis]} * ({kernel} - 1) "
            f"+ {extra[axis] + 1 - before - after}"
        )
        ctx.fail_if(
            f"{out} < 1",
            f"the output {name} would be less than 1: the padding removes the whole "
            f"upsampled {name}",
        )
        sizes.append(out)
    return [[n, o, *sizes]]


def _conv2d_transpose_emit(ctx: EmitCtx) -> None:
    s = ctx.src
    (n, c, h, w), (_, og, kh, kw) = ctx.arg_dims
    _, _, out_h, out_w = ctx.out_dims[0]
    in_dtype, out_dtype = ctx.arg_specs[0].dtype, ctx.out_specs[0].dtype
    x = _converted(ctx, ctx.args[0], ctx.arg_dims[0], in_dtype, out_dtype)
    weight = _converted(ctx, ctx.args[1], ctx.arg_dims[1], in_dtype, out_dtype)
    groups = ctx.attrs["groups"]
    sh, sw = pair("strides", ctx.attrs["strides"])
    dh, dw = pair("dilation", ctx.attrs["dilation"])
    top, left, _, _ = padding4(ctx.attrs["padding"])
    compute = dtypes.compute(out_dtype)
    window = ", ".join(plain(v) for v in (sh, sw, top, left, dh, dw))
    b = s.fresh("b")
    if compute in dtypes.FLOATS:
        with s.block(f"for {b} in range({n}):"):
            s.line(
                f"convolution.conv_transpose_image_into({x}, {weight}, {ctx.outs[0]}, {b}, "
                f"{plain(groups)}, {kh}, {kw}, {window})"
            )
            if ctx.epilogue is not None:
                ctx.epilogue([b, "0", "0", "0"], ["1", f"{og} * {groups}", out_h, out_w])
        return
    cg, cols = s.fresh("cg"), s.fresh("cols")
    s.line(f"{cg} = {c} // {groups}")
    s.line(f"{cols} = np.empty(({og} * {kh} * {kw}, {h} * {w}), {dtypes.np_type(out_dtype)})")
    g = s.fresh("g")
    with s.block(f"for {b} in range({n}):"), s.block(f"for {g} in range({groups}):"):
        s.line(
            f"{_int_block(compute, transposed=True)}({x}, {weight}, {ctx.outs[0]}, {cols}, {b}, "
            f"{g}, {cg}, {og}, {kh}, {kw}, {window})"
        )
        if ctx.epilogue is not None:
            ctx.epilogue([b, f"{g} * {og}", "0", "0"], ["1", og, out_h, out_w])


RULES.register(
    OpRule(
        "nn.conv2d_transpose",
        2,
        (
            Attr("channels", "int", None, optional=True),
            Attr("kernel_size", "ints", None, optional=True),
            Attr("strides", "ints", (1, 1)),
            Attr("output_padding", "ints", (0, 0)),
            Attr("padding", "ints", (0, 0)),
            Attr("dilation", "ints", (1, 1)),
            Attr("groups", "int", 1),
            Attr("data_layout", "str", NCHW),
            Attr("kernel_layout", "str", "IOHW"),
            Attr("out_layout", "str", ""),
            Attr("out_dtype", "dtype_or_empty", ""),
        ),
        _conv2d_transpose_infer,
        _conv2d_transpose_shape,
        emit=_conv2d_transpose_emit,
        numeric=True,
        epilogue=True,
    )
)


# --- run-time shape rules (run by vm.shape_funcs) ----------------------------------------


def _run_conv_attrs(attrs: Mapping[str, Any]) -> tuple:
    groups = attrs["groups"]
    if groups < 1:
        raise RuleError(f"attribute groups={groups} must be >= 1")
    return (
        sr.pair(attrs["strides"], "strides"),
        sr.pair(attrs["dilation"], "dilation"),
        sr.padding4(attrs["padding"]),
        groups,
    )


def _run_check_kernel_attrs(attrs: Mapping[str, Any], out_channels: int, kh: int, kw: int) -> None:
    if attrs.get("channels") is not None:
        sr.expect(out_channels, attrs["channels"], "output channels (attribute channels)")
    if attrs.get("kernel_size") is not None:
        size = sr.pair(attrs["kernel_size"], "kernel_size")
        sr.expect(kh, size[0], "kernel height of weight (attribute kernel_size)")
        sr.expect(kw, size[1], "kernel width of weight (attribute kernel_size)")


@RULES.shape("nn.conv2d")
def _run_conv2d(shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[sr.Shape]:
    data, weight = shapes
    sr.rank(data, 4, 4, "data")
    sr.rank(weight, 4, 4, "weight")
    (n, c, h, w), (o, cg, kh, kw) = data, weight
    strides, dilation, (top, left, bottom, right), groups = _run_conv_attrs(attrs)
    if o % groups or cg * groups != c:
        raise RuleError(
            f"data {sr.fmt_shape(data)} has {c} input channels, but weight {sr.fmt_shape(weight)} "
            f"with groups={groups} expects {cg * groups} ({cg} per group) and output "
            "channels divisible by groups"
        )
    _run_check_kernel_attrs(attrs, o, kh, kw)
    out_h = sr.window_output(h, kh, strides[0], dilation[0], top, bottom, 0, "kernel")
    out_w = sr.window_output(w, kw, strides[1], dilation[1], left, right, 1, "kernel")
    return [(n, o, out_h, out_w)]


@RULES.shape("nn.contrib_conv2d_gemm_without_weight_transform")
def _run_conv2d_packed(
    shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple
) -> list[sr.Shape]:
    data, weight = shapes
    sr.rank(data, 4, 4, "data")
    sr.rank(weight, 3, 3, "weight")
    channels, kernel = attrs.get("channels"), attrs.get("kernel_size")
    if channels is None or kernel is None:
        raise RuleError("attributes channels and kernel_size are required")
    kh, kw = sr.pair(kernel, "kernel_size")
    sr.expect(weight[2], panels.PANEL, f"panel width of weight {sr.fmt_shape(weight)}")
    sr.expect(weight[0], -(-channels // panels.PANEL), f"panels of weight {sr.fmt_shape(weight)}")
    sr.expect(weight[1], data[1] * kh * kw, f"depth of weight {sr.fmt_shape(weight)}")
    return _run_conv2d([data, (channels, data[1], kh, kw)], attrs, ranks)


@RULES.shape("nn.contrib_conv2d_winograd_weight_transform")
def _run_winograd_weight_transform(
    shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple
) -> list[sr.Shape]:
    (weight,) = shapes
    sr.rank(weight, 4, 4, "weight")
    o, i, kh, kw = weight
    if (kh, kw) != (3, 3):
        raise RuleError(f"weight {sr.fmt_shape(weight)} must have a 3x3 kernel")
    tile = attrs["tile_size"]
    if tile not in (2, 4):
        raise RuleError(f"attribute tile_size={tile} is not supported; only 2 and 4 are")
    return [(tile + 2, tile + 2, o, i)]


@RULES.shape("nn.contrib_conv2d_winograd_without_weight_transform")
def _run_winograd_conv2d(
    shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple
) -> list[sr.Shape]:
    data, weight = shapes
    sr.rank(data, 4, 4, "data")
    sr.rank(weight, 3, 4, "weight")
    strides, dilation, _, groups = _run_conv_attrs(attrs)
    alpha = attrs["tile_size"] + 2
    c = data[1]
    if len(weight) == 3:
        o = attrs.get("channels")
        if o is None:
            raise RuleError("attribute channels is required with a weight packed in panels")
        planes = alpha * alpha * -(-o // panels.PANEL)
        sr.expect(weight[0], planes, f"panels of the packed weight {sr.fmt_shape(weight)}")
        sr.expect(weight[2], panels.PANEL, f"panel width of weight {sr.fmt_shape(weight)}")
        sr.expect(weight[1], c, f"input channels of weight {sr.fmt_shape(weight)}")
        a, b, ci = alpha, alpha, c
    else:
        a, b, o, ci = weight
    if (a, b) != (alpha, alpha) or ci != c:
        raise RuleError(
            f"data {sr.fmt_shape(data)} has {c} input channels, but the transformed weight "
            f"{sr.fmt_shape(weight)} must be ({alpha}, {alpha}, out_channels, {c})"
        )
    if strides != (1, 1) or dilation != (1, 1) or groups != 1:
        raise RuleError("strides, dilation and groups must be 1")
    # Otherwise the convolution by the untransformed 3x3 weight.
    return _run_conv2d([data, (o, c, 3, 3)], attrs, ranks)


@RULES.shape("nn.conv2d_transpose")
def _run_conv2d_transpose(
    shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple
) -> list[sr.Shape]:
    data, weight = shapes
    sr.rank(data, 4, 4, "data")
    sr.rank(weight, 4, 4, "weight")
    (n, c, h, w), (cw, og, kh, kw) = data, weight
    strides, dilation, (top, left, bottom, right), groups = _run_conv_attrs(attrs)
    if c % groups or cw != c:
        raise RuleError(
            f"data {sr.fmt_shape(data)} has {c} input channels, but the IOHW weight "
            f"{sr.fmt_shape(weight)} has {cw} (and groups={groups} must divide them)"
        )
    o = og * groups
    _run_check_kernel_attrs(attrs, o, kh, kw)
    extra = sr.pair(attrs["output_padding"], "output_padding", minimum=0)
    sizes = []
    for axis, (size, kernel, before, after) in enumerate(
        ((h, kh, top, bottom), (w, kw, left, right))
    ):
        out = (size - 1) * strides[axis] + dilation[axis] * (kernel - 1) + extra[axis] + 1
        out -= before + after
        if out < 1:
            raise RuleError(
                f"the output {sr.AXIS_NAMES[axis]} would be {out}: the padding removes it all"
            )
        sizes.append(out)
    return [(n, o, sizes[0], sizes[1])]
