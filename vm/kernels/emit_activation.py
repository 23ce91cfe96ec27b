"""Kernel rules for nn.leaky_relu, nn.prelu and nn.dropout.

Runtime layer, kernel generator (``vm.kernels``); imports numpy (to round ``alpha`` to the data's
dtype).

``nn.leaky_relu`` and ``nn.prelu`` are elementwise (``x if x > 0 else alpha * x``, the
product in the data's dtype), so they fuse into the loops of their neighbours and into
convolution and dense epilogues; ``nn.prelu`` reads its 1-D ``alpha`` along ``axis``.
``nn.dropout`` has inference semantics: its output is a copy of the input and its mask
is all ones. Semantics mirror ``compiler/op/defs_activation.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

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
    require_same_dtype,
)
from vm.kernels.source import EmitCtx, ExprCtx, ShapeCtx, const, product

#: The rules this module defines (gathered by :mod:`vm.kernels.table`).
RULES = RuleSet()

# --- nn.leaky_relu -----------------------------------------------------------------------------


def _leaky_relu_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    require_kind("data", args[0], "float")
    return (args[0],)


def _first_shape(ctx: ShapeCtx) -> list[list[str]]:
    return [list(ctx.arg_dims[0])]


def _leaky_relu(ctx: ExprCtx) -> str:
    (x,) = ctx.args
    dtype = ctx.arg_specs[0].dtype
    # The reference multiplies by alpha converted to the data's dtype.
    alpha = const(float(np.dtype(dtype).type(ctx.attrs["alpha"])), dtype)
    return f"({x} if {x} > {const(0, dtype)} else {x} * {alpha})"


RULES.register(
    OpRule(
        "nn.leaky_relu",
        1,
        (Attr("alpha", "float", 0.01),),
        _leaky_relu_infer,
        _first_shape,
        expr=_leaky_relu,
    )
)


# --- nn.prelu ----------------------------------------------------------------------------------


def _prelu_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    require_same_dtype(["data", "alpha"], args)
    require_kind("data", args[0], "float")
    require_rank("data", args[0], 1)
    require_rank("alpha", args[1], 1, 1)
    norm_axis("axis", attrs["axis"], args[0].ndim)
    return (args[0],)


def _prelu_axis(attrs: dict, ndim: int) -> int:
    axis = attrs["axis"]
    return axis + ndim if axis < 0 else axis


def _prelu_shape(ctx: ShapeCtx) -> list[list[str]]:
    dims = ctx.arg_dims[0]
    axis = _prelu_axis(ctx.attrs, len(dims))
    ctx.expect(ctx.arg_dims[1][0], dims[axis], f"length of alpha (axis {axis} of data)")
    return [list(dims)]


def _prelu_map(ctx: Any, i: int, positions: tuple[int, ...]) -> tuple[int, ...]:
    if i == 0:
        return positions
    return (positions[_prelu_axis(ctx.attrs, len(positions))],)


def _prelu(ctx: ExprCtx) -> str:
    x, alpha = ctx.args
    return f"({x} if {x} > {const(0, ctx.arg_specs[0].dtype)} else {x} * {alpha})"


RULES.register(
    OpRule(
        "nn.prelu",
        2,
        (Attr("axis", "int", 1),),
        _prelu_infer,
        _prelu_shape,
        expr=_prelu,
        arg_map=_prelu_map,
    )
)


# --- nn.dropout --------------------------------------------------------------------------------


def _dropout_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    require_kind("data", args[0], "float")
    rate = attrs["rate"]
    if not 0.0 <= rate <= 1.0:
        raise RuleError(f"attribute rate={rate} must be between 0 and 1")
    return (args[0], args[0])


def _dropout_shape(ctx: ShapeCtx) -> list[list[str]]:
    dims = list(ctx.arg_dims[0])
    return [dims, list(dims)]


def _dropout_emit(ctx: EmitCtx) -> None:
    s = ctx.src
    dtype = ctx.arg_specs[0].dtype
    one = "np.uint16(0x3C00)" if dtype == "float16" else const(1, dtype)
    n, a, b, c, j = (s.fresh(p) for p in ("n", "f", "f", "f", "j"))
    s.line(f"{n} = {product(ctx.arg_dims[0])}")
    s.line(f"{a} = {ctx.args[0]}.reshape({n})")
    s.line(f"{b} = {ctx.outs[0]}.reshape({n})")
    s.line(f"{c} = {ctx.outs[1]}.reshape({n})")
    with s.block(f"for {j} in range({n}):"):
        s.line(f"{b}[{j}] = {a}[{j}]")
        s.line(f"{c}[{j}] = {one}")


RULES.register(
    OpRule(
        "nn.dropout",
        1,
        (Attr("rate", "float", 0.5),),
        _dropout_infer,
        _dropout_shape,
        emit=_dropout_emit,
    )
)


# --- run-time shape rules (run by vm.shape_funcs) ----------------------------------------

RULES.shape("nn.leaky_relu")(sr.same_as_first)


@RULES.shape("nn.dropout")
def _run_dropout(shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[sr.Shape]:
    return [shapes[0], shapes[0]]


@RULES.shape("nn.prelu")
def _run_prelu(shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[sr.Shape]:
    data, alpha = shapes
    sr.rank(data, 1, None, "data")
    axis = sr.axis_of(attrs["axis"], len(data))
    sr.channel_vectors(data, [alpha], ["alpha"], axis)
    return [data]
