"""Type inference for whole Relay modules and standalone expressions.

Compiler layer (``compiler.typing``).

The inferencer walks each function once with an explicit stack (a 10,000-deep ``let``
chain is fine), giving every node a type that may still contain incomplete types, and
records equalities with the :class:`~compiler.typing.unify.Solver`. Operator calls and
tuple projections whose inputs are not known yet become deferred constraints
(:mod:`compiler.typing.constraints`) solved in a worklist. Global functions are checked
one strongly connected component of the call graph at a time, callees first, all in one
solver: recursive and mutually recursive globals with unannotated return types share
incomplete types that the component's bodies pin down. At the end every type is
resolved; a type nothing constrains is an error naming the expression.

Polymorphism: a function with type parameters (a global ``def @map[A, B]``, a local
``fn [A](...)``, a constructor) has a polymorphic ``FuncType``. Each call instantiates
its type parameters with fresh incomplete types (recorded in ``Call.type_args``), and so
does every other use of a polymorphic value (passing ``@id`` as an argument), except
binding it with ``let``, which keeps it polymorphic. Inside the function its type
parameters are rigid. A polymorphic global used at a different instance inside its own
recursive group needs full annotations (as in ML).

See :mod:`compiler.typing.unify` for how tensor types with ``?`` dimensions unify.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from functools import partial

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
    Node,
    Op,
    PatternConstructor,
    PatternTuple,
    PatternVar,
    PatternWildcard,
    Tuple,
    TupleGetItem,
    Var,
)
from compiler.ir.module import IRModule
from compiler.ir.types import (
    FuncType,
    GlobalTypeVar,
    IncompleteType,
    TensorType,
    TupleType,
    Type,
    TypeData,
    TypeVar,
)
from compiler.ir.visitor import ExprMutator
from compiler.op.registry import get_def
from compiler.typing.callgraph import call_graph_components
from compiler.typing.constraints import Constraint, OpConstraint, ProjectionConstraint
from compiler.typing.display import expr_text, type_text, where
from compiler.typing.errors import RelayTypeError
from compiler.typing.typeops import adt_type, has_incomplete
from compiler.typing.unify import Mismatch, Solver
from compiler.typing.wellformed import check_type_definitions, type_problem

__all__ = ["RelayTypeError", "infer_expr", "infer_types"]

_BOOL_SCALAR = TensorType((), "bool")
#: Re-evaluation rounds of solved constraints; joins toward ``?`` settle in one or two.
_MAX_REFRESH_ROUNDS = 50

Action = Callable[[Node], None]


class _Inferencer:
    """One inference run: node types, signatures, scopes and deferred constraints."""

    def __init__(self, type_defs: dict[GlobalTypeVar, TypeData]) -> None:
        self.solver = Solver()
        self.type_defs = type_defs
        self.types: dict[int, Type] = {}
        self.order: list[Expr] = []
        self.sigs: dict[int, FuncType] = {}
        self.global_sigs: dict[str, FuncType] = {}
        self.ctor_types: dict[int, FuncType] = {}
        self.instantiations: list[tuple[Call, list[IncompleteType]]] = []
        self.scope: dict[TypeVar, int] = {}
        self.constraints: list[Constraint] = []
        self.pending: list[Constraint] = []
        self.context: str | None = None
        self.allow_free_vars = True
        self.recursive_lets: set[int] = set()

    # --- helpers ------------------------------------------------------------------------------

    def _at(self, *nodes: Node | None) -> str:
        """The position of the first of ``nodes`` with a span.

        A variable's span is where it was bound, not where it is used, so a variable is
        only the position of last resort.
        """
        spans = [n for n in nodes if n is not None and n.span is not None]
        for node in spans:
            if not isinstance(node, Var):
                return where(node)
        return where(spans[0]) if spans else where(None, self.context)

    def _set(self, node: Expr, ty: Type) -> None:
        self.types[id(node)] = ty
        self.order.append(node)

    def _use(self, node: Expr) -> Type:
        """The type a consumer of ``node`` sees: polymorphic functions are instantiated."""
        t = self.types[id(node)]
        s = self.solver.shallow(t)
        if isinstance(s, FuncType) and s.type_params:
            return self.solver.instantiate(s)[0]
        return t

    def _flow(self, expected: Type, node: Expr) -> Type:
        """``node``'s type as checked against ``expected`` (kept polymorphic if that is)."""
        s = self.solver.shallow(expected)
        if isinstance(s, FuncType) and s.type_params:
            return self.types[id(node)]
        return self._use(node)

    def _unify(
        self,
        expected: Type,
        found: Type,
        node: Node,
        phrase: Callable[[], str] | None = None,
        note: str = "",
        parent: Node | None = None,
    ) -> Type:
        """Unify, or raise a :class:`RelayTypeError` about ``node``.

        ``phrase`` describes where the mismatch is; it is a callable so that the text
        (which prints expressions) is only built when there is an error.
        """
        try:
            return self.solver.unify(expected, found)
        except Mismatch as exc:
            zexp, zfound = self.solver.zonk(expected), self.solver.zonk(found)
            e, f = type_text(zexp), type_text(zfound)
            detail = "" if exc.detail == f"{e} vs {f}" else f" ({exc.detail})"
            where_text = phrase() if phrase is not None else f"`{expr_text(node)}`"
            if isinstance(node, Constructor) and not node.inputs and not isinstance(zexp, FuncType):
                # As in TVM, a constructor is a function even without fields; only the text
                # format's bare name means the applied constructor.
                detail += (
                    f"; the constructor itself is a function even without fields: write "
                    f"`{node.name_hint}` or `{node.name_hint}()` in text, or call it, for its value"
                )
            raise RelayTypeError(
                f"type mismatch{self._at(node, parent)} in {where_text}: expected {e}{note}, "
                f"found {f}{detail}",
                node,
                zexp,
                zfound,
            ) from None

    def _push_scope(self, params: tuple[TypeVar, ...]) -> None:
        for tv in params:
            self.scope[tv] = self.scope.get(tv, 0) + 1

    def _pop_scope(self, params: tuple[TypeVar, ...]) -> None:
        for tv in params:
            count = self.scope[tv] - 1
            if count:
                self.scope[tv] = count
            else:
                del self.scope[tv]

    def _check_annotation(self, ty: Type, node: Node, what: Callable[[], str]) -> None:
        problem = type_problem(ty, self.scope, self.type_defs)
        if problem is not None:
            raise RelayTypeError(
                f"ill-formed type{self._at(node)} in {what()}: {problem}", node, None, ty
            )

    def _make_sig(self, func: Function) -> FuncType:
        """The declared type of ``func``, with fresh incomplete types where unannotated."""
        self._push_scope(func.type_params)
        try:
            params: list[Type] = []
            for p in func.params:
                if p.type_annotation is None:
                    params.append(IncompleteType())
                else:
                    self._check_annotation(
                        p.type_annotation,
                        p,
                        lambda p=p: (
                            f"the annotation of parameter %{p.name_hint} of `{expr_text(func)}`"
                        ),
                    )
                    params.append(p.type_annotation)
            if func.ret_type is None:
                ret: Type = IncompleteType()
            else:
                self._check_annotation(
                    func.ret_type, func, lambda: f"the return type of `{expr_text(func)}`"
                )
                ret = func.ret_type
        finally:
            self._pop_scope(func.type_params)
        sig = FuncType(params, ret, func.type_params)
        self.sigs[id(func)] = sig
        return sig

    def _ctor_type(self, ctor: Constructor, user: Node) -> FuncType:
        cached = self.ctor_types.get(id(ctor))
        if cached is not None:
            return cached
        data = self.type_defs.get(ctor.belong_to)
        if data is None or not any(c is ctor for c in data.constructors):
            raise RelayTypeError(
                f"unknown constructor{self._at(user, ctor)} in `{expr_text(user)}`: "
                f"{ctor.name_hint} belongs to type {ctor.belong_to.name_hint}, which is not "
                "defined in the module (add the type definition to the module)",
                user,
            )
        ft = FuncType(ctor.inputs, adt_type(data.header, data.type_vars), data.type_vars)
        self.ctor_types[id(ctor)] = ft
        return ft

    # --- the walk -----------------------------------------------------------------------------

    def check(self, root: Expr) -> None:
        """Type ``root`` and everything under it (iteratively)."""
        stack: list[tuple[Action | None, Node]] = [(None, root)]
        while stack:
            action, node = stack.pop()
            if action is not None:
                action(node)
            elif id(node) not in self.types:
                self._enter(node, stack)

    def _enter(self, node: Node, stack: list[tuple[Action | None, Node]]) -> None:
        if isinstance(node, Var):
            self._free_var(node)
        elif isinstance(node, GlobalVar):
            sig = self.global_sigs.get(node.name_hint)
            if sig is None:
                raise RelayTypeError(
                    f"unknown global function{self._at(node)}: @{node.name_hint} is not "
                    "defined in the module",
                    node,
                )
            self._set(node, sig)
        elif isinstance(node, Constant):
            self._set(node, TensorType(node.data.shape, node.data.dtype))
        elif isinstance(node, Constructor):
            self._set(node, self._ctor_type(node, node))
        elif isinstance(node, Op):
            raise RelayTypeError(
                f"operator {node.name} is used as a value{self._at(node)}: operators can only "
                "be called directly; wrap it in a function to pass it around",
                node,
            )
        elif isinstance(node, Call):
            stack.append((self._exit_call, node))
            stack.extend((None, a) for a in reversed(node.args))
            if not isinstance(node.op, Op):
                stack.append((None, node.op))
        elif isinstance(node, Tuple):
            stack.append((self._exit_tuple, node))
            stack.extend((None, f) for f in reversed(node.fields))
        elif isinstance(node, TupleGetItem):
            stack.append((self._exit_projection, node))
            stack.append((None, node.tuple_value))
        elif isinstance(node, Let):
            if isinstance(node.value, Function):
                self._declare_recursive_let(node)
            stack.append((self._exit_let, node))
            stack.append((None, node.body))
            stack.append((self._bind_let, node))
            stack.append((None, node.value))
        elif isinstance(node, If):
            stack.append((self._exit_if, node))
            stack.append((None, node.false_branch))
            stack.append((None, node.true_branch))
            stack.append((None, node.cond))
        elif isinstance(node, Function):
            self._enter_function(node)
            stack.append((self._exit_function, node))
            stack.append((None, node.body))
        elif isinstance(node, Match):
            stack.append((self._exit_match, node))
            for clause in reversed(node.clauses):
                stack.append((None, clause.rhs))
                stack.append((partial(self._bind_clause, node), clause))
            stack.append((None, node.data))
        else:
            raise TypeError(f"not a Relay expression: {type(node).__name__}")

    def _free_var(self, var: Var) -> None:
        if not self.allow_free_vars:
            raise RelayTypeError(
                f"free variable{self._at(var)}: %{var.name_hint} is not bound by an enclosing "
                "function, let or match clause",
                var,
            )
        ann = var.type_annotation
        if ann is not None:
            self._check_annotation(ann, var, lambda: f"the annotation of %{var.name_hint}")
        self._set(var, ann if ann is not None else IncompleteType())

    # functions -----------------------------------------------------------------------------------

    def _enter_function(self, func: Function) -> None:
        sig = self.sigs.get(id(func))
        if sig is None:
            sig = self._make_sig(func)
        self._push_scope(func.type_params)
        for p, t in zip(func.params, sig.arg_types):
            self._set(p, t)

    def _exit_function(self, func: Function) -> None:
        sig = self.sigs[id(func)]
        self._unify(
            sig.ret_type,
            self._flow(sig.ret_type, func.body),
            func.body,
            lambda: f"the body of `{expr_text(func)}`",
            " (the return type)",
            func,
        )
        self._pop_scope(func.type_params)
        self._set(func, sig)

    # let -----------------------------------------------------------------------------------------

    def _declare_recursive_let(self, let: Let) -> None:
        # A let-bound function may call itself: its variable is in scope in its own body.
        func = let.value
        assert isinstance(func, Function)
        var = let.var
        if id(var) in self.types:
            return  # typed already: _bind_let unifies it with the value
        self.recursive_lets.add(id(let))
        sig = self.sigs.get(id(func)) or self._make_sig(func)
        if var.type_annotation is not None:
            self._check_annotation(
                var.type_annotation, var, lambda: f"the annotation of %{var.name_hint}"
            )
            self._unify(
                var.type_annotation, sig, func, lambda: f"the value of %{var.name_hint} in a `let`"
            )
            self._set(var, var.type_annotation)
        else:
            self._set(var, sig)

    def _bind_let(self, let: Let) -> None:
        var = let.var
        if id(let) in self.recursive_lets:  # the variable was declared before its value
            return
        if id(var) in self.types:
            # The same variable object bound twice (or used before its let in a standalone
            # expression): every binding must agree with the type it already has.
            self._unify(
                self.types[id(var)],
                self._flow(self.types[id(var)], let.value),
                let.value,
                lambda: f"the value of %{var.name_hint} in `{expr_text(let)}`",
                f" (the type %{var.name_hint} already has)",
                let,
            )
            return
        ann = var.type_annotation
        if ann is None:
            self._set(var, self.types[id(let.value)])
            return
        self._check_annotation(ann, var, lambda: f"the annotation of %{var.name_hint}")
        self._unify(
            ann,
            self._flow(ann, let.value),
            let.value,
            lambda: f"the value of %{var.name_hint} in `{expr_text(let)}`",
            f" (the annotation of %{var.name_hint})",
            let,
        )
        self._set(var, ann)

    def _exit_let(self, let: Let) -> None:
        self._set(let, self.types[id(let.body)])

    # tuples --------------------------------------------------------------------------------------

    def _exit_tuple(self, node: Tuple) -> None:
        self._set(node, TupleType([self._use(f) for f in node.fields]))

    def _exit_projection(self, node: TupleGetItem) -> None:
        c = ProjectionConstraint(node, self._use(node.tuple_value), self.context)
        self._add_constraint(c)
        self._set(node, c.result)

    def _add_constraint(self, c: Constraint) -> None:
        self.constraints.append(c)
        if c.ready(self.solver):
            c.solve(self.solver)
        else:
            self.pending.append(c)

    # if ------------------------------------------------------------------------------------------

    def _exit_if(self, node: If) -> None:
        self._unify(
            _BOOL_SCALAR,
            self._use(node.cond),
            node.cond,
            lambda: f"the condition of `{expr_text(node)}`",
            " (a bool scalar)",
            node,
        )
        joined = self._unify(
            self._use(node.true_branch),
            self._use(node.false_branch),
            node.false_branch,
            lambda: f"the false branch of `{expr_text(node)}`",
            " (the type of the true branch)",
            node,
        )
        self._set(node, joined)

    # calls ---------------------------------------------------------------------------------------

    def _exit_call(self, call: Call) -> None:
        if isinstance(call.op, Op):
            self._op_call(call)
            return
        callee_t = self.types[id(call.op)]
        ft = self.solver.shallow(callee_t)
        at = self._at(call)
        if isinstance(ft, IncompleteType):
            # An unknown callee (an unannotated parameter): it is a function of these arguments.
            ret = IncompleteType()
            self._unify(
                callee_t,
                FuncType([self._use(a) for a in call.args], ret),
                call.op,
                lambda: f"the callee of `{expr_text(call)}`",
                parent=call,
            )
            self._set(call, ret)
            return
        if not isinstance(ft, FuncType):
            raise RelayTypeError(
                f"cannot call a non-function{at} in `{expr_text(call)}`: the callee "
                f"`{expr_text(call.op)}` has type {type_text(self.solver.zonk(ft))}, "
                "expected a function",
                call,
                None,
                self.solver.zonk(ft),
            )
        declared = ft
        if ft.type_params:
            inst, fresh = self.solver.instantiate(ft)
            self._explicit_type_args(call, ft, fresh)
            self.instantiations.append((call, fresh))
            ft = inst
        elif call.type_args:
            # Left over from an earlier version of the program: the callee is monomorphic now.
            self.instantiations.append((call, []))
        if len(call.args) != len(ft.arg_types):
            n = len(ft.arg_types)
            raise RelayTypeError(
                f"wrong number of arguments{at} in `{expr_text(call)}`: the callee "
                f"`{expr_text(call.op)}` has type {type_text(self.solver.zonk(declared))}, "
                f"expected {n} argument{'s' if n != 1 else ''}, found {len(call.args)}",
                call,
            )
        for i, (param_t, arg) in enumerate(zip(ft.arg_types, call.args)):
            self._unify(
                param_t,
                self._flow(param_t, arg),
                arg,
                lambda i=i: f"argument {i} of `{expr_text(call)}`",
                parent=call,
            )
        self._set(call, ft.ret_type)

    def _explicit_type_args(self, call: Call, ft: FuncType, fresh: list[IncompleteType]) -> None:
        # Type arguments already on the call (written by hand or by an earlier inference)
        # must agree with this instantiation.
        if not call.type_args:
            return
        if len(call.type_args) != len(fresh):
            raise RelayTypeError(
                f"wrong number of type arguments{self._at(call)} in `{expr_text(call)}`: "
                f"the callee has type {type_text(ft)}, expected {len(fresh)}, "
                f"found {len(call.type_args)}",
                call,
            )
        for given, var in zip(call.type_args, fresh):
            what = lambda: f"the type arguments of `{expr_text(call)}`"  # noqa: E731
            self._check_annotation(given, call, what)
            self._unify(var, given, call, what)

    def _op_call(self, call: Call) -> None:
        assert isinstance(call.op, Op)
        at = self._at(call)
        try:
            opdef = get_def(call.op.name)
        except ValueError as exc:
            raise RelayTypeError(f"{exc}{at} in `{expr_text(call)}`", call) from None
        if len(call.args) != opdef.num_inputs:
            n = opdef.num_inputs
            raise RelayTypeError(
                f"wrong number of arguments{at} in `{expr_text(call)}`: operator "
                f"{opdef.name} expects {n} argument{'s' if n != 1 else ''}, "
                f"found {len(call.args)}",
                call,
            )
        try:
            attrs = opdef.normalize_attrs(call.attrs)
        except TypeError as exc:
            raise RelayTypeError(
                f"invalid attributes{at} in `{expr_text(call)}`: {exc}", call
            ) from None
        c = OpConstraint(call, opdef, attrs, [self._use(a) for a in call.args], self.context)
        self._add_constraint(c)
        self._set(call, c.result)

    # match ---------------------------------------------------------------------------------------

    def _bind_clause(self, match: Match, clause: Node) -> None:
        assert isinstance(clause, Clause)
        work: list[tuple[Node, Type]] = [(clause.lhs, self._use(match.data))]
        while work:
            pat, t = work.pop()
            if isinstance(pat, PatternWildcard):
                continue
            if isinstance(pat, PatternVar):
                var = pat.var
                ann = var.type_annotation
                if ann is None:
                    self._set(var, t)
                else:
                    name = var.name_hint
                    self._check_annotation(ann, var, lambda n=name: f"the annotation of %{n}")
                    self._unify(ann, t, pat, lambda n=name: f"the pattern variable %{n}")
                    self._set(var, ann)
            elif isinstance(pat, PatternConstructor):
                work.extend(self._constructor_pattern(match, clause, pat, t))
            elif isinstance(pat, PatternTuple):
                work.extend(self._tuple_pattern(match, clause, pat, t))
            else:
                raise TypeError(f"not a Relay pattern: {type(pat).__name__}")

    def _pattern_phrase(self, match: Match, pat: Node) -> str:
        return f"the pattern `{expr_text(pat)}` of `{expr_text(match)}`"

    def _constructor_pattern(
        self, match: Match, clause: Clause, pat: PatternConstructor, t: Type
    ) -> list[tuple[Node, Type]]:
        ctor = pat.constructor
        ft = self._ctor_type(ctor, pat)
        if ft.type_params:
            ft = self.solver.instantiate(ft)[0]
        self._unify(
            t,
            ft.ret_type,
            pat,
            lambda: self._pattern_phrase(match, pat),
            " (the type of the matched value)",
            clause,
        )
        if len(pat.patterns) != len(ft.arg_types):
            n = len(ft.arg_types)
            raise RelayTypeError(
                f"wrong number of fields{self._at(pat, clause, match)} in "
                f"{self._pattern_phrase(match, pat)}: constructor {ctor.name_hint} has "
                f"{n} field{'s' if n != 1 else ''}, found {len(pat.patterns)} sub-patterns",
                pat,
            )
        return list(zip(pat.patterns, ft.arg_types))[::-1]

    def _tuple_pattern(
        self, match: Match, clause: Clause, pat: PatternTuple, t: Type
    ) -> list[tuple[Node, Type]]:
        s = self.solver.shallow(t)
        n = len(pat.patterns)
        if isinstance(s, IncompleteType):
            fields: tuple[Type, ...] = tuple(IncompleteType() for _ in range(n))
            self._unify(t, TupleType(fields), pat, lambda: self._pattern_phrase(match, pat))
        elif isinstance(s, TupleType) and len(s.fields) == n:
            fields = s.fields
        else:
            found = type_text(self.solver.zonk(s))
            raise RelayTypeError(
                f"type mismatch{self._at(pat, clause, match)} in "
                f"{self._pattern_phrase(match, pat)}: the pattern matches a tuple of {n} "
                f"field{'s' if n != 1 else ''}, found a value of type {found}",
                pat,
                None,
                self.solver.zonk(s),
            )
        return list(zip(pat.patterns, fields))[::-1]

    def _exit_match(self, match: Match) -> None:
        if not match.clauses:
            raise RelayTypeError(
                f"empty match{self._at(match)} in `{expr_text(match)}`: a match needs at "
                "least one clause",
                match,
            )
        result = self._use(match.clauses[0].rhs)
        for i, clause in enumerate(match.clauses[1:], start=1):
            result = self._unify(
                result,
                self._use(clause.rhs),
                clause.rhs,
                lambda i=i: f"clause {i} of `{expr_text(match)}`",
                " (the type of the earlier clauses)",
                clause,
            )
        self._set(match, result)

    # --- modules and solving ------------------------------------------------------------------

    def declare_globals(self, funcs: dict[GlobalVar, Function]) -> None:
        """Give every global function its declared signature before any body is checked."""
        for gv, func in funcs.items():
            self.context = "@" + gv.name_hint
            self.global_sigs[gv.name_hint] = self._make_sig(func)
        self.context = None

    def check_globals(self, funcs: dict[GlobalVar, Function]) -> None:
        """Check the bodies of ``funcs``, callees before callers."""
        self.allow_free_vars = False
        for component in call_graph_components(funcs):
            for gv in component:
                self.context = "@" + gv.name_hint
                self.check(funcs[gv])
            self.context = None
            self.solve_pending()
        self.allow_free_vars = True

    def solve_pending(self) -> None:
        """Solve deferred constraints until none makes progress."""
        progress = True
        while progress and self.pending:
            progress = False
            still: list[Constraint] = []
            for c in self.pending:
                if c.ready(self.solver):
                    c.solve(self.solver)
                    progress = True
                else:
                    still.append(c)
            self.pending = still

    def finish(self) -> None:
        """Solve everything, report what stays unknown, and set ``checked_type`` on each node."""
        self.solve_pending()
        if self.pending:
            raise self.pending[0].unresolved_error(self.solver)
        # Re-run solved constraints whose inputs became more general (a dimension found to
        # be ``?`` after an operator was typed) until nothing moves; joins only add ``?``.
        for _ in range(_MAX_REFRESH_ROUNDS):
            changed = False
            for c in self.constraints:
                if c.refresh(self.solver):
                    changed = True
            if not changed:
                break
        zonk = self.solver.zonk
        for node in self.order:
            t = zonk(self.types[id(node)])
            if has_incomplete(t):
                raise self._unresolved(node, t)
            node._checked_type = t
        for call, fresh in self.instantiations:
            args = tuple(zonk(t) for t in fresh)
            if any(has_incomplete(a) for a in args):
                raise self._unresolved(call, zonk(self.types[id(call)]))
            call.type_args = args

    def _unresolved(self, node: Expr, partial_type: Type) -> RelayTypeError:
        if isinstance(partial_type, IncompleteType):
            known = "nothing in the program constrains it"
        else:
            known = f"it is only known to be {type_text(partial_type)}"
        return RelayTypeError(
            f"cannot infer the type of `{expr_text(node)}`{self._at(node)}: {known}; "
            "add a type annotation",
            node,
        )

    def fill_annotations(self) -> None:
        """Write inferred parameter and return types into unannotated functions."""
        for node in self.order:
            if isinstance(node, Function):
                sig = node.checked_type
                assert isinstance(sig, FuncType)
                for p, t in zip(node.params, sig.arg_types):
                    if p.type_annotation is None:
                        p.type_annotation = t
                if node.ret_type is None:
                    node.ret_type = sig.ret_type


class _FreshCopy(ExprMutator):
    """A copy of a function with new nodes (and new variables) for inference to annotate.

    Globals, constructors, operators and constants are shared: their types do not depend
    on where they appear (a constant's type is its data's).
    """

    _SHARED = (GlobalVar, Constructor, Op, Constant, PatternWildcard)

    def rewrite(self, old: Node, new: Node) -> Node:
        if isinstance(old, Var):
            var = Var(old.name_hint, old.type_annotation)
            var.span = old.span
            return var
        if new is old and not isinstance(old, self._SHARED):
            new = copy.copy(old)
        if isinstance(new, Expr) and not isinstance(old, self._SHARED):
            new._checked_type = None
        return new


def infer_types(mod: IRModule) -> IRModule:
    """Type-check every function of ``mod`` and return a typed copy.

    Parameters
    ----------
    mod : IRModule
        The module; it is not modified (its functions are copied before annotation).

    Returns
    -------
    IRModule
        A new module with the same global variables and type definitions, in which every
        expression node reachable from every function has ``checked_type`` set (operator
        nodes excepted: they are shared registry objects whose type depends on the call),
        calls of polymorphic functions and constructors have ``type_args``, and every
        function's parameter annotations and return type are filled in.

    Raises
    ------
    RelayTypeError
        If the program is ill-typed, naming the expression, its position, the expected
        and the found type.
    """
    check_type_definitions(mod.type_definitions)
    funcs = {gv: _FreshCopy().visit(func) for gv, func in mod.functions.items()}
    inf = _Inferencer(mod.type_definitions)
    inf.declare_globals(funcs)
    inf.check_globals(funcs)
    inf.finish()
    inf.fill_annotations()
    out = mod.copy()
    for gv, func in funcs.items():
        gv._checked_type = func.checked_type
        out[gv] = func
    return out


def infer_expr(expr: Expr, mod: IRModule | None = None) -> Type:
    """Type-check a standalone expression and return its type.

    Parameters
    ----------
    expr : Expr
        The expression. Its free variables are allowed (typed from their annotations or
        from their uses). Its nodes get ``checked_type`` set in place, and its calls of
        polymorphic functions get ``type_args``; annotations are not changed.
    mod : IRModule, optional
        The module defining the global functions and ADTs the expression uses. Functions
        that already carry a checked type (from :func:`infer_types`) are not re-checked.

    Returns
    -------
    Type
        The fully resolved type of ``expr``.

    Raises
    ------
    RelayTypeError
        If the expression (or the module) is ill-typed.
    """
    type_defs = mod.type_definitions if mod is not None else {}
    inf = _Inferencer(type_defs)
    if mod is not None:
        check_type_definitions(type_defs)
        sigs = _checked_signatures(mod)
        if sigs is None:
            sigs = _checked_signatures(infer_types(mod))
            assert sigs is not None
        inf.global_sigs.update(sigs)
    inf.check(expr)
    inf.finish()
    return expr.checked_type


def _checked_signatures(mod: IRModule) -> dict[str, FuncType] | None:
    """Every global's checked type, or ``None`` if some function has not been typed."""
    sigs: dict[str, FuncType] = {}
    for gv, func in mod.functions.items():
        t = func._checked_type
        if not isinstance(t, FuncType) or has_incomplete(t):
            return None
        sigs[gv.name_hint] = t
    return sigs
