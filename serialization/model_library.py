"""Model Library Format: one tar holding a compiled module, its parameters, source and metadata.

Lowest layer (``serialization``); standard library and the parameter codec only. Modules
are taken by duck typing, so this layer never imports ``vm`` or ``compiler``.

TVM users hand Model Library Format (MLF) archives to deployment tools; ours keeps TVM's
layout where it applies and stores relayvm's executable as the "library"::

    metadata.json                       what is inside (see below)
    codegen/host/lib/<model>.rvm        the executable (the code of ``Executable.save()``)
    parameters/<model>.params           the parameters (``save_param_dict``)
    src/<model>.relay                   the Relay text of the module, when known
    runtime-config/graph/graph.json     the graph, for graph-executor modules

``metadata.json`` holds ``version`` (an integer bumped on any layout or schema change),
``model_name``, ``export_datetime`` (UTC, TVM's ``"%Y-%m-%d %H:%M:%SZ"``), ``memory`` (for a
graph, one entry per storage id with its size and the input it binds; for a VM, the constant
bytes, since a VM plans the rest while running), ``target``, ``runtimes`` (``["graph"]`` or
``["vm"]``), ``style`` and ``producer``.

Writing is reproducible: members are sorted, owners, modes and times are fixed, and JSON is
written with sorted keys; ``export_datetime`` comes from ``SOURCE_DATE_EPOCH`` when that is
set, so the same module exported twice then gives the same bytes.

Reading never extracts anything: each expected member is read into memory by its exact
name, and an archive with links, devices, absolute or ``..`` paths, duplicate or unknown
names, oversized members or a newer version is refused with a :class:`FormatError` naming
the member.
"""

from __future__ import annotations

import datetime as _dt
import io
import json
import os
import re
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from serialization.atomic import atomic_write
from serialization.errors import FormatError
from serialization.limits import MAX_CONSTANT_BYTES, MAX_INDEX
from serialization.ndarray import DTYPE_NAMES
from serialization.params import load_param_dict, save_param_dict

#: The layout and metadata schema version this module writes and the newest it reads.
MODEL_LIBRARY_VERSION = 1

#: Largest ``metadata.json``, graph JSON or Relay text member read.
MAX_TEXT_MEMBER_BYTES = 1 << 28

#: Largest number of tar members looked at; a real archive has at most a handful.
MAX_MEMBERS = 64

_DATETIME_FORMAT = "%Y-%m-%d %H:%M:%SZ"
_MODEL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}")
_RUNTIMES = ("graph", "vm")


@dataclass(frozen=True)
class ModelLibrary:
    """The contents of a Model Library Format archive, read and checked.

    Attributes
    ----------
    metadata : dict
        The parsed ``metadata.json``.
    model_name : str
        The module's name; the members are named after it.
    runtimes : tuple of str
        ``("graph",)`` or ``("vm",)``: what runs the executable.
    executable : bytes
        The executable's file bytes, for ``vm.Executable.load_exec``.
    params : dict of str to numpy.ndarray
        The parameters.
    graph_json : str or None
        The graph-executor JSON, for graph modules.
    relay_text : str or None
        The module's Relay text, when the archive holds it.
    """

    metadata: dict[str, Any]
    model_name: str
    runtimes: tuple[str, ...]
    executable: bytes = field(repr=False)
    params: dict[str, np.ndarray] = field(repr=False)
    graph_json: str | None = field(default=None, repr=False)
    relay_text: str | None = field(default=None, repr=False)


def export_model_library_format(module: Any, file_name: str | os.PathLike[str]) -> Path:
    """Write a compiled module to a Model Library Format tar.

    Parameters
    ----------
    module : relay.build result or vm.Executable
        A graph executor factory (what ``relay.build`` returns) or a VM executable
        (what ``relay.vm.compile`` returns).
    file_name : str or os.PathLike
        The tar to create or replace (atomically); its directory must exist.

    Returns
    -------
    pathlib.Path
        ``file_name``.

    Raises
    ------
    TypeError
        If ``module`` is neither kind of module.
    ValueError
        If the module's name cannot name files, or its graph JSON is not JSON.

    Examples
    --------
    >>> factory = relay.build(mod, params=params)                      # doctest: +SKIP
    >>> serialization.export_model_library_format(factory, "model.tar")  # doctest: +SKIP
    >>> factory = vm.graph_executor.load_model_library("model.tar")     # doctest: +SKIP
    """
    members, metadata = _describe(module)
    metadata.update(
        version=MODEL_LIBRARY_VERSION,
        export_datetime=_export_datetime(),
        style="full-model",
        producer=_producer(),
    )
    members["metadata.json"] = _json_bytes(metadata)
    path = Path(os.fspath(file_name))
    atomic_write(path, _tar_bytes(members))
    return path


def read_model_library_format(source: str | os.PathLike[str] | bytes) -> ModelLibrary:
    """Read and check a Model Library Format tar without extracting it.

    Parameters
    ----------
    source : path or bytes
        The archive's path, or its bytes.

    Returns
    -------
    ModelLibrary
        The archive's metadata and members.

    Raises
    ------
    FormatError
        If the archive is not one this reader understands (naming the member at fault).
    OSError
        If ``source`` is a path that cannot be read.
    """
    data = _source_bytes(source)
    members = _read_members(data)
    metadata = _parse_metadata(members.pop("metadata.json", None))
    name = metadata["model_name"]
    runtimes = tuple(metadata["runtimes"])
    expected = {
        "executable": f"codegen/host/lib/{name}.rvm",
        "params": f"parameters/{name}.params",
        "relay": f"src/{name}.relay",
        "graph": "runtime-config/graph/graph.json",
    }
    unknown = sorted(set(members) - set(expected.values()))
    if unknown:
        raise FormatError(f"unexpected member {unknown[0]!r} in model {name!r}", "archive")
    executable = _required(members, expected["executable"])
    try:
        params = load_param_dict(_required(members, expected["params"]))
    except FormatError as err:
        raise FormatError(f"{expected['params']}: {err}", "archive") from err
    graph = members.get(expected["graph"])
    if runtimes == ("graph",) and graph is None:
        raise FormatError(f"member {expected['graph']!r} is missing (graph module)", "archive")
    if runtimes == ("vm",) and graph is not None:
        raise FormatError(f"VM module has a {expected['graph']!r}", "archive")
    graph_json = None if graph is None else _text(graph, expected["graph"])
    if graph_json is not None:
        _parse_graph(graph_json, expected["graph"])
    relay = members.get(expected["relay"])
    return ModelLibrary(
        metadata=metadata,
        model_name=name,
        runtimes=runtimes,
        executable=executable,
        params=params,
        graph_json=graph_json,
        relay_text=None if relay is None else _text(relay, expected["relay"]),
    )


# ---- export ---------------------------------------------------------------------------------


def _describe(module: Any) -> tuple[dict[str, bytes], dict[str, Any]]:
    """The members other than metadata.json, and the module-specific metadata."""
    if callable(getattr(module, "get_graph_json", None)):
        name = _model_name(getattr(module, "libmod_name", "default"))
        graph_json = module.get_graph_json()
        try:
            graph = _parse_graph(graph_json, "graph JSON")
        except FormatError as err:  # the caller's module is wrong, not a file
            raise ValueError(f"graph JSON: {err.detail}") from None
        lib = module.get_lib()
        params = module.get_params()
        members = {
            f"codegen/host/lib/{name}.rvm": bytes(lib.save()[0]),
            f"parameters/{name}.params": save_param_dict(params),
            "runtime-config/graph/graph.json": graph_json.encode("utf-8"),
        }
        memory = {"sids": _storage_map(graph)}
        runtime = "graph"
        source = getattr(module, "ir_mod", None)
    elif callable(getattr(module, "save", None)) and hasattr(module, "constant_values"):
        name = _model_name(getattr(module, "mod_name", "default"))
        members = {
            f"codegen/host/lib/{name}.rvm": bytes(module.save()[0]),
            f"parameters/{name}.params": save_param_dict({}),
        }
        constant_bytes = sum(int(np.asarray(c).nbytes) for c in module.constant_values)
        memory = {"constant_bytes": constant_bytes}
        runtime = "vm"
        source = getattr(module, "ir_mod", None)
    else:
        raise TypeError(
            "export_model_library_format takes what relay.build returns (a graph executor "
            f"factory) or a vm.Executable, got {type(module).__name__}"
        )
    if source is not None:
        members[f"src/{name}.relay"] = str(source).encode("utf-8")
    target = str(getattr(module, "target", "cpu") or "cpu")
    metadata = {
        "model_name": name,
        "memory": memory,
        "target": {"1": target},
        "runtimes": [runtime],
    }
    return members, metadata


def _model_name(name: Any) -> str:
    if not isinstance(name, str) or not _MODEL_NAME.fullmatch(name) or name in (".", ".."):
        raise ValueError(
            f"module name {name!r} cannot name files: use letters, digits, '_', '.' and '-'"
        )
    return name


def _storage_map(graph: dict[str, Any]) -> list[dict[str, Any]]:
    """One entry per storage id: its size (the largest entry it holds) and bound input."""
    attrs = graph["attrs"]
    shapes, dtypes, sids = attrs["shape"][1], attrs["dltype"][1], attrs["storage_id"][1]
    nodes, arg_nodes = graph["nodes"], set(graph["arg_nodes"])
    entry_of_node = graph.get("node_row_ptr") or list(range(len(nodes) + 1))
    inputs = {entry_of_node[i]: nodes[i]["name"] for i in arg_nodes}
    sizes: dict[int, int] = {}
    bindings: dict[int, str] = {}
    for entry, (shape, dtype, sid) in enumerate(zip(shapes, dtypes, sids, strict=True)):
        size = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        sizes[sid] = max(sizes.get(sid, 0), size)
        if entry in inputs:
            bindings[sid] = inputs[entry]
    sids_out = []
    for sid in sorted(sizes):
        item: dict[str, Any] = {"storage_id": sid, "size_bytes": sizes[sid]}
        if sid in bindings:
            item["input_binding"] = bindings[sid]
        sids_out.append(item)
    return sids_out


def _export_datetime() -> str:
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is not None and epoch.strip().isdigit():
        moment = _dt.datetime.fromtimestamp(int(epoch), tz=_dt.UTC)
    else:
        moment = _dt.datetime.now(tz=_dt.UTC)
    return moment.strftime(_DATETIME_FORMAT)


def _producer() -> str:
    from importlib import metadata

    try:
        return f"relayvm {metadata.version('relayvm')}"
    except metadata.PackageNotFoundError:
        return "relayvm"


def _json_bytes(value: Any) -> bytes:
    return (json.dumps(value, sort_keys=True, indent=2, ensure_ascii=True) + "\n").encode()


def _tar_bytes(members: Mapping[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(members):
            info = tarfile.TarInfo(name)
            info.size = len(members[name])
            info.mode = 0o644
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(members[name]))
    return buffer.getvalue()


# ---- reading --------------------------------------------------------------------------------


def _source_bytes(source: Any) -> bytes:
    if isinstance(source, bytes | bytearray | memoryview):
        return bytes(source)
    if isinstance(source, str | os.PathLike):
        return Path(os.fspath(source)).read_bytes()
    raise TypeError(f"expected a path or bytes, got {type(source).__name__}")


def _read_members(data: bytes) -> dict[str, bytes]:
    """Every regular member by name, read into memory after checking its header."""
    members: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            count = 0
            for info in tar:
                count += 1
                if count > MAX_MEMBERS:
                    raise FormatError(f"more than {MAX_MEMBERS} members", "archive")
                name = _member_name(info)
                if info.isdir():
                    continue
                if not info.isreg():
                    raise FormatError(f"member {name!r} is not a regular file", "archive")
                if name in members:
                    raise FormatError(f"member {name!r} appears twice", "archive")
                if info.size > MAX_CONSTANT_BYTES:
                    raise FormatError(f"member {name!r} is {info.size} bytes", "archive")
                handle = tar.extractfile(info)
                payload = b"" if handle is None else handle.read()
                if len(payload) != info.size:
                    raise FormatError(f"member {name!r} is truncated", "archive")
                members[name] = payload
    except FormatError:
        raise
    except (tarfile.TarError, EOFError, OSError, ValueError, UnicodeError) as err:
        raise FormatError(f"not a readable tar: {err}", "archive") from err
    return members


def _member_name(info: tarfile.TarInfo) -> str:
    """The member's name, refused unless it is a plain relative path inside the archive."""
    name = info.name.removeprefix("./").rstrip("/")
    parts = name.split("/")
    if (
        name.startswith("/")
        or any(part in ("", ".", "..") for part in parts)
        or any(c in name for c in "\\\x00")
    ):
        raise FormatError(
            f"member name {info.name!r} is not a relative path inside the archive", "archive"
        )
    return name


def _required(members: Mapping[str, bytes], name: str) -> bytes:
    if name not in members:
        raise FormatError(f"member {name!r} is missing", "archive")
    return members[name]


def _text(payload: bytes, name: str) -> str:
    if len(payload) > MAX_TEXT_MEMBER_BYTES:
        raise FormatError(f"member {name!r} is {len(payload)} bytes", "archive")
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError as err:
        raise FormatError(f"member {name!r} is not UTF-8 text: {err}", "archive") from err


def _parse_metadata(payload: bytes | None) -> dict[str, Any]:
    section = "metadata.json"
    if payload is None:
        raise FormatError("member 'metadata.json' is missing", "archive")
    try:
        metadata = json.loads(_text(payload, section))
    except json.JSONDecodeError as err:
        raise FormatError(f"not JSON: {err}", section) from err
    if not isinstance(metadata, dict):
        raise FormatError("not a JSON object", section)
    version = metadata.get("version")
    if type(version) is not int or version < 1:
        raise FormatError(f"'version' must be a positive integer, got {version!r}", section)
    if version > MODEL_LIBRARY_VERSION:
        raise FormatError(
            f"version {version} is newer than {MODEL_LIBRARY_VERSION}, the newest this "
            f"relayvm reads (written by {metadata.get('producer', 'an unknown producer')}); "
            "upgrade relayvm to read it",
            section,
        )
    name = metadata.get("model_name")
    try:
        _model_name(name)
    except ValueError as err:
        raise FormatError(f"'model_name': {err}", section) from err
    runtimes = metadata.get("runtimes")
    if not isinstance(runtimes, list) or len(runtimes) != 1 or runtimes[0] not in _RUNTIMES:
        raise FormatError(f'\'runtimes\' must be ["graph"] or ["vm"], got {runtimes!r}', section)
    target = metadata.get("target")
    if not isinstance(target, dict) or not all(isinstance(v, str) for v in target.values()):
        raise FormatError(
            f"'target' must map device ids to target strings, got {target!r}", section
        )
    return metadata


def _parse_graph(graph_json: Any, where: str) -> dict[str, Any]:
    """The graph's JSON object, with the fields the memory map reads checked for shape."""

    def fail(detail: str) -> FormatError:
        return FormatError(detail, where)

    if not isinstance(graph_json, str):
        raise fail(f"must be a str, got {type(graph_json).__name__}")
    try:
        graph = json.loads(graph_json)
    except (json.JSONDecodeError, RecursionError) as err:
        raise fail(f"not JSON: {err}") from err
    if not isinstance(graph, dict):
        raise fail("not a JSON object")
    nodes, arg_nodes, attrs = graph.get("nodes"), graph.get("arg_nodes"), graph.get("attrs")
    if not isinstance(nodes, list) or not all(
        isinstance(n, dict) and isinstance(n.get("name"), str) for n in nodes
    ):
        raise fail("'nodes' must be a list of objects with names")
    if not isinstance(arg_nodes, list) or not all(
        type(i) is int and 0 <= i < len(nodes) for i in arg_nodes
    ):
        raise fail("'arg_nodes' must list node indices")
    row_ptr = graph.get("node_row_ptr")
    if row_ptr is not None and (
        not isinstance(row_ptr, list)
        or len(row_ptr) != len(nodes) + 1
        or not all(type(i) is int and 0 <= i <= MAX_INDEX for i in row_ptr)
    ):
        raise fail("'node_row_ptr' must hold one index per node and one more")
    if not isinstance(attrs, dict):
        raise fail("'attrs' must be an object")
    columns = []
    for key in ("shape", "dltype", "storage_id"):
        column = attrs.get(key)
        if not (isinstance(column, list) and len(column) == 2 and isinstance(column[1], list)):
            raise fail(f"'attrs.{key}' must be [type, values]")
        columns.append(column[1])
    shapes, dtypes, sids = columns
    if not len(shapes) == len(dtypes) == len(sids):
        raise fail("'attrs' shape, dltype and storage_id lists differ in length")
    for shape, dtype, sid in zip(shapes, dtypes, sids, strict=True):
        if not isinstance(shape, list) or not all(
            type(d) is int and 0 <= d <= MAX_INDEX for d in shape
        ):
            raise fail(f"shape {shape!r} is not a list of dimensions")
        if type(sid) is not int or not 0 <= sid <= MAX_INDEX:
            raise fail(f"storage id {sid!r} is not an index")
        if dtype not in DTYPE_NAMES:
            raise fail(f"dltype {dtype!r} is not one of {', '.join(DTYPE_NAMES)}")
    if row_ptr is not None and row_ptr[-1] != len(shapes):
        raise fail("'node_row_ptr' does not end at the number of entries")
    return graph
