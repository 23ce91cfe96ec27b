"""Products by weights packed ahead of time in ``NC{n}n`` panels: dense layers (TVM's
``nn.contrib_dense_pack``), convolutions (``nn.contrib_conv2d_gemm_without_weight_transform``)
and the ``layout_transform`` that packs the weights.

Compiler layer (``compiler.op``).

A weight in the ``NC{n}n`` layout is a ``(units, in_features)`` matrix cut into panels of
``n`` output features, each stored feature-major: shape ``(ceil(units / n), in_features,
n)``, element ``[p, k, j]`` being row ``p * n + j``, column ``k``; rows past ``units`` are
zero. The runtime's product kernel reads such panels in order (see
:mod:`vm.kernels.runtime.packed`), so when the weight is a constant ``AlterOpLayout`` writes

- ``nn.dense(x, w)`` as ``nn.contrib_dense_pack(x, layout_transform(w, "NC", "NC32n"),
  units=...)``;
- a float32 ``nn.conv2d(x, w)`` of OIHW weights as
  ``nn.contrib_conv2d_gemm_without_weight_transform(x, layout_transform(reshape(w, (O,
  I * KH * KW)), "NC", "NC32n"), channels=O, kernel_size=(KH, KW), ...)``, the im2col
  product by the flattened weight,

and ``FoldConstant`` packs the weight once, at compile time.

- ``layout_transform(data; src_layout, dst_layout)``: only ``"NC"`` to ``"NC{n}n"`` is
  implemented (TVM's operator handles any pair of layouts of the same axes).
- ``nn.contrib_dense_pack(data, weight; units, out_dtype, weight_layout)``: ``(..., K)``
  data by an ``NC{n}n`` weight ``(P, K, n)`` is ``(..., units)``, ``units`` defaulting to
  ``P * n``.
- ``nn.contrib_conv2d_gemm_without_weight_transform(data, weight; nn.conv2d's
  attributes)``: NCHW float32 data by an ``NC32n`` weight; ``channels`` and
  ``kernel_size`` are required (the packed weight holds neither), one group only. (TVM's
  operator of that name takes NHWC data and its own tiled weight layout.)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler.ir.attrs import Attrs
from compiler.ir.types import Any, Dim, TensorType, Type
from compiler.op.defs_common import define, result
from compiler.op.defs_conv import conv2d_reference, conv2d_relation
from compiler.op.defs_nn import dense_features
from compiler.op.defs_window import pair
from compiler.op.registry import OpPattern, OpTypeError
from compiler.op.typerel import fmt_type, require_dtype, require_same_dtype, tensor_arg
from vm.kernels.runtime import panels
from vm.kernels.runtime.panels import PANEL

TRANSFORM = "layout_transform"
DENSE_PACK = "nn.contrib_dense_pack"


def panel_width(op: str, name: str, layout: object) -> int:
    """The ``n`` of an ``NC{n}n`` layout attribute; an OpTypeError for any other layout."""
    width = panels.panel_width(layout)
    if width is None:
        raise OpTypeError(f"{op}: {panels.unsupported(name, layout)}")
    return width


def pack(weight: np.ndarray, width: int) -> np.ndarray:
    """A 2-D ``(units, in_features)`` array in the ``NC{width}n`` layout (zero-padded)."""
    units, features = weight.shape
    full, rest = divmod(units, width)
    # Written into place panel by panel rather than padded, then transposed: one pass over
    # the weight instead of two (packing is most of what folding does to a CNN's weights).
    out = np.zeros((full + (rest > 0), features, width), weight.dtype)
    out[:full] = weight[: full * width].reshape(full, width, features).transpose(0, 2, 1)
    if rest:
        out[full, :, :rest] = weight[full * width :].T
    return out


def unpack(weight: np.ndarray, units: int) -> np.ndarray:
    """The first ``units`` rows of the 2-D matrix an ``NC{n}n`` ``weight`` packs (the
    inverse of :func:`pack`)."""
    count, features, width = weight.shape
    return weight.transpose(0, 2, 1).reshape(count * width, features)[:units]


# --- layout_transform --------------------------------------------------------------------------


def _transform_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """(N, C) -> (ceil(N / n), C, n) for src_layout "NC", dst_layout "NC{n}n"."""
    op = TRANSFORM
    data = tensor_arg(op, arg_types[0], "data")
    if attrs["src_layout"] != "NC":
        raise OpTypeError(
            f"{op}: attribute src_layout={attrs['src_layout']!r} is not supported; only 'NC' is"
        )
    width = panel_width(op, "dst_layout", attrs["dst_layout"])
    if data.ndim != 2:
        raise OpTypeError(f"{op}: argument data must be a 2-D NC tensor, found {fmt_type(data)}")
    rows, features = data.shape
    panels: Dim = rows if isinstance(rows, Any) else -(-rows // width)
    return TensorType([panels, features, width], data.dtype)


def _transform(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    (data,) = args
    _transform_rel([TensorType(data.shape, data.dtype.name)], attrs)
    return pack(data, panel_width(TRANSFORM, "dst_layout", attrs["dst_layout"]))


define(
    TRANSFORM,
    ("data",),
    _transform_rel,
    _transform,
    OpPattern.OPAQUE,
    doc="an NC tensor cut into zero-padded NC<n>n panels",
)


# --- nn.contrib_dense_pack ---------------------------------------------------------------------


def _dense_pack_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """(..., K) x (P, K, n) -> (..., units), (P - 1) * n < units <= P * n."""
    op = DENSE_PACK
    data = tensor_arg(op, arg_types[0], "data")
    weight = tensor_arg(op, arg_types[1], "weight")
    dtype = require_same_dtype(op, [("data", data), ("weight", weight)])
    require_dtype(op, data, "data", "numeric")
    width = panel_width(op, "weight_layout", attrs["weight_layout"])
    if weight.ndim != 3 or (not isinstance(weight.shape[2], Any) and weight.shape[2] != width):
        raise OpTypeError(
            f"{op}: argument weight must be a 3-D {attrs['weight_layout']} tensor "
            f"(panels, in_features, {width}), found {fmt_type(weight)}"
        )
    dense_features(op, data, weight)
    panels = weight.shape[0]
    units = attrs.get("units")
    if units is None:
        out: Dim = panels if isinstance(panels, Any) else panels * width
    else:
        if not isinstance(panels, Any) and not (panels - 1) * width < units <= panels * width:
            raise OpTypeError(
                f"{op}: attribute units={units} does not fit weight {fmt_type(weight)}: "
                f"{panels} panels of {width} hold {(panels - 1) * width + 1} to "
                f"{panels * width} units"
            )
        out = units
    return TensorType([*data.shape[:-1], out], attrs.get("out_dtype") or dtype)


def _dense_pack(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    data, weight = args
    out = _dense_pack_rel(
        [TensorType(data.shape, data.dtype.name), TensorType(weight.shape, weight.dtype.name)],
        attrs,
    )
    rows = unpack(weight, out.shape[-1])
    dtype = attrs["out_dtype"] or data.dtype
    with np.errstate(all="ignore"):
        value = np.matmul(data.astype(dtype), rows.astype(dtype).T)
    return result(value, dtype)


define(
    DENSE_PACK,
    ("data", "weight"),
    _dense_pack_rel,
    _dense_pack,
    OpPattern.OUT_ELEMWISE_FUSABLE,
    doc="data @ weight.T with the weight in NC<n>n panels",
)


# --- nn.contrib_conv2d_gemm_without_weight_transform -------------------------------------------

CONV = "nn.contrib_conv2d_gemm_without_weight_transform"


def _unpacked_type(arg_types: Sequence[Type], attrs: Attrs) -> tuple[TensorType, TensorType]:
    """The data type, and the OIHW weight type the packed weight stands for."""
    op = CONV
    data = tensor_arg(op, arg_types[0], "data")
    weight = tensor_arg(op, arg_types[1], "weight")
    require_same_dtype(op, [("data", data), ("weight", weight)])
    if data.dtype != "float32":
        raise OpTypeError(
            f"{op}: argument data must be a float32 tensor (the only dtype implemented), "
            f"found {fmt_type(data)}"
        )
    for name in ("channels", "kernel_size"):
        if attrs[name] is None:
            raise OpTypeError(f"{op}: attribute {name} is required (the packed weight lacks it)")
    if attrs["groups"] != 1:
        raise OpTypeError(f"{op}: attribute groups={attrs['groups']} must be 1")
    kh, kw = pair(op, attrs, "kernel_size")
    channels: int = attrs["channels"]  # type: ignore[assignment]
    panels = -(-channels // PANEL)
    if weight.ndim != 3 or any(
        not isinstance(d, Any) and d != want
        for d, want in ((weight.shape[0], panels), (weight.shape[2], PANEL))
    ):
        raise OpTypeError(
            f"{op}: argument weight must be a 3-D NC{PANEL}n tensor ({panels}, in_channels * "
            f"{kh} * {kw}, {PANEL}) for channels={channels}, found {fmt_type(weight)}"
        )
    depth = weight.shape[1]
    if isinstance(depth, Any):
        in_channels: Dim = data.shape[1] if data.ndim == 4 else Any()
    else:
        if depth % (kh * kw):
            raise OpTypeError(
                f"{op}: weight {fmt_type(weight)}'s depth {depth} is not a multiple of the "
                f"kernel's {kh} * {kw} taps"
            )
        in_channels = depth // (kh * kw)
    return data, TensorType([channels, in_channels, kh, kw], weight.dtype)


def _packed_conv_rel(arg_types: Sequence[Type], attrs: Attrs) -> Type:
    """(N, C, H, W) x (ceil(O / 32), C * KH * KW, 32) -> (N, O, OH, OW)."""
    data, oihw = _unpacked_type(arg_types, attrs)
    return conv2d_relation([data, oihw], attrs, CONV)


def _packed_conv(args: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    data, weight = args
    _, oihw = _unpacked_type([TensorType(a.shape, a.dtype.name) for a in args], attrs)
    channels, _, kh, kw = oihw.shape
    oihw_weight = unpack(weight, channels).reshape(channels, -1, kh, kw)
    return conv2d_reference([data, oihw_weight], attrs, CONV)


define(
    CONV,
    ("data", "weight"),
    _packed_conv_rel,
    _packed_conv,
    OpPattern.OUT_ELEMWISE_FUSABLE,
    doc="2-D convolution of NCHW float32 data with OIHW weights packed in NC32n panels",
)
