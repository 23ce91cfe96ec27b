"""The Relay text format (TVM's version 0.0.5): parser, printer and their pieces.

Compiler layer (``compiler.text``). :func:`fromtext` / :func:`parse_expr` read text into
the IR of :mod:`compiler.ir`; :func:`module_to_text` / :func:`expr_to_text` /
:func:`type_to_text` write it back (``str(mod)`` and ``mod.astext()`` use them). Printed
text parses back to a structurally equal program. Modules: ``errors`` (positions and
:class:`RelaySyntaxError`), ``lexer``, ``literals`` (scalar literal forms), ``metadata``
(the ``#[metadata]`` section), ``trampoline`` (recursion on an explicit stack),
``parser`` and ``printer``.
"""

from compiler.text.errors import RelaySyntaxError
from compiler.text.parser import fromtext, parse, parse_expr, parse_type
from compiler.text.printer import expr_to_text, module_to_text, type_to_text

__all__ = [
    "RelaySyntaxError",
    "expr_to_text",
    "fromtext",
    "module_to_text",
    "parse",
    "parse_expr",
    "parse_type",
    "type_to_text",
]
