"""``CombineParallelDense``: dense layers with constant weights that read the same input
become one dense layer whose output is sliced.

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
``to_batch=False`` form), with the bias add carried along.

Which calls are combined: ``nn.dense`` calls outside primitive functions whose data is one
and the same expression (node or variable), whose weights are constant 2-D arrays of one
dtype and one number of input features, with equal attributes (``units`` aside) and a
data type of known rank; at least :data:`MIN_BRANCHES` of them, all in the same scope
(one function body, ``if`` branch or ``match`` clause, so the joined product is never
computed where the program would not compute a branch). A ``nn.bias_add`` on the last
axis with a constant 1-D bias, or an ``add`` of a constant that broadcasts along the last
axis alone (an imported linear layer's bias), that is the only use of such a dense layer
(directly or through a ``let`` variable) joins with it as a ``nn.bias_add``; the dense
layers of a group then either all carry a bias or none does (the two kinds form separate
groups). A dense layer whose result is also used elsewhere gets no bias joined, and its
other uses read its slice.
The calls left unused behind ``let`` bindings are removed by ``DeadCodeElimination``.

TVM runs it at ``opt_level`` 4; here the pass object says 3 and ``relay.vm.compile`` runs
it from the default level, after ``CombineSummedDense`` (whose sums of two products are
joined first) and before ``AlterOpLayout`` packs the joined weight.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable

import numpy as np

from compiler.ir.expr import Call, Clause, Constant, Function, If, Let, Match, Node, Var, const
from compiler.ir.module import IRModule
from compiler.ir.types import TensorType
from compiler.ir.visitor import children
from compiler.op.api import call_op
from compiler.op.registry import get_def
from compiler.transform.pass_manager import Pass, PassContext
from compiler.transform.rewriter import BindingMutator, is_op_call, is_primitive, rewrite_module

__all__ = ["MIN_BRANCHES", "CombineParallelDense", "combine_parallel_dense"]

#: The fewest dense layers of one input that are combined.
MIN_BRANCHES = 2


def _dense_key(dense: Call) -> Hashable | None:
    """What dense layers of one input must share to be combined, or None if ``dense``
    cannot be (a weight that is not a constant matrix, a data type of unknown rank)."""
    weight = dense.args[1]
    data_type = getattr(dense.args[0], "_checked_type", None)
    if not isinstance(weight, Constant) or weight.data.ndim != 2:
        return None
    if not isinstance(data_type, TensorType) or len(data_type.shape) < 1:
        return None
    attrs = dict(get_def("nn.dense").normalize_attrs(dense.attrs))
    attrs.pop("units", None)
    return (
        str(weight.data.dtype),
        weight.data.shape[1],
        len(data_type.shape),
        tuple(sorted((k, repr(v)) for k, v in attrs.items())),
    )


def _bias(add: Call, rank: int) -> tuple[Node, np.ndarray] | None:
    """The dense side of ``add`` and the constant bias it adds on the last of ``rank`` axes,
    or None: an ``nn.bias_add`` with a 1-D constant on that axis, or an ``add`` (either
    operand order, as frontends write a linear layer's bias) of a constant whose axes
    before the last are all 1 and no more than ``rank``, so that it broadcasts along the
    last axis alone and the sum keeps the dense layer's shape."""
    if is_op_call(add, "nn.bias_add"):
        bias = add.args[1]
        if not isinstance(bias, Constant) or bias.data.ndim != 1:
            return None
        axis = get_def("nn.bias_add").normalize_attrs(add.attrs)["axis"]
        return (add.args[0], bias.data) if axis in (-1, rank - 1) else None
    if not is_op_call(add, "add"):
        return None
    for source, bias in (add.args, reversed(add.args)):
        if isinstance(bias, Constant) and not isinstance(source, Constant):
            shape = bias.data.shape
            if 1 <= len(shape) <= rank and all(d == 1 for d in shape[:-1]):
                return source, bias.data.reshape(-1)
    return None


class _Member:
    """One dense layer of a group: the call, the node the group's slice replaces (the dense
    call or its bias add), and the bias if any."""

    __slots__ = ("bias", "dense", "replaced")

    def __init__(self, dense: Call, replaced: Node, bias: np.ndarray | None) -> None:
        self.dense = dense
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


def _groups(func: Function) -> list[list[_Member]]:
    """The groups of dense layers of ``func`` (type-checked) to combine, in program order."""
    scope_of = _scopes(func)
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
    # A bias add joins its dense layer when it is that layer's only use.
    biased: dict[int, tuple[Node, np.ndarray]] = {}
    for node in order:
        if not (is_op_call(node, "nn.bias_add") or is_op_call(node, "add")):
            continue
        sum_type = getattr(node, "_checked_type", None)
        if not isinstance(sum_type, TensorType):
            continue
        found = _bias(node, len(sum_type.shape))  # type: ignore[arg-type]
        if found is None:
            continue
        source, bias = found
        dense = bound.get(source) if isinstance(source, Var) else source
        rank_type = getattr(source, "_checked_type", None)
        if not is_op_call(dense, "nn.dense") or not isinstance(rank_type, TensorType):
            continue
        if uses[id(source)] != 1 or id(dense) in biased:
            continue
        # One value per unit, of the product's dtype, and a sum of the product's shape.
        fits = (
            bias.shape == tuple(rank_type.shape[-1:])
            and bias.dtype == np.dtype(rank_type.dtype)
            and tuple(sum_type.shape) == tuple(rank_type.shape)
        )
        if fits and scope_of.get(id(node)) is scope_of.get(id(dense)):
            biased[id(dense)] = (node, bias)
    by_key: dict[Hashable, list[_Member]] = defaultdict(list)
    for node in order:
        if not is_op_call(node, "nn.dense"):
            continue
        key = _dense_key(node)  # type: ignore[arg-type]
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
    return [members for members in by_key.values() if len(members) >= MIN_BRANCHES]


class _Rewriter(BindingMutator):
    def __init__(self) -> None:
        super().__init__()
        #: id of a replaced node -> (its group, its index in the group).
        self.plan: dict[int, tuple[int, int]] = {}
        self.groups: list[list[_Member]] = []
        #: The combined call of each group, made when its first member is rewritten.
        self.combined: dict[int, Call] = {}

    def visit(self, root: Node) -> object:
        if isinstance(root, Function):
            self.groups = _groups(root)
            for g, members in enumerate(self.groups):
                for i, member in enumerate(members):
                    self.plan[id(member.replaced)] = (g, i)
        return super().visit(root)

    def descend(self, node: Node) -> bool:
        return not is_primitive(node)

    def _combine(self, g: int) -> Call:
        if g not in self.combined:
            members = self.groups[g]
            first = members[0].dense
            data = self.memo[id(first.args[0])]
            weight = const(np.concatenate([m.dense.args[1].data for m in members], axis=0))  # type: ignore[attr-defined]
            attrs = dict(get_def("nn.dense").normalize_attrs(first.attrs))
            attrs["units"] = None
            out: Call = call_op("nn.dense", [data, weight], **attrs)
            if members[0].bias is not None:
                bias = const(np.concatenate([m.bias for m in members]))  # type: ignore[misc]
                out = call_op("nn.bias_add", [out, bias], axis=-1)
            self.combined[g] = out
        return self.combined[g]

    def rewrite(self, old: Node, new: Node) -> Node:
        spot = self.plan.get(id(old))
        if spot is None:
            return new
        g, i = spot
        members = self.groups[g]
        begin = sum(m.dense.args[1].data.shape[0] for m in members[:i])  # type: ignore[attr-defined]
        units = members[i].dense.args[1].data.shape[0]  # type: ignore[attr-defined]
        rank = len(members[i].dense.args[0]._checked_type.shape)  # type: ignore[attr-defined]
        return call_op(
            "strided_slice",
            [self._combine(g)],
            begin=[begin],
            end=[begin + units],
            strides=[1],
            axes=[rank - 1],
        )


def _is_dense(node: object) -> bool:
    return is_op_call(node, "nn.dense")


def combine_parallel_dense(mod: IRModule) -> IRModule:
    """Combine the dense layers with constant weights that read one input into one dense
    layer followed by slices (see the module docstring).

    Parameters
    ----------
    mod : IRModule
        The module; it is not modified.

    Returns
    -------
    IRModule
        A new module.
    """
    return rewrite_module(mod, _is_dense, _Rewriter)


class CombineParallelDense(Pass):
    """Join ``nn.dense(x, W1)``, ``nn.dense(x, W2)``, ... with constant weights into one
    dense layer and slices (``opt_level=3``). See
    :mod:`compiler.transform.combine_parallel_dense`."""

    def __init__(self) -> None:
        super().__init__("CombineParallelDense", opt_level=3)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return combine_parallel_dense(mod)

    def __repr__(self) -> str:
        return "CombineParallelDense()"
