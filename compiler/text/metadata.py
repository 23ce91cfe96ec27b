"""The meta section of the Relay text format: large constants stored after the program.

Compiler layer (``compiler.text``). Constants that have no literal form (tensors with a
shape, and non-finite floats) print as ``meta[relay.Constant][i]``; the text then ends
with a ``#[metadata]`` line followed by one JSON object::

    #[metadata]
    {
      "relay.Constant": [
        {"dtype": "float32", "shape": [2, 2], "data": "AACAPwAAAEAAAEBAAACAQA=="}
      ]
    }

Each entry gives the numpy dtype name, the shape as a list of ints, and the array's
bytes in C order, little-endian, base64-encoded (bool is one byte per element). This is
relayvm's own encoding, not TVM's JSON node graph.
"""

from __future__ import annotations

import base64
import binascii
import json
import math

import numpy as np

from compiler.ir.expr import Constant
from compiler.ir.types import DTYPES
from compiler.text.errors import RelaySyntaxError, Source

CONSTANT_KIND = "relay.Constant"


def encode_constants(arrays: list[np.ndarray]) -> str:
    """The JSON text of the meta section holding ``arrays`` (deterministic)."""
    lines = ["{", f'  "{CONSTANT_KIND}": [']
    for index, array in enumerate(arrays):
        little = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
        entry = {
            "dtype": array.dtype.name,
            "shape": list(array.shape),
            "data": base64.b64encode(little.tobytes()).decode("ascii"),
        }
        comma = "," if index + 1 < len(arrays) else ""
        lines.append("    " + json.dumps(entry) + comma)
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"


def decode_metadata(text: str, source: Source, pos: int) -> dict[str, list[Constant]]:
    """Parse the JSON after ``#[metadata]`` (which starts at offset ``pos`` of ``source``)."""

    def fail(message: str, at: int = pos) -> RelaySyntaxError:
        return source.error(at, f"malformed #[metadata] section: {message}")

    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise fail(f"{exc.msg} in its JSON", pos + exc.pos) from None
    if not isinstance(doc, dict):
        raise fail(f"expected a JSON object, found {type(doc).__name__}")
    table: dict[str, list[Constant]] = {}
    for kind, entries in doc.items():
        if kind != CONSTANT_KIND:
            raise fail(f"unsupported node kind {kind!r}; expected {CONSTANT_KIND!r}")
        if not isinstance(entries, list):
            raise fail(f"{kind} must be a list of entries")
        table[kind] = [_decode_constant(entry, index, fail) for index, entry in enumerate(entries)]
    return table


def _decode_constant(entry: object, index: int, fail) -> Constant:  # type: ignore[no-untyped-def]
    where = f"{CONSTANT_KIND}[{index}]"
    if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data"}:
        raise fail(f"{where} must be an object with exactly the keys dtype, shape and data")
    dtype, shape, data = entry["dtype"], entry["shape"], entry["data"]
    if dtype not in DTYPES:
        raise fail(f"{where} has unsupported dtype {dtype!r}; expected one of {', '.join(DTYPES)}")
    if not isinstance(shape, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
    ):
        raise fail(f"{where} has shape {shape!r}; expected a list of non-negative ints")
    if not isinstance(data, str):
        raise fail(f"{where} data must be a base64 string")
    try:
        raw = base64.b64decode(data.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise fail(f"{where} data is not valid base64") from None
    little = np.dtype(dtype).newbyteorder("<")
    expected = math.prod(shape) * little.itemsize
    if len(raw) != expected:
        raise fail(
            f"{where} has {len(raw)} bytes of data; a tensor of dtype {dtype} and shape "
            f"{tuple(shape)} needs {expected}"
        )
    array = np.frombuffer(raw, dtype=little).reshape(shape).astype(dtype)
    return Constant(array)
