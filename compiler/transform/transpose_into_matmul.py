"""``TransposeIntoBatchMatmul``: a batch product reads its second operand the other way
round instead of having it transposed first.

Compiler layer (``compiler.transform``).

Exported attention layers compute ``q @ k^T`` from the joint projection as::

    %k = transpose(reshape(strided_slice(%qkv, ...), newshape=[1, 128, -1, 64]),
                   axes=[0, 2, 3, 1]);                           /* (1, 12, 64, 128) */
    %s = reshape(multiply(%k, 0.35f), newshape=[12, 64, 128]);
    nn.batch_matmul(%q, %s, transpose_b=False)

The transpose moves the input's last axis, so its kernel reads the projection a row apart
for every element: 84 us a layer in GPT-2, 288 in ViT-B (AMD EPYC Zen 4), where the
query's split, whose transpose keeps the last axis last, reads its rows in place (a view,
see ``vm.kernels.codegen``) in 30 and 66. ``nn.batch_matmul`` takes its second operand
either way round (``transpose_b``), so the pass swaps the last two axes of the chain that
makes it and sets ``transpose_b``: the transpose becomes ``axes=[0, 2, 1, 3]`` (or goes,
when it only swapped the last two axes), each reshape on the way swaps the last two sizes
of its ``newshape``, and the product reads::

    nn.batch_matmul(%q, reshape(multiply(transpose(%r, axes=[0, 2, 1, 3]), 0.35f),
                                newshape=[12, 128, 64]), transpose_b=True)

Only a transpose that puts its input's last axis second to last qualifies: swapped, it
keeps that axis last. The values' split, ``axes=[0, 2, 1, 3]`` read plainly, is left as it
is (swapped, it would become the transposed copy). The chain may hold reshapes that keep
the last two sizes (they regroup the leading axes only, so they commute with the swap) and
elementwise operators whose other operands have one element; every value on it must have
no other reader, so nothing is computed twice, and every shape must be known and non-empty. The
product's sums are the same; only the order in which the library adds them may differ.
The pass runs at ``opt_level`` 1, after ``SinkReshape``.
"""

from __future__ import annotations

import math

from compiler.ir.expr import Call, Node
from compiler.ir.module import IRModule
from compiler.op.api import call_op
from compiler.op.defs_transform import transpose_axes
from compiler.op.registry import get_def
from compiler.transform.pass_manager import Pass, PassContext
from compiler.transform.rewriter import (
    UseCountingMutator,
    is_op_call,
    is_shape_free_elementwise,
    rewrite_module,
    static_shape,
)

__all__ = ["TransposeIntoBatchMatmul", "transpose_into_batch_matmul"]

_PRODUCT = "nn.batch_matmul"


def _wanted(node: object) -> bool:
    return is_op_call(node, _PRODUCT)


def _swapped(shape: tuple[int, ...]) -> list[int]:
    return [*shape[:-2], shape[-1], shape[-2]]


def _elementwise_argument(node: Node, shape: tuple[int, ...]) -> int | None:
    """Which argument of ``node`` carries the chain, if ``node`` is an elementwise
    operator whose other arguments have one element each."""
    if not is_shape_free_elementwise(node):
        return None
    through = None
    for k, arg in enumerate(node.args):  # type: ignore[attr-defined]
        arg_shape = static_shape(arg)
        if arg_shape is None:
            return None
        if arg_shape == shape and through is None:
            through = k
        elif math.prod(arg_shape) != 1:
            return None
    return through


class _Rewriter(UseCountingMutator):
    def rewrite(self, old: Node, new: Node) -> Node:
        if not (is_op_call(old, _PRODUCT) and is_op_call(new, _PRODUCT)):
            return new
        attrs = get_def(_PRODUCT).normalize_attrs(new.attrs)  # type: ignore[attr-defined]
        if attrs["transpose_b"]:
            return new
        operand = self.swapped(old.args[1])  # type: ignore[attr-defined]
        if operand is None:
            return new
        return Call(new.op, [new.args[0], operand], {**new.attrs, "transpose_b": True})  # type: ignore[attr-defined]

    def swapped(self, top: Node) -> Node | None:
        """The rewritten value of ``top`` (an original node) with its last two axes
        swapped, built by swapping them in the chain that makes it; None where the chain
        is not one the module doc describes."""
        chain: list[tuple[Call, int]] = []  # (node, the argument that continues the chain)
        node = top
        while True:
            shape = static_shape(node)
            if shape is None or len(shape) < 2 or self.uses[id(node)] != 1:
                return None
            if is_op_call(node, "transpose"):
                break
            if is_op_call(node, "reshape"):
                source = static_shape(node.args[0])  # type: ignore[attr-defined]
                if source is None or source[-2:] != shape[-2:]:
                    return None
                through: int | None = 0
            else:
                through = _elementwise_argument(node, shape)
                if through is None:
                    return None
            chain.append((node, through))  # type: ignore[arg-type]
            node = node.args[through]  # type: ignore[attr-defined]
        perm = transpose_axes("transpose", len(shape), node.attrs.get("axes"))  # type: ignore[attr-defined]
        if perm[-2] != len(perm) - 1:
            # Swapped, the transpose would move its input's last axis: a view made a copy
            # that reads across rows (an attention layer's values).
            return None
        perm = [*perm[:-2], perm[-1], perm[-2]]
        value = self.memo[id(node.args[0])]  # type: ignore[attr-defined]
        if perm != list(range(len(perm))):
            value = call_op("transpose", [value], axes=perm)
        for link, through in reversed(chain):
            if is_op_call(link, "reshape"):
                value = call_op("reshape", [value], newshape=_swapped(static_shape(link)))  # type: ignore[arg-type]
                continue
            args = [value if k == through else self.memo[id(a)] for k, a in enumerate(link.args)]
            value = Call(link.op, args, link.attrs)
        return value


def transpose_into_batch_matmul(mod: IRModule) -> IRModule:
    """Let batch products read transposed second operands through ``transpose_b`` (see
    the module doc).

    Parameters
    ----------
    mod : IRModule
        The module; it is not modified. It must type-check if it calls ``nn.batch_matmul``.

    Returns
    -------
    IRModule
        A new module computing the same values.
    """
    return rewrite_module(mod, _wanted, _Rewriter)


class TransposeIntoBatchMatmul(Pass):
    """Swap the last two axes of a batch product's transposed second operand and set
    ``transpose_b`` (``opt_level=1``). See :mod:`compiler.transform.transpose_into_matmul`."""

    def __init__(self) -> None:
        super().__init__("TransposeIntoBatchMatmul", opt_level=1)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return transpose_into_batch_matmul(mod)

    def __repr__(self) -> str:
        return "TransposeIntoBatchMatmul()"
