"""Dense layers by a prepacked weight (TVM's ``nn.contrib_dense_pack``) and the
``layout_transform`` that packs the weight.

Compiler layer (``compiler.op``).

A weight in the ``NC{n}n`` layout is the ``(units, in_features)`` weight of ``nn.dense``
cut into panels of ``n`` output features, each stored feature-major: shape
``(ceil(units / n), in_features, n)``, element ``[p, k, j]`` being weight row
``p * n + j``, column ``k``; rows past ``units`` are zero. The runtime's product kernel
reads such panels in order (see :mod:`vm.kernels.packed`), so when the weight is a
constant ``AlterOpLayout`` writes ``nn.dense(x, w)`` as
``nn.contrib_dense_pack(x, layout_transform(w, "NC", "NC32n"), units=...)`` and
``FoldConstant`` packs it once, at compile time.

- ``layout_transform(data; src_layout, dst_layout)``: only ``"NC"`` to ``"NC{n}n"`` is
  implemented (TVM's operator handles any pair of layouts of the same axes).
- ``nn.contrib_dense_pack(data, weight; units, out_dtype, weight_layout)``: ``(..., K)``
  data by an ``NC{n}n`` weight ``(P, K, n)`` is ``(..., units)``, ``units`` defaulting to
  ``P * n``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler.ir.attrs import Attrs
from compiler.ir.types import Any, Dim, TensorType, Type
from compiler.op.defs_common import define, result
from compiler.op.registry import AttrSpec, OpPattern, OpTypeError
from compiler.op.typerel import fmt_type, merge_dims, require_dtype, require_same_dtype, tensor_arg
from vm.kernels import panels

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
    panels = -(-units // width)
    padded = np.zeros((panels * width, features), weight.dtype)
    padded[:units] = weight
    return np.ascontiguousarray(padded.reshape(panels, width, features).transpose(0, 2, 1))


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
    attrs=(AttrSpec("src_layout", "str", "NC"), AttrSpec("dst_layout", "str", "NC32n")),
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
    if data.ndim < 1:
        raise OpTypeError(f"{op}: argument data must have rank >= 1, found {fmt_type(data)}")
    if weight.ndim != 3 or (not isinstance(weight.shape[2], Any) and weight.shape[2] != width):
        raise OpTypeError(
            f"{op}: argument weight must be a 3-D {attrs['weight_layout']} tensor "
            f"(panels, in_features, {width}), found {fmt_type(weight)}"
        )
    what = (
        f"the input features of data {fmt_type(data)} (last dimension) and weight "
        f"{fmt_type(weight)} (second dimension) differ"
    )
    merge_dims(op, what, data.shape[-1], weight.shape[1])
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
    units = out.shape[-1]
    panels, features, width = weight.shape
    rows = weight.transpose(0, 2, 1).reshape(panels * width, features)[:units]
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
    attrs=(
        AttrSpec("units", "int", None, optional=True),
        AttrSpec("out_dtype", "dtype_or_empty", ""),
        AttrSpec("weight_layout", "str", "NC32n"),
    ),
    doc="data @ weight.T with the weight in NC<n>n panels",
)
