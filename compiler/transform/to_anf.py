"""A-normal form: every non-atomic sub-expression is bound by a ``let``.

Compiler layer (``compiler.transform``).

After this pass a function body is a chain of ``let`` bindings ending in an atom, and
every call, tuple, projection, ``if`` and ``match`` operates on atoms only, so each value
the code generator meets already has a variable (a register). Atoms are variables,
global variables, constants, operators and constructors. The branches of ``if``, the
clause bodies of ``match`` and function bodies are separate scopes: bindings made for
them stay inside them, so nothing is evaluated that the original program would not
evaluate. Primitive functions are kept in callee position untouched (their bodies are
kernels, not VM code). A sub-expression shared by several parents is bound once where
it is visible and its variable reused. Recursive local functions keep their own ``let``.

The conversion is a loop over an explicit task stack, so a 10,000-deep ``let`` chain or
call nest needs no Python recursion.
"""

from __future__ import annotations

from typing import Any

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
from compiler.ir.module import IRModule
from compiler.ir.visitor import rebuild
from compiler.transform.pass_manager import Pass, PassContext
from compiler.transform.typed_rewrite import carry_type, is_primitive, known_type, with_type

ATOMS = (Var, GlobalVar, Constant, Op, Constructor)


def is_atom(expr: Expr) -> bool:
    """Whether ``expr`` needs no binding: a variable, global, constant, operator or constructor."""
    return isinstance(expr, ATOMS)


def to_anf(mod: IRModule) -> IRModule:
    """Convert every function of ``mod`` to A-normal form.

    Parameters
    ----------
    mod : IRModule
        The module; it is not modified.

    Returns
    -------
    IRModule
        A new module with the same globals, each function body in A-normal form.
    """
    out = mod.copy()
    for gvar, func in mod.functions.items():
        out[gvar] = to_anf_expr(func)
    return out


def to_anf_expr(expr: Expr) -> Expr:
    """Convert one expression to A-normal form.

    A function is returned as a function with an A-normal body; any other expression
    becomes a ``let`` chain ending in an atom.
    """
    if is_primitive(expr):
        return expr
    return _Normalizer().run(expr)


# Task kinds of the normalizer's machine. Each task is a tuple whose first item is its kind.
_NORM = 0  # (kind, expr): normalize to an atom in the current scope; push the atom
_VALUE = 1  # (kind, expr): normalize to a bindable value; push it
_BIND_LET = 2  # (kind, let): pop a value, bind it to let.var in the current scope
_BIND_FRESH = 3  # (kind, expr): pop a value, bind it to a fresh variable; push the variable
_BUILD = 4  # (kind, expr, count): pop count normalized children, rebuild expr; push it
_OPEN = 5  # (kind,): open a scope
_CLOSE = 6  # (kind, expr): pop an atom, wrap the scope's bindings around it; push the block
_REMEMBER = 7  # (kind, expr): the atom on top of the results stands for expr in this scope


def _block(expr: Expr) -> tuple[tuple[Any, ...], ...]:
    """The tasks normalizing ``expr`` in a scope of its own; together they push one block."""
    return ((_OPEN,), (_NORM, expr), (_CLOSE, expr))


class _Scope:
    __slots__ = ("bindings", "key")

    def __init__(self, key: int) -> None:
        self.key = key
        self.bindings: list[tuple[Var, Expr, Expr]] = []  # (var, value, original expr)


class _Normalizer:
    def __init__(self) -> None:
        self.tasks: list[tuple[Any, ...]] = []
        self.results: list[Expr] = []
        self.scopes: list[_Scope] = []
        self.open_keys: set[int] = set()
        self.next_key = 0
        # id(original expr) -> (variable bound to it, key of the scope binding it)
        self.memo: dict[int, tuple[Var, int]] = {}
        self.fresh_count = 0

    def run(self, expr: Expr) -> Expr:
        # A function stays a function (with a normalized body); anything else becomes a block.
        self._push(*(((_VALUE, expr),) if isinstance(expr, Function) else _block(expr)))
        tasks, handlers = self.tasks, self._handlers()
        while tasks:
            task = tasks.pop()
            handlers[task[0]](task)
        assert len(self.results) == 1
        return self.results.pop()

    def _handlers(self) -> list:  # type: ignore[type-arg]
        return [
            self._norm,
            self._value,
            self._bind_let,
            self._bind_fresh,
            self._build,
            self._open,
            self._close,
            self._remember,
        ]

    # One push per task: tasks are pushed in reverse so they run in the order written.
    def _push(self, *tasks: tuple[Any, ...]) -> None:
        self.tasks.extend(reversed(tasks))

    def _norm(self, task: tuple[Any, ...]) -> None:
        expr = task[1]
        if is_atom(expr):
            self.results.append(expr)
            return
        found = self.memo.get(id(expr))
        if found is not None and found[1] in self.open_keys:
            self.results.append(found[0])
            return
        if isinstance(expr, Let):
            # Remembered so that a let shared by two parents binds its variable once.
            self._push(
                (_VALUE, expr.value), (_BIND_LET, expr), (_NORM, expr.body), (_REMEMBER, expr)
            )
        else:
            self._push((_VALUE, expr), (_BIND_FRESH, expr))

    def _value(self, task: tuple[Any, ...]) -> None:
        expr = task[1]
        if is_atom(expr) or is_primitive(expr):
            self.results.append(expr)
        elif isinstance(expr, Let):
            self._push((_VALUE, expr.value), (_BIND_LET, expr), (_VALUE, expr.body))
        elif isinstance(expr, Call):
            op = expr.op
            # A callee that is an atom or a primitive function stays in place.
            callee = () if is_atom(op) or is_primitive(op) else ((_NORM, op),)
            args = tuple((_NORM, a) for a in expr.args)
            self._push(*callee, *args, (_BUILD, expr, len(callee) + len(args)))
        elif isinstance(expr, Tuple):
            fields = tuple((_NORM, f) for f in expr.fields)
            self._push(*fields, (_BUILD, expr, len(fields)))
        elif isinstance(expr, TupleGetItem):
            self._push((_NORM, expr.tuple_value), (_BUILD, expr, 1))
        elif isinstance(expr, If):
            branches = (*_block(expr.true_branch), *_block(expr.false_branch))
            self._push((_NORM, expr.cond), *branches, (_BUILD, expr, 3))
        elif isinstance(expr, Match):
            bodies = tuple(task for c in expr.clauses for task in _block(c.rhs))
            self._push((_NORM, expr.data), *bodies, (_BUILD, expr, 1 + len(expr.clauses)))
        elif isinstance(expr, Function):
            self._push(*_block(expr.body), (_BUILD, expr, 1))
        else:
            raise TypeError(f"A-normal form: unexpected node {type(expr).__name__}")

    def _bind_let(self, task: tuple[Any, ...]) -> None:
        let: Let = task[1]
        value = self.results.pop()
        self.scopes[-1].bindings.append((let.var, value, let))

    def _bind_fresh(self, task: tuple[Any, ...]) -> None:
        expr: Expr = task[1]
        value = self.results.pop()
        if is_atom(value):
            self.results.append(value)
            return
        var = Var(f"x{self.fresh_count}")
        self.fresh_count += 1
        with_type(var, known_type(expr))
        scope = self.scopes[-1]
        scope.bindings.append((var, value, expr))
        self.memo[id(expr)] = (var, scope.key)
        self.results.append(var)

    def _build(self, task: tuple[Any, ...]) -> None:
        expr: Expr = task[1]
        count: int = task[2]
        if count:
            parts = self.results[-count:]
            del self.results[-count:]
        else:
            parts = []
        new: Expr
        if isinstance(expr, Call):
            kids = tuple(parts) if len(parts) == len(expr.args) + 1 else (expr.op, *parts)
            new = rebuild(expr, kids)  # type: ignore[assignment]
        elif isinstance(expr, Tuple | TupleGetItem | If):
            new = rebuild(expr, tuple(parts))  # type: ignore[assignment]
        elif isinstance(expr, Match):
            clauses = tuple(
                c if c.rhs is rhs else _clause(c, rhs) for c, rhs in zip(expr.clauses, parts[1:])
            )
            new = rebuild(expr, (parts[0], *clauses))  # type: ignore[assignment]
        else:
            assert isinstance(expr, Function)
            new = rebuild(expr, (*expr.params, parts[0]))  # type: ignore[assignment]
        self.results.append(carry_type(expr, new))  # type: ignore[arg-type]

    def _open(self, task: tuple[Any, ...]) -> None:
        scope = _Scope(self.next_key)
        self.next_key += 1
        self.scopes.append(scope)
        self.open_keys.add(scope.key)

    def _close(self, task: tuple[Any, ...]) -> None:
        original: Expr = task[1]
        body = self.results.pop()
        scope = self.scopes.pop()
        self.open_keys.discard(scope.key)
        ty = known_type(original)
        for var, value, origin in reversed(scope.bindings):
            let = Let(var, value, body)
            if isinstance(origin, Let):
                let.span = origin.span
            body = with_type(let, ty)
        self.results.append(body)

    def _remember(self, task: tuple[Any, ...]) -> None:
        self.memo[id(task[1])] = (self.results[-1], self.scopes[-1].key)  # type: ignore[assignment]


def _clause(clause: Clause, rhs: Expr) -> Clause:
    new = Clause(clause.lhs, rhs)
    new.span = clause.span
    return new


class ToANormalForm(Pass):
    """Bind every non-atomic sub-expression with a ``let`` (TVM's ``ToANormalForm``,
    ``opt_level=1``). See :mod:`compiler.transform.to_anf`."""

    def __init__(self) -> None:
        super().__init__("ToANormalForm", opt_level=1)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return to_anf(mod)

    def __repr__(self) -> str:
        return "ToANormalForm()"
