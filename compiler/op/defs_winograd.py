"""Winograd convolution with the weights transformed ahead of time (TVM's ``contrib`` ops).

Compiler layer (``compiler.op``).

A 3x3, stride-1 convolution computes each 2x2 output tile from a 4x4 input tile
(Winograd F(2x2, 3x3), Lavin and Gray 2016): ``U = G g G^T`` transforms each 3x3
kernel, ``V = B^T d B`` each input tile, and ``A^T (sum over channels U * V) A`` is the
output tile. The weight transform depends on the weights alone, so when they are
constants ``AlterOpLayout`` splits ``nn.conv2d`` into the two operators below and
``FoldConstant`` computes the transform once, at compile time, as TVM does:

- ``nn.contrib_conv2d_winograd_weight_transform(weight, tile_size=2)``: OIHW ``(O, I, 3, 3)``
  to ``(tile_size + 2, tile_size + 2, O, I)``;
- ``nn.contrib_conv2d_winograd_without_weight_transform(data, weight, tile_size=2, ...)``:
  NCHW data and a transformed weight; the attributes are ``nn.conv2d``'s, and only
  ``kernel_size`` 3x3, strides and dilation 1 and one group are implemented. The weight
  is either the transform's ``(alpha, alpha, O, I)`` or, as ``AlterOpLayout`` gives
  float32 ones (an extension of TVM's operator), each plane's ``(O, I)`` matrix packed in
  ``NC32n`` panels: ``(alpha * alpha * ceil(O / 32), I, 32)``, with ``channels`` saying
  ``O``.

Tile sizes 2 (F(2x2, 3x3), 16 products) and 4 (F(4x4, 3x3): 4x4 output tiles from 6x6
input tiles, 36 products, 2.25 times fewer multiplications again, slightly less exact)
are implemented.

The references compute in float64 with the matrices above and round once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from compiler.ir.attrs import Attrs
from compiler.ir.types import Any, TensorType, Type
from compiler.op.defs_common import define, result
from compiler.op.defs_window import (
    NCHW,
    OUT_LAYOUTS,
    check_layout,
    fmt_attr,
    nchw_data,
    padding4,
    pair,
    window_output,
)
from compiler.op.registry import OpPattern, OpTypeError
from compiler.op.typerel import fmt_type, require_dtype, require_same_dtype, tensor_arg
from vm.kernels.runtime.panels import PANEL

TRANSFORM = "nn.contrib_conv2d_winograd_weight_transform"
CONV = "nn.contrib_conv2d_winograd_without_weight_transform"

_G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])
_BT = np.array(
    [[1.0, 0.0, -1.0, 0.0], [0.0, 1.0, 1.0, 0.0], [0.0, -1.0, 1.0, 0.0], [0.0, 1.0, 0.0, -1.0]]
)
_AT = np.array([[1.0, 1.0, 1.0, 0.0], [0.0, 1.0, -1.0, -1.0]])
# F(4x4, 3x3): interpolation points 0, 1, -1, 2, -2 and infinity.
_G4 = np.array(
    [[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
     [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]]
)  # fmt: skip
_BT4 = np.array(
    [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
     [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], dtype=float
)  # fmt: skip
_AT4 = np.array(
    [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]],
    dtype=float,
)
#: tile size -> (G, B^T, A^T)
_MATRICES = {2: (_G, _BT, _AT), 4: (_G4, _BT4, _AT4)}


def _tile_size(op: str, attrs: Attrs) -> int:
    tile = attrs["tile_size"]
    if tile not in _MATRICES:
        raise OpTypeError(f"{op}: attribute tile_size={tile} is not supported; only 2 and 4 are")
    return tile  # type: ignore[return-value]


# --- the weight transform ----------------------------------------------------------------------


def _transform_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """(O, I, 3, 3) -> (tile_size + 2, tile_size + 2, O, I)."""
    op = TRANSFORM
    tile = _tile_size(op, attrs)
    weight = tensor_arg(op, arg_types[0], "weight")
    require_dtype(op, weight, "weight", "float")
    if weight.ndim != 4 or any(not isinstance(d, Any) and d != 3 for d in weight.shape[2:]):
        raise OpTypeError(
            f"{op}: argument weight must be a 4-D OIHW tensor with a 3x3 kernel, "
            f"found {fmt_type(weight)}"
        )
    alpha = tile + 2
    return TensorType([alpha, alpha, weight.shape[0], weight.shape[1]], weight.dtype)


def _transform(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    (weight,) = args
    _transform_rel([TensorType(weight.shape, weight.dtype.name)], attrs)
    g = _MATRICES[attrs["tile_size"]][0]  # type: ignore[index]
    alpha = g.shape[0]
    out_channels, in_channels = weight.shape[:2]
    # U[a, b] = sum over r, s of G[a, r] G[b, s] w[r, s]: one product by G's Kronecker
    # square, 6-8 times faster than einsum's loops over five indices (ResNet-50's
    # transforms took 0.2 s of its compile), on the same float64 values.
    kron = np.einsum("ar,bs->abrs", g, g).reshape(alpha * alpha, 9)
    u = kron @ weight.reshape(out_channels * in_channels, 9).astype(np.float64).T
    return result(u.reshape(alpha, alpha, out_channels, in_channels), weight.dtype)


define(
    TRANSFORM,
    ("weight",),
    _transform_rel,
    _transform,
    OpPattern.OPAQUE,
    doc="Winograd F(2x2, 3x3) transform of OIHW 3x3 weights to (4, 4, O, I)",
)


# --- the convolution ---------------------------------------------------------------------------


def _conv_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """(N, C, H, W) x (4, 4, O, C) -> (N, O, H + pads - 2, W + pads - 2)."""
    op = CONV
    _tile_size(op, attrs)
    data = nchw_data(op, arg_types[0])
    weight = tensor_arg(op, arg_types[1], "weight")
    dtype = require_same_dtype(op, [("data", data), ("weight", weight)])
    require_dtype(op, data, "data", "float")
    check_layout(op, attrs, "data_layout", (NCHW,))
    check_layout(op, attrs, "kernel_layout", ("OIHW",))
    check_layout(op, attrs, "out_layout", OUT_LAYOUTS)
    for name in ("strides", "dilation"):
        if pair(op, attrs, name) != (1, 1):
            raise OpTypeError(f"{op}: attribute {name}={fmt_attr(attrs[name])} must be 1")
    if attrs["groups"] != 1:
        raise OpTypeError(f"{op}: attribute groups={attrs['groups']} must be 1")
    if attrs["kernel_size"] is None or pair(op, attrs, "kernel_size") != (3, 3):
        raise OpTypeError(
            f"{op}: attribute kernel_size must be (3, 3), found {fmt_attr(attrs['kernel_size'])}"
        )
    if attrs["out_dtype"] not in ("", dtype):
        raise OpTypeError(f"{op}: attribute out_dtype={attrs['out_dtype']} must be {dtype}")
    alpha = attrs["tile_size"] + 2  # type: ignore[operator]
    if weight.ndim == 3:
        out_channels = _panels_channels(op, weight, alpha, attrs["channels"])
        weight_channels = weight.shape[1]
    elif weight.ndim != 4 or any(not isinstance(d, Any) and d != alpha for d in weight.shape[:2]):
        raise OpTypeError(
            f"{op}: argument weight must be a transformed ({alpha}, {alpha}, out_channels, "
            f"in_channels) tensor, or its planes packed as ({alpha * alpha} * "
            f"ceil(channels / {PANEL}), in_channels, {PANEL}), found {fmt_type(weight)}"
        )
    else:
        out_channels, weight_channels = weight.shape[2], weight.shape[3]
    in_channels = data.shape[1]
    known = not isinstance(in_channels, Any) and not isinstance(weight_channels, Any)
    if known and in_channels != weight_channels:
        raise OpTypeError(
            f"{op}: data {fmt_type(data)} has {in_channels} channels, but weight "
            f"{fmt_type(weight)} takes {weight_channels}"
        )
    channels = attrs["channels"]
    if channels is not None and not isinstance(out_channels, Any) and channels != out_channels:
        raise OpTypeError(
            f"{op}: attribute channels={channels} does not match weight {fmt_type(weight)}"
        )
    top, left, bottom, right = padding4(op, attrs)
    out_h = window_output(op, data, 0, 3, 1, 1, top, bottom, "kernel")
    out_w = window_output(op, data, 1, 3, 1, 1, left, right, "kernel")
    return TensorType([data.shape[0], out_channels, out_h, out_w], dtype)


def _panels_channels(op: str, weight: TensorType, alpha: int, channels: object) -> object:
    """The output channels of a weight whose planes are packed in panels (see the module's
    docstring): the ``channels`` attribute, checked against the weight's shape."""
    expected = None if channels is None else alpha * alpha * -(-channels // PANEL)
    first, lanes = weight.shape[0], weight.shape[2]
    if (
        channels is None
        or (not isinstance(lanes, Any) and lanes != PANEL)
        or (not isinstance(first, Any) and first != expected)
    ):
        wanted = "an attribute channels" if channels is None else f"({expected}, in_channels, 32)"
        raise OpTypeError(f"{op}: a weight packed in panels, {fmt_type(weight)}, needs {wanted}")
    return channels


def _conv(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    data, weight = args
    out_type = _conv_rel([TensorType(a.shape, a.dtype.name) for a in args], attrs)
    _, out_channels, out_h, out_w = out_type.shape
    top, left, bottom, right = padding4(CONV, attrs)
    tile: int = attrs["tile_size"]  # type: ignore[assignment]
    _, bt, at = _MATRICES[tile]
    alpha = tile + 2
    if weight.ndim == 3:
        rows = weight.transpose(0, 2, 1).reshape(alpha, alpha, -1, weight.shape[1])
        weight = rows[:, :, :out_channels]
    tiles_h, tiles_w = -(-out_h // tile), -(-out_w // tile)
    # Pad so that every tile (stepping by ``tile``) lies inside; extra rows are cropped later.
    height, width = data.shape[2] + top + bottom, data.shape[3] + left + right
    extra_h, extra_w = tile * tiles_h + 2 - height, tile * tiles_w + 2 - width
    x = np.pad(
        data.astype(np.float64),
        ((0, 0), (0, 0), (top, bottom + max(extra_h, 0)), (left, right + max(extra_w, 0))),
    )
    windows = sliding_window_view(x, (alpha, alpha), axis=(2, 3))
    tiles = windows[:, :, : tile * tiles_h : tile, : tile * tiles_w : tile]
    v = np.einsum("ar,nchwrs,bs->abnchw", bt, tiles, bt, optimize=True)
    m = np.einsum("aboc,abnchw->abnohw", weight.astype(np.float64), v, optimize=True)
    y = np.einsum("ia,abnohw,jb->nohiwj", at, m, at, optimize=True)
    n, o = y.shape[0], y.shape[1]
    out = y.reshape(n, o, tile * tiles_h, tile * tiles_w)[:, :, :out_h, :out_w]
    return result(out, out_type.dtype)


define(
    CONV,
    ("data", "weight"),
    _conv_rel,
    _conv,
    OpPattern.OUT_ELEMWISE_FUSABLE,
    doc="3x3 stride-1 convolution of NCHW data by Winograd-transformed weights, plain or packed",
)
