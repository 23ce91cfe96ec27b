"""ONNX neural-network operators: ``MatMul``, ``Gemm``, convolutions, pools, normalizations,
``Softmax``/``LogSoftmax`` and ``Upsample`` (``Resize`` is in ``onnx_ops_resize``).

Compiler layer (``compiler.frontend``); does not import ``onnx``. Convolutions and pools
over one spatial axis become the 2-D operators on a height of 1. ONNX's ``pads`` for two
spatial axes, ``(h_begin, w_begin, h_end, w_end)``, is already Relay's (top, left,
bottom, right).
"""

from __future__ import annotations

import math

import numpy as np

from compiler.frontend.onnx_context import NodeContext, Value
from compiler.frontend.onnx_ops_tensor import normalize_axis, shape_text
from compiler.frontend.onnx_registry import register
from compiler.ir.types import Any

# --- matrix products ---------------------------------------------------------------------------


def _static(node: NodeContext, dims: tuple, what: str) -> tuple[int, ...]:
    if any(isinstance(d, Any) for d in dims):
        raise node.unsupported(
            f"{what} {shape_text(dims)} has dimensions known only at run time; it must be "
            "known at import time (give static input shapes with from_onnx's shape= argument)"
        )
    return tuple(int(d) for d in dims)


def _batched_matmul(node: NodeContext, a: Value, b: Value) -> Value:
    """``a @ b`` for a of rank >= 1 and b of rank >= 3, with numpy's batch broadcasting."""
    vector = a.ndim == 1
    if vector:
        a = node.call("expand_dims", a, axis=0)
    if a.ndim == 3 and b.ndim == 3:
        # nn.batch_matmul itself broadcasts a batch of one.
        out = node.call("nn.batch_matmul", a, b, transpose_b=False)
    else:
        sa = _static(node, a.shape, "the shape of input A")
        sb = _static(node, b.shape, "the shape of input B")
        try:
            batch = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
        except ValueError:
            raise node.error(
                f"the batch dimensions of {shape_text(a.shape)} and {shape_text(b.shape)} "
                "do not broadcast"
            ) from None
        size = int(np.prod(batch, dtype=np.int64))

        def as_3d(x: Value, dims: tuple[int, ...]) -> Value:
            own = int(np.prod(dims[:-2], dtype=np.int64))
            if own == 1:
                # nn.batch_matmul broadcasts a batch of one.
                return node.call("reshape", x, newshape=(1, *dims[-2:]))
            if own != size:
                x = node.call("broadcast_to", x, shape=batch + dims[-2:])
            return node.call("reshape", x, newshape=(size, *dims[-2:]))

        a3 = as_3d(a, sa)
        b3 = as_3d(b, sb)
        out = node.call("nn.batch_matmul", a3, b3, transpose_b=False)
        out = node.call("reshape", out, newshape=(*batch, sa[-2], sb[-1]))
    if vector:
        out = node.call("squeeze", out, axis=(out.ndim - 2,))
    return out


@register("MatMul")
def _matmul(node: NodeContext) -> Value:
    a, b = node.input(0), node.input(1)
    if a.ndim == 0 or b.ndim == 0:
        raise node.error("MatMul needs inputs of rank >= 1")
    if b.ndim == 1:
        # (..., K) @ (K,): a dense layer with one output unit, that unit axis dropped.
        weight = node.call("expand_dims", b, axis=0)
        out = node.call("nn.dense", a, weight)
        return node.call("squeeze", out, axis=(out.ndim - 1,))
    if b.ndim == 2:
        # nn.dense takes its weight as (units, in_features): B transposed. For a constant B
        # the transpose folds away (here, or in FoldConstant once bound as a parameter).
        return node.call("nn.dense", a, node.call("transpose", b, axes=(1, 0)))
    return _batched_matmul(node, a, b)


@register("Gemm")
def _gemm(node: NodeContext) -> Value:
    a, b = node.input(0), node.input(1)
    c = node.optional(2)
    if a.ndim != 2 or b.ndim != 2:
        raise node.error(
            f"A and B must be matrices, found {shape_text(a.shape)} and {shape_text(b.shape)}"
        )
    alpha = float(node.attr("alpha", 1.0))
    beta = float(node.attr("beta", 1.0))
    if int(node.attr("transA", 0)):
        a = node.call("transpose", a, axes=(1, 0))
    weight = b if int(node.attr("transB", 0)) else node.call("transpose", b, axes=(1, 0))
    out = node.call("nn.dense", a, weight)
    if alpha != 1.0:
        out = node.call("multiply", out, node.scalar(alpha, out.dtype))
    if c is not None and beta != 0.0:
        if beta != 1.0:
            c = node.call("multiply", c, node.scalar(beta, c.dtype))
        out = node.call("add", out, c)
    return out


# --- windows: shared attribute handling --------------------------------------------------------


def _spatial_rank(node: NodeContext, x: Value) -> int:
    rank = x.ndim - 2
    if rank not in (1, 2):
        raise node.unsupported(
            f"{node.op_type} over {rank} spatial dimension(s) (input {shape_text(x.shape)}) is "
            "not supported; only 1-D and 2-D (NCW and NCHW) are"
        )
    return rank


def _ints(node: NodeContext, name: str, count: int, default: int) -> list[int]:
    value = node.attr(name)
    if value is None:
        return [default] * count
    if len(value) != count:
        raise node.error(f"attribute {name}={tuple(value)} must hold {count} values")
    return [int(v) for v in value]


def _auto_pads(
    node: NodeContext,
    x: Value,
    kernel: list[int],
    strides: list[int],
    dilations: list[int],
) -> list[int] | None:
    """Pads (begins then ends) for ``auto_pad``, or None for ``NOTSET`` (use ``pads``)."""
    mode = node.check_attr("auto_pad", ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"), "NOTSET")
    rank = len(kernel)
    if mode == "NOTSET":
        return None
    if mode == "VALID":
        return [0] * (2 * rank)
    sizes = _static(node, x.shape[2:], "with auto_pad SAME_*, the spatial shape")
    begins, ends = [], []
    for size, k, s, d in zip(sizes, kernel, strides, dilations):
        out = -(-size // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        small, large = total // 2, total - total // 2
        begins.append(small if mode == "SAME_UPPER" else large)
        ends.append(large if mode == "SAME_UPPER" else small)
    return begins + ends


def _window(node: NodeContext, x: Value, kernel: list[int]) -> dict:
    """strides, dilations and pads of a window operator as Relay (height, width) attributes."""
    rank = len(kernel)
    strides = _ints(node, "strides", rank, 1)
    dilations = _ints(node, "dilations", rank, 1)
    pads = _auto_pads(node, x, kernel, strides, dilations)
    if pads is None:
        pads = _ints(node, "pads", 2 * rank, 0)
    if min(strides + dilations) < 1 or min(pads) < 0:
        raise node.error(
            f"strides {tuple(strides)} and dilations {tuple(dilations)} must be >= 1 and pads "
            f"{tuple(pads)} >= 0"
        )
    if rank == 1:
        # A 1-D window is a 2-D one of height 1.
        return {
            "strides": (1, strides[0]),
            "dilation": (1, dilations[0]),
            "padding": (0, pads[0], 0, pads[1]),
            "size": (1, kernel[0]),
        }
    return {
        "strides": tuple(strides),
        "dilation": tuple(dilations),
        "padding": tuple(pads),
        "size": tuple(kernel),
    }


def _to_2d(node: NodeContext, x: Value, rank: int) -> Value:
    return node.call("expand_dims", x, axis=2) if rank == 1 else x


def _from_2d(node: NodeContext, x: Value, rank: int) -> Value:
    return node.call("squeeze", x, axis=(2,)) if rank == 1 else x


def _kernel_shape(node: NodeContext, w: Value, rank: int) -> list[int]:
    given = node.attr("kernel_shape")
    from_weight = w.shape[2:]
    if given is not None:
        kernel = [int(k) for k in given]
        if len(kernel) != rank:
            raise node.error(f"kernel_shape {tuple(kernel)} must hold {rank} values")
        for k, d in zip(kernel, from_weight):
            if isinstance(d, int) and d != k:
                raise node.error(
                    f"kernel_shape {tuple(kernel)} does not match the weight shape "
                    f"{shape_text(w.shape)}"
                )
        return kernel
    return list(_static(node, from_weight, "the kernel dimensions of the weight"))


def _bias(node: NodeContext, out: Value, index: int) -> Value:
    bias = node.optional(index)
    return out if bias is None else node.call("nn.bias_add", out, bias, axis=1)


# --- convolutions ------------------------------------------------------------------------------


@register("Conv")
def _conv(node: NodeContext) -> Value:
    x, w = node.input(0), node.input(1)
    rank = _spatial_rank(node, x)
    if w.ndim != x.ndim:
        raise node.error(
            f"weight {shape_text(w.shape)} must have the rank of X {shape_text(x.shape)}"
        )
    kernel = _kernel_shape(node, w, rank)
    win = _window(node, x, kernel)
    channels = w.shape[0] if isinstance(w.shape[0], int) else None
    out = node.call(
        "nn.conv2d",
        _to_2d(node, x, rank),
        _to_2d(node, w, rank),
        strides=win["strides"],
        padding=win["padding"],
        dilation=win["dilation"],
        groups=int(node.attr("group", 1)),
        channels=channels,
        kernel_size=win["size"],
    )
    return _from_2d(node, _bias(node, out, 2), rank)


@register("ConvTranspose")
def _conv_transpose(node: NodeContext) -> Value:
    x, w = node.input(0), node.input(1)
    rank = _spatial_rank(node, x)
    if w.ndim != x.ndim:
        raise node.error(
            f"weight {shape_text(w.shape)} must have the rank of X {shape_text(x.shape)}"
        )
    kernel = _kernel_shape(node, w, rank)
    group = int(node.attr("group", 1))
    strides = _ints(node, "strides", rank, 1)
    dilations = _ints(node, "dilations", rank, 1)
    output_padding = _ints(node, "output_padding", rank, 0)
    mode = node.check_attr("auto_pad", ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"), "NOTSET")
    output_shape = node.attr("output_shape")
    if output_shape is not None or mode in ("SAME_UPPER", "SAME_LOWER"):
        sizes = _static(
            node, x.shape[2:], "with output_shape or auto_pad SAME_*, the spatial shape"
        )
        if output_shape is None:
            targets = [size * s for size, s in zip(sizes, strides)]
        else:
            targets = [int(v) for v in output_shape][-rank:]
        begins, ends = [], []
        for size, k, s, d, extra, target in zip(
            sizes, kernel, strides, dilations, output_padding, targets
        ):
            total = s * (size - 1) + extra + (k - 1) * d + 1 - target
            if total < 0:
                raise node.unsupported(
                    f"output_shape {tuple(targets)} is larger than the transposed convolution "
                    "produces without padding; only shapes reachable by padding are supported"
                )
            small, large = total // 2, total - total // 2
            upper = mode == "SAME_UPPER"
            begins.append(small if upper else large)
            ends.append(large if upper else small)
        pads = begins + ends
    elif mode == "VALID":
        pads = [0] * (2 * rank)
    else:
        pads = _ints(node, "pads", 2 * rank, 0)
    if rank == 1:
        strides2, dilation2 = (1, strides[0]), (1, dilations[0])
        padding, out_pad, size = (0, pads[0], 0, pads[1]), (0, output_padding[0]), (1, kernel[0])
    else:
        strides2, dilation2 = tuple(strides), tuple(dilations)
        padding, out_pad, size = tuple(pads), tuple(output_padding), tuple(kernel)
    channels = w.shape[1] * group if isinstance(w.shape[1], int) else None
    out = node.call(
        "nn.conv2d_transpose",
        _to_2d(node, x, rank),
        _to_2d(node, w, rank),
        channels=channels,
        kernel_size=size,
        strides=strides2,
        output_padding=out_pad,
        padding=padding,
        dilation=dilation2,
        groups=group,
    )
    return _from_2d(node, _bias(node, out, 2), rank)


# --- pools -------------------------------------------------------------------------------------


def _pool_kernel(node: NodeContext, rank: int) -> list[int]:
    kernel = node.attr("kernel_shape")
    if kernel is None or len(kernel) != rank:
        raise node.error(f"attribute kernel_shape must hold {rank} values, found {kernel}")
    return [int(k) for k in kernel]


@register("MaxPool")
def _max_pool(node: NodeContext) -> Value:
    x = node.input(0)
    if node.wants_output(1):
        raise node.unsupported("the Indices output of MaxPool is not supported")
    rank = _spatial_rank(node, x)
    kernel = _pool_kernel(node, rank)
    win = _window(node, x, kernel)
    out = node.call(
        "nn.max_pool2d",
        _to_2d(node, x, rank),
        pool_size=win["size"],
        strides=win["strides"],
        dilation=win["dilation"],
        padding=win["padding"],
        ceil_mode=bool(node.attr("ceil_mode", 0)),
    )
    return _from_2d(node, out, rank)


@register("AveragePool")
def _avg_pool(node: NodeContext) -> Value:
    x = node.input(0)
    rank = _spatial_rank(node, x)
    kernel = _pool_kernel(node, rank)
    win = _window(node, x, kernel)
    out = node.call(
        "nn.avg_pool2d",
        _to_2d(node, x, rank),
        pool_size=win["size"],
        strides=win["strides"],
        dilation=win["dilation"],
        padding=win["padding"],
        ceil_mode=bool(node.attr("ceil_mode", 0)),
        count_include_pad=bool(node.attr("count_include_pad", 0)),
    )
    return _from_2d(node, out, rank)


@register("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(node: NodeContext) -> Value:
    x = node.input(0)
    if x.ndim < 3:
        raise node.error(f"input {shape_text(x.shape)} must have at least one spatial axis")
    op = "mean" if node.op_type == "GlobalAveragePool" else "max"
    return node.call(op, x, axis=tuple(range(2, x.ndim)), keepdims=True)


# --- normalization -----------------------------------------------------------------------------


@register("BatchNormalization")
def _batch_norm(node: NodeContext) -> Value:
    x = node.input(0)
    if node.opset < 9 and int(node.attr("spatial", 1)) != 1:
        raise node.unsupported("spatial=0 (per-activation statistics) is not supported")
    if int(node.attr("training_mode", 0)) or any(node.wants_output(i) for i in range(1, 5)):
        raise node.unsupported(
            "training mode (updated running statistics as outputs) is not supported; only "
            "inference is"
        )
    out = node.call(
        "nn.batch_norm",
        x,
        node.input(1),
        node.input(2),
        node.input(3),
        node.input(4),
        axis=1,
        epsilon=float(node.attr("epsilon", 1e-5)),
    )
    return node.item(out, 0)


@register("LayerNormalization")
def _layer_norm(node: NodeContext) -> list[Value]:
    x, scale = node.input(0), node.input(1)
    bias = node.optional(2)
    axis = normalize_axis(node, int(node.attr("axis", -1)), x.ndim)
    epsilon = float(node.attr("epsilon", 1e-5))
    extra = node.wants_output(1) or node.wants_output(2)
    simple = axis == x.ndim - 1 and scale.ndim == 1 and (bias is None or bias.ndim == 1)
    if simple and not extra:
        beta = bias if bias is not None else node.call("zeros_like", scale)
        out = node.call(
            "nn.layer_norm", x, scale, beta, axis=axis, epsilon=epsilon, center=bias is not None
        )
        return [out]
    # Several normalized axes, or the statistics wanted as outputs: spell it out.
    axes = tuple(range(axis, x.ndim))
    mean = node.call("mean", x, axis=axes, keepdims=True)
    centered = node.call("subtract", x, mean)
    var = node.call("mean", node.call("multiply", centered, centered), axis=axes, keepdims=True)
    inv_std = node.call("rsqrt", node.call("add", var, node.scalar(epsilon, x.dtype)))
    out = node.call("multiply", node.call("multiply", centered, inv_std), scale)
    if bias is not None:
        out = node.call("add", out, bias)
    return [out, mean, inv_std]


@register("InstanceNormalization")
def _instance_norm(node: NodeContext) -> Value:
    x = node.input(0)
    if x.ndim < 3:
        raise node.error(f"input {shape_text(x.shape)} must have at least one spatial axis")
    channels = x.shape[1]
    if isinstance(channels, Any):
        raise node.unsupported("the channel count of the input must be known at import time")
    # Instance normalization is group normalization with one channel per group.
    return node.call(
        "nn.group_norm",
        x,
        node.input(1),
        node.input(2),
        num_groups=int(channels),
        axis=1,
        epsilon=float(node.attr("epsilon", 1e-5)),
    )


@register("Softmax", "LogSoftmax")
def _softmax(node: NodeContext) -> Value:
    x = node.input(0)
    op = "nn.softmax" if node.op_type == "Softmax" else "nn.log_softmax"
    if node.opset >= 13:
        axis = normalize_axis(node, int(node.attr("axis", -1)), x.ndim)
        return node.call(op, x, axis=axis)
    # Before opset 13 the input is read as a matrix: the axes before `axis` are the rows.
    axis = normalize_axis(node, int(node.attr("axis", 1)), x.ndim)
    if axis == x.ndim - 1:
        return node.call(op, x, axis=-1)
    shape = _static(
        node, x.shape, "before opset 13 (softmax over the flattened trailing axes), the input shape"
    )
    rows = int(np.prod(shape[:axis], dtype=np.int64))
    flat = node.call(op, node.call("reshape", x, newshape=(rows, -1)), axis=-1)
    return node.call("reshape", flat, newshape=shape)


# --- resizing ----------------------------------------------------------------------------------


def _upsample(node: NodeContext, x: Value, scales: list[float], method: str, corners: bool):
    if x.ndim != 4:
        raise node.unsupported(f"resizing a rank-{x.ndim} tensor is not supported; only NCHW is")
    if len(scales) != 4:
        raise node.error(f"scales {tuple(scales)} must hold one value per axis of the input")
    if scales[0] != 1 or scales[1] != 1:
        raise node.unsupported(
            f"scales {tuple(scales)} resize the batch or channel axis; only height and width "
            "may be scaled"
        )
    if any(s < 1 or s != math.floor(s) for s in scales[2:]):
        raise node.unsupported(
            f"scales {tuple(scales)}: only whole-number upscaling of height and width is supported"
        )
    if scales[2] == 1 and scales[3] == 1:
        return x
    return node.call(
        "nn.upsampling",
        x,
        scale_h=float(scales[2]),
        scale_w=float(scales[3]),
        method=method,
        align_corners=corners,
    )


@register("Upsample")
def _upsample_op(node: NodeContext) -> Value:
    x = node.input(0)
    mode = node.check_attr("mode", ("nearest", "linear", "bilinear"), "nearest")
    if node.opset >= 9:
        scales = [float(s) for s in node.static(1, "scales").reshape(-1)]
    else:
        scales = [float(s) for s in node.attr("scales", [])]
    # Upsample samples at out_index / scale: "asymmetric" coordinates, nearest rounds down.
    method = "nearest_neighbor" if mode == "nearest" else "bilinear"
    return _upsample(node, x, scales, method, corners=False)
