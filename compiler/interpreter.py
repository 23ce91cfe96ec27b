"""The reference interpreter: evaluates Relay IR directly, as the oracle for every other backend.

Compiler layer. Imports ``compiler.ir``, ``compiler.op`` (operators run through their numpy
references), ``vm.errors`` and ``vm.objects`` (constructor values are
:class:`vm.objects.ADT`, so results compare directly with the VM's).

Values: a tensor is a numpy array, a tuple is a Python ``tuple``, a constructor value is an
``ADT``, and a function value is an :class:`InterpreterClosure` (a function plus the
environment it was created in) or a :class:`ConstructorValue` (a constructor used as a function).

The evaluator is a CEK-style machine: a control (the expression being evaluated, or a value
being returned), an environment, and an explicit list of continuation frames. It never
recurses in Python, so neither a 10,000-deep ``let`` chain nor a 10,000-deep recursion of the
interpreted program touches Python's stack. Calls in tail position (a ``let`` body, an ``if``
branch, a clause body, a function body) leave no frame behind, so tail recursion runs in
constant space. An operator call, tuple or projection with several users (graph form, as
the ONNX frontend writes programs) is one computation: it is evaluated once per scope and
its value kept there for the other users.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from compiler.ir.attrs import Attrs
from compiler.ir.expr import (
    Call,
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
    Pattern,
    PatternConstructor,
    PatternTuple,
    PatternVar,
    PatternWildcard,
    Span,
    Tuple,
    TupleGetItem,
    Var,
)
from compiler.ir.module import IRModule
from compiler.ir.visitor import children, post_order
from compiler.op.registry import OpDef, get_def
from compiler.transform.squeeze_axes import static_unit_axes
from compiler.transform.typed_rewrite import known_type
from vm.errors import VMError
from vm.objects import ADT

__all__ = [
    "ConstructorValue",
    "Interpreter",
    "InterpreterClosure",
    "InterpreterError",
    "describe_value",
]

#: Default bound on continuation frames; each interpreted call level uses one to three frames.
DEFAULT_MAX_FRAMES = 1_000_000


class InterpreterError(VMError):
    """A failure while evaluating a well-formed program (no clause matches, an operator fails,
    a value is used as the wrong kind, the frame limit is exceeded).

    It is a ``RuntimeError`` and, like the VM's own run-time failures, a ``vm.VMError``, so a
    test can expect the same exception from the interpreter and the VM. The interpreter stays
    usable after raising it.
    """


class Env:
    """One scope: variable bindings plus the enclosing scope.

    ``function`` names the function whose body is being evaluated, for error messages.
    ``kept`` holds the values of the shared dataflow nodes evaluated in this scope, by node id.
    """

    __slots__ = ("function", "kept", "parent", "vars")

    def __init__(self, parent: Env | None = None, function: str = "") -> None:
        self.vars: dict[Var, Any] = {}
        self.kept: dict[int, Any] = {}
        self.parent = parent
        self.function = function if function or parent is None else parent.function


_MISSING = object()


def _lookup(env: Env, var: Var) -> Any:
    scope: Env | None = env
    while scope is not None:
        value = scope.vars.get(var, _MISSING)
        if value is not _MISSING:
            return value
        scope = scope.parent
    where = f" in {env.function}" if env.function else ""
    raise InterpreterError(
        f"variable %{var.name_hint}{where}{_at(var.span)} is not bound; "
        "expected it to be a parameter, a let-bound variable or a pattern variable in scope"
    )


class InterpreterClosure:
    """A function value: a Relay function and the environment it closes over.

    Attributes
    ----------
    func : Function
        The function.
    env : Env
        The scope its free variables are looked up in.
    name : str
        The global's name for a global function (``""`` for a local function).
    """

    __slots__ = ("env", "func", "name")

    def __init__(self, func: Function, env: Env, name: str = "") -> None:
        self.func = func
        self.env = env
        self.name = name

    @property
    def arity(self) -> int:
        """The number of parameters."""
        return len(self.func.params)

    def __repr__(self) -> str:
        label = f"@{self.name}" if self.name else "a local function"
        return f"InterpreterClosure({label}, arity={self.arity})"


class ConstructorValue:
    """A constructor used as a function value (``@foldr(Cons, %ys, %xs)``); calling it builds
    the ADT value."""

    __slots__ = ("constructor",)

    def __init__(self, constructor: Constructor) -> None:
        self.constructor = constructor

    @property
    def arity(self) -> int:
        """The number of fields the constructor takes."""
        return len(self.constructor.inputs)

    def __repr__(self) -> str:
        return f"ConstructorValue({self.constructor.name_hint})"


def _at(span: Span | None) -> str:
    return f" at {span!r}" if span is not None else ""


def describe_value(value: Any) -> str:
    """A short description of a runtime value for error messages."""
    if isinstance(value, np.ndarray):
        return f"a tensor of shape {tuple(value.shape)} and dtype {value.dtype}"
    if isinstance(value, np.generic):
        return f"a scalar of dtype {value.dtype}"
    if isinstance(value, ADT):
        name = value.constructor or f"the constructor with tag {value.tag}"
        return f"a value built by constructor {name}"
    if isinstance(value, tuple):
        return f"a tuple of {len(value)} field(s)"
    if isinstance(value, InterpreterClosure):
        return f"a function of {value.arity} parameter(s)"
    if isinstance(value, ConstructorValue):
        return f"constructor {value.constructor.name_hint} used as a function"
    return f"a Python {type(value).__name__}"


def _as_value(result: object) -> Any:
    """Operator references may return numpy scalars or lists of arrays; make them values."""
    if isinstance(result, np.ndarray):
        return result
    if isinstance(result, (tuple, list)):
        return tuple(r if isinstance(r, np.ndarray) else np.asarray(r) for r in result)
    return np.asarray(result)


# Continuation frame kinds. A frame is a list whose first item is the kind.
_K_LET = 0  # [kind, let, env]: bind the value, continue with the body
_K_IF = 1  # [kind, if, env]: branch on the condition
_K_TUPLE = 2  # [kind, tuple, env, values]: collect fields
_K_PROJ = 3  # [kind, tuple_get_item]: project a field
_K_CALLEE = 4  # [kind, call, env]: the callee is evaluated; start on the arguments
_K_ARGS = 5  # [kind, call, env, callee, values]: collect arguments, then apply
_K_MATCH = 6  # [kind, match, env]: choose a clause
_K_KEEP = 7  # [kind, node, env]: remember a shared node's value in env.kept


class Interpreter:
    """Evaluates Relay expressions over a module's global functions and type definitions.

    Parameters
    ----------
    mod : IRModule
        Supplies the global functions (called through :class:`GlobalVar`) and the ADT
        definitions (constructor tags). The interpreter does not type-check; run type
        inference first if the program may be ill-typed.
    max_frames : int
        The bound on continuation frames; exceeding it raises :class:`InterpreterError`
        (runaway recursion) instead of exhausting memory.

    Examples
    --------
    >>> interp = Interpreter(mod)
    >>> interp.call("main", np.ones(3, "float32"))
    """

    def __init__(self, mod: IRModule | None = None, max_frames: int = DEFAULT_MAX_FRAMES) -> None:
        self.mod = mod if mod is not None else IRModule()
        self.max_frames = max_frames
        self._globals: dict[str, InterpreterClosure] = {}
        self._op_calls: dict[Call, tuple[OpDef, Attrs]] = {}
        self._root = Env()
        # Graph-form programs (what the ONNX frontend makes) share a node among its users;
        # it means one computation. Evaluated as a tree, an LSTM of five steps ran 2.8
        # million operators, so shared nodes are evaluated once per scope and their value
        # kept. The dict keeps the nodes alive, so their ids stay theirs.
        self._shared: dict[int, Expr] = {}
        self._scanned: dict[int, Expr] = {}

    # --- public entry points ----------------------------------------------------------------

    def evaluate(self, expr: Expr, bindings: dict[Var, Any] | None = None) -> Any:
        """Evaluate ``expr`` and return its value.

        Parameters
        ----------
        expr : Expr
            Any expression; global functions it names are looked up in the module.
        bindings : dict of Var to value, optional
            Values for ``expr``'s free variables.
        """
        env = Env(self._root)
        if bindings:
            env.vars.update(bindings)
        self._learn_sharing(expr)
        return self._run(expr, env, None, ())

    def call(
        self, func: str | GlobalVar | InterpreterClosure | ConstructorValue, *args: Any
    ) -> Any:
        """Call a global function (by name or :class:`GlobalVar`) or a function value with
        argument values (numpy arrays or scalars, tuples, ADTs, function values)."""
        # Operators take arrays: a numpy scalar becomes the 0-d array it stands for.
        args = tuple(np.asarray(a) if isinstance(a, np.generic) else a for a in args)
        if isinstance(func, str):
            func = self.global_closure(self.mod.get_global_var(func))
        elif isinstance(func, GlobalVar):
            func = self.global_closure(func)
        return self._run(None, self._root, func, args)

    def global_closure(self, gvar: GlobalVar) -> InterpreterClosure:
        """The function value of the global ``gvar``."""
        try:
            func = self.mod[gvar]
        except KeyError:
            raise InterpreterError(
                f"global function @{gvar.name_hint}{_at(gvar.span)} is not defined in the module"
            ) from None
        closure = self._globals.get(gvar.name_hint)
        # The module may have been updated since the closure was made.
        if closure is None or closure.func is not func:
            closure = InterpreterClosure(func, self._root, gvar.name_hint)
            self._globals[gvar.name_hint] = closure
            self._learn_sharing(func)
        return closure

    def _learn_sharing(self, root: Expr) -> None:
        """Note the operator calls, tuples and projections under ``root`` that have more
        than one user. Function calls are left out: one in tail position leaves no frame
        to keep its value in, which is what lets tail recursion run in constant space."""
        if id(root) in self._scanned:
            return
        users: dict[int, int] = {}
        nodes: dict[int, Node] = {}
        for node in post_order(root):
            for child in children(node):
                users[id(child)] = users.get(id(child), 0) + 1
                nodes[id(child)] = child
        for key, count in users.items():
            node = nodes[key]
            if count > 1 and (
                type(node) in (Tuple, TupleGetItem)
                or (type(node) is Call and type(node.op) in (Op, Constructor))
            ):
                self._shared[key] = node
        self._scanned[id(root)] = root

    # --- the machine ------------------------------------------------------------------------

    def _op(self, call: Call) -> tuple[OpDef, Attrs]:
        entry = self._op_calls.get(call)
        if entry is None:
            opdef = get_def(call.op.name)  # type: ignore[attr-defined]
            attrs = opdef.normalize_attrs(call.attrs)
            if opdef.name == "squeeze" and attrs["axis"] is None:
                # Squeeze what the type squeezes, not a ? dimension that happens to be 1.
                axes = static_unit_axes(known_type(call.args[0]))
                if axes is not None:
                    attrs = Attrs({**dict(attrs), "axis": axes})
            entry = (opdef, attrs)
            self._op_calls[call] = entry
        return entry

    def _run_op(self, call: Call, args: list[Any]) -> Any:
        opdef, attrs = self._op(call)
        for i, arg in enumerate(args):
            if not isinstance(arg, (np.ndarray, tuple)):
                raise InterpreterError(
                    f"operator {opdef.name}{_at(call.span)}: argument {i} must be a tensor "
                    f"or a tuple of tensors, found {describe_value(arg)}"
                )
        try:
            result = opdef.reference(args, attrs)
        except Exception as exc:  # a reference's numpy error, reported as the operator's
            shapes = ", ".join(
                describe_value(a).removeprefix("a ").removeprefix("tensor of ") for a in args
            )
            raise InterpreterError(
                f"operator {opdef.name}{_at(call.span)} failed on arguments ({shapes}): {exc}"
            ) from None
        return _as_value(result)

    def _construct(self, ctor: Constructor, fields: Sequence[Any], span: Span | None) -> ADT:
        if ctor.tag < 0:
            raise InterpreterError(
                f"constructor {ctor.name_hint}{_at(span)} has no tag: its type "
                f"{ctor.belong_to.name_hint} was never added to a module"
            )
        if len(fields) != len(ctor.inputs):
            raise InterpreterError(
                f"constructor {ctor.name_hint}{_at(span)} takes {len(ctor.inputs)} field(s), "
                f"got {len(fields)}"
            )
        return ADT(ctor.tag, fields, ctor.name_hint)

    def _run(
        self,
        expr: Expr | None,
        env: Env,
        callee: Any,
        call_args: Sequence[Any],
    ) -> Any:
        """Evaluate ``expr`` in ``env``, or (when ``expr`` is None) apply ``callee`` to
        ``call_args``. The loop alternates between evaluating a control expression (``e``)
        and returning ``value`` to the frame on top of ``stack``."""
        stack: list[list[Any]] = []
        max_frames = self.max_frames
        shared = self._shared
        value: Any = None
        e: Any = expr
        if expr is None:
            e, env, value = self._apply(callee, list(call_args), None, env)
        while True:
            # ---- evaluate the control expression until it yields a value --------------------
            while e is not None:
                if id(e) in shared:
                    kept = env.kept.get(id(e), _MISSING)
                    if kept is not _MISSING:
                        value = kept
                        e = None
                        continue
                    stack.append([_K_KEEP, e, env])
                t = type(e)
                if t is Var:
                    value = _lookup(env, e)
                    e = None
                elif t is Constant:
                    value = e.data
                    e = None
                elif t is Let:
                    stack.append([_K_LET, e, env])
                    e = e.value
                elif t is Call:
                    op = e.op
                    top = type(op)
                    if not e.args:
                        if top is Op:
                            value = self._run_op(e, [])
                            e = None
                            continue
                        if top is Constructor:
                            value = self._construct(op, (), e.span)
                            e = None
                            continue
                    if top is Op or top is Constructor:
                        stack.append([_K_ARGS, e, env, op, []])
                        e = e.args[0]
                    elif top is GlobalVar:
                        closure = self.global_closure(op)
                        if e.args:
                            stack.append([_K_ARGS, e, env, closure, []])
                            e = e.args[0]
                        else:
                            e, env, value = self._apply(closure, [], e, env)
                    else:
                        stack.append([_K_CALLEE, e, env])
                        e = op
                elif t is GlobalVar:
                    value = self.global_closure(e)
                    e = None
                elif t is If:
                    stack.append([_K_IF, e, env])
                    e = e.cond
                elif t is Match:
                    stack.append([_K_MATCH, e, env])
                    e = e.data
                elif t is Tuple:
                    if e.fields:
                        stack.append([_K_TUPLE, e, env, []])
                        e = e.fields[0]
                    else:
                        value = ()
                        e = None
                elif t is TupleGetItem:
                    stack.append([_K_PROJ, e])
                    e = e.tuple_value
                elif t is Function:
                    value = InterpreterClosure(e, env)
                    e = None
                elif t is Constructor:
                    # As the type checker sees it, a constructor not in call position is a
                    # function (``Nil`` has type ``fn () -> List[A]``); calling it builds the value.
                    value = ConstructorValue(e)
                    e = None
                elif t is Op:
                    raise InterpreterError(
                        f"operator {e.name}{_at(e.span)} is used as a value; operators can only "
                        "be called directly"
                    )
                else:
                    raise InterpreterError(f"cannot evaluate a {t.__name__} node{_at(e.span)}")
                if len(stack) > max_frames:
                    raise InterpreterError(
                        f"evaluation exceeded {max_frames} continuation frames "
                        f"(in {env.function or 'the top-level expression'}); "
                        "the program probably recurses without end"
                    )

            # ---- return ``value`` to the innermost frame ---------------------------------------
            if not stack:
                return value
            frame = stack[-1]
            kind = frame[0]
            if kind == _K_LET:
                stack.pop()
                node = frame[1]
                env = frame[2]
                env.vars[node.var] = value
                e = node.body  # tail position: no frame stays behind
            elif kind == _K_ARGS:
                frame[4].append(value)
                node = frame[1]
                values = frame[4]
                if len(values) < len(node.args):
                    env = frame[2]
                    e = node.args[len(values)]
                else:
                    stack.pop()
                    target = frame[3]
                    if type(target) is Op:
                        value = self._run_op(node, values)
                    elif type(target) is Constructor:
                        value = self._construct(target, values, node.span)
                    else:
                        e, env, value = self._apply(target, values, node, frame[2])
            elif kind == _K_IF:
                stack.pop()
                node = frame[1]
                env = frame[2]
                e = node.true_branch if self._truth(value, node) else node.false_branch
            elif kind == _K_MATCH:
                stack.pop()
                env = frame[2]
                e, env = self._select_clause(frame[1], value, env)
            elif kind == _K_TUPLE:
                node = frame[1]
                values = frame[3]
                values.append(value)
                if len(values) < len(node.fields):
                    env = frame[2]
                    e = node.fields[len(values)]
                else:
                    stack.pop()
                    value = tuple(values)
            elif kind == _K_KEEP:
                stack.pop()
                frame[2].kept[id(frame[1])] = value
            elif kind == _K_PROJ:
                stack.pop()
                node = frame[1]
                if not isinstance(value, tuple):
                    raise InterpreterError(
                        f"tuple projection .{node.index}{_at(node.span)} expects a tuple, "
                        f"found {describe_value(value)}"
                    )
                if not 0 <= node.index < len(value):
                    raise InterpreterError(
                        f"tuple projection .{node.index}{_at(node.span)} is out of range "
                        f"for a tuple of {len(value)} field(s)"
                    )
                value = value[node.index]
            else:  # _K_CALLEE
                stack.pop()
                node = frame[1]
                env = frame[2]
                if node.args:
                    stack.append([_K_ARGS, node, env, value, []])
                    e = node.args[0]
                else:
                    e, env, value = self._apply(value, [], node, env)

    def _apply(
        self, callee: Any, args: list[Any], call: Call | None, env: Env
    ) -> tuple[Expr | None, Env, Any]:
        """Apply a function value: returns the next control expression and environment (the
        callee's body) or, for a constructor, ``(None, env, value)``."""
        if type(callee) is InterpreterClosure:
            func = callee.func
            params = func.params
            if len(params) != len(args):
                name = f"@{callee.name}" if callee.name else "a local function"
                raise InterpreterError(
                    f"{name}{_at(call.span if call is not None else func.span)} takes "
                    f"{len(params)} argument(s), got {len(args)}"
                )
            scope = Env(callee.env, callee.name or "")
            scope.vars.update(zip(params, args))
            return func.body, scope, None
        if type(callee) is ConstructorValue:
            span = call.span if call is not None else None
            return None, env, self._construct(callee.constructor, args, span)
        where = _at(call.span) if call is not None else ""
        raise InterpreterError(
            f"the callee of a call{where} must be a function, found {describe_value(callee)}"
        )

    @staticmethod
    def _truth(value: Any, node: If) -> bool:
        if not isinstance(value, np.ndarray) or value.size != 1:
            raise InterpreterError(
                f"the condition of an if{_at(node.span)} must be a bool scalar, "
                f"found {describe_value(value)}"
            )
        return bool(value.reshape(()))

    def _select_clause(self, match: Match, value: Any, env: Env) -> tuple[Expr, Env]:
        for clause in match.clauses:
            bindings = _match_pattern(clause.lhs, value)
            if bindings is not None:
                if bindings:
                    env = Env(env)
                    env.vars.update(bindings)
                return clause.rhs, env
        where = f" in {env.function}" if env.function else ""
        kind = "match?" if not match.complete else "match"
        raise InterpreterError(
            f"no clause of the {kind}{_at(match.span)}{where} matches "
            f"{describe_value(value)} ({len(match.clauses)} clause(s) tried)"
        )


def _match_pattern(pattern: Pattern, value: Any) -> list[tuple[Var, Any]] | None:
    """The variable bindings if ``value`` matches ``pattern``, else None (iterative)."""
    bindings: list[tuple[Var, Any]] = []
    work: list[tuple[Pattern, Any]] = [(pattern, value)]
    while work:
        p, v = work.pop()
        tp = type(p)
        if tp is PatternWildcard:
            continue
        if tp is PatternVar:
            bindings.append((p.var, v))
        elif tp is PatternConstructor:
            if not isinstance(v, ADT) or v.tag != p.constructor.tag:
                return None
            if len(p.patterns) != len(v.fields):
                if p.patterns:
                    raise InterpreterError(
                        f"pattern {p.constructor.name_hint}{_at(p.span)} has "
                        f"{len(p.patterns)} sub-pattern(s) but the value has "
                        f"{len(v.fields)} field(s)"
                    )
                continue  # ``Cons`` written without sub-patterns matches any fields
            work.extend(zip(p.patterns, v.fields))
        elif tp is PatternTuple:
            if not isinstance(v, tuple) or len(v) != len(p.patterns):
                return None
            work.extend(zip(p.patterns, v))
        else:
            raise InterpreterError(f"unknown pattern kind {tp.__name__}{_at(p.span)}")
    return bindings
