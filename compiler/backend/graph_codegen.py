"""Graph code generation: turn a dataflow program's bytecode into a graph-executor graph.

Compiler layer (``compiler.backend``); used by ``relay.build``.

A program without control flow compiles to straight-line bytecode: allocations, kernel
calls, tuple building and projection, calls to other straight-line functions, and
``ret``. :func:`graph_from_executable` runs ``@main``'s bytecode symbolically, inlining
calls with an explicit frame stack (no recursion), and records each kernel call as a
``tvm_op`` node, each reshape as a ``__nop`` node viewing its input, each parameter of
``@main`` as an input node and each constant as a parameter node ``p<i>``. A nested
tuple result is flattened into the graph's heads, as TVM does.

Storage ids are then assigned by liveness: an entry's storage returns to a free list
after the last node that reads it (a reshape's output keeps its input's storage alive),
and a new output takes the smallest free storage that fits, else grows the largest free
one, else gets a new one. Inputs, parameters and outputs never share storage.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vm.isa import OPCODES, Opcode


class GraphCodegenError(ValueError):
    """The program cannot be expressed as a static graph (the message says why)."""


@dataclass
class _Tensor:
    """A register holding a graph entry (node index, output index)."""

    node: int
    index: int


@dataclass
class _Pending:
    """A register holding an allocated tensor no kernel has written yet."""

    shape: tuple[int, ...]
    dtype: str


@dataclass
class _Const:
    """A register holding constant ``index`` (a parameter node is made on first use)."""

    index: int


@dataclass
class _Frame:
    function: Any
    regs: list[Any]
    pc: int = 0
    ret_dst: int | None = None  # caller's register for the result


@dataclass
class _GraphBuilder:
    exe: Any
    nodes: list[dict[str, Any]] = field(default_factory=list)
    entry_types: list[tuple[tuple[int, ...], str]] = field(default_factory=list)
    node_first: list[int] = field(default_factory=list)
    arg_nodes: list[int] = field(default_factory=list)
    const_nodes: dict[int, int] = field(default_factory=dict)
    names: set[str] = field(default_factory=set)

    def add_node(self, node: dict[str, Any], outputs: list[tuple[tuple[int, ...], str]]) -> int:
        name = node["name"]
        suffix = 0
        while name in self.names:
            suffix += 1
            name = f"{node['name']}_{suffix}"
        self.names.add(name)
        node["name"] = name
        self.nodes.append(node)
        self.node_first.append(len(self.entry_types))
        self.entry_types.extend(outputs)
        return len(self.nodes) - 1

    def input_node(self, name: str, shape: tuple[int, ...], dtype: str) -> _Tensor:
        index = self.add_node({"op": "null", "name": name, "inputs": []}, [(shape, dtype)])
        self.arg_nodes.append(index)
        return _Tensor(index, 0)

    def tensor(self, value: Any, where: str) -> _Tensor:
        if isinstance(value, _Const):
            node = self.const_nodes.get(value.index)
            if node is None:
                array = self.exe.constant_values[value.index]
                node = self.input_node(f"p{value.index}", array.shape, array.dtype.name).node
                self.const_nodes[value.index] = node
            return _Tensor(node, 0)
        if isinstance(value, _Tensor):
            return value
        raise GraphCodegenError(f"{where}: expected a tensor, found {_describe(value)}")

    def ref(self, tensor: _Tensor) -> list[int]:
        return [tensor.node, tensor.index, 0]


def graph_from_executable(exe: Any, func_name: str = "main") -> tuple[str, dict[str, Any]]:
    """The graph-executor JSON for ``func_name`` of ``exe``, and its parameter values.

    Parameters
    ----------
    exe : vm.Executable
        A compiled program whose ``func_name`` is straight-line code.
    func_name : str
        The function the graph runs.

    Returns
    -------
    graph_json : str
        TVM's graph-executor JSON.
    params : dict of str to numpy.ndarray
        Values of the parameter nodes (the constants the graph reads), by node name.

    Raises
    ------
    GraphCodegenError
        If the function has control flow, dynamic shapes or non-tensor inputs.
    """
    builder = _GraphBuilder(exe)
    main = exe.get_function(func_name)
    regs: list[Any] = [None] * main.register_file_size
    for i, (name, spec) in enumerate(zip(main.params, main.param_types)):
        if spec[0] != "tensor" or any(d < 0 for d in spec[1]):
            raise GraphCodegenError(
                f"parameter {name!r} of @{func_name} has type {_spec_text(spec)}; the graph "
                "executor takes tensors of static shape only (use relay.vm.compile)"
            )
        regs[i] = builder.input_node(name, tuple(spec[1]), spec[2])
    result = _run_symbolically(builder, main, regs)
    heads = [builder.ref(builder.tensor(t, f"the result of @{func_name}")) for t in _flat(result)]
    storage_ids = _plan_storage(builder, heads)
    row_ptr = [*builder.node_first, len(builder.entry_types)]
    graph = {
        "nodes": builder.nodes,
        "arg_nodes": builder.arg_nodes,
        "heads": heads,
        "attrs": {
            "dltype": ["list_str", [dtype for _, dtype in builder.entry_types]],
            "shape": ["list_shape", [list(shape) for shape, _ in builder.entry_types]],
            "storage_id": ["list_int", storage_ids],
        },
        "node_row_ptr": row_ptr,
    }
    params = {
        f"p{const}": np.array(exe.constant_values[const]) for const in sorted(builder.const_nodes)
    }
    return json.dumps(graph, separators=(",", ":")), params


def _run_symbolically(builder: _GraphBuilder, main: Any, regs: list[Any]) -> Any:
    exe = builder.exe
    stack = [_Frame(main, regs)]
    while True:
        frame = stack[-1]
        function = frame.function
        instruction = function.instructions[frame.pc]
        frame.pc += 1
        op, ops = instruction.opcode, instruction
        where = f"@{function.name} instruction {frame.pc - 1} ({op.name})"
        r = frame.regs
        if not OPCODES[op].straight_line:
            raise GraphCodegenError(
                f"{where}: the graph executor runs straight-line code of static shapes only; "
                "use relay.vm.compile"
            )
        if op is Opcode.Ret:
            value = r[ops.result]
            stack.pop()
            if not stack:
                return value
            stack[-1].regs[frame.ret_dst] = value
        elif op is Opcode.Move:
            r[ops.dst] = r[ops.src]
        elif op is Opcode.LoadConst:
            r[ops.dst] = _Const(ops.const_index)
        elif op is Opcode.LoadConsti:
            r[ops.dst] = int(ops.value)
        elif op is Opcode.AllocStorage:
            r[ops.dst] = None
        elif op is Opcode.AllocTensor:
            r[ops.dst] = _Pending(tuple(ops.shape), ops.dtype)
        elif op is Opcode.AllocADT:
            if ops.tag != 0:
                raise GraphCodegenError(f"{where}: constructors need relay.vm.compile")
            r[ops.dst] = tuple(r[f] for f in ops.fields)
        elif op is Opcode.GetField:
            value = r[ops.object]
            if not isinstance(value, tuple):
                raise GraphCodegenError(f"{where}: projection from {_describe(value)}")
            r[ops.dst] = value[ops.index]
        elif op is Opcode.KillRegister:
            r[ops.reg] = None
        elif op is Opcode.Invoke:
            callee = exe.functions[ops.func_index]
            if len(stack) > len(exe.functions):
                raise GraphCodegenError(f"{where}: recursion needs relay.vm.compile")
            callee_regs: list[Any] = [None] * callee.register_file_size
            callee_regs[: len(ops.args)] = [r[a] for a in ops.args]
            stack.append(_Frame(callee, callee_regs, ret_dst=ops.dst))
        elif op is Opcode.ReshapeTensor:
            _reshape(builder, r, ops, where)
        else:  # InvokePacked
            _invoke_packed(builder, r, ops, where)


def _invoke_packed(builder: _GraphBuilder, r: list[Any], ops: Any, where: str) -> None:
    primitive = builder.exe.primitives[ops.prim_index]
    args = list(ops.args)
    first_output = len(args) - ops.num_outputs
    inputs = [builder.ref(builder.tensor(r[a], where)) for a in args[:first_output]]
    outputs = []
    for reg in args[first_output:]:
        pending = r[reg]
        if not isinstance(pending, _Pending):
            raise GraphCodegenError(f"{where}: output register ${reg} is not a fresh tensor")
        outputs.append((pending.shape, pending.dtype))
    node = builder.add_node(
        {
            "op": "tvm_op",
            "name": primitive.name,
            "attrs": {
                "func_name": primitive.name,
                "num_inputs": str(len(inputs)),
                "num_outputs": str(len(outputs)),
                "flatten_data": "0",
            },
            "inputs": inputs,
        },
        outputs,
    )
    for k, reg in enumerate(args[first_output:]):
        r[reg] = _Tensor(node, k)


def _reshape(builder: _GraphBuilder, r: list[Any], ops: Any, where: str) -> None:
    source = builder.tensor(r[ops.tensor], where)
    shape_value = r[ops.newshape]
    if not isinstance(shape_value, _Const):
        raise GraphCodegenError(f"{where}: the new shape is computed at run time")
    shape = tuple(int(d) for d in builder.exe.constant_values[shape_value.index])
    dtype = builder.entry_types[builder.node_first[source.node] + source.index][1]
    node = builder.add_node(
        {
            "op": "tvm_op",
            "name": "reshape_nop",
            "attrs": {
                "func_name": "__nop",
                "num_inputs": "1",
                "num_outputs": "1",
                "flatten_data": "0",
            },
            "inputs": [builder.ref(source)],
        },
        [(shape, dtype)],
    )
    r[ops.dst] = _Tensor(node, 0)


def _plan_storage(builder: _GraphBuilder, heads: list[list[int]]) -> list[int]:
    """A storage id per entry, reusing storages whose entries are all dead."""
    first = builder.node_first
    count = len(builder.entry_types)
    sizes = [int(np.prod(s, dtype=np.int64)) * np.dtype(d).itemsize for s, d in builder.entry_types]
    storage = [-1] * count
    storage_size: list[int] = []
    readers = [0] * count  # reads still to come, per storage (indexed by storage id)
    pinned: set[int] = set()  # storages of inputs, params and outputs: never freed
    free: list[int] = []

    def new_storage(size: int) -> int:
        storage_size.append(size)
        readers.append(0)
        return len(storage_size) - 1

    def take(size: int) -> int:
        fits = [s for s in free if storage_size[s] >= size]
        if fits:
            sid = min(fits, key=lambda s: (storage_size[s], s))
        elif free:
            sid = max(free, key=lambda s: (storage_size[s], -s))
            storage_size[sid] = size
        else:
            return new_storage(size)
        free.remove(sid)
        return sid

    head_entries = {first[n] + i for n, i, _ in heads}
    uses = [0] * count
    for node in builder.nodes:
        for n, i, _ in node["inputs"]:
            uses[first[n] + i] += 1
    for index, node in enumerate(builder.nodes):
        outputs = range(
            first[index],
            first[index] + (1 if node["op"] == "null" else int(node["attrs"]["num_outputs"])),
        )
        input_entries = [first[n] + i for n, i, _ in node["inputs"]]
        if node["op"] == "null":
            sid = new_storage(sizes[outputs[0]])
            storage[outputs[0]] = sid
            pinned.add(sid)
        elif node["attrs"]["func_name"] == "__nop":
            storage[outputs[0]] = storage[input_entries[0]]
        else:
            for entry in outputs:
                storage[entry] = take(sizes[entry])
        for entry in outputs:
            readers[storage[entry]] += uses[entry]
            if entry in head_entries:
                pinned.add(storage[entry])
        for entry in input_entries:
            sid = storage[entry]
            readers[sid] -= 1
            if readers[sid] == 0 and sid not in pinned:
                free.append(sid)
        for entry in outputs:  # written but never read
            sid = storage[entry]
            if readers[sid] == 0 and sid not in pinned and sid not in free:
                free.append(sid)
    return storage


def _flat(value: Any) -> list[Any]:
    """The leaves of nested tuples, in order, without recursion."""
    leaves, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, tuple):
            stack.extend(reversed(item))
        else:
            leaves.append(item)
    return leaves


def _describe(value: Any) -> str:
    if isinstance(value, tuple):
        return "a tuple"
    if isinstance(value, _Pending):
        return "a tensor no kernel has written"
    if isinstance(value, int):
        return "an integer"
    return type(value).__name__


def _spec_text(spec: Any) -> str:
    if spec[0] == "tensor":
        dims = ", ".join("?" if d < 0 else str(d) for d in spec[1])
        return f"Tensor[({dims}), {spec[2]}]"
    return spec[0]
