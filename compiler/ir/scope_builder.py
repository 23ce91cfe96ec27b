"""TVM's ``relay.ScopeBuilder``: write ``let`` chains and ``if`` branches in statement form.

Compiler layer (``compiler.ir``).

::

    sb = relay.ScopeBuilder()
    t = sb.let("t", relay.add(x, y))
    with sb.if_scope(relay.less(t, relay.const(0.0))):
        sb.ret(relay.negative(t))
    with sb.else_scope():
        sb.ret(t)
    body = sb.get()   # let %t = add(%x, %y); if (less(%t, 0f)) { negative(%t) } else { %t }

Each scope gathers its bindings and one result (:meth:`ScopeBuilder.ret`); an ``if`` scope
and the ``else`` scope after it become the result of the scope around them. Misuse (a second
result, an ``else`` with no ``if`` before it, ``get`` inside a scope or with no result) is
refused naming what was wrong.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from compiler.ir.expr import Expr, If, Let, Var, var

__all__ = ["ScopeBuilder"]


class _PendingIf:
    """An ``if`` scope's condition and branch, waiting for its ``else`` scope."""

    def __init__(self, cond: Expr, true_branch: Expr) -> None:
        self.cond = cond
        self.true_branch = true_branch


def _lets(bindings: list[tuple[Var, Expr]], result: Expr) -> Expr:
    """``let`` the ``bindings`` in order around ``result`` (built inside out, no recursion)."""
    for bound, value in reversed(bindings):
        result = Let(bound, value, result)
    return result


class ScopeBuilder:
    """Build nested ``let`` and ``if`` expressions scope by scope (see the module doc)."""

    def __init__(self) -> None:
        self._bindings: list[list[tuple[Var, Expr]]] = [[]]
        self._results: list[Expr | _PendingIf | None] = [None]

    def let(self, name: str | tuple | Var, value: Expr) -> Var:
        """Bind ``value`` to a new variable in the current scope and return it.

        Parameters
        ----------
        name : str, (str, type) or Var
            The variable's name (with its type annotation), or the variable itself.
        value : Expr
            The bound expression.
        """
        if isinstance(name, Var):
            bound = name
        elif isinstance(name, str):
            bound = var(name)
        elif isinstance(name, (tuple, list)) and len(name) == 2 and isinstance(name[0], str):
            bound = var(*name)
        else:
            raise ValueError(
                f"ScopeBuilder.let: name must be a str, a (str, type) pair or a Var, got {name!r}"
            )
        if not isinstance(value, Expr):
            raise TypeError(
                f"ScopeBuilder.let: the value bound to {bound.name_hint!r} must be a relay "
                f"expression, got {type(value).__name__}"
            )
        self._bindings[-1].append((bound, value))
        return bound

    def ret(self, value: Expr) -> None:
        """Make ``value`` the result of the current scope (once per scope)."""
        if self._results[-1] is not None:
            raise RuntimeError("ScopeBuilder.ret: this scope already has its result")
        if not isinstance(value, Expr):
            raise TypeError(
                f"ScopeBuilder.ret: the result must be a relay expression, got "
                f"{type(value).__name__}"
            )
        self._results[-1] = value

    def _enter(self) -> None:
        self._bindings.append([])
        self._results.append(None)

    def _close(self, what: str) -> Expr:
        bindings, result = self._bindings.pop(), self._results.pop()
        if not isinstance(result, Expr):
            raise RuntimeError(f"ScopeBuilder: the {what} scope ended without sb.ret(...)")
        return _lets(bindings, result)

    @contextmanager
    def if_scope(self, cond: Expr) -> Iterator[None]:
        """A scope whose bindings and result are the true branch of ``if (cond)``; an
        :meth:`else_scope` must follow it."""
        if self._results[-1] is not None:
            raise RuntimeError("ScopeBuilder.if_scope: this scope already has its result")
        self._enter()
        try:
            yield
        except BaseException:
            # The scope's statements failed: drop the scope, so the builder stays usable.
            self._bindings.pop()
            self._results.pop()
            raise
        branch = self._close("if")
        self._results[-1] = _PendingIf(cond, branch)

    @contextmanager
    def else_scope(self) -> Iterator[None]:
        """The false branch of the :meth:`if_scope` just closed."""
        pending = self._results[-1]
        if not isinstance(pending, _PendingIf):
            raise RuntimeError("ScopeBuilder.else_scope must follow an if_scope")
        self._enter()
        try:
            yield
        except BaseException:
            # The scope's statements failed: drop the scope, so the builder stays usable.
            self._bindings.pop()
            self._results.pop()
            raise
        branch = self._close("else")
        self._results[-1] = If(pending.cond, pending.true_branch, branch)

    def get(self) -> Expr:
        """The expression built: the outermost scope's bindings around its result."""
        if len(self._bindings) != 1:
            raise RuntimeError("ScopeBuilder.get: call it outside every if/else scope")
        result = self._results[-1]
        if isinstance(result, _PendingIf):
            raise RuntimeError("ScopeBuilder.get: the if_scope has no else_scope")
        if result is None:
            raise RuntimeError("ScopeBuilder.get: the scope has no result; call sb.ret(...)")
        return _lets(self._bindings[-1], result)
