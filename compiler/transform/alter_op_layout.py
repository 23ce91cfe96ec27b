"""``AlterOpLayout``: convolutions and dense layers with constant weights get the weight
layout their kernels run fastest with.

Compiler layer (``compiler.transform``).

TVM's ``AlterOpLayout`` lets each operator's strategy replace a call by a form that runs
faster; here it does the two replacements the CPU kernels gain from, both leaving work
for the ``FoldConstant`` after it in ``relay.vm.compile``, so the kernels never transform
weights:

* A float ``nn.conv2d`` with a constant OIHW 3x3 weight, stride and dilation 1, one
  group, NCHW data of static channels and size, and at least :data:`MIN_CHANNELS` input
  and output channels becomes::

      nn.contrib_conv2d_winograd_without_weight_transform(
          data, nn.contrib_conv2d_winograd_weight_transform(weight, tile_size=t), tile_size=t, ...)

  with ``t`` 4 if the output has at least :data:`MIN_TILES` 4x4 tiles, else 2 if it has
  that many 2x2 tiles (else the call stays as it is). Folding computes the transform
  once (about 0.4 ms per call for 256x256 channels); smaller convolutions keep the im2col
  and BLAS path, which wins there. A float32 transformed weight is then packed, each of
  its planes in ``NC32n`` panels (:func:`_winograd_panels`), for the register tiles.
* Any other float32 ``nn.conv2d`` of that kind (any kernel, strides and dilation) whose
  outputs take at least :data:`MIN_PACKED_DEPTH` multiply-adds each, or whose input is
  a single pixel, becomes::

      nn.contrib_conv2d_gemm_without_weight_transform(
          data, layout_transform(reshape(weight, (O, -1)), "NC", "NC32n"), channels=O, ...)

  im2col and a product by the weight packed in 32-wide panels, in register tiles
  (``vm.kernels.runtime.packed``) instead of OpenBLAS, which re-packs the weight on every call
  (faster on every ResNet-18 layer; benchmarks/NOTES.md). An unpadded one whose windows do
  not overlap (a 1x1 kernel with a stride, a kernel as big as its stride) reads a strided
  slice or a space-to-depth copy of its input instead, as a 1x1 convolution of stride 1
  (see :func:`_pointwise_pixels`).
* A float32 ``nn.dense`` with a constant weight of at least :data:`MIN_DENSE_WEIGHTS`
  elements becomes ``nn.contrib_dense_pack(data, layout_transform(weight, "NC",
  "NC32n"), units=...)``: the runtime multiplies by weights packed in 32-wide panels in
  register tiles (``vm.kernels.runtime.packed``), where OpenBLAS would re-pack the weight on
  every call (faster on an MLP's products, as fast for a single row; figures in
  benchmarks/NOTES.md). A float64 one becomes
  ``nn.matmul(data, transpose(weight))``: BLAS multiplies by a row-major
  ``(in_features, units)`` matrix 1.2x (64 rows) to 2x (8 rows) faster than by the
  transpose of a ``(units, in_features)`` one, as it need not gather the weight's
  columns while packing them; a single row of data (a matrix-vector product, 15% slower
  by a row-major weight) keeps ``nn.dense``, an unknown batch size (``?``) takes the
  product. Smaller weights keep ``nn.dense``.

The pass object says ``opt_level`` 3, as in TVM; ``relay.vm.compile`` runs it from the
default level 2 as well (see ``compiler.relay.vm.DEFAULT_REWRITE_LEVEL``).
"""

from __future__ import annotations

import math

from compiler.ir.expr import Call, Constant, Node, Op
from compiler.ir.module import IRModule
from compiler.ir.types import Any, TensorType
from compiler.op import nn
from compiler.op.api import call_op
from compiler.op.defs_window import padding4, pair
from compiler.op.registry import get_def
from compiler.transform.pass_manager import Pass, PassContext
from compiler.transform.rewriter import BindingMutator, is_primitive, rewrite_module
from vm.kernels.runtime import convolution, panels

__all__ = ["AlterOpLayout", "alter_op_layout"]

#: Fewest input and output channels for which the tile transforms pay off.
MIN_CHANNELS = 8
#: Fewest output tiles per image for a tile size to pay off (measured on ResNet-18's
#: layers: F(4x4, 3x3) wins at 28x28 outputs and above, 49 tiles; F(2x2, 3x3) at 14x14,
#: 49 tiles; 7x7 outputs stay with im2col and BLAS).
MIN_TILES = 40
#: Fewest input and output channels for which a float32 Winograd convolution's transformed
#: weight is packed in panels for the register tiles (see :func:`_panels_pay`).
WINOGRAD_PANELS_MIN = 64
#: Fewest multiply-adds per output element (input channels times kernel taps) for which a
#: convolution's product runs by its packed weight: every ResNet-18 layer gains, and so do
#: MobileNet's thin layers (16 to 96 channels 1x1, 3 to 32 channels 3x3), 1.3-4x, once
#: 1x1 convolutions run pointwise (``vm.kernels.runtime.pointwise``; benchmarks/NOTES.md).
MIN_PACKED_DEPTH = 8
#: Fewest weight elements for which a dense layer is given a packed or transposed weight:
#: smaller products go to BLAS by the ``(units, in_features)`` weight as it is (or, below
#: 256 multiply-adds, to compiled loops), where packing would pay little.
MIN_DENSE_WEIGHTS = 32768
#: The windows whose pixels a copy moves by vector shuffles (a stride-2 slice, 2x2 blocks; see
#: ``vm.kernels.emit_layout``). A convolution with such a window always has its pixels copied
#: ahead (see :func:`_pointwise_pixels`); one with another window only where the runtime's
#: column blocks, which copy them in cache, would not take it. AMD EPYC (Zen 4), 2 threads,
#: with its bias and relu, column blocks against the copy then pointwise, the least of
#: three alternated runs: 1x1 stride 2 from 64 to 128 channels at 56x56 88 against 86 us,
#: ConvNeXt's 2x2 stride-2 downsampling from 96 channels 702 against 612, but its 4x4
#: stride-4 stem from 3 channels 172 against 216.
SHUFFLED_WINDOWS = ((1, 1, 2, 2), (2, 2, 2, 2))


def _plain_conv(call: Call, data_type: object) -> dict | None:
    """The normalized attributes of a float ``nn.conv2d`` of NCHW data by a constant OIHW
    weight of its dtype, one group, static channels and size; None for any other call."""
    if not (isinstance(call.op, Op) and call.op.name == "nn.conv2d"):
        return None
    weight = call.args[1]
    if not isinstance(weight, Constant) or weight.data.ndim != 4:
        return None
    attrs = get_def("nn.conv2d").normalize_attrs(call.attrs)
    if not isinstance(data_type, TensorType) or len(data_type.shape) != 4:
        return None
    dtype = data_type.dtype
    if dtype not in ("float32", "float64") or weight.data.dtype != dtype:
        return None
    if attrs["out_dtype"] not in ("", dtype) or attrs["groups"] != 1:
        return None
    if (attrs["data_layout"], attrs["kernel_layout"], attrs["out_layout"]) not in (
        ("NCHW", "OIHW", ""),
        ("NCHW", "OIHW", "NCHW"),
    ):
        return None
    _, channels, height, width = data_type.shape
    if any(isinstance(d, Any) for d in (channels, height, width)):
        return None
    return attrs


def _winograd_call(call: Call, data_type: object) -> Call | None:
    """The Winograd form of ``call``, or None if it does not qualify."""
    attrs = _plain_conv(call, data_type)
    if attrs is None:
        return None
    op = "nn.conv2d"
    if pair(op, attrs, "strides") != (1, 1) or pair(op, attrs, "dilation") != (1, 1):
        return None
    weight = call.args[1]
    out_channels, in_channels, kh, kw = weight.data.shape
    if (kh, kw) != (3, 3) or min(out_channels, in_channels) < MIN_CHANNELS:
        return None
    _, channels, height, width = data_type.shape
    if channels != in_channels:
        return None
    top, left, bottom, right = padding4(op, attrs)
    out_h, out_w = height + top + bottom - 2, width + left + right - 2
    tile = next((t for t in (4, 2) if -(-out_h // t) * -(-out_w // t) >= MIN_TILES), None)
    if out_h < 1 or out_w < 1 or tile is None:
        return None
    transformed = nn.contrib_conv2d_winograd_weight_transform(weight, tile_size=tile)
    if data_type.dtype == "float32" and _panels_pay(out_channels, in_channels):
        transformed = _winograd_panels(transformed, tile + 2, out_channels, in_channels)
    return nn.contrib_conv2d_winograd_without_weight_transform(
        call.args[0],
        transformed,
        tile_size=tile,
        padding=(top, left, bottom, right),
        channels=out_channels,
        kernel_size=(3, 3),
        out_dtype=attrs["out_dtype"],
    )


def _panels_pay(out_channels: int, in_channels: int) -> bool:
    """Whether a Winograd convolution's planes multiply faster by the register tiles than
    by OpenBLAS: whole panels of output channels, and at least :data:`WINOGRAD_PANELS_MIN`
    of each. AMD EPYC Zen 5 with AVX-512, one thread, a plane's product by the tiles
    against OpenBLAS with ``OPENBLAS_CORETYPE=Haswell`` and without: 256 by 256 channels
    and 49 tiles 27 against 57 and 34 us, 64 by 64 and 784 tiles 31 against 55 and 31; but
    32 by 32 and 784 tiles 9 against 15 and 7, and 40 by 40 channels no faster than BLAS
    (a short panel of 8 wastes three quarters of its tiles)."""
    whole = out_channels % panels.PANEL == 0
    return whole and min(out_channels, in_channels) >= WINOGRAD_PANELS_MIN


def _winograd_panels(transformed: Node, alpha: int, out_channels: int, in_channels: int) -> Node:
    """The ``(alpha, alpha, O, I)`` transformed weight as each plane's ``(O, I)`` matrix
    packed in ``NC32n`` panels (``O`` a multiple of 32): ``(alpha * alpha *
    O / 32, I, 32)``, which the runtime's register tiles multiply by each plane of
    transformed input tiles (OpenBLAS re-packs a plane on every call, and runs it at half
    the tiles' speed where ``OPENBLAS_CORETYPE`` holds it to AVX2)."""
    flat = call_op("reshape", [transformed], newshape=(alpha * alpha * out_channels, in_channels))
    return call_op("layout_transform", [flat], src_layout="NC", dst_layout=panels.LAYOUT)


def _packed_conv_call(call: Call, data_type: object) -> Call | None:
    """``call`` as a product by its constant weight packed in panels, or None if it does not
    qualify."""
    attrs = _plain_conv(call, data_type)
    if attrs is None or data_type.dtype != "float32":
        return None
    weight = call.args[1]
    out_channels, in_channels, kh, kw = weight.data.shape
    if data_type.shape[1] != in_channels:
        return None
    # A single input pixel (a squeeze-excite block's convolutions) is a matrix-vector
    # product however few its inputs: packed, it stays in compiled code; otherwise each call
    # went through Python to BLAS, 30-300 us for a few hundred multiply-adds.
    if in_channels * kh * kw < MIN_PACKED_DEPTH and data_type.shape[2] * data_type.shape[3] > 1:
        return None
    flat = call_op("reshape", [weight], newshape=(out_channels, -1))
    packed = call_op("layout_transform", [flat], src_layout="NC", dst_layout=panels.LAYOUT)
    op = "nn.conv2d"
    pixels = _pointwise_pixels(call.args[0], data_type, (kh, kw), out_channels, attrs)
    if pixels is not None:
        return nn.contrib_conv2d_gemm_without_weight_transform(
            pixels, packed, channels=out_channels, kernel_size=(1, 1), out_dtype=attrs["out_dtype"]
        )
    return nn.contrib_conv2d_gemm_without_weight_transform(
        call.args[0],
        packed,
        channels=out_channels,
        kernel_size=(kh, kw),
        strides=pair(op, attrs, "strides"),
        padding=padding4(op, attrs),
        dilation=pair(op, attrs, "dilation"),
        out_dtype=attrs["out_dtype"],
    )


def _pointwise_pixels(
    data: Node, data_type: TensorType, kernel: tuple[int, int], units: int, attrs: dict
) -> Node | None:
    """The input of a 1x1 stride-1 convolution equal to an unpadded convolution of ``data``
    whose windows do not overlap (a 1x1 kernel with a stride, or a kernel as big as its
    stride: ConvNeXt's and Swin's patch embeddings and downsampling), or None for any
    other.

    Such a convolution's im2row matrix is a permutation of its input, which im2row built
    a pixel at a time, one read from each channel's plane in turn (about 2 ns an element:
    ResNet-50's 1x1 stride-2 convolutions spent 150-300 us in it on two threads). A
    strided slice (a 1x1 kernel) or a space-to-depth transpose (``C x (H/k) x k x (W/k)
    x k`` to ``(C x k x k) x (H/k) x (W/k)``, whose channel order is the flattened OIHW
    weight's) copies the input a plane at a time instead, and the convolution then runs
    pointwise (``vm.kernels.runtime.pointwise``), the fastest of the packed products."""
    op = "nn.conv2d"
    strides = pair(op, attrs, "strides")
    if padding4(op, attrs) != (0, 0, 0, 0) or strides == (1, 1):
        return None
    if kernel != (1, 1) and (kernel != strides or pair(op, attrs, "dilation") != (1, 1)):
        return None
    channels, height, width = (int(d) for d in data_type.shape[1:])
    (kh, kw), (sh, sw) = kernel, strides
    out_h, out_w = (height - kh) // sh + 1, (width - kw) // sw + 1
    if out_h < 1 or out_w < 1:
        return None
    weight_bytes = channels * kh * kw * units * 4
    if (kh, kw, sh, sw) not in SHUFFLED_WINDOWS and convolution.column_blocks_take(
        weight_bytes, channels * kh * kw, (kh, kw), out_h, out_w
    ):
        return None
    if kernel == (1, 1):
        return call_op("strided_slice", [data], begin=(0, 0), end=(height, width),
                       strides=strides, axes=(2, 3))  # fmt: skip
    if (out_h * kh, out_w * kw) != (height, width):
        data = call_op("strided_slice", [data], begin=(0, 0), end=(out_h * kh, out_w * kw),
                       axes=(2, 3))  # fmt: skip
    blocks = call_op("reshape", [data], newshape=(0, channels, out_h, kh, out_w, kw))
    moved = call_op("transpose", [blocks], axes=(0, 1, 3, 5, 2, 4))
    return call_op("reshape", [moved], newshape=(0, channels * kh * kw, out_h, out_w))


def _conv_call(call: Call, data_type: object) -> Call | None:
    return _winograd_call(call, data_type) or _packed_conv_call(call, data_type)


def _dense_call(call: Call, data_type: object) -> Call | None:
    """``call`` as a product by its constant weight packed (float32) or transposed
    (float64), or None if it does not qualify."""
    if not (isinstance(call.op, Op) and call.op.name == "nn.dense"):
        return None
    weight = call.args[1]
    if not isinstance(weight, Constant) or weight.data.ndim != 2:
        return None
    if weight.data.size < MIN_DENSE_WEIGHTS or not isinstance(data_type, TensorType):
        return None
    attrs = get_def("nn.dense").normalize_attrs(call.attrs)
    dtype = data_type.dtype
    if dtype not in ("float32", "float64") or weight.data.dtype != dtype:
        return None
    if attrs["out_dtype"] not in ("", dtype):
        return None
    if dtype == "float32":
        return nn.contrib_dense_pack(
            call.args[0],
            call_op("layout_transform", [weight], src_layout="NC", dst_layout=panels.LAYOUT),
            units=weight.data.shape[0],
            out_dtype=attrs["out_dtype"],
            weight_layout=panels.LAYOUT,
        )
    rows = data_type.shape[:-1]
    if not any(isinstance(d, Any) for d in rows) and math.prod(rows) < 2:
        return None
    return nn.matmul(
        call.args[0],
        call_op("transpose", [weight], axes=(1, 0)),
        units=attrs["units"],
        out_dtype=attrs["out_dtype"],
    )


_REWRITES = {"nn.conv2d": _conv_call, "nn.dense": _dense_call}


class _Rewriter(BindingMutator):
    def descend(self, node: Node) -> bool:
        return not is_primitive(node)

    def rewrite(self, old: Node, new: Node) -> Node:
        if isinstance(old, Call) and isinstance(new, Call):
            data_type = getattr(old.args[0], "_checked_type", None) if old.args else None
            rewrite = _REWRITES.get(new.op.name) if isinstance(new.op, Op) else None
            replacement = None if rewrite is None else rewrite(new, data_type)
            if replacement is not None:
                return replacement
        return new


def _is_candidate(node: object) -> bool:
    return isinstance(node, Call) and isinstance(node.op, Op) and node.op.name in _REWRITES


def alter_op_layout(mod: IRModule) -> IRModule:
    """Give qualifying ``nn.conv2d`` and ``nn.dense`` calls their faster weight layouts (see
    the module doc).

    Parameters
    ----------
    mod : IRModule
        The module; it is not modified. It must type-check if it calls ``nn.conv2d`` or
        ``nn.dense``.

    Returns
    -------
    IRModule
        A new module.
    """
    return rewrite_module(mod, _is_candidate, _Rewriter)


class AlterOpLayout(Pass):
    """Turn convolutions with constant weights into Winograd convolutions or products by
    the packed weight, and dense layers with constant weights into products by the packed
    or transposed weight, leaving the weight transforms to ``FoldConstant`` (TVM's
    ``AlterOpLayout``, ``opt_level=3``). See :mod:`compiler.transform.alter_op_layout`."""

    def __init__(self) -> None:
        super().__init__("AlterOpLayout", opt_level=3)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return alter_op_layout(mod)

    def __repr__(self) -> str:
        return "AlterOpLayout()"
