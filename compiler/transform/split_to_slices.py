"""``SplitToSlices``: each projection of a ``split`` becomes a ``strided_slice`` of its input.

Compiler layer (``compiler.transform``).

``split`` has a tuple result, so ``FuseOps`` ends a group at it: the pieces are copied
into tensors of their own by a kernel, and every consumer reads those copies. An LSTM
cell splits its gate vector in four and feeds the pieces to two elementwise groups; that
split costs a kernel call and four allocations per step. Written as slices instead::

    %parts = split(%gates, indices_or_sections=4, axis=1);
    sigmoid(%parts.0)
      =>
    sigmoid(strided_slice(%gates, begin=[0], end=[128], strides=[1], axes=[1]))

each piece is a single-output injective operator that fuses into the kernel that reads
it, which then reads the gate vector in place. A projection of a split whose pieces have
an unknown size along the axis stays as it is; so does a split used as a whole tuple
(passed to a function, say), which then still runs beside the slices. The unused splits
left behind are removed by ``DeadCodeElimination``. The pass runs at ``opt_level`` 1,
where fusion starts.
"""

from __future__ import annotations

import itertools

from compiler.ir.expr import Call, Let, Node, TupleGetItem, Var
from compiler.ir.module import IRModule
from compiler.ir.types import Any, TensorType
from compiler.op.api import call_op
from compiler.op.defs_transform import split_sizes
from compiler.op.registry import OpTypeError, get_def
from compiler.transform.pass_manager import Pass, PassContext
from compiler.transform.rewriter import BindingMutator, is_op_call, is_primitive, rewrite_module

__all__ = ["SplitToSlices", "split_to_slices"]


def _is_split(node: object) -> bool:
    return is_op_call(node, "split")


def _bounds(split: Call) -> tuple[int, list[tuple[int, int]]] | None:
    """The split's axis and each piece's ``(begin, end)`` along it, or None if unknown."""
    data_type = getattr(split.args[0], "_checked_type", None)
    if not isinstance(data_type, TensorType):
        return None
    attrs = get_def("split").normalize_attrs(split.attrs)
    try:
        axis, sizes = split_sizes("split", data_type, attrs)
    except OpTypeError:
        return None
    if any(isinstance(size, Any) for size in sizes):
        return None
    edges = list(itertools.accumulate(sizes, initial=0))
    return axis, list(itertools.pairwise(edges))


class _Rewriter(BindingMutator):
    def __init__(self) -> None:
        super().__init__()
        #: ``let``-bound splits, as typed originally and as rewritten, so that ``%v.i`` is
        #: rewritten like ``split(..).i``.
        self.bound: dict[Var, tuple[Call, Call]] = {}

    def descend(self, node: Node) -> bool:
        return not is_primitive(node)

    def enter_let(self, let: Let, value: object) -> None:
        if _is_split(value) and _is_split(let.value):
            self.bound[let.var] = (let.value, value)  # type: ignore[assignment]

    def leave_let(self, let: Let) -> None:
        self.bound.pop(let.var, None)

    def _splits(self, old: Node, new: TupleGetItem) -> tuple[Call, Call] | None:
        """The projected split as type-checked (for its sizes) and as rewritten (for its
        input), or None if ``new`` does not project a split."""
        if isinstance(new.tuple_value, Var):
            return self.bound.get(new.tuple_value)
        typed = old.tuple_value if isinstance(old, TupleGetItem) else None
        if _is_split(new.tuple_value) and _is_split(typed):
            return typed, new.tuple_value  # type: ignore[return-value]
        return None

    def rewrite(self, old: Node, new: Node) -> Node:
        if not isinstance(new, TupleGetItem):
            return new
        splits = self._splits(old, new)
        plan = None if splits is None else _bounds(splits[0])
        if plan is None or not 0 <= new.index < len(plan[1]):
            return new
        axis, pieces = plan
        begin, end = pieces[new.index]
        return call_op(
            "strided_slice",
            [splits[1].args[0]],  # type: ignore[index]
            begin=[begin],
            end=[end],
            strides=[1],
            axes=[axis],
        )


def split_to_slices(mod: IRModule) -> IRModule:
    """Rewrite every projection of a ``split`` as a ``strided_slice`` (see the module doc).

    Parameters
    ----------
    mod : IRModule
        The module; it is not modified. It must type-check if it calls ``split``.

    Returns
    -------
    IRModule
        A new module.
    """
    return rewrite_module(mod, _is_split, _Rewriter)


class SplitToSlices(Pass):
    """Turn projections of ``split`` into ``strided_slice`` calls that fuse into their
    consumers' kernels (``opt_level=1``). See :mod:`compiler.transform.split_to_slices`."""

    def __init__(self) -> None:
        super().__init__("SplitToSlices", opt_level=1)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return split_to_slices(mod)

    def __repr__(self) -> str:
        return "SplitToSlices()"
