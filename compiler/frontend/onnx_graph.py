"""Converting a checked ONNX graph into a Relay ``main`` function.

Compiler layer (``compiler.frontend``). Imports the optional ``onnx`` package (through
:mod:`compiler.frontend.onnx_tensors`), so only
:func:`compiler.frontend.onnx.from_onnx` imports this module (at call time).

The nodes are converted in the graph's order, which ``onnx.checker`` has verified to be
topological, with a plain loop: no Python recursion grows with the graph. Each ONNX value
name maps to a typed :class:`~compiler.frontend.onnx_context.Value`; the body of ``main``
is the (possibly large, shared) dataflow graph of the outputs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from typing import Any as AnyT

import numpy as np
import onnx

from compiler.frontend.onnx_context import NodeContext, Value, constant_value
from compiler.frontend.onnx_dtypes import relay_dtype
from compiler.frontend.onnx_errors import OnnxImportError, OpNotImplemented
from compiler.frontend.onnx_registry import converters
from compiler.frontend.onnx_scope import Scope
from compiler.frontend.onnx_tensors import decode_attributes, tensor_to_array
from compiler.ir.expr import Call, Constant, Expr, Function, Op, Tuple, TupleGetItem, Var
from compiler.ir.module import IRModule
from compiler.ir.types import Any, TensorType
from compiler.ir.types import normalize_dtype as _normalize_dtype
from compiler.ir.visitor import free_vars
from compiler.op.registry import get_def

#: The oldest ``ai.onnx`` opset whose operator semantics the converters implement.
MIN_OPSET = 7
_DEFAULT_DOMAINS = ("", "ai.onnx")
#: What an operator's numpy reference raises for inputs it cannot evaluate at import time.
_NOT_EVALUABLE = (ArithmeticError, ValueError, IndexError, TypeError, NotImplementedError)


def model_opset(model: onnx.ModelProto) -> int:
    """The model's ``ai.onnx`` opset version (1 when it imports none)."""
    for entry in model.opset_import:
        if entry.domain in _DEFAULT_DOMAINS:
            return int(entry.version)
    return 1


def _node_label(node: onnx.NodeProto, index: int) -> str:
    if node.name:
        return repr(node.name)
    first = next((o for o in node.output if o), "")
    return f"#{index} (output {first!r})"


def _nodes(graph: onnx.GraphProto) -> Iterator[tuple[int, onnx.NodeProto]]:
    """Every node of ``graph`` and of its subgraphs (``If`` branches, ``Loop`` bodies), with
    its index in its own graph; an explicit stack, however deep the nesting."""
    stack = [graph]
    while stack:
        current = stack.pop()
        for index, node in enumerate(current.node):
            yield index, node
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    stack.append(attr.g)
                stack.extend(attr.graphs)


def check_supported(graph: onnx.GraphProto) -> None:
    """Raise :class:`OpNotImplemented` listing every unsupported operator type in the graph
    and its subgraphs, each with the nodes that use it, before anything is converted."""
    table = converters()
    missing: dict[str, list[str]] = {}
    for index, node in _nodes(graph):
        if node.domain in _DEFAULT_DOMAINS and node.op_type in table:
            continue
        key = node.op_type if node.domain in _DEFAULT_DOMAINS else f"{node.domain}.{node.op_type}"
        missing.setdefault(key, []).append(_node_label(node, index))
    if not missing:
        return
    parts = []
    for key in sorted(missing):
        nodes = missing[key]
        shown = ", ".join(nodes[:5]) + (f" and {len(nodes) - 5} more" if len(nodes) > 5 else "")
        parts.append(f"{key} (node{'s' if len(nodes) > 1 else ''} {shown})")
    count = len(missing)
    raise OpNotImplemented(
        f"the ONNX frontend does not support {count} operator type{'s' if count > 1 else ''} "
        f"used by this model: {'; '.join(parts)}"
    )


class GraphImporter:
    """One conversion of an ONNX graph to a Relay module.

    Parameters
    ----------
    graph : onnx.GraphProto
        The checked main graph, every tensor's data in memory.
    opset : int
        The ``ai.onnx`` opset whose semantics to apply.
    shape : mapping of str to sequence, optional
        Input shapes overriding the model's (``None``, ``"?"`` or a string dimension is
        one known only at run time).
    dtype : str or mapping of str to str
        The dtype of inputs whose element type the model leaves undefined; a mapping
        overrides per input.
    freeze_params : bool
        Whether initializers that are also listed as graph inputs take their initializer
        value (True) or stay run-time inputs (False).
    """

    def __init__(
        self,
        graph: onnx.GraphProto,
        opset: int,
        shape: Mapping[str, Sequence[AnyT]] | None,
        dtype: str | Mapping[str, str],
        freeze_params: bool,
    ) -> None:
        self.graph = graph
        self.opset = opset
        self.shape = dict(shape or {})
        self.dtype = dtype
        self.freeze_params = freeze_params
        # The values by ONNX name: the main graph's, or a Scope while a subgraph converts.
        self.values: MutableMapping[str, Value] = {}
        self.inputs: list[Var] = []
        self.initializer_vars: list[tuple[Var, np.ndarray]] = []
        # What variables stand for, for evaluate(): initializers, and loop captures.
        self.known: dict[Var, np.ndarray] = {}
        self.bindings: dict[Var, Value] = {}

    def run(self) -> tuple[IRModule, dict[str, np.ndarray]]:
        """Convert the graph: ``(module, params)``."""
        if self.opset < MIN_OPSET:
            raise OpNotImplemented(
                f"the model uses ai.onnx opset {self.opset}; the ONNX frontend supports opset "
                f"{MIN_OPSET} and later (convert the model with onnx.version_converter)"
            )
        check_supported(self.graph)
        self._add_initializers()
        self._add_inputs()
        table = converters()
        for index, node in enumerate(self.graph.node):
            self._convert(index, node, table[node.op_type])
        return self._finish()

    # --- graph inputs --------------------------------------------------------------------------

    def _add_initializers(self) -> None:
        overridable = {vi.name for vi in self.graph.input}
        for tensor in self.graph.initializer:
            if not tensor.name.strip():
                raise OnnxImportError("an initializer has an empty name")
            if not self.freeze_params and tensor.name in overridable:
                continue  # a run-time input whose initializer is only a default
            array = tensor_to_array(tensor, f"initializer {tensor.name!r}")
            var = Var(tensor.name, TensorType(array.shape, array.dtype.name))
            self.values[tensor.name] = Value(var, var.type_annotation, array)
            self.initializer_vars.append((var, array))
            self.known[var] = array
        if self.graph.sparse_initializer:
            names = ", ".join(repr(s.values.name) for s in self.graph.sparse_initializer)
            raise OpNotImplemented(f"sparse initializers ({names}) are not supported")

    def _add_inputs(self) -> None:
        names = [vi.name for vi in self.graph.input if vi.name not in self.values]
        unknown = sorted(set(self.shape) - set(names))
        if unknown:
            raise OnnxImportError(
                f"shape= names {', '.join(repr(n) for n in unknown)}, which "
                f"{'is not an input' if len(unknown) == 1 else 'are not inputs'} of the model; "
                f"its inputs are {', '.join(repr(n) for n in names) or 'none'}"
            )
        if isinstance(self.dtype, Mapping):
            unknown = sorted(set(self.dtype) - set(names))
            if unknown:
                raise OnnxImportError(
                    f"dtype= names {', '.join(repr(n) for n in unknown)}, which the model "
                    f"does not have as inputs; its inputs are "
                    f"{', '.join(repr(n) for n in names) or 'none'}"
                )
        for vi in self.graph.input:
            if vi.name in self.values:
                continue
            var = Var(vi.name, self._input_type(vi))
            self.values[vi.name] = Value(var, var.type_annotation)
            self.inputs.append(var)

    def _input_type(self, vi: onnx.ValueInfoProto) -> TensorType:
        what = f"graph input {vi.name!r}"
        if vi.type.WhichOneof("value") != "tensor_type":
            kind = vi.type.WhichOneof("value") or "no type"
            raise OpNotImplemented(f"{what} is a {kind}; only tensor inputs are supported")
        tensor_type = vi.type.tensor_type
        if isinstance(self.dtype, Mapping) and vi.name in self.dtype:
            dtype = _normalize_dtype(self.dtype[vi.name])
        elif tensor_type.elem_type:
            dtype = relay_dtype(tensor_type.elem_type, what)
        else:
            dtype = _normalize_dtype(self.dtype if isinstance(self.dtype, str) else "float32")
        if vi.name in self.shape:
            given = self.shape[vi.name]
            try:
                dims = [Any() if d is None or isinstance(d, str) or d == -1 else d for d in given]
                return TensorType(dims, dtype)
            except (TypeError, ValueError) as exc:
                raise OnnxImportError(f"shape= for {what}: {exc}") from None
        if not tensor_type.HasField("shape"):
            raise OnnxImportError(
                f"{what} has no shape (not even its rank); give it with "
                f"from_onnx(..., shape={{{vi.name!r}: (...)}})"
            )
        dims = []
        for dim in tensor_type.shape.dim:
            has_value = dim.WhichOneof("value") == "dim_value"
            dims.append(int(dim.dim_value) if has_value and dim.dim_value >= 0 else Any())
        return TensorType(dims, dtype)

    # --- nodes ---------------------------------------------------------------------------------

    def _convert(self, index: int, node: onnx.NodeProto, converter: AnyT) -> None:
        label = f"node {node.name!r} ({node.op_type})" if node.name else f"{node.op_type} node"
        inputs: list[Value | None] = []
        for name in node.input:
            if not name:
                inputs.append(None)
                continue
            if name not in self.values:
                raise OnnxImportError(f"ONNX {label}: input {name!r} is not defined before it")
            inputs.append(self.values[name])
        context = NodeContext(
            op_type=node.op_type,
            name=node.name,
            index=index,
            opset=self.opset,
            inputs=inputs,
            input_names=list(node.input),
            attrs=decode_attributes(node, f"ONNX {label}"),
            outputs=list(node.output),
            convert_graph=self.convert_subgraph,
            evaluate=self.evaluate,
        )
        produced = converter(context)
        results = [produced] if isinstance(produced, Value) else list(produced)
        for slot, name in enumerate(node.output):
            if not name:
                continue
            if slot >= len(results):
                raise context.unsupported(f"output {slot} ({name!r}) is not supported")
            self.values[name] = results[slot]

    # --- evaluation at import time -------------------------------------------------------------

    def evaluate(self, expr: Expr) -> np.ndarray | None:
        """``expr``'s value if it is computed from constants and initializers by operators
        alone (None otherwise), with the operators' numpy references; an explicit stack,
        each shared subexpression evaluated once."""
        done: dict[int, AnyT] = {}
        stack: list[tuple[Expr, bool]] = [(expr, False)]
        while stack:
            node, ready = stack.pop()
            if id(node) in done:
                continue
            if isinstance(node, Constant):
                done[id(node)] = node.data
            elif isinstance(node, Var):
                if node in self.known:
                    done[id(node)] = self.known[node]
                elif node in self.bindings:
                    outer = self.bindings[node].expr
                    if id(outer) in done:
                        done[id(node)] = done[id(outer)]
                    else:
                        stack += [(node, False), (outer, False)]
                else:
                    return None
            elif isinstance(node, (Call, Tuple)):
                parts = node.args if isinstance(node, Call) else node.fields
                if isinstance(node, Call) and not isinstance(node.op, Op):
                    return None
                if not ready:
                    stack.append((node, True))
                    stack += [(p, False) for p in parts if id(p) not in done]
                    continue
                values = [done[id(p)] for p in parts]
                if isinstance(node, Tuple):
                    done[id(node)] = tuple(values)
                else:
                    try:
                        with np.errstate(all="ignore"):
                            done[id(node)] = get_def(node.op.name).reference(values, node.attrs)
                    except (
                        ArithmeticError,
                        ValueError,
                        IndexError,
                        TypeError,
                        NotImplementedError,
                    ):
                        return None
            elif isinstance(node, TupleGetItem):
                if not ready:
                    stack += [(node, True), (node.tuple_value, False)]
                    continue
                done[id(node)] = done[id(node.tuple_value)][node.index]
            else:
                return None
        result = done[id(expr)]
        return result if isinstance(result, np.ndarray) else None

    # --- subgraphs ----------------------------------------------------------------------------

    def convert_subgraph(
        self,
        graph: onnx.GraphProto,
        inputs: Sequence[Value],
        captures: list[tuple[Var, Value]] | None,
        what: str,
    ) -> list[Value]:
        """Convert ``graph`` in a scope over the current one, ``inputs`` bound to its
        inputs (see :meth:`NodeContext.subgraph`); its outputs' values.

        Its initializers become constants. Converting a node that holds a subgraph
        converts that one in turn, so Python's stack grows with the nesting depth of
        subgraphs (a handful), not with the number of nodes.
        """
        if len(graph.input) != len(inputs):
            raise OnnxImportError(
                f"ONNX {what} has {len(graph.input)} inputs; the operator passes it {len(inputs)}"
            )
        scope = Scope(self.values, captures, self.bindings)
        for vi, value in zip(graph.input, inputs):
            scope[vi.name] = value
        for tensor in graph.initializer:
            scope[tensor.name] = constant_value(
                tensor_to_array(tensor, f"initializer {tensor.name!r} of {what}")
            )
        if graph.sparse_initializer:
            raise OpNotImplemented(f"ONNX {what} has sparse initializers, which are not supported")
        enclosing, self.values = self.values, scope
        try:
            table = converters()
            for index, node in enumerate(graph.node):
                self._convert(index, node, table[node.op_type])
            outputs = []
            for vi in graph.output:
                if vi.name not in scope:
                    raise OnnxImportError(
                        f"ONNX {what}: output {vi.name!r} is not produced by any node"
                    )
                outputs.append(scope[vi.name])
        finally:
            self.values = enclosing
        return outputs

    # --- the main function ---------------------------------------------------------------------

    def _finish(self) -> tuple[IRModule, dict[str, np.ndarray]]:
        outputs: list[Expr] = []
        for vi in self.graph.output:
            if vi.name not in self.values:
                raise OnnxImportError(f"graph output {vi.name!r} is not produced by any node")
            outputs.append(self.values[vi.name].expr)
        if not outputs:
            raise OnnxImportError("the graph has no outputs")
        body = outputs[0] if len(outputs) == 1 else Tuple(outputs)
        used = set(free_vars(body))
        params = [var for var, _ in self.initializer_vars if var in used]
        values = {var.name_hint: array for var, array in self.initializer_vars if var in used}
        func = Function([*self.inputs, *params], body)
        return IRModule({"main": func}), values
