"""TVM's ``tir`` immediates as Relay programs use them: typed constants for attributes.

Compiler layer (``compiler.ir``); standard library only. TVM code marks functions with
``func.with_attr("Primitive", tvm.tir.IntImm("int32", 1))`` and passes ``IntImm`` or
``FloatImm`` where an attribute wants a number. Here they are Python ``int``, ``float`` and
``str`` values that also carry TVM's ``dtype`` and ``value``; attributes store them as the
plain value (:mod:`compiler.ir.attrs` freezes anything with ``item`` and ``dtype``), so they
print, compare and serialize as numbers and strings do.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FloatImm", "IntImm", "StringImm"]

#: The integer dtypes and their ranges (``bool`` holds 0 and 1).
_INT_RANGES = {
    "bool": (0, 1),
    **{f"int{b}": (-(2 ** (b - 1)), 2 ** (b - 1) - 1) for b in (8, 16, 32, 64)},
    **{f"uint{b}": (0, 2**b - 1) for b in (8, 16, 32, 64)},
}
_FLOAT_DTYPES = ("float16", "float32", "float64")


class _Immediate:
    """What the three share: ``value`` and ``item()`` give the plain Python value (of the
    type in ``_plain``), which is what attributes store."""

    _plain: type

    @property
    def value(self) -> Any:
        return self._plain(self)

    def item(self) -> Any:
        """The plain value."""
        return self._plain(self)


class _Number(_Immediate):
    """A number prints as the number (``int``'s and ``float``'s own ``str`` is their repr,
    which the subclasses override)."""

    def __str__(self) -> str:
        return self._plain.__repr__(self)


class IntImm(_Number, int):
    """An integer constant of an integer ``dtype`` (TVM's ``tvm.tir.IntImm(dtype, value)``).

    Raises
    ------
    ValueError
        For a dtype that is not an integer type, or a value outside its range.
    """

    _plain = int
    dtype: str

    def __new__(cls, dtype: str, value: int, span: object = None) -> IntImm:
        if dtype not in _INT_RANGES:
            raise ValueError(
                f"IntImm: dtype {dtype!r} is not an integer type; use one of "
                f"{', '.join(_INT_RANGES)}"
            )
        low, high = _INT_RANGES[dtype]
        if int(value) != value or not low <= int(value) <= high:
            raise ValueError(f"IntImm: {value!r} is not a {dtype} value ({low} to {high})")
        self = super().__new__(cls, int(value))
        self.dtype = dtype
        return self

    def __repr__(self) -> str:
        return f"IntImm({self.dtype!r}, {int(self)})"


class FloatImm(_Number, float):
    """A floating-point constant of a float ``dtype`` (TVM's ``tvm.tir.FloatImm``).

    Raises
    ------
    ValueError
        For a dtype that is not a float type.
    """

    _plain = float
    dtype: str

    def __new__(cls, dtype: str, value: float, span: object = None) -> FloatImm:
        if dtype not in _FLOAT_DTYPES:
            raise ValueError(
                f"FloatImm: dtype {dtype!r} is not a float type; use one of "
                f"{', '.join(_FLOAT_DTYPES)}"
            )
        self = super().__new__(cls, float(value))
        self.dtype = dtype
        return self

    def __repr__(self) -> str:
        return f"FloatImm({self.dtype!r}, {float(self)!r})"


class StringImm(_Immediate, str):
    """A string constant (TVM's ``tvm.tir.StringImm(value)``), such as a ``Compiler``
    attribute's name."""

    _plain = str
    dtype = "handle"

    def __new__(cls, value: str, span: object = None) -> StringImm:
        if not isinstance(value, str):
            raise TypeError(f"StringImm: value must be a str, got {value!r}")
        return super().__new__(cls, value)

    def __repr__(self) -> str:
        return f"StringImm({str(self)!r})"
