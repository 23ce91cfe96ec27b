"""Hypothesis strategies that build random well-typed Relay modules by construction.

Every expression is generated for a type chosen first, from typed building blocks, so
the result type-checks without running inference: tensor arithmetic over a few shapes
(including a ``?`` dimension), comparisons, casts from every dtype (so every literal
form appears), reductions and other operators with attributes, lets, graph sharing
(one node used in several places, across if branches and closures), ifs, tuples and
projection, local closures and their calls, calls of global functions (one polymorphic),
a list ADT built with constructors and taken apart by ``match``/``match?`` with nested
constructor, tuple, variable and wildcard patterns.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

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
    Any,
    FuncType,
    GlobalTypeVar,
    TensorType,
    TupleType,
    Type,
    TypeCall,
    TypeData,
    TypeVar,
)
from compiler.op.registry import get_def, get_op

DYN = Any()
SHAPES: tuple[tuple, ...] = ((), (3,), (2, 3), (DYN, 3), (2, 1))
ARITH_DTYPES = ("float32", "int32")
ALL_DTYPES = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64",
)  # fmt: skip
# A small pool makes different variables share a name, which the printer must rename.
NAMES = ("x", "y", "v", "acc", "input.1")


def call(name: str, args: list[Expr], **attrs: object) -> Call:
    """An operator call; attributes are normalized, as both the builders and parser do."""
    return Call(get_op(name), args, get_def(name).normalize_attrs(attrs))


@dataclass
class Adt:
    """``type MyList[A] { Cons(A, MyList[A]), Nil }``."""

    header: GlobalTypeVar = field(default_factory=lambda: GlobalTypeVar("MyList"))

    def __post_init__(self) -> None:
        a = TypeVar("A")
        self.cons = Constructor("Cons", [a, TypeCall(self.header, [a])], self.header)
        self.nil = Constructor("Nil", [], self.header)
        self.data = TypeData(self.header, [a], [self.cons, self.nil])

    def of(self, elem: Type) -> TypeCall:
        return TypeCall(self.header, [elem])


@dataclass
class Env:
    """What generated code may refer to: values in scope (with their types) and globals."""

    values: list[tuple[Expr, Type]]
    globals: list[tuple[GlobalVar, FuncType]]
    identity: GlobalVar | None

    def extended(self, *items: tuple[Expr, Type]) -> Env:
        return Env(self.values + list(items), self.globals, self.identity)

    def of_type(self, ty: Type) -> list[Expr]:
        return [e for e, t in self.values if t == ty]


class Builder:
    """Draws typed expressions from a hypothesis ``data`` object."""

    def __init__(self, draw: st.DrawFn, adt: Adt) -> None:
        self.draw = draw
        self.adt = adt

    def name(self) -> str:
        return self.draw(st.sampled_from(NAMES))

    def tensor_type(self, dtypes: tuple[str, ...] = ARITH_DTYPES) -> TensorType:
        shape = self.draw(st.sampled_from(SHAPES))
        return TensorType(shape, self.draw(st.sampled_from(dtypes)))

    def value_type(self, depth: int) -> Type:
        kind = self.draw(st.integers(0, 9)) if depth > 0 else 0
        if kind <= 6:
            return self.tensor_type()
        if kind <= 8:
            return TupleType([self.tensor_type(), self.tensor_type()])
        return self.adt.of(self.tensor_type())

    def annotation(self, ty: Type) -> Type | None:
        return ty if self.draw(st.booleans()) else None

    # --- leaves ----------------------------------------------------------------------------

    def constant(self, ty: TensorType) -> Constant:
        shape = tuple(2 if isinstance(d, Any) else d for d in ty.shape)
        if ty.dtype == "bool":
            values = self.draw(st.lists(st.booleans(), min_size=1, max_size=1))
            return Constant(np.full(shape, values[0], dtype="bool"))
        if ty.dtype.startswith("float"):
            width = {"float16": 16, "float32": 32, "float64": 64}[ty.dtype]
            scalar = self.draw(st.floats(width=width, allow_nan=True, allow_infinity=True))
        else:
            info = np.iinfo(ty.dtype)
            scalar = self.draw(st.integers(int(info.min), int(info.max)))
        base = np.full(shape, scalar, dtype=ty.dtype)
        if shape and self.draw(st.booleans()):
            base = base + np.arange(base.size, dtype=ty.dtype).reshape(shape)
        return Constant(base)

    def leaf(self, ty: Type, env: Env) -> Expr:
        candidates = env.of_type(ty)
        if candidates and self.draw(st.integers(0, 2)):
            return self.draw(st.sampled_from(candidates))
        if isinstance(ty, TensorType):
            return self.constant(ty)
        if isinstance(ty, TupleType):
            return Tuple([self.leaf(f, env) for f in ty.fields])
        if isinstance(ty, TypeCall):
            # An annotated let pins the element type that Nil() alone leaves open.
            empty = Var(self.name(), ty)
            return Let(empty, Call(self.adt.nil, []), empty)
        raise AssertionError(f"no leaf for {ty}")

    # --- expressions -----------------------------------------------------------------------

    def expr(self, ty: Type, env: Env, depth: int) -> Expr:
        if depth <= 0:
            return self.leaf(ty, env)
        choices = ["leaf", "let", "share", "if", "project", "closure", "global"]
        if isinstance(ty, TensorType):
            choices += ["arith", "arith", "unary", "cast", "reduce", "compare", "scalar"]
            choices += ["match_list", "match_tuple"]
        elif isinstance(ty, TupleType):
            choices += ["tuple", "tuple"]
        elif isinstance(ty, TypeCall):
            choices += ["cons", "cons"]
        choice = self.draw(st.sampled_from(choices))
        return getattr(self, "gen_" + choice)(ty, env, depth - 1)

    def gen_leaf(self, ty: Type, env: Env, depth: int) -> Expr:
        return self.leaf(ty, env)

    def gen_arith(self, ty: TensorType, env: Env, depth: int) -> Expr:
        if ty.dtype == "bool":
            return self.gen_compare(ty, env, depth)
        op = self.draw(st.sampled_from(("add", "subtract", "multiply", "divide")))
        return call(op, [self.expr(ty, env, depth), self.expr(ty, env, depth)])

    def gen_scalar(self, ty: TensorType, env: Env, depth: int) -> Expr:
        """A tensor combined with a broadcast scalar literal of any dtype, cast to fit."""
        literal = self.constant(TensorType((), self.draw(st.sampled_from(ALL_DTYPES))))
        scalar = call("cast", [literal], dtype=ty.dtype)
        if ty.dtype == "bool":
            return call("logical_and", [self.expr(ty, env, depth), scalar])
        return call("add", [self.expr(ty, env, depth), scalar])

    def gen_unary(self, ty: TensorType, env: Env, depth: int) -> Expr:
        if ty.dtype == "float32":
            op = self.draw(st.sampled_from(("negative", "exp", "nn.relu", "clip", "softmax")))
            if op == "clip":
                return call("clip", [self.expr(ty, env, depth)], a_min=-1.5, a_max=2.0)
            if op == "softmax" and ty.shape:
                return call("nn.softmax", [self.expr(ty, env, depth)], axis=0)
            if op == "softmax":
                op = "exp"
            return call(op, [self.expr(ty, env, depth)])
        if ty.dtype == "bool":
            return call("logical_not", [self.expr(ty, env, depth)])
        return call("negative", [self.expr(ty, env, depth)])

    def gen_cast(self, ty: TensorType, env: Env, depth: int) -> Expr:
        source = TensorType(ty.shape, self.draw(st.sampled_from(ALL_DTYPES)))
        return call("cast", [self.expr(source, env, depth)], dtype=ty.dtype)

    def gen_reduce(self, ty: TensorType, env: Env, depth: int) -> Expr:
        if ty.dtype == "bool":
            return self.gen_compare(ty, env, depth)
        op = self.draw(st.sampled_from(("sum", "max", "prod")))
        if ty.shape == ():
            source = TensorType(self.draw(st.sampled_from(((3,), (2, 3)))), ty.dtype)
            axis = self.draw(st.sampled_from((None, list(range(len(source.shape))))))
            return call(op, [self.expr(source, env, depth)], axis=axis)
        if ty.shape == (2, 1):
            source = TensorType((2, 3), ty.dtype)
            return call(op, [self.expr(source, env, depth)], axis=[1], keepdims=True)
        if ty.shape == (3,):
            source = TensorType((2, 3), ty.dtype)
            exclude = self.draw(st.booleans())
            axis = [1] if exclude else [0]
            return call(op, [self.expr(source, env, depth)], axis=axis, exclude=exclude)
        return self.gen_arith(ty, env, depth)

    def gen_compare(self, ty: TensorType, env: Env, depth: int) -> Expr:
        if ty.dtype != "bool":
            cond = self.gen_compare(TensorType(ty.shape, "bool"), env, depth)
            return call("cast", [cond], dtype=ty.dtype)
        source = TensorType(ty.shape, self.draw(st.sampled_from(ARITH_DTYPES)))
        op = self.draw(st.sampled_from(("less", "greater", "equal", "not_equal")))
        return call(op, [self.expr(source, env, depth), self.expr(source, env, depth)])

    def gen_let(self, ty: Type, env: Env, depth: int) -> Expr:
        value_type = self.value_type(depth)
        var = Var(self.name(), self.annotation(value_type))
        value = self.expr(value_type, env, depth)
        body = self.expr(ty, env.extended((var, value_type)), depth)
        return Let(var, value, body)

    def gen_share(self, ty: Type, env: Env, depth: int) -> Expr:
        """A node that the body may use any number of times (a DAG, not a let)."""
        value_type = self.value_type(depth)
        node = self.expr(value_type, env, depth)
        # Listed twice so that the body is likely to use it more than once.
        inner = env.extended((node, value_type), (node, value_type))
        return self.expr(ty, inner, depth)

    def gen_if(self, ty: Type, env: Env, depth: int) -> Expr:
        cond = self.expr(TensorType((), "bool"), env, depth)
        return If(cond, self.expr(ty, env, depth), self.expr(ty, env, depth))

    def gen_project(self, ty: Type, env: Env, depth: int) -> Expr:
        other = self.value_type(0)
        index = self.draw(st.integers(0, 1))
        fields = [other, other]
        fields[index] = ty
        return TupleGetItem(self.expr(TupleType(fields), env, depth), index)

    def gen_tuple(self, ty: TupleType, env: Env, depth: int) -> Expr:
        return Tuple([self.expr(f, env, depth) for f in ty.fields])

    def gen_closure(self, ty: Type, env: Env, depth: int) -> Expr:
        params = [Var(self.name(), None) for _ in range(self.draw(st.integers(0, 2)))]
        param_types = [self.value_type(0) for _ in params]
        for index, (param, pty) in enumerate(zip(params, param_types)):
            if self.draw(st.booleans()):
                params[index] = Var(param.name_hint, pty)
        inner = env.extended(*zip(params, param_types))
        func = Function(params, self.expr(ty, inner, depth), self.annotation(ty))
        args = [self.expr(pty, env, depth) for pty in param_types]
        if self.draw(st.booleans()):
            fvar = Var(self.name(), self.annotation(FuncType(param_types, ty)))
            return Let(fvar, func, Call(fvar, args))
        return Call(func, args)

    def gen_global(self, ty: Type, env: Env, depth: int) -> Expr:
        if env.identity is not None and self.draw(st.booleans()):
            return Call(env.identity, [self.expr(ty, env, depth)])
        for gvar, fty in env.globals:
            if fty.ret_type == ty:
                return Call(gvar, [self.expr(a, env, depth) for a in fty.arg_types])
        return self.expr(ty, env, depth)

    def gen_cons(self, ty: TypeCall, env: Env, depth: int) -> Expr:
        (elem,) = ty.args
        return Call(self.adt.cons, [self.expr(elem, env, depth), self.expr(ty, env, depth)])

    def gen_match_list(self, ty: Type, env: Env, depth: int) -> Expr:
        elem = self.tensor_type()
        list_type = self.adt.of(elem)
        data = self.expr(list_type, env, depth)
        clauses = []
        h, t = Var(self.name(), self.annotation(elem)), Var(self.name(), None)
        nested = PatternConstructor(
            self.adt.cons,
            [PatternVar(h), PatternConstructor(self.adt.cons, [PatternWildcard(), PatternVar(t)])],
        )
        clauses.append(
            Clause(nested, self.expr(ty, env.extended((h, elem), (t, list_type)), depth))
        )
        h2 = Var(self.name(), None)
        clauses.append(
            Clause(
                PatternConstructor(self.adt.cons, [PatternVar(h2), PatternWildcard()]),
                self.expr(ty, env.extended((h2, elem)), depth),
            )
        )
        complete = self.draw(st.booleans())
        if complete:
            nil = PatternConstructor(self.adt.nil)
            last = nil if self.draw(st.booleans()) else PatternWildcard()
            clauses.append(Clause(last, self.expr(ty, env, depth)))
        return Match(data, clauses, complete)

    def gen_match_tuple(self, ty: Type, env: Env, depth: int) -> Expr:
        first, second = self.tensor_type(), self.tensor_type()
        data = self.expr(TupleType([first, second]), env, depth)
        a = Var(self.name(), self.annotation(first))
        pattern = PatternTuple([PatternVar(a), PatternWildcard()])
        return Match(data, [Clause(pattern, self.expr(ty, env.extended((a, first)), depth))])


@st.composite
def modules(draw: st.DrawFn, max_depth: int = 4) -> IRModule:
    """A random well-typed module: the list ADT, a polymorphic identity, helpers and main."""
    adt = Adt()
    builder = Builder(draw, adt)
    mod = IRModule(type_definitions={adt.header: adt.data})
    a = TypeVar("A")
    ident_var = Var("x", a)
    identity = GlobalVar("identity")
    mod[identity] = Function([ident_var], ident_var, a, [a])
    env = Env([], [], identity)
    for index in range(draw(st.integers(0, 2))):
        count = draw(st.integers(0, 2))
        params = [Var(builder.name(), builder.value_type(1)) for _ in range(count)]
        ret = builder.value_type(1)
        inner = env.extended(*((p, p.type_annotation) for p in params))
        body = builder.expr(ret, inner, draw(st.integers(0, max_depth)))
        gvar = GlobalVar(f"helper{index}")
        mod[gvar] = Function(params, body, ret)
        signature = FuncType([p.type_annotation for p in params], ret)
        env = Env(env.values, [*env.globals, (gvar, signature)], identity)
    params = [Var(builder.name(), builder.value_type(1)) for _ in range(draw(st.integers(0, 3)))]
    ret = builder.value_type(1)
    inner = env.extended(*((p, p.type_annotation) for p in params))
    mod["main"] = Function(params, builder.expr(ret, inner, max_depth), builder.annotation(ret))
    return mod
