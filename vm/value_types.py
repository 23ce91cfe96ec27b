"""Checking caller-made values against type specs that have type variables.

Runtime layer (``vm``); imports numpy and the plain-data modules of ``vm``.

A value built outside the VM (a :class:`vm.Closure`, a :class:`vm.ADT`, a tuple) reaches
compiled code that trusts its type: a kernel reads an array with the rank and dtype
the compiler saw, and a closure's function receives arguments of the types its caller
was compiled for. So every such value is checked, all the way down, against the spec of
the parameter it is passed to (see :mod:`vm.program` for specs):

- a tensor leaf must have the spec's dtype and rank and every static dimension;
- an ADT value must be built by a constructor of the spec's type, and its fields must
  have the constructor's field types with the type's arguments substituted;
- a closure's captured values must have its function's first parameter types, and the
  rest of the function's signature must be the spec's ``fn(...) -> ...`` exactly;
- a type variable (``("var", n)``) takes the type of the first value or closure that
  meets it, and every later use must agree. One check of a call shares the variables
  of all its parameters (``@map(%f: fn(A) -> B, %xs: List[A])``), and each closure's
  function gets fresh variables of its own.

Specs that leave something unknown (``("any",)``, ``("adt", name)`` and ``("func",)``,
as written by format 1.0 and 1.1 files) check only that the value is a well-formed VM
value, as those files' programs always did.

Checking is iterative (a 100,000-long list needs no recursion), shares work between
shared sub-values, rebuilds containers only where a leaf was converted, and reports a
cyclic value as an error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from serialization.limits import MAX_NESTING
from vm.args import (
    ValueChecker,
    convert_tensor,
    describe_spec,
    describe_value,
    path_text,
)
from vm.objects import ADT, Closure
from vm.program import ConstructorInfo, TypeSpec, VMFunction

_ANY: TypeSpec = ("any",)
_CONTAINERS = (tuple, list, ADT, Closure)


def _children_of(spec: TypeSpec) -> tuple[TypeSpec, ...] | None:
    """The sub-specs of a spec that has any (None for leaves and legacy forms)."""
    kind = spec[0]
    if kind == "tuple":
        return spec[1]
    if kind == "adt" and len(spec) == 3:
        return spec[2]
    if kind == "func" and len(spec) == 3:
        return (*spec[1], spec[2])
    return None


def _rebuild(spec: TypeSpec, children: list[TypeSpec]) -> TypeSpec:
    kind = spec[0]
    if kind == "tuple":
        return ("tuple", tuple(children))
    if kind == "adt":
        return ("adt", spec[1], tuple(children))
    return ("func", tuple(children[:-1]), children[-1])


def map_spec(spec: TypeSpec, leaf: Callable[[TypeSpec], TypeSpec | None]) -> TypeSpec:
    """``spec`` with every leaf for which ``leaf`` returns a spec replaced by it.

    Iterative post-order rebuild; unchanged sub-specs are kept as they are.

    Raises
    ------
    TypeError
        If the result nests deeper than :data:`serialization.limits.MAX_NESTING` (a
        value of a type that grows with every level, followed too far).
    """
    # Frames: [spec, its children, the rebuilt children so far].
    stack: list[list[Any]] = []
    result: TypeSpec | None = None
    node: TypeSpec | None = spec
    while True:
        if node is not None:
            children = _children_of(node)
            if children:
                if len(stack) >= MAX_NESTING:
                    raise TypeError(f"a value's type nests deeper than {MAX_NESTING} levels")
                stack.append([node, children, []])
                node = children[0]
                continue
            replaced = leaf(node)
            result = node if replaced is None else replaced
            node = None
        if not stack:
            assert result is not None
            return result
        frame = stack[-1]
        frame[2].append(result)
        if len(frame[2]) < len(frame[1]):
            node = frame[1][len(frame[2])]
            continue
        stack.pop()
        original, children, built = frame
        same = all(a is b for a, b in zip(built, children))
        result = original if same else _rebuild(original, built)


class TypeContext:
    """What the checks of one executable look up: its functions and constructors.

    Parameters
    ----------
    functions : sequence of vm.program.VMFunction
        The executable's functions, in index order.
    constructors : mapping of int to vm.program.ConstructorInfo
        The executable's constructors by tag.
    """

    def __init__(
        self, functions: Sequence[VMFunction], constructors: Mapping[int, ConstructorInfo]
    ) -> None:
        self.functions = functions
        self.constructors = constructors
        #: Deep conversion for positions whose spec says nothing (legacy specs).
        self.values = ValueChecker(constructors, len(functions))
        self._tags_by_type: dict[str, list[ConstructorInfo]] = {}
        for _, info in sorted(constructors.items()):
            self._tags_by_type.setdefault(info.type_name, []).append(info)

    def constructor_names(self, type_name: str) -> str:
        """``Nil, Cons``: the constructors of ``type_name``, for messages."""
        return ", ".join(info.name for info in self._tags_by_type.get(type_name, ()))

    def check(
        self, items: Sequence[tuple[Any, TypeSpec, str]], scope: dict[int, TypeSpec] | None = None
    ) -> list[Any]:
        """Check and convert ``(value, spec, where)`` items in one shared set of type variables.

        ``spec`` may use ``("var", n)``; ``scope`` (filled as variables are met) maps
        them to the check's own variables, so several calls can share one scope.

        Returns
        -------
        list
            The converted values, in the order given.

        Raises
        ------
        TypeError, ValueError
            Naming ``where`` and the path inside the value, the expected type and what
            was found.
        """
        session = _Session(self)
        if scope is None:
            scope = {}
        specs = [session.instantiate(spec, scope) for _, spec, _ in items]
        # Closures first: their functions' declared types bind variables more generally
        # (a ``?`` dimension) than a tensor value would.
        order = sorted(range(len(items)), key=lambda i: specs[i][0] != "func")
        out: list[Any] = [None] * len(items)
        for i in order:
            value, _, where = items[i]
            out[i] = session.convert(value, specs[i], where)
        return out


class _Session:
    """One check: type-variable bindings and the memo of checked sub-values."""

    __slots__ = ("_done", "_fields", "bound", "ctx", "next_key")

    def __init__(self, ctx: TypeContext) -> None:
        self.ctx = ctx
        self.bound: dict[int, TypeSpec] = {}
        self.next_key = 0
        self._done: dict[tuple[int, TypeSpec], Any] = {}
        self._fields: dict[tuple[int, TypeSpec], tuple[TypeSpec, ...]] = {}

    # ---- variables ------------------------------------------------------------------------

    def fresh(self) -> TypeSpec:
        key = self.next_key
        self.next_key += 1
        return ("ivar", key)

    def instantiate(self, spec: TypeSpec, scope: dict[int, TypeSpec]) -> TypeSpec:
        """``spec`` with its ``("var", n)`` replaced by this check's variables for ``scope``."""

        def leaf(item: TypeSpec) -> TypeSpec | None:
            if item[0] != "var":
                return None
            var = scope.get(item[1])
            if var is None:
                var = scope[item[1]] = self.fresh()
            return var

        return map_spec(spec, leaf)

    def resolve(self, spec: TypeSpec) -> TypeSpec:
        while spec[0] == "ivar":
            bound = self.bound.get(spec[1])
            if bound is None:
                return spec
            spec = bound
        return spec

    def zonk(self, spec: TypeSpec) -> TypeSpec:
        """``spec`` with every bound variable replaced, for messages."""

        def leaf(item: TypeSpec) -> TypeSpec | None:
            if item[0] != "ivar":
                return None
            resolved = self.resolve(item)
            return None if resolved is item else self.zonk(resolved)

        return map_spec(spec, leaf)

    def describe(self, spec: TypeSpec) -> str:
        return describe_spec(self.zonk(spec))

    def _occurs(self, key: int, spec: TypeSpec) -> bool:
        stack = [spec]
        while stack:
            item = self.resolve(stack.pop())
            if item[0] == "ivar" and item[1] == key:
                return True
            children = _children_of(item)
            if children:
                stack.extend(children)
        return False

    def unify(self, a: TypeSpec, b: TypeSpec) -> bool:
        """Make ``a`` and ``b`` the same type, binding variables; False if they differ."""
        stack = [(a, b)]
        while stack:
            left, right = stack.pop()
            left, right = self.resolve(left), self.resolve(right)
            if left == right:
                continue
            if left[0] == "ivar" or right[0] == "ivar":
                var, other = (left, right) if left[0] == "ivar" else (right, left)
                if self._occurs(var[1], other):
                    return False
                self.bound[var[1]] = other
                continue
            kind = left[0]
            if kind == "any" or right[0] == "any":
                continue
            if kind != right[0] or kind == "tensor":
                return False
            if kind == "tuple":
                if len(left[1]) != len(right[1]):
                    return False
                stack.extend(zip(left[1], right[1]))
            elif kind == "adt":
                if left[1] != right[1]:
                    return False
                if len(left) == 3 and len(right) == 3:
                    if len(left[2]) != len(right[2]):
                        return False
                    stack.extend(zip(left[2], right[2]))
            elif kind == "func":
                if len(left) == 3 and len(right) == 3:
                    if len(left[1]) != len(right[1]):
                        return False
                    stack.extend(zip(left[1], right[1]))
                    stack.append((left[2], right[2]))
            else:
                return False
        return True

    # ---- values ---------------------------------------------------------------------------

    def convert(self, value: Any, spec: TypeSpec, where: str) -> Any:
        """``value`` checked against ``spec`` and converted (containers rebuilt if needed)."""
        if not isinstance(value, _CONTAINERS):
            return self._leaf(value, spec, where, None)
        done = self._done
        active: set[tuple[int, TypeSpec]] = set()
        root = (id(value), spec)
        # Entries: (value, spec, path, children or None); a path is (parent path, label).
        stack: list[tuple[Any, TypeSpec, Any, Any]] = [(value, spec, None, None)]
        while stack:
            item, item_spec, path, children = stack.pop()
            key = (id(item), item_spec)
            if children is None:
                if key in done:
                    continue
                if key in active:
                    raise TypeError(f"{path_text(where, path)} contains itself (a cyclic value)")
                expanded = self._expand(item, item_spec, where, path)
                if not isinstance(expanded, list):  # converted as a whole
                    done[key] = expanded
                    continue
                active.add(key)
                stack.append((item, item_spec, path, expanded))
                for child, child_spec, label in expanded:
                    if isinstance(child, _CONTAINERS) and (id(child), child_spec) not in done:
                        stack.append((child, child_spec, (path, label), None))
                continue
            active.discard(key)
            converted = []
            changed = type(item) is list
            for child, child_spec, label in children:
                if isinstance(child, _CONTAINERS):
                    new = done[(id(child), child_spec)]
                else:
                    new = self._leaf(child, child_spec, where, (path, label))
                changed = changed or new is not child
                converted.append(new)
            if not changed:
                done[key] = item
            elif isinstance(item, ADT):
                done[key] = ADT(item.tag, converted, item.constructor)
            elif isinstance(item, Closure):
                done[key] = Closure(item.func_index, converted, item.name)
            else:
                done[key] = tuple(converted)
        return done[root]

    def _leaf(self, value: Any, spec: TypeSpec, where: str, path: Any) -> Any:
        spec = self.resolve(spec)
        kind = spec[0]
        # Converters get the path's text only when they fail (a conversion is deterministic,
        # so it fails again with the text): spelling it out for every leaf of a long list
        # would cost time proportional to its depth, each.
        if kind == "tensor":
            try:
                return convert_tensor(value, spec, where)
            except (TypeError, ValueError):
                return convert_tensor(value, spec, path_text(where, path))
        if kind == "any" or kind == "ivar":
            try:
                array = self.ctx.values.leaf(value, where)
            except (TypeError, ValueError):
                array = self.ctx.values.leaf(value, where, path)
            if kind == "ivar":
                self.bound[spec[1]] = ("tensor", array.shape, array.dtype.name)
            return array
        raise TypeError(
            f"{path_text(where, path)} expected {self._expected(spec)}, got {describe_value(value)}"
        )

    def _expected(self, spec: TypeSpec) -> str:
        kind = spec[0]
        if kind == "adt":
            name = self.describe(spec) if len(spec) == 3 else spec[1]
            return f"a {name} value (a vm.ADT)"
        if kind == "func":
            text = "" if len(spec) == 1 else f" {self.describe(spec)}"
            return f"a function{text} (a vm.Closure)"
        if kind == "tuple":
            return f"a tuple {self.describe(spec)}"
        return f"a tensor {self.describe(spec)}"

    def _expand(self, value: Any, spec: TypeSpec, where: str, path: Any) -> Any:
        """The children of container ``value`` as ``(child, spec, label)``, or its conversion.

        Checks the container itself: its kind, length, constructor or function.
        """
        spec = self.resolve(spec)
        kind = spec[0]
        if kind == "any":
            return self.ctx.values.convert(value, path_text(where, path))
        if kind == "ivar":
            spec = self._infer(value, spec, where, path)
            kind = spec[0]
        if kind == "tuple" and isinstance(value, (tuple, list)):
            fields = spec[1]
            if len(value) != len(fields):
                raise TypeError(
                    f"{path_text(where, path)} expected a tuple of {len(fields)} fields "
                    f"{self.describe(spec)}, got {len(value)} fields"
                )
            return [(child, fields[i], f" field {i}") for i, child in enumerate(value)]
        if kind == "adt" and isinstance(value, ADT):
            info = self._constructor(value, spec[1], where, path)
            if len(spec) == 3 and info.field_types is not None:
                field_specs = self._field_specs(info, spec[2])
            else:
                field_specs = (_ANY,) * info.arity
            return [(child, field_specs[i], f" field {i}") for i, child in enumerate(value.fields)]
        if (kind == "func" or kind == "ivar") and isinstance(value, Closure):
            return self._closure(value, spec, where, path)
        if kind == "tensor" and isinstance(value, (tuple, list)):
            hint = "; pass a numpy array (lists and tuples are for tuple parameters)"
            raise TypeError(
                f"{path_text(where, path)} expected {self._expected(spec)}, got "
                f"{describe_value(value)}{hint}"
            )
        raise TypeError(
            f"{path_text(where, path)} expected {self._expected(spec)}, got {describe_value(value)}"
        )

    def _infer(self, value: Any, var: TypeSpec, where: str, path: Any) -> TypeSpec:
        """Bind unbound variable ``var`` to the type of container ``value``'s shape."""
        if isinstance(value, (tuple, list)):
            spec: TypeSpec = ("tuple", tuple(self.fresh() for _ in value))
        elif isinstance(value, ADT):
            info = self._constructor(value, None, where, path)
            if info.field_types is None:
                spec = ("adt", info.type_name)
            else:
                spec = ("adt", info.type_name, tuple(self.fresh() for _ in range(info.type_arity)))
        else:  # a closure: the function's own types, bound in _closure
            return var
        self.bound[var[1]] = spec
        return spec

    def _constructor(
        self, value: ADT, type_name: str | None, where: str, path: Any
    ) -> ConstructorInfo:
        info = self.ctx.constructors.get(value.tag) if type(value.tag) is int else None
        if (
            info is not None
            and (type_name is None or info.type_name == type_name)
            and len(value.fields) == info.arity
        ):
            return info
        place = path_text(where, path)
        if info is None or (type_name is not None and info.type_name != type_name):
            if type_name is not None:
                names = self.ctx.constructor_names(type_name)
                raise TypeError(
                    f"{place} expected a {type_name} value (constructors {names}), got "
                    f"{describe_value(value)} with tag {value.tag!r}"
                )
            raise TypeError(
                f"{place} is a vm.ADT with tag {value.tag!r}, which is not a constructor of "
                "this executable"
            )
        if len(value.fields) != info.arity:
            raise TypeError(
                f"{place} is a {info.name} value with {len(value.fields)} fields; "
                f"{info.name} takes {info.arity}"
            )
        return info

    def _field_specs(self, info: ConstructorInfo, args: tuple[TypeSpec, ...]) -> tuple:
        key = (info.tag, args)
        specs = self._fields.get(key)
        if specs is None:
            assert info.field_types is not None

            def leaf(item: TypeSpec) -> TypeSpec | None:
                if item[0] != "var":
                    return None
                return args[item[1]] if item[1] < len(args) else _ANY

            specs = self._fields[key] = tuple(map_spec(t, leaf) for t in info.field_types)
        return specs

    def _closure(self, closure: Closure, spec: TypeSpec, where: str, path: Any) -> list:
        index = closure.func_index
        functions = self.ctx.functions
        place = path_text(where, path)  # once per closure, not per leaf
        if (
            isinstance(index, bool)
            or not isinstance(index, (int, np.integer))
            or not 0 <= index < len(functions)
        ):
            raise TypeError(
                f"{place} is a vm.Closure of function index {index!r}; this executable has "
                f"functions 0 to {len(functions) - 1}"
            )
        function = functions[int(index)]
        count = len(closure.captured)
        if count > len(function.params):
            raise TypeError(
                f"{place} is a closure of {function.name} with {count} captured values, but "
                f"{function.name} takes only {len(function.params)} parameters"
            )
        scope: dict[int, TypeSpec] = {}
        captured = [self.instantiate(t, scope) for t in function.param_types[:count]]
        own = (
            "func",
            tuple(self.instantiate(t, scope) for t in function.param_types[count:]),
            self.instantiate(function.ret_type, scope),
        )
        if spec[0] == "ivar":
            self.bound[spec[1]] = own
        elif len(spec) == 3 and not self.unify(own, spec):
            raise TypeError(
                f"{place} expected a function {self.describe(spec)}, got a closure of "
                f"{function.name} with {count} captured values, which is "
                f"{self.describe(own)}"
            )
        names = function.params
        return [
            (child, captured[i], f" (captured value {i} {names[i]!r} of {function.name})")
            for i, child in enumerate(closure.captured)
        ]


def check_closure_call(
    ctx: TypeContext, closure: Any, args: Sequence[Any], label: str
) -> tuple[int, list[Any]]:
    """The function index and full argument list (captured values, then ``args``) of a call.

    Captured values and arguments share the function's type variables.

    Raises
    ------
    TypeError, ValueError
        For a value that is not a closure of this executable, a wrong argument count,
        or a value that does not have its parameter's type.
    """
    if not isinstance(closure, Closure):
        raise TypeError(f"{label} needs a vm.Closure, got {describe_value(closure)}")
    session = _Session(ctx)
    root = session.fresh()
    converted = session.convert(closure, root, f"{label}: the closure")
    function = ctx.functions[int(converted.func_index)]
    count = len(converted.captured)
    rest = function.params[count:]
    if len(args) != len(rest):
        plural = "s" * (len(rest) != 1)
        raise TypeError(
            f"{label}: the closure of {function.name}() takes {len(rest)} argument{plural} "
            f"({', '.join(rest)}) but {len(args)} {'was' if len(args) == 1 else 'were'} given "
            f"(it captured {count} of the function's {len(function.params)} parameters)"
        )
    # Checking the closure bound ``root`` to its remaining signature, in the variables its
    # captured values were checked with: the arguments are checked in the same ones.
    params = session.bound[root[1]][1]
    values = list(converted.captured)
    for i, (arg, spec) in enumerate(zip(args, params)):
        where = f"closure of {function.name}(): argument {count + i} ({rest[i]!r})"
        values.append(session.convert(arg, spec, where))
    return int(converted.func_index), values
