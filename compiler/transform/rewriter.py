"""A post-order rewriter that sees ``let`` bindings in scope order, shared by the passes.

Compiler layer (``compiler.transform``).

:class:`compiler.ir.visitor.ExprMutator` rewrites children before parents, but it visits a
``let``'s variable before its value, so a pass cannot learn what a variable is bound to
before the variable's uses are rewritten. :class:`BindingMutator` fixes the order: for
``let %v = value; body`` it rewrites ``value``, calls :meth:`BindingMutator.enter_let`
with the rewritten value, rewrites ``body`` (where every use of ``%v`` is rewritten after
``enter_let``), calls :meth:`BindingMutator.leave_let`, and finally rewrites the ``let``
itself. Binding positions (a ``let`` variable, function parameters, match patterns) are
kept as they are; only uses of variables are rewritten.

Like ``ExprMutator`` it never recurses in Python (a 10,000-deep ``let`` chain is fine),
memoises by node identity (a shared sub-expression is rewritten once and stays shared) and
rebuilds only nodes whose children changed, so the input is never modified.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any as AnyT

from compiler.ir.expr import Call, Clause, Expr, Function, Let, Node, Op
from compiler.ir.module import IRModule
from compiler.ir.types import TensorType
from compiler.ir.visitor import children, post_order, rebuild
from compiler.op.registry import OpPattern, get_def
from compiler.transform.infer_type import InferType

__all__ = [
    "BindingMutator",
    "UseCountingMutator",
    "is_op_call",
    "is_primitive",
    "is_shape_free_elementwise",
    "rewrite_module",
    "static_shape",
]

_ENTER = 0  # first visit: schedule children
_BOUND = 1  # a let's value is rewritten: call enter_let, schedule the body
_BUILD = 2  # children are rewritten: rebuild and call rewrite


def is_op_call(node: object, name: str) -> bool:
    """Whether ``node`` calls the operator ``name``."""
    return isinstance(node, Call) and isinstance(node.op, Op) and node.op.name == name


def is_primitive(node: object) -> bool:
    """Whether ``node`` is a primitive function (``Primitive=1``): a kernel body that the
    optimization passes leave as it is."""
    return isinstance(node, Function) and bool(node.attrs.get("Primitive", 0))


#: Attributes that hold a value, not an axis or a shape: operators with no others are
#: indifferent to the shape of their operands.
_VALUE_ATTRS = frozenset({"a_min", "a_max", "alpha"})


def is_shape_free_elementwise(node: object) -> bool:
    """Whether ``node`` calls an operator that works element by element, whatever its
    operands' shapes (see :data:`_VALUE_ATTRS`): one a pass may move across a reshape or
    a transpose of its operands."""
    if not isinstance(node, Call) or not isinstance(node.op, Op):
        return False
    opdef = get_def(node.op.name)
    if opdef.pattern not in (OpPattern.ELEMWISE, OpPattern.BROADCAST):
        return False
    return set(node.attrs) <= _VALUE_ATTRS


def static_shape(node: object) -> tuple[int, ...] | None:
    """The type-checked shape of ``node`` if it is a tensor of known, non-zero sizes:
    one a pass may write as a ``newshape`` (where ``reshape`` reads a 0 as "keep this
    dimension", not an empty one)."""
    ty = getattr(node, "_checked_type", None)
    if not isinstance(ty, TensorType) or not ty.is_static:
        return None
    shape = ty.concrete_shape
    return shape if all(size > 0 for size in shape) else None


def _visited(node: Node) -> tuple[Node, ...]:
    """The children of ``node`` that are rewritten (binding positions excluded)."""
    if isinstance(node, Function):
        return (node.body,)
    if isinstance(node, Clause):
        return (node.rhs,)
    return children(node)


class BindingMutator:
    """Iterative post-order rewriter with hooks around ``let`` scopes.

    Subclasses override :meth:`rewrite` and optionally :meth:`descend`,
    :meth:`enter_let` and :meth:`leave_let`.
    """

    def __init__(self) -> None:
        self.memo: dict[int, Node] = {}
        self._keep: list[Node] = []  # originals stay alive, so their ids stay unique

    def descend(self, node: Node) -> bool:
        """Whether to rewrite inside ``node``; if not, :meth:`rewrite` gets it unchanged."""
        return True

    def enter_let(self, let: Let, value: Expr) -> None:
        """Called once ``let.value`` is rewritten (to ``value``), before its body is."""

    def leave_let(self, let: Let) -> None:
        """Called once ``let.body`` is rewritten, before ``let`` itself is."""

    def rewrite(self, old: Node, new: Node) -> Node:
        """The replacement of ``old``; ``new`` is ``old`` with its children rewritten."""
        return new

    def visit(self, root: Node) -> AnyT:
        """Rewrite ``root`` and return the result."""
        memo = self.memo
        stack: list[tuple[Node, int]] = [(root, _ENTER)]
        while stack:
            node, state = stack.pop()
            if state == _ENTER:
                if id(node) in memo:
                    continue
                self._keep.append(node)
                if not self.descend(node):
                    memo[id(node)] = self.rewrite(node, node)
                elif isinstance(node, Let):
                    stack.append((node, _BOUND))
                    stack.append((node.value, _ENTER))
                else:
                    stack.append((node, _BUILD))
                    stack.extend((c, _ENTER) for c in reversed(_visited(node)))
            elif state == _BOUND:
                assert isinstance(node, Let)
                self.enter_let(node, memo[id(node.value)])  # type: ignore[arg-type]
                stack.append((node, _BUILD))
                stack.append((node.body, _ENTER))
            else:
                if isinstance(node, Let):
                    self.leave_let(node)
                    kids: tuple[Node, ...] = (
                        node.var,
                        memo[id(node.value)],
                        memo[id(node.body)],
                    )
                elif isinstance(node, Function):
                    kids = (*node.params, memo[id(node.body)])
                elif isinstance(node, Clause):
                    kids = (node.lhs, memo[id(node.rhs)])
                else:
                    kids = tuple(memo[id(c)] for c in children(node))
                memo[id(node)] = self.rewrite(node, rebuild(node, kids))
        return memo[id(root)]


class UseCountingMutator(BindingMutator):
    """A :class:`BindingMutator` that leaves primitive functions alone and knows, in
    :attr:`uses`, how many parents read each node (by ``id``) of the function it visits: a
    rewrite that would have a shared value computed twice can decline."""

    def __init__(self) -> None:
        super().__init__()
        self.uses: Counter[int] = Counter()

    def descend(self, node: Node) -> bool:
        return not is_primitive(node)

    def visit(self, root: Node) -> AnyT:
        for node in post_order(root, descend=self.descend):
            for kid in children(node):
                self.uses[id(kid)] += 1
        return super().visit(root)


def rewrite_module(
    mod: IRModule, wanted: Callable[[Node], bool], make: Callable[[], BindingMutator]
) -> IRModule:
    """``mod`` type-checked, with every function rewritten by a fresh ``make()`` (rewriters
    read the ``_checked_type`` of the original nodes); a plain copy, not type-checked, when
    no node outside the primitive functions is ``wanted``."""

    outside = lambda node: not is_primitive(node)  # noqa: E731
    if not any(wanted(n) for f in mod.functions.values() for n in post_order(f, descend=outside)):
        return mod.copy()
    typed = InferType()(mod)
    out = typed.copy()
    for gvar, func in typed.functions.items():
        out[gvar] = make().visit(func)
    return out


def map_functions(mod: IRModule, rewrite: Callable[[Function], Function]) -> IRModule:
    """A copy of ``mod`` with each function but the primitive ones replaced by
    ``rewrite(function)``; the type definitions are kept.

    Parameters
    ----------
    mod : IRModule
        The module; it is not modified.
    rewrite : callable
        Takes a function and returns its replacement.
    """
    out = mod.copy()
    for gvar, func in mod.functions.items():
        out[gvar] = func if is_primitive(func) else rewrite(func)
    return out
