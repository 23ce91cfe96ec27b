"""Lambda lifting with closure conversion: every nested function becomes a global.

Compiler layer (``compiler.transform``).

Run it on A-normal form (where every local function is the value of a ``let``), after
type inference (captured variables are annotated with their inferred types). The output
keeps the input's types: every node it builds carries its checked type, so the code
generator can run without another round of inference.
For each local, non-primitive function, with the TVM VM's conventions:

- Without free variables it becomes an ordinary global ``@<root>_lifted_<k>`` and the
  ``let`` binding it disappears: every use of the variable (including recursive uses
  inside the function) becomes the global, so calls are direct ``Invoke`` s and a use as
  a value is a closure with nothing captured.
- With free variables ``%a, %b`` it becomes a closure-producing global marked
  ``Closure=1``::

      def @main_lifted_0(%a, %b, Closure=1) { fn (%x) { ... } }

  and the function value becomes the call ``@main_lifted_0(%a, %b)``, which the code
  generator compiles to ``AllocClosure``; calling the closure passes the captured values
  first, then the arguments. A recursive ``let`` function refers to itself through
  ``let %f = @main_lifted_0(%a, %b)`` at the start of its own body.

Captured variables are decided outermost first, so a local function that uses only
lifted capture-free functions captures nothing. Functions are processed from a work
queue (no recursion); lifted globals are added after the existing ones, named after the
global they came from, in a deterministic order. Type variables of an enclosing
polymorphic function used by a lifted one become its type parameters.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from compiler.ir.expr import Call, Expr, Function, GlobalVar, Let, Node, Var
from compiler.ir.module import IRModule
from compiler.ir.types import FuncType, Type
from compiler.ir.visitor import ExprMutator, children, free_vars, post_order
from compiler.transform.pass_manager import Pass, PassContext
from compiler.transform.typed_rewrite import (
    carry_type,
    is_primitive,
    known_type,
    type_vars_in,
    with_type,
)
from compiler.typing import infer_types

Subst = dict[Var, Expr]


def lambda_lift(mod: IRModule) -> IRModule:
    """Lift every local non-primitive function of ``mod`` to a global.

    Parameters
    ----------
    mod : IRModule
        The module, in A-normal form and type-checked; it is not modified.

    Returns
    -------
    IRModule
        A new module without local functions (other than primitive functions).
    """
    return _Lifter(mod).run()


class _Job:
    """One function body to rewrite; ``finish`` turns the new body into the global's function.

    ``polymorphic`` says whether type variables are in scope in the body (some enclosing
    function has type parameters); only then can a lifted function need type parameters.
    """

    __slots__ = ("body", "finish", "gvar", "polymorphic", "root", "subst")

    def __init__(
        self,
        gvar: GlobalVar,
        root: str,
        body: Expr,
        subst: Subst,
        finish: Callable[[Expr], Function],
        polymorphic: bool,
    ) -> None:
        self.gvar = gvar
        self.root = root
        self.body = body
        self.subst = subst
        self.finish = finish
        self.polymorphic = polymorphic


class _Lifter:
    def __init__(self, mod: IRModule) -> None:
        self.mod = mod
        self.out = mod.copy()
        self.counters: dict[str, int] = {}
        self.jobs: deque[_Job] = deque()

    def run(self) -> IRModule:
        for gvar, func in self.mod.functions.items():
            if is_primitive(func):
                continue
            job = _Job(
                gvar, gvar.name_hint, func.body, {}, _rebuilder(func), bool(func.type_params)
            )
            self.jobs.append(job)
        while self.jobs:
            job = self.jobs.popleft()
            self.out[job.gvar] = job.finish(self._rewrite_body(job))
        return self.out

    def _fresh_global(self, root: str) -> GlobalVar:
        k = self.counters.get(root, 0)
        while f"{root}_lifted_{k}" in self.out:
            k += 1
        self.counters[root] = k + 1
        gvar = GlobalVar(f"{root}_lifted_{k}")
        # Reserve the name now; the job fills in the function.
        self.out[gvar] = Function([], gvar)
        return gvar

    def _rewrite_body(self, job: _Job) -> Expr:
        subst = dict(job.subst)
        replacement: dict[int, Expr] = {}
        dropped: set[Var] = set()
        for func, let_var in _local_functions(job.body):
            replacement[id(func)] = self._lift(job, func, let_var, subst, dropped)
        return _Rewriter(subst, replacement, dropped).visit(job.body)

    def _lift(
        self, job: _Job, func: Function, let_var: Var | None, subst: Subst, dropped: set[Var]
    ) -> Expr:
        """Queue ``func``'s lifting; returns what replaces it in the current body."""
        gvar = self._fresh_global(job.root)
        recursive = False
        captured: list[Var] = []
        for v in free_vars(func):
            if v is let_var:
                recursive = True
            elif not isinstance(subst.get(v), GlobalVar):
                captured.append(v)
        # Variables the enclosing body already maps to globals stay globals inside.
        inner: Subst = {k: e for k, e in subst.items() if isinstance(e, GlobalVar)}
        params = []
        for p in func.params:
            new_p = p if p.type_annotation is not None else _typed_var(p)
            inner[p] = new_p
            params.append(new_p)
        ret = func.ret_type
        if ret is None and func._checked_type is not None:
            ret = func._checked_type.ret_type  # type: ignore[attr-defined]
        polymorphic = job.polymorphic or bool(func.type_params)
        if not captured:
            if let_var is not None:
                # Uses after the let and recursive uses inside all name the global directly.
                subst[let_var] = gvar
                inner[let_var] = gvar
                dropped.add(let_var)
            type_params = _type_params(func, params, ret, []) if job.polymorphic else []

            def finish_plain(body: Expr) -> Function:
                own = [*type_params, *func.type_params]
                new = Function(params, body, ret, own, func.attrs)
                return _typed_function(new, func)

            self.jobs.append(_Job(gvar, job.root, func.body, inner, finish_plain, polymorphic))
            return with_type(gvar, func._checked_type)

        outer_params = []
        for v in captured:
            q = _typed_var(v)
            inner[v] = q
            outer_params.append(q)
        self_ref: Var | None = None
        if recursive:
            assert let_var is not None
            self_ref = Var(let_var.name_hint)
            with_type(self_ref, known_type(let_var))
            inner[let_var] = self_ref
        capture_types = [known_type(q) for q in outer_params]
        type_params = _type_params(func, params, ret, capture_types) if job.polymorphic else []

        def finish_closure(body: Expr) -> Function:
            if self_ref is not None:
                again = with_type(Call(gvar, outer_params), known_type(self_ref))
                body = with_type(Let(self_ref, again, body), known_type(body))
            inner_fn = _typed_function(Function(params, body, ret, func.type_params), func)
            outer = Function(outer_params, inner_fn, None, type_params, {"Closure": 1})
            inner_type = inner_fn._checked_type
            if inner_type is not None and all(t is not None for t in capture_types):
                outer._checked_type = FuncType(capture_types, inner_type, type_params)  # type: ignore[arg-type]
            return outer

        self.jobs.append(_Job(gvar, job.root, func.body, inner, finish_closure, polymorphic))
        args = [subst.get(v, v) for v in captured]
        return with_type(Call(gvar, args), func._checked_type)


def _rebuilder(func: Function) -> Callable[[Expr], Function]:
    def finish(body: Expr) -> Function:
        if body is func.body:
            return func
        new = Function(func.params, body, func.ret_type, func.type_params, func.attrs)
        new.span = func.span
        return _typed_function(new, func)

    return finish


def _typed_function(new: Function, old: Function) -> Function:
    return with_type(new, old._checked_type)  # type: ignore[return-value]


def _typed_var(v: Var) -> Var:
    ty = known_type(v)
    new = Var(v.name_hint, ty)
    with_type(new, ty)
    return new


def _type_params(
    func: Function, params: list[Var], ret: Type | None, extra: list[Type | None]
) -> list:  # type: ignore[type-arg]
    """Type variables the lifted function mentions but does not bind itself."""
    types: list[Type | None] = [*extra, *(p.type_annotation for p in params), ret]
    for node in post_order(func, descend=lambda n: not is_primitive(n)):
        if isinstance(node, Var):
            types.append(node.type_annotation)
        elif isinstance(node, Function) and node is not func:
            types.append(node.ret_type)
    own = {id(t) for t in func.type_params}
    return [tv for tv in type_vars_in(types) if id(tv) not in own]


def _local_functions(body: Expr) -> list[tuple[Function, Var | None]]:
    """Non-primitive functions in ``body`` (not inside other functions), in pre-order,
    each with the variable of the ``let`` it is the value of (None if it is not)."""
    found: list[tuple[Function, Var | None]] = []
    seen: set[int] = set()
    stack: list[tuple[Node, Var | None]] = [(body, None)]
    while stack:
        node, let_var = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, Function):
            if not is_primitive(node):
                found.append((node, let_var))
            continue
        if isinstance(node, Let):
            stack.append((node.body, None))
            stack.append((node.value, node.var))
            continue
        stack.extend((child, None) for child in reversed(children(node)))
    return found


class _Rewriter(ExprMutator):
    """Applies the substitutions and replacements decided for one body."""

    def __init__(self, subst: Subst, replacement: dict[int, Expr], dropped: set[Var]) -> None:
        super().__init__()
        self.subst = subst
        self.replacement = replacement
        self.dropped = dropped

    def descend(self, node: Node) -> bool:
        return not isinstance(node, Function)

    def rewrite(self, old: Node, new: Node) -> Node:
        if isinstance(old, Var):
            return self.subst.get(old, new)
        if isinstance(old, Function):
            return self.replacement.get(id(old), old)
        if isinstance(old, Let) and old.var in self.dropped:
            assert isinstance(new, Let)
            return new.body
        return carry_type(old, new)


class LambdaLift(Pass):
    """Lift every local function to a global, closures capturing their free variables
    (TVM's ``LambdaLift``, ``opt_level=0``). The module is type-checked first: captured
    variables are annotated with their types. See :mod:`compiler.transform.lambda_lift`."""

    def __init__(self) -> None:
        super().__init__("LambdaLift", opt_level=0)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return lambda_lift(infer_types(mod))

    def __repr__(self) -> str:
        return "LambdaLift()"
