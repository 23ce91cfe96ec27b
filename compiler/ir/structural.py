"""Structural equality and hashing of Relay modules, expressions, patterns and types.

Compiler layer (``compiler.ir``). Two programs are structurally equal when they have
the same shape, the same operators, attributes, constants (dtype, shape and bits, so a
NaN equals the same NaN), type annotations, match completeness and constructors (by
name and type), and their bound variables correspond one to one: let variables,
function parameters, pattern variables and type parameters may be renamed. Sharing
does not matter: a sub-expression used twice equals two copies of it. Free variables
are equal only if they are the same object, unless ``map_free_vars=True``, which lets
them correspond like bound ones. ``Call.type_args`` and ``checked_type`` are derived by
type inference and are not compared.

Both functions walk with explicit stacks, so a 10,000-deep ``let`` chain is fine.
:func:`structural_hash` is deterministic across processes (it never uses Python's salted
``hash``) and equal programs hash equal, as long as each variable object is bound in one
role (the well-formedness rule every pass follows).
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Mapping
from functools import lru_cache
from typing import Any as AnyT

from compiler.ir import hooks
from compiler.ir.expr import (
    Call,
    Clause,
    Constant,
    Constructor,
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
    Any,
    FuncType,
    GlobalTypeVar,
    IncompleteType,
    TensorType,
    TupleType,
    Type,
    TypeCall,
    TypeData,
    TypeVar,
)
from compiler.ir.visitor import pattern_vars

__all__ = ["assert_structural_equal", "structural_equal", "structural_hash"]


def structural_equal(lhs: object, rhs: object, map_free_vars: bool = False) -> bool:
    """Whether ``lhs`` and ``rhs`` are the same program up to renaming and sharing.

    Parameters
    ----------
    lhs, rhs : IRModule, Expr, Pattern, Clause, Type, Attrs, or a list/tuple of them
        The values to compare.
    map_free_vars : bool
        Let free variables of ``lhs`` correspond to free variables of ``rhs`` (one to
        one) instead of requiring the very same variable objects.

    Returns
    -------
    bool
    """
    return _Equal(map_free_vars).run(lhs, rhs)


def assert_structural_equal(lhs: object, rhs: object, map_free_vars: bool = False) -> None:
    """Raise ``ValueError`` showing both sides unless :func:`structural_equal` holds (TVM's
    ``tvm.ir.assert_structural_equal``, the check of a pass's tests).

    Parameters
    ----------
    lhs, rhs, map_free_vars
        As for :func:`structural_equal`.
    """
    if not structural_equal(lhs, rhs, map_free_vars):
        raise ValueError(
            f"the two sides are not structurally equal\n--- lhs ---\n{lhs}\n--- rhs ---\n{rhs}"
        )


def structural_hash(node: object, map_free_vars: bool = False) -> int:
    """A 64-bit hash consistent with :func:`structural_equal` (same arguments)."""
    return _Hasher(map_free_vars).run(node)


# --- attributes -----------------------------------------------------------------------------


def _value_equal(a: object, b: object) -> bool:
    """Attribute values: bools only equal bools; numbers by value (NaN equals NaN)."""
    if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
        return (
            isinstance(a, (tuple, list))
            and isinstance(b, (tuple, list))
            and len(a) == len(b)
            and all(_value_equal(x, y) for x, y in zip(a, b))
        )
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is not type(b) and not (isinstance(a, (int, float)) and isinstance(b, (int, float))):
        return False
    return a == b


def _attrs_equal(a: Mapping[str, object], b: Mapping[str, object]) -> bool:
    return a.keys() == b.keys() and all(_value_equal(a[k], b[k]) for k in a)


def _effective_attrs(op: object, attrs: Mapping[str, object]) -> Mapping[str, object]:
    """Operator attributes with defaults filled, so ``sum(%x)`` equals ``sum(%x, axis=None)``."""
    if isinstance(op, Op):
        try:
            return hooks.normalize_op_attrs(op.name, attrs)
        except (TypeError, ValueError):
            return attrs
    return attrs


def _constants_equal(a: Constant, b: Constant) -> bool:
    x, y = a.data, b.data
    return (
        x.dtype == y.dtype
        and x.shape == y.shape
        and x.tobytes() == y.tobytes()  # bitwise: NaN payloads and -0.0 are compared exactly
    )


# --- equality -------------------------------------------------------------------------------


class _Equal:
    """One comparison: the variable correspondence and the pairs already matched."""

    def __init__(self, map_free_vars: bool) -> None:
        self.map_free_vars = map_free_vars
        self.fwd: dict[object, object] = {}
        self.bwd: dict[object, object] = {}
        self.memo: set[tuple[int, int]] = set()
        self.stack: list[tuple[object, object]] = []

    def run(self, lhs: object, rhs: object) -> bool:
        if isinstance(lhs, IRModule) or isinstance(rhs, IRModule):
            if not (isinstance(lhs, IRModule) and isinstance(rhs, IRModule)):
                return False
            if not self.push_module(lhs, rhs):
                return False
        else:
            self.stack.append((lhs, rhs))
        stack = self.stack
        while stack:
            a, b = stack.pop()
            if not self.step(a, b):
                return False
        return True

    def push_module(self, lhs: AnyT, rhs: AnyT) -> bool:
        ltypes = {g.name_hint: d for g, d in lhs.type_definitions.items()}
        rtypes = {g.name_hint: d for g, d in rhs.type_definitions.items()}
        lfuncs = {g.name_hint: f for g, f in lhs.functions.items()}
        rfuncs = {g.name_hint: f for g, f in rhs.functions.items()}
        if ltypes.keys() != rtypes.keys() or lfuncs.keys() != rfuncs.keys():
            return False
        for name in sorted(lfuncs, reverse=True):
            self.stack.append((lfuncs[name], rfuncs[name]))
        for name in sorted(ltypes, reverse=True):
            self.stack.append((ltypes[name], rtypes[name]))
        return True

    def bind(self, a: object, b: object) -> None:
        # A later binding of the same variable (a shared function compared with two
        # copies) replaces the earlier one: scoping guarantees the old one is dead.
        self.fwd[a] = b
        self.bwd[b] = a

    def use(self, a: AnyT, b: AnyT) -> bool:
        """A use of variable ``a`` against ``b``: bound ones must correspond both ways."""
        if a in self.fwd or b in self.bwd:
            return self.fwd.get(a) is b and self.bwd.get(b) is a
        if self.map_free_vars:
            # First sight of two free variables: from now on they correspond.
            self.bind(a, b)
            if isinstance(a, Var):
                self.stack.append((a.type_annotation, b.type_annotation))
            return True
        return a is b

    def step(self, a: AnyT, b: AnyT) -> bool:
        if a is None or b is None:
            return a is b
        kind = type(a)
        if kind is not type(b):
            return False
        push = self.stack.append
        if kind is Var or kind is TypeVar:
            return self.use(a, b)
        key = (id(a), id(b))
        if key in self.memo:
            return True
        self.memo.add(key)
        if kind is Call:
            if len(a.args) != len(b.args):
                return False
            if not _attrs_equal(a.attrs, b.attrs) and not _attrs_equal(
                _effective_attrs(a.op, a.attrs),
                _effective_attrs(b.op, b.attrs),
            ):
                return False
            for x, y in zip(reversed(a.args), reversed(b.args)):
                push((x, y))
            push((a.op, b.op))
            return True
        if kind is Let:
            self.bind(a.var, b.var)
            push((a.body, b.body))
            push((a.value, b.value))
            push((a.var.type_annotation, b.var.type_annotation))
            return True
        if kind is Constant:
            return _constants_equal(a, b)
        if kind is GlobalVar:
            return a.name_hint == b.name_hint
        if kind is Op:
            return a.name == b.name
        if kind is Tuple:
            return self.push_all(a.fields, b.fields)
        if kind is TupleGetItem:
            push((a.tuple_value, b.tuple_value))
            return a.index == b.index
        if kind is If:
            push((a.false_branch, b.false_branch))
            push((a.true_branch, b.true_branch))
            push((a.cond, b.cond))
            return True
        if kind is Function:
            return self.step_function(a, b)
        if kind is Match:
            if a.complete != b.complete:
                return False
            if not self.push_all(a.clauses, b.clauses):
                return False
            push((a.data, b.data))
            return True
        if kind is Clause:
            # The pattern is compared first: it binds the variables the body uses.
            push((a.rhs, b.rhs))
            push((a.lhs, b.lhs))
            return True
        if kind is Constructor:
            return (
                a.name_hint == b.name_hint
                and a.belong_to.name_hint == b.belong_to.name_hint
                and len(a.inputs) == len(b.inputs)
            )
        if kind is PatternWildcard:
            return True
        if kind is PatternVar:
            self.bind(a.var, b.var)
            push((a.var.type_annotation, b.var.type_annotation))
            return True
        if kind is PatternConstructor:
            if not self.push_all(a.patterns, b.patterns):
                return False
            push((a.constructor, b.constructor))
            return True
        if kind is PatternTuple:
            return self.push_all(a.patterns, b.patterns)
        if isinstance(a, Type):
            return self.step_type(a, b)
        if isinstance(a, (tuple, list)):
            return self.push_all(a, b)
        if isinstance(a, Mapping):
            return _attrs_equal(a, b)
        if isinstance(a, Node):
            raise TypeError(f"structural_equal does not know the node kind {kind.__name__}")
        return _value_equal(a, b)

    def push_all(self, xs: tuple | list, ys: tuple | list) -> bool:
        if len(xs) != len(ys):
            return False
        for x, y in zip(reversed(xs), reversed(ys)):
            self.stack.append((x, y))
        return True

    def step_function(self, a: Function, b: Function) -> bool:
        if len(a.params) != len(b.params) or len(a.type_params) != len(b.type_params):
            return False
        if not _attrs_equal(a.attrs, b.attrs):
            return False
        for x, y in zip(a.type_params, b.type_params):
            self.bind(x, y)
        for x, y in zip(a.params, b.params):
            self.bind(x, y)
        push = self.stack.append
        push((a.body, b.body))
        push((a.ret_type, b.ret_type))
        for x, y in zip(a.params, b.params):
            push((x.type_annotation, y.type_annotation))
        return True

    def step_type(self, a: Type, b: AnyT) -> bool:
        push = self.stack.append
        if isinstance(a, TensorType):
            return a.dtype == b.dtype and a.shape == b.shape
        if isinstance(a, TupleType):
            return self.push_all(a.fields, b.fields)
        if isinstance(a, FuncType):
            assert isinstance(b, FuncType)
            if len(a.type_params) != len(b.type_params):
                return False
            for x, y in zip(a.type_params, b.type_params):
                self.bind(x, y)
            push((a.ret_type, b.ret_type))
            return self.push_all(a.arg_types, b.arg_types)
        if isinstance(a, GlobalTypeVar):
            return a.name_hint == b.name_hint
        if isinstance(a, TypeCall):
            assert isinstance(b, TypeCall)
            push((a.func, b.func))
            return self.push_all(a.args, b.args)
        if isinstance(a, IncompleteType):
            return True
        if isinstance(a, TypeData):
            assert isinstance(b, TypeData)
            if a.header.name_hint != b.header.name_hint:
                return False
            if len(a.type_vars) != len(b.type_vars) or len(a.constructors) != len(b.constructors):
                return False
            for x, y in zip(a.type_vars, b.type_vars):
                self.bind(x, y)
            for ca, cb in zip(a.constructors, b.constructors):
                assert isinstance(ca, Constructor) and isinstance(cb, Constructor)
                if ca.name_hint != cb.name_hint or not self.push_all(ca.inputs, cb.inputs):
                    return False
            return True
        raise TypeError(f"structural_equal does not know the type kind {type(a).__name__}")


# --- hashing --------------------------------------------------------------------------------

_MASK = (1 << 64) - 1


def _mix(h: int, x: int) -> int:
    h ^= (x + 0x9E3779B97F4A7C15 + ((h << 6) & _MASK) + (h >> 2)) & _MASK
    return h


@lru_cache(maxsize=8192)
def _hash_str(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


def _hash_bytes(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def _hash_value(value: object) -> int:
    """Hash of a plain value, matching :func:`_value_equal` (1 and 1.0 hash alike)."""
    if value is None:
        return _hash_str("<None>")
    if isinstance(value, bool):
        return _hash_str("<True>" if value else "<False>")
    if isinstance(value, float):
        if math.isnan(value):
            return _hash_str("<nan>")
        if value.is_integer():
            value = int(value)
        else:
            return _mix(_hash_str("<float>"), int.from_bytes(struct.pack("<d", value), "little"))
    if isinstance(value, int):
        return _mix(_hash_str("<int>"), value & _MASK)
    if isinstance(value, str):
        return _hash_str(value)
    if isinstance(value, bytes):
        return _hash_bytes(value)
    if isinstance(value, (tuple, list)):
        h = _mix(_hash_str("<tuple>"), len(value))
        for item in value:
            h = _mix(h, _hash_value(item))
        return h
    return _hash_str(repr(value))


def _hash_attrs(attrs: Mapping[str, object]) -> int:
    h = _hash_str("<attrs>")
    for key in sorted(attrs):
        h = _mix(_mix(h, _hash_str(key)), _hash_value(attrs[key]))
    return h


_NODE_TYPES = (Node, Type)


class _Hasher:
    """Bottom-up hashing with memoisation by identity (shared nodes hash once)."""

    def __init__(self, map_free_vars: bool) -> None:
        self.map_free_vars = map_free_vars
        self.roles: dict[object, tuple] = {}
        self.memo: dict[int, int] = {}
        self.keep: list[object] = []

    def run(self, node: object) -> int:
        if isinstance(node, IRModule):
            types = sorted(
                ((g.name_hint, d) for g, d in node.type_definitions.items()), key=lambda t: t[0]
            )
            funcs = sorted(
                ((g.name_hint, f) for g, f in node.functions.items()), key=lambda t: t[0]
            )
            roots: list[object] = [d for _, d in types] + [f for _, f in funcs]
            self.assign_roles(roots)
            h = _hash_str("<module>")
            for name, data in types:
                h = _mix(_mix(h, _hash_str(name)), self.hash_node(data))
            for name, func in funcs:
                h = _mix(_mix(h, _hash_str("@" + name)), self.hash_node(func))
            return h
        if isinstance(node, _NODE_TYPES):
            self.assign_roles([node])
            return self.hash_node(node)
        if isinstance(node, (tuple, list)):
            self.assign_roles(list(node))
            h = _mix(_hash_str("<list>"), len(node))
            for item in node:
                h = _mix(
                    h, self.hash_node(item) if isinstance(item, _NODE_TYPES) else _hash_value(item)
                )
            return h
        if isinstance(node, Mapping):
            return _hash_attrs(node)
        return _hash_value(node)

    def assign_roles(self, roots: list[object]) -> None:
        """Give each bound variable a role (which binder, which position) to hash by."""
        roles = self.roles
        conflict = ("var",)

        def give(var: object, role: tuple) -> None:
            old = roles.get(var)
            roles[var] = role if old is None or old == role else conflict

        seen: set[int] = set()
        stack = [r for r in roots if isinstance(r, _NODE_TYPES)]
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            self.keep.append(node)
            if isinstance(node, Function):
                for index, param in enumerate(node.params):
                    give(param, ("param", index))
                for index, tvar in enumerate(node.type_params):
                    give(tvar, ("tparam", index))
            elif isinstance(node, Let):
                give(node.var, ("let",))
            elif isinstance(node, Clause):
                for index, var in enumerate(pattern_vars(node.lhs)):
                    give(var, ("pvar", index))
            elif isinstance(node, FuncType):
                for index, tvar in enumerate(node.type_params):
                    give(tvar, ("ftparam", index))
            elif isinstance(node, TypeData):
                for index, tvar in enumerate(node.type_vars):
                    give(tvar, ("tdvar", index))
            stack.extend(p for p in self.parts(node, for_roles=True) if isinstance(p, _NODE_TYPES))

    def role(self, var: Var | TypeVar) -> tuple:
        role = self.roles.get(var)
        if role is not None:
            return role
        return ("free",) if self.map_free_vars else ("free", var.name_hint)

    def parts(self, node: object, for_roles: bool = False) -> list[object]:
        """What a node's hash is made of: a tag, plain values and child nodes."""
        if isinstance(node, Var):
            if for_roles:
                return [node.type_annotation]
            return ["Var", self.role(node)]
        if isinstance(node, Call):
            if for_roles:
                return [node.op, *node.args]
            attrs = _effective_attrs(node.op, node.attrs)
            return ["Call", len(node.args), _hash_attrs(attrs), node.op, *node.args]
        if isinstance(node, Let):
            return ["Let", node.var.type_annotation, node.value, node.body]
        if isinstance(node, Constant):
            data = node.data
            digest = _hash_bytes(data.tobytes())
            return ["Constant", data.dtype.name, tuple(data.shape), digest]
        if isinstance(node, GlobalVar):
            return ["GlobalVar", node.name_hint]
        if isinstance(node, Op):
            return ["Op", node.name]
        if isinstance(node, Tuple):
            return ["Tuple", len(node.fields), *node.fields]
        if isinstance(node, TupleGetItem):
            return ["TupleGetItem", node.index, node.tuple_value]
        if isinstance(node, If):
            return ["If", node.cond, node.true_branch, node.false_branch]
        if isinstance(node, Function):
            annotations = [p.type_annotation for p in node.params]
            return [
                "Function",
                len(node.params),
                len(node.type_params),
                _hash_attrs(node.attrs),
                node.ret_type,
                node.body,
                *annotations,
            ]
        if isinstance(node, Match):
            return ["Match", node.complete, len(node.clauses), node.data, *node.clauses]
        if isinstance(node, Clause):
            return ["Clause", node.lhs, node.rhs]
        if isinstance(node, Constructor):
            return ["Constructor", node.name_hint, node.belong_to.name_hint, len(node.inputs)]
        if isinstance(node, PatternWildcard):
            return ["PatternWildcard"]
        if isinstance(node, PatternVar):
            return ["PatternVar", node.var.type_annotation]
        if isinstance(node, PatternConstructor):
            return ["PatternConstructor", len(node.patterns), node.constructor, *node.patterns]
        if isinstance(node, PatternTuple):
            return ["PatternTuple", len(node.patterns), *node.patterns]
        if isinstance(node, TensorType):
            dims = tuple("?" if isinstance(d, Any) else d for d in node.shape)
            return ["TensorType", node.dtype, dims]
        if isinstance(node, TupleType):
            return ["TupleType", len(node.fields), *node.fields]
        if isinstance(node, FuncType):
            return [
                "FuncType",
                len(node.type_params),
                len(node.arg_types),
                node.ret_type,
                *node.arg_types,
            ]
        if isinstance(node, TypeVar):
            return [] if for_roles else ["TypeVar", self.role(node)]
        if isinstance(node, GlobalTypeVar):
            return ["GlobalTypeVar", node.name_hint]
        if isinstance(node, TypeCall):
            return ["TypeCall", len(node.args), node.func, *node.args]
        if isinstance(node, IncompleteType):
            return ["IncompleteType"]
        if isinstance(node, TypeData):
            out: list[object] = ["TypeData", node.header.name_hint, len(node.type_vars)]
            for ctor in node.constructors:
                assert isinstance(ctor, Constructor)
                out += [ctor.name_hint, len(ctor.inputs), *ctor.inputs]
            return out
        raise TypeError(f"structural_hash does not know the node kind {type(node).__name__}")

    def hash_node(self, root: object) -> int:
        memo = self.memo
        pending: dict[int, list[object]] = {}
        stack: list[object] = [root]
        while stack:
            node = stack[-1]
            key = id(node)
            if key in memo:
                stack.pop()
                continue
            parts = pending.get(key)
            if parts is None:
                parts = self.parts(node)
                pending[key] = parts
                self.keep.append(node)
                children = [p for p in parts if isinstance(p, _NODE_TYPES) and id(p) not in memo]
                if children:
                    stack.extend(children)
                    continue
            stack.pop()
            h = _hash_str(str(parts[0]))
            for part in parts[1:]:
                if isinstance(part, _NODE_TYPES):
                    h = _mix(h, memo[id(part)])
                else:
                    h = _mix(h, _hash_value(part))
            memo[key] = h
            del pending[key]
        return memo[id(root)]
