"""``SimplifyExpr``: layout operators that move no data, or that undo each other, go away.

Compiler layer (``compiler.transform``).

A kernel materializes every layout operator it cannot express as a view: a ``transpose``
or a ``concatenate`` inside a fused group is a pass over the whole tensor. Exported
attention blocks are full of them: GPT-2 (from transformers) splits its keys off the fused
projection, transposes them to heads, concatenates them with the (absent) past and
transposes them again; three passes over 98,304 floats per layer where one would do.
The rewrites, as TVM's ``SimplifyExpr`` makes them:

- ``transpose(transpose(x, a), b)`` is ``transpose(x, c)`` with ``c[i] = a[b[i]]``;
- ``transpose(x, a)`` with ``a`` the identity is ``x``;
- ``concatenate((x, e...))`` where every ``e`` has size 0 along the axis is ``x``: its
  elements in their order, with the same type.

Each of those keeps the values bit for bit. One more averages the same elements a faster
way: a float NCHW ``nn.global_avg_pool2d``, an ``nn.adaptive_avg_pool2d`` to one pixel, or
an ``nn.avg_pool2d`` whose one window covers the whole unpadded plane (EfficientNet's
pooler, exported from transformers as a 1280-wide ``AveragePool`` with ``ceil_mode`` on a
7x7 image) is ``mean(x, axis=(2, 3), keepdims=True)``, whose kernel sums each plane's
contiguous run in vector lanes and shares the planes between the threads (the window loops
took 79 us for 1280 planes of 7x7, the mean 8). Every form sums in float64 and divides
once, so the results differ only where the sums' order moves the float64 total across a
float32 rounding boundary. The pass runs at ``opt_level`` 1.
"""

from __future__ import annotations

from compiler.ir.expr import Call, Node, Tuple
from compiler.ir.module import IRModule
from compiler.ir.types import TensorType
from compiler.op.api import call_op
from compiler.op.defs_transform import transpose_axes
from compiler.op.defs_window import padding4, pair
from compiler.op.registry import get_def
from compiler.transform.pass_manager import Pass, PassContext
from compiler.transform.rewriter import BindingMutator, is_op_call, is_primitive, rewrite_module

__all__ = ["SimplifyExpr", "simplify_expr"]


#: The average pools that may cover whole planes.
_POOLS = ("nn.avg_pool2d", "nn.global_avg_pool2d", "nn.adaptive_avg_pool2d")


def _wanted(node: object) -> bool:
    return any(is_op_call(node, op) for op in ("transpose", "concatenate", *_POOLS))


def _tensor_type(node: object) -> TensorType | None:
    ty = getattr(node, "_checked_type", None)
    return ty if isinstance(ty, TensorType) else None


class _Rewriter(BindingMutator):
    def descend(self, node: Node) -> bool:
        return not is_primitive(node)

    def rewrite(self, old: Node, new: Node) -> Node:
        if is_op_call(old, "transpose") and is_op_call(new, "transpose"):
            return self.transpose(old, new)  # type: ignore[arg-type]
        if is_op_call(old, "concatenate") and is_op_call(new, "concatenate"):
            return self.concatenate(old, new)  # type: ignore[arg-type]
        if any(is_op_call(new, op) for op in _POOLS):
            return self.plane_mean(old, new)  # type: ignore[arg-type]
        return new

    def plane_mean(self, old: Call, new: Call) -> Node:
        data = _tensor_type(old.args[0])
        if data is None or data.ndim != 4 or data.dtype not in ("float32", "float64"):
            return new
        op = new.op.name  # type: ignore[union-attr]
        attrs = get_def(op).normalize_attrs(new.attrs)
        if attrs["layout"] != "NCHW" or attrs["out_layout"] not in ("", "NCHW"):
            return new
        out = _tensor_type(old)
        if out is None or tuple(out.shape[2:]) != (1, 1):
            return new
        if op == "nn.avg_pool2d":
            # One window from the top left corner, at least as big as the plane: with no
            # padding, its part inside the plane (the divisor too) is the plane.
            height, width = data.shape[2:]
            pool_h, pool_w = pair(op, attrs, "pool_size")
            if not (isinstance(height, int) and isinstance(width, int)):
                return new
            if pool_h < height or pool_w < width or pair(op, attrs, "dilation") != (1, 1):
                return new
            if any(padding4(op, attrs)):
                return new
        return call_op("mean", [new.args[0]], axis=(2, 3), keepdims=True)

    def transpose(self, old: Call, new: Call) -> Node:
        data = _tensor_type(old.args[0])
        if data is None:
            return new
        # The module type-checked, so both transposes' axes are permutations.
        perm = transpose_axes("transpose", data.ndim, new.attrs.get("axes"))  # type: ignore[arg-type]
        x = new.args[0]
        # A transpose keeps its argument's rank, so the inner one's axes permute as many.
        if is_op_call(x, "transpose"):
            first = transpose_axes("transpose", data.ndim, x.attrs.get("axes"))  # type: ignore[attr-defined]
            perm = [first[a] for a in perm]
            x = x.args[0]  # type: ignore[attr-defined]
        if perm == list(range(len(perm))):
            return x
        if x is new.args[0]:
            return new
        return call_op("transpose", [x], axes=perm)

    def concatenate(self, old: Call, new: Call) -> Node:
        fields, now = old.args[0], new.args[0]
        out = _tensor_type(old)
        if not isinstance(fields, Tuple) or not isinstance(now, Tuple) or out is None:
            return new
        axis = new.attrs.get("axis", 0)
        axis = axis + out.ndim if axis < 0 else axis  # type: ignore[operator]
        kept = []
        for before, after in zip(fields.fields, now.fields):
            ty = _tensor_type(before)
            if ty is None or ty.dtype != out.dtype or ty.ndim != out.ndim:
                return new
            if ty.shape[axis] != 0:
                kept.append((before, after))
        # The one field left must have the result's type: with a size 0 elsewhere than
        # along the axis, a field that is dropped could still decide the result's shape.
        if len(kept) == 1 and _tensor_type(kept[0][0]) == out:
            return kept[0][1]
        return new


def simplify_expr(mod: IRModule) -> IRModule:
    """Remove layout operators that move no data, and average whole planes as means (see
    the module doc).

    Parameters
    ----------
    mod : IRModule
        The module; it is not modified. It must type-check if it calls ``transpose`` or
        ``concatenate``.

    Returns
    -------
    IRModule
        A new module.
    """
    return rewrite_module(mod, _wanted, _Rewriter)


class SimplifyExpr(Pass):
    """Fold transposes into one, drop identity transposes and concatenations of one
    non-empty tensor, average whole planes as means (``opt_level=1``). See
    :mod:`compiler.transform.simplify_expr`."""

    def __init__(self) -> None:
        super().__init__("SimplifyExpr", opt_level=1)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return simplify_expr(mod)

    def __repr__(self) -> str:
        return "SimplifyExpr()"
