"""What the IR needs from the layers above it, plugged in by those layers when they load.

Compiler layer (``compiler.ir``), the lowest one: nothing in ``compiler.ir`` imports another
part of the compiler. Yet a node prints itself in the Relay text format (``compiler.text``),
``x + y`` builds a call to the ``add`` operator and structural equality fills in operator
attribute defaults (both ``compiler.op``). ``compiler/__init__.py``, which runs before any
``compiler`` module, registers stand-ins that load the printer or the operator table on first
use; those modules register their own functions in place of the stand-ins when they load.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any as AnyT

# The plugged-in functions, read at call time by compiler.ir.expr, .types, .module and
# .structural. compiler/__init__.py registers first, before any of them can be called.
# expr_to_text and module_to_text also take show_meta_data (a bool) after the node.
expr_to_text: Callable[..., str]
type_to_text: Callable[[object], str]
module_to_text: Callable[..., str]
get_op: Callable[[str], AnyT]
normalize_op_attrs: Callable[[str, Mapping[str, object]], Mapping[str, object]]


def register_printer(
    expr: Callable[..., str], type_: Callable[[object], str], module: Callable[..., str]
) -> None:
    """Install the functions that print expressions, types and modules as Relay text.

    Parameters
    ----------
    expr, type_, module : callable
        ``expr_to_text``, ``type_to_text`` and ``module_to_text`` of :mod:`compiler.text.printer`
        (or stand-ins that load it).
    """
    global expr_to_text, type_to_text, module_to_text
    expr_to_text, type_to_text, module_to_text = expr, type_, module


def register_operators(
    lookup: Callable[[str], AnyT],
    normalize_attrs: Callable[[str, Mapping[str, object]], Mapping[str, object]],
) -> None:
    """Install the operator table's lookup (``Op`` by name) and its attribute normalizer.

    Parameters
    ----------
    lookup : callable
        ``name -> Op``; raises ``ValueError`` for an unknown name.
    normalize_attrs : callable
        ``(name, attrs) -> attrs`` with the operator's defaults filled in; raises
        ``TypeError`` or ``ValueError`` when the attributes do not fit the operator.
    """
    global get_op, normalize_op_attrs
    get_op, normalize_op_attrs = lookup, normalize_attrs
