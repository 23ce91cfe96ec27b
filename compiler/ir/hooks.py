"""What the IR needs from the layers above it, plugged in by those layers when they load.

Compiler layer (``compiler.ir``), the lowest one: nothing in ``compiler.ir`` imports another
part of the compiler. Yet a node prints itself in the Relay text format (``compiler.text``),
``x + y`` builds a call to the ``add`` operator and structural equality fills in operator
attribute defaults (both ``compiler.op``). Those modules call :func:`register_printer` and
:func:`register_operators` as they are imported, and ``compiler/__init__.py`` imports both, so
any import of a ``compiler`` module leaves the IR complete.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any as AnyT

_MISSING = (
    "compiler.ir was loaded without {what}; import it through the compiler package "
    "(compiler/__init__.py registers it)"
)


def _missing(what: str) -> Callable[..., AnyT]:
    def fail(*_args: object, **_kwargs: object) -> AnyT:
        raise RuntimeError(_MISSING.format(what=what))

    return fail


# The plugged-in functions, read at call time by compiler.ir.expr, .types, .module, .structural.
expr_to_text: Callable[[object], str] = _missing("the text printer")
type_to_text: Callable[[object], str] = _missing("the text printer")
module_to_text: Callable[[object], str] = _missing("the text printer")
get_op: Callable[[str], AnyT] = _missing("the operator table")
normalize_op_attrs: Callable[[str, Mapping[str, object]], Mapping[str, object]] = _missing(
    "the operator table"
)


def register_printer(
    expr: Callable[[object], str], type_: Callable[[object], str], module: Callable[[object], str]
) -> None:
    """Install the functions that print expressions, types and modules as Relay text.

    Parameters
    ----------
    expr, type_, module : callable
        ``expr_to_text``, ``type_to_text`` and ``module_to_text`` of :mod:`compiler.text.printer`.
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
