"""Deferred constraints of type inference: operator relations and tuple projections.

Compiler layer (``compiler.typing``).

An operator's type relation needs fully known argument types, and a projection
``%t.1`` needs to know that ``%t`` is a tuple. When inference reaches such a node
before those types are known (an unannotated parameter typed by a later call, a
recursive global whose return type is still open), it records a constraint whose
result is a fresh incomplete type and solves it later, TVM-style, in a worklist run to
a fixpoint. Once solved, a constraint can be re-run with more general argument types
(a dimension that turned out to be ``?``); :meth:`Constraint.refresh` does that, so
the final types never claim more than the program guarantees.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence

from compiler.ir.attrs import Attrs
from compiler.ir.expr import Call, TupleGetItem
from compiler.ir.types import IncompleteType, TupleType, Type
from compiler.op.registry import OpDef, OpTypeError
from compiler.typing.display import expr_text, type_text, where
from compiler.typing.errors import RelayTypeError
from compiler.typing.typeops import same_type
from compiler.typing.unify import Mismatch, Solver


class Constraint(abc.ABC):
    """A relation between some input types and the incomplete ``result`` type."""

    result: IncompleteType
    solved: bool = False

    @abc.abstractmethod
    def ready(self, solver: Solver) -> bool:
        """Whether enough is known to solve it."""

    @abc.abstractmethod
    def solve(self, solver: Solver) -> None:
        """Solve (or re-solve) it; raises :class:`RelayTypeError` if the program is ill-typed."""

    @abc.abstractmethod
    def refresh(self, solver: Solver) -> bool:
        """Re-solve if its inputs changed since the last solve; whether the result changed."""

    @abc.abstractmethod
    def unresolved_error(self, solver: Solver) -> RelayTypeError:
        """The error reported when inference ends with this constraint unsolved."""


class OpConstraint(Constraint):
    """``result = type_rel(arg_types, attrs)`` for one operator call."""

    def __init__(
        self,
        call: Call,
        opdef: OpDef,
        attrs: Attrs,
        arg_types: Sequence[Type],
        context: str | None,
    ) -> None:
        self.call = call
        self.opdef = opdef
        self.attrs = attrs
        self.arg_types = tuple(arg_types)
        self.result = IncompleteType()
        self.context = context
        self._last_args: list[Type] | None = None

    def ready(self, solver: Solver) -> bool:
        return all(solver.is_resolved(t) for t in self.arg_types)

    def solve(self, solver: Solver) -> None:
        args = [solver.zonk(t) for t in self.arg_types]
        self._apply(solver, args)

    def _apply(self, solver: Solver, args: list[Type]) -> None:
        at = where(self.call, self.context)
        try:
            out = self.opdef.type_rel(args, self.attrs)
        except (OpTypeError, TypeError, ValueError) as exc:
            found = ", ".join(type_text(a) for a in args)
            raise RelayTypeError(
                f"type error{at} in `{expr_text(self.call)}`: {exc} (argument types: {found})",
                self.call,
            ) from None
        try:
            solver.unify(self.result, out)
        except Mismatch as exc:
            raise RelayTypeError(
                f"type mismatch{at} in `{expr_text(self.call)}`: the operator gives "
                f"{type_text(out)}, but the call is used as "
                f"{type_text(solver.zonk(self.result))} ({exc.detail})",
                self.call,
                solver.zonk(self.result),
                out,
            ) from None
        self._last_args = args
        self.solved = True

    def refresh(self, solver: Solver) -> bool:
        args = [solver.zonk(t) for t in self.arg_types]
        last = self._last_args
        if last is not None and all(same_type(a, b) for a, b in zip(args, last)):
            return False
        before = solver.zonk(self.result)
        self._apply(solver, args)
        return not same_type(before, solver.zonk(self.result))

    def unresolved_error(self, solver: Solver) -> RelayTypeError:
        for i, t in enumerate(self.arg_types):
            if not solver.is_resolved(t):
                arg = self.call.args[i]
                return RelayTypeError(
                    f"cannot infer the type of argument {i} (`{expr_text(arg)}`) of "
                    f"`{expr_text(self.call)}`{where(self.call, self.context)}: it is only known "
                    f"to be {type_text(solver.zonk(t))}, and operator {self.opdef.name} needs "
                    "the exact type of every argument; add a type annotation",
                    self.call,
                )
        raise AssertionError("an unresolved operator constraint has resolved arguments")


class ProjectionConstraint(Constraint):
    """``result = tuple_type.fields[index]`` for one ``TupleGetItem``."""

    def __init__(self, node: TupleGetItem, tuple_type: Type, context: str | None) -> None:
        self.node = node
        self.tuple_type = tuple_type
        self.result = IncompleteType()
        self.context = context
        self._last: Type | None = None

    def ready(self, solver: Solver) -> bool:
        return not isinstance(solver.shallow(self.tuple_type), IncompleteType)

    def solve(self, solver: Solver) -> None:
        node = self.node
        at = where(node, self.context)
        t = solver.shallow(self.tuple_type)
        if not isinstance(t, TupleType):
            raise RelayTypeError(
                f"cannot project field {node.index}{at} in `{expr_text(node)}`: "
                f"`{expr_text(node.tuple_value)}` has type {type_text(solver.zonk(t))}, "
                "expected a tuple",
                node,
                None,
                solver.zonk(t),
            )
        n = len(t.fields)
        if not 0 <= node.index < n:
            raise RelayTypeError(
                f"tuple index out of range{at} in `{expr_text(node)}`: index {node.index}, "
                f"but `{expr_text(node.tuple_value)}` has type {type_text(solver.zonk(t))} "
                f"with {n} field{'s' if n != 1 else ''}",
                node,
                None,
                solver.zonk(t),
            )
        field = t.fields[node.index]
        try:
            solver.unify(self.result, field)
        except Mismatch as exc:
            raise RelayTypeError(
                f"type mismatch{at} in `{expr_text(node)}`: the field has type "
                f"{type_text(solver.zonk(field))}, but the projection is used as "
                f"{type_text(solver.zonk(self.result))} ({exc.detail})",
                node,
            ) from None
        self._last = solver.zonk(self.tuple_type)
        self.solved = True

    def refresh(self, solver: Solver) -> bool:
        now = solver.zonk(self.tuple_type)
        if self._last is not None and same_type(now, self._last):
            return False
        before = solver.zonk(self.result)
        self.solve(solver)
        return not same_type(before, solver.zonk(self.result))

    def unresolved_error(self, solver: Solver) -> RelayTypeError:
        node = self.node
        return RelayTypeError(
            f"cannot infer the type of `{expr_text(node.tuple_value)}` in "
            f"`{expr_text(node)}`{where(node, self.context)}: projecting field {node.index} "
            "needs to know it is a tuple and how many fields it has; add a type annotation",
            node,
        )
