"""ONNX element types (``TensorProto.DataType`` numbers) and the Relay dtypes they map to.

Compiler layer (``compiler.frontend``); standard library only. The numbers are fixed by
the ONNX standard, so converters (``Cast``'s ``to``) map them without importing ``onnx``.
"""

from __future__ import annotations

from compiler.frontend.onnx_errors import OpNotImplemented

#: The element types Relay has, by ONNX number.
ONNX_DTYPES: dict[int, str] = {
    1: "float32",
    2: "uint8",
    3: "int8",
    4: "uint16",
    5: "int16",
    6: "int32",
    7: "int64",
    9: "bool",
    10: "float16",
    11: "float64",
    12: "uint32",
    13: "uint64",
}

#: ONNX's names for every element type number it defines.
ONNX_TYPE_NAMES: dict[int, str] = {
    0: "UNDEFINED",
    1: "FLOAT",
    2: "UINT8",
    3: "INT8",
    4: "UINT16",
    5: "INT16",
    6: "INT32",
    7: "INT64",
    8: "STRING",
    9: "BOOL",
    10: "FLOAT16",
    11: "DOUBLE",
    12: "UINT32",
    13: "UINT64",
    14: "COMPLEX64",
    15: "COMPLEX128",
    16: "BFLOAT16",
    17: "FLOAT8E4M3FN",
    18: "FLOAT8E4M3FNUZ",
    19: "FLOAT8E5M2",
    20: "FLOAT8E5M2FNUZ",
    21: "UINT4",
    22: "INT4",
    23: "FLOAT4E2M1",
}


def elem_type_name(elem_type: int) -> str:
    """ONNX's name for an element type number (``FLOAT``, ``BFLOAT16``, ...)."""
    return ONNX_TYPE_NAMES.get(elem_type, f"element type {elem_type}")


def relay_dtype(elem_type: int, what: str) -> str:
    """The Relay dtype of ONNX element type ``elem_type``.

    Raises :class:`OpNotImplemented` naming ``what`` for the types Relay lacks (strings,
    bfloat16, complex numbers, 8- and 4-bit floats, 4-bit integers).
    """
    try:
        return ONNX_DTYPES[elem_type]
    except KeyError:
        supported = ", ".join(elem_type_name(t) for t in ONNX_DTYPES)
        raise OpNotImplemented(
            f"{what} has element type {elem_type_name(elem_type)}, which the ONNX frontend "
            f"does not support; supported element types: {supported}"
        ) from None
