"""Kernel rules for the detection operators: vision.roi_align and
vision.all_class_non_max_suppression.

Runtime layer, kernel generator (``vm.kernels``); standard library only.

Both follow onnxruntime's CPU kernels step for step, in the data's compute type (float32
for float16 and float32 data), so that results agree with it to the last bit where the
arithmetic allows and suppression decisions agree exactly. Semantics mirror
``compiler/op/defs_vision.py``.

``vision.roi_align`` averages (or takes the maximum of) bilinear samples on a grid in each
output bin of each region; ``sample_ratio <= 0`` takes ``ceil(region size / bins)``
samples per bin along each axis, per region, as onnxruntime's adaptive sampling does.
The sample positions and weights along each axis are computed once per region and shared
by every channel.

``vision.all_class_non_max_suppression`` writes, for each batch and class, the boxes kept
by greedy suppression in descending score order (ties: the lower box index first) into a
``(batch * classes * boxes, 3)`` table of (batch, class, box) rows, and the number of rows
written into its second output; the rest of the table is zero. Its output shapes follow
from the input shapes alone: the ONNX frontend slices the written rows off with
``dyn.strided_slice``, whose shape rule reads the count, as TVM's frontend does.
"""

from __future__ import annotations

from collections.abc import Mapping
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
from vm.kernels.source import EmitCtx, ShapeCtx, const
from vm.kernels.windows import NCHW, check_layout, pair

#: The rules this module defines (gathered by :mod:`vm.kernels.table`).
RULES = RuleSet()

ROI_ALIGN_MODES = ("avg", "max")

#: The most adaptive samples per bin along one axis: far past any image, and small enough
#: that converting the count to an integer is exact.
_MAX_GRID = 1 << 24
NMS_OUTPUT_FORMATS = ("onnx",)


def _std_max(a: str, b: str) -> str:
    """C++'s ``std::max(a, b)``: ``a`` unless ``a < b`` (so a NaN ``a`` is kept)."""
    return f"({b} if {a} < {b} else {a})"


def _std_min(a: str, b: str) -> str:
    """C++'s ``std::min(a, b)``: ``a`` unless ``b < a``."""
    return f"({b} if {b} < {a} else {a})"


# --- vision.roi_align --------------------------------------------------------------------------


def _roi_align_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    data, rois = args
    require_kind("data", data, "float")
    require_rank("data", data, 4, 4)
    require_rank("rois", rois, 2, 2)
    require_same_dtype(("data", "rois"), (data, rois))
    check_layout(attrs, "layout", (NCHW,))
    pair("pooled_size", attrs["pooled_size"])
    return (data,)


def _roi_align_shape(ctx: ShapeCtx) -> list[list[str]]:
    _, c, h, w = ctx.arg_dims[0]
    r, columns = ctx.arg_dims[1]
    ctx.expect(columns, "5", "rois columns (batch index, x1, y1, x2, y2)")
    ctx.fail_if(f"{r} > 0 and ({h} < 1 or {w} < 1)", "data must have at least one row and column")
    ph, pw = pair("pooled_size", ctx.attrs["pooled_size"])
    return [[r, c, str(ph), str(pw)]]


def _sample_axis(
    ctx: EmitCtx, start: str, length: str, bins: int, grid: str, size: str, t: str
) -> tuple[str, ...]:
    """Emit the samples of one region along one axis: for each of ``bins * grid`` samples,
    whether it is within a pixel of the image, its low and high pixel and their weights
    (onnxruntime's ``pre_calc_for_bilinear_interpolate``, one axis at a time)."""
    src = ctx.src
    names = [src.fresh(p) for p in ("ok", "lo", "hi", "wl", "wh")]
    ok, lo, hi, w_lo, w_hi = names
    count = f"{bins} * {grid}"
    src.line(f"{ok} = np.empty({count}, np.bool_)")
    src.line(f"{lo} = np.empty({count}, np.int64)")
    src.line(f"{hi} = np.empty({count}, np.int64)")
    src.line(f"{w_lo} = np.empty({count}, {t})")
    src.line(f"{w_hi} = np.empty({count}, {t})")
    step, b, g, k, y, low = (src.fresh(p) for p in ("bs", "b", "g", "k", "y", "yl"))
    src.line(f"{step} = {length} / {t}({bins})")
    with src.block(f"for {b} in range({bins}):"), src.block(f"for {g} in range({grid}):"):
        src.line(f"{k} = {b} * {grid} + {g}")
        # The same float operations, in the same order, as onnxruntime.
        src.line(
            f"{y} = {start} + {t}({b}) * {step} + ({t}({g}) + {t}(0.5)) * {step} / {t}({grid})"
        )
        # Written so that a NaN position counts as outside (onnxruntime's cast of it to
        # an index is undefined).
        src.line(f"{ok}[{k}] = {y} >= -1.0 and {y} <= {size}")
        with src.block(f"if {y} <= 0:"):
            src.line(f"{y} = {t}(0)")
        src.line(f"{low} = np.int64({y}) if {ok}[{k}] else np.int64(0)")
        with src.block(f"if {low} >= {size} - 1:"):
            src.line(f"{low} = {size} - 1")
            src.line(f"{lo}[{k}] = {low}")
            src.line(f"{hi}[{k}] = {low}")
            src.line(f"{y} = {t}({low})")
        with src.block("else:"):
            src.line(f"{lo}[{k}] = {low}")
            src.line(f"{hi}[{k}] = {low} + 1")
        src.line(f"{w_hi}[{k}] = {y} - {t}({low})")
        src.line(f"{w_lo}[{k}] = {t}(1) - {w_hi}[{k}]")
    return ok, lo, hi, w_lo, w_hi


def _roi_align_emit(ctx: EmitCtx) -> None:
    src = ctx.src
    data, rois = ctx.args
    out = ctx.outs[0]
    n, c, h, w = ctx.arg_dims[0]
    r = ctx.arg_dims[1][0]
    dtype = ctx.arg_specs[0].dtype
    t = dtypes.np_type(dtype)
    ph, pw = pair("pooled_size", ctx.attrs["pooled_size"])
    ratio = int(ctx.attrs["sample_ratio"])
    aligned = bool(ctx.attrs["aligned"])
    scale = const(ctx.attrs["spatial_scale"], dtype)
    offset = const(0.5 if aligned else 0.0, dtype)
    ri, bi = src.fresh("r"), src.fresh("bi")
    with src.block(f"for {ri} in range({r}):"):
        # Checked as a float before it becomes an index: a NaN is outside too.
        ctx.fail_if(
            f"not ({rois}[{ri}, 0] >= 0 and {rois}[{ri}, 0] < {n})",
            "a region's batch index (rois column 0) is outside the batch of data",
        )
        src.line(f"{bi} = np.int64({rois}[{ri}, 0])")
        corners = [src.fresh(p) for p in ("x0", "y0", "x1", "y1")]
        for k, name in enumerate(corners):
            src.line(f"{name} = {t}({rois}[{ri}, {k + 1}]) * {scale} - {offset}")
        x0, y0, x1, y1 = corners
        rw, rh = src.fresh("rw"), src.fresh("rh")
        src.line(f"{rw} = {x1} - {x0}")
        src.line(f"{rh} = {y1} - {y0}")
        if not aligned:  # malformed regions are taken as 1 pixel wide or high
            src.line(f"{rw} = {t}(1) if {rw} < {t}(1) else {rw}")
            src.line(f"{rh} = {t}(1) if {rh} < {t}(1) else {rh}")
        gh, gw = src.fresh("gh"), src.fresh("gw")
        for grid, length, bins in ((gh, rh, ph), (gw, rw, pw)):
            if ratio > 0:
                src.line(f"{grid} = np.int64({ratio})")
                continue
            ceil = src.fresh("g")
            src.line(f"{ceil} = np.ceil({length} / {t}({bins}))")
            ctx.fail_if(
                f"{ceil} > {_MAX_GRID}",
                f"a region is too large to sample adaptively (over {_MAX_GRID} samples per "
                "bin along an axis); give a fixed sample_ratio",
            )
            # A region with no samples along an axis (a size of 0 or less under half-pixel
            # coordinates, or NaN) pools nothing: its bins are 0, as onnxruntime's are.
            src.line(f"{grid} = np.int64({ceil}) if {ceil} >= 1 else np.int64(0)")
        count = src.fresh("cnt")
        src.line(f"{count} = max({gh} * {gw}, np.int64(1))")
        oky, ylo, yhi, wyl, wyh = _sample_axis(ctx, y0, rh, ph, gh, h, t)
        okx, xlo, xhi, wxl, wxh = _sample_axis(ctx, x0, rw, pw, gw, w, t)
        ci, p, q, iy, ix, ky, kx = (src.fresh(s) for s in ("c", "p", "q", "iy", "ix", "ky", "kx"))
        acc, first, val = src.fresh("acc"), src.fresh("first"), src.fresh("val")
        terms = [src.fresh("v") for _ in range(4)]
        with (
            src.block(f"for {ci} in range({c}):"),
            src.block(f"for {p} in range({ph}):"),
            src.block(f"for {q} in range({pw}):"),
        ):
            src.line(f"{acc} = {t}(0)")
            src.line(f"{first} = True")
            with src.block(f"for {iy} in range({gh}):"):
                src.line(f"{ky} = {p} * {gh} + {iy}")
                with src.block(f"for {ix} in range({gw}):"):
                    src.line(f"{kx} = {q} * {gw} + {ix}")
                    with src.block(f"if {oky}[{ky}] and {okx}[{kx}]:"):
                        for term, (yy, wy), (xx, wx) in zip(
                            terms,
                            ((ylo, wyl), (ylo, wyl), (yhi, wyh), (yhi, wyh)),
                            ((xlo, wxl), (xhi, wxh), (xlo, wxl), (xhi, wxh)),
                        ):
                            src.line(
                                f"{term} = ({wy}[{ky}] * {wx}[{kx}]) * "
                                f"{data}[{bi}, {ci}, {yy}[{ky}], {xx}[{kx}]]"
                            )
                    with src.block("else:"):
                        # onnxruntime reads pixel (0, 0) with weight 0 for a sample outside.
                        for term in terms:
                            src.line(f"{term} = {t}(0) * {data}[{bi}, {ci}, 0, 0]")
                    if ctx.attrs["mode"] == "avg":
                        src.line(f"{acc} += {' + '.join(terms)}")
                    else:
                        best = _std_max(_std_max(_std_max(terms[0], terms[1]), terms[2]), terms[3])
                        src.line(f"{val} = {best}")
                        src.line(f"{acc} = {val} if {first} else {_std_max(acc, val)}")
                        src.line(f"{first} = False")
            if ctx.attrs["mode"] == "avg":
                src.line(f"{acc} = {acc} / {t}({count})")
            src.line(f"{out}[{ri}, {ci}, {p}, {q}] = {acc}")


RULES.register(
    OpRule(
        "vision.roi_align",
        2,
        (
            Attr("pooled_size", "ints", required=True),
            Attr("spatial_scale", "float", required=True),
            Attr("sample_ratio", "int", -1),
            Attr("layout", "str", NCHW),
            Attr("mode", "str", "avg", choices=ROI_ALIGN_MODES),
            Attr("aligned", "bool", False),
        ),
        _roi_align_infer,
        _roi_align_shape,
        emit=_roi_align_emit,
        numeric=True,
    )
)


# --- vision.all_class_non_max_suppression ------------------------------------------------------


def _nms_infer(args: tuple[Spec, ...], attrs: dict, declared: tuple) -> tuple[Spec, ...]:
    boxes, scores, limit, iou, threshold = args
    require_kind("boxes", boxes, "float")
    require_rank("boxes", boxes, 3, 3)
    require_same_dtype(("boxes", "scores"), (boxes, scores))
    require_rank("scores", scores, 3, 3)
    require_kind("max_output_boxes_per_class", limit, "int")
    for name, spec in (("max_output_boxes_per_class", limit), ("iou_threshold", iou)):
        require_rank(name, spec, 0, 1)
    for name, spec in (("iou_threshold", iou), ("score_threshold", threshold)):
        require_kind(name, spec, "float")
        require_rank(name, spec, 0, 1)
    return (Spec("int64", 2), Spec("int64", 1))


def _nms_shape(ctx: ShapeCtx) -> list[list[str]]:
    b, n, coordinates = ctx.arg_dims[0]
    batches, c, boxes = ctx.arg_dims[1]
    ctx.expect(coordinates, "4", "boxes coordinates (axis 2)")
    ctx.expect(batches, b, "scores batches (axis 0) against the batches of boxes")
    ctx.expect(boxes, n, "scores boxes (axis 2) against the boxes of boxes (axis 1)")
    return [[ctx.let(f"{b} * {c} * {n}"), "3"], ["1"]]


def _one_value(ctx: EmitCtx, position: int, name: str, to: str) -> str:
    """A variable holding the one value of scalar or one-element argument ``position``."""
    value = ctx.src.fresh("s")
    arg = ctx.args[position]
    if ctx.arg_specs[position].ndim == 0:
        ctx.src.line(f"{value} = {to}({arg}[()])")
    else:
        ctx.fail_if(f"{ctx.arg_dims[position][0]} != 1", f"{name} must hold one value")
        ctx.src.line(f"{value} = {to}({arg}[0])")
    return value


def _decode_boxes(ctx: EmitCtx, batch: str, edges: list[str], t: str) -> None:
    """Emit the corners and area of every box of batch ``batch`` into the arrays ``edges``
    (xmin, xmax, ymin, ymax, area), as onnxruntime's ``SuppressByIOU`` computes them:
    corners given in either order are sorted; a centre box spans its centre -/+ half its
    size, unsorted."""
    src = ctx.src
    boxes = ctx.args[0]
    xmin, xmax, ymin, ymax, area = edges
    i = src.fresh("i")
    with src.block(f"for {i} in range({ctx.arg_dims[0][1]}):"):
        if ctx.attrs["center_point_box"]:
            for low, high, centre, size in ((xmin, xmax, 0, 2), (ymin, ymax, 1, 3)):
                half, mid = src.fresh("half"), src.fresh("mid")
                src.line(f"{half} = {t}({boxes}[{batch}, {i}, {size}]) / {t}(2)")
                src.line(f"{mid} = {t}({boxes}[{batch}, {i}, {centre}])")
                src.line(f"{low}[{i}] = {mid} - {half}")
                src.line(f"{high}[{i}] = {mid} + {half}")
        else:
            for low, high, first, second in ((xmin, xmax, 1, 3), (ymin, ymax, 0, 2)):
                a, b = src.fresh("a"), src.fresh("b")
                src.line(f"{a} = {t}({boxes}[{batch}, {i}, {first}])")
                src.line(f"{b} = {t}({boxes}[{batch}, {i}, {second}])")
                with src.block(f"if {a} >= {b}:"):
                    src.line(f"{low}[{i}] = {b}")
                    src.line(f"{high}[{i}] = {a}")
                with src.block("else:"):
                    src.line(f"{low}[{i}] = {a}")
                    src.line(f"{high}[{i}] = {b}")
        src.line(f"{area}[{i}] = ({xmax}[{i}] - {xmin}[{i}]) * ({ymax}[{i}] - {ymin}[{i}])")


def _nms_emit(ctx: EmitCtx) -> None:
    src = ctx.src
    scores = ctx.args[1]
    table, written = ctx.outs
    b, n, _ = ctx.arg_dims[0]
    c = ctx.arg_dims[1][1]
    t = dtypes.np_type(ctx.arg_specs[0].dtype)
    limit = _one_value(ctx, 2, "max_output_boxes_per_class", "np.int64")
    iou = _one_value(ctx, 3, "iou_threshold", t)
    ctx.fail_if(f"not ({iou} >= 0 and {iou} <= 1)", "iou_threshold must be between 0 and 1")
    # score_threshold holds one value, or none: no threshold (an absent ONNX input).
    has_threshold, threshold = src.fresh("has"), src.fresh("thr")
    if ctx.arg_specs[4].ndim == 0:
        src.line(f"{has_threshold} = True")
        src.line(f"{threshold} = {t}({ctx.args[4]}[()])")
    else:
        size = ctx.arg_dims[4][0]
        ctx.fail_if(f"{size} > 1", "score_threshold must hold one value, or none")
        src.line(f"{has_threshold} = {size} == 1")
        src.line(f"{threshold} = {t}({ctx.args[4]}[0]) if {has_threshold} else {t}(0)")
    edges = [src.fresh(p) for p in ("xmin", "xmax", "ymin", "ymax", "area")]
    # The kept boxes' edges again, side by side in the order kept: every candidate is
    # compared with all of them, and reading them through their box numbers missed the
    # cache on each (Faster R-CNN's 90,000 candidates took 81 ms).
    kept_edges = [src.fresh(p) for p in ("kx0", "kx1", "ky0", "ky1", "karea")]
    candidates, keys = src.fresh("cand"), src.fresh("key")
    for name in edges + kept_edges + [keys]:
        src.line(f"{name} = np.empty({n}, {t})")
    src.line(f"{candidates} = np.empty({n}, np.int64)")
    rows, bi, ci, i = src.fresh("rows"), src.fresh("b"), src.fresh("c"), src.fresh("i")
    src.line(f"{rows} = 0")
    with src.block(f"for {bi} in range({b}):"):
        _decode_boxes(ctx, bi, edges, t)
        with src.block(f"for {ci} in range({c}):"):
            m, order, j, count = src.fresh("m"), src.fresh("ord"), src.fresh("j"), src.fresh("k")
            src.line(f"{m} = 0")
            with src.block(f"for {i} in range({n}):"):
                score = src.fresh("s")
                src.line(f"{score} = {t}({scores}[{bi}, {ci}, {i}])")
                with src.block(f"if not {has_threshold} or {score} > {threshold}:"):
                    src.line(f"{candidates}[{m}] = {i}")
                    src.line(f"{keys}[{m}] = -{score}")
                    src.line(f"{m} += 1")
            # Descending score; a stable sort keeps equal scores in box order, as
            # onnxruntime's queue pops them.
            src.line(f'{order} = np.argsort({keys}[:{m}], kind="mergesort")')
            src.line(f"{count} = 0")
            with src.block(f"for {j} in range({m}):"):
                with src.block(f"if {count} >= {limit}:"):
                    src.line("break")
                top, keep, s = (src.fresh(p) for p in ("top", "keep", "q"))
                src.line(f"{top} = {candidates}[{order}[{j}]]")
                src.line(f"{keep} = True")
                with src.block(f"for {s} in range({count}):"):
                    _emit_suppressed(ctx, top, s, edges, kept_edges, iou, keep)
                with src.block(f"if {keep}:"):
                    for edge, kept_edge in zip(edges, kept_edges):
                        src.line(f"{kept_edge}[{count}] = {edge}[{top}]")
                    src.line(f"{count} += 1")
                    src.line(f"{table}[{rows}, 0] = {bi}")
                    src.line(f"{table}[{rows}, 1] = {ci}")
                    src.line(f"{table}[{rows}, 2] = {top}")
                    src.line(f"{rows} += 1")
    r = src.fresh("r")
    with src.block(f"for {r} in range({rows}, {ctx.out_dims[0][0]}):"):
        for column in range(3):
            src.line(f"{table}[{r}, {column}] = 0")
    src.line(f"{written}[0] = {rows}")


def _emit_suppressed(
    ctx: EmitCtx,
    top: str,
    other: str,
    edges: list[str],
    kept_edges: list[str],
    iou: str,
    keep: str,
) -> None:
    """Emit onnxruntime's ``SuppressByIOU(top, other)`` for candidate ``top`` (an index
    into ``edges``) and kept box ``other`` (an index into ``kept_edges``): clear ``keep``
    and leave the loop when their intersection over union is above ``iou``. Each test
    that returns early there is a condition here, in the same order, so NaN corners decide
    the same way."""
    src = ctx.src
    xmin, xmax, ymin, ymax, area = edges
    kx0, kx1, ky0, ky1, karea = kept_edges
    lo_x, hi_x, lo_y, hi_y = (src.fresh(p) for p in ("ix0", "ix1", "iy0", "iy1"))
    src.line(f"{lo_x} = {_std_max(f'{xmin}[{top}]', f'{kx0}[{other}]')}")
    src.line(f"{hi_x} = {_std_min(f'{xmax}[{top}]', f'{kx1}[{other}]')}")
    with src.block(f"if {hi_x} <= {lo_x}:"):
        src.line("continue")
    src.line(f"{lo_y} = {_std_max(f'{ymin}[{top}]', f'{ky0}[{other}]')}")
    src.line(f"{hi_y} = {_std_min(f'{ymax}[{top}]', f'{ky1}[{other}]')}")
    with src.block(f"if {hi_y} <= {lo_y}:"):
        src.line("continue")
    inter, union = src.fresh("inter"), src.fresh("union")
    src.line(f"{inter} = ({hi_x} - {lo_x}) * ({hi_y} - {lo_y})")
    with src.block(f"if {inter} <= 0:"):
        src.line("continue")
    src.line(f"{union} = {area}[{top}] + {karea}[{other}] - {inter}")
    with src.block(f"if {area}[{top}] <= 0 or {karea}[{other}] <= 0 or {union} <= 0:"):
        src.line("continue")
    with src.block(f"if {inter} / {union} > {iou}:"):
        src.line(f"{keep} = False")
        src.line("break")


RULES.register(
    OpRule(
        "vision.all_class_non_max_suppression",
        5,
        (
            Attr("output_format", "str", "onnx", choices=NMS_OUTPUT_FORMATS),
            Attr("center_point_box", "bool", False),
        ),
        _nms_infer,
        _nms_shape,
        emit=_nms_emit,
        numeric=True,
    )
)


# --- run-time shape rules (run by vm.shape_funcs) ----------------------------------------


@RULES.shape("vision.roi_align")
def _run_roi_align(
    shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple
) -> list[sr.Shape]:
    _, c, h, w = sr.nchw(shapes[0])
    sr.rank(shapes[1], 2, 2, "rois")
    r, columns = shapes[1]
    sr.expect(columns, 5, "rois columns (batch index, x1, y1, x2, y2)")
    if r > 0 and (h < 1 or w < 1):
        raise RuleError(f"data {sr.fmt_shape(shapes[0])} must have at least one row and column")
    ph, pw = sr.pair(attrs["pooled_size"], "pooled_size")
    return [(r, c, ph, pw)]


@RULES.shape("vision.all_class_non_max_suppression")
def _run_nms(shapes: list[sr.Shape], attrs: Mapping[str, Any], ranks: tuple) -> list[sr.Shape]:
    sr.rank(shapes[0], 3, 3, "boxes")
    sr.rank(shapes[1], 3, 3, "scores")
    (b, n, coordinates), (batches, c, boxes) = shapes[0], shapes[1]
    sr.expect(coordinates, 4, "boxes coordinates (axis 2)")
    sr.expect(batches, b, "scores batches (axis 0) against the batches of boxes")
    sr.expect(boxes, n, "scores boxes (axis 2) against the boxes of boxes (axis 1)")
    return [(b * c * n, 3), (1,)]
