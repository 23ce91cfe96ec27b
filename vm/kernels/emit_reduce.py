"""Kernel rules for reductions: sum, mean, prod, max, min, all, any, argmax, argmin.

Runtime layer, kernel generator (``vm.kernels``); standard library only.

Axes follow TVM (``axis=None`` is every axis, ``exclude`` reduces the axes *not* listed).
Floating-point sums accumulate in ``float64`` and integer ones in 64 bits (wrapping like
the dtype would); ``max``/``min`` propagate NaN and return the operation's identity over
no elements; ``argmax``/``argmin`` give the row-major position within the reduced axes
and, like an integer ``mean``, refuse to reduce over no elements. Semantics mirror
``compiler/op/defs_reduce.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from vm.kernels import dtypes
from vm.kernels import shape_rules as sr
from vm.kernels.rules import Attr, OpRule, RuleSet, Spec, norm_axes, require_kind
from vm.kernels.source import (
    C_ARRAY,
    EmitCtx,
    ShapeCtx,
    cast,
    const,
    index,
    product,
    shape_tuple,
)

#: The rules this module defines (gathered by :mod:`vm.kernels.table`).
RULES = RuleSet()

REDUCE_ATTRS = (
    Attr("axis", "ints", None, optional=True),
    Attr("keepdims", "bool", False),
    Attr("exclude", "bool", False),
)
ARG_REDUCE_ATTRS = (*REDUCE_ATTRS, Attr("select_last_index", "bool", False))
#: Float dtypes whose sums over one innermost axis run in four running sums (float16 is
#: decoded element by element and keeps the plain loop).
_SUMMED_FLOATS = ("float32", "float64")


def reduce_axes(attrs: dict, ndim: int) -> list[int]:
    """The axes removed, sorted, by TVM's rules for ``axis`` and ``exclude``."""
    axis = attrs["axis"]
    if axis is None:
        return list(range(ndim))
    listed = norm_axes("axis", axis, ndim)
    if attrs["exclude"]:
        return [a for a in range(ndim) if a not in listed]
    return sorted(listed)


def _infer(kind: str | None, out_dtype: str | None) -> Callable:
    def infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
        data = args[0]
        if kind is not None:
            require_kind("data", data, kind)
        axes = reduce_axes(attrs, data.ndim)
        ndim = data.ndim if attrs["keepdims"] else data.ndim - len(axes)
        return (Spec(out_dtype or data.dtype, ndim),)

    return infer


def _shape(ctx: ShapeCtx) -> list[list[str]]:
    dims = ctx.arg_dims[0]
    axes = reduce_axes(ctx.attrs, len(dims))
    if ctx.attrs["keepdims"]:
        return [["1" if a in axes else d for a, d in enumerate(dims)]]
    return [[d for a, d in enumerate(dims) if a not in axes]]


def _acc_dtype(op: str, dtype: str) -> str:
    if op in ("sum", "prod", "mean"):
        if dtype in dtypes.FLOATS:
            return "float64"
        return "uint64" if dtype in dtypes.UNSIGNED else "int64"
    return dtypes.compute(dtype)


def _identity(op: str, dtype: str, acc: str) -> str:
    if op in ("sum", "mean"):
        return const(0, acc)
    if op == "prod":
        return const(1, acc)
    if op == "all":
        return "True"
    if op == "any":
        return "False"
    lowest = op == "max"
    if dtype in dtypes.FLOATS:
        return "-np.inf" if lowest else "np.inf"
    if dtype == "bool":
        return "False" if lowest else "True"
    low, high = dtypes.int_range(dtype)
    return const(low if lowest else high, dtype)


def _combine(op: str, dtype: str, acc_var: str, x: str, acc: str) -> list[str]:
    """Statements folding element ``x`` into accumulator ``acc_var``."""
    if op in ("sum", "mean"):
        return [f"{acc_var} += {cast(x, dtypes.compute(dtype), acc)}"]
    if op == "prod":
        return [f"{acc_var} *= {cast(x, dtypes.compute(dtype), acc)}"]
    if op == "all":
        return [f"{acc_var} = {acc_var} and {x}"]
    if op == "any":
        return [f"{acc_var} = {acc_var} or {x}"]
    symbol = ">" if op == "max" else "<"
    if dtype in dtypes.FLOATS:
        return [f"if {x} {symbol} {acc_var} or {x} != {x}:", f"    {acc_var} = {x}"]
    return [f"if {x} {symbol} {acc_var}:", f"    {acc_var} = {x}"]


def _finish(op: str, dtype: str, out_dtype: str, acc_var: str, acc: str, count: str) -> str:
    """The output value from the accumulator."""
    if op == "mean":
        if dtype in dtypes.FLOATS:
            return cast(f"({acc_var} / {count})", "float64", out_dtype)
        if dtype in dtypes.UNSIGNED:
            return cast(f"({acc_var} // np.uint64({count}))", acc, out_dtype)
        quotient = f"(abs({acc_var}) // {count})"
        return cast(f"(-{quotient} if {acc_var} < 0 else {quotient})", acc, out_dtype)
    return cast(acc_var, acc, out_dtype)


def _emit_reduce(op: str) -> Callable[[EmitCtx], None]:
    def emit(ctx: EmitCtx) -> None:
        src = ctx.src
        (x,), (dims,), (out,) = ctx.args, ctx.arg_dims, ctx.outs
        dtype = ctx.arg_specs[0].dtype
        out_dtype = ctx.out_specs[0].dtype
        axes = reduce_axes(ctx.attrs, len(dims))
        kept = [a for a in range(len(dims)) if a not in axes]
        acc = _acc_dtype(op, dtype)
        count = src.fresh("n")
        src.line(f"{count} = {product([dims[a] for a in axes])}")
        if op == "mean" and dtype not in dtypes.FLOATS:
            ctx.fail_if(f"{count} == 0", "cannot average an integer tensor over zero elements")

        def out_index(kept_idx: list[str]) -> str:
            if ctx.attrs["keepdims"]:
                names = iter(kept_idx)
                return index(["0" if a in axes else next(names) for a in range(len(dims))])
            return index(kept_idx)

        trailing = kept == list(range(len(kept)))
        summed = trailing and op in ("sum", "mean") and dtype in _SUMMED_FLOATS
        contiguous = C_ARRAY.fullmatch(x) and C_ARRAY.fullmatch(out)
        if summed and axes and dtype == out_dtype == "float32" and contiguous:
            # Contiguous float32 rows: the runtime's sums, shared between the threads (a
            # squeeze-excite mean reads an image both threads just wrote).
            total = product([dims[a] for a in kept])
            mean = "True" if op == "mean" else "False"
            src.line(
                f"pool.row_sums_f32({x}.reshape(({total}, {count})), "
                f"{out}.reshape(({total},)), {mean})"
            )
            return
        # One innermost axis of floats (the mean of a norm written out as arithmetic), or
        # several of a contiguous array read as one (a global pool's plane): a row sum
        # whose lanes vectorize, where one sum in order cannot.
        source, rows = x, len(axes) == 1
        if summed and len(axes) > 1 and C_ARRAY.fullmatch(x):
            source, rows = src.fresh("f"), True
            shape = [f"{x}.shape[{a}]" for a in kept] + [f"{count}"]
            src.line(f"{source} = {x}.reshape(({', '.join(shape)},))")
        if summed and rows:
            with src.loops([dims[a] for a in kept]) as ki:
                a_var = src.fresh("acc")
                row = f"{source}[{index(ki)}]" if ki else source
                src.line(f"{a_var} = vx.sum_f64({row})")
                value = _finish(op, dtype, out_dtype, a_var, acc, count)
                src.line(f"{out}[{out_index(ki)}] = {value}")
            return
        if trailing:
            # The reduced axes are innermost: one scalar accumulator per output element.
            with src.loops([dims[a] for a in kept]) as ki:
                a_var = src.fresh("acc")
                src.line(f"{a_var} = {_identity(op, dtype, acc)}")
                with src.loops([dims[a] for a in axes]) as ri:
                    for stmt in _combine(op, dtype, a_var, f"{x}[{index(ki + ri)}]", acc):
                        src.line(stmt)
                value = _finish(op, dtype, out_dtype, a_var, acc, count)
                src.line(f"{out}[{out_index(ki)}] = {value}")
            return
        # Reduced axes interleave with kept ones: accumulate in input order into an array.
        kept_dims = [dims[a] for a in kept]
        buf = src.fresh("acc")
        src.line(f"{buf} = np.empty({shape_tuple(kept_dims)}, {dtypes.np_type(acc)})")
        with src.loops(kept_dims) as ki:
            src.line(f"{buf}[{index(ki)}] = {_identity(op, dtype, acc)}")
        with src.loops(dims) as ii:
            slot = f"{buf}[{index([ii[a] for a in kept])}]"
            elem = src.fresh("v")
            src.line(f"{elem} = {slot}")
            for stmt in _combine(op, dtype, elem, f"{x}[{index(ii)}]", acc):
                src.line(stmt)
            src.line(f"{slot} = {elem}")
        with src.loops(kept_dims) as ki:
            value = _finish(op, dtype, out_dtype, f"{buf}[{index(ki)}]", acc, count)
            src.line(f"{out}[{out_index(ki)}] = {value}")

    return emit


_REDUCTIONS = [
    ("sum", "numeric"),
    ("mean", "numeric"),
    ("prod", "numeric"),
    ("max", None),
    ("min", None),
    ("all", "bool"),
    ("any", "bool"),
]

for _name, _kind in _REDUCTIONS:
    RULES.register(
        OpRule(
            _name,
            1,
            REDUCE_ATTRS,
            _infer(_kind, None),
            _shape,
            emit=_emit_reduce(_name),
            numeric=True,
        )
    )


# --- argmax / argmin ---------------------------------------------------------------------------


def _better(op: str, dtype: str, last: bool, x: str, best: str, at: str) -> str:
    """The condition under which element ``x`` replaces the best so far."""
    symbol = ">" if op == "argmax" else "<"
    if last:
        symbol += "="
    if dtype not in dtypes.FLOATS:
        return f"{at} < 0 or {x} {symbol} {best}"
    # numpy picks the first NaN (or, searching from the end, the last one).
    if last:
        return f"{at} < 0 or {x} != {x} or ({best} == {best} and {x} {symbol} {best})"
    return f"{at} < 0 or ({best} == {best} and ({x} {symbol} {best} or {x} != {x}))"


def _emit_arg_reduce(op: str) -> Callable[[EmitCtx], None]:
    def emit(ctx: EmitCtx) -> None:
        src = ctx.src
        (x,), (dims,), (out,) = ctx.args, ctx.arg_dims, ctx.outs
        dtype = ctx.arg_specs[0].dtype
        out_dtype = ctx.out_specs[0].dtype
        last = ctx.attrs["select_last_index"]
        axes = reduce_axes(ctx.attrs, len(dims))
        kept = [a for a in range(len(dims)) if a not in axes]
        count = src.fresh("n")
        src.line(f"{count} = {product([dims[a] for a in axes])}")
        ctx.fail_if(f"{count} == 0", f"cannot take {op} over zero elements")

        def position(idx: list[str]) -> str:
            # Row-major position among the reduced axes.
            expr = "0"
            for a in axes:
                expr = f"({expr} * {dims[a]} + {idx[a]})"
            return expr

        def out_index(kept_idx: list[str]) -> str:
            if ctx.attrs["keepdims"]:
                names = iter(kept_idx)
                return index(["0" if a in axes else next(names) for a in range(len(dims))])
            return index(kept_idx)

        kept_dims = [dims[a] for a in kept]
        vals = src.fresh("best")
        pos = src.fresh("at")
        shape = shape_tuple(kept_dims)
        src.line(f"{vals} = np.empty({shape}, {dtypes.np_type(dtype)})")
        src.line(f"{pos} = np.full({shape}, -1, np.int64)")
        with src.loops(dims) as ii:
            slot = index([ii[a] for a in kept])
            elem = src.fresh("v")
            src.line(f"{elem} = {x}[{index(ii)}]")
            cond = _better(op, dtype, last, elem, f"{vals}[{slot}]", f"{pos}[{slot}]")
            with src.block(f"if {cond}:"):
                src.line(f"{vals}[{slot}] = {elem}")
                src.line(f"{pos}[{slot}] = {position(ii)}")
        with src.loops(kept_dims) as ki:
            src.line(f"{out}[{out_index(ki)}] = {cast(f'{pos}[{index(ki)}]', 'int64', out_dtype)}")

    return emit


for _name in ("argmax", "argmin"):
    RULES.register(
        OpRule(
            _name,
            1,
            ARG_REDUCE_ATTRS,
            _infer(None, "int32"),
            _shape,
            emit=_emit_arg_reduce(_name),
            numeric=True,
        )
    )


# --- run-time shape rules (run by vm.shape_funcs) ----------------------------------------


def _run_reduce_axes(attrs: Mapping[str, Any], ndim: int) -> list[int]:
    axis = attrs.get("axis")
    if axis is None:
        return list(range(ndim))
    listed = sr.axes_of(sr.ints(axis), ndim)
    if attrs["exclude"]:
        return [a for a in range(ndim) if a not in listed]
    return sorted(listed)


@RULES.shape("sum", "mean", "prod", "max", "min", "all", "any", "argmax", "argmin")
def _run_reduce(shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[sr.Shape]:
    dims = shapes[0]
    axes = _run_reduce_axes(attrs, len(dims))
    if attrs["keepdims"]:
        return [tuple(1 if a in axes else d for a, d in enumerate(dims))]
    return [tuple(d for a, d in enumerate(dims) if a not in axes)]
