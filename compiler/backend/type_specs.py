"""Relay types as the plain-data type specs of ``vm.program`` that the VM checks arguments with.

Compiler layer (``compiler.backend``).

Mapping: ``Tensor[(2, ?), float32]`` -> ``("tensor", (2, -1), "float32")``; a tuple type ->
``("tuple", (spec, ...))``; an algebraic data type (``List[A]``) -> ``("adt", "List", (a,))``
with its type arguments; a function type -> ``("func", (param spec, ...), result spec)``; a
type variable -> ``("var", n)``, numbered in order of first appearance within one scope (a
function's parameter and result types, or a type definition's parameters), so the VM can
check that a caller-made value uses each variable consistently. A function type with type
parameters of its own stays ``("func",)`` (its signature is not checked).

Also here: flattening a (possibly nested) tuple type into its tensor leaves,
which is how kernels see tuple inputs and outputs.
"""

from __future__ import annotations

from compiler.ir.types import (
    Any,
    FuncType,
    GlobalTypeVar,
    IncompleteType,
    TensorType,
    TupleType,
    Type,
    TypeCall,
    TypeVar,
)
from vm.program import TypeSpec


def type_spec(ty: Type, type_vars: dict[TypeVar, int] | None = None) -> TypeSpec:
    """The ``vm.program`` type spec of ``ty``.

    Parameters
    ----------
    ty : Type
        The type.
    type_vars : dict of TypeVar to int, optional
        The numbering of the scope's type variables; a variable not in it gets the next
        number (and is added), so calls sharing one dict number variables consistently.

    Raises
    ------
    TypeError
        If ``ty`` is not a type a VM value can have (an unsolved ``IncompleteType``).
    """
    if type_vars is None:
        type_vars = {}
    results: dict[int, TypeSpec] = {}
    stack: list[tuple[Type, bool]] = [(ty, False)]
    while stack:
        node, expanded = stack.pop()
        if isinstance(node, TupleType):
            if not expanded:
                stack.append((node, True))
                stack.extend((f, False) for f in reversed(node.fields))
                continue
            results[id(node)] = ("tuple", tuple(results[id(f)] for f in node.fields))
        elif isinstance(node, TensorType):
            dims = tuple(-1 if isinstance(d, Any) else int(d) for d in node.shape)
            results[id(node)] = ("tensor", dims, node.dtype)
        elif isinstance(node, TypeCall):
            if not expanded:
                stack.append((node, True))
                stack.extend((a, False) for a in reversed(node.args))
                continue
            args = tuple(results[id(a)] for a in node.args)
            results[id(node)] = ("adt", node.func.name_hint, args)
        elif isinstance(node, GlobalTypeVar):
            results[id(node)] = ("adt", node.name_hint, ())
        elif isinstance(node, FuncType):
            if node.type_params:
                results[id(node)] = ("func",)
                continue
            if not expanded:
                stack.append((node, True))
                stack.extend((a, False) for a in reversed((*node.arg_types, node.ret_type)))
                continue
            params = tuple(results[id(a)] for a in node.arg_types)
            results[id(node)] = ("func", params, results[id(node.ret_type)])
        elif isinstance(node, TypeVar):
            results[id(node)] = ("var", type_vars.setdefault(node, len(type_vars)))
        elif isinstance(node, IncompleteType):
            raise TypeError(
                "a type was left unsolved by type inference; cannot describe it to the VM"
            )
        else:
            raise TypeError(f"cannot describe type {type(node).__name__} to the VM")
    return results[id(ty)]


def tensor_leaves(ty: Type) -> list[TensorType]:
    """The tensor types of a tensor or (nested) tuple type, depth first, left to right.

    Raises
    ------
    TypeError
        If a leaf is not a tensor type (kernels only take and produce tensors).
    """
    out: list[TensorType] = []
    stack: list[Type] = [ty]
    while stack:
        node = stack.pop()
        if isinstance(node, TupleType):
            stack.extend(reversed(node.fields))
        elif isinstance(node, TensorType):
            out.append(node)
        else:
            raise TypeError(f"expected a tensor or a tuple of tensors, found {node}")
    return out
