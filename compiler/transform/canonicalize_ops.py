"""``CanonicalizeOps``: ``nn.bias_add`` becomes the broadcast ``add`` it stands for.

Compiler layer (``compiler.transform``). TVM's pass of that name rewrites operators that
are special forms of basic ones, so that later analyses (fusion patterns, layout and
scale folding) see one form; its rule is the bias add::

    nn.bias_add(%x, %b, axis=a)   =>   add(%x, expand_dims(%b, axis=1, num_newaxis=n - a - 1))

for an ``n``-axis ``%x`` (no ``expand_dims`` when ``a`` is the last axis), which adds the
same values. Bias adds inside primitive (fused) functions, and those whose data has no
known rank, are left as they are.
"""

from __future__ import annotations

from compiler.ir.expr import Node
from compiler.ir.module import IRModule
from compiler.ir.types import TensorType
from compiler.op.api import call_op
from compiler.op.registry import get_def
from compiler.transform.pass_manager import Pass, PassContext
from compiler.transform.rewriter import BindingMutator, is_op_call, is_primitive, rewrite_module

__all__ = ["CanonicalizeOps", "canonicalize_ops"]


def _is_bias_add(node: object) -> bool:
    return is_op_call(node, "nn.bias_add")


class _Rewriter(BindingMutator):
    def descend(self, node: Node) -> bool:
        return not is_primitive(node)

    def rewrite(self, old: Node, new: Node) -> Node:
        if not _is_bias_add(old):
            return new
        data_type = getattr(old.args[0], "_checked_type", None)  # type: ignore[attr-defined]
        if not isinstance(data_type, TensorType):
            return new
        rank = len(data_type.shape)
        axis = get_def("nn.bias_add").normalize_attrs(old.attrs)["axis"]  # type: ignore[attr-defined]
        axis = axis + rank if axis < 0 else axis
        data, bias = new.args  # type: ignore[attr-defined]
        trailing = rank - axis - 1
        if trailing > 0:
            bias = call_op("expand_dims", [bias], axis=1, num_newaxis=trailing)
        return call_op("add", [data, bias])


def canonicalize_ops(mod: IRModule) -> IRModule:
    """Rewrite every ``nn.bias_add`` outside primitive functions as a broadcast ``add``.

    Parameters
    ----------
    mod : IRModule
        The module; it is not modified.

    Returns
    -------
    IRModule
        A new module (type-checked) computing the same values.
    """
    return rewrite_module(mod, _is_bias_add, _Rewriter)


class CanonicalizeOps(Pass):
    """Rewrite ``nn.bias_add`` as ``add`` of the bias with the axes it broadcasts along
    (TVM's ``CanonicalizeOps``, ``opt_level=3``). See :mod:`compiler.transform.canonicalize_ops`."""

    def __init__(self) -> None:
        super().__init__("CanonicalizeOps", opt_level=3)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return canonicalize_ops(mod)

    def __repr__(self) -> str:
        return "CanonicalizeOps()"
