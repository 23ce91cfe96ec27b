"""``CombineParallelDense``, ``CombineParallelConv2D`` and ``CombineParallelBatchMatmul``:
dense layers, convolutions or batched products with the same input and their own weights
become one such call whose output is sliced.

Compiler layer (``compiler.transform``).

An attention block projects its input three times (queries, keys, values)::

    nn.bias_add(nn.dense(%x, Wq), bq), nn.bias_add(nn.dense(%x, Wk), bk), ...
      =>
    %all = nn.bias_add(nn.dense(%x, [Wq; Wk; Wv]), [bq; bk; bv])
    strided_slice(%all, begin=[0], end=[d], axes=[-1]), strided_slice(%all, begin=[d], ...), ...

with the weights (and biases) joined along the units axis, computed now. The products are
the same, one kernel instead of three, and one product as wide as all three together,
which reads ``%x`` once and splits between threads better. The slices are injective and
fuse into the kernels that read them. This is TVM's ``CombineParallelDense`` (its
``to_batch=False`` form), with the bias add carried along. ``CombineParallelConv2D`` does
the same for the convolutions of an Inception block's branches: ``nn.conv2d`` calls of one
NCHW input with OIHW weights of one shape but for their output channels, joined along the
output channels and sliced on axis 1. ``CombineParallelBatchMatmul`` joins
``nn.batch_matmul(x, y1)``, ``nn.batch_matmul(x, y2)``, ... along the columns of the ``y``
(their rows with ``transpose_b``, TVM's default), sliced on the last axis.

Which calls are combined: calls of the op outside primitive functions whose data is one
and the same expression (node or variable), whose weights are constant arrays of one
dtype and one shape but for the output axis (a dense layer's 2-D ``(units, in)``, a
convolution's 4-D OIHW of one group, a batched product's 3-D ``y``; for the batched
product also parameters of the function, which are joined by a ``concatenate`` on every
call as TVM's pass joins them, where the other two kinds need a constant to pack at
compile time), with equal attributes (``units`` or ``channels``
aside) and a data type of known rank; at least ``min_num_branches`` of them, all in the
same scope (one function body, ``if`` branch or ``match`` clause, so the joined product is
never computed where the program would not compute a branch). A ``nn.bias_add`` on the
output axis (the last for a dense layer, 1 for a convolution) with a constant 1-D bias,
or an ``add`` of a constant that broadcasts along that axis alone (an imported layer's
bias), that is the only use of such a call (directly or through a ``let`` variable) joins
with it as a ``nn.bias_add``; the calls of a group then either all carry a bias or none
does (the two kinds form separate groups). A call whose result is also used elsewhere
gets no bias joined, and its other uses read its slice.
The calls left unused behind ``let`` bindings are removed by ``DeadCodeElimination``.

TVM runs all three at ``opt_level`` 4, from 3 branches by default; here the pass objects
say 3. ``relay.vm.compile`` runs ``CombineParallelDense`` from the default level and from 2
branches, after ``CombineSummedDense`` (whose sums of two products are joined first) and
before ``AlterOpLayout`` packs the joined weight; the other two run where a program's
passes ask for them.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable

import numpy as np

from compiler.ir.expr import (
    Call,
    Clause,
    Constant,
    Function,
    If,
    Let,
    Match,
    Node,
    Tuple,
    Var,
    const,
)
from compiler.ir.module import IRModule
from compiler.ir.types import TensorType
from compiler.ir.visitor import children
from compiler.op.api import call_op
from compiler.op.registry import get_def
from compiler.transform.pass_manager import Pass, PassContext
from compiler.transform.rewriter import BindingMutator, is_op_call, is_primitive, rewrite_module

__all__ = [
    "MIN_BRANCHES",
    "CombineParallelBatchMatmul",
    "CombineParallelConv2D",
    "CombineParallelDense",
    "combine_parallel_batch_matmul",
    "combine_parallel_conv2d",
    "combine_parallel_dense",
]

#: The fewest dense layers of one input that ``relay.vm.compile`` combines (a transformer's
#: key and value projections may come without the query's).
MIN_BRANCHES = 2
#: TVM's default for both passes.
TVM_MIN_BRANCHES = 3


def _weight_type(weight: Node) -> tuple[tuple[int, ...], str] | None:
    """The shape and dtype of a constant, or of a node whose checked type is static."""
    if isinstance(weight, Constant):
        return weight.data.shape, str(weight.data.dtype)
    ty = getattr(weight, "_checked_type", None)
    if not isinstance(ty, TensorType) or not ty.is_static:
        return None
    return ty.concrete_shape, str(ty.dtype)


class _Kind:
    """What a pass combines: the op, its weight's rank, its output-size attribute (None if
    it has none), how the output axis is found from the result's rank and the weight's
    from the attributes, and what calls of one input must share (see :meth:`key`)."""

    __slots__ = ("ndim", "op", "units")

    def __init__(self, op: str, ndim: int, units: str | None) -> None:
        self.op = op
        self.ndim = ndim
        self.units = units

    def axis(self, rank: int) -> int:
        """The output axis of a result of ``rank`` axes."""
        return 1 if self.op == "nn.conv2d" else rank - 1

    def weight_axis(self, call: Call) -> int:
        """The axis of ``call``'s weight that the output axis comes from."""
        if self.op != "nn.batch_matmul":
            return 0
        return 1 if get_def(self.op).normalize_attrs(call.attrs)["transpose_b"] else 2

    def weight(self, call: Call, params: set[int]) -> tuple[tuple[int, ...], str] | None:
        """The static shape and dtype of ``call``'s weight if it can be joined: a constant
        of the op's rank, or for a batched product a parameter of the function too."""
        weight = call.args[1]
        joinable = isinstance(weight, Constant) or (
            self.op == "nn.batch_matmul" and id(weight) in params
        )
        found = _weight_type(weight) if joinable else None
        return found if found is not None and len(found[0]) == self.ndim else None

    def key(self, call: Call, params: set[int]) -> Hashable | None:
        """What calls of one input must share to be combined, or None if ``call`` cannot be
        (a weight that is neither a constant of the op's rank nor, for a batched product,
        a parameter; a data type of unknown rank, a convolution of several groups or
        other layouts)."""
        weight = self.weight(call, params)
        data_type = getattr(call.args[0], "_checked_type", None)
        if weight is None:
            return None
        if not isinstance(data_type, TensorType) or len(data_type.shape) < 1:
            return None
        attrs = dict(get_def(self.op).normalize_attrs(call.attrs))
        if self.units is not None:
            attrs.pop(self.units, None)
        if self.op == "nn.conv2d":
            layouts = (attrs["data_layout"], attrs["kernel_layout"], attrs["out_layout"] or "NCHW")
            if attrs["groups"] != 1 or layouts != ("NCHW", "OIHW", "NCHW"):
                return None
            attrs.pop("kernel_size", None)  # the weight's shape says it
        shape, dtype = weight
        axis = self.weight_axis(call)
        return (
            dtype,
            shape[:axis] + shape[axis + 1 :],
            len(data_type.shape),
            tuple(sorted((k, repr(v)) for k, v in attrs.items())),
        )

    def units_of(self, call: Call) -> int:
        """How many outputs ``call`` adds along the output axis (its weight's extent)."""
        found = _weight_type(call.args[1])
        assert found is not None  # a member's weight passed weight()
        return found[0][self.weight_axis(call)]


_DENSE = _Kind("nn.dense", 2, "units")
_CONV2D = _Kind("nn.conv2d", 4, "channels")
_BATCH_MATMUL = _Kind("nn.batch_matmul", 3, None)


def _bias(add: Call, rank: int, axis: int) -> tuple[Node, np.ndarray] | None:
    """The layer side of ``add`` and the constant bias it adds on ``axis`` of ``rank`` axes,
    or None: an ``nn.bias_add`` with a 1-D constant on that axis, or an ``add`` (either
    operand order, as frontends write a layer's bias) of a constant of no more than
    ``rank`` axes that are all 1 but ``axis`` (aligned from the right), so that it
    broadcasts along that axis alone and the sum keeps the layer's shape."""
    if is_op_call(add, "nn.bias_add"):
        bias = add.args[1]
        if not isinstance(bias, Constant) or bias.data.ndim != 1:
            return None
        on = get_def("nn.bias_add").normalize_attrs(add.attrs)["axis"]
        return (add.args[0], bias.data) if on in (axis, axis - rank) else None
    if not is_op_call(add, "add"):
        return None
    for source, bias in (add.args, reversed(add.args)):
        if isinstance(bias, Constant) and not isinstance(source, Constant):
            shape = bias.data.shape
            aligned = (1,) * (rank - len(shape)) + tuple(shape)
            if 1 <= len(shape) <= rank and all(d == 1 for i, d in enumerate(aligned) if i != axis):
                return source, bias.data.reshape(-1)
    return None


class _Member:
    """One layer of a group: the call, the node the group's slice replaces (the call or
    its bias add), and the bias if any."""

    __slots__ = ("bias", "call", "replaced")

    def __init__(self, call: Call, replaced: Node, bias: np.ndarray | None) -> None:
        self.call = call
        self.replaced = replaced
        self.bias = bias


def _scopes(func: Function) -> dict[int, object]:
    """The scope of each node outside primitives (a node reached from two scopes gets
    None): the function body, ``if`` branch or ``match`` clause it is evaluated in."""
    scope_of: dict[int, object] = {}
    stack: list[tuple[Node, object]] = [(func.body, func)]
    while stack:
        node, scope = stack.pop()
        if id(node) in scope_of:
            if scope_of[id(node)] is not scope:
                scope_of[id(node)] = None
            continue
        scope_of[id(node)] = scope
        if is_primitive(node):
            continue
        if isinstance(node, Function):
            stack.append((node.body, node))
        elif isinstance(node, If):
            stack.append((node.cond, scope))
            stack.append((node.true_branch, node.true_branch))
            stack.append((node.false_branch, node.false_branch))
        elif isinstance(node, Match):
            stack.append((node.data, scope))
            stack.extend((c.rhs, c) for c in node.clauses)
        elif isinstance(node, Clause):
            stack.append((node.rhs, node))
        else:
            stack.extend((child, scope) for child in children(node))
    return scope_of


def _groups(func: Function, kind: _Kind, min_branches: int) -> list[list[_Member]]:
    """The groups of ``kind``'s calls in ``func`` (type-checked) to combine, in program
    order."""
    scope_of = _scopes(func)
    params = {id(p) for p in func.params}
    bound: dict[Var, Node] = {}
    uses: Counter[int] = Counter()
    order: list[Node] = []
    stack: list[Node] = [func.body]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        order.append(node)
        if is_primitive(node):
            continue
        if isinstance(node, Let):
            bound[node.var] = node.value
            uses[id(node.value)] += 1
            uses[id(node.body)] += 1
            stack.extend((node.body, node.value))
            continue
        kids = (node.body,) if isinstance(node, Function) else children(node)
        uses.update(id(child) for child in kids)
        stack.extend(reversed(kids))
    # A bias add joins its layer when it is that layer's only use.
    biased: dict[int, tuple[Node, np.ndarray]] = {}
    for node in order:
        if not (is_op_call(node, "nn.bias_add") or is_op_call(node, "add")):
            continue
        sum_type = getattr(node, "_checked_type", None)
        if not isinstance(sum_type, TensorType):
            continue
        rank = len(sum_type.shape)  # type: ignore[arg-type]
        found = _bias(node, rank, kind.axis(rank))  # type: ignore[arg-type]
        if found is None:
            continue
        source, bias = found
        layer = bound.get(source) if isinstance(source, Var) else source
        rank_type = getattr(source, "_checked_type", None)
        if not is_op_call(layer, kind.op) or not isinstance(rank_type, TensorType):
            continue
        if uses[id(source)] != 1 or id(layer) in biased:
            continue
        # One value per unit, of the product's dtype, and a sum of the product's shape.
        axis = kind.axis(len(rank_type.shape))
        fits = (
            bias.shape == (rank_type.shape[axis],)
            and bias.dtype == np.dtype(rank_type.dtype)
            and tuple(sum_type.shape) == tuple(rank_type.shape)
        )
        if fits and scope_of.get(id(node)) is scope_of.get(id(layer)):
            biased[id(layer)] = (node, bias)
    by_key: dict[Hashable, list[_Member]] = defaultdict(list)
    for node in order:
        if not is_op_call(node, kind.op):
            continue
        key = kind.key(node, params)  # type: ignore[arg-type]
        scope = scope_of.get(id(node))
        if key is None or scope is None:
            continue
        replaced, bias = biased.get(id(node), (node, None))
        data = node.args[0]  # type: ignore[attr-defined]
        group_key = (
            id(data),
            id(scope),
            key,
            bias is not None,
            None if bias is None else bias.dtype,
        )
        by_key[group_key].append(_Member(node, replaced, bias))  # type: ignore[arg-type]
    return [members for members in by_key.values() if len(members) >= min_branches]


class _Rewriter(BindingMutator):
    def __init__(self, kind: _Kind, min_branches: int) -> None:
        super().__init__()
        self.kind = kind
        self.min_branches = min_branches
        #: id of a replaced node -> (its group, its index in the group).
        self.plan: dict[int, tuple[int, int]] = {}
        self.groups: list[list[_Member]] = []
        #: The combined call of each group, made when its first member is rewritten.
        self.combined: dict[int, Call] = {}

    def visit(self, root: Node) -> object:
        if isinstance(root, Function):
            self.groups = _groups(root, self.kind, self.min_branches)
            for g, members in enumerate(self.groups):
                for i, member in enumerate(members):
                    self.plan[id(member.replaced)] = (g, i)
        return super().visit(root)

    def descend(self, node: Node) -> bool:
        return not is_primitive(node)

    def _combine(self, g: int) -> Call:
        if g not in self.combined:
            members = self.groups[g]
            first = members[0].call
            data = self.memo[id(first.args[0])]
            kind = self.kind
            axis = kind.weight_axis(first)
            parts = [m.call.args[1] for m in members]
            weight: Node
            if all(isinstance(part, Constant) for part in parts):
                weight = const(np.concatenate([part.data for part in parts], axis=axis))  # type: ignore[attr-defined]
            else:  # a batched product's parameters (never rewritten: the nodes themselves)
                weight = call_op("concatenate", [Tuple(parts)], axis=axis)
            attrs = dict(get_def(kind.op).normalize_attrs(first.attrs))
            if kind.units is not None:
                attrs[kind.units] = None
            out: Call = call_op(kind.op, [data, weight], **attrs)
            if members[0].bias is not None:
                bias = const(np.concatenate([m.bias for m in members]))  # type: ignore[misc]
                out = call_op("nn.bias_add", [out, bias], axis=1 if kind.op == "nn.conv2d" else -1)
            self.combined[g] = out
        return self.combined[g]

    def rewrite(self, old: Node, new: Node) -> Node:
        spot = self.plan.get(id(old))
        if spot is None:
            return new
        g, i = spot
        members = self.groups[g]
        begin = sum(self.kind.units_of(m.call) for m in members[:i])
        units = self.kind.units_of(members[i].call)
        rank = len(members[i].call.args[0]._checked_type.shape)  # type: ignore[attr-defined]
        return call_op(
            "strided_slice",
            [self._combine(g)],
            begin=[begin],
            end=[begin + units],
            strides=[1],
            axes=[self.kind.axis(rank)],
        )


def _branches(min_num_branches: object) -> int:
    """``min_num_branches`` checked: an int of at least 2 (one call has nothing to join)."""
    if isinstance(min_num_branches, bool) or not isinstance(min_num_branches, int):
        raise TypeError(f"min_num_branches must be an int, got {min_num_branches!r}")
    if min_num_branches < 2:
        raise ValueError(f"min_num_branches must be at least 2, got {min_num_branches}")
    return min_num_branches


def _combine(mod: IRModule, kind: _Kind, min_num_branches: int) -> IRModule:
    _branches(min_num_branches)
    return rewrite_module(
        mod, lambda node: is_op_call(node, kind.op), lambda: _Rewriter(kind, min_num_branches)
    )


def combine_parallel_dense(mod: IRModule, min_num_branches: int = MIN_BRANCHES) -> IRModule:
    """Combine the dense layers with constant weights that read one input into one dense
    layer followed by slices (see the module docstring).

    Parameters
    ----------
    mod : IRModule
        The module; it is not modified.
    min_num_branches : int
        The fewest dense layers of one input that are combined (at least 2).

    Returns
    -------
    IRModule
        A new module.
    """
    return _combine(mod, _DENSE, min_num_branches)


def combine_parallel_conv2d(mod: IRModule, min_num_branches: int = TVM_MIN_BRANCHES) -> IRModule:
    """Combine the NCHW convolutions of one group with constant OIHW weights of one shape
    (but for their output channels) that read one input into one convolution followed by
    slices of its channels (see the module docstring).

    Parameters
    ----------
    mod : IRModule
        The module; it is not modified.
    min_num_branches : int
        The fewest convolutions of one input that are combined (at least 2).

    Returns
    -------
    IRModule
        A new module.
    """
    return _combine(mod, _CONV2D, min_num_branches)


def combine_parallel_batch_matmul(
    mod: IRModule, min_num_branches: int = TVM_MIN_BRANCHES
) -> IRModule:
    """Combine the batched products ``nn.batch_matmul(x, y_i)`` of one ``x`` whose ``y_i``
    are constants or parameters of one shape but for their output columns into one
    product of the joined ``y`` followed by slices of its last axis (see the module
    docstring).

    Parameters
    ----------
    mod : IRModule
        The module; it is not modified.
    min_num_branches : int
        The fewest products of one input that are combined (at least 2).

    Returns
    -------
    IRModule
        A new module.
    """
    return _combine(mod, _BATCH_MATMUL, min_num_branches)


class _CombinePass(Pass):
    """What the three passes share: ``KIND`` names the op; the pass is named for its class."""

    KIND: _Kind

    def __init__(self, min_num_branches: int = TVM_MIN_BRANCHES) -> None:
        super().__init__(type(self).__name__, opt_level=3)
        self.min_num_branches = _branches(min_num_branches)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return _combine(mod, self.KIND, self.min_num_branches)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(min_num_branches={self.min_num_branches})"


class CombineParallelDense(_CombinePass):
    """Join ``nn.dense(x, W1)``, ``nn.dense(x, W2)``, ... with constant weights into one
    dense layer and slices (``opt_level=3``), as TVM's pass of that name. See
    :mod:`compiler.transform.combine_parallel`.

    Parameters
    ----------
    min_num_branches : int
        The fewest dense layers of one input that are combined (TVM's default, 3).
    to_batch : bool
        TVM's choice between stacking equal layers into a ``nn.batch_matmul`` (True) and
        joining them along the units (False). Accepted for TVM's scripts; the layers are
        always joined along the units, which computes the same values with one product
        (and combines layers of different widths as well).
    """

    KIND = _DENSE

    def __init__(self, min_num_branches: int = TVM_MIN_BRANCHES, to_batch: bool = True) -> None:
        super().__init__(min_num_branches)
        self.to_batch = bool(to_batch)


class CombineParallelConv2D(_CombinePass):
    """Join ``nn.conv2d(x, W1)``, ``nn.conv2d(x, W2)``, ... (NCHW, one group, constant OIHW
    weights of one shape but for their output channels) into one convolution and slices of
    its channels (``opt_level=3``), as TVM's pass of that name. See
    :mod:`compiler.transform.combine_parallel`.

    Parameters
    ----------
    min_num_branches : int
        The fewest convolutions of one input that are combined (TVM's default, 3).
    """

    KIND = _CONV2D


class CombineParallelBatchMatmul(_CombinePass):
    """Join ``nn.batch_matmul(x, y1)``, ``nn.batch_matmul(x, y2)``, ... (constant or
    parameter ``y`` of one shape but for their output columns) into one batched product
    and slices of its last axis (``opt_level=3``), as TVM's pass of that name. See
    :mod:`compiler.transform.combine_parallel`.

    Parameters
    ----------
    min_num_branches : int
        The fewest products of one input that are combined (TVM's default, 3).
    """

    KIND = _BATCH_MATMUL
