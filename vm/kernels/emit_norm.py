"""Kernel rules for nn.batch_norm, nn.layer_norm and nn.group_norm (inference).

Runtime layer, kernel generator (``vm.kernels``); standard library only.

Each step is computed in the data's dtype, in the order the compiler's numpy reference
uses (``compiler/op/defs_norm.py``), with float16 rounded after every operation as numpy
does; only the means sum in float64 (the reference's numpy means use pairwise sums, so
both are within a few ulps of the exact mean). ``nn.batch_norm`` normalizes with the
given moving statistics and also returns copies of them; ``nn.layer_norm`` normalizes
over one axis; ``nn.group_norm`` over each group of channels and every axis after them.
Variances are biased. ``scale=False`` ignores gamma, ``center=False`` ignores beta.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from vm.kernels import dtypes
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
from vm.kernels.source import EmitCtx, ShapeCtx, Source, const, product, shape_tuple, wrap

#: The rules this module defines (gathered by :mod:`vm.kernels.table`).
RULES = RuleSet()

_AFFINE_ATTRS = (
    Attr("epsilon", "float", 1e-5),
    Attr("center", "bool", True),
    Attr("scale", "bool", True),
)


def _infer(names: Sequence[str], outputs: int):
    def infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
        dtype = require_same_dtype(["data", *names], args)
        require_kind("data", args[0], "float")
        require_rank("data", args[0], 1)
        for name, spec in zip(names, args[1:]):
            require_rank(name, spec, 1, 1)
        norm_axis("axis", attrs["axis"], args[0].ndim)
        epsilon = attrs["epsilon"]
        if math.isnan(epsilon) or epsilon < 0:
            raise RuleError(f"attribute epsilon={epsilon} must not be negative")
        if "num_groups" in attrs and attrs["num_groups"] < 1:
            raise RuleError(f"attribute num_groups={attrs['num_groups']} must be >= 1")
        vector = Spec(dtype, 1)
        return (args[0], *[vector] * (outputs - 1))

    return infer


def _axis(ctx: ShapeCtx | EmitCtx) -> int:
    return norm_axis("axis", ctx.attrs["axis"], len(ctx.arg_dims[0]))


def _shape(names: Sequence[str], outputs: int):
    def shape(ctx: ShapeCtx) -> list[list[str]]:
        dims = ctx.arg_dims[0]
        axis = _axis(ctx)
        for name, vec in zip(names, ctx.arg_dims[1:]):
            ctx.expect(vec[0], dims[axis], f"length of {name} (axis {axis} of data)")
        if "num_groups" in ctx.attrs:
            groups = ctx.attrs["num_groups"]
            ctx.fail_if(
                f"{dims[axis]} % {groups} != 0",
                f"the channels on axis {axis} are not divisible by num_groups={groups}",
            )
        return [list(dims), *[[dims[axis]]] * (outputs - 1)]

    return shape


def _rounded(expr: str, dtype: str) -> str:
    """``expr`` brought back to ``dtype`` (float16: rounded to the nearest float16)."""
    return f"h.f16_round({expr})" if dtype == "float16" else wrap(expr, dtype)


def _split(ctx: EmitCtx, array: str, dims: list[str], axis: int) -> tuple[str, str, str, str]:
    """``array`` viewed as (outer, axis, inner); returns the view and the three sizes."""
    s = ctx.src
    outer, n, inner, view = s.fresh("n"), s.fresh("n"), s.fresh("n"), s.fresh("v")
    s.line(f"{outer} = {product(dims[:axis])}")
    s.line(f"{n} = {dims[axis]}")
    s.line(f"{inner} = {product(dims[axis + 1 :])}")
    s.line(f"{view} = {array}.reshape({shape_tuple([outer, n, inner])})")
    return view, outer, n, inner


def _affine(
    s: Source, value: str, attrs: dict, gamma: str, beta: str, channel: str, dtype: str
) -> None:
    """Apply ``* gamma[channel]`` and ``+ beta[channel]`` to variable ``value`` as enabled."""
    if attrs["scale"]:
        s.line(f"{value} = {_rounded(f'{value} * {gamma}[{channel}]', dtype)}")
    if attrs["center"]:
        s.line(f"{value} = {_rounded(f'{value} + {beta}[{channel}]', dtype)}")


# --- nn.batch_norm -----------------------------------------------------------------------------

_BN_VECTORS = ("gamma", "beta", "moving_mean", "moving_var")


def _batch_norm_emit(ctx: EmitCtx) -> None:
    s = ctx.src
    x, gamma, beta, mean, var = ctx.args
    dtype = ctx.arg_specs[0].dtype
    axis = _axis(ctx)
    x3, outer, n, inner = _split(ctx, x, ctx.arg_dims[0], axis)
    o3 = s.fresh("v")
    s.line(f"{o3} = {ctx.outs[0]}.reshape({shape_tuple([outer, n, inner])})")
    c, a, k, inv, v = (s.fresh(p) for p in ("c", "a", "k", "inv", "v"))
    eps = const(ctx.attrs["epsilon"], dtype)
    one = const(1, dtype)
    with s.block(f"for {c} in range({n}):"):
        shifted = _rounded(f"{var}[{c}] + {eps}", dtype)
        root = _rounded(f"np.sqrt({shifted})", dtype)
        s.line(f"{inv} = {_rounded(f'{one} / {root}', dtype)}")
        with s.block(f"for {a} in range({outer}):"), s.block(f"for {k} in range({inner}):"):
            s.line(f"{v} = {_rounded(f'{x3}[{a}, {c}, {k}] - {mean}[{c}]', dtype)}")
            s.line(f"{v} = {_rounded(f'{v} * {inv}', dtype)}")
            _affine(s, v, ctx.attrs, gamma, beta, c, dtype)
            s.line(f"{o3}[{a}, {c}, {k}] = {v}")
        s.line(f"{ctx.outs[1]}[{c}] = {mean}[{c}]")
        s.line(f"{ctx.outs[2]}[{c}] = {var}[{c}]")


RULES.register(
    OpRule(
        "nn.batch_norm",
        5,
        (Attr("axis", "int", 1), *_AFFINE_ATTRS),
        _infer(_BN_VECTORS, 3),
        _shape(_BN_VECTORS, 3),
        emit=_batch_norm_emit,
        numeric=True,
    )
)


# --- nn.layer_norm and nn.group_norm ----------------------------------------------------------


def _standardize(
    ctx: EmitCtx, x3: str, o3: str, outer: str, groups: str, size: str, channel: str
) -> None:
    """Normalize each row ``x3[a, g, :]`` (``size`` elements) into ``o3``, then apply the
    affine step; ``channel`` is the expression (over ``g`` and the element index ``j``)
    giving the gamma/beta index."""
    s = ctx.src
    dtype = ctx.arg_specs[0].dtype
    _, gamma, beta = ctx.args
    eps = const(ctx.attrs["epsilon"], dtype)
    if dtype == "float32" and channel == "{j}":
        # Rows whose gamma and beta run along them (layer norm, along any axis): the same
        # steps as below, by vm.kernels.runtime.rows, which shares the rows between the
        # threads.
        rows = f"({outer} * {groups}, {size})"
        flags = f"{bool(ctx.attrs['scale'])}, {bool(ctx.attrs['center'])}"
        s.line(f"rw.layer_norm_f32({x3}.reshape({rows}), {gamma}, {beta}, {eps}, {flags}, "
               f"{o3}.reshape({rows}))")  # fmt: skip
        return
    a, g, j = s.fresh("a"), s.fresh("g"), s.fresh("j")
    total, mean, var, denom, v = (s.fresh(p) for p in ("total", "mean", "var", "den", "v"))
    channel = channel.format(g=g, j=j)
    with s.block(f"for {a} in range({outer}):"), s.block(f"for {g} in range({groups}):"):
        if dtype == "float16":
            # Every step rounds to float16, which the vector sums do not do.
            s.line(f"{total} = 0.0")
            with s.block(f"for {j} in range({size}):"):
                s.line(f"{total} += np.float64({x3}[{a}, {g}, {j}])")
            s.line(f"{mean} = {_rounded(f'{total} / {size}', dtype)}")
            s.line(f"{total} = 0.0")
            with s.block(f"for {j} in range({size}):"):
                s.line(f"{v} = {_rounded(f'{x3}[{a}, {g}, {j}] - {mean}', dtype)}")
                s.line(f"{total} += np.float64({_rounded(f'{v} * {v}', dtype)})")
        else:
            # x3 is C-contiguous, so each row is one run of memory.
            s.line(f"{mean} = {_rounded(f'vx.sum_f64({x3}[{a}, {g}]) / {size}', dtype)}")
            s.line(f"{total} = vx.squared_deviations_f64({x3}[{a}, {g}], {mean})")
        s.line(f"{var} = {_rounded(f'{total} / {size}', dtype)}")
        shifted = _rounded(f"{var} + {eps}", dtype)
        s.line(f"{denom} = {_rounded(f'np.sqrt({shifted})', dtype)}")
        with s.block(f"for {j} in range({size}):"):
            s.line(f"{v} = {_rounded(f'{x3}[{a}, {g}, {j}] - {mean}', dtype)}")
            s.line(f"{v} = {_rounded(f'{v} / {denom}', dtype)}")
            _affine(s, v, ctx.attrs, gamma, beta, channel, dtype)
            s.line(f"{o3}[{a}, {g}, {j}] = {v}")


def _layer_norm_emit(ctx: EmitCtx) -> None:
    s = ctx.src
    dims = ctx.arg_dims[0]
    axis = _axis(ctx)
    if axis != len(dims) - 1:
        # Move the normalized axis last (a copy), normalize rows, and move it back.
        _layer_norm_strided(ctx, axis)
        return
    outer, n, x2, o2 = s.fresh("n"), s.fresh("n"), s.fresh("v"), s.fresh("v")
    s.line(f"{outer} = {product(dims[:-1])}")
    s.line(f"{n} = {dims[-1]}")
    s.line(f"{x2} = {ctx.args[0]}.reshape(({outer}, 1, {n}))")
    s.line(f"{o2} = {ctx.outs[0]}.reshape(({outer}, 1, {n}))")
    _standardize(ctx, x2, o2, outer, "1", n, "{j}")


def _layer_norm_strided(ctx: EmitCtx, axis: int) -> None:
    s = ctx.src
    x3, outer, n, inner = _split(ctx, ctx.args[0], ctx.arg_dims[0], axis)
    dtype = dtypes.np_type(ctx.arg_specs[0].dtype)
    rows, out_rows = s.fresh("rows"), s.fresh("rows")
    s.line(f"{rows} = np.empty(({outer}, {inner}, {n}), {dtype})")
    s.line(f"{out_rows} = np.empty(({outer}, {inner}, {n}), {dtype})")
    with s.loops([outer, n, inner]) as (a, j, k):
        s.line(f"{rows}[{a}, {k}, {j}] = {x3}[{a}, {j}, {k}]")
    _standardize(ctx, rows, out_rows, outer, inner, n, "{j}")
    o3 = s.fresh("v")
    s.line(f"{o3} = {ctx.outs[0]}.reshape({shape_tuple([outer, n, inner])})")
    with s.loops([outer, n, inner]) as (a, j, k):
        s.line(f"{o3}[{a}, {j}, {k}] = {out_rows}[{a}, {k}, {j}]")


RULES.register(
    OpRule(
        "nn.layer_norm",
        3,
        (Attr("axis", "int", -1), *_AFFINE_ATTRS),
        _infer(("gamma", "beta"), 1),
        _shape(("gamma", "beta"), 1),
        emit=_layer_norm_emit,
        numeric=True,
    )
)


def _group_norm_emit(ctx: EmitCtx) -> None:
    s = ctx.src
    dims = ctx.arg_dims[0]
    axis = _axis(ctx)
    groups = ctx.attrs["num_groups"]
    outer, per, inner, size = s.fresh("n"), s.fresh("n"), s.fresh("n"), s.fresh("n")
    s.line(f"{outer} = {product(dims[:axis])}")
    s.line(f"{per} = {dims[axis]} // {groups}")
    s.line(f"{inner} = {product(dims[axis + 1 :])}")
    s.line(f"{size} = {per} * {inner}")
    x3, o3 = s.fresh("v"), s.fresh("v")
    s.line(f"{x3} = {ctx.args[0]}.reshape(({outer}, {groups}, {size}))")
    s.line(f"{o3} = {ctx.outs[0]}.reshape(({outer}, {groups}, {size}))")
    # Element j of group g belongs to channel g * per + j // inner.
    _standardize(ctx, x3, o3, outer, str(groups), size, f"{{g}} * {per} + {{j}} // {inner}")


RULES.register(
    OpRule(
        "nn.group_norm",
        3,
        (
            Attr("num_groups", "int", required=True),
            Attr("axis", "int", 1),
            *_AFFINE_ATTRS,
        ),
        _infer(("gamma", "beta"), 1),
        _shape(("gamma", "beta"), 1),
        emit=_group_norm_emit,
        numeric=True,
    )
)


# --- run-time shape rules (run by vm.shape_funcs) ----------------------------------------


def _run_normalized(
    shapes: list[sr.Shape], attrs: Mapping[str, Any], names: tuple[str, ...]
) -> tuple[sr.Shape, int]:
    """The data shape and its normalized axis, after checking that each of the vectors
    ``names`` is as long as that axis (every normalization's shared rule)."""
    data = shapes[0]
    sr.rank(data, 1, None, "data")
    axis = sr.axis_of(attrs["axis"], len(data))
    sr.channel_vectors(data, shapes[1:], names, axis)
    return data, axis


@RULES.shape("nn.layer_norm")
def _run_layer_norm(
    shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple
) -> list[sr.Shape]:
    return [_run_normalized(shapes, attrs, ("gamma", "beta"))[0]]


@RULES.shape("nn.group_norm")
def _run_group_norm(
    shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple
) -> list[sr.Shape]:
    data, axis = _run_normalized(shapes, attrs, ("gamma", "beta"))
    groups = attrs["num_groups"]
    if groups < 1 or data[axis] % groups:
        raise RuleError(
            f"the {data[axis]} channels on axis {axis} of data {sr.fmt_shape(data)} are not "
            f"divisible by num_groups={groups}"
        )
    return [data]


@RULES.shape("nn.batch_norm")
def _run_batch_norm(
    shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple
) -> list[sr.Shape]:
    data, axis = _run_normalized(shapes, attrs, ("gamma", "beta", "moving_mean", "moving_var"))
    return [data, (data[axis],), (data[axis],)]
