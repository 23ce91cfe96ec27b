"""The graph executor: runs a static dataflow graph of kernels, as TVM's graph executor does.

Runtime layer (``vm``); imports numpy and other ``vm`` modules, never ``compiler``.

``relay.build`` compiles a program without control flow into a
:class:`GraphExecutorFactoryModule`: a graph in TVM's graph-executor JSON (nodes, arg nodes,
heads, and per-entry shape, dtype and storage id), the executable whose kernel section holds
every kernel the graph calls, and the parameters (the program's constants, named ``p0``,
``p1``, ...). ``factory["default"](vm.cpu())`` instantiates it and :class:`GraphModule` drives
it with TVM's interface::

    module = vm.graph_executor.GraphModule(factory["default"](vm.cpu()))
    module.set_input("x", x)
    module.run()
    y = module.get_output(0)

The graph is checked once (every reference, dtype, rank and storage size) and then turned
into a flat list of kernel calls over preallocated buffers, so :meth:`GraphModule.run` is a
loop of kernel calls with nothing else to decide. Storage ids name the buffers: entries with
the same id share one buffer, sized for the largest of them; the compiler assigns ids so that
no two entries that are live together share one. A ``__nop`` node is a reshape: its output is
a view of its input, in the input's storage.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from serialization import (
    ALLOWED_DTYPES,
    FormatError,
    ModelLibraryParts,
    load_param_dict,
    read_model_library_format,
    save_param_dict,
)
from serialization.atomic import atomic_write
from serialization.formats import (
    EXECUTABLE_FORMAT,
    GRAPH_FACTORY_FORMAT,
    KERNEL_LIBRARY_FORMAT,
)
from serialization.framing import read_document, write_document
from vm.args import describe_shape, describe_value
from vm.device import Device, check_devices, cpu
from vm.errors import VMError
from vm.executable import Executable, KernelLibrary
from vm.explain import type_text
from vm.interpreter import kernel_threads
from vm.ndarray import NDArray
from vm.profiling import Recorder, Report
from vm.timing import check_settings, measure, preprocessor

#: Reshape nodes: no kernel, the output views the input (TVM's name for them).
NOP = "__nop"

#: Parameter nodes the compiler makes for constants are named with this prefix.
PARAM_PREFIX = "p"


class GraphExecutorFactoryModule:
    """What ``relay.build`` returns: a graph, the executable holding its kernels, and params.

    Parameters
    ----------
    graph_json : str
        The graph in TVM's graph-executor JSON.
    lib : vm.Executable
        The executable whose primitives the graph's ``func_name`` attributes name.
    params : mapping of str to numpy.ndarray
        Values for the graph's parameter nodes.
    mod_name : str
        The module's name: ``factory[mod_name]`` instantiates it.
    target : str
        The target it was compiled for.
    ir_mod : object, optional
        The module it was built from (printed as Relay text by model-library export).

    Examples
    --------
    >>> factory = relay.build(mod, params=params)               # doctest: +SKIP
    >>> module = vm.graph_executor.GraphModule(factory["default"](vm.cpu()))  # doctest: +SKIP
    """

    def __init__(
        self,
        graph_json: str,
        lib: Any,
        params: Mapping[str, np.ndarray],
        mod_name: str = "default",
        target: str = "cpu",
        ir_mod: Any = None,
    ) -> None:
        if not isinstance(graph_json, str):
            raise TypeError(f"graph_json must be a str, got {describe_value(graph_json)}")
        if not isinstance(lib, Executable):
            raise TypeError(f"lib must be a vm.Executable, got {describe_value(lib)}")
        if not isinstance(mod_name, str) or not mod_name:
            raise ValueError(f"mod_name must be a non-empty str, got {mod_name!r}")
        self.graph_json = graph_json
        self.lib = lib
        self.params = {str(k): np.asarray(v) for k, v in params.items()}
        self.libmod_name = mod_name
        self.target = target
        self.ir_mod = ir_mod
        # Checked now, so a bad graph fails at build time rather than on first use.
        self._graph = Graph.parse(graph_json, lib)

    def __repr__(self) -> str:
        return (
            f"GraphExecutorFactoryModule({self.libmod_name!r}, {len(self._graph.nodes)} nodes, "
            f"{len(self.params)} params)"
        )

    def __getitem__(self, name: str) -> Callable[..., GraphExecutorModule]:
        if name != self.libmod_name:
            raise KeyError(
                f"this factory holds module {self.libmod_name!r}, not {name!r}; "
                f"use factory[{self.libmod_name!r}]"
            )

        def create_module(device: Any = None) -> GraphExecutorModule:
            check_devices(device, "the graph executor")
            return GraphExecutorModule(self._graph, self.params, device)

        return create_module

    def get_graph_json(self) -> str:
        """The graph in TVM's graph-executor JSON."""
        return self.graph_json

    def get_params(self) -> dict[str, np.ndarray]:
        """The parameter values, by parameter node name."""
        return dict(self.params)

    def get_lib(self) -> Any:
        """The :class:`vm.Executable` holding the graph's kernels."""
        return self.lib

    def model_library_parts(self) -> ModelLibraryParts:
        """What a Model Library Format archive holds for this factory
        (``serialization.export_model_library_format``)."""
        code, _ = self.lib.save()
        return ModelLibraryParts(
            model_name=self.libmod_name,
            runtime="graph",
            executable=bytes(code),
            params=self.params,
            target=str(self.target),
            graph_json=self.graph_json,
            relay_text=None if self.ir_mod is None else str(self.ir_mod),
        )

    def get_executor_config(self) -> str:
        """The executor configuration (the graph JSON), as TVM's factories name it."""
        return self.graph_json

    def save(self) -> bytes:
        """The factory as one file's bytes (see :meth:`export_library`)."""

        module = {
            "mod_name": self.libmod_name,
            "target": str(self.target),
            "relay_text": None if self.ir_mod is None else str(self.ir_mod),
        }
        code, _ = self.lib.save()
        return write_document(
            GRAPH_FACTORY_FORMAT,
            [
                ("module", module),
                ("graph", self.graph_json),
                ("executable", bytes(code)),
                ("params", save_param_dict(self.params)),
            ],
        )

    def export_library(self, path: str | Any, *args: Any, **kwargs: Any) -> None:
        """Write the factory to ``path`` as one file, atomically (TVM's ``export_library``).

        The file holds the graph, the executable and the parameters;
        :func:`load_module` (``tvm.runtime.load_module``) reads it back, verifying the
        executable as ``Executable.load_exec`` does. TVM's compiler options
        (``fcompile``, ``cc``, ``options``...) name a C compiler, which relayvm does not
        use, so any given are refused rather than ignored.

        Raises
        ------
        TypeError
            If compiler options are given.
        OSError
            If ``path`` cannot be written; the old file, if any, is unchanged.
        """

        if args or kwargs:
            names = ", ".join([*(repr(a) for a in args), *kwargs])
            raise TypeError(
                f"export_library(path) takes no compiler options (got {names}): relayvm "
                "writes one file of graph, executable and parameters, with no C compiler"
            )
        atomic_write(path, self.save())


def load_module(path: str | Any) -> Any:
    """Read a file ``export_library`` wrote, as TVM's ``tvm.runtime.load_module``.

    Parameters
    ----------
    path : str or os.PathLike
        A graph executor factory's file (``factory.export_library(path)``), the library
        of an executable (``code, lib = exe.save(); lib.export_library(path)``), or an
        executable's file (``exe.save(path)``).

    Returns
    -------
    GraphExecutorFactoryModule, vm.executable.KernelLibrary or vm.Executable
        According to the file's kind. A factory answers ``["default"](dev)``.

    Raises
    ------
    serialization.FormatError
        If a factory file does not decode (naming the section).
    vm.ExecutableLoadError
        If the executable inside is malformed or invalid, or a library file does not
        decode.
    ValueError
        If the file is of no kind above, or a factory's graph does not fit its kernels.
    OSError
        If the file cannot be read.
    """
    import os

    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"load_module needs a file path, got {describe_value(path)}")
    with open(path, "rb") as handle:
        data = handle.read()
    magic = data[:8]
    if magic == GRAPH_FACTORY_FORMAT.magic:
        return _load_factory(data)
    if magic == KERNEL_LIBRARY_FORMAT.magic:
        return KernelLibrary.load(data)
    if magic == EXECUTABLE_FORMAT.magic:
        return Executable.load_exec(data)
    kinds = ", ".join(
        f.name for f in (GRAPH_FACTORY_FORMAT, KERNEL_LIBRARY_FORMAT, EXECUTABLE_FORMAT)
    )
    raise ValueError(
        f"{os.fspath(path)!r} is not a file relayvm's export_library or save wrote "
        f"(it starts with {magic!r}); load_module reads a {kinds}"
    )


def _load_factory(data: bytes) -> GraphExecutorFactoryModule:
    document = read_document(GRAPH_FACTORY_FORMAT, data)
    sections = document.sections
    module = sections["module"]
    if not (
        type(module) is dict
        and set(module) == {"mod_name", "target", "relay_text"}
        and isinstance(module["mod_name"], str)
        and isinstance(module["target"], str)
        and isinstance(module["relay_text"], (str, type(None)))
    ):
        raise FormatError(
            "expected a map of mod_name (str), target (str) and relay_text (str or nil)",
            "module",
        )
    for name, kind in (("graph", str), ("executable", bytes), ("params", bytes)):
        if type(sections[name]) is not kind:
            raise FormatError(
                f"expected {kind.__name__}, found {type(sections[name]).__name__}", name
            )
    try:
        params = load_param_dict(sections["params"])
    except FormatError as err:
        raise FormatError(f"the parameter dictionary does not decode: {err}", "params") from None
    return GraphExecutorFactoryModule(
        sections["graph"],
        Executable.load_exec(sections["executable"]),
        params,
        mod_name=module["mod_name"],
        target=module["target"],
        ir_mod=module["relay_text"],
    )


def load_model_library(source: str | bytes | Any) -> GraphExecutorFactoryModule:
    """The graph executor factory of a Model Library Format archive.

    Parameters
    ----------
    source : path or bytes
        What ``serialization.export_model_library_format`` wrote for a ``relay.build``
        result.

    Returns
    -------
    GraphExecutorFactoryModule
        Its ``ir_mod`` is the Relay text of the archive (a ``str``), if it holds one.

    Raises
    ------
    serialization.FormatError
        If the archive is malformed (naming the member).
    vm.ExecutableLoadError
        If the executable inside is malformed or invalid.
    ValueError
        If the archive holds no graph, or its graph does not fit its kernels.
    """

    library = read_model_library_format(source)
    if library.graph_json is None:
        raise ValueError(
            f"model library {library.model_name!r} holds a {'/'.join(library.runtimes)} "
            "module, not a graph; load its executable with vm.Executable.load_exec"
        )
    targets = library.metadata.get("target")
    target = next(iter(targets.values())) if isinstance(targets, dict) and targets else "cpu"
    return GraphExecutorFactoryModule(
        library.graph_json,
        Executable.load_exec(library.executable),
        library.params,
        mod_name=library.model_name,
        target=str(target),
        ir_mod=library.relay_text,
    )


def create(graph_json: str, lib: Any, device: Any = None) -> GraphModule:
    """A :class:`GraphModule` for ``graph_json`` over the kernels of ``lib`` (TVM's ``create``).

    Parameters are not set; use :meth:`GraphModule.set_input` or
    :meth:`GraphModule.load_params`.
    """
    check_devices(device, "graph_executor.create")
    return GraphModule(GraphExecutorModule(Graph.parse(graph_json, lib), {}, device))


# ---- the checked graph ----------------------------------------------------------------------


class Node:
    """One checked node: its name, kernel (None for inputs and reshapes) and entries."""

    __slots__ = ("first_entry", "func_name", "inputs", "name", "num_outputs", "op")

    def __init__(
        self,
        name: str,
        op: str,
        func_name: str,
        inputs: list[int],
        first_entry: int,
        num_outputs: int,
    ) -> None:
        self.name = name
        self.op = op
        self.func_name = func_name
        self.inputs = inputs  # entry ids
        self.first_entry = first_entry
        self.num_outputs = num_outputs


class Graph:
    """A parsed and checked graph: nodes, entries (shape, dtype, storage) and kernels."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.arg_nodes: list[int] = []
        self.heads: list[int] = []
        self.shapes: list[tuple[int, ...]] = []
        self.dtypes: list[np.dtype] = []
        self.storage_ids: list[int] = []
        self.primitives: dict[str, Any] = {}  # kernel name -> vm.program.Primitive

    @classmethod
    def parse(cls, graph_json: str, lib: Any) -> Graph:
        """Check ``graph_json`` against the kernels of ``lib``.

        Raises
        ------
        ValueError
            Naming the node or field that is wrong.
        """

        if not isinstance(lib, Executable):
            raise TypeError(f"the graph's lib must be a vm.Executable, got {describe_value(lib)}")
        try:
            data = json.loads(graph_json)
        except (TypeError, ValueError) as err:
            raise ValueError(f"graph JSON does not parse: {err}") from None
        graph = cls()
        graph._read(data if isinstance(data, dict) else {}, lib)
        return graph

    def _read(self, data: dict[str, Any], lib: Any) -> None:
        nodes = _field(data, "nodes", list)
        attrs = _field(data, "attrs", dict)
        shapes = _typed_attr(attrs, "shape", "list_shape")
        dtypes = _typed_attr(attrs, "dltype", "list_str")
        storage = _typed_attr(attrs, "storage_id", "list_int")
        row_ptr = _field(data, "node_row_ptr", list)
        if len(row_ptr) != len(nodes) + 1:
            raise ValueError(
                f"graph JSON: node_row_ptr has {len(row_ptr)} entries for {len(nodes)} nodes"
            )
        count = row_ptr[-1]
        if not (len(shapes) == len(dtypes) == len(storage) == count):
            raise ValueError(
                f"graph JSON: {count} entries, but shape, dltype and storage_id have "
                f"{len(shapes)}, {len(dtypes)} and {len(storage)}"
            )
        for entry in range(count):
            self.shapes.append(_shape(shapes[entry], entry))
            self.dtypes.append(_dtype(dtypes[entry], entry))
            sid = storage[entry]
            if not _is_index(sid, count):
                raise ValueError(f"graph JSON: entry {entry} has storage_id {sid!r}")
            self.storage_ids.append(sid)
        primitives: dict[str, Any] = {}
        for primitive in lib.primitives:
            primitives.setdefault(primitive.name, primitive)
        for index, raw in enumerate(nodes):
            self.nodes.append(self._node(index, raw, row_ptr, primitives))
        self.arg_nodes = [
            _node_index(i, len(nodes), "arg_nodes") for i in _field(data, "arg_nodes", list)
        ]
        for i in self.arg_nodes:
            if self.nodes[i].op != "null":
                raise ValueError(f"graph JSON: arg node {i} ({self.nodes[i].name!r}) is an op")
        self.heads = [self._entry(ref, "heads", len(nodes)) for ref in _field(data, "heads", list)]
        if len({self.nodes[i].name for i in self.arg_nodes}) != len(self.arg_nodes):
            raise ValueError("graph JSON: two input nodes share a name")

    def _node(self, index: int, raw: Any, row_ptr: list[Any], primitives: dict[str, Any]) -> Node:
        where = f"graph JSON: node {index}"
        if not isinstance(raw, dict):
            raise ValueError(f"{where} is not an object")
        name = raw.get("name")
        op = raw.get("op")
        if not isinstance(name, str) or op not in ("null", "tvm_op"):
            raise ValueError(f"{where} needs a str name and op 'null' or 'tvm_op'")
        where = f"graph JSON: node {index} ({name!r})"
        first, end = row_ptr[index], row_ptr[index + 1]
        if not (isinstance(first, int) and isinstance(end, int) and 0 <= first <= end):
            raise ValueError(f"{where}: node_row_ptr is not increasing")
        refs = raw.get("inputs", [])
        if not isinstance(refs, list):
            raise ValueError(f"{where}: inputs must be a list of references, got {refs!r:.80}")
        inputs = [self._entry(ref, where, index) for ref in refs]
        if op == "null":
            if inputs or end - first != 1:
                raise ValueError(f"{where}: an input node has no inputs and one output")
            return Node(name, op, "", [], first, 1)
        attrs = raw.get("attrs")
        func_name = attrs.get("func_name") if isinstance(attrs, dict) else None
        if not isinstance(func_name, str):
            raise ValueError(f"{where}: attrs.func_name is missing")
        node = Node(name, op, func_name, inputs, first, end - first)
        outputs = list(range(first, end))
        if func_name == NOP:
            self._check_nop(where, inputs, outputs)
            return node
        primitive = primitives.get(func_name)
        if primitive is None:
            raise ValueError(f"{where}: the executable has no kernel named {func_name!r}")
        description = primitive.description
        if "shape_func" in description:
            raise ValueError(f"{where}: {func_name!r} is a shape function, not a kernel")
        for role, entries, types in (
            ("input", inputs, description["inputs"]),
            ("output", outputs, description["outputs"]),
        ):
            if len(entries) != len(types):
                raise ValueError(
                    f"{where}: kernel {func_name} takes {len(types)} {role}s, "
                    f"the node has {len(entries)}"
                )
            for k, (entry, (dtype, ndim)) in enumerate(zip(entries, types)):
                if self.dtypes[entry] != np.dtype(dtype) or len(self.shapes[entry]) != ndim:
                    raise ValueError(
                        f"{where}: {role} {k} is {_entry_text(self, entry)}, but kernel "
                        f"{func_name} takes a {dtype} tensor of rank {ndim}"
                    )
        self.primitives[func_name] = primitive
        return node

    def _check_nop(self, where: str, inputs: list[int], outputs: list[int]) -> None:
        if len(inputs) != 1 or len(outputs) != 1:
            raise ValueError(f"{where}: a {NOP} node has one input and one output")
        (src,), (dst,) = inputs, outputs
        if (
            self.dtypes[src] != self.dtypes[dst]
            or _size(self.shapes[src]) != _size(self.shapes[dst])
            or self.storage_ids[src] != self.storage_ids[dst]
        ):
            raise ValueError(
                f"{where}: a {NOP} node views its input: {_entry_text(self, dst)} cannot view "
                f"{_entry_text(self, src)}"
            )

    def _entry(self, ref: Any, where: str, limit: int) -> int:
        if (
            not isinstance(ref, list)
            or len(ref) < 2
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in ref)
        ):
            raise ValueError(f"{where}: {ref!r} is not a [node, index, version] reference")
        node, index = ref[0], ref[1]
        if not 0 <= node < limit:
            raise ValueError(f"{where}: reference to node {node}, which does not come before it")
        target = self.nodes[node]
        if not 0 <= index < target.num_outputs:
            raise ValueError(f"{where}: node {node} has no output {index}")
        return target.first_entry + index

    def storage_sizes(self) -> dict[int, int]:
        """Bytes of each storage id: the largest entry placed in it."""
        sizes: dict[int, int] = {}
        for shape, dtype, sid in zip(self.shapes, self.dtypes, self.storage_ids):
            sizes[sid] = max(sizes.get(sid, 0), _size(shape) * dtype.itemsize)
        return sizes


def _field(data: dict[str, Any], name: str, kind: type) -> Any:
    value = data.get(name)
    if not isinstance(value, kind):
        raise ValueError(f"graph JSON: {name!r} is missing or not a {kind.__name__}")
    return value


def _typed_attr(attrs: dict[str, Any], name: str, tag: str) -> list[Any]:
    value = attrs.get(name)
    if not (isinstance(value, list) and len(value) == 2 and value[0] == tag):
        raise ValueError(f"graph JSON: attrs.{name} must be [{tag!r}, [...]]")
    if not isinstance(value[1], list):
        raise ValueError(f"graph JSON: attrs.{name} must hold a list")
    return value[1]


def _shape(value: Any, entry: int) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in value
    ):
        raise ValueError(f"graph JSON: entry {entry} has shape {value!r}")
    return tuple(value)


def _dtype(value: Any, entry: int) -> np.dtype:
    if value not in {np.dtype(d).name for d in ALLOWED_DTYPES}:
        raise ValueError(f"graph JSON: entry {entry} has dtype {value!r}")
    return np.dtype(value)


def _is_index(value: Any, limit: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < max(limit, 1)


def _node_index(value: Any, limit: int, where: str) -> int:
    if not _is_index(value, limit):
        raise ValueError(f"graph JSON: {where} names node {value!r}, which does not exist")
    return value


def _size(shape: Sequence[int]) -> int:
    return int(np.prod(shape, dtype=np.int64))


def _entry_text(graph: Graph, entry: int) -> str:
    return f"{graph.dtypes[entry]}{describe_shape(graph.shapes[entry])}"


# ---- the runtime module ---------------------------------------------------------------------


class GraphExecutorModule:
    """One instance of a graph: its buffers and the kernel calls over them.

    Made by ``factory[name](device)``; wrap it in :class:`GraphModule`. Instances share
    the graph and kernels but never buffers, so each may run in its own thread.
    """

    def __init__(self, graph: Graph, params: Mapping[str, np.ndarray], device: Any) -> None:
        from vm.shape_funcs import load_primitive  # deferred: numba, until an instance

        self.graph = graph
        self.device = device
        kernels = {}
        for func_name, primitive in graph.primitives.items():
            try:
                kernels[func_name] = load_primitive(primitive.description)
            except Exception as err:
                raise VMError(f"cannot build kernel {func_name}: {err}") from err
        # Zeroed, so a run before every input is set reads zeros rather than old memory.
        buffers = {
            sid: np.zeros(max(size, 1), np.uint8) for sid, size in graph.storage_sizes().items()
        }
        self.entries: list[np.ndarray] = [
            np.ndarray(shape, dtype, buffers[sid], 0)
            for shape, dtype, sid in zip(graph.shapes, graph.dtypes, graph.storage_ids)
        ]
        self._kernels = kernels
        self.calls: list[tuple[Callable[..., Any], tuple[np.ndarray, ...], Node]] = []
        self._link()
        self.input_names = [graph.nodes[i].name for i in graph.arg_nodes]
        self.input_entries = {
            graph.nodes[i].name: graph.nodes[i].first_entry for i in graph.arg_nodes
        }
        self.param_names: set[str] = set()
        self.load_param_values(params)

    def _link(self) -> None:
        """Point reshape views and kernel calls at the current entry arrays."""
        graph = self.graph
        calls = []
        for node in graph.nodes:
            if node.op == "null":
                continue
            outputs = range(node.first_entry, node.first_entry + node.num_outputs)
            if node.func_name == NOP:
                (src,), (dst,) = node.inputs, outputs
                self.entries[dst] = self.entries[src].reshape(graph.shapes[dst])
                continue
            args = tuple(self.entries[e] for e in (*node.inputs, *outputs))
            calls.append((self._kernels[node.func_name].entry, args, node))
        self.calls = calls

    def share_param_values(self, other: GraphExecutorModule, names: Sequence[str]) -> None:
        """Make inputs ``names`` use ``other``'s arrays for them (no copy).

        Raises
        ------
        KeyError
            If a name is not an input of both graphs.
        ValueError
            If the two inputs differ in dtype or shape, or this graph's storage of the
            input is shared with another value (writing it would change ``other``'s).
        """
        graph = self.graph
        views = {n.first_entry for n in graph.nodes if n.func_name == NOP}
        shared: dict[int, np.ndarray] = {}
        for name in names:
            entry = self.input_entries.get(name)
            source = other.input_entries.get(name)
            if entry is None or source is None:
                graph_name = "this graph" if entry is None else "the other graph"
                raise KeyError(f"cannot share parameter {name!r}: {graph_name} has no such input")
            mine, theirs = self.entries[entry], other.entries[source]
            if mine.shape != theirs.shape or mine.dtype != theirs.dtype:
                raise ValueError(
                    f"cannot share parameter {name!r}: it is {_entry_text(graph, entry)} here "
                    f"but {theirs.dtype}{describe_shape(theirs.shape)} in the other graph"
                )
            sid = graph.storage_ids[entry]
            for other_entry, other_sid in enumerate(graph.storage_ids):
                if other_sid == sid and other_entry != entry and other_entry not in views:
                    raise ValueError(
                        f"cannot share parameter {name!r}: its storage {sid} also holds "
                        f"entry {other_entry}, which the graph writes"
                    )
            shared[entry] = theirs
        for entry, array in shared.items():
            self.entries[entry] = array
        self._link()
        self.param_names.update(names)

    def load_param_values(self, params: Mapping[str, np.ndarray]) -> None:
        """Copy parameter values into their input nodes (names must exist)."""
        for name, value in params.items():
            self.set_input(name, value)
            self.param_names.add(name)

    def set_input(self, name: str, value: Any) -> None:
        """Copy ``value`` into input ``name``, checking its dtype and shape."""
        entry = self.input_entries.get(name)
        if entry is None:
            raise KeyError(
                f"the graph has no input named {name!r}; inputs: {', '.join(self.input_names)}"
            )
        target = self.entries[entry]
        array = _as_input(value, target.dtype, name)
        if array.shape != target.shape:
            raise ValueError(
                f"input {name!r} expects {target.dtype}{describe_shape(target.shape)}, "
                f"got {array.dtype}{describe_shape(array.shape)}"
            )
        np.copyto(target, array)

    def run(self, recorder: Any = None) -> None:
        """Run every kernel of the graph once, in order; with a ``vm.profiling.Recorder``,
        time each kernel call into it."""
        for entry, args, node in self.calls:
            try:
                if recorder is None:
                    entry(*args)
                    continue
                start = time.perf_counter_ns()
                entry(*args)
                elapsed = time.perf_counter_ns() - start
            except Exception as err:
                raise VMError(
                    f"graph node {node.name!r} (kernel {node.func_name}) failed: "
                    f"{type(err).__name__}: {err}"
                ) from err
            shapes = ", ".join(type_text(a.dtype, a.shape) for a in args)
            recorder.record(node.func_name, shapes, elapsed)

    def time_evaluator(
        self,
        func_name: str,
        dev: Any = None,
        number: int = 10,
        repeat: int = 1,
        min_repeat_ms: float = 0,
        cooldown_interval_ms: float = 0,
        repeats_to_cooldown: int = 1,
        limit_zero_time_iterations: int = 100,
        f_preproc: Callable[..., Any] | str | None = None,
    ) -> Callable[[], Any]:
        """A callable timing :meth:`run` with TVM's loop (``module.module.time_evaluator("run",
        dev)`` in TVM's tutorials); it returns a :class:`vm.BenchmarkResult`.

        Raises
        ------
        ValueError
            If ``func_name`` is not ``"run"`` or a setting is out of range.
        """

        check_devices(dev, "time_evaluator")
        if func_name != "run":
            raise ValueError(f"the graph executor can only time 'run', not {func_name!r}")
        settings = check_settings(
            number=number,
            repeat=repeat,
            min_repeat_ms=min_repeat_ms,
            cooldown_interval_ms=cooldown_interval_ms,
            repeats_to_cooldown=repeats_to_cooldown,
            limit_zero_time_iterations=limit_zero_time_iterations,
        )
        preproc = preprocessor(f_preproc)

        def evaluate() -> Any:
            return measure(self.run, (), preproc, **settings)

        return evaluate

    def run_until(self, node_index: int) -> None:
        """Run the kernel calls of the nodes up to and including ``node_index``, in order."""
        position = {id(node): i for i, node in enumerate(self.graph.nodes)}
        for entry, args, node in self.calls:
            if position[id(node)] > node_index:
                break
            try:
                entry(*args)
            except Exception as err:
                raise VMError(
                    f"graph node {node.name!r} (kernel {node.func_name}) failed: "
                    f"{type(err).__name__}: {err}"
                ) from err


def _as_input(value: Any, dtype: np.dtype, name: str) -> np.ndarray:
    if isinstance(value, np.ndarray):
        array = value
    elif isinstance(value, (bool, int, float, np.generic, list, tuple)):
        array = np.asarray(value)
    else:
        raise TypeError(f"input {name!r} must be a numpy array, got {describe_value(value)}")
    if array.dtype == dtype:
        return array
    # Python values carry no dtype of their own: convert them when the kinds agree.
    if not isinstance(value, (np.ndarray, np.generic)) and np.can_cast(
        array.dtype, dtype, "same_kind"
    ):
        return array.astype(dtype)
    raise TypeError(f"input {name!r} expects dtype {dtype}, got {array.dtype}")


# ---- the user-facing wrapper ----------------------------------------------------------------


class GraphModule:
    """TVM's ``graph_executor.GraphModule``: set inputs, run, read outputs, benchmark.

    Parameters
    ----------
    module : GraphExecutorModule
        What ``factory["default"](vm.cpu())`` returns.

    Notes
    -----
    Outputs are copies the caller owns: a later :meth:`run` never overwrites them.
    """

    def __init__(self, module: GraphExecutorModule) -> None:
        if not isinstance(module, GraphExecutorModule):
            raise TypeError(
                "GraphModule wraps what factory['default'](vm.cpu()) returns, got "
                f"{describe_value(module)}"
            )
        self.module = module
        self._graph = module.graph

    def set_input(self, key: str | int | None = None, value: Any = None, **params: Any) -> None:
        """Set input ``key`` (a name or an index) to ``value``, and each keyword input.

        Raises
        ------
        KeyError
            If a name is not an input of the graph.
        TypeError, ValueError
            If a value's dtype or shape differs from the input's.
        """
        if key is not None:
            self.module.set_input(self._input_name(key), value)
        for name, param in params.items():
            self.module.set_input(name, param)

    def run(self, **inputs: Any) -> None:
        """Set ``inputs`` by name, then run the graph."""
        if inputs:
            self.set_input(**inputs)
        self.module.run()

    def get_num_inputs(self) -> int:
        """The number of inputs a caller sets (parameter nodes excluded)."""
        return len(self._data_inputs())

    def get_num_outputs(self) -> int:
        """The number of outputs (a tuple result is flattened)."""
        return len(self._graph.heads)

    def get_input_index(self, name: str) -> int:
        """The index of input ``name`` among all inputs (parameters included), or -1 if
        the graph has no such input (as TVM)."""
        names = self.module.input_names
        return names.index(name) if name in names else -1

    def get_device(self) -> Any:
        """The device the module runs on (``vm.cpu()`` when none was given)."""

        device = self.module.device
        if isinstance(device, (list, tuple)):
            device = device[0] if device else None
        return device if isinstance(device, Device) else cpu()

    def __getitem__(self, key: str) -> Callable[..., Any]:
        """TVM's packed-function lookup: ``module["run"]()``, ``module["get_output"](0)``...

        Raises
        ------
        KeyError
            If ``key`` is not one of the module's functions (the message lists them).
        """
        if not isinstance(key, str) or key not in _PACKED_FUNCTIONS:
            raise KeyError(
                f"the graph module has no function {key!r}; it has {', '.join(_PACKED_FUNCTIONS)}"
            )
        return getattr(self, key)

    def share_params(self, other: GraphModule, params_bytes: bytes | bytearray) -> None:
        """Use ``other``'s parameter arrays for the parameters named in ``params_bytes``.

        As TVM's ``share_params``: the names in the ``save_param_dict`` blob choose which
        parameters are shared (their values are not used); afterwards both modules read
        the same memory, so the weights are held once. Loading new values into either
        changes both.

        Raises
        ------
        TypeError
            If ``other`` is not a GraphModule.
        KeyError, ValueError
            If a named parameter is not an input of both graphs with the same dtype and
            shape, or its storage here is shared with another value.
        """

        if not isinstance(other, GraphModule):
            raise TypeError(f"share_params needs another GraphModule, got {describe_value(other)}")
        names = list(load_param_dict(bytes(params_bytes)))
        self.module.share_param_values(other.module, names)

    def debug_get_output(self, node: int | str, out: np.ndarray | None = None) -> np.ndarray:
        """Run the graph up to ``node`` (an index or a name) and return its first output.

        Only the kernels of the nodes before and including ``node`` run, with the inputs
        set so far; the result is copied into ``out`` if given.

        Raises
        ------
        KeyError
            If there is no such node (the message names it).
        ValueError
            If ``out`` does not match the output's dtype and shape.
        """
        nodes = self._graph.nodes
        if isinstance(node, str):
            matches = [i for i, n in enumerate(nodes) if n.name == node]
            if not matches:
                raise KeyError(f"the graph has no node named {node!r}")
            index = matches[0]
        elif isinstance(node, int) and not isinstance(node, bool) and 0 <= node < len(nodes):
            index = node
        else:
            raise KeyError(f"node {node!r} is neither a node name nor an index below {len(nodes)}")
        self.module.run_until(index)
        entry = nodes[index].first_entry
        return _copy_out(self.module.entries[entry], out, f"node {nodes[index].name!r}")

    def get_input(self, key: str | int, out: np.ndarray | None = None) -> np.ndarray:
        """A copy of input ``key`` (a name or an index), or copied into ``out``."""
        entry = self.module.input_entries[self._input_name(key)]
        return _copy_out(self.module.entries[entry], out, f"input {key!r}")

    def get_output(self, index: int, out: np.ndarray | None = None) -> np.ndarray:
        """A copy of output ``index`` of the last run, or copied into ``out``.

        Raises
        ------
        IndexError
            If there is no output ``index``.
        """
        heads = self._graph.heads
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(heads):
            raise IndexError(f"output index {index!r} out of range: the graph has {len(heads)}")
        return _copy_out(self.module.entries[heads[index]], out, f"output {index}")

    def get_input_info(self) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
        """``(shape_dict, dtype_dict)`` of the inputs a caller sets."""
        shapes, dtypes = {}, {}
        for name in self._data_inputs():
            entry = self.module.entries[self.module.input_entries[name]]
            shapes[name] = entry.shape
            dtypes[name] = entry.dtype.name
        return shapes, dtypes

    def get_output_info(self) -> tuple[list[tuple[int, ...]], list[str]]:
        """Shapes and dtypes of the outputs, in output order."""
        entries = [self.module.entries[e] for e in self._graph.heads]
        return [e.shape for e in entries], [e.dtype.name for e in entries]

    def load_params(self, params_bytes: bytes | bytearray) -> None:
        """Set parameters from a ``serialization.save_param_dict`` blob.

        Names the graph has no input for are ignored, as TVM does (a blob saved for a
        larger model loads into a part of it).
        """

        inputs = self.module.input_entries
        params = load_param_dict(bytes(params_bytes))
        self.module.load_param_values({k: v for k, v in params.items() if k in inputs})

    def benchmark(
        self,
        device: Any = None,
        func_name: str = "run",
        repeat: int = 5,
        number: int = 5,
        min_repeat_ms: float | None = None,
        end_to_end: bool = False,
        cooldown_interval_ms: float = 0,
        repeats_to_cooldown: int = 1,
        limit_zero_time_iterations: int = 100,
        **kwargs: Any,
    ) -> Any:
        """Time :meth:`run` as TVM's ``GraphModule.benchmark`` does.

        Keyword arguments are set as inputs once, untimed; with ``end_to_end=True`` they are
        set again in every timed call and the outputs are copied out, so both are timed.

        Returns
        -------
        vm.BenchmarkResult
            Seconds per run, one entry per repeat.
        """

        check_devices(device, "benchmark")
        if func_name != "run":
            raise ValueError(f"the graph executor can only benchmark 'run', not {func_name!r}")
        settings = check_settings(
            number=number,
            repeat=repeat,
            min_repeat_ms=0 if min_repeat_ms is None else min_repeat_ms,
            cooldown_interval_ms=cooldown_interval_ms,
            repeats_to_cooldown=repeats_to_cooldown,
            limit_zero_time_iterations=limit_zero_time_iterations,
        )
        if end_to_end:

            def once_end_to_end() -> Any:
                self.run(**kwargs)
                return [self.get_output(i) for i in range(self.get_num_outputs())]

            return measure(once_end_to_end, (), None, **settings)
        if kwargs:
            self.set_input(**kwargs)
        return measure(self.module.run, (), None, **settings)

    def profile(self, **inputs: Any) -> Any:
        """Run the graph once more after a warm-up, timing every kernel call (TVM's debug
        executor's ``profile``).

        Returns
        -------
        vm.Report
            One row per kernel and argument shapes, with durations, percentages of the
            whole run and counts, as ``VirtualMachine.profile`` gives.
        """

        self.run(**inputs)  # warm-up, untimed
        recorder = Recorder()
        start = time.perf_counter_ns()
        self.module.run(recorder)
        total_ns = time.perf_counter_ns() - start
        configuration = {"Executor": "Graph", "Number of threads": kernel_threads()}
        return Report.from_recorder(recorder, total_ns, configuration)

    def _data_inputs(self) -> list[str]:
        return [n for n in self.module.input_names if n not in self.module.param_names]

    def _input_name(self, key: str | int) -> str:
        names = self.module.input_names
        if isinstance(key, str):
            return key
        if isinstance(key, int) and not isinstance(key, bool) and 0 <= key < len(names):
            return names[key]
        raise KeyError(f"input {key!r} is neither an input name nor an index below {len(names)}")


#: What ``GraphModule[name]`` returns: TVM's graph executor functions.
_PACKED_FUNCTIONS = (
    "set_input",
    "run",
    "get_output",
    "get_input",
    "get_num_outputs",
    "get_num_inputs",
    "get_input_index",
    "get_input_info",
    "get_output_info",
    "load_params",
    "share_params",
    "debug_get_output",
    "get_device",
)


def _copy_out(array: np.ndarray, out: np.ndarray | None, what: str) -> np.ndarray:
    if out is None:
        return array.copy().view(NDArray)
    if not isinstance(out, np.ndarray) or out.shape != array.shape or out.dtype != array.dtype:
        raise ValueError(
            f"out for {what} must be a {array.dtype}{describe_shape(array.shape)} numpy array, "
            f"got {describe_value(out)}"
        )
    np.copyto(out, array)
    return out
