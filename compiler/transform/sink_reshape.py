"""``SinkReshape``: a ``reshape`` moves below the elementwise operators that read it.

Compiler layer (``compiler.transform``).

``FuseOps`` (TVM's rules) lets a matrix product or convolution take the elementwise chain
that reads its result as the epilogue of its kernel, but a ``reshape`` between the two
ends the group: the chain becomes a kernel of its own that reads the whole product back
from memory. Exporters put one there whenever a model works on ``(batch, tokens,
features)`` and the product on rows; GPT-2 (from transformers) computes every MLP as::

    %1 = add(nn.dense(%x, %w), %b);                 /* (128, 3072) */
    %2 = reshape(%1, newshape=[1, 128, 3072]);
    %3 = multiply(%2, 0.5f); ... tanh(...) ...     /* the GELU, on (1, 128, 3072) */
    reshape(%9, newshape=[-1, 3072])

A ``reshape`` moves no data: an elementwise operator gives the same elements whether it
runs before or after it. So the pass rewrites ``op(reshape(x), c)`` as
``reshape(op(x, c))`` when ``c`` has one element, or its dimensions are trailing
dimensions that the two shapes share (GPT-2's attention mask, ``(128, 128)`` against
``(12, 128, 128)`` and ``(1, 12, 128, 128)``), and no more dimensions than ``x``, so that
broadcasting it changes no shape; ``op(reshape(x), y)`` as
``reshape(op(x, reshape(y)))`` when ``y`` has the result's shape (a residual, most often
itself a reshape, which then disappears). The reshapes meet at the end of the chain,
where two in a row become one (none, when the second undoes the first), and the chain
joins the product's kernel. Any other operand that broadcasts stops the move, as do the
reshapes of tensors of two different shapes. Operators whose attributes name axes or shapes
(``nn.bias_add``, ``nn.prelu``, ``broadcast_to``) stay where they are, as does anything
with a shape not known at compile time.

Each rewrite keeps the values bit for bit. The pass runs at ``opt_level`` 1, before
``FuseOps``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from compiler.ir.expr import Call, Let, Node
from compiler.ir.module import IRModule
from compiler.op.api import call_op
from compiler.transform.pass_manager import Pass, PassContext
from compiler.transform.rewriter import (
    BindingMutator,
    is_op_call,
    is_primitive,
    is_shape_free_elementwise,
    rewrite_module,
    static_shape,
)

__all__ = ["SinkReshape", "sink_reshape"]


def _is_reshape(node: object) -> bool:
    return is_op_call(node, "reshape")


class _Reshaped(NamedTuple):
    """A value that is ``reshape(source)``: the rewritten ``source`` and its shape."""

    source: Node
    shape: tuple[int, ...]


class _Rewriter(BindingMutator):
    def __init__(self) -> None:
        super().__init__()
        #: Rewritten reshapes, and ``let`` variables bound to them, by identity.
        self.reshaped: dict[int, _Reshaped] = {}

    def descend(self, node: Node) -> bool:
        return not is_primitive(node)

    def enter_let(self, let: Let, value: object) -> None:
        found = self.reshaped.get(id(value))
        if found is not None:
            self.reshaped[id(let.var)] = found

    def rewrite(self, old: Node, new: Node) -> Node:
        if not isinstance(new, Call) or not isinstance(old, Call):
            return new
        if _is_reshape(new):
            return self.reshape(old, new)
        if is_shape_free_elementwise(new):
            return self.elementwise(old, new)
        return new

    def _record(self, node: Node, source: Node, shape: tuple[int, ...]) -> Node:
        self.reshaped[id(node)] = _Reshaped(source, shape)
        self._keep.append(node)  # its id must stay unique while the pass runs
        return node

    def reshape(self, old: Call, new: Call) -> Node:
        shape = static_shape(old)
        if shape is None:
            return new
        inner = self.reshaped.get(id(new.args[0]))
        if inner is None:
            source_shape = static_shape(old.args[0])
            if source_shape is None:
                return new
            if source_shape == shape:
                return new.args[0]
            return self._record(new, new.args[0], source_shape)
        # reshape(reshape(x)) reads x's elements in their order: one reshape, or none.
        if shape == inner.shape:
            return inner.source
        return self._record(call_op("reshape", [inner.source], newshape=list(shape)), *inner)

    def elementwise(self, old: Call, new: Call) -> Node:
        shape = static_shape(old)
        if shape is None:
            return new
        source_shape = None
        moved: list[Node | None] = []
        for before, after in zip(old.args, new.args):
            found = self.reshaped.get(id(after))
            if found is not None and static_shape(before) == shape:
                if source_shape not in (None, found.shape):
                    return new
                source_shape = found.shape
                moved.append(found.source)
            else:
                moved.append(None)
        if source_shape is None:
            return new
        args = []
        for before, after, arg in zip(old.args, new.args, moved):
            if arg is not None:
                args.append(arg)
                continue
            other = static_shape(before)
            if other is None:
                return new
            rank = len(other)
            if rank <= len(source_shape) and (
                math.prod(other) == 1
                or shape[len(shape) - rank :] == source_shape[len(source_shape) - rank :]
            ):
                # Broadcast to either shape, a single element, or an operand whose axes are
                # trailing axes both shapes share (an attention mask), meets every element
                # at the same place.
                args.append(after)
            elif other == shape:
                # A whole operand (a residual) is read through a reshape of its own, which
                # meets the reshape that made it, if any.
                args.append(self.reshaped_to(after, shape, source_shape))
            else:
                return new
        inner = Call(new.op, args, new.attrs)
        return self._record(call_op("reshape", [inner], newshape=list(shape)), inner, source_shape)

    def reshaped_to(self, node: Node, shape: tuple[int, ...], target: tuple[int, ...]) -> Node:
        """``node`` (of ``shape``) reshaped to ``target``, through the reshape that made it."""
        found = self.reshaped.get(id(node))
        if found is not None:
            if found.shape == target:
                return found.source
            return self._record(call_op("reshape", [found.source], newshape=list(target)), *found)
        return self._record(call_op("reshape", [node], newshape=list(target)), node, shape)


def sink_reshape(mod: IRModule) -> IRModule:
    """Move reshapes below the elementwise operators that read them (see the module doc).

    Parameters
    ----------
    mod : IRModule
        The module; it is not modified. It must type-check if it calls ``reshape``.

    Returns
    -------
    IRModule
        A new module computing the same values.
    """
    return rewrite_module(mod, _is_reshape, _Rewriter)


class SinkReshape(Pass):
    """Move reshapes below elementwise operators, so that an elementwise chain after a
    reshaped product joins the product's kernel (``opt_level=1``). See
    :mod:`compiler.transform.sink_reshape`."""

    def __init__(self) -> None:
        super().__init__("SinkReshape", opt_level=1)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return sink_reshape(mod)

    def __repr__(self) -> str:
        return "SinkReshape()"
