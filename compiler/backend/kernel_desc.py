"""Primitive functions as kernel descriptions: the plain-data dataflow graphs the VM compiles.

Compiler layer (``compiler.backend``).

A primitive function (``Primitive=1``) is a small graph of operator calls over its
parameters. :func:`describe_primitive` numbers its values the way ``vm.program``
specifies (the tensor inputs first, tuple parameters flattened into their fields, then
each operator's outputs in order), records every operator with its normalized
attributes as plain data, and names the kernel TVM-style: ``vm_mod_fused_<ops>`` (cut
at TVM's 80 characters plus a hash for long fused groups).
:class:`PrimitiveNames` makes names unique per description, deterministically:
``vm_mod_fused_add``, then ``vm_mod_fused_add_1`` for a different ``add`` kernel.
"""

from __future__ import annotations

import hashlib
from typing import Any as AnyT

from compiler.backend.type_specs import tensor_leaves
from compiler.ir.expr import Call, Constant, Expr, Function, Let, Op, Tuple, TupleGetItem, Var
from compiler.ir.types import TensorType, TupleType, Type
from compiler.op.registry import get_def
from compiler.transform.typed_rewrite import known_type

# A value of the graph: a value index (a tensor) or a tuple of values.
Tree = int | tuple


class KernelDescriptionError(ValueError):
    """A primitive function cannot be described as a kernel (names what and where)."""


def describe_primitive(func: Function) -> tuple[str, dict[str, AnyT]]:
    """The base kernel name and the ``vm.program`` description of a primitive function.

    Parameters
    ----------
    func : Function
        A type-checked ``Primitive=1`` function whose body is made of operator calls,
        tuples, tuple projections and ``let`` s over its parameters.

    Returns
    -------
    (str, dict)
        ``vm_mod_fused_<op>_<op>...`` and the description (inputs, outputs, nodes, results).

    Raises
    ------
    KernelDescriptionError
        If the body holds something a kernel cannot compute (a constant, a call of a
        function, a variable from outside) or a type is unknown.
    """
    builder = _GraphBuilder()
    env: dict[Var, Tree] = {}
    for param in func.params:
        ty = known_type(param)
        if ty is None:
            raise KernelDescriptionError(
                f"primitive parameter %{param.name_hint} has no type; run type inference first"
            )
        env[param] = builder.new_values(ty, inputs=True)
    result = _evaluate(func.body, env, builder)
    results = _flatten(result)
    description = {
        "inputs": builder.inputs,
        "outputs": [list(builder.value_types[i]) for i in results],
        "nodes": builder.nodes,
        "results": results,
    }
    return kernel_base_name([node["op"] for node in builder.nodes]), description


def drop_unused_inputs(description: dict[str, AnyT]) -> tuple[dict[str, AnyT], list[int]]:
    """``description`` without the inputs no node or result reads, and the kept positions.

    A fused function takes a whole tuple when its body projects a few fields (the four
    parts of a ``split``, say); every array a kernel takes costs its call some unboxing,
    so the unread ones are left out. Values are renumbered to stay consecutive.
    """
    count = len(description["inputs"])
    read = {arg for node in description["nodes"] for arg in node["args"]}
    read.update(description["results"])
    kept = [i for i in range(count) if i in read]
    if len(kept) == count:
        return description, kept
    renumber = {old: new for new, old in enumerate(kept)}
    dropped = count - len(kept)
    produced = count
    for node in description["nodes"]:
        for _ in node["outputs"]:
            renumber[produced] = produced - dropped
            produced += 1
    return {
        "inputs": [description["inputs"][i] for i in kept],
        "outputs": description["outputs"],
        "nodes": [
            {**node, "args": [renumber[a] for a in node["args"]]} for node in description["nodes"]
        ],
        "results": [renumber[r] for r in description["results"]],
    }, kept


#: TVM's cap on the readable part of a kernel name (``fused_<op>_<op>...``).
MAX_READABLE_NAME = 80


def kernel_base_name(ops: list[str]) -> str:
    """``vm_mod_fused_<op>_<op>...`` for a kernel computing ``ops`` in order (dots become
    underscores: ``nn.dense`` reads ``nn_dense``).

    As in TVM, a readable part longer than :data:`MAX_READABLE_NAME` characters is cut
    there and followed by a hash of the whole, so a 100-operator kernel keeps a name of
    bounded length that still says what it starts with. The hash is sha256 based, so
    names are the same in every process.
    """
    readable = "fused_" + "_".join(op.replace(".", "_") for op in ops or ["identity"])
    if len(readable) > MAX_READABLE_NAME:
        digest = hashlib.sha256(readable.encode()).hexdigest()[:16]
        readable = f"{readable[:MAX_READABLE_NAME]}_{digest}"
    return "vm_mod_" + readable


class _GraphBuilder:
    def __init__(self) -> None:
        self.inputs: list[list[AnyT]] = []
        self.nodes: list[dict[str, AnyT]] = []
        self.value_types: list[tuple[str, int]] = []

    def new_values(self, ty: Type, inputs: bool = False) -> Tree:
        """Fresh value indices for every tensor in ``ty``, shaped like ``ty``."""
        leaves = tensor_leaves(ty)
        first = len(self.value_types)
        for leaf in leaves:
            self.value_types.append((leaf.dtype, leaf.ndim))
            if inputs:
                self.inputs.append([leaf.dtype, leaf.ndim])
        counter = iter(range(first, first + len(leaves)))
        return _shape_like(ty, counter)


def _shape_like(ty: Type, indices: AnyT) -> Tree:
    """The tree of ``ty``'s shape whose leaves take successive ``indices``."""
    if isinstance(ty, TensorType):
        return next(indices)
    results: dict[int, Tree] = {}
    stack: list[tuple[Type, bool]] = [(ty, False)]
    while stack:
        node, expanded = stack.pop()
        if isinstance(node, TensorType):
            results[id(node)] = next(indices)
        elif not expanded:
            assert isinstance(node, TupleType)
            stack.append((node, True))
            stack.extend((f, False) for f in reversed(node.fields))
        else:
            results[id(node)] = tuple(results[id(f)] for f in node.fields)
    return results[id(ty)]


def _flatten(tree: Tree) -> list[int]:
    out: list[int] = []
    stack: list[Tree] = [tree]
    while stack:
        item = stack.pop()
        if isinstance(item, int):
            out.append(item)
        else:
            stack.extend(reversed(item))
    return out


def _evaluate(body: Expr, env: dict[Var, Tree], builder: _GraphBuilder) -> Tree:
    """Walk the body (explicit stack; shared nodes once) and build its graph."""
    values: dict[int, Tree] = {}
    stack: list[tuple[Expr, int]] = [(body, 0)]
    while stack:
        node, state = stack.pop()
        if state == 0 and id(node) in values:
            continue
        if isinstance(node, Var):
            if node not in env:
                raise KernelDescriptionError(
                    f"primitive function uses %{node.name_hint}, which is not one of its "
                    "parameters; a kernel can only read its inputs"
                )
            values[id(node)] = env[node]
        elif isinstance(node, Let):
            if state == 0:
                stack.append((node, 1))
                stack.append((node.value, 0))
            elif state == 1:
                env[node.var] = values[id(node.value)]
                stack.append((node, 2))
                stack.append((node.body, 0))
            else:
                values[id(node)] = values[id(node.body)]
        elif isinstance(node, (Call, Tuple, TupleGetItem)):
            kids = _operands(node)
            if state == 0:
                stack.append((node, 1))
                stack.extend((k, 0) for k in reversed(kids))
                continue
            values[id(node)] = _combine(node, [values[id(k)] for k in kids], builder)
        elif isinstance(node, Constant):
            raise KernelDescriptionError(
                "primitive function contains a constant; kernel descriptions have no "
                "constants, so pass it as an argument of the primitive call"
            )
        else:
            raise KernelDescriptionError(
                f"primitive function contains a {type(node).__name__}; only operator calls, "
                "tuples, tuple projections and let bindings can become a kernel"
            )
    return values[id(body)]


def _operands(node: Expr) -> tuple[Expr, ...]:
    if isinstance(node, Call):
        if not isinstance(node.op, Op):
            raise KernelDescriptionError(
                "primitive function calls something other than an operator; "
                "only operators can be part of a kernel"
            )
        return node.args
    if isinstance(node, Tuple):
        return node.fields
    assert isinstance(node, TupleGetItem)
    return (node.tuple_value,)


def _combine(node: Expr, args: list[Tree], builder: _GraphBuilder) -> Tree:
    if isinstance(node, Tuple):
        return tuple(args)
    if isinstance(node, TupleGetItem):
        value = args[0]
        if not isinstance(value, tuple) or not 0 <= node.index < len(value):
            raise KernelDescriptionError(f"tuple projection .{node.index} of a non-tuple value")
        return value[node.index]
    assert isinstance(node, Call) and isinstance(node.op, Op)
    name = node.op.name
    out_type = node._checked_type
    if out_type is None:
        raise KernelDescriptionError(
            f"operator call {name} in a primitive function has no type; run type inference first"
        )
    attrs = get_def(name).normalize_attrs(node.attrs)
    arg_indices = [i for tree in args for i in _flatten(tree)]
    result = builder.new_values(out_type)
    builder.nodes.append(
        {
            "op": name,
            "args": arg_indices,
            "attrs": {key: _plain(name, key, value) for key, value in attrs.items()},
            "outputs": [[leaf.dtype, leaf.ndim] for leaf in tensor_leaves(out_type)],
        }
    )
    return result


def _plain(op: str, key: str, value: object) -> object:
    """An attribute value as plain data: tuples become lists."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (tuple, list)):
        return [_plain(op, key, v) for v in value]
    raise KernelDescriptionError(
        f"attribute {key} of operator {op} is a {type(value).__name__}, not plain data"
    )


class PrimitiveNames:
    """Deterministic unique kernel names: equal descriptions share a name, different ones
    with the same base name get ``_1``, ``_2``, ... in order of first appearance."""

    def __init__(self) -> None:
        self._seen: dict[str, list[tuple[dict[str, AnyT], str]]] = {}

    def name(self, base: str, description: dict[str, AnyT]) -> str:
        """The name for ``description``, whose operators give ``base``."""
        entries = self._seen.setdefault(base, [])
        for existing, name in entries:
            if existing == description:
                return name
        name = base if not entries else f"{base}_{len(entries)}"
        entries.append((description, name))
        return name
