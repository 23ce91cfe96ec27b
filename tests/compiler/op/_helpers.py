"""Shared helpers for the operator tests: run a type relation or a reference by name."""

from __future__ import annotations

import numpy as np

from compiler.ir.types import Any, TensorType, TupleType, Type
from compiler.op.registry import get_def
from compiler.op.typerel import fmt_type

Q = Any()


def T(shape: tuple = (), dtype: str = "float32") -> TensorType:
    """A tensor type; ``None`` in ``shape`` means ``?``."""
    return TensorType([Q if d is None else d for d in shape], dtype)


def Tup(*fields: Type) -> TupleType:
    return TupleType(fields)


def rel(name: str, *arg_types: Type, **attrs: object) -> Type:
    """The output type of operator ``name`` with ``attrs`` normalized by its schema."""
    opdef = get_def(name)
    return opdef.type_rel(list(arg_types), opdef.normalize_attrs(attrs))


def rel_text(name: str, *arg_types: Type, **attrs: object) -> str:
    return fmt_type(rel(name, *arg_types, **attrs))


def ref(name: str, *args: object, **attrs: object) -> object:
    """Run operator ``name``'s numpy reference (tuple arguments stay tuples of arrays)."""
    opdef = get_def(name)
    arrays = [
        tuple(np.asarray(a) for a in arg) if isinstance(arg, tuple) else np.asarray(arg)
        for arg in args
    ]
    return opdef.reference(arrays, opdef.normalize_attrs(attrs))


def check_array(actual: object, expected: object, dtype: str, rtol: float = 0.0) -> None:
    """``actual`` is an ndarray of ``dtype`` equal (or close, for ``rtol``) to ``expected``."""
    assert isinstance(actual, np.ndarray), f"expected an ndarray, got {type(actual).__name__}"
    assert actual.dtype == np.dtype(dtype), f"dtype {actual.dtype} != {dtype}"
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}"
    if rtol:
        np.testing.assert_allclose(
            actual.astype("float64"), expected.astype("float64"), rtol=rtol, atol=rtol
        )
    else:
        np.testing.assert_array_equal(actual, expected.astype(dtype))
