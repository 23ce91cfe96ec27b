"""Helpers shared by the operator definition modules (``defs_*.py``).

Compiler layer (``compiler.op``). :func:`define` registers an :class:`OpDef` with its
argument count and arity check and the attribute schema of the operator's kernel rule, and
wraps its numpy reference so that every output is a fresh C-contiguous array sharing no
memory with the inputs, and every run-time shape failure (a ``?`` dimension whose value
breaks a shape rule) is a ``ValueError`` naming the operator.
:func:`result` gives a reference's output exactly the dtype the type relation promised
(numpy otherwise hands back 0-d results as scalars and widens small integer reductions).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from compiler.ir.attrs import Attrs
from compiler.ir.types import Type
from compiler.op.registry import OpDef, OpPattern, OpTypeError, register_op
from compiler.op.typerel import check_arity
from vm.kernels.table import get_rule
from vm.ndarray import immutable

TypeRel = Callable[[Sequence[Type], Attrs], Type]
Reference = Callable[[Sequence[np.ndarray], Attrs], object]


def define(
    name: str,
    arg_names: Sequence[str],
    type_rel: TypeRel,
    reference: Reference,
    pattern: OpPattern,
    doc: str = "",
) -> OpDef:
    """Register operator ``name``, with the attribute schema of its kernel rule.

    The schema (names, kinds, defaults) is written once, in the operator's rule in
    ``vm/kernels/emit_*.py``, and read from :mod:`vm.kernels.table`; an operator without a
    rule cannot be defined.
    The registered type relation checks the argument count and the reference fills in
    attribute defaults first, so both also work on a ``Call`` built by hand with partial
    attributes; a malformed attribute is reported as an :class:`OpTypeError`.
    """
    count = len(arg_names)
    rule = get_rule(name)
    if rule is None:
        raise ValueError(
            f"operator {name} has no kernel rule in vm.kernels.table to take its schema"
        )
    specs = rule.attrs
    opdef: OpDef

    def full_attrs(call_attrs: Attrs) -> Attrs:
        if len(call_attrs) == len(specs) and all(s.name in call_attrs for s in specs):
            return call_attrs  # already normalized (builders and the parser do this)
        return opdef.normalize_attrs(call_attrs)

    def owned_reference(args: Sequence[np.ndarray], call_attrs: Attrs) -> object:
        try:
            return _owned(reference(args, full_attrs(call_attrs)))
        except OpTypeError as exc:
            # The call type-checked, so a shape rule failing now means a ``?`` dimension
            # took a value the static shapes could not rule out: a run-time error.
            raise ValueError(str(exc)) from None
        except ValueError as exc:
            message = str(exc)
            if message.startswith(f"{name}: "):
                raise
            # numpy's own shape complaints (broadcasting, concatenation) gain the op's name.
            raise ValueError(f"{name}: {message}") from None

    owned_reference.__name__ = getattr(reference, "__name__", "reference")
    owned_reference.__doc__ = getattr(reference, "__doc__", None)

    def checked_rel(arg_types: Sequence[Type], call_attrs: Attrs) -> Type:
        check_arity(name, arg_types, count)
        try:
            normalized = full_attrs(call_attrs)
        except OpTypeError:
            raise
        except TypeError as exc:
            raise OpTypeError(str(exc)) from None
        return type_rel(arg_types, normalized)

    checked_rel.__name__ = f"{name.replace('.', '_')}_rel"
    checked_rel.__doc__ = getattr(type_rel, "__doc__", None)
    opdef = OpDef(
        name=name,
        num_inputs=count,
        type_rel=checked_rel,
        reference=owned_reference,
        attrs=specs,
        pattern=pattern,
        doc=doc,
        arg_names=tuple(arg_names),
    )
    return register_op(opdef)


def _owned(value: object) -> object:
    """Outputs are fresh C-contiguous arrays, or read-only views of memory nothing writes:
    never views through which a caller's data could change, safe for callers to keep."""
    if isinstance(value, tuple):
        return tuple(_owned(v) for v in value)
    array = np.asarray(value)
    if array.flags.c_contiguous and immutable(array):
        # Folding reshapes frozen weights (ResNet-50's 53 of them, 0.1 s of copies): the
        # view of a constant is as safe to keep as a copy.
        return array
    if array.base is not None or not array.flags.c_contiguous or not array.flags.writeable:
        array = np.array(array, order="C", copy=True)
    return array


def result(value: object, dtype: str | np.dtype) -> np.ndarray:
    """``value`` as an ndarray of ``dtype`` (0-d results stay arrays, never numpy scalars)."""
    array = np.asarray(value)
    if array.dtype != np.dtype(dtype):
        array = array.astype(dtype)
    return array


def required(op: str, attrs: Attrs, name: str) -> object:
    """The value of attribute ``name``, which may not be ``None``."""
    value = attrs.get(name)
    if value is None:
        raise OpTypeError(f"{op}: attribute {name} is required")
    return value
