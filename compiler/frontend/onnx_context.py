"""What an ONNX operator converter works with: typed values and the node being converted.

Compiler layer (``compiler.frontend``); does not import ``onnx``. A :class:`Value` is a
Relay expression with its type (computed as the graph is built, with the operator
registry's type relations, so a converter always knows its inputs' shapes) and, when it
is known at import time, its numpy value. :class:`NodeContext` gives a converter the
node's inputs, attributes and opset, builds operator calls (type-checked at once, and
evaluated with the registry's numpy reference when every input is a constant) and makes
errors that name the node.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any as AnyT

import numpy as np

from compiler.frontend.onnx_errors import OnnxImportError, OpNotImplemented
from compiler.ir.expr import Constant, Expr, Tuple, TupleGetItem, Var
from compiler.ir.types import Any, TensorType, TupleType, Type
from compiler.op.api import call_op
from compiler.op.registry import get_def
from compiler.op.typerel import fmt_type

#: Operations on values known at import time are evaluated there (so shape computations
#: such as Shape -> Gather -> Concat -> Reshape become constants) when every input is a
#: Relay constant, or when the initializers among the inputs are integer or bool tensors
#: (shapes, axes, indices) holding at most this many elements in all. Floating-point
#: initializers (weights) always stay parameters.
SMALL_STATIC_ELEMENTS = 4096


class SubgraphAttribute:
    """A graph-valued attribute (the branches of ``If``, the body of ``Loop`` and ``Scan``),
    converted only through :meth:`NodeContext.subgraph`."""

    def __init__(self, name: str, graph: AnyT) -> None:
        self.name = name
        #: The ``onnx.GraphProto`` (held opaquely: this module does not import onnx).
        self.graph = graph


#: Evaluates an expression built from constants and initializers at import time, or
#: returns None (see :meth:`NodeContext.static`); the importer supplies it.
Evaluator = Callable[[Expr], "np.ndarray | None"]

#: Converts a subgraph: ``(graph, inputs, captures, what) -> outputs`` (see
#: :meth:`NodeContext.subgraph`); the importer supplies it.
GraphConverter = Callable[[AnyT, Sequence["Value"], "list[tuple[Var, Value]] | None", str], list]


class UnsupportedAttribute:
    """An attribute of a kind no converter reads (sparse tensor, type proto, tensor list)."""

    def __init__(self, name: str, kind: str) -> None:
        self.name = name
        self.kind = kind


@dataclass(frozen=True)
class Value:
    """A Relay expression, its type, and its value when known at import time.

    ``static`` is a numpy array for a tensor (a tuple of arrays for a tuple) or ``None``.
    """

    expr: Expr
    type: Type
    static: AnyT = None

    @property
    def tensor(self) -> TensorType:
        """The type as a tensor type (converters only pass tensors between nodes)."""
        assert isinstance(self.type, TensorType), self.type
        return self.type

    @property
    def shape(self) -> tuple:
        return self.tensor.shape

    @property
    def ndim(self) -> int:
        return self.tensor.ndim

    @property
    def dtype(self) -> str:
        return self.tensor.dtype

    @property
    def is_constant(self) -> bool:
        """True when the expression is a Relay constant (not an initializer parameter)."""
        return isinstance(self.expr, Constant) or (
            isinstance(self.expr, Tuple) and all(isinstance(f, Constant) for f in self.expr.fields)
        )

    def static_shape(self) -> tuple[int, ...] | None:
        """The shape as ints, or None if some dimension is only known at run time."""
        shape = self.shape
        return None if any(isinstance(d, Any) for d in shape) else tuple(shape)  # type: ignore[return-value]


def constant_value(array: np.ndarray) -> Value:
    """A Relay constant holding ``array``."""
    array = np.array(array, order="C")  # (np.ascontiguousarray would make 0-d arrays 1-d)
    const = Constant(array)
    return Value(const, TensorType(array.shape, array.dtype.name), const.data)


def _foldable(parameters: Sequence[Value]) -> bool:
    """Whether a call whose inputs are all known may be evaluated at import time, given its
    inputs that are initializer parameters rather than constants."""
    if any(p.static.dtype.kind not in "biu" for p in parameters):
        return False
    return sum(int(p.static.size) for p in parameters) <= SMALL_STATIC_ELEMENTS


class NodeContext:
    """One ONNX node being converted: inputs, attributes, opset, builders, errors.

    Parameters
    ----------
    op_type, name : str
        The node's operator type and name (the name may be empty).
    index : int
        The node's position in the graph (names unnamed nodes in messages).
    opset : int
        The model's ``ai.onnx`` opset version.
    inputs : sequence of Value or None
        The node's inputs in order; ``None`` for an omitted optional input.
    input_names : sequence of str
        The ONNX names of the inputs (for messages).
    attrs : mapping
        The decoded attributes.
    outputs : sequence of str
        The node's output names (``""`` for an omitted optional output).
    convert_graph : callable, optional
        Converts the node's subgraphs (see :meth:`subgraph`); the importer gives it.
    evaluate : callable, optional
        Evaluates an input computed from initializers (see :meth:`static`).
    """

    def __init__(
        self,
        op_type: str,
        name: str,
        index: int,
        opset: int,
        inputs: Sequence[Value | None],
        input_names: Sequence[str],
        attrs: Mapping[str, AnyT],
        outputs: Sequence[str],
        convert_graph: GraphConverter | None = None,
        evaluate: Evaluator | None = None,
    ) -> None:
        self.op_type = op_type
        self.name = name
        self.index = index
        self.opset = opset
        self._inputs = list(inputs)
        self._input_names = list(input_names)
        self.attrs = dict(attrs)
        self.outputs = list(outputs)
        self._convert_graph = convert_graph
        self._evaluate = evaluate

    # --- messages ---------------------------------------------------------------------------

    @property
    def label(self) -> str:
        """``node 'conv1' (Conv)``, or for an unnamed node its index and first output."""
        if self.name:
            return f"node {self.name!r} ({self.op_type})"
        first = next((o for o in self.outputs if o), "")
        return f"node #{self.index} ({self.op_type}, output {first!r})"

    def error(self, message: str) -> OnnxImportError:
        """An :class:`OnnxImportError` about this node."""
        return OnnxImportError(f"ONNX {self.label}: {message}")

    def unsupported(self, message: str) -> OpNotImplemented:
        """An :class:`OpNotImplemented` about this node (a valid mode we do not support)."""
        return OpNotImplemented(f"ONNX {self.label}: {message}")

    # --- inputs -----------------------------------------------------------------------------

    @property
    def num_inputs(self) -> int:
        """The number of input slots, omitted optional ones included."""
        return len(self._inputs)

    def has_input(self, index: int) -> bool:
        return index < len(self._inputs) and self._inputs[index] is not None

    def input(self, index: int) -> Value:
        """Input ``index``; an error naming the node if it is missing."""
        if not self.has_input(index):
            raise self.error(f"input {index} is required but missing")
        return self._inputs[index]  # type: ignore[return-value]

    def optional(self, index: int) -> Value | None:
        """Input ``index`` or ``None`` if it was omitted."""
        return self._inputs[index] if self.has_input(index) else None

    def present_inputs(self) -> list[Value]:
        """Every input given, in order (for variadic operators such as Max or Concat)."""
        return [v for v in self._inputs if v is not None]

    def input_name(self, index: int) -> str:
        return self._input_names[index] if index < len(self._input_names) else ""

    def static(self, index: int, what: str) -> np.ndarray:
        """The import-time value of input ``index`` (``what`` it is, for messages).

        It must be a constant: an initializer, the output of a ``Constant`` node, or
        computed from those and static shapes.
        """
        self.input(index)  # an error naming the node if it is missing
        known = self.known(index)
        if known is None:
            raise self.unsupported(
                f"input {index} ({what}, {self.input_name(index)!r}) must be known when the "
                "model is imported (an initializer, a Constant node, or computed from static "
                "shapes); values computed at run time are not supported here"
            )
        return known

    def known(self, index: int) -> np.ndarray | None:
        """The import-time value of input ``index`` if it has one (see :meth:`static`),
        else ``None``: for converters with a dynamic form for values known only at run
        time."""
        value = self.optional(index)
        if value is None:
            return None
        if value.static is None and self._evaluate is not None:
            # Float initializers stay parameters rather than folding (see _foldable), so a
            # weight reshaped on its way to a node that needs it (as in the body of an
            # exported loop) is evaluated here, when a converter asks for it.
            return self._evaluate(value.expr)
        return None if isinstance(value.static, tuple) else value.static

    def optional_static(self, index: int, what: str) -> np.ndarray | None:
        """Like :meth:`static`, but ``None`` for an omitted input."""
        return self.static(index, what) if self.has_input(index) else None

    def static_ints(self, index: int, what: str) -> list[int] | None:
        """An optional constant integer input as a list of Python ints."""
        array = self.optional_static(index, what)
        if array is None:
            return None
        if array.dtype.kind not in "iu":
            raise self.error(f"input {index} ({what}) must hold integers, found {array.dtype}")
        return [int(v) for v in array.reshape(-1)]

    # --- attributes -------------------------------------------------------------------------

    def attr(self, name: str, default: AnyT = None) -> AnyT:
        """Attribute ``name`` or ``default``."""
        value = self.attrs.get(name, default)
        if isinstance(value, (SubgraphAttribute, UnsupportedAttribute)):
            raise self.unsupported(f"attribute {name!r} has a kind the frontend cannot read")
        return value

    def graph(self, name: str) -> AnyT:
        """The ``onnx.GraphProto`` of the graph attribute ``name`` (an error if missing)."""
        value = self.attrs.get(name)
        if not isinstance(value, SubgraphAttribute):
            kind = "missing" if value is None else "not a graph"
            raise self.error(f"attribute {name!r} (a graph) is {kind}")
        return value.graph

    def subgraph(
        self,
        name: str,
        inputs: Sequence[Value],
        captures: list[tuple[Var, Value]] | None = None,
    ) -> list[Value]:
        """Convert the graph attribute ``name`` with ``inputs`` bound to its inputs; its
        outputs.

        Names the subgraph does not define resolve to the enclosing graphs' values. With
        ``captures`` (a list), each enclosing value that is computed (neither a variable
        nor a constant) is read through a fresh variable, appended to ``captures`` with
        the value it stands for: a loop body, which runs many times, then refers to
        values computed once outside it.
        """
        graph = self.graph(name)
        if self._convert_graph is None:
            raise self.unsupported(f"subgraph {name!r} cannot be converted here")
        return self._convert_graph(graph, inputs, captures, f"{self.label}'s {name!r}")

    def check_attr(self, name: str, allowed: Sequence[AnyT], default: AnyT) -> AnyT:
        """Attribute ``name`` (``default`` if absent), which must be one of ``allowed``."""
        value = self.attr(name, default)
        if value not in allowed:
            options = ", ".join(repr(a) for a in allowed)
            raise self.unsupported(
                f"attribute {name}={value!r} is not supported; supported: {options}"
            )
        return value

    # --- outputs ----------------------------------------------------------------------------

    @property
    def num_outputs(self) -> int:
        """The number of output slots, omitted optional ones included."""
        return len(self.outputs)

    def wants_output(self, index: int) -> bool:
        return index < len(self.outputs) and bool(self.outputs[index])

    # --- building ---------------------------------------------------------------------------

    def const(self, array: object, dtype: str | None = None) -> Value:
        """A Relay constant (``dtype`` defaults to the array's own)."""
        return constant_value(np.asarray(array, dtype=dtype))

    def scalar(self, value: object, dtype: str) -> Value:
        """A 0-d constant of ``dtype``."""
        return constant_value(np.asarray(value, dtype=dtype))

    def call(self, op: str, *args: Value | Sequence[Value], **attrs: AnyT) -> Value:
        """``op(args; attrs)`` as a typed value, folded to a constant when its inputs are.

        A list or tuple argument becomes a Relay tuple (``concatenate``, ``stack``).
        Attribute and type errors become :class:`OnnxImportError` naming this node.
        """
        exprs: list[Expr] = []
        types: list[Type] = []
        statics: list[AnyT] = []
        parameters: list[Value] = []  # inputs known at import time that are not constants
        for arg in args:
            fields = [arg] if isinstance(arg, Value) else list(arg)
            if isinstance(arg, Value):
                exprs.append(arg.expr)
                types.append(arg.type)
                statics.append(arg.static)
            else:
                exprs.append(Tuple([f.expr for f in fields]))
                types.append(TupleType([f.type for f in fields]))
                known = [f.static for f in fields]
                statics.append(None if any(s is None for s in known) else tuple(known))
            parameters.extend(f for f in fields if not f.is_constant)
        try:
            expr = call_op(op, exprs, **attrs)
            ty = get_def(op).type_rel(types, expr.attrs)
        except TypeError as exc:
            shown = ", ".join(fmt_type(t) for t in types)
            raise self.error(f"cannot apply {op} to ({shown}): {exc}") from None
        if all(s is not None for s in statics) and _foldable(parameters):
            return self._fold(op, expr, ty, statics)
        return Value(expr, ty)

    def _fold(self, op: str, expr: Expr, ty: Type, statics: list[AnyT]) -> Value:
        try:
            with np.errstate(all="ignore"):
                result = get_def(op).reference(statics, expr.attrs)  # type: ignore[attr-defined]
        except (ArithmeticError, ValueError, IndexError) as exc:
            raise self.error(f"evaluating {op} on constant inputs failed: {exc}") from None
        if isinstance(result, tuple):
            fields = [constant_value(r) for r in result]
            return Value(
                Tuple([f.expr for f in fields]),
                TupleType([f.type for f in fields]),
                tuple(f.static for f in fields),
            )
        return constant_value(result)

    def item(self, value: Value, index: int) -> Value:
        """Field ``index`` of a tuple value."""
        assert isinstance(value.type, TupleType)
        field_type = value.type.fields[index]
        static = value.static[index] if isinstance(value.static, tuple) else None
        if isinstance(value.expr, Tuple):
            return Value(value.expr.fields[index], field_type, static)
        return Value(TupleGetItem(value.expr, index), field_type, static)
