"""Name resolution in nested ONNX graphs: a subgraph sees its own values, then its
enclosing graphs' values.

Compiler layer (``compiler.frontend``); does not import ``onnx``. The branches of ``If``
and the bodies of ``Loop`` and ``Scan`` may use any value of the graphs around them by
name. A branch uses them as they are. A loop body becomes a recursive function that runs
once per iteration, so a computed value it reads from outside is read through a variable
instead (a *capture*): the value is computed once, before the loop, and the function
closes over it rather than recomputing it at every step.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping

from compiler.frontend.onnx_context import Value
from compiler.ir.expr import Var


def capture(value: Value, captures: list[tuple[Var, Value]], name: str = "captured") -> Value:
    """``value`` as a loop function reads it: itself if it is a variable or a constant,
    else a fresh variable named ``name`` standing for it, appended to ``captures`` (bound
    before the loop, so the value is computed once)."""
    if isinstance(value.expr, Var) or value.is_constant:
        return value
    var = Var(name, value.type)
    captures.append((var, value))
    return Value(var, value.type, value.static)


class Scope(MutableMapping[str, Value]):
    """The values of one subgraph, over those of the graph enclosing it.

    Parameters
    ----------
    parent : mapping of str to Value
        The enclosing graph's values (itself a :class:`Scope` for nested subgraphs).
    captures : list of (Var, Value), optional
        Where to record captures; ``None`` reads enclosing values as they are.
    bindings : dict of Var to Value, optional
        Every capture variable and the value it stands for is also recorded here (the
        importer evaluates through them).
    """

    def __init__(
        self,
        parent: MutableMapping[str, Value],
        captures: list[tuple[Var, Value]] | None,
        bindings: dict[Var, Value] | None = None,
    ) -> None:
        self._local: dict[str, Value] = {}
        self._parent = parent
        self._captures = captures
        self._bindings = bindings if bindings is not None else {}
        self._captured: dict[str, Value] = {}

    def __getitem__(self, name: str) -> Value:
        local = self._local.get(name)
        if local is not None:
            return local
        outer = self._parent[name]
        if self._captures is None:
            return outer
        captured = self._captured.get(name)
        if captured is None:
            captured = capture(outer, self._captures, name)
            self._captured[name] = captured
            if captured is not outer:
                self._bindings[captured.expr] = outer  # type: ignore[index]
        return captured

    def __contains__(self, name: object) -> bool:
        return name in self._local or name in self._parent

    def __setitem__(self, name: str, value: Value) -> None:
        self._local[name] = value

    def __delitem__(self, name: str) -> None:
        del self._local[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._local)

    def __len__(self) -> int:
        return len(self._local)
