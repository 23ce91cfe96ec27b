"""Kernel rules for nn.dense, nn.matmul, nn.batch_matmul, nn.softmax and nn.log_softmax.

Runtime layer, kernel generator (``vm.kernels``); standard library only.

Matrix products of ``float32``/``float64`` operands call numpy's OpenBLAS from compiled code
(:mod:`vm.kernels.runtime.products`, shared with the worker threads when big) once the product
has :data:`BLAS_MIN_FLOPS` multiply-adds; smaller ones, and integer products (which accumulate in
64 bits and wrap to the output dtype, as the reference's ``out_dtype`` arithmetic does), run as
compiled loops. Both products hand their finished output to the epilogue hook, so a fused bias
and activation is applied without a temporary array. Semantics mirror
``compiler/op/defs_nn.py``.
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
    norm_axis,
    require_kind,
    require_rank,
    require_same_dtype,
)
from vm.kernels.runtime import panels
from vm.kernels.runtime.panels import PANEL, panel_width, unsupported
from vm.kernels.source import EmitCtx, ShapeCtx, cast, const, product, shape_tuple

#: The rules this module defines (gathered by :mod:`vm.kernels.table`).
RULES = RuleSet()

#: Multiply-adds from which BLAS (called without the GIL) beats a compiled loop, whose
#: call costs less below it (float32 dense products, benchmarks/NOTES.md).
BLAS_MIN_FLOPS = 256

_BLAS_DTYPES = frozenset({"float32", "float64"})


def _acc(out_dtype: str) -> str:
    """The accumulator dtype for a product whose result has ``out_dtype``."""
    if out_dtype in dtypes.FLOATS:
        return "float64"
    return "uint64" if out_dtype in dtypes.UNSIGNED else "int64"


# --- nn.dense and nn.matmul --------------------------------------------------------------------
# nn.dense is nn.matmul with transpose_b: one emitter serves both, reading the transposes
# from the attributes (dense has none, so the defaults below apply).


def _transposes(ctx_attrs: dict, op: str) -> tuple[bool, bool]:
    if op == "nn.dense":
        return False, True
    return bool(ctx_attrs["transpose_a"]), bool(ctx_attrs["transpose_b"])


def _product_infer(op: str) -> Callable:
    first, second = ("data", "weight") if op == "nn.dense" else ("tensor_a", "tensor_b")

    def infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
        dtype = require_same_dtype([first, second], args)
        require_kind(first, args[0], "numeric")
        transpose_a = op == "nn.matmul" and attrs["transpose_a"]
        require_rank(first, args[0], 2 if transpose_a else 1, 2 if transpose_a else None)
        require_rank(second, args[1], 2, 2)
        return (Spec(attrs["out_dtype"] or dtype, args[0].ndim),)

    return infer


def _product_shape(op: str) -> Callable:
    second = "weight" if op == "nn.dense" else "tensor_b"

    def shape(ctx: ShapeCtx) -> list[list[str]]:
        a, b = ctx.arg_dims
        ta, tb = _transposes(ctx.attrs, op)
        lead, ka = ([a[1]], a[0]) if ta else (list(a[:-1]), a[-1])
        n, kb = (b[0], b[1]) if tb else (b[1], b[0])
        which = "second" if tb else "first"
        ctx.expect(kb, ka, f"input features of {second} ({which} dimension)")
        return [[*lead, n]]

    return shape


def _product_emit(op: str) -> Callable:
    def emit(ctx: EmitCtx) -> None:
        src = ctx.src
        a, b = ctx.args
        a_dims, b_dims = ctx.arg_dims
        ta, tb = _transposes(ctx.attrs, op)
        in_dtype = ctx.arg_specs[0].dtype
        out_dtype = ctx.out_specs[0].dtype
        m, k, n = src.fresh("m"), src.fresh("k"), src.fresh("n")
        src.line(f"{m} = {a_dims[1] if ta else product(a_dims[:-1])}")
        src.line(f"{k} = {a_dims[0] if ta else a_dims[-1]}")
        src.line(f"{n} = {b_dims[0] if tb else b_dims[1]}")
        a2, o2 = a, src.fresh("o")
        if not ta:
            a2 = src.fresh("x")
            src.line(f"{a2} = {a}.reshape(({m}, {k}))")
        src.line(f"{o2} = {ctx.outs[0]}.reshape(({m}, {n}))")
        loop = _product_loop(ctx, a2, b, o2, (m, k, n), (ta, tb), in_dtype, out_dtype)
        call = f"products.product_into({a2}, {b}, {o2}, {ta}, {tb})"
        _blas_or_loops(ctx, f"{m} * {n} * {k}", call, loop)
        _whole_epilogue(ctx)

    return emit


def _blas_or_loops(ctx: EmitCtx, flops: str, call: str, loops: Callable[[], None]) -> None:
    """Emit ``call`` (BLAS) when the product has ``flops`` >= :data:`BLAS_MIN_FLOPS`
    multiply-adds and BLAS takes its dtypes, else the compiled ``loops``."""
    in_dtype, out_dtype = ctx.arg_specs[0].dtype, ctx.out_specs[0].dtype
    if in_dtype != out_dtype or out_dtype not in _BLAS_DTYPES:
        loops()
        return
    with ctx.src.block(f"if {flops} >= {BLAS_MIN_FLOPS}:"):
        ctx.src.line(call)
    with ctx.src.block("else:"):
        loops()


def _whole_epilogue(ctx: EmitCtx) -> None:
    """Hand the whole (now final) output to the epilogue, if the kernel fused one."""
    if ctx.epilogue is not None:
        dims = ctx.out_dims[0]
        ctx.epilogue(["0"] * len(dims), list(dims))


def _product_loop(
    ctx: EmitCtx,
    a: str,
    b: str,
    o2: str,
    sizes: tuple[str, str, str],
    transposes: tuple[bool, bool],
    in_dtype: str,
    out_dtype: str,
) -> Callable[[], None]:
    """Statements computing ``o2 = op(a) @ op(b)`` as loops, accumulating in 64 bits."""

    def emit() -> None:
        src = ctx.src
        m, k, n = sizes
        ta, tb = transposes
        acc = _acc(out_dtype)
        i, j, p, s = src.fresh("i"), src.fresh("j"), src.fresh("p"), src.fresh("acc")

        def term(p: str) -> str:
            left = f"{a}[{p}, {i}]" if ta else f"{a}[{i}, {p}]"
            right = f"{b}[{j}, {p}]" if tb else f"{b}[{p}, {j}]"
            x = cast(cast(left, in_dtype, out_dtype), out_dtype, acc)
            y = cast(cast(right, in_dtype, out_dtype), out_dtype, acc)
            return f"{x} * {y}"

        with src.block(f"for {i} in range({m}):"), src.block(f"for {j} in range({n}):"):
            if acc == "float64":
                # Four running sums: one waits on each addition (an MLP's last layer, 512
                # by 10, took 5.7 us in one).
                src.running_sum(s, term, k)
            else:
                src.line(f"{s} = {const(0, acc)}")
                with src.block(f"for {p} in range({k}):"):
                    src.line(f"{s} += {term(p)}")
            src.line(f"{o2}[{i}, {j}] = {cast(s, acc, out_dtype)}")

    return emit


_PRODUCT_ATTRS = (
    Attr("units", "int", None, optional=True),
    Attr("out_dtype", "dtype_or_empty", ""),
)

for _op, _attrs in (
    ("nn.dense", _PRODUCT_ATTRS),
    (
        "nn.matmul",
        (*_PRODUCT_ATTRS, Attr("transpose_a", "bool", False), Attr("transpose_b", "bool", False)),
    ),
):
    RULES.register(
        OpRule(
            _op,
            2,
            _attrs,
            _product_infer(_op),
            _product_shape(_op),
            emit=_product_emit(_op),
            numeric=True,
            epilogue=True,
        )
    )


# --- nn.contrib_dense_pack and layout_transform -------------------------------------------------
# A weight in the NC{n}n layout holds row p * n + j of the (units, in_features) weight at
# [p, :, j]; float32 products by 32-wide panels run packed.py's register tiles.


def _panel_width(name: str, layout: object) -> int:
    width = panel_width(layout)
    if width is None:
        raise RuleError(unsupported(name, layout))
    return width


def _dense_pack_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    dtype = require_same_dtype(["data", "weight"], args)
    require_kind("data", args[0], "numeric")
    require_rank("data", args[0], 1)
    require_rank("weight", args[1], 3, 3)
    _panel_width("weight_layout", attrs["weight_layout"])
    return (Spec(attrs["out_dtype"] or dtype, args[0].ndim),)


def _dense_pack_shape(ctx: ShapeCtx) -> list[list[str]]:
    a, (panels, kb, width) = ctx.arg_dims
    n = _panel_width("weight_layout", ctx.attrs["weight_layout"])
    ctx.expect(width, str(n), "panel width of weight (third dimension)")
    ctx.expect(kb, a[-1], "input features of weight (second dimension)")
    units = ctx.attrs["units"]
    if units is None:
        return [[*a[:-1], f"({panels} * {n})"]]
    ctx.fail_if(
        f"not ({panels} - 1) * {n} < {units} <= {panels} * {n}",
        f"attribute units={units} does not fit the weight's panels of {n}",
    )
    return [[*a[:-1], str(units)]]


def _dense_pack_emit(ctx: EmitCtx) -> None:
    src = ctx.src
    a, w = ctx.args
    a_dims = ctx.arg_dims[0]
    n = _panel_width("weight_layout", ctx.attrs["weight_layout"])
    in_dtype, out_dtype = ctx.arg_specs[0].dtype, ctx.out_specs[0].dtype
    m, k, units = src.fresh("m"), src.fresh("k"), src.fresh("n")
    src.line(f"{m} = {product(a_dims[:-1])}")
    src.line(f"{k} = {a_dims[-1]}")
    src.line(f"{units} = {ctx.out_dims[0][-1]}")
    a2, o2 = src.fresh("x"), src.fresh("o")
    src.line(f"{a2} = {a}.reshape(({m}, {k}))")
    src.line(f"{o2} = {ctx.outs[0]}.reshape(({m}, {units}))")
    if in_dtype == out_dtype == "float32" and n == PANEL:
        # The product's threads apply a fused bias, residual and activation to the strips
        # they computed, while those are in cache (ctx.post); any other chain, or this one
        # when the header is empty (a small layer), follows.
        post = ctx.post or "np.empty(0, np.float32)"
        src.line(f"products.packed_into({a2}, {w}, {o2}, {post})")
        if ctx.post is None:
            _whole_epilogue(ctx)
        else:
            with src.block(f"if {ctx.post}.size == 0:"):
                _whole_epilogue(ctx)
        return
    acc = _acc(out_dtype)
    i, j, p, s = src.fresh("i"), src.fresh("j"), src.fresh("p"), src.fresh("acc")
    with src.block(f"for {i} in range({m}):"), src.block(f"for {j} in range({units}):"):
        src.line(f"{s} = {const(0, acc)}")
        with src.block(f"for {p} in range({k}):"):
            x = cast(cast(f"{a2}[{i}, {p}]", in_dtype, out_dtype), out_dtype, acc)
            y = cast(cast(f"{w}[{j} // {n}, {p}, {j} % {n}]", in_dtype, out_dtype), out_dtype, acc)
            src.line(f"{s} += {x} * {y}")
        src.line(f"{o2}[{i}, {j}] = {cast(s, acc, out_dtype)}")
    _whole_epilogue(ctx)


RULES.register(
    OpRule(
        "nn.contrib_dense_pack",
        2,
        (*_PRODUCT_ATTRS, Attr("weight_layout", "str", "NC32n")),
        _dense_pack_infer,
        _dense_pack_shape,
        emit=_dense_pack_emit,
        numeric=True,
        epilogue=True,
        post="columns",
    )
)


def _layout_transform_infer(
    args: tuple[Spec, ...], attrs: dict, declared: tuple
) -> tuple[Spec, ...]:
    if attrs["src_layout"] != "NC":
        raise RuleError(
            f"attribute src_layout={attrs['src_layout']!r} is not supported; only 'NC' is"
        )
    _panel_width("dst_layout", attrs["dst_layout"])
    require_rank("data", args[0], 2, 2)
    return (Spec(args[0].dtype, 3),)


def _layout_transform_shape(ctx: ShapeCtx) -> list[list[str]]:
    ((rows, features),) = ctx.arg_dims
    n = _panel_width("dst_layout", ctx.attrs["dst_layout"])
    return [[f"(({rows} + {n - 1}) // {n})", features, str(n)]]


def _layout_transform_emit(ctx: EmitCtx) -> None:
    src = ctx.src
    (data,), out = ctx.args, ctx.outs[0]
    rows, features = ctx.arg_dims[0]
    n = _panel_width("dst_layout", ctx.attrs["dst_layout"])
    dtype = ctx.out_specs[0].dtype
    p, k, j, r = src.fresh("p"), src.fresh("k"), src.fresh("j"), src.fresh("r")
    zero = const(0, dtype)
    with (
        src.block(f"for {p} in range({ctx.out_dims[0][0]}):"),
        src.block(f"for {k} in range({features}):"),
        src.block(f"for {j} in range({n}):"),
    ):
        src.line(f"{r} = {p} * {n} + {j}")
        src.line(f"{out}[{p}, {k}, {j}] = {data}[{r}, {k}] if {r} < {rows} else {zero}")


RULES.register(
    OpRule(
        "layout_transform",
        1,
        (Attr("src_layout", "str", "NC"), Attr("dst_layout", "str", "NC32n")),
        _layout_transform_infer,
        _layout_transform_shape,
        emit=_layout_transform_emit,
    )
)


# --- nn.batch_matmul ---------------------------------------------------------------------------


def _batch_matmul_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    dtype = require_same_dtype(["x", "y"], args)
    require_kind("x", args[0], "numeric")
    require_rank("x", args[0], 3, 3)
    require_rank("y", args[1], 3, 3)
    return (Spec(attrs["out_dtype"] or dtype, 3),)


def _batch_matmul_shape(ctx: ShapeCtx) -> list[list[str]]:
    x, y = ctx.arg_dims
    batch = ctx.bcast(x[0], y[0])
    m, kx = (x[2], x[1]) if ctx.attrs["transpose_a"] else (x[1], x[2])
    n, ky = (y[1], y[2]) if ctx.attrs["transpose_b"] else (y[2], y[1])
    ctx.expect(ky, kx, "reduction dimension of y")
    return [[batch, m, n]]


def _batch_matmul_emit(ctx: EmitCtx) -> None:
    src = ctx.src
    x, y = ctx.args
    x_dims, y_dims = ctx.arg_dims
    out = ctx.outs[0]
    batch, m, n = ctx.out_dims[0]
    ta, tb = ctx.attrs["transpose_a"], ctx.attrs["transpose_b"]
    in_dtype = ctx.arg_specs[0].dtype
    out_dtype = ctx.out_specs[0].dtype
    k = x_dims[1] if ta else x_dims[2]

    def loops() -> None:
        acc = _acc(out_dtype)
        b, i, j, p, s = (src.fresh(c) for c in ("b", "i", "j", "p", "acc"))
        with src.block(f"for {b} in range({batch}):"):
            bx = f"({b} if {x_dims[0]} != 1 else 0)"
            by = f"({b} if {y_dims[0]} != 1 else 0)"
            with src.block(f"for {i} in range({m}):"), src.block(f"for {j} in range({n}):"):
                src.line(f"{s} = {const(0, acc)}")
                with src.block(f"for {p} in range({k}):"):
                    xa = f"{x}[{bx}, {p}, {i}]" if ta else f"{x}[{bx}, {i}, {p}]"
                    yb = f"{y}[{by}, {j}, {p}]" if tb else f"{y}[{by}, {p}, {j}]"
                    a = cast(cast(xa, in_dtype, out_dtype), out_dtype, acc)
                    c = cast(cast(yb, in_dtype, out_dtype), out_dtype, acc)
                    src.line(f"{s} += {a} * {c}")
                src.line(f"{out}[{b}, {i}, {j}] = {cast(s, acc, out_dtype)}")

    call = f"products.matmul_into({x}, {y}, {out}, {ta}, {tb})"
    _blas_or_loops(ctx, f"{batch} * {m} * {n} * {k}", call, loops)
    _whole_epilogue(ctx)


RULES.register(
    OpRule(
        "nn.batch_matmul",
        2,
        (
            Attr("out_dtype", "dtype_or_empty", ""),
            Attr("transpose_a", "bool", False),
            Attr("transpose_b", "bool", True),
        ),
        _batch_matmul_infer,
        _batch_matmul_shape,
        emit=_batch_matmul_emit,
        numeric=True,
        epilogue=True,
    )
)


# --- softmax -----------------------------------------------------------------------------------


def _softmax_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    require_kind("data", args[0], "float")
    require_rank("data", args[0], 1)
    norm_axis("axis", attrs["axis"], args[0].ndim)
    return (args[0],)


def _softmax_shape(ctx: ShapeCtx) -> list[list[str]]:
    return [list(ctx.arg_dims[0])]


def _emit_softmax(log: bool) -> Callable[[EmitCtx], None]:
    def emit(ctx: EmitCtx) -> None:
        src = ctx.src
        dims = ctx.arg_dims[0]
        dtype = ctx.arg_specs[0].dtype
        axis = norm_axis("axis", ctx.attrs["axis"], len(dims))
        outer, n, inner = src.fresh("n"), src.fresh("n"), src.fresh("n")
        src.line(f"{outer} = {product(dims[:axis])}")
        src.line(f"{n} = {dims[axis]}")
        src.line(f"{inner} = {product(dims[axis + 1 :])}")
        if not log and dtype == "float32" and axis == len(dims) - 1:
            # Contiguous rows, by vm.kernels.runtime.rows (shared between the threads by
            # rows: GPT-2's attention softmax, 12x128x128, ran 170-180 us on one thread of
            # an AMD EPYC Zen 4).
            rows = f"({outer}, {n})"
            src.line(f"rw.softmax_f32({ctx.args[0]}.reshape({rows}), "
                     f"{ctx.outs[0]}.reshape({rows}))")  # fmt: skip
            return
        x3, o3 = src.fresh("x"), src.fresh("o")
        src.line(f"{x3} = {ctx.args[0]}.reshape({shape_tuple([outer, n, inner])})")
        src.line(f"{o3} = {ctx.outs[0]}.reshape({shape_tuple([outer, n, inner])})")
        a, c, j = src.fresh("a"), src.fresh("c"), src.fresh("j")
        top, total, v = src.fresh("top"), src.fresh("total"), src.fresh("v")
        with src.block(f"for {a} in range({outer}):"), src.block(f"for {c} in range({inner}):"):
            src.line(f"{top} = {const(float('-inf'), dtype)}")
            with src.block(f"for {j} in range({n}):"):
                src.line(f"{v} = {x3}[{a}, {j}, {c}]")
                with src.block(f"if {v} > {top} or {v} != {v}:"):
                    src.line(f"{top} = {v}")
            # A softmax's exponentials below float32's normal range are 0 (see
            # vx.exp_flushed_f32); log_softmax's sum keeps them.
            exp = "np.exp" if dtype != "float32" else "vx.exp_f32" if log else "vx.exp_flushed_f32"
            if not log and dtype in ("float32", "float64"):
                # The exponentials go to the output first and are summed after: a loop
                # that also accumulates a sum in order cannot be vectorized (a 4x128x128
                # softmax: 455 us with the sum in the exponential loop). log_softmax
                # reads its input again at the end, so it does not write ahead of that.
                with src.block(f"for {j} in range({n}):"):
                    src.line(f"{o3}[{a}, {j}, {c}] = {exp}({x3}[{a}, {j}, {c}] - {top})")
                src.running_sum(total, lambda j: f"{o3}[{a}, {j}, {c}]", n)
            else:
                # float16 keeps each exponential's extra precision in the sum.
                src.line(f"{total} = 0.0")
                with src.block(f"for {j} in range({n}):"):
                    src.line(f"{v} = {exp}({x3}[{a}, {j}, {c}] - {top})")
                    if not log:
                        src.line(f"{o3}[{a}, {j}, {c}] = {v}")
                    src.line(f"{total} += {v}")
            if log:
                src.line(f"{total} = np.log({total})")
            with src.block(f"for {j} in range({n}):"):
                if log:
                    value = f"(({x3}[{a}, {j}, {c}] - {top}) - {total})"
                else:
                    value = f"({o3}[{a}, {j}, {c}] / {total})"
                src.line(f"{o3}[{a}, {j}, {c}] = {cast(value, 'float64', dtype)}")

    return emit


for _name, _log in (("nn.softmax", False), ("nn.log_softmax", True)):
    RULES.register(
        OpRule(
            _name,
            1,
            (Attr("axis", "int", -1),),
            _softmax_infer,
            _softmax_shape,
            emit=_emit_softmax(_log),
            numeric=True,
        )
    )


# --- run-time shape rules (run by vm.shape_funcs) ----------------------------------------


@RULES.shape("nn.softmax", "nn.log_softmax")
def _run_softmax(shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[sr.Shape]:
    sr.rank(shapes[0], 1, None, "data")
    sr.axis_of(attrs["axis"], len(shapes[0]))
    return [shapes[0]]


@RULES.shape("nn.dense")
def _run_dense(shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[sr.Shape]:
    data, weight = shapes
    sr.rank(data, 1, None, "data")
    sr.rank(weight, 2, 2, "weight")
    if weight[1] != data[-1]:
        raise RuleError(
            f"the input features differ: data {sr.fmt_shape(data)} has {data[-1]} (last "
            f"dimension), weight {sr.fmt_shape(weight)} has {weight[1]} (second dimension)"
        )
    units = attrs.get("units")
    if units is not None:
        sr.expect(weight[0], units, "output units of weight (attribute units)")
    return [(*data[:-1], weight[0])]


@RULES.shape("nn.matmul")
def _run_matmul(shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[sr.Shape]:
    a, b = shapes
    transpose_a = attrs["transpose_a"]
    sr.rank(a, 2 if transpose_a else 1, 2 if transpose_a else None, "tensor_a")
    sr.rank(b, 2, 2, "tensor_b")
    lead, ka = ((a[1],), a[0]) if transpose_a else (a[:-1], a[-1])
    n, kb = (b[0], b[1]) if attrs["transpose_b"] else (b[1], b[0])
    if ka != kb:
        raise RuleError(
            f"the reduction dimensions of tensor_a {sr.fmt_shape(a)} and tensor_b "
            f"{sr.fmt_shape(b)} differ"
        )
    units = attrs.get("units")
    if units is not None:
        sr.expect(n, units, "output units of tensor_b (attribute units)")
    return [(*lead, n)]


@RULES.shape("nn.contrib_dense_pack")
def _run_dense_pack(
    shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple
) -> list[sr.Shape]:
    data, weight = shapes
    sr.rank(data, 1, None, "data")
    sr.rank(weight, 3, 3, "weight")
    layout = attrs.get("weight_layout", panels.LAYOUT)
    width = panels.panel_width(layout)
    if width is None:
        raise RuleError(panels.unsupported("weight_layout", layout))
    count, features, found = weight
    sr.expect(found, width, f"panel width of weight {sr.fmt_shape(weight)} (third dimension)")
    if features != data[-1]:
        raise RuleError(
            f"the input features differ: data {sr.fmt_shape(data)} has {data[-1]} (last "
            f"dimension), weight {sr.fmt_shape(weight)} has {features} (second dimension)"
        )
    units = attrs.get("units")
    if units is None:
        return [(*data[:-1], count * width)]
    if not (count - 1) * width < units <= count * width:
        raise RuleError(f"attribute units={units} does not fit {count} panels of {width}")
    return [(*data[:-1], units)]


@RULES.shape("layout_transform")
def _run_layout_transform(
    shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple
) -> list[sr.Shape]:
    (data,) = shapes
    sr.rank(data, 2, 2, "data")
    layout = attrs.get("dst_layout", panels.LAYOUT)
    width = panels.panel_width(layout)
    if width is None or attrs["src_layout"] != "NC":
        raise RuleError(panels.unsupported("dst_layout", layout))
    return [(-(-data[0] // width), data[1], width)]


@RULES.shape("nn.batch_matmul")
def _run_batch_matmul(
    shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple
) -> list[sr.Shape]:
    x, y = shapes
    sr.rank(x, 3, 3, "x")
    sr.rank(y, 3, 3, "y")
    batch = sr.broadcast_shapes([(x[0],), (y[0],)])[0]
    m, kx = (x[2], x[1]) if attrs["transpose_a"] else (x[1], x[2])
    n, ky = (y[1], y[2]) if attrs["transpose_b"] else (y[2], y[1])
    if kx != ky:
        raise RuleError(
            f"the reduction dimensions of x {sr.fmt_shape(x)} and y {sr.fmt_shape(y)} differ"
        )
    return [(batch, m, n)]
