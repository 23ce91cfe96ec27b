"""The error raised for an ill-typed program.

Compiler layer (``compiler.typing``). Exported to users as ``relay.RelayTypeError``.
"""

from __future__ import annotations

from compiler.ir.expr import Node
from compiler.ir.types import Type


class RelayTypeError(TypeError):
    """A program does not type-check.

    The message names the expression (as Relay text), its source position when known
    (``line:col``), what type was expected and what was found.

    Attributes
    ----------
    node : Node or None
        The expression (or pattern) the error is about.
    expected, found : Type or None
        The two types that did not agree, when the error is a mismatch.
    """

    def __init__(
        self,
        message: str,
        node: Node | None = None,
        expected: Type | None = None,
        found: Type | None = None,
    ) -> None:
        super().__init__(message)
        self.node = node
        self.expected = expected
        self.found = found
