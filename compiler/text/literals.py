"""Scalar literals of the Relay text format: suffixes, exact parsing and shortest printing.

Compiler layer (``compiler.text``). A literal is ``1`` (int32), ``1.5`` or ``1f`` (float32),
``2i64``, ``3u8``, ``1f16``, ``2.5f64``, ``True``/``False`` (bool). Printing uses the
shortest decimal that reads back to the same value of the same dtype, and parsing rounds
the decimal correctly to the target precision (not through float64 first, which could
be off by one unit in the last place), so every finite scalar round-trips bit for bit.
Non-finite floats have no literal form; the printer puts them in the meta section.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

#: Literal suffix -> dtype. ``f`` alone means float32, like TVM.
SUFFIXES: dict[str, str] = {
    "i8": "int8",
    "i16": "int16",
    "i32": "int32",
    "i64": "int64",
    "u8": "uint8",
    "u16": "uint16",
    "u32": "uint32",
    "u64": "uint64",
    "f": "float32",
    "f16": "float16",
    "f32": "float32",
    "f64": "float64",
}

_DTYPE_SUFFIX = {
    "int8": "i8",
    "int16": "i16",
    "int32": "",
    "int64": "i64",
    "uint8": "u8",
    "uint16": "u16",
    "uint32": "u32",
    "uint64": "u64",
    "float16": "f16",
    "float32": "f",
    "float64": "f64",
}


class LiteralError(ValueError):
    """A literal that is malformed or does not fit its dtype; the message says which."""


def literal_dtype(body: str, suffix: str) -> str:
    """The dtype of a numeric literal with digits ``body`` and ``suffix`` (may be empty)."""
    is_float = any(c in body for c in ".eE")
    if not suffix:
        return "float32" if is_float else "int32"
    if suffix not in SUFFIXES:
        raise LiteralError(
            f"invalid literal suffix '{suffix}' in '{body}{suffix}'; "
            f"expected one of {', '.join(SUFFIXES)}"
        )
    dtype = SUFFIXES[suffix]
    if is_float and not dtype.startswith("float"):
        raise LiteralError(
            f"the literal '{body}{suffix}' has a fractional part or exponent but an integer "
            f"suffix '{suffix}'; write an integer or use a float suffix such as f32"
        )
    return dtype


def parse_scalar(body: str, suffix: str, negative: bool = False) -> np.ndarray:
    """The 0-d array for the literal ``body`` + ``suffix`` (negated if ``negative``)."""
    dtype = literal_dtype(body, suffix)
    shown = ("-" if negative else "") + body + suffix
    if dtype.startswith("float"):
        return np.asarray(_round_float(body, negative, dtype, shown), dtype=dtype)
    info = np.iinfo(dtype)
    # No integer dtype has more than 20 digits; checking length first keeps int() cheap.
    value = (-1 if negative else 1) * int(body) if len(body.lstrip("0")) <= 20 else None
    if value is None or not info.min <= value <= info.max:
        hint = "" if suffix else "; add a suffix such as i64"
        raise LiteralError(
            f"integer literal {shown} does not fit {dtype} (range {info.min} to {info.max}){hint}"
        )
    return np.asarray(value, dtype=dtype)


def _round_float(body: str, negative: bool, dtype: str, shown: str) -> np.generic:
    ftype = np.dtype(dtype).type
    approx = float(body)  # correctly rounded to float64; cheap even for huge exponents
    if approx == np.inf:
        raise LiteralError(f"float literal {shown} is out of range for {dtype}")
    if approx == 0.0:
        return -ftype(0) if negative else ftype(0)  # keep the sign of -0.0
    if negative:
        approx = -approx
    with np.errstate(over="ignore"):
        candidate = ftype(approx)
    if not np.isfinite(candidate):
        raise LiteralError(f"float literal {shown} is out of range for {dtype}")
    if dtype == "float64" or float(candidate) == approx:
        return candidate
    # Casting the float64 value down is correctly rounded unless that value sits exactly
    # halfway between two neighbours of the narrower type (double rounding); only then
    # decide with exact arithmetic, ties going to the even mantissa.
    toward = ftype(np.inf) if float(candidate) < approx else ftype(-np.inf)
    with np.errstate(over="ignore"):
        other = np.nextafter(candidate, toward)
    if not np.isfinite(other) or (float(candidate) + float(other)) / 2 != approx:
        return candidate
    exact = -Fraction(body) if negative else Fraction(body)
    err_c = abs(Fraction(float(candidate)) - exact)
    err_o = abs(Fraction(float(other)) - exact)
    if err_o < err_c or (err_o == err_c and int(other.view(_uint_of(dtype))) % 2 == 0):
        return other
    return candidate


def _uint_of(dtype: str) -> type:
    return {"float16": np.uint16, "float32": np.uint32, "float64": np.uint64}[dtype]


def format_scalar(value: np.ndarray) -> str | None:
    """The literal text of a 0-d array, or ``None`` if it has no literal form."""
    dtype = value.dtype.name
    item = value.reshape(()).item() if dtype != "bool" else bool(value)
    if dtype == "bool":
        return "True" if item else "False"
    if dtype not in _DTYPE_SUFFIX:
        return None
    suffix = _DTYPE_SUFFIX[dtype]
    if dtype.startswith("float"):
        scalar = value.reshape(())[()]
        if not np.isfinite(scalar):
            return None
        magnitude = abs(float(scalar))
        if magnitude == 0 or 1e-4 <= magnitude < 1e16:
            text = np.format_float_positional(scalar, unique=True, trim="-")
        else:
            text = np.format_float_scientific(scalar, unique=True, trim="-")
            text = text.replace("e+", "e")
        return text + suffix
    return f"{int(item)}{suffix}"
