"""Model Library Format: one tar holding a compiled module, its parameters, source and metadata.

Lowest layer (``serialization``); standard library and the parameter codec only. A built
module says what goes into its archive through one method, ``model_library_parts()``,
returning plain data (:class:`ModelLibraryParts`): this layer never imports ``vm`` or
``compiler`` and never guesses at their objects' attributes.

TVM users hand Model Library Format (MLF) archives to deployment tools; ours is the layout
of TVM's version 1 and stores relayvm's executable as the host "library"::

    metadata.json                       what is inside (see below)
    codegen/host/lib/<model>.rvm        the executable (the code of ``Executable.save()``)
    parameters/<model>.params           the parameters (``save_param_dict``)
    relay.txt                           the Relay text of the module, when known
    runtime-config/graph/graph.json     the graph, for graph-executor modules

``metadata.json`` holds ``version`` (an integer bumped on any layout or schema change),
``model_name``, ``export_datetime`` (UTC, TVM's ``"%Y-%m-%d %H:%M:%SZ"``), ``memory`` (the
list of storage entries ``{storage_id, size_bytes[, input_binding]}``: for a graph, one per
storage id, sized by the largest entry it holds, with the input it binds; for a VM, one per
constant, the only storage fixed before running since a VM plans the rest while running),
``target`` (``{"1": str(target)}``, 1 being the CPU's device type), ``runtimes``
(``["graph"]`` or ``["vm"]``), ``style`` and ``producer``.

Writing is reproducible: members are sorted, owners, modes and times are fixed, and JSON is
written with sorted keys; ``export_datetime`` comes from ``SOURCE_DATE_EPOCH`` when that is
set, so the same module exported twice then gives the same bytes.

Reading never extracts anything and never lets a small archive allocate much: only member
headers are parsed, and each member's bytes are sliced from the archive itself, so nothing
larger than the archive is ever allocated. An archive with links, devices, sparse members,
absolute or ``..`` paths, duplicate or unknown names, a member larger than its limit or than
the archive, JSON nested too deeply or holding unreadable numbers, or a newer version is
refused with a :class:`FormatError` naming the member.
"""

from __future__ import annotations

import datetime as _dt
import io
import json
import os
import re
import stat
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

#: Largest archive read from a path: an executable and a parameter file at their limits,
#: the three text members at theirs, and room for the tar's own headers.
MAX_ARCHIVE_BYTES = 2 * MAX_CONSTANT_BYTES + 3 * MAX_TEXT_MEMBER_BYTES + (1 << 20)

#: Members whose contents are text (JSON or Relay), capped at ``MAX_TEXT_MEMBER_BYTES``;
#: every other member is capped at ``MAX_CONSTANT_BYTES``.
_TEXT_MEMBERS = ("metadata.json", "relay.txt", "runtime-config/graph/graph.json")

_DATETIME_FORMAT = "%Y-%m-%d %H:%M:%SZ"
_MODEL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}")
_RUNTIMES = ("graph", "vm")


class UnsupportedInModelLibraryFormatError(TypeError):
    """What was handed to :func:`export_model_library_format` is not a built module.

    TVM's name for the same refusal (``tvm.micro.UnsupportedInModelLibraryFormatError``);
    a ``TypeError`` too, since it is the argument's kind that is wrong.
    """


@dataclass(frozen=True)
class ModelLibraryParts:
    """What a built module puts into an archive, as plain data.

    A module that can be exported has a method ``model_library_parts()`` returning one
    (``vm``'s graph executor factory and ``vm.Executable`` do).

    Attributes
    ----------
    model_name : str
        The module's name; the members are named after it.
    runtime : str
        ``"graph"`` or ``"vm"``: what runs the executable.
    executable : bytes
        The executable's file bytes (the code of ``Executable.save()``).
    params : mapping of str to numpy.ndarray
        The parameters (empty for a VM executable, whose weights are constants).
    target : str
        The target it was compiled for.
    graph_json : str or None
        The graph-executor JSON: required for ``"graph"``, absent for ``"vm"``.
    relay_text : str or None
        The module's Relay text, when known.
    memory : list of dict or None
        The storage entries of ``metadata["memory"]`` for a VM module (for a graph module
        they are read off the graph).
    """

    model_name: str
    runtime: str
    executable: bytes = field(repr=False)
    params: Mapping[str, np.ndarray] = field(repr=False)
    target: str = "cpu"
    graph_json: str | None = field(default=None, repr=False)
    relay_text: str | None = field(default=None, repr=False)
    memory: list[dict[str, Any]] | None = None


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
    UnsupportedInModelLibraryFormatError
        If ``module`` is neither kind of built module (a ``TypeError``).
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
    spans = _member_spans(data)

    def payload(name: str) -> bytes | None:
        span = spans.get(name)
        return None if span is None else data[span[0] : span[0] + span[1]]

    metadata = _parse_metadata(payload("metadata.json"))
    name = metadata["model_name"]
    runtimes = tuple(metadata["runtimes"])
    expected = {
        "executable": f"codegen/host/lib/{name}.rvm",
        "params": f"parameters/{name}.params",
        "relay": "relay.txt",
        "graph": "runtime-config/graph/graph.json",
    }
    unknown = sorted(set(spans) - set(expected.values()) - {"metadata.json"})
    if unknown:
        raise FormatError(f"unexpected member {unknown[0]!r} in model {name!r}", "archive")
    executable = _required(payload(expected["executable"]), expected["executable"])
    try:
        params = load_param_dict(_required(payload(expected["params"]), expected["params"]))
    except FormatError as err:
        raise FormatError(f"{expected['params']}: {err}", "archive") from err
    graph = payload(expected["graph"])
    if runtimes == ("graph",) and graph is None:
        raise FormatError(f"member {expected['graph']!r} is missing (graph module)", "archive")
    if runtimes == ("vm",) and graph is not None:
        raise FormatError(f"VM module has a {expected['graph']!r}", "archive")
    graph_json = None if graph is None else _text(graph, expected["graph"])
    if graph_json is not None:
        _parse_graph(graph_json, expected["graph"])
    relay = payload(expected["relay"])
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
    parts_of = getattr(type(module), "model_library_parts", None)
    if not callable(parts_of):
        raise UnsupportedInModelLibraryFormatError(
            "export_model_library_format takes what relay.build returns (a graph executor "
            f"factory) or a vm.Executable, got {type(module).__name__}"
        )
    parts = parts_of(module)
    if not isinstance(parts, ModelLibraryParts) or parts.runtime not in _RUNTIMES:
        raise TypeError(
            f"{type(module).__name__}.model_library_parts() must return ModelLibraryParts "
            f"with a runtime in {_RUNTIMES}, got {type(parts).__name__}"
        )
    name = _model_name(parts.model_name)
    members = {
        f"codegen/host/lib/{name}.rvm": bytes(parts.executable),
        f"parameters/{name}.params": save_param_dict(dict(parts.params)),
    }
    if parts.runtime == "graph":
        if parts.graph_json is None:
            raise TypeError(f"{type(module).__name__}: a graph module's parts need graph_json")
        try:
            graph = _parse_graph(parts.graph_json, "graph JSON")
        except FormatError as err:  # the caller's module is wrong, not a file
            raise ValueError(f"graph JSON: {err.detail}") from None
        members["runtime-config/graph/graph.json"] = parts.graph_json.encode("utf-8")
        memory = _storage_map(graph)
    else:
        memory = list(parts.memory or [])
    if parts.relay_text is not None:
        members["relay.txt"] = parts.relay_text.encode("utf-8")
    metadata = {
        "model_name": name,
        "memory": memory,
        "target": {"1": str(parts.target or "cpu")},
        "runtimes": [parts.runtime],
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
        path = os.fspath(source)
        # Checked before opening: opening a FIFO blocks, and a device never ends.
        kind = stat.S_IFMT(os.stat(path).st_mode)
        if kind != stat.S_IFREG:
            raise FormatError(
                f"{path!r} is {_FILE_KINDS.get(kind, 'not a regular file')}, not an archive",
                "archive",
            )
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > MAX_ARCHIVE_BYTES:
                raise FormatError(
                    f"{path!r} is {size} bytes, more than MAX_ARCHIVE_BYTES ({MAX_ARCHIVE_BYTES})",
                    "archive",
                )
            return handle.read(MAX_ARCHIVE_BYTES + 1)
    raise TypeError(f"expected a path or bytes, got {type(source).__name__}")


_FILE_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def _member_spans(data: bytes) -> dict[str, tuple[int, int]]:
    """Where each regular member's bytes lie in ``data``, from the member headers alone.

    Nothing is extracted: a plain member's bytes are contiguous in the archive, so its
    (offset, size) is all a reader needs, and a member whose header declares more bytes
    than the archive holds is refused before anything is allocated for it.
    """
    spans: dict[str, tuple[int, int]] = {}
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
                if info.type == tarfile.GNUTYPE_SPARSE or info.sparse is not None:
                    raise FormatError(
                        f"member {name!r} is a sparse file ({info.size} bytes declared); "
                        "only plain files are read",
                        "archive",
                    )
                if info.type not in (tarfile.REGTYPE, tarfile.AREGTYPE):
                    raise FormatError(f"member {name!r} is not a regular file", "archive")
                if name in spans:
                    raise FormatError(f"member {name!r} appears twice", "archive")
                limit, limit_name = (
                    (MAX_TEXT_MEMBER_BYTES, "MAX_TEXT_MEMBER_BYTES")
                    if name in _TEXT_MEMBERS
                    else (MAX_CONSTANT_BYTES, "MAX_CONSTANT_BYTES")
                )
                if info.size > limit:
                    raise FormatError(
                        f"member {name!r} declares {info.size} bytes, more than "
                        f"{limit_name} ({limit})",
                        "archive",
                    )
                if info.offset_data + info.size > len(data):
                    raise FormatError(
                        f"member {name!r} is truncated: it declares {info.size} bytes, "
                        f"the archive holds {max(len(data) - info.offset_data, 0)} of them",
                        "archive",
                    )
                spans[name] = (info.offset_data, info.size)
    except FormatError:
        raise
    except (tarfile.TarError, EOFError, OSError, ValueError, UnicodeError) as err:
        raise FormatError(f"not a readable tar: {err}", "archive") from err
    return spans


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


def _required(payload: bytes | None, name: str) -> bytes:
    if payload is None:
        raise FormatError(f"member {name!r} is missing", "archive")
    return payload


def _text(payload: bytes, name: str) -> str:
    if len(payload) > MAX_TEXT_MEMBER_BYTES:
        raise FormatError(f"member {name!r} is {len(payload)} bytes", "archive")
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError as err:
        raise FormatError(f"member {name!r} is not UTF-8 text: {err}", "archive") from err


def _json(text: str, where: str) -> Any:
    """``text`` parsed as JSON, or a FormatError naming ``where``.

    Python's parser raises RecursionError for deep nesting and ValueError for integers
    longer than ``sys.get_int_max_str_digits()``; both are bad files, not bugs.
    """
    try:
        return json.loads(text)
    except RecursionError:
        raise FormatError("not JSON this reader accepts: nested too deeply", where) from None
    except ValueError as err:
        raise FormatError(f"not JSON this reader accepts: {err}", where) from None


def _is_count(value: Any, limit: int = MAX_INDEX) -> bool:
    return type(value) is int and 0 <= value <= limit


def _parse_metadata(payload: bytes | None) -> dict[str, Any]:
    section = "metadata.json"
    if payload is None:
        raise FormatError("member 'metadata.json' is missing", "archive")
    metadata = _json(_text(payload, section), section)
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
            f"'target' must map device ids to target strings, got {_brief(target)}", section
        )
    memory = metadata.get("memory")
    if not isinstance(memory, list):
        raise FormatError(
            f"'memory' must be a list of storage entries, got {_brief(memory)}", section
        )
    for index, entry in enumerate(memory):
        if not (
            isinstance(entry, dict)
            and _is_count(entry.get("storage_id"))
            and _is_count(entry.get("size_bytes"), 1 << 62)
            and isinstance(entry.get("input_binding", ""), str)
        ):
            raise FormatError(
                f"'memory'[{index}] must be {{storage_id, size_bytes[, input_binding]}} "
                f"with integer ids and sizes, got {_brief(entry)}",
                section,
            )
    return metadata


def _brief(value: Any) -> str:
    """``repr(value)``, cut short: a hostile file's values can be megabytes long."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _parse_graph(graph_json: Any, where: str) -> dict[str, Any]:
    """The graph's JSON object, with the fields the memory map reads checked for shape."""

    def fail(detail: str) -> FormatError:
        return FormatError(detail, where)

    if not isinstance(graph_json, str):
        raise fail(f"must be a str, got {type(graph_json).__name__}")
    graph = _json(graph_json, where)
    if not isinstance(graph, dict):
        raise fail("not a JSON object")
    nodes, arg_nodes, attrs = graph.get("nodes"), graph.get("arg_nodes"), graph.get("attrs")
    if not isinstance(nodes, list):
        raise fail("'nodes' must be a list of objects with names")

    def is_ref(ref: Any) -> bool:
        return (
            isinstance(ref, list)
            and len(ref) in (2, 3)
            and all(_is_count(x) for x in ref)
            and ref[0] < len(nodes)
        )

    for index, node in enumerate(nodes):
        if not isinstance(node, dict) or not isinstance(node.get("name"), str):
            raise fail(f"'nodes'[{index}] must be an object with a name")
        if not isinstance(node.get("op"), str):
            raise fail(f"'nodes'[{index}].op must be a string, got {_brief(node.get('op'))}")
        inputs = node.get("inputs", [])
        if not isinstance(inputs, list) or not all(is_ref(ref) for ref in inputs):
            raise fail(
                f"'nodes'[{index}].inputs must be a list of [node, index, version] "
                f"references, got {_brief(inputs)}"
            )
        if not isinstance(node.get("attrs", {}), dict):
            raise fail(f"'nodes'[{index}].attrs must be an object")
    heads = graph.get("heads", [])
    if not isinstance(heads, list) or not all(is_ref(ref) for ref in heads):
        raise fail("'heads' must be a list of [node, index, version] references")
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
