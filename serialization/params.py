"""Parameter dictionaries: named arrays in one file, like TVM's ``save_param_dict``.

Lowest layer (``serialization``); imports numpy and msgpack (through the codecs) only.

The file is a document of :data:`~serialization.formats.PARAMS_FORMAT` whose one
section is a list of ``[name, array]`` pairs sorted by name, so the same
dictionary always gives the same bytes whatever order it was built in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from serialization.errors import FormatError
from serialization.formats import PARAMS_FORMAT
from serialization.framing import read_document, write_document
from serialization.limits import MAX_CONSTANT_BYTES
from serialization.ndarray import allowed_dtype


def save_param_dict(params: Mapping[str, Any]) -> bytes:
    """Serialize named arrays to bytes.

    Parameters
    ----------
    params : Mapping[str, numpy.ndarray]
        Parameter name -> array (numpy scalars are saved as 0-d arrays). Allowed
        dtypes are bool, int8-int64, uint8-uint64 and float16-float64.

    Returns
    -------
    bytes
        The encoded dictionary; :func:`load_param_dict` reads it back.

    Raises
    ------
    TypeError
        If ``params`` is not a mapping, a name is not a string, or a value is not a
        numpy array of an allowed dtype; the message names the parameter.
    ValueError
        If the arrays together exceed :data:`~serialization.limits.MAX_CONSTANT_BYTES`.
    """
    if not isinstance(params, Mapping):
        raise TypeError(f"params must be a mapping of name -> array, got {type(params).__name__}")
    pairs: list[list[Any]] = []
    total = 0
    for name in sorted(params, key=_sort_key):
        value = params[name]
        if not isinstance(value, (np.ndarray, np.generic)):
            raise TypeError(f"parameter {name!r} must be a numpy array, got {type(value).__name__}")
        array = np.asarray(value)
        try:
            allowed_dtype(array.dtype)
        except TypeError as err:
            raise TypeError(f"parameter {name!r}: {err}") from None
        total += array.nbytes
        pairs.append([name, array])
    if total > MAX_CONSTANT_BYTES:
        raise ValueError(
            f"the parameters hold {total} bytes; a parameter file holds at most "
            f"{MAX_CONSTANT_BYTES} (serialization.limits.MAX_CONSTANT_BYTES)"
        )
    return write_document(PARAMS_FORMAT, [("params", pairs)])


def _sort_key(name: Any) -> str:
    if not isinstance(name, str):
        raise TypeError(f"parameter names must be strings, got {name!r}")
    return name


def load_param_dict(data: bytes | bytearray | memoryview) -> dict[str, np.ndarray]:
    """Deserialize bytes from :func:`save_param_dict`.

    Parameters
    ----------
    data : bytes-like
        The encoded dictionary.

    Returns
    -------
    dict[str, numpy.ndarray]
        Name -> read-only array (``.copy()`` one to modify it), sorted by name.

    Raises
    ------
    TypeError
        If ``data`` is not bytes-like.
    FormatError
        If ``data`` is not a valid parameter dictionary (a ``ValueError``); the
        message names what is wrong.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"load_param_dict needs bytes, got {type(data).__name__}")
    document = read_document(PARAMS_FORMAT, bytes(data))
    pairs = document.sections["params"]
    if type(pairs) is not list:
        raise FormatError("must be a list of [name, array] pairs", "params")
    result: dict[str, np.ndarray] = {}
    for index, pair in enumerate(pairs):
        if (
            type(pair) is not list
            or len(pair) != 2
            or type(pair[0]) is not str
            or not isinstance(pair[1], np.ndarray)
        ):
            raise FormatError(f"entry {index} must be a [name, array] pair", "params")
        name, array = pair
        if name in result:
            raise FormatError(f"the parameter {name[:60]!r} appears twice", "params")
        result[name] = array
    return result
