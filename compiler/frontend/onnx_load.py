"""Loading an ONNX model safely: parse, resolve external data inside the model's directory,
and validate with ``onnx.checker``.

Compiler layer (``compiler.frontend``). Imports the optional ``onnx`` package, so only
:func:`compiler.frontend.onnx.from_onnx` imports this module (at call time).

External data is the dangerous part of an ONNX file: a tensor may say "my bytes are in
file F at offset O". Readers that followed F blindly could be made to read any file on
the machine (onnx/onnx#3991, CVE-2025-51480). Here F must be a relative path without
``..`` components that, with every symbolic link resolved, names a regular file inside
the directory holding the model; offset and length must lie within that file and match
the tensor's size. ``onnx.load`` is never asked to follow external references itself.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

import numpy as np
import onnx
from google.protobuf.message import DecodeError

from compiler.frontend.onnx_dtypes import ONNX_DTYPES
from compiler.frontend.onnx_errors import OnnxImportError
from compiler.frontend.onnx_tensors import iter_tensors

_WINDOWS_DRIVE = re.compile(r"^[A-Za-z]:")
_CHECKER_NODE = re.compile(r"name: (\S*) OpType: (\S+)", re.IGNORECASE)


def load_model(model: object) -> onnx.ModelProto:
    """``model`` (a ``ModelProto``, a path or the serialized bytes) as a validated
    ``ModelProto`` with every tensor's data in memory.

    A ``ModelProto`` given by the caller is never modified: external data is loaded into a
    copy.

    Raises
    ------
    TypeError
        If ``model`` is none of the accepted kinds.
    FileNotFoundError
        If a path does not name a file.
    OnnxImportError
        If the bytes are not an ONNX model, external data is missing or unsafe, or
        ``onnx.checker`` rejects the model (the message names the node).
    """
    base_dir: str | None = None
    serialized: bytes | None = None
    if isinstance(model, onnx.ModelProto):
        proto = model
    elif isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"ONNX model file {path!r} does not exist or is not a file")
        with open(path, "rb") as handle:
            serialized = handle.read()
        proto = _parse(serialized, f"file {path!r}")
        base_dir = os.path.dirname(os.path.abspath(path))
    elif isinstance(model, (bytes, bytearray, memoryview)):
        serialized = bytes(model)
        proto = _parse(serialized, "the given bytes")
    else:
        raise TypeError(
            "from_onnx expects an onnx.ModelProto, a path to a .onnx file or the model's "
            f"serialized bytes, got {type(model).__name__}"
        )
    loaded = _load_external_data(proto, base_dir)
    # The checker reads serialized bytes: the caller's, unless external data changed the
    # model (serializing a ResNet-50 again took 0.1-0.17 s).
    check(serialized if loaded is proto and serialized is not None else loaded)
    return loaded


def _parse(data: bytes, where: str) -> onnx.ModelProto:
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise OnnxImportError(f"cannot parse {where} as an ONNX model: {exc}") from None
    return proto


def check(proto: onnx.ModelProto | bytes) -> None:
    """Run ``onnx.checker.check_model`` on a model or its serialized bytes; its complaints
    become :class:`OnnxImportError` naming the node when the checker identifies one."""
    try:
        onnx.checker.check_model(proto)
    except onnx.checker.ValidationError as exc:
        raise OnnxImportError(checker_message(str(exc))) from None


def checker_message(message: str) -> str:
    """Restate an ``onnx.checker`` message, leading with the node it is about."""
    detail = message.split("==> Context:")[0].strip()
    detail = " ".join(detail.split())
    found = _CHECKER_NODE.search(message)
    if found is None:
        return f"the ONNX model is invalid: {detail}"
    name, op_type = found.groups()
    node = f"node {name!r} ({op_type})" if name else f"an unnamed {op_type} node"
    return f"the ONNX model is invalid at {node}: {detail}"


# --- external data -----------------------------------------------------------------------------


def _load_external_data(proto: onnx.ModelProto, base_dir: str | None) -> onnx.ModelProto:
    external = [
        (tensor, what)
        for tensor, what in iter_tensors(proto.graph)
        if tensor.data_location == onnx.TensorProto.EXTERNAL
    ]
    if not external:
        return proto
    if base_dir is None:
        tensor, what = external[0]
        location = _entries(tensor, what).get("location", "")
        raise OnnxImportError(
            f"{what} keeps its data in the external file {location!r}, but the model was not "
            "read from a file, so there is no directory to look in; pass the path of the "
            ".onnx file to from_onnx instead"
        )
    # Only our own copy is modified: the copy's tensors are found again in the same order.
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    for tensor, what in iter_tensors(copy.graph):
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            tensor.raw_data = read_external_data(tensor, what, base_dir)
            del tensor.external_data[:]
            tensor.data_location = onnx.TensorProto.DEFAULT
    return copy


def _entries(tensor: onnx.TensorProto, what: str) -> Mapping[str, str]:
    entries: dict[str, str] = {}
    for entry in tensor.external_data:
        if entry.key in entries:
            raise OnnxImportError(f"{what} lists the external data key {entry.key!r} twice")
        entries[entry.key] = entry.value
    return entries


def _nonnegative(entries: Mapping[str, str], key: str, what: str, location: str) -> int | None:
    if key not in entries:
        return None
    text = entries[key]
    if not text.isdigit():
        raise OnnxImportError(
            f"{what}: external data {key} {text!r} for {location!r} must be a non-negative integer"
        )
    return int(text)


def _expected_nbytes(tensor: onnx.TensorProto, what: str) -> int | None:
    """The byte size the tensor's dims and element type call for (None if unknown)."""
    dtype = ONNX_DTYPES.get(tensor.data_type)
    if dtype is None:
        return None
    count = 1
    for dim in tensor.dims:
        if dim < 0:
            raise OnnxImportError(f"{what} has a negative dimension {dim}")
        count *= int(dim)
    return count * np.dtype(dtype).itemsize


def safe_external_path(location: str, base_dir: str, what: str) -> str:
    """The real path of external data file ``location`` for the tensor ``what``, checked to
    lie inside ``base_dir``; :class:`OnnxImportError` naming the tensor and path if not."""
    prefix = f"{what} keeps its data in external file {location!r}"
    if not location:
        raise OnnxImportError(f"{what} is marked as external data but gives no location")
    if "\x00" in location:
        raise OnnxImportError(f"{prefix}, whose name contains a NUL character")
    if (
        os.path.isabs(location)
        or location.startswith(("/", "\\"))
        or _WINDOWS_DRIVE.match(location)
    ):
        raise OnnxImportError(
            f"{prefix}, an absolute path; external data must be given relative to the "
            "model's directory"
        )
    if ".." in re.split(r"[\\/]", location):
        raise OnnxImportError(
            f"{prefix}, which contains a '..' component; external data must stay inside the "
            "model's directory"
        )
    base = os.path.realpath(base_dir)
    real = os.path.realpath(os.path.join(base, location))
    if os.path.commonpath([base, real]) != base:
        raise OnnxImportError(
            f"{prefix}, which resolves to {real!r} outside the model's directory {base!r} "
            "(through a symbolic link); external data must stay inside that directory"
        )
    if not os.path.isfile(real):
        raise OnnxImportError(
            f"{prefix}, which does not exist or is not a regular file in {base!r}"
        )
    return real


def read_external_data(tensor: onnx.TensorProto, what: str, base_dir: str) -> bytes:
    """The bytes of ``tensor``'s external data, read from inside ``base_dir`` only."""
    entries = _entries(tensor, what)
    location = entries.get("location", "")
    path = safe_external_path(location, base_dir, what)
    offset = _nonnegative(entries, "offset", what, location) or 0
    length = _nonnegative(entries, "length", what, location)
    expected = _expected_nbytes(tensor, what)
    if expected is None:
        raise OnnxImportError(f"{what} has an element type the ONNX frontend does not support")
    if length is not None and length != expected:
        raise OnnxImportError(
            f"{what}: external data length {length} in {location!r} does not match the "
            f"{expected} bytes its shape {tuple(tensor.dims)} needs"
        )
    size = os.path.getsize(path)
    if offset + expected > size:
        raise OnnxImportError(
            f"{what}: external data at offset {offset} with {expected} bytes runs past the end "
            f"of {location!r} ({size} bytes)"
        )
    with open(path, "rb") as handle:
        handle.seek(offset)
        return handle.read(expected)
