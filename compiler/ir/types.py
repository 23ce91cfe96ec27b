"""Relay types: tensors, tuples, functions, type variables and algebraic data types.

Compiler layer (``compiler.ir``); imports the standard library, numpy, the dtype list of
``serialization`` and :mod:`compiler.ir.hooks` (through which types print).

Types are immutable. Structural comparison of types lives in
:mod:`compiler.ir.structural`; ``==`` on types is identity for type variables and
structural for everything else, so types can be used as dictionary keys.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler.ir import hooks
from serialization.dtypes import DTYPE_NAMES

#: Every dtype the front end accepts, by its numpy name (the list the file format allows).
DTYPES: tuple[str, ...] = DTYPE_NAMES


def normalize_dtype(dtype: object) -> str:
    """Return the canonical dtype name for ``dtype`` or raise ``TypeError`` naming it."""
    if isinstance(dtype, str) and dtype in DTYPES:
        return dtype
    try:
        name = np.dtype(dtype).name  # type: ignore[call-overload]
    except TypeError:
        name = None
    if name not in DTYPES:
        raise TypeError(f"unsupported dtype {dtype!r}; expected one of {', '.join(DTYPES)}")
    return name


class Type:
    """Base class of all Relay types."""

    __slots__ = ()

    def __str__(self) -> str:
        return hooks.type_to_text(self)

    __repr__ = __str__


class Any:
    """A tensor dimension known only at run time (printed ``?``).

    All ``Any`` dimensions compare equal: they say nothing about each other.
    """

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Any)

    def __hash__(self) -> int:
        return hash("relay.Any")

    def __repr__(self) -> str:
        return "?"


Dim = int | Any


def _dims(shape: Sequence[object]) -> tuple[Dim, ...]:
    dims: list[Dim] = []
    for d in shape:
        if isinstance(d, Any):
            dims.append(d)
        elif isinstance(d, (int, np.integer)) and not isinstance(d, bool):
            if d < 0:
                raise ValueError(f"tensor dimension must be >= 0 or relay.Any(), got {d}")
            dims.append(int(d))
        elif d is None or d == "?":
            dims.append(Any())
        else:
            raise TypeError(f"tensor dimension must be an int or relay.Any(), got {d!r}")
    return tuple(dims)


class TensorType(Type):
    """A tensor of ``shape`` (ints or :class:`Any`) and ``dtype``; ``shape=()`` is a scalar."""

    __slots__ = ("dtype", "shape")

    def __init__(self, shape: Sequence[object] = (), dtype: object = "float32") -> None:
        object.__setattr__(self, "shape", _dims(shape))
        object.__setattr__(self, "dtype", normalize_dtype(dtype))

    shape: tuple[Dim, ...]
    dtype: str

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_static(self) -> bool:
        return all(isinstance(d, int) for d in self.shape)

    @property
    def concrete_shape(self) -> tuple[int, ...]:
        """The shape as ints; raises ``ValueError`` if a dimension is ``?``."""
        if not self.is_static:
            raise ValueError(f"shape {self} has dynamic dimensions")
        return self.shape  # type: ignore[return-value]

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, TensorType)
            and self.dtype == other.dtype
            and self.shape == other.shape
        )

    def __hash__(self) -> int:
        return hash(("TensorType", self.shape, self.dtype))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("types are immutable")


def scalar_type(dtype: object) -> TensorType:
    """A 0-d tensor type of ``dtype``."""
    return TensorType((), dtype)


class TupleType(Type):
    """A tuple of field types."""

    __slots__ = ("fields",)

    def __init__(self, fields: Sequence[Type]) -> None:
        object.__setattr__(self, "fields", tuple(fields))

    fields: tuple[Type, ...]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TupleType) and self.fields == other.fields

    def __hash__(self) -> int:
        return hash(("TupleType", self.fields))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("types are immutable")


class TypeVar(Type):
    """A type variable; two type variables are equal only if they are the same object."""

    __slots__ = ("name_hint",)

    def __init__(self, name_hint: str) -> None:
        object.__setattr__(self, "name_hint", name_hint)

    name_hint: str

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("types are immutable")


class GlobalTypeVar(Type):
    """The name of an algebraic data type defined in a module (``List``, ``Option``)."""

    __slots__ = ("name_hint",)

    def __init__(self, name_hint: str) -> None:
        object.__setattr__(self, "name_hint", name_hint)

    name_hint: str

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GlobalTypeVar) and self.name_hint == other.name_hint

    def __hash__(self) -> int:
        return hash(("GlobalTypeVar", self.name_hint))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("types are immutable")


class TypeCall(Type):
    """An ADT applied to type arguments, e.g. ``List[Tensor[(), int32]]``."""

    __slots__ = ("args", "func")

    def __init__(self, func: GlobalTypeVar, args: Sequence[Type]) -> None:
        object.__setattr__(self, "func", func)
        object.__setattr__(self, "args", tuple(args))

    func: GlobalTypeVar
    args: tuple[Type, ...]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TypeCall) and self.func == other.func and self.args == other.args

    def __hash__(self) -> int:
        return hash(("TypeCall", self.func, self.args))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("types are immutable")


class FuncType(Type):
    """A function type, possibly polymorphic over ``type_params``."""

    __slots__ = ("arg_types", "ret_type", "type_params")

    def __init__(
        self,
        arg_types: Sequence[Type],
        ret_type: Type,
        type_params: Sequence[TypeVar] = (),
    ) -> None:
        object.__setattr__(self, "arg_types", tuple(arg_types))
        object.__setattr__(self, "ret_type", ret_type)
        object.__setattr__(self, "type_params", tuple(type_params))

    arg_types: tuple[Type, ...]
    ret_type: Type
    type_params: tuple[TypeVar, ...]

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, FuncType)
            and self.arg_types == other.arg_types
            and self.ret_type == other.ret_type
            and self.type_params == other.type_params
        )

    def __hash__(self) -> int:
        return hash(("FuncType", self.arg_types, self.ret_type, self.type_params))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("types are immutable")


class IncompleteType(Type):
    """A placeholder solved by type inference; never appears in a checked program."""

    __slots__ = ("id",)
    _counter = 0

    def __init__(self) -> None:
        IncompleteType._counter += 1
        object.__setattr__(self, "id", IncompleteType._counter)

    id: int

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("types are immutable")


class TypeData(Type):
    """An algebraic data type definition: ``type List[A] { Cons(A, List[A]), Nil }``."""

    __slots__ = ("constructors", "header", "type_vars")

    def __init__(
        self,
        header: GlobalTypeVar,
        type_vars: Sequence[TypeVar],
        constructors: Sequence[object],
    ) -> None:
        object.__setattr__(self, "header", header)
        object.__setattr__(self, "type_vars", tuple(type_vars))
        object.__setattr__(self, "constructors", tuple(constructors))

    header: GlobalTypeVar
    type_vars: tuple[TypeVar, ...]
    constructors: tuple[object, ...]  # tuple[Constructor, ...]; see compiler.ir.expr

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("types are immutable")
