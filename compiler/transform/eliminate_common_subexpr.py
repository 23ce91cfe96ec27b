"""``EliminateCommonSubexpr``: compute each repeated operator call once.

Compiler layer (``compiler.transform``).

Two operator calls are the same computation when they call the same registered operator
with equal attributes (compared with defaults filled in) on the same argument nodes, after
earlier merges (so chains of repeated calls merge from the inputs down). Small constants
(up to :data:`CONSTANT_KEY_LIMIT` elements) count as the same argument when their dtype,
shape and bits agree, so ``add(%x, 1f)`` written twice merges too. Tuple projections of the
same tuple at the same index merge the same way. Operator calls are pure, so merging never
changes what a program computes.

How a repeat is merged depends on where the first occurrence lives:

- dataflow form (nested calls): the later call is replaced by the earlier call node, so the
  node is shared and later lowering (A-normal form) binds it once where it is visible;
- ``let %a = <call>`` (A-normal form): a later identical call inside the scope of ``%a``
  becomes ``%a``, and ``let %b = <same call>; body`` becomes ``body`` with ``%a`` for ``%b``.
  Outside the scope of ``%a`` (a sibling ``if`` branch, after a local function) a let-bound
  call is not reused.

Operators outside the registry are never merged (their effects are unknown), nor is
anything ``fskip(call)`` returns True for, nor anything inside a primitive function.
"""

from __future__ import annotations

from collections.abc import Callable

from compiler.ir.attrs import Attrs
from compiler.ir.expr import Call, Constant, Expr, Let, Node, Op, TupleGetItem, Var
from compiler.ir.module import IRModule
from compiler.op.registry import get_def
from compiler.transform.pass_manager import Pass, PassContext
from compiler.transform.rewriter import BindingMutator, is_primitive

__all__ = ["CONSTANT_KEY_LIMIT", "EliminateCommonSubexpr", "eliminate_common_subexpr"]

#: Constants with at most this many elements are compared by value, larger ones by identity.
CONSTANT_KEY_LIMIT = 64

Key = tuple


class _Eliminator(BindingMutator):
    def __init__(self, fskip: Callable[[Expr], bool] | None) -> None:
        super().__init__()
        self.fskip = fskip
        self.table: dict[Key, Expr] = {}
        # For each open let: the (key, previous entry) pairs to restore when its scope ends.
        self.undo: dict[Let, list[tuple[Key, Expr | None]]] = {}
        self.alias: dict[Var, Expr] = {}
        self.attrs: dict[tuple[str, object], Attrs | None] = {}

    def descend(self, node: Node) -> bool:
        return not is_primitive(node)

    def _normalized(self, call: Call) -> Attrs | None:
        """The call's attributes with defaults filled, or None for an unknown operator."""
        name = call.op.name  # type: ignore[attr-defined]
        try:
            cache_key: tuple[str, object] = (name, call.attrs)
            hash(cache_key)
        except TypeError:
            return None  # an attribute value that cannot be compared: never merged
        if cache_key in self.attrs:
            return self.attrs[cache_key]
        attrs: Attrs | None
        try:
            attrs = get_def(name).normalize_attrs(call.attrs)
            hash(attrs)
        except (ValueError, TypeError):
            attrs = None  # unknown operator or unusable attributes: never merged
        self.attrs[cache_key] = attrs
        return attrs

    def key(self, expr: Expr) -> Key | None:
        """The identity of the computation ``expr``, or None if it is not merged."""
        if isinstance(expr, TupleGetItem):
            return ("proj", _arg_key(expr.tuple_value), expr.index)
        if not isinstance(expr, Call) or not isinstance(expr.op, Op):
            return None
        attrs = self._normalized(expr)
        if attrs is None or (self.fskip is not None and self.fskip(expr)):
            return None
        return ("call", expr.op.name, attrs, tuple(_arg_key(a) for a in expr.args))

    def enter_let(self, let: Let, value: Expr) -> None:
        if isinstance(value, Var) and not isinstance(let.value, Var):
            # The bound call repeats one already bound to a variable in scope.
            self.alias[let.var] = value
            return
        key = self.key(value)
        if key is None:
            return
        self.undo[let] = [(key, self.table.get(key))]
        self.table[key] = let.var

    def leave_let(self, let: Let) -> None:
        for key, previous in self.undo.pop(let, ()):
            if previous is None:
                self.table.pop(key, None)
            else:
                self.table[key] = previous

    def rewrite(self, old: Node, new: Node) -> Node:
        if isinstance(new, Var):
            return self.alias.get(new, new)
        if isinstance(new, Let):
            return new.body if old.var in self.alias else new  # type: ignore[attr-defined]
        if isinstance(new, (Call, TupleGetItem)):
            key = self.key(new)
            if key is None:
                return new
            found = self.table.get(key)
            if found is not None:
                return found
            self.table[key] = new
        return new


def _arg_key(arg: Expr) -> object:
    if isinstance(arg, Constant) and arg.data.size <= CONSTANT_KEY_LIMIT:
        data = arg.data
        return ("const", data.dtype.str, data.shape, data.tobytes())
    return id(arg)


def eliminate_common_subexpr(
    mod: IRModule, fskip: Callable[[Expr], bool] | None = None
) -> IRModule:
    """Merge repeated operator calls in every function of ``mod``.

    Parameters
    ----------
    mod : IRModule
        The module; it is not modified.
    fskip : callable, optional
        ``fskip(call) -> bool``: True keeps that call out of merging.

    Returns
    -------
    IRModule
        A new module with the same globals and type definitions.
    """
    out = mod.copy()
    for gvar, func in mod.functions.items():
        out[gvar] = _Eliminator(fskip).visit(func)
    return out


class EliminateCommonSubexpr(Pass):
    """Merge structurally identical operator calls (TVM's ``EliminateCommonSubexpr``,
    ``opt_level=3``). See :mod:`compiler.transform.eliminate_common_subexpr`.

    Parameters
    ----------
    fskip : callable, optional
        ``fskip(call) -> bool``: True keeps that call out of merging.
    """

    def __init__(self, fskip: Callable[[Expr], bool] | None = None) -> None:
        if fskip is not None and not callable(fskip):
            raise TypeError(f"EliminateCommonSubexpr fskip must be callable, got {fskip!r}")
        super().__init__("EliminateCommonSubexpr", opt_level=3)
        self.fskip = fskip

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return eliminate_common_subexpr(mod, self.fskip)

    def __repr__(self) -> str:
        return "EliminateCommonSubexpr()"
