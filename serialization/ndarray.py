"""The ndarray codec: numpy arrays as one msgpack extension type with a dtype allowlist.

Lowest layer (``serialization``); imports numpy and msgpack only.

An array is written as ``ExtType(NDARRAY_EXT_CODE, payload)`` where ``payload`` is
itself msgpack: ``[dtype_str, shape, raw_bytes]``, with ``dtype_str`` one of
:data:`ALLOWED_DTYPES` (always little-endian), ``shape`` a list of non-negative
ints and ``raw_bytes`` the C-order data. Reading checks every field before numpy
sees it: the dtype against the allowlist (never object, void or structured), the
rank, each dimension, the element count with a checked product, and the exact byte
length. Arrays come back read-only so constants cannot be changed through them.
"""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np

from serialization.codec import pack, unpack
from serialization.dtypes import DTYPE_NAMES
from serialization.errors import FormatError
from serialization.limits import MAX_ARRAY_ELEMENTS, MAX_CONSTANT_BYTES, MAX_RANK

#: The application extension code of an ndarray payload.
NDARRAY_EXT_CODE = 1

#: dtype string -> dtype name, for every dtype a file may contain.
ALLOWED_DTYPES: dict[str, str] = {
    np.dtype(name).newbyteorder("<").str: name for name in DTYPE_NAMES
}


def allowed_dtype(dtype: Any) -> np.dtype:
    """The little-endian form of ``dtype`` if it is allowed in a file.

    Raises
    ------
    TypeError
        If ``dtype`` is not one of the allowed numeric or boolean dtypes.
    """
    dt = np.dtype(dtype)
    if dt.byteorder == ">":
        dt = dt.newbyteorder("<")
    if dt.str not in ALLOWED_DTYPES:
        raise TypeError(
            f"arrays of dtype {dt} cannot be saved; allowed dtypes are {', '.join(DTYPE_NAMES)}"
        )
    return dt


def encode_ndarray(array: np.ndarray) -> msgpack.ExtType:
    """``array`` as an ndarray extension value (little-endian, C order).

    Raises
    ------
    TypeError
        If the array's dtype is not allowed.
    ValueError
        If the array breaks a resource cap (rank, element count, bytes).
    """
    dt = allowed_dtype(array.dtype)
    if array.ndim > MAX_RANK:
        raise ValueError(f"an array of rank {array.ndim} cannot be saved (at most {MAX_RANK})")
    if array.nbytes > MAX_CONSTANT_BYTES:
        raise ValueError(
            f"an array of {array.nbytes} bytes cannot be saved (at most {MAX_CONSTANT_BYTES})"
        )
    data = np.asarray(array, dtype=dt, order="C")  # (ascontiguousarray would make 0-d 1-d)
    if dt.kind == "b":
        # A bool array viewed from other bytes may hold values other than 0/1; readers
        # reject those, so write the canonical bytes.
        raw = (data.view(np.uint8) != 0).tobytes()
    else:
        raw = data.tobytes()
    payload = pack([dt.str, list(data.shape), raw])
    return msgpack.ExtType(NDARRAY_EXT_CODE, payload)


def decode_ndarray(payload: bytes) -> np.ndarray:
    """The read-only array stored in an ndarray extension payload.

    Raises
    ------
    FormatError
        If the payload is not ``[dtype_str, shape, raw_bytes]`` with an allowed
        dtype, a valid shape and exactly the right number of bytes.
    """
    try:
        value = unpack(payload)
    except FormatError as err:
        raise FormatError(f"an array payload is not valid ({err.detail})") from None
    if type(value) is not list or len(value) != 3:
        raise FormatError("an array payload must be a list [dtype, shape, data]")
    dtype_str, shape, raw = value
    if type(dtype_str) is not str or dtype_str not in ALLOWED_DTYPES:
        allowed = " ".join(ALLOWED_DTYPES)
        raise FormatError(f"array dtype {_brief(dtype_str)} is not allowed (allowed: {allowed})")
    if type(shape) is not list:
        raise FormatError(f"array shape must be a list of ints, found {type(shape).__name__}")
    if len(shape) > MAX_RANK:
        raise FormatError(f"array rank {len(shape)} exceeds the limit {MAX_RANK}")
    count = 1
    bounded = 1  # product of the non-zero dimensions, checked step by step
    for dim in shape:
        if type(dim) is not int or dim < 0:
            raise FormatError(f"array shape {_brief(shape)} must hold non-negative ints")
        bounded *= max(dim, 1)
        if bounded > MAX_ARRAY_ELEMENTS:
            raise FormatError(
                f"array shape {_brief(shape)} has more than {MAX_ARRAY_ELEMENTS} elements "
                "(MAX_ARRAY_ELEMENTS)"
            )
        count *= dim
    if type(raw) is not bytes:
        raise FormatError(f"array data must be bytes, found {type(raw).__name__}")
    dtype = np.dtype(dtype_str)
    expected = count * dtype.itemsize
    if len(raw) != expected:
        raise FormatError(
            f"array of shape {tuple(shape)} and dtype {ALLOWED_DTYPES[dtype_str]} needs "
            f"{expected} bytes of data, found {len(raw)}"
        )
    array = np.frombuffer(raw, dtype=dtype).reshape(shape)
    if dtype.kind == "b" and count and int(array.view(np.uint8).max()) > 1:
        raise FormatError("a bool array holds a byte other than 0 or 1")
    if not array.flags.aligned:
        array = array.copy()
    array.flags.writeable = False
    return array


def _brief(value: object, width: int = 60) -> str:
    """``repr(value)`` cut to ``width`` characters, so a hostile file cannot flood a message."""
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."
