"""Well-formedness of written types: every name they use must be bound.

Compiler layer (``compiler.typing``).

A type annotation may mention type variables bound by an enclosing function's type
parameters (or by a function type's own parameters), and ADTs defined in the module,
applied to as many type arguments as the definition declares. Constructor fields may
mention only their ADT's type parameters.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from compiler.ir.expr import Constructor
from compiler.ir.types import FuncType, GlobalTypeVar, Type, TypeCall, TypeData, TypeVar
from compiler.typing.errors import RelayTypeError
from compiler.typing.typeops import type_children


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def type_problem(
    ty: Type,
    in_scope: Collection[TypeVar],
    type_defs: Mapping[GlobalTypeVar, TypeData],
) -> str | None:
    """Why ``ty`` is not well formed, or ``None`` when it is.

    Parameters
    ----------
    ty : Type
        The written type.
    in_scope : collection of TypeVar
        The type variables bound around it.
    type_defs : mapping of GlobalTypeVar to TypeData
        The module's ADTs.
    """
    stack: list[tuple[Type, frozenset[TypeVar]]] = [(ty, frozenset())]
    while stack:
        t, local = stack.pop()
        if isinstance(t, TypeVar):
            if t not in local and t not in in_scope:
                return (
                    f"unbound type variable {t.name_hint}: it is not a type parameter of "
                    "an enclosing function or type"
                )
            continue
        if isinstance(t, (GlobalTypeVar, TypeCall)):
            header = t if isinstance(t, GlobalTypeVar) else t.func
            nargs = 0 if isinstance(t, GlobalTypeVar) else len(t.args)
            data = type_defs.get(header)
            if data is None:
                return f"unknown type {header.name_hint}: it is not defined in the module"
            if len(data.type_vars) != nargs:
                return (
                    f"type {header.name_hint} expects "
                    f"{_plural(len(data.type_vars), 'type argument')}, found {nargs}"
                )
        if isinstance(t, FuncType) and t.type_params:
            local = local | frozenset(t.type_params)
        stack.extend((k, local) for k in reversed(type_children(t)))
    return None


def check_type_definitions(type_defs: Mapping[GlobalTypeVar, TypeData]) -> None:
    """Raise :class:`RelayTypeError` if a constructor's fields use an unbound type."""
    for header, data in type_defs.items():
        for ctor in data.constructors:
            assert isinstance(ctor, Constructor)
            if ctor.belong_to != header:
                raise RelayTypeError(
                    f"constructor {ctor.name_hint} is listed in type {header.name_hint} "
                    f"but says it belongs to type {ctor.belong_to.name_hint}",
                    ctor,
                )
            for i, field in enumerate(ctor.inputs):
                problem = type_problem(field, data.type_vars, type_defs)
                if problem is not None:
                    raise RelayTypeError(
                        f"field {i} of constructor {ctor.name_hint} of type "
                        f"{header.name_hint}: {problem}",
                        ctor,
                    )
