"""Short, robust text for types and expressions inside type-error messages.

Compiler layer (``compiler.typing``).

Error messages must never fail, so this module does not depend on the text printer
for types (it writes the text format's spelling itself, with ``_`` for a type not
inferred yet) and only tries the printer for expressions, falling back to a
depth-limited sketch such as ``add(%x, %y)`` when the printer fails.
:func:`value_type_text` is the spelling the executors' argument checks use.
Everything here is iterative or depth-bounded.
"""

from __future__ import annotations

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
from compiler.ir.types import (
    Any,
    FuncType,
    GlobalTypeVar,
    IncompleteType,
    TensorType,
    TupleType,
    Type,
    TypeCall,
    TypeVar,
)
from compiler.op.typerel import fmt_type
from compiler.text.printer import expr_to_text

#: Longest expression text quoted in a message.
MAX_EXPR_CHARS = 200


def _shape_text(shape: tuple) -> str:
    dims = ["?" if isinstance(d, Any) else str(d) for d in shape]
    if len(dims) == 1:
        return f"({dims[0]},)"
    return "(" + ", ".join(dims) + ")"


def type_text(ty: Type) -> str:
    """``ty`` in the Relay text format's spelling; ``_`` marks a type not inferred yet."""
    # Post-order over the type tree with an explicit stack: types may nest deeply.
    done: dict[int, str] = {}
    stack: list[tuple[Type, bool]] = [(ty, False)]
    while stack:
        t, expanded = stack.pop()
        if id(t) in done and not expanded:
            continue
        kids: tuple[Type, ...] = ()
        if isinstance(t, TupleType):
            kids = t.fields
        elif isinstance(t, FuncType):
            kids = (*t.arg_types, t.ret_type)
        elif isinstance(t, TypeCall):
            kids = t.args
        if kids and not expanded:
            stack.append((t, True))
            stack.extend((k, False) for k in reversed(kids) if id(k) not in done)
            continue
        parts = [done[id(k)] for k in kids]
        done[id(t)] = _one_type(t, parts)
    return done[id(ty)]


def value_type_text(ty: Type | None) -> str:
    """A type as the text format writes it (without the printer), ``any value`` for None.

    What argument checks name as expected (``relay.create_executor``, ``relay.build``).
    """
    if ty is None:
        return "any value"
    if isinstance(ty, TypeCall):
        return f"{ty.func.name_hint}[{', '.join(value_type_text(a) for a in ty.args)}]"
    if isinstance(ty, (GlobalTypeVar, TypeVar)):
        return ty.name_hint
    if isinstance(ty, TupleType):
        inner = ", ".join(value_type_text(f) for f in ty.fields)
        return f"({inner},)" if len(ty.fields) == 1 else f"({inner})"
    if isinstance(ty, FuncType):
        args = ", ".join(value_type_text(a) for a in ty.arg_types)
        return f"fn ({args}) -> {value_type_text(ty.ret_type)}"
    return fmt_type(ty)


def _one_type(t: Type, parts: list[str]) -> str:
    if isinstance(t, TensorType):
        return f"Tensor[{_shape_text(t.shape)}, {t.dtype}]"
    if isinstance(t, TupleType):
        return f"({parts[0]},)" if len(parts) == 1 else "(" + ", ".join(parts) + ")"
    if isinstance(t, FuncType):
        params = ""
        if t.type_params:
            params = "[" + ", ".join(p.name_hint for p in t.type_params) + "]"
        return f"fn {params}({', '.join(parts[:-1])}) -> {parts[-1]}"
    if isinstance(t, TypeCall):
        if not parts:
            return t.func.name_hint
        return f"{t.func.name_hint}[{', '.join(parts)}]"
    if isinstance(t, (TypeVar, GlobalTypeVar)):
        return t.name_hint
    if isinstance(t, IncompleteType):
        return "_"
    return type(t).__name__


def expr_text(node: Node) -> str:
    """``node`` as text on one line, at most :data:`MAX_EXPR_CHARS` characters."""
    try:
        text = expr_to_text(node, show_meta_data=False, show_free_vars=False)
    except Exception:  # a node the printer rejects is still named by its sketch
        text = sketch(node)
    text = " ".join(text.split())
    if len(text) > MAX_EXPR_CHARS:
        text = text[: MAX_EXPR_CHARS - 3] + "..."
    return text


def sketch(node: Node, depth: int = 3) -> str:
    """A depth-limited rendering of ``node``: sub-expressions deeper than ``depth`` are ``...``."""
    if depth < 0:
        return "..."
    d = depth - 1
    if isinstance(node, Var):
        return "%" + node.name_hint
    if isinstance(node, GlobalVar):
        return "@" + node.name_hint
    if isinstance(node, Op):
        return node.name
    if isinstance(node, Constructor):
        return node.name_hint
    if isinstance(node, Constant):
        if node.data.ndim == 0:
            return f"{node.data.item()!r}"
        return f"meta[Constant][{_shape_text(node.data.shape)}, {node.data.dtype}]"
    if isinstance(node, Call):
        args = ", ".join(sketch(a, d) for a in node.args[:6])
        if len(node.args) > 6:
            args += ", ..."
        return f"{sketch(node.op, d)}({args})"
    if isinstance(node, Tuple):
        fields = [sketch(f, d) for f in node.fields[:6]]
        if len(node.fields) > 6:
            fields.append("...")
        return f"({fields[0]},)" if len(fields) == 1 else "(" + ", ".join(fields) + ")"
    if isinstance(node, TupleGetItem):
        return f"{sketch(node.tuple_value, d)}.{node.index}"
    if isinstance(node, Let):
        return f"let %{node.var.name_hint} = {sketch(node.value, d)}; {sketch(node.body, d)}"
    if isinstance(node, If):
        return f"if ({sketch(node.cond, d)}) {{ ... }} else {{ ... }}"
    if isinstance(node, Function):
        params = ", ".join("%" + p.name_hint for p in node.params)
        return f"fn ({params}) {{ {sketch(node.body, d)} }}"
    if isinstance(node, Match):
        return f"match ({sketch(node.data, d)}) {{ ... }}"
    if isinstance(node, Clause):
        return f"{sketch(node.lhs, d)} => {sketch(node.rhs, d)}"
    if isinstance(node, PatternWildcard):
        return "_"
    if isinstance(node, PatternVar):
        return "%" + node.var.name_hint
    if isinstance(node, PatternConstructor):
        if not node.patterns:
            return node.constructor.name_hint
        inner = ", ".join(sketch(p, d) for p in node.patterns)
        return f"{node.constructor.name_hint}({inner})"
    if isinstance(node, PatternTuple):
        return "(" + ", ".join(sketch(p, d) for p in node.patterns) + ")"
    return type(node).__name__


def where(node: Node | None, context: str | None = None) -> str:
    """`` at line:col`` when ``node`` has a span, else `` in function <context>`` or nothing."""
    span = getattr(node, "span", None)
    if span is not None:
        return f" at {span.line}:{span.column}"
    if context:
        return f" in function {context}"
    return ""
