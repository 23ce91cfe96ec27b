"""Operator fusion, the analysis half: a dataflow graph, its post-dominator tree, and groups.

Compiler layer (``compiler.transform``). :mod:`compiler.transform.fuse_ops` rewrites the program
from the groups found here.

The graph (TVM's ``IndexedForwardGraph``) has one node per expression that can join a
kernel: operator calls, tuple literals and tuple projections of one global function,
including those inside its ``if`` branches, ``match`` clauses and local functions.
Nodes are numbered in post order, so every producer comes before its consumers. An
edge ``producer -> consumer`` carries the consumer's fusion pattern as seen by that
argument: a broadcast operator whose argument already has the output's shape is
elementwise for that argument. Every other use of a value (an argument of a call of a
global, closure or constructor, an ``if`` condition, a ``match`` subject, the result of a
function, branch or ``let`` block, anything in another scope) makes it an *external*
reference: such a value must exist on its own, so it can end a group but never be inside
one.

A tuple projection is fusable (injective) only when its tuple is computed by a fusable
node (``split``, a tuple literal); a projection of a parameter, of a function's result or
of an opaque operator's tuple stays VM work (``GetField``), so a kernel receives the one
tensor it reads rather than every field of the tuple.

``let`` bindings are seen through: in ``let %a = exp(%x); negative(%a)`` the use of
``%a`` is an edge from the ``exp`` node, so A-normal form fuses like dataflow form. A
scope is a function body, an ``if`` branch or a ``match`` clause; an edge between two
scopes is an external reference, so a group never spans control flow and never moves
work into or out of a branch.

Grouping follows TVM's ``GraphPartitioner``: a node may join the group of its immediate
post-dominator (the nearest node every path from it reaches) when every node on those
paths satisfies the pattern rule of the phase:

- phase 0: an ``OUT_ELEMWISE_FUSABLE`` anchor (dense, conv2d, batch_matmul, pools) or a
  ``COMM_REDUCE`` anchor (an extension over TVM, which leaves reductions alone) joins an
  elementwise post-dominator through elementwise or broadcast nodes (an epilogue);
  elementwise and broadcast nodes join an injective or reducing post-dominator through
  injective nodes;
- phase 1: injective nodes and tuples join an injective post-dominator; injective nodes
  also join a reduction (an extension over TVM: ``sum(transpose(%x))`` is one kernel);
- phase 2: injective nodes join an intermediate tuple already fused into an injective
  consumer (``concatenate`` of transposes).

A group has at most one anchor, and at most ``max_depth`` nodes. A value used by several
consumers joins a group only when every path from it ends in that group's node, so no
intermediate value of a group is needed outside it. Everything walks with explicit
stacks: no Python recursion proportional to the program.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from compiler.ir.expr import (
    Call,
    Clause,
    Constant,
    Constructor,
    Expr,
    Function,
    GlobalVar,
    If,
    Let,
    Match,
    Op,
    Tuple,
    TupleGetItem,
    Var,
)
from compiler.ir.types import TensorType, TupleType
from compiler.op.registry import OpPattern, get_def
from compiler.transform.typed_rewrite import is_primitive, known_type

ELEMWISE = OpPattern.ELEMWISE
BROADCAST = OpPattern.BROADCAST
INJECTIVE = OpPattern.INJECTIVE
COMM_REDUCE = OpPattern.COMM_REDUCE
OUT_ELEMWISE_FUSABLE = OpPattern.OUT_ELEMWISE_FUSABLE
TUPLE = OpPattern.TUPLE
OPAQUE = OpPattern.OPAQUE

#: Patterns of operators whose output other operators fuse into (at most one per group).
ANCHORS = (COMM_REDUCE, OUT_ELEMWISE_FUSABLE)

#: ``accept(pattern of a group on the path, whether it is the sink's)``.
PathRule = Callable[[OpPattern, bool], bool]

#: TVM's default ``relay.FuseOps.max_depth``: the most nodes one group may hold.
DEFAULT_MAX_DEPTH = 256


@dataclass(eq=False)
class FuseNode:
    """A node of the fusion graph: an operator call, tuple or projection of the program."""

    index: int
    expr: Expr
    pattern: OpPattern
    scope: int
    #: ``(consumer, edge pattern)`` for every use of this value as an argument.
    outputs: list[tuple[FuseNode, OpPattern]] = field(default_factory=list)
    #: Used somewhere no kernel can reach (see the module docstring).
    extern: bool = False


def _is_graph_expr(expr: Expr) -> bool:
    if isinstance(expr, Call):
        return isinstance(expr.op, Op)
    return isinstance(expr, (Tuple, TupleGetItem))


def _op_pattern(op: Op) -> OpPattern:
    try:
        return get_def(op.name).pattern
    except ValueError:
        return OPAQUE  # an operator outside the registry: unknown, so never fused


def _tensor_fields_only(ty: object) -> bool:
    return isinstance(ty, TupleType) and all(isinstance(f, TensorType) for f in ty.fields)


# A use of a child expression: (child, consumer expression or None for external, edge pattern,
# scope of the use).
_Use = tuple[Expr, Expr | None, OpPattern, int]


class ForwardGraph:
    """The fusion graph of one function (see the module docstring).

    Parameters
    ----------
    func : Function
        A type-checked function; primitive functions inside it are left alone.
    """

    def __init__(self, func: Function) -> None:
        self.nodes: list[FuseNode] = []
        self._by_expr: dict[int, FuseNode] = {}
        #: ``let`` variables bound to a graph expression, and that expression.
        self._alias: dict[Var, Expr] = {}
        self._scopes = 0
        self._build(func)

    def node_of(self, expr: Expr) -> FuseNode | None:
        """The node ``expr`` stands for: its own, or that of the value a ``let`` bound it to."""
        if isinstance(expr, Var):
            bound = self._alias.get(expr)
            if bound is None:
                return None
            expr = bound
        return self._by_expr.get(id(expr))

    def bound_node(self, let: Let) -> FuseNode | None:
        """The node of ``let``'s value when the binding is seen through, else None."""
        if let.var in self._alias:
            return self._by_expr.get(id(let.value))
        return None

    # --- construction ----------------------------------------------------------------------

    def _build(self, func: Function) -> None:
        uses: list[_Use] = []
        seen: set[int] = set()
        stack: list[tuple[Expr, int, bool]] = [(func.body, 0, False)]
        uses.append((func.body, None, OPAQUE, 0))
        while stack:
            expr, scope, expanded = stack.pop()
            if expanded:
                if _is_graph_expr(expr):
                    node = FuseNode(len(self.nodes), expr, self._pattern(expr), scope)
                    self.nodes.append(node)
                    self._by_expr[id(expr)] = node
                continue
            if id(expr) in seen:
                continue
            seen.add(id(expr))
            stack.append((expr, scope, True))
            kids = self._children(expr, scope, uses)
            stack.extend((kid, kid_scope, False) for kid, kid_scope in reversed(kids))
        for child, consumer, pattern, use_scope in uses:
            producer = self.node_of(child)
            if producer is None:
                continue
            target = None if consumer is None else self._by_expr.get(id(consumer))
            if target is None or producer.scope != use_scope:
                producer.extern = True
            else:
                producer.outputs.append((target, pattern))

    def _pattern(self, expr: Expr) -> OpPattern:
        if isinstance(expr, Call):
            assert isinstance(expr.op, Op)
            return _op_pattern(expr.op)
        if isinstance(expr, Tuple):
            return TUPLE
        assert isinstance(expr, TupleGetItem)
        # A projection joins a kernel only with the operator computing its tuple; of any
        # other tuple (a parameter, a function's result, an opaque operator's) it stays a
        # GetField, so the kernel receives one tensor rather than every field.
        source = self.node_of(expr.tuple_value)
        fusable = source is not None and source.pattern != OPAQUE
        return (
            INJECTIVE if fusable and _tensor_fields_only(known_type(expr.tuple_value)) else OPAQUE
        )

    def _new_scope(self) -> int:
        self._scopes += 1
        return self._scopes

    def _children(self, expr: Expr, scope: int, uses: list[_Use]) -> list[tuple[Expr, int]]:
        """The sub-expressions to walk (with their scope), recording each use they are."""
        new_scope = self._new_scope
        if isinstance(expr, Call):
            callee = expr.op
            if isinstance(callee, Op):
                kinds = self._arg_patterns(expr)
                uses.extend((a, expr, k, scope) for a, k in zip(expr.args, kinds))
                return [(a, scope) for a in expr.args]
            uses.extend((a, None, OPAQUE, scope) for a in expr.args)
            if is_primitive(callee):
                return [(a, scope) for a in expr.args]
            uses.append((callee, None, OPAQUE, scope))
            return [(callee, scope)] + [(a, scope) for a in expr.args]
        if isinstance(expr, Tuple):
            for f in expr.fields:
                tensor = isinstance(known_type(f), TensorType)
                uses.append((f, expr if tensor else None, INJECTIVE, scope))
            return [(f, scope) for f in expr.fields]
        if isinstance(expr, TupleGetItem):
            fused = _tensor_fields_only(known_type(expr.tuple_value))
            uses.append((expr.tuple_value, expr if fused else None, INJECTIVE, scope))
            return [(expr.tuple_value, scope)]
        if isinstance(expr, Let):
            if _is_graph_expr(expr.value):
                self._alias[expr.var] = expr.value
            else:
                uses.append((expr.value, None, OPAQUE, scope))
            uses.append((expr.body, None, OPAQUE, scope))
            return [(expr.value, scope), (expr.body, scope)]
        if isinstance(expr, If):
            then_scope, else_scope = new_scope(), new_scope()
            uses.append((expr.cond, None, OPAQUE, scope))
            uses.append((expr.true_branch, None, OPAQUE, then_scope))
            uses.append((expr.false_branch, None, OPAQUE, else_scope))
            return [
                (expr.cond, scope),
                (expr.true_branch, then_scope),
                (expr.false_branch, else_scope),
            ]
        if isinstance(expr, Match):
            uses.append((expr.data, None, OPAQUE, scope))
            kids = [(expr.data, scope)]
            for clause in expr.clauses:
                assert isinstance(clause, Clause)
                clause_scope = new_scope()
                uses.append((clause.rhs, None, OPAQUE, clause_scope))
                kids.append((clause.rhs, clause_scope))
            return kids
        if isinstance(expr, Function):
            if is_primitive(expr):
                return []
            body_scope = new_scope()
            uses.append((expr.body, None, OPAQUE, body_scope))
            return [(expr.body, body_scope)]
        if isinstance(expr, (Var, Constant, GlobalVar, Op, Constructor)):
            return []
        raise TypeError(f"operator fusion met an unknown expression kind {type(expr).__name__}")

    @staticmethod
    def _arg_patterns(call: Call) -> list[OpPattern]:
        assert isinstance(call.op, Op)
        pattern = _op_pattern(call.op)
        out_type = known_type(call)
        kinds = []
        for arg in call.args:
            kind = pattern
            arg_type = known_type(arg)
            if (
                kind == BROADCAST
                and isinstance(out_type, TensorType)
                and isinstance(arg_type, TensorType)
                and arg_type.shape == out_type.shape
            ):
                # Broadcasting does nothing to this argument: it is read element by element.
                kind = ELEMWISE
            kinds.append(kind)
        return kinds


# --- post-dominator tree --------------------------------------------------------------------


class PostDominatorTree:
    """Each node's immediate post-dominator and the combined pattern of the paths to it.

    ``parent[i]`` is None when node ``i`` is used externally, unused, or its uses meet
    only outside the graph.
    """

    def __init__(self, graph: ForwardGraph) -> None:
        n = len(graph.nodes)
        self.parent: list[int | None] = [None] * n
        self.depth: list[int] = [1] * n
        self.pattern: list[OpPattern] = [OPAQUE] * n
        for node in reversed(graph.nodes):
            i = node.index
            if node.extern or not node.outputs:
                continue
            pattern = ELEMWISE
            first, edge = node.outputs[0]
            parent: int | None = first.index
            pattern = max(pattern, edge)
            for consumer, edge in node.outputs[1:]:
                parent, pattern = self._lca(parent, consumer.index, pattern)
                pattern = max(pattern, edge)
            self.parent[i] = parent
            self.pattern[i] = pattern
            self.depth[i] = 1 if parent is None else self.depth[parent] + 1

    def _lca(
        self, a: int | None, b: int | None, pattern: OpPattern
    ) -> tuple[int | None, OpPattern]:
        parent, depth, pat = self.parent, self.depth, self.pattern
        while a != b:
            if a is None or b is None:
                return None, pattern
            if depth[a] < depth[b]:
                pattern = max(pattern, pat[b])
                b = parent[b]
            elif depth[b] < depth[a]:
                pattern = max(pattern, pat[a])
                a = parent[a]
            else:
                pattern = max(pattern, pat[a], pat[b])
                a, b = parent[a], parent[b]
        return a, pattern


# --- partitioning -----------------------------------------------------------------------------


class _Group:
    __slots__ = ("anchor", "num_nodes", "parent", "pattern", "root")

    def __init__(self, node: FuseNode) -> None:
        self.parent: _Group | None = None
        self.pattern = node.pattern
        self.root = node.index  # the node whose value the group produces
        self.num_nodes = 1
        self.anchor = node.pattern in ANCHORS

    def find(self) -> _Group:
        root = self
        while root.parent is not None:
            root = root.parent
        node = self
        while node.parent is not None and node.parent is not root:
            node.parent, node = root, node.parent
        return root


def partition(graph: ForwardGraph, fuse: bool, max_depth: int = DEFAULT_MAX_DEPTH) -> list[int]:
    """The group of every node, as the index of the group's root node (its last node).

    Parameters
    ----------
    graph : ForwardGraph
        The graph of one function.
    fuse : bool
        Whether to fuse operators at all; without fusion each operator is its own group,
        except that a tuple literal used only by one operator call joins that call (so
        the kernel reads the fields, as :func:`compiler.transform.wrap_primitives` does).
    max_depth : int
        The most nodes a group may hold.
    """
    return _Partitioner(graph, max_depth).run(fuse)


class _Partitioner:
    def __init__(self, graph: ForwardGraph, max_depth: int) -> None:
        self.graph = graph
        self.max_depth = max_depth
        self.groups = [_Group(node) for node in graph.nodes]

    def run(self, fuse: bool) -> list[int]:
        if fuse:
            dom = PostDominatorTree(self.graph)
            for phase in (0, 1, 2):
                self._run_phase(dom, phase)
        else:
            self._tuples_into_their_operator()
        return [g.find().root for g in self.groups]

    def _tuples_into_their_operator(self) -> None:
        for node in self.graph.nodes:
            if node.pattern != TUPLE or node.extern or len(node.outputs) != 1:
                continue
            consumer = node.outputs[0][0]
            if isinstance(consumer.expr, Call):
                self._merge(self.groups[node.index], self.groups[consumer.index])

    def _run_phase(self, dom: PostDominatorTree, phase: int) -> None:
        nodes, groups = self.graph.nodes, self.groups
        for node in nodes:
            i = node.index
            group = groups[i]
            if group.pattern == OPAQUE:
                continue
            parent_index = dom.parent[i]
            if parent_index is None:
                continue
            sink = nodes[parent_index]
            parent_group = groups[parent_index]
            if phase == 2:
                # Injective producers join an intermediate tuple fused into an injective op.
                if group.pattern > INJECTIVE:
                    continue
                root_group = parent_group.find()
                if root_group.pattern == TUPLE:
                    continue
                if parent_group.pattern == TUPLE and root_group.pattern <= INJECTIVE:
                    self._try_fuse(node, sink, _injective_path)
                continue
            if group.find() is parent_group.find():
                continue  # already in its post-dominator's group
            if parent_group.pattern == TUPLE:
                continue  # tuples are fused into only in phase 2
            edge = dom.pattern[i]
            if group.pattern in ANCHORS:
                # An epilogue: elementwise work on the anchor's output, element by element.
                if phase == 0 and edge == ELEMWISE:
                    self._try_fuse(node, sink, _epilogue_path)
            elif group.pattern <= BROADCAST:
                if edge <= INJECTIVE or edge == COMM_REDUCE:
                    self._try_fuse(node, sink, _elementwise_path)
            elif group.pattern in (INJECTIVE, TUPLE) and phase == 1:
                # Deferred to phase 1, so anchors finish taking their epilogues first.
                self._try_fuse(node, sink, _injective_path)

    def _try_fuse(self, src: FuseNode, sink: FuseNode, accept: PathRule) -> None:
        """Fuse ``src`` (and everything between) into ``sink``'s group if every node on the
        paths passes ``accept`` and the group stays within ``max_depth`` nodes."""
        if self._check_path(src, sink, accept) and self._fused_size(src, sink) <= self.max_depth:
            self._commit(src, sink)

    def _check_path(self, src: FuseNode, sink: FuseNode, accept: PathRule) -> bool:
        """Whether every node on every path from ``src`` to ``sink`` (``sink`` included)
        belongs to a group whose pattern ``accept(pattern, is_sink)`` allows."""
        groups = self.groups
        seen: set[int] = set()
        stack = [consumer for consumer, _ in src.outputs]
        while stack:
            node = stack.pop()
            if node.index in seen:
                continue
            seen.add(node.index)
            is_sink = node is sink
            if not accept(groups[node.index].find().pattern, is_sink):
                return False
            if not is_sink:
                stack.extend(consumer for consumer, _ in node.outputs)
        return True

    def _commit(self, src: FuseNode, sink: FuseNode) -> None:
        """Merge every group on the paths from ``src`` up to ``sink`` into ``sink``'s group."""
        target = self.groups[sink.index]
        seen: set[int] = set()
        stack = [src]
        while stack:
            node = stack.pop()
            if node is sink or node.index in seen:
                continue
            seen.add(node.index)
            self._merge(self.groups[node.index], target)
            stack.extend(consumer for consumer, _ in node.outputs)

    def _fused_size(self, src: FuseNode, sink: FuseNode) -> int:
        """How many nodes the group of ``sink`` would hold after fusing ``src`` into it."""
        target = self.groups[sink.index].find()
        counted: set[int] = {id(target)}
        total = target.num_nodes
        seen: set[int] = set()
        stack = [src]
        while stack:
            node = stack.pop()
            if node is sink or node.index in seen:
                continue
            seen.add(node.index)
            root = self.groups[node.index].find()
            if id(root) not in counted:
                counted.add(id(root))
                total += root.num_nodes
            stack.extend(consumer for consumer, _ in node.outputs)
        return total

    @staticmethod
    def _merge(child: _Group, parent: _Group) -> None:
        child, parent = child.find(), parent.find()
        if child is parent:
            return
        parent.num_nodes += child.num_nodes
        child.parent = parent
        if child.anchor:
            parent.anchor = True
            parent.pattern = max(child.pattern, parent.pattern)


def _epilogue_path(kind: OpPattern, is_sink: bool) -> bool:
    """Path rule for an anchor: only elementwise and broadcast work follows it."""
    return kind <= BROADCAST


def _injective_path(kind: OpPattern, is_sink: bool) -> bool:
    """Path rule for an injective producer: injective work all the way; the final node may
    also be a reduction (an extension over TVM: a transpose or reshape feeding a sum)."""
    return kind <= INJECTIVE or (is_sink and kind == COMM_REDUCE)


def _elementwise_path(kind: OpPattern, is_sink: bool) -> bool:
    """Path rule for an elementwise or broadcast producer: injective work may run alongside
    on parallel branches; the final node may also be a reduction or an anchor's epilogue."""
    if not is_sink:
        return kind <= INJECTIVE
    return kind <= INJECTIVE or kind in ANCHORS
