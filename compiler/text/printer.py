"""Printer for the Relay text format (version 0.0.5): modules, expressions and types.

Compiler layer (``compiler.text``). Output follows TVM's printer: calls and shared
sub-expressions are bound in graph style (``%0 = add(%x, %y);``), lets print as
``let %x = ...;``, operator attributes print in schema order when they differ from the
default, large constants go to a trailing ``#[metadata]`` section, and the text parses
back (:mod:`compiler.text.parser`) to a structurally equal program.

How the graph-style layout is decided, before any text is produced:

1. Walk the DAG once and count, for every node, its references and the *block* each
   reference sits in. Blocks are the places statements can go: a function body, an if
   branch, a match clause, and a parenthesized ``(let ...; ...)`` group.
2. An atomic node (variable, global, operator, constructor, constant) is always written
   in place. Any other node is written in place only if it is referenced once from a
   let value or a block's result; otherwise it gets a temporary ``%N`` bound in the
   innermost block enclosing all its references (their lowest common ancestor), so
   the binding is in scope at every use and appears before the first one.

Printing is driven by :func:`compiler.text.trampoline.run` and text is assembled as
nested lists joined once at the end, so neither deep nesting nor long ``let`` chains
cost Python recursion or quadratic string copying.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np

from compiler.ir import hooks
from compiler.ir.attrs import Attrs
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
    Pattern,
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
    DTYPES,
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
from compiler.ir.visitor import free_vars
from compiler.op.registry import get_def
from compiler.text.lexer import KEYWORDS
from compiler.text.literals import format_scalar
from compiler.text.metadata import CONSTANT_KIND, encode_constants
from compiler.text.trampoline import Task, run

__all__ = ["expr_to_text", "module_to_text", "type_to_text"]

VERSION_HEADER = '#[version = "0.0.5"]'

# Deeper blocks are indented no further, so printing stays linear for very deep nesting.
_MAX_INDENT = 40
_NAME = re.compile(r"[A-Za-z0-9_]+")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RESERVED_TYPE_NAMES = KEYWORDS | {"Tensor", "_"} | set(DTYPES)

Doc = str | list  # nested lists of strings, flattened once by _flatten

_ATOMS = (Var, GlobalVar, Op, Constant, Constructor)

# Reference kinds: an ordinary operand, a let's value, the result of a block.
_ORD, _LETVAL, _TAIL = 0, 1, 2


def module_to_text(mod: object, show_meta_data: bool = True) -> str:
    """The text of an :class:`~compiler.ir.module.IRModule`: header, types, functions, meta.

    Parameters
    ----------
    mod : IRModule
        The module to print.
    show_meta_data : bool
        Append the ``#[metadata]`` section (needed to parse large constants back).
    """
    if not isinstance(mod, IRModule):
        raise TypeError(f"module_to_text expects an IRModule, got {type(mod).__name__}")
    printer = _Printer(type_names={gtv.name_hint for gtv in mod.type_definitions})
    items: list[Doc] = [printer.type_def(data) for data in mod.type_definitions.values()]
    items += [printer.definition(gvar, func) for gvar, func in mod.functions.items()]
    # One blank line between definitions, as TVM prints them.
    return _flatten(
        [VERSION_HEADER, "\n", _join(items, "\n"), printer.meta_section(show_meta_data)]
    )


def expr_to_text(node: Node, show_meta_data: bool = True, show_free_vars: bool = True) -> str:
    """The text of an expression, pattern or clause.

    Free variables of an expression are declared first (``free_var %x: T;``) so that
    :func:`compiler.text.parser.parse_expr` can read the text back; pass
    ``show_free_vars=False`` for a shorter display. ``show_meta_data`` appends the
    ``#[metadata]`` section when the expression holds large constants.
    """
    printer = _Printer(type_names=set())
    if isinstance(node, Pattern):
        return _flatten(run(printer.g_pattern(node)))
    if isinstance(node, Clause):
        return _flatten(run(printer.g_clause_alone(node)))
    if not isinstance(node, Expr):
        raise TypeError(f"expr_to_text expects a Relay expression, got {type(node).__name__}")
    body = printer.standalone(node, show_free_vars)
    return _flatten([body, printer.meta_section(show_meta_data)])


def type_to_text(ty: Type) -> str:
    """The text of a type (a :class:`TypeData` prints as its ``type`` definition)."""
    printer = _Printer(type_names=set())
    if isinstance(ty, TypeData):
        return _flatten(printer.type_def(ty))
    return run(printer.g_type(ty))


# ``str(node)``, ``str(type)`` and ``mod.astext()`` print through these.
hooks.register_printer(expr_to_text, type_to_text, module_to_text)


def _flatten(doc: Doc) -> str:
    out: list[str] = []
    stack: list[Doc] = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        else:
            stack.extend(reversed(item))
    return "".join(out)


def _indent(level: int) -> str:
    return "  " * min(level, _MAX_INDENT)


def local_name(name: str) -> str:
    """``%name``, quoted when ``name`` is not made of letters, digits and underscores."""
    return "%" + (name if _NAME.fullmatch(name) else _quote(name))


def global_name(name: str) -> str:
    """``@name``, quoted when ``name`` is not an identifier."""
    return "@" + (name if _IDENT.fullmatch(name) else _quote(name))


def _quote(text: str) -> str:
    out = ['"']
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def format_attr_value(value: object) -> str:
    """An attribute value as the parser reads it: ints, floats, strings, bools, None, lists."""
    if value is None:
        return "None"
    if isinstance(value, (bool, np.bool_)):
        return "True" if value else "False"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return repr(float(value))  # always has '.', 'e', 'inf' or 'nan': never reads as an int
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, (tuple, list)):
        parts: list[str] = []
        # Attribute values are small, but keep even this iterative.
        stack: list[object] = [("item", value)]
        while stack:
            kind, item = stack.pop()  # type: ignore[misc]
            if kind == "text":
                parts.append(item)  # type: ignore[arg-type]
            elif isinstance(item, (tuple, list)):
                stack.append(("text", "]"))
                for index in range(len(item) - 1, -1, -1):
                    stack.append(("item", item[index]))
                    if index:
                        stack.append(("text", ", "))
                stack.append(("text", "["))
            else:
                parts.append(format_attr_value(item))
        return "".join(parts)
    return _quote(str(value))


def _same_attr(a: object, b: object) -> bool:
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same_attr(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


class _Block:
    """A place where statements go; ``depth`` is its depth in the block tree."""

    __slots__ = ("depth", "indent", "parent", "stmts")

    def __init__(self, parent: _Block | None, indent: int) -> None:
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.indent = indent
        self.stmts: list[Doc] = []


def _lca(a: _Block, b: _Block) -> _Block:
    while a.depth > b.depth:
        a = a.parent  # type: ignore[assignment]
    while b.depth > a.depth:
        b = b.parent  # type: ignore[assignment]
    while a is not b:
        a = a.parent  # type: ignore[assignment]
        b = b.parent  # type: ignore[assignment]
    return a


class _Names:
    """Fresh names for one top-level definition: locals, temporaries and type variables."""

    def __init__(self, type_names: set[str]) -> None:
        self.used: set[str] = set()
        self.vars: dict[Var, str] = {}
        self.next_temp = 0
        self.used_types: set[str] = set(_RESERVED_TYPE_NAMES) | type_names
        self.tvars: dict[TypeVar, str] = {}

    def var(self, var: Var) -> str:
        name = self.vars.get(var)
        if name is None:
            name = self._fresh(var.name_hint or "v", self.used)
            self.vars[var] = name
        return local_name(name)

    def temp(self) -> str:
        while str(self.next_temp) in self.used:
            self.next_temp += 1
        name = str(self.next_temp)
        self.used.add(name)
        self.next_temp += 1
        return "%" + name

    def tvar(self, tvar: TypeVar) -> str:
        name = self.tvars.get(tvar)
        if name is None:
            hint = re.sub(r"[^A-Za-z0-9_]", "_", tvar.name_hint) or "T"
            if not _IDENT.fullmatch(hint):
                hint = "T" + hint
            name = self._fresh(hint, self.used_types)
            self.tvars[tvar] = name
        return name

    @staticmethod
    def _fresh(hint: str, used: set[str]) -> str:
        name = hint
        suffix = 0
        while name in used:
            suffix += 1
            name = f"{hint}_{suffix}"
        used.add(name)
        return name


class _Printer:
    """Prints definitions of one module (or one expression); owns the meta table."""

    def __init__(self, type_names: set[str]) -> None:
        self.type_names = type_names
        self.meta: list[np.ndarray] = []
        self.meta_index: dict[int, int] = {}
        self.meta_keep: list[Constant] = []  # keeps ids in meta_index valid
        self.names = _Names(type_names)
        self._reset_plan()

    def _reset_plan(self) -> None:
        self.place: dict[int, _Block] = {}
        self.count: dict[int, int] = {}
        self.kind: dict[int, int] = {}
        self.inline: set[int] = set()
        self.own_block: dict[int, _Block] = {}
        self.slot_block: dict[tuple[int, int], _Block] = {}
        self.bound: dict[int, str] = {}
        self.keep: list[Node] = []

    # --- top level ---------------------------------------------------------------------------

    def definition(self, gvar: GlobalVar, func: Function) -> Doc:
        self.names = _Names(self.type_names)
        self._reset_plan()
        block = _Block(None, 1)
        self.plan(func.body, block)
        head = run(self.g_signature(func))
        body = run(self.g_tail(block, func.body))
        return ["def ", global_name(gvar.name_hint), head, " {\n", body, "\n}\n"]

    def standalone(self, expr: Expr, show_free_vars: bool) -> Doc:
        self.names = _Names(self.type_names)
        self._reset_plan()
        decls: list[Doc] = []
        for var in free_vars(expr):
            binder = run(self.g_binder(var))
            if show_free_vars:
                decls += ["free_var ", binder, ";\n"]
        block = _Block(None, 0)
        self.plan(expr, block)
        return [decls, run(self.g_tail(block, expr))]

    def type_def(self, data: TypeData) -> Doc:
        self.names = _Names(self.type_names)
        params = [self.names.tvar(tv) for tv in data.type_vars]
        head = f"type {data.header.name_hint}"
        if params:
            head += "[" + ", ".join(params) + "]"
        lines: list[Doc] = [head, " {\n"]
        for ctor in data.constructors:
            assert isinstance(ctor, Constructor)
            fields = [run(self.g_type(t)) for t in ctor.inputs]
            text = ctor.name_hint + (f"({', '.join(fields)})" if fields else "")
            lines += ["  ", text, ",\n"]
        lines.append("}\n")
        return lines

    def meta_section(self, show: bool) -> Doc:
        if not self.meta:
            return ""
        if not show:
            return "\n// meta data omitted; print with show_meta_data=True to include it\n"
        return ["\n#[metadata]\n", encode_constants(self.meta)]

    # --- layout plan -------------------------------------------------------------------------

    def plan(self, root: Expr, root_block: _Block) -> None:
        """Decide, for every node under ``root``, whether it is written in place or bound
        to a temporary, and in which block (see the module docstring)."""
        order: list[Expr] = []
        seen: set[int] = set()
        stack: list[tuple[Expr, bool]] = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                order.append(node)
                continue
            if id(node) in seen:
                continue
            seen.add(id(node))
            self.keep.append(node)
            stack.append((node, True))
            for child in _expr_children(node):
                if id(child) not in seen:
                    stack.append((child, False))
        self._add_ref(root, _TAIL, root_block)
        # Reverse post-order is topological: every node after all nodes that use it.
        for node in reversed(order):
            if isinstance(node, _ATOMS):
                continue
            key = id(node)
            block = self.place[key]
            inline = self.count[key] == 1 and self.kind[key] != _ORD
            if inline:
                self.inline.add(key)
            if isinstance(node, Let):
                if inline and self.kind[key] == _TAIL:
                    own = block  # continues the enclosing block's statement list
                else:
                    own = _Block(block, block.indent + 1)  # a parenthesized group
                self.own_block[key] = own
                self._add_ref(node.value, _LETVAL, own)
                self._add_ref(node.body, _TAIL, own)
            elif isinstance(node, If):
                self._add_ref(node.cond, _ORD, block)
                for slot, branch in enumerate((node.true_branch, node.false_branch)):
                    inner = _Block(block, block.indent + 1)
                    self.slot_block[(key, slot)] = inner
                    self._add_ref(branch, _TAIL, inner)
            elif isinstance(node, Match):
                # A tuple scrutinee used once stays in place: ``match (%a, %b) {...}``.
                data_kind = _LETVAL if isinstance(node.data, Tuple) else _ORD
                self._add_ref(node.data, data_kind, block)
                for slot, clause in enumerate(node.clauses):
                    inner = _Block(block, block.indent + 2)
                    self.slot_block[(key, slot)] = inner
                    self._add_ref(clause.rhs, _TAIL, inner)
            elif isinstance(node, Function):
                inner = _Block(block, block.indent + 1)
                self.slot_block[(key, 0)] = inner
                self._add_ref(node.body, _TAIL, inner)
            else:
                for child in _expr_children(node):
                    self._add_ref(child, _ORD, block)

    def _add_ref(self, node: Expr, kind: int, block: _Block) -> None:
        if isinstance(node, _ATOMS):
            return
        key = id(node)
        count = self.count.get(key, 0)
        self.count[key] = count + 1
        if count == 0:
            self.kind[key] = kind
            self.place[key] = block
        else:
            self.place[key] = _lca(self.place[key], block)

    # --- expressions -------------------------------------------------------------------------

    def g_tail(self, block: _Block, expr: Expr) -> Task[Doc]:
        """Print the let chain starting at ``expr`` into ``block`` and render the block."""
        while isinstance(expr, Let) and self.own_block.get(id(expr)) is block:
            binder = yield self.g_binder(expr.var)
            value = yield self.g_ref(expr.value)
            block.stmts.append(["let ", binder, " = ", value, ";"])
            expr = expr.body
        result = yield self.g_ref(expr)
        pad = _indent(block.indent)
        lines: list[Doc] = []
        for stmt in block.stmts:
            lines += [pad, stmt, "\n"]
        lines += [pad, result]
        return lines

    def g_ref(self, node: Expr) -> Task[Doc]:
        """The text standing for ``node`` where it is used: in place or a temporary."""
        atom = self.atom(node)
        if atom is not None:
            return atom
        key = id(node)
        if key in self.bound:
            return self.bound[key]
        value = yield self.g_value(node)
        if key in self.inline:
            return value
        name = self.names.temp()
        self.place[key].stmts.append([name, " = ", value, ";"])
        self.bound[key] = name
        return name

    def atom(self, node: Expr) -> str | None:
        if isinstance(node, Var):
            return self.names.var(node)
        if isinstance(node, GlobalVar):
            return global_name(node.name_hint)
        if isinstance(node, Op):
            return node.name
        if isinstance(node, Constructor):
            # Bare ``Nil`` reads back as the applied constructor (TVM's rule), so a
            # constructor without fields used as a function value needs the ``fn`` prefix.
            return node.name_hint if node.inputs else f"fn {node.name_hint}"
        if isinstance(node, Constant):
            data = node.data
            if data.ndim == 0:
                text = format_scalar(data)
                if text is not None:
                    return text
            index = self.meta_index.get(id(node))
            if index is None:
                index = len(self.meta)
                self.meta.append(data)
                self.meta_index[id(node)] = index
                self.meta_keep.append(node)
            return f"meta[{CONSTANT_KIND}][{index}]"
        return None

    def g_value(self, node: Expr) -> Task[Doc]:
        """The full text of a non-atomic node."""
        key = id(node)
        block = self.place[key]
        pad = _indent(block.indent)
        if isinstance(node, Call):
            if isinstance(node.op, Constructor):
                callee: Doc = node.op.name_hint
            else:
                callee = yield self.g_ref(node.op)
            items: list[Doc] = []
            for arg in node.args:
                items.append((yield self.g_ref(arg)))
            if isinstance(node.op, Op):
                items += _op_attrs(node.op, node.attrs)
            elif node.attrs:
                items += [f"{k}={format_attr_value(v)}" for k, v in node.attrs.items()]
            return [callee, "(", _join(items), ")"]
        if isinstance(node, Tuple):
            fields: list[Doc] = []
            for field in node.fields:
                fields.append((yield self.g_ref(field)))
            return ["(", _join(fields), ",)" if len(fields) == 1 else ")"]
        if isinstance(node, TupleGetItem):
            value = yield self.g_ref(node.tuple_value)
            if isinstance(value, str) and value[:1] in "-0123456789":
                value = f"({value})"  # 1.0 would read as a float literal, (1).0 does not
            return [value, f".{node.index}"]
        if isinstance(node, If):
            cond = yield self.g_ref(node.cond)
            then = yield self.g_tail(self.slot_block[(key, 0)], node.true_branch)
            other = yield self.g_tail(self.slot_block[(key, 1)], node.false_branch)
            return ["if (", cond, ") {\n", then, "\n", pad, "} else {\n", other, "\n", pad, "}"]
        if isinstance(node, Match):
            data = yield self.g_ref(node.data)
            keyword = "match" if node.complete else "match?"
            if isinstance(node.data, Tuple) and not isinstance(data, str):
                out: list[Doc] = [keyword, " ", data, " {\n"]  # match (%a, %b), as TVM prints
            else:
                out = [keyword, " (", data, ") {\n"]
            inner_pad = _indent(block.indent + 1)
            for slot, clause in enumerate(node.clauses):
                pattern = yield self.g_pattern(clause.lhs)
                rhs = yield self.g_tail(self.slot_block[(key, slot)], clause.rhs)
                out += [inner_pad, pattern, " => {\n", rhs, "\n", inner_pad, "},\n"]
            out += [pad, "}"]
            return out
        if isinstance(node, Function):
            head = yield self.g_signature(node)
            body = yield self.g_tail(self.slot_block[(key, 0)], node.body)
            return ["fn ", head, " {\n", body, "\n", pad, "}"]
        if isinstance(node, Let):
            body = yield self.g_tail(self.own_block[key], node)
            return ["(\n", body, "\n", pad, ")"]
        raise TypeError(f"cannot print {type(node).__name__} as a Relay expression")

    def g_signature(self, func: Function) -> Task[Doc]:
        """``[A](%x: T, attr=v) -> R`` of a function (allocates the parameter names)."""
        head: list[Doc] = []
        if func.type_params:
            head.append("[" + ", ".join(self.names.tvar(tv) for tv in func.type_params) + "]")
        items: list[Doc] = []
        for param in func.params:
            items.append((yield self.g_binder(param)))
        items += [f"{k}={format_attr_value(v)}" for k, v in func.attrs.items()]
        head += ["(", _join(items), ")"]
        if func.ret_type is not None:
            head += [" -> ", (yield self.g_type(func.ret_type))]
        return head

    def g_binder(self, var: Var) -> Task[Doc]:
        name = self.names.var(var)
        if var.type_annotation is None:
            return name
        return [name, ": ", (yield self.g_type(var.type_annotation))]

    # --- patterns ----------------------------------------------------------------------------

    def g_pattern(self, pattern: Pattern) -> Task[Doc]:
        if isinstance(pattern, PatternWildcard):
            return "_"
        if isinstance(pattern, PatternVar):
            return (yield self.g_binder(pattern.var))
        subs: list[Doc] = []
        for sub in pattern.patterns:  # type: ignore[attr-defined]
            subs.append((yield self.g_pattern(sub)))
        if isinstance(pattern, PatternConstructor):
            if not subs:
                return pattern.constructor.name_hint
            return [pattern.constructor.name_hint, "(", _join(subs), ")"]
        if isinstance(pattern, PatternTuple):
            return ["(", _join(subs), ",)" if len(subs) == 1 else ")"]
        raise TypeError(f"cannot print pattern {type(pattern).__name__}")

    def g_clause_alone(self, clause: Clause) -> Task[Doc]:
        pattern = yield self.g_pattern(clause.lhs)
        block = _Block(None, 1)
        self.plan(clause.rhs, block)
        rhs = yield self.g_tail(block, clause.rhs)
        return [pattern, " => {\n", rhs, "\n}"]

    # --- types -------------------------------------------------------------------------------

    def g_type(self, ty: Type) -> Task[str]:
        if isinstance(ty, TensorType):
            if not ty.shape:
                return ty.dtype
            dims = ", ".join("?" if isinstance(d, Any) else str(d) for d in ty.shape)
            return f"Tensor[({dims}), {ty.dtype}]"
        if isinstance(ty, TupleType):
            fields = []
            for field in ty.fields:
                fields.append((yield self.g_type(field)))
            return "(" + ", ".join(fields) + (",)" if len(fields) == 1 else ")")
        if isinstance(ty, FuncType):
            head = "fn "
            if ty.type_params:
                head += "[" + ", ".join(self.names.tvar(tv) for tv in ty.type_params) + "]"
            args = []
            for arg in ty.arg_types:
                args.append((yield self.g_type(arg)))
            ret = yield self.g_type(ty.ret_type)
            return f"{head}({', '.join(args)}) -> {ret}"
        if isinstance(ty, TypeVar):
            return self.names.tvar(ty)
        if isinstance(ty, GlobalTypeVar):
            return ty.name_hint
        if isinstance(ty, TypeCall):
            args = []
            for arg in ty.args:
                args.append((yield self.g_type(arg)))
            return f"{ty.func.name_hint}[{', '.join(args)}]"
        if isinstance(ty, IncompleteType):
            return "_"
        if isinstance(ty, TypeData):
            return ty.header.name_hint
        raise TypeError(f"cannot print {type(ty).__name__} as a Relay type")


def _expr_children(node: Expr) -> Iterable[Expr]:
    """Expression operands in source order (binders and patterns are not operands)."""
    if isinstance(node, Call):
        return (node.op, *node.args)
    if isinstance(node, Tuple):
        return node.fields
    if isinstance(node, TupleGetItem):
        return (node.tuple_value,)
    if isinstance(node, Let):
        return (node.value, node.body)
    if isinstance(node, If):
        return (node.cond, node.true_branch, node.false_branch)
    if isinstance(node, Match):
        return (node.data, *(c.rhs for c in node.clauses))
    if isinstance(node, Function):
        return (node.body,)
    if isinstance(node, _ATOMS):
        return ()
    raise TypeError(f"cannot print {type(node).__name__} as a Relay expression")


def _op_attrs(op: Op, attrs: Attrs) -> list[Doc]:
    """``name=value`` for attributes that differ from the operator's defaults, in schema order."""
    try:
        specs = get_def(op.name).attrs
    except ValueError:
        specs = ()
    out: list[Doc] = []
    known = set()
    for spec in specs:
        known.add(spec.name)
        if spec.name in attrs and not _same_attr(attrs[spec.name], spec.default):
            out.append(f"{spec.name}={format_attr_value(attrs[spec.name])}")
    out += [f"{k}={format_attr_value(v)}" for k, v in attrs.items() if k not in known]
    return out


def _join(items: list[Doc], separator: str = ", ") -> Doc:
    out: list[Doc] = []
    for index, item in enumerate(items):
        if index:
            out.append(separator)
        out.append(item)
    return out
