"""``FuseOps``: group operator calls into primitive functions, the units that become kernels.

Compiler layer (``compiler.transform``). The grouping rules (TVM's, from the operators'
fusion patterns) live in :mod:`compiler.transform.fuse_graph`; this module rewrites the
program from the groups it finds.

Every operator call ends up inside a ``Primitive=1`` function called where the group's
last operator was: ``nn.relu(nn.bias_add(nn.dense(%x, %w), %b))`` becomes::

    %0 = fn (%p0: Tensor[(1, 4), float32], %p1: Tensor[(3, 4), float32],
             %p2: Tensor[(3), float32], Primitive=1) -> Tensor[(1, 3), float32] {
      nn.relu(nn.bias_add(nn.dense(%p0, %p1), %p2))
    };
    %0(%x, %w, %b)

which the code generator names ``vm_mod_fused_nn_dense_nn_bias_add_nn_relu``. The
parameters of a fused function are the values its operators read from outside the
group, in order of first use (an expression read twice is one parameter). Constants are
passed as arguments as well, since kernel descriptions hold no constants; small
constants equal in dtype, shape and value share one parameter, so the fifty ``1.5f`` of
an elementwise chain become one input. A group is a kernel's dataflow graph: its
intermediate values are written without ``let`` (shared nodes stay shared).

``let`` bindings whose value joined a group are removed; the group's call takes the
place of its last operator, so an A-normal program stays A-normal. A group of tuple
literals and projections without any operator call stays as it is (``(%x, %y).1`` is VM
work, not a kernel). Primitive functions already in the program are left alone, so
running the pass twice changes nothing.

``fuse_opt_level`` 0 turns fusion off: every operator call becomes its own primitive
(a tuple literal used only by one operator still joins it, so ``concatenate`` reads its
fields directly). ``-1`` (the default) takes the level from the current
:class:`~compiler.transform.PassContext`. The module must be type-checked; an untyped
one is type-checked first.
"""

from __future__ import annotations

from compiler.ir.expr import Call, Constant, Expr, Function, Let, Node, Tuple, TupleGetItem, Var
from compiler.ir.module import IRModule
from compiler.ir.types import FuncType, Type
from compiler.ir.visitor import ExprMutator, post_order
from compiler.transform.fuse_graph import DEFAULT_MAX_DEPTH, ForwardGraph, FuseNode, partition
from compiler.transform.pass_manager import Pass, PassContext
from compiler.transform.typed_rewrite import carry_type, is_primitive, known_type, with_type
from compiler.typing import infer_types

__all__ = ["CONSTANT_SHARE_LIMIT", "MAX_DEPTH_CONFIG", "FuseOps", "fuse_ops"]

#: Constants with at most this many elements share a parameter when equal by value.
CONSTANT_SHARE_LIMIT = 64

#: ``PassContext(config={MAX_DEPTH_CONFIG: n})`` caps the nodes of a group (TVM's name).
MAX_DEPTH_CONFIG = "relay.FuseOps.max_depth"


def fuse_ops(
    mod: IRModule, fuse_opt_level: int = 1, max_depth: int = DEFAULT_MAX_DEPTH
) -> IRModule:
    """Group the operator calls of every function of ``mod`` into primitive functions.

    Parameters
    ----------
    mod : IRModule
        The module (type-checked, else it is type-checked first); it is not modified.
    fuse_opt_level : int
        0: one primitive per operator call; 1 or more: fuse by TVM's rules.
    max_depth : int
        The most operator calls, tuples and projections one primitive may hold (>= 1).

    Returns
    -------
    IRModule
        A new module in which operators are called only inside ``Primitive=1`` functions.
    """
    if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 1:
        raise ValueError(f"FuseOps max_depth must be a positive int, got {max_depth!r}")
    if not _is_typed(mod):
        mod = infer_types(mod)
    out = mod.copy()
    for gvar, func in mod.functions.items():
        if not is_primitive(func):
            out[gvar] = _fuse_function(func, fuse_opt_level >= 1, max_depth)
    return out


class FuseOps(Pass):
    """Fuse operators into primitive functions (TVM's ``relay.transform.FuseOps``).

    Parameters
    ----------
    fuse_opt_level : int
        ``-1`` (default) uses the current ``PassContext``'s ``opt_level``; 0 puts every
        operator in its own primitive; 1 or more fuses.

    Notes
    -----
    The group size cap is read from ``PassContext.current().config["relay.FuseOps.max_depth"]``
    (default 256, as in TVM).
    """

    def __init__(self, fuse_opt_level: int = -1) -> None:
        if isinstance(fuse_opt_level, bool) or not isinstance(fuse_opt_level, int):
            raise TypeError(f"FuseOps fuse_opt_level must be an int, got {fuse_opt_level!r}")
        super().__init__("FuseOps", opt_level=0)
        self.fuse_opt_level = fuse_opt_level

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        level = ctx.opt_level if self.fuse_opt_level == -1 else self.fuse_opt_level
        max_depth = ctx.config.get(MAX_DEPTH_CONFIG, DEFAULT_MAX_DEPTH)
        return fuse_ops(mod, level, max_depth)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"FuseOps(fuse_opt_level={self.fuse_opt_level})"


def _is_typed(mod: IRModule) -> bool:
    """Whether every expression fusion reads a type from has one."""
    for func in mod.functions.values():
        for node in post_order(func, descend=lambda n: not is_primitive(n)):
            if (
                isinstance(node, (Call, Tuple, TupleGetItem, Constant))
                and node._checked_type is None
            ):
                return False
            if isinstance(node, Var) and known_type(node) is None:
                return False
    return True


def _fuse_function(func: Function, fuse: bool, max_depth: int) -> Function:
    graph = ForwardGraph(func)
    roots = partition(graph, fuse, max_depth)
    members: dict[int, list[FuseNode]] = {}
    for node in graph.nodes:
        members.setdefault(roots[node.index], []).append(node)
    return _Rewriter(graph, roots, members).visit(func)


class _Rewriter(ExprMutator):
    """Replaces each group's last node by a call of the group's primitive function."""

    def __init__(
        self, graph: ForwardGraph, roots: list[int], members: dict[int, list[FuseNode]]
    ) -> None:
        super().__init__()
        self.graph = graph
        self.roots = roots
        self.members = members

    def descend(self, node: Node) -> bool:
        return not is_primitive(node)

    def _makes_function(self, root: FuseNode) -> bool:
        """Whether the group ending at ``root`` becomes a primitive: only if it computes
        something. Tuples and projections alone are VM work (``AllocADT``, ``GetField``)."""
        return any(isinstance(m.expr, Call) for m in self.members[root.index])

    def _inside(self, node: FuseNode) -> bool:
        """Whether ``node`` is computed inside a function of a group it does not end."""
        root = self.roots[node.index]
        return root != node.index and self._makes_function(self.graph.nodes[root])

    def rewrite(self, old: Node, new: Node) -> Node:
        if isinstance(old, Let):
            bound = self.graph.bound_node(old)
            if bound is not None and self._inside(bound):
                return new.body  # type: ignore[attr-defined]  # the group computes it now
            return carry_type(old, new)
        if isinstance(old, (Call, Tuple, TupleGetItem)):
            node = self.graph.node_of(old)
            is_root = node is not None and self.roots[node.index] == node.index
            if is_root and self._makes_function(node):  # type: ignore[arg-type]
                return self._group_call(node)  # type: ignore[arg-type]
        return carry_type(old, new)

    def _group_call(self, root: FuseNode) -> Call:
        params = _Params(self.memo)
        inner: dict[int, Expr] = {}
        for member in self.members[root.index]:
            expr = member.expr
            built: Expr
            if isinstance(expr, Call):
                args = [self._arg(a, inner, params) for a in expr.args]
                built = Call(expr.op, args, expr.attrs, expr.type_args)
            elif isinstance(expr, Tuple):
                built = Tuple([self._arg(f, inner, params) for f in expr.fields])
            else:
                assert isinstance(expr, TupleGetItem)
                built = TupleGetItem(self._arg(expr.tuple_value, inner, params), expr.index)
            built.span = expr.span
            inner[member.index] = with_type(built, expr._checked_type)
        ret = root.expr._checked_type
        func = Function(params.vars, inner[root.index], ret, attrs={"Primitive": 1})
        param_types = [p.type_annotation for p in params.vars]
        if ret is not None and all(t is not None for t in param_types):
            func._checked_type = FuncType(param_types, ret)  # type: ignore[arg-type]
        call = Call(func, params.actuals)
        call.span = root.expr.span
        return with_type(call, ret)  # type: ignore[return-value]

    def _arg(self, arg: Expr, inner: dict[int, Expr], params: _Params) -> Expr:
        """A member's argument inside the group: a member built earlier, or a parameter."""
        node = self.graph.node_of(arg)
        if node is not None and node.index in inner:
            return inner[node.index]
        return params.get(arg, node)


class _Params:
    """The parameters of one primitive function and the arguments passed for them."""

    def __init__(self, memo: dict[int, Node]) -> None:
        self.memo = memo
        self.vars: list[Var] = []
        self.actuals: list[Expr] = []
        self._by_key: dict[object, Var] = {}

    def get(self, arg: Expr, node: FuseNode | None) -> Var:
        """The parameter standing for ``arg``, an expression computed outside the group."""
        key = _param_key(arg, node)
        existing = self._by_key.get(key)
        if existing is not None:
            return existing
        actual = self.memo.get(id(arg))
        if actual is None:
            raise AssertionError(
                "operator fusion: an input of a group was not rewritten before the group; "
                "this is a bug in FuseOps"
            )
        ty: Type | None = known_type(arg)
        param = Var(f"p{len(self.vars)}", ty)
        with_type(param, ty)
        self.vars.append(param)
        self.actuals.append(actual)  # type: ignore[arg-type]
        self._by_key[key] = param
        return param


def _param_key(arg: Expr, node: FuseNode | None) -> object:
    if node is not None:
        return ("node", node.index)
    if isinstance(arg, Constant) and arg.data.size <= CONSTANT_SHARE_LIMIT:
        data = arg.data
        return ("const", data.dtype.str, data.shape, data.tobytes())
    return ("expr", id(arg))
