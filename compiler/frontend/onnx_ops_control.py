"""ONNX control flow: ``If`` becomes a Relay ``if``; ``Loop`` and ``Scan`` become local
recursive functions that the VM runs with tail calls.

Compiler layer (``compiler.frontend``); does not import ``onnx`` (it reads the subgraphs'
input and output lists, which are plain protobuf fields).

An ``If`` whose condition is known at import time is replaced by the branch it takes.
Otherwise both branches are converted in place; an output whose branches disagree on a
dimension gets that dimension at run time (the Relay type has ``?`` there).

A ``Loop`` or ``Scan`` becomes ``let %loop = fn (%i, %cond, %carried..., %scanned...) {
if (%i < %trip_count && %cond) { %loop(%i + 1, ...) } else { (%carried..., %scanned...) }
}; %loop(0, ...)``. The recursive call is the branch's result, so the VM replaces the
frame instead of stacking one per iteration: memory does not grow with the trip count,
and one executable runs every trip count the inputs give. Scan outputs grow by one slice
per iteration (their first dimension is ``?``). Values the body reads from the enclosing
graph are computed once, before the loop (see :mod:`compiler.frontend.onnx_scope`).
A loop-carried value whose shape the body changes gets ``?`` in the dimensions that
change, found by converting the body again with those dimensions relaxed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler.frontend.onnx_context import NodeContext, Value, constant_value
from compiler.frontend.onnx_ops_tensor import normalize_axis, shape_text
from compiler.frontend.onnx_registry import register
from compiler.frontend.onnx_scope import capture
from compiler.ir.expr import Call, Expr, Function, If, Let, Tuple, TupleGetItem, Var
from compiler.ir.types import Any, TensorType
from compiler.op.api import call_op
from compiler.typing.unify import Mismatch, join_tensors


def _same_type(a: TensorType, b: TensorType) -> bool:
    if a.dtype != b.dtype or a.ndim != b.ndim:
        return False
    return all(
        (isinstance(x, Any) and isinstance(y, Any)) or (not isinstance(x, Any) and x == y)
        for x, y in zip(a.shape, b.shape)
    )


def _scalar(node: NodeContext, value: Value, dtype: str, what: str) -> Value:
    """``value`` as a 0-d tensor; it must hold one element of ``dtype``."""
    if value.dtype != dtype:
        raise node.error(f"{what} must be a {dtype} tensor, found {value.dtype}")
    if value.ndim == 0:
        return value
    if any(isinstance(d, Any) for d in value.shape) or int(np.prod(value.shape)) != 1:
        raise node.error(
            f"{what} must hold exactly one element, found shape {shape_text(value.shape)}"
        )
    return node.call("reshape", value, newshape=())


def _run_time_shape(value: Value) -> Value:
    """``value`` typed with every dimension known only at run time (same data).

    Built without :meth:`NodeContext.call`, which would fold a constant (a branch's empty
    tensor, say) straight back to its static shape.
    """
    shape = call_op("shape_of", [value.expr], dtype="int64")
    expr = call_op("dyn.reshape", [value.expr, shape])
    return Value(expr, TensorType([Any() for _ in range(value.ndim)], value.dtype))


def _declared_rank(graph_input: object) -> int | None:
    """The rank a subgraph declares for an input (None if it declares no shape)."""
    tensor_type = graph_input.type.tensor_type  # type: ignore[attr-defined]
    return len(tensor_type.shape.dim) if tensor_type.HasField("shape") else None


def _as_declared(node: NodeContext, value: Value, graph_input: object) -> Value:
    """A 0-d loop counter or condition as the body declares it: some exporters declare
    these inputs with shape ``[1]``."""
    if _declared_rank(graph_input) == 1:
        return node.call("reshape", value, newshape=(1,))
    return value


def _fields(expr: Expr, types: Sequence[TensorType]) -> list[Value]:
    return [Value(TupleGetItem(expr, k), t) for k, t in enumerate(types)]


# --- If ------------------------------------------------------------------------------------------


@register("If")
def _if(node: NodeContext) -> list[Value]:
    cond = _scalar(node, node.input(0), "bool", "the condition (input 0)")
    if cond.static is not None:
        taken = "then_branch" if bool(cond.static) else "else_branch"
        return _check_count(node, node.subgraph(taken, []), taken)
    then = _check_count(node, node.subgraph("then_branch", []), "then_branch")
    otherwise = _check_count(node, node.subgraph("else_branch", []), "else_branch")
    types: list[TensorType] = []
    for k, (a, b) in enumerate(zip(then, otherwise)):
        if not isinstance(a.type, TensorType) or not isinstance(b.type, TensorType):
            raise node.unsupported(f"output {k} is not a tensor in both branches")
        if a.dtype != b.dtype or a.ndim != b.ndim:
            raise node.unsupported(
                f"output {k} is a {a.dtype} tensor of rank {a.ndim} in then_branch but a "
                f"{b.dtype} tensor of rank {b.ndim} in else_branch; the branches of an If "
                "must agree on dtype and rank"
            )
        try:
            # Where one branch knows a size the other does not, the if has ``?`` there.
            types.append(join_tensors(a.tensor, b.tensor))
        except Mismatch:
            then[k], otherwise[k] = _run_time_shape(a), _run_time_shape(b)
            types.append(then[k].tensor)
    if len(then) == 1:
        return [Value(If(cond.expr, then[0].expr, otherwise[0].expr), types[0])]
    expr = If(cond.expr, Tuple([v.expr for v in then]), Tuple([v.expr for v in otherwise]))
    return _fields(expr, types)


def _check_count(node: NodeContext, outputs: list[Value], branch: str) -> list[Value]:
    if len(outputs) != node.num_outputs:
        raise node.error(f"{branch} has {len(outputs)} outputs but the node has {node.num_outputs}")
    return outputs


# --- the recursive function both loops become ------------------------------------------------


class _LoopBuilder:
    """Assembles ``let %loop = fn (...) { if (test) { %loop(...) } else { results } }``.

    ``params`` are the counter, then whatever the loop carries; ``scans`` are the
    accumulated slices, appended (or, for a reversed scan output, prepended) per step.
    """

    def __init__(self, node: NodeContext) -> None:
        self.node = node
        self.captures: list[tuple[Var, Value]] = []
        self.counter = Value(Var("i", TensorType((), "int64")), TensorType((), "int64"))

    def scan_accumulators(self, slices: Sequence[Value]) -> list[Value]:
        """One parameter per scan output, typed ``(?, *slice shape)``."""
        return [
            Value(Var(f"scan_{k}", t), t)
            for k, t in enumerate(TensorType((Any(), *s.shape), s.dtype) for s in slices)
        ]

    def grow(self, acc: Value, piece: Value, prepend: bool = False) -> Value:
        """``acc`` with ``piece`` added as one more slice along its first axis."""
        node = self.node
        one = node.call("expand_dims", piece, axis=0)
        if any(isinstance(d, Any) for d in piece.shape):
            # The first step fixes the slice shape, which only the run knows: it starts
            # the accumulator instead of joining the placeholder it was given.
            one = _run_time_shape(one)
            first = node.call("equal", self.counter, node.scalar(0, "int64"))
            joined = _run_time_shape(
                node.call("concatenate", [one, acc] if prepend else [acc, one], axis=0)
            )
            return Value(If(first.expr, one.expr, joined.expr), joined.type)
        return node.call("concatenate", [one, acc] if prepend else [acc, one], axis=0)

    @staticmethod
    def empty(slice_: Value) -> Value:
        """The starting value of a scan accumulator: no slices (a placeholder of one
        element per unknown dimension when the slice shape is known only at run time)."""
        shape = (0, *(1 if isinstance(d, Any) else d for d in slice_.shape))
        return constant_value(np.zeros(shape, dtype=slice_.dtype))

    def build(
        self,
        test: Value,
        params: Sequence[Value],
        next_args: Sequence[Value],
        results: Sequence[Value],
        start: Sequence[Value],
    ) -> Expr:
        """The ``let`` of the loop function and its first call, with the captures bound
        before it; ``params``/``next_args``/``start`` exclude the counter."""
        loop = Var(f"loop_{self.node.op_type.lower()}")
        step = self.node.call("add", self.counter, self.node.scalar(1, "int64"))
        recur = Call(loop, [step.expr, *(a.expr for a in next_args)])
        body = If(test.expr, recur, Tuple([r.expr for r in results]))
        func = Function([self.counter.expr, *(p.expr for p in params)], body)
        zero = self.node.scalar(0, "int64")
        expr: Expr = Let(loop, func, Call(loop, [zero.expr, *(s.expr for s in start)]))
        for var, value in reversed(self.captures):
            expr = Let(var, value.expr, expr)
        return expr


# --- Loop ----------------------------------------------------------------------------------------


@register("Loop")
def _loop(node: NodeContext) -> list[Value]:
    body = node.graph("body")
    carried = node.num_inputs - 2
    if carried < 0:
        raise node.error("needs the trip count and condition inputs (each may be empty)")
    if len(body.input) != 2 + carried:
        raise node.error(
            f"the body has {len(body.input)} inputs; it must take the iteration number, the "
            f"condition and the {carried} loop-carried value(s)"
        )
    scans = len(body.output) - 1 - carried
    if scans < 0:
        raise node.error(
            f"the body has {len(body.output)} outputs; it must return the condition and the "
            f"{carried} loop-carried value(s), then any scan outputs"
        )
    initial = [node.input(2 + k) for k in range(carried)]
    types = [v.tensor for v in initial]
    # Convert the body with each carried value typed as it starts; relax the dimensions
    # the body changes and convert again, until the types hold (each round relaxes at
    # least one dimension, so this ends).
    while True:
        builder = _LoopBuilder(node)
        cond = Value(Var("cond", TensorType((), "bool")), TensorType((), "bool"))
        params = [Value(Var(f"carried_{k}", t), t) for k, t in enumerate(types)]
        inputs = [
            _as_declared(node, builder.counter, body.input[0]),
            _as_declared(node, cond, body.input[1]),
            *params,
        ]
        outputs = node.subgraph("body", inputs, builder.captures)
        updated = outputs[1 : 1 + carried]
        relaxed = [_join(node, t, v, k) for k, (t, v) in enumerate(zip(types, updated))]
        if all(_same_type(a, b) for a, b in zip(relaxed, types)):
            break
        types = relaxed
    slices = outputs[1 + carried :]
    accumulators = builder.scan_accumulators(slices)

    test = cond
    if node.has_input(0):
        trip = _scalar(node, node.input(0), "int64", "the trip count (input 0)")
        trip = capture(trip, builder.captures)
        test = node.call("logical_and", node.call("less", builder.counter, trip), cond)
    start_cond = (
        _scalar(node, node.input(1), "bool", "the condition (input 1)")
        if node.has_input(1)
        else node.scalar(True, "bool")
    )
    next_cond = _scalar(node, outputs[0], "bool", "the body's condition output")
    grown = [builder.grow(a, s) for a, s in zip(accumulators, slices)]
    expr = builder.build(
        test,
        [cond, *params, *accumulators],
        [next_cond, *updated, *grown],
        [*params, *accumulators],
        [start_cond, *initial, *(builder.empty(s) for s in slices)],
    )
    return _fields(expr, [*types, *(a.tensor for a in accumulators)])


def _join(node: NodeContext, start: TensorType, updated: Value, k: int) -> TensorType:
    """The type a loop-carried value needs to hold both ``start`` and the body's update."""
    if not isinstance(updated.type, TensorType):
        raise node.unsupported(f"loop-carried value {k} is not a tensor")
    new = updated.tensor
    if new.dtype != start.dtype or new.ndim != start.ndim:
        raise node.error(
            f"loop-carried value {k} starts as a {start.dtype} tensor of rank {start.ndim} "
            f"but the body returns a {new.dtype} tensor of rank {new.ndim}"
        )
    dims = [
        a if not isinstance(a, Any) and not isinstance(b, Any) and a == b else Any()
        for a, b in zip(start.shape, new.shape)
    ]
    return TensorType(dims, start.dtype)


# --- Scan ----------------------------------------------------------------------------------------


@register("Scan")
def _scan(node: NodeContext) -> list[Value]:
    if node.opset < 9:
        raise node.unsupported(
            "Scan before opset 9 (with a batch axis and sequence_lens) is not supported"
        )
    body = node.graph("body")
    scanned = node.attr("num_scan_inputs")
    if not isinstance(scanned, int) or not 1 <= scanned <= node.num_inputs:
        raise node.error(
            f"num_scan_inputs must be between 1 and the {node.num_inputs} inputs, got {scanned!r}"
        )
    states = node.num_inputs - scanned
    outputs_count = len(body.output) - states
    if len(body.input) != node.num_inputs or outputs_count < 0:
        raise node.error(
            f"the body takes {len(body.input)} inputs and returns {len(body.output)} "
            f"outputs; it must take the {states} state(s) and {scanned} scan slice(s) and "
            "return the states, then the scan outputs"
        )
    xs = [node.input(states + j) for j in range(scanned)]
    in_axes = _axes(node, "scan_input_axes", scanned, [x.ndim for x in xs])
    in_reversed = _directions(node, "scan_input_directions", scanned)
    out_reversed = _directions(node, "scan_output_directions", outputs_count)

    builder = _LoopBuilder(node)
    length = _sequence_length(node, xs, in_axes, builder)
    initial = [node.input(k) for k in range(states)]
    params = [Value(Var(f"state_{k}", v.type), v.type) for k, v in enumerate(initial)]
    last = node.call("subtract", length, node.scalar(1, "int64"))
    backwards = node.call("subtract", last, builder.counter) if any(in_reversed) else None
    pieces = []
    for x, axis, reverse in zip(xs, in_axes, in_reversed):
        where = backwards if reverse else builder.counter
        pieces.append(node.call("take", capture(x, builder.captures), where, axis=axis))
    outputs = node.subgraph("body", [*params, *pieces], builder.captures)
    updated, slices = outputs[:states], outputs[states:]
    for k, (p, u) in enumerate(zip(params, updated)):
        if not _same_type(p.tensor, u.tensor):
            raise node.unsupported(
                f"state {k} starts as {p.dtype}{shape_text(p.shape)} but the body returns "
                f"{u.dtype}{shape_text(u.shape)}; Scan states must keep their type"
            )
    accumulators = builder.scan_accumulators(slices)
    grown = [builder.grow(a, s, prepend=r) for a, s, r in zip(accumulators, slices, out_reversed)]
    expr = builder.build(
        node.call("less", builder.counter, length),
        [*params, *accumulators],
        [*updated, *grown],
        [*params, *accumulators],
        [*initial, *(builder.empty(s) for s in slices)],
    )
    results = _fields(expr, [*(p.tensor for p in params), *(a.tensor for a in accumulators)])
    out_axes = _axes(node, "scan_output_axes", outputs_count, [s.ndim + 1 for s in slices])
    for k, axis in enumerate(out_axes):
        if axis:
            rank = slices[k].ndim + 1
            order = [*range(1, axis + 1), 0, *range(axis + 1, rank)]
            results[states + k] = node.call("transpose", results[states + k], axes=order)
    return results


def _axes(node: NodeContext, name: str, count: int, ranks: Sequence[int]) -> list[int]:
    axes = node.attr(name, [0] * count)
    if len(axes) != count:
        raise node.error(f"{name} has {len(axes)} entries for {count} tensors")
    return [normalize_axis(node, int(a), r, name) for a, r in zip(axes, ranks)]


def _directions(node: NodeContext, name: str, count: int) -> list[bool]:
    directions = node.attr(name, [0] * count)
    if len(directions) != count or any(d not in (0, 1) for d in directions):
        raise node.error(f"{name} must hold {count} values of 0 or 1, got {directions}")
    return [d == 1 for d in directions]


def _sequence_length(
    node: NodeContext, xs: Sequence[Value], axes: Sequence[int], builder: _LoopBuilder
) -> Value:
    """The number of iterations: the scan inputs' common length along their scan axes."""
    known = {int(x.shape[a]) for x, a in zip(xs, axes) if not isinstance(x.shape[a], Any)}
    if len(known) > 1:
        raise node.error(f"the scan inputs have different lengths along their scan axes: {known}")
    if known:
        return node.scalar(known.pop(), "int64")
    shape = node.call("shape_of", xs[0], dtype="int64")
    length = node.call("take", shape, node.scalar(axes[0], "int64"), axis=0)
    return capture(length, builder.captures)
