"""Parser for TVM's Relay text format (version 0.0.5), building an :class:`IRModule`.

Compiler layer (``compiler.text``). Hand-written recursive descent over the tokens of
:mod:`compiler.text.lexer`. Nested constructs are written as generators and driven by
:func:`compiler.text.trampoline.run`, so no input, however deeply nested, exhausts the
Python stack; ``let``/``%N =``/``;`` sequences are parsed by a loop.

Semantics follow TVM:

* ``%0 = expr; rest`` is a *graph binding*, not a ``Let``: every later ``%0`` is the very
  same expression node, so the result is a DAG.
* ``let %x = v; body`` is a ``Let``; ``e1; e2`` is ``let %_ = e1; e2``. A let whose value
  is a ``fn`` may call itself (recursive closures); otherwise the value sees the outer scope.
* Operator calls have their attributes validated and completed by the operator's schema.
* A constructor without fields written bare (``Nil``) is that constructor applied to no
  arguments, as TVM's parser reads it; ``match (%a, %b) {...}`` matches the tuple of the
  values, with tuple patterns such as ``(Cons(%x, _), Nil)``.
* Every name must resolve: an undeclared ``%x``, an unknown ``@f``, constructor, type,
  operator or attribute is a :class:`RelaySyntaxError` naming it and suggesting close
  matches.

Extensions over TVM: the ``#[version]`` header is optional, names may be quoted
(``%"input.1"``, ``@"my-func"``), ``else if`` chains, ``free_var %x: T;``
declarations at the start of :func:`parse_expr` input, and ``fn Nil`` for a constructor
itself as a function value (TVM's text cannot write it for a constructor without fields;
the printer needs it to print such a value back).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

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
    Span,
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
from compiler.op.registry import get_def, get_op, list_ops
from compiler.text.errors import RelaySyntaxError, Source
from compiler.text.lexer import KEYWORDS, Token, tokenize
from compiler.text.literals import LiteralError, parse_scalar
from compiler.text.metadata import CONSTANT_KIND, decode_metadata
from compiler.text.trampoline import Task, run

__all__ = ["RelaySyntaxError", "fromtext", "parse", "parse_expr", "parse_type"]

VERSION = "0.0.5"
#: Versions the parser reads: TVM's own std/prelude.rly still carries "0.0.4", which TVM's
#: parser reads with the 0.0.5 grammar, and so does this one.
READABLE_VERSIONS = ("0.0.4", VERSION)

#: Infix operator -> (precedence, Relay operator). Higher binds tighter; all left-associative.
BINARY_OPS: dict[str, tuple[int, str]] = {
    "*": (4, "multiply"),
    "/": (4, "divide"),
    "+": (3, "add"),
    "-": (3, "subtract"),
    "<": (2, "less"),
    ">": (2, "greater"),
    "<=": (2, "less_equal"),
    ">=": (2, "greater_equal"),
    "==": (1, "equal"),
    "!=": (1, "not_equal"),
}

_OPENERS = frozenset("([{")
_CLOSERS = frozenset(")]}")

# Names that can never be a type variable, constructor or type name.
_RESERVED = KEYWORDS | {"Tensor", "_"} | set(DTYPES)


def fromtext(
    text: str,
    source_name: str = "<string>",
    *,
    init_module: IRModule | None = None,
    init_meta_table: Mapping[str, list[Constant]] | None = None,
) -> IRModule:
    """Parse a module written in the Relay text format.

    Parameters
    ----------
    text : str
        The program: an optional ``#[version = "0.0.5"]`` header, ``def`` and ``type``
        definitions in any order, and an optional trailing ``#[metadata]`` section.
    source_name : str
        The name error messages use for the text (a file name, say).
    init_module : IRModule, optional
        A module whose functions, types and constructors the text may use. The result
        is a new module holding those definitions plus the parsed ones; ``init_module``
        itself is not changed.
    init_meta_table : mapping, optional
        ``{"relay.Constant": [constants]}`` for ``meta[relay.Constant][i]`` references
        when the text has no ``#[metadata]`` section.

    Returns
    -------
    IRModule
        The parsed module.

    Raises
    ------
    RelaySyntaxError
        With ``lineno``, ``offset`` and a message naming what was expected and found.
    """
    parser = _Parser(Source(text, source_name), init_module, init_meta_table)
    return parser.parse_module()


def parse(
    source: str,
    source_name: str = "<string>",
    init_module: IRModule | None = None,
    init_meta_table: Mapping[str, list[Constant]] | None = None,
) -> IRModule:
    """TVM's ``tvm.parser.parse``: the same as :func:`fromtext`."""
    return fromtext(source, source_name, init_module=init_module, init_meta_table=init_meta_table)


def parse_expr(
    text: str,
    source_name: str = "<string>",
    *,
    init_module: IRModule | None = None,
    init_meta_table: Mapping[str, list[Constant]] | None = None,
) -> Expr:
    """Parse one expression (a sequence of bindings ending in an expression).

    The text may start with the version header and ``free_var %x: T;`` declarations of
    the free variables it uses, and may end with a ``#[metadata]`` section. Globals and
    constructors resolve against ``init_module`` when given.
    """
    parser = _Parser(Source(text, source_name), init_module, init_meta_table)
    return parser.parse_standalone_expr()


def parse_type(text: str, source_name: str = "<string>") -> Type:
    """Parse a type such as ``Tensor[(?, 10), float32]`` or ``fn (int32) -> bool``."""
    parser = _Parser(Source(text, source_name), None, None)
    ty = run(parser.g_type())
    parser.expect_eof("after the type")
    return ty


class _Parser:
    """Parser state: tokens, the position, and the scopes of every kind of name."""

    def __init__(
        self,
        source: Source,
        init_module: IRModule | None,
        init_meta_table: Mapping[str, list[Constant]] | None,
    ) -> None:
        self.source = source
        self.tokens = tokenize(source)
        self.tokens.append(self.tokens[-1])  # lets peek(1) at the end see eof, not fail
        self.pos = 0
        self.init_module = init_module
        self.meta = {kind: list(nodes) for kind, nodes in (init_meta_table or {}).items()}
        last = self.tokens[-3] if len(self.tokens) > 2 else None
        if last is not None and last.kind == "metadata":
            self.meta.update(decode_metadata(str(last.value), source, last.end))
        # Local names (%x, %0) and type variables are lexically scoped: a stack of
        # bindings per name, plus frames recording which names each scope pushed.
        self.locals: dict[str, list[Expr]] = {}
        self.local_frames: list[list[str]] = []
        self.tvars: dict[str, list[TypeVar]] = {}
        self.tvar_frames: list[list[str]] = []
        self.globals: dict[str, GlobalVar] = {}
        self.types: dict[str, GlobalTypeVar] = {}
        self.ctors: dict[str, Constructor] = {}
        self._ops: set[str] | None = None
        if init_module is not None:
            for gvar in init_module.get_global_vars():
                self.globals[gvar.name_hint] = gvar
            for gtv, data in init_module.type_definitions.items():
                self.types[gtv.name_hint] = gtv
                for ctor in data.constructors:
                    assert isinstance(ctor, Constructor)
                    self.ctors[ctor.name_hint] = ctor

    # --- tokens ------------------------------------------------------------------------------

    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[self.pos + ahead]  # the token list ends with two eof tokens

    def advance(self) -> Token:
        tok = self.tokens[self.pos]
        if tok.kind != "eof":
            self.pos += 1
        return tok

    def error(self, tok: Token | int, message: str) -> RelaySyntaxError:
        pos = tok if isinstance(tok, int) else tok.pos
        return self.source.error(pos, message)

    def expected(self, what: str, context: str = "") -> RelaySyntaxError:
        tok = self.peek()
        where = f" {context}" if context else ""
        return self.error(tok, f"expected {what}{where}, found {tok.describe()}")

    def where(self, tok: Token) -> str:
        line, col = self.source.location(tok.pos)
        return f"{line}:{col}"

    def accept(self, punct: str) -> Token | None:
        tok = self.peek()
        if tok.is_punct(punct):
            return self.advance()
        return None

    def expect(self, punct: str, context: str = "") -> Token:
        tok = self.peek()
        if not tok.is_punct(punct):
            raise self.expected(f"'{punct}'", context)
        return self.advance()

    def expect_word(self, word: str, context: str = "") -> Token:
        tok = self.peek()
        if not tok.is_word(word):
            raise self.expected(f"'{word}'", context)
        return self.advance()

    def expect_close(self, punct: str, opener: Token, what: str) -> Token:
        return self.expect(punct, f"to close {what} opened at {self.where(opener)}")

    def expect_eof(self, context: str) -> None:
        tok = self.peek()
        if tok.kind == "metadata":
            self.advance()
            tok = self.peek()
        if tok.kind != "eof":
            raise self.error(tok, f"expected end of input {context}, found {tok.describe()}")

    def span(self, tok: Token) -> Span:
        line, col = self.source.location(tok.pos)
        return Span(line, col, self.source.name)

    def spanned(self, node: Node, tok: Token) -> Node:
        node.span = self.span(tok)
        return node

    # --- scopes ------------------------------------------------------------------------------

    def push_scope(self) -> None:
        self.local_frames.append([])
        self.tvar_frames.append([])

    def pop_scope(self) -> None:
        for name in self.local_frames.pop():
            stack = self.locals[name]
            stack.pop()
            if not stack:
                del self.locals[name]
        for name in self.tvar_frames.pop():
            tstack = self.tvars[name]
            tstack.pop()
            if not tstack:
                del self.tvars[name]

    def bind_local(self, name: str, value: Expr) -> None:
        self.locals.setdefault(name, []).append(value)
        self.local_frames[-1].append(name)

    def bind_tvar(self, name: str, tvar: TypeVar) -> None:
        self.tvars.setdefault(name, []).append(tvar)
        self.tvar_frames[-1].append(name)

    def op_names(self) -> set[str]:
        if self._ops is None:
            self._ops = set(list_ops())
        return self._ops

    # --- module ------------------------------------------------------------------------------

    def parse_header(self) -> None:
        """Accept an optional ``#[version = "0.0.5"]``."""
        if not self.peek().is_punct("#"):
            return
        hash_tok = self.advance()
        context = 'in the header #[version = "0.0.5"]'
        self.expect("[", context)
        self.expect_word("version", context)
        self.expect("=", context)
        tok = self.peek()
        if tok.kind != "string":
            raise self.expected('a version string such as "0.0.5"', context)
        self.advance()
        if tok.value not in READABLE_VERSIONS:
            raise self.error(
                tok,
                f'unsupported Relay text format version "{tok.value}"; expected "{VERSION}" '
                '(or "0.0.4", read the same way)',
            )
        self.expect_close("]", hash_tok, "the version header")

    def scan_items(self) -> list[tuple[str, int]]:
        """Find each top-level ``def``/``type`` (kind, token index) without parsing it,
        so that definitions may refer to globals and types defined later in the text."""
        items: list[tuple[str, int]] = []
        index = self.pos
        tokens = self.tokens
        while True:
            tok = tokens[index]
            if tok.kind in ("eof", "metadata"):
                return items
            if not (tok.is_word("def") or tok.is_word("type")):
                raise self.error(
                    tok,
                    f"expected 'def', 'type' or end of input at the top level, "
                    f"found {tok.describe()}",
                )
            items.append((str(tok.value), index))
            depth = 0
            index += 1
            while tokens[index].kind not in ("eof", "metadata"):
                t = tokens[index]
                index += 1
                if t.kind != "punct":
                    continue
                if t.value in _OPENERS:
                    depth += 1
                elif t.value in _CLOSERS:
                    depth -= 1
                    if depth <= 0 and t.value == "}":
                        break

    def parse_module(self) -> IRModule:
        self.parse_header()
        items = self.scan_items()
        mod = self.init_module.copy() if self.init_module is not None else IRModule()
        # Declare every global and type name first (mutual recursion, forward references).
        for kind, index in items:
            name_tok = self.tokens[index + 1]
            if kind == "def":
                if name_tok.kind != "global":
                    self.pos = index + 1
                    raise self.expected("a global name such as @main", "after 'def'")
                name = str(name_tok.value)
                if name in self.globals:
                    raise self.error(name_tok, f"global function @{name} is defined twice")
                self.globals[name] = GlobalVar(name)
            else:
                if name_tok.kind != "ident" or name_tok.value in _RESERVED:
                    self.pos = index + 1
                    raise self.expected("a type name such as List", "after 'type'")
                name = str(name_tok.value)
                if name in self.types:
                    raise self.error(name_tok, f"type {name} is defined twice")
                self.types[name] = GlobalTypeVar(name)
        # Types first, so that every constructor is known when function bodies are parsed.
        for kind, index in items:
            if kind == "type":
                self.pos = index
                data = run(self.g_type_def())
                mod.add_type_def(data.header, data)
        for kind, index in items:
            if kind == "def":
                self.pos = index
                gvar, func = run(self.g_def())
                mod[gvar] = func
        return mod

    def parse_standalone_expr(self) -> Expr:
        self.parse_header()
        self.push_scope()
        while self.peek().is_word("free_var"):
            self.advance()
            tok = self.peek()
            if tok.kind != "local":
                raise self.expected("a variable such as %x", "after 'free_var'")
            self.advance()
            ann = run(self.g_type()) if self.accept(":") else None
            self.expect(";", f"after the declaration of %{tok.value}")
            var = Var(str(tok.value), ann)
            self.spanned(var, tok)
            self.bind_local(str(tok.value), var)
        expr = run(self.g_seq())
        self.pop_scope()
        self.expect_eof("after the expression")
        return expr

    # --- definitions -------------------------------------------------------------------------

    def g_def(self) -> Task[tuple[GlobalVar, Function]]:
        def_tok = self.expect_word("def")
        name_tok = self.advance()
        gvar = self.globals[str(name_tok.value)]
        self.push_scope()
        type_params = self.parse_type_params()
        params, attrs = yield self.g_params(f"@{name_tok.value}")
        ret_type = (yield self.g_type()) if self.accept("->") else None
        body = yield self.g_braced_seq(f"the body of @{name_tok.value}")
        self.pop_scope()
        func = Function(params, body, ret_type, type_params, attrs)
        self.spanned(func, def_tok)
        return gvar, func

    def g_type_def(self) -> Task[TypeData]:
        self.expect_word("type")
        name_tok = self.advance()
        header = self.types[str(name_tok.value)]
        self.push_scope()
        type_vars = self.parse_type_params()
        open_tok = self.expect("{", f"to start the constructors of type {header.name_hint}")
        ctors: list[Constructor] = []
        while not self.accept("}"):
            tok = self.peek()
            if tok.kind != "ident" or tok.value in _RESERVED:
                raise self.expected(
                    "a constructor name or '}'", f"in the definition of type {header.name_hint}"
                )
            name = str(tok.value)
            if name in self.ctors:
                raise self.error(tok, f"constructor {name} is defined twice")
            if name in self.op_names():
                raise self.error(
                    tok, f"constructor name {name} clashes with the operator of the same name"
                )
            self.advance()
            inputs: list[Type] = []
            if self.peek().is_punct("("):
                paren = self.advance()
                while not self.accept(")"):
                    inputs.append((yield self.g_type()))
                    if not self.accept(","):
                        self.expect_close(")", paren, f"the fields of constructor {name}")
                        break
            ctor = Constructor(name, inputs, header)
            self.spanned(ctor, tok)
            self.ctors[name] = ctor
            ctors.append(ctor)
            if not self.accept(","):
                self.expect_close("}", open_tok, f"the definition of type {header.name_hint}")
                break
        self.pop_scope()
        return TypeData(header, type_vars, ctors)

    def parse_type_params(self) -> list[TypeVar]:
        """``[A, B]`` (optional); binds the type variables in the current scope."""
        params: list[TypeVar] = []
        if not self.peek().is_punct("["):
            return params
        open_tok = self.advance()
        seen: set[str] = set()
        while not self.accept("]"):
            tok = self.peek()
            if tok.kind != "ident" or tok.value in _RESERVED or "." in str(tok.value):
                raise self.expected("a type parameter name such as A", "in '[...]'")
            name = str(tok.value)
            if name in seen:
                raise self.error(tok, f"type parameter {name} is declared twice")
            seen.add(name)
            self.advance()
            tvar = TypeVar(name)
            params.append(tvar)
            self.bind_tvar(name, tvar)
            if not self.accept(","):
                self.expect_close("]", open_tok, "the type parameters")
                break
        return params

    def g_params(self, owner: str) -> Task[tuple[list[Var], dict[str, object]]]:
        """``(%x: T, %y, attr=value)``; binds the parameters in the current scope."""
        open_tok = self.expect("(", f"to start the parameters of {owner}")
        params: list[Var] = []
        attrs: dict[str, object] = {}
        seen: set[str] = set()
        while not self.accept(")"):
            tok = self.peek()
            if tok.kind == "ident" and self.peek(1).is_punct("="):
                name, value = self.parse_attr()
                if name in attrs:
                    raise self.error(tok, f"attribute {name} of {owner} is given twice")
                attrs[name] = value
            elif tok.kind == "local":
                if attrs:
                    raise self.error(tok, f"parameters of {owner} must come before its attributes")
                name = str(tok.value)
                if name in seen:
                    raise self.error(tok, f"parameter %{name} of {owner} is declared twice")
                seen.add(name)
                self.advance()
                ann = (yield self.g_type()) if self.accept(":") else None
                var = Var(name, ann)
                self.spanned(var, tok)
                params.append(var)
            else:
                raise self.expected(
                    "a parameter such as %x, an attribute or ')'", f"in the parameters of {owner}"
                )
            if not self.accept(","):
                self.expect_close(")", open_tok, f"the parameters of {owner}")
                break
        for var in params:
            self.bind_local(var.name_hint, var)
        return params, attrs

    # --- types -------------------------------------------------------------------------------

    def g_type(self) -> Task[Type]:
        tok = self.peek()
        if tok.is_punct("("):
            open_tok = self.advance()
            fields: list[Type] = []
            trailing_comma = False
            while not self.accept(")"):
                fields.append((yield self.g_type()))
                trailing_comma = bool(self.accept(","))
                if not trailing_comma:
                    self.expect_close(")", open_tok, "the tuple type")
                    break
            if len(fields) == 1 and not trailing_comma:
                return fields[0]  # parenthesized type
            return TupleType(fields)
        if tok.is_word("fn"):
            self.advance()
            self.push_scope()
            type_params = self.parse_type_params()
            open_tok = self.expect("(", "to start the argument types of the function type")
            args: list[Type] = []
            while not self.accept(")"):
                args.append((yield self.g_type()))
                if not self.accept(","):
                    self.expect_close(")", open_tok, "the argument types")
                    break
            self.expect("->", "before the result type of the function type")
            ret = yield self.g_type()
            self.pop_scope()
            return FuncType(args, ret, type_params)
        if tok.kind != "ident":
            raise self.expected("a type")
        name = str(tok.value)
        self.advance()
        if name == "_":
            return IncompleteType()
        if name == "Tensor":
            return self.parse_tensor_type(tok)
        if name in DTYPES:
            return TensorType((), name)
        if name in self.tvars:
            return self.tvars[name][-1]
        if name in self.types:
            gtv = self.types[name]
            if not self.peek().is_punct("["):
                return gtv
            open_tok = self.advance()
            type_args: list[Type] = []
            while not self.accept("]"):
                type_args.append((yield self.g_type()))
                if not self.accept(","):
                    self.expect_close("]", open_tok, f"the type arguments of {name}")
                    break
            return TypeCall(gtv, type_args)
        candidates = [*self.tvars, *self.types, *DTYPES, "Tensor"]
        raise self.error(tok, f"unknown type '{name}'{_suggest(name, candidates)}")

    def parse_tensor_type(self, tensor_tok: Token) -> TensorType:
        open_tok = self.expect("[", "after 'Tensor'")
        shape_tok = self.expect("(", "to start the shape of the tensor type, e.g. (1, 2)")
        dims: list[object] = []
        while not self.accept(")"):
            tok = self.peek()
            if tok.is_punct("?"):
                self.advance()
                dims.append(Any())
            elif tok.kind == "number" and not tok.value[1] and tok.value[0].isdigit():  # type: ignore[index]
                self.advance()
                dims.append(int(tok.value[0]))  # type: ignore[index]
            else:
                raise self.expected("a dimension (an integer or ?)", "in the tensor shape")
            if not self.accept(","):
                self.expect_close(")", shape_tok, "the tensor shape")
                break
        self.expect(",", "between the shape and the dtype of the tensor type")
        dtype_tok = self.peek()
        if dtype_tok.kind != "ident" or dtype_tok.value not in DTYPES:
            raise self.expected(f"a dtype ({', '.join(DTYPES)})", "in the tensor type")
        self.advance()
        self.expect_close("]", open_tok, "the tensor type")
        return TensorType(dims, str(dtype_tok.value))

    # --- attributes --------------------------------------------------------------------------

    def parse_attr(self) -> tuple[str, object]:
        """``name = value`` where value is a number, string, bool, None or a list."""
        name = str(self.advance().value)
        self.advance()  # '='
        return name, self.parse_attr_value(name)

    def parse_attr_value(self, name: str) -> object:
        # Iterative so that deeply nested lists cannot overflow the stack.
        stack: list[tuple[str, list[object]]] = []  # (closing bracket, items so far)
        while True:
            tok = self.peek()
            value: object
            if tok.is_punct("[") or tok.is_punct("("):
                self.advance()
                closer = "]" if tok.value == "[" else ")"
                if not self.accept(closer):
                    stack.append((closer, []))
                    continue
                value = ()
            else:
                value = self.parse_attr_scalar(name)
            # Place the value in the innermost open list, closing lists that end here.
            while True:
                if not stack:
                    return value
                closer, items = stack[-1]
                items.append(value)
                if self.accept(","):
                    if not self.accept(closer):
                        break  # another element follows
                else:
                    self.expect(closer, f"or ',' in the value of attribute {name}")
                stack.pop()
                value = tuple(items)

    def parse_attr_scalar(self, name: str) -> object:
        tok = self.peek()
        negative = False
        if tok.is_punct("-"):
            self.advance()
            negative = True
            tok = self.peek()
        if tok.kind == "number":
            self.advance()
            digits, suffix = tok.value  # type: ignore[misc]
            if not suffix:
                # Attribute values are Python numbers: keep full float64 precision.
                is_float = any(c in digits for c in ".eE")
                if not is_float and len(digits) > 40:
                    raise self.error(tok, f"integer value of attribute {name} is too large")
                number = float(digits) if is_float else int(digits)
                return -number if negative else number
            try:
                array = parse_scalar(digits, suffix, negative)
            except LiteralError as exc:
                raise self.error(tok, str(exc)) from None
            return array.item()
        if tok.kind == "ident" and tok.value in ("inf", "nan"):
            self.advance()
            value = float(str(tok.value))
            return -value if negative else value
        if negative:
            raise self.expected("a number after '-'", f"in the value of attribute {name}")
        if tok.kind == "string":
            self.advance()
            return tok.value
        if tok.kind == "ident" and tok.value in ("True", "False", "None"):
            self.advance()
            return {"True": True, "False": False, "None": None}[str(tok.value)]
        raise self.expected(
            "an attribute value (a number, string, True, False, None or a list)",
            f"for attribute {name}",
        )

    # --- expressions -------------------------------------------------------------------------

    def g_seq(self) -> Task[Expr]:
        """Bindings (``let``, ``%N =``, ``expr;``) followed by the result expression.

        A loop, not recursion: a chain of 10,000 bindings uses constant stack.
        """
        self.push_scope()
        bindings: list[tuple[Var, Expr, Token]] = []
        while True:
            tok = self.peek()
            if tok.is_word("let"):
                self.advance()
                var_tok = self.peek()
                if var_tok.kind != "local":
                    raise self.expected("a variable such as %x", "after 'let'")
                self.advance()
                name = str(var_tok.value)
                ann = (yield self.g_type()) if self.accept(":") else None
                self.expect("=", f"after 'let %{name}'")
                var = Var(name, ann)
                self.spanned(var, var_tok)
                recursive = self.peek().is_word("fn")
                if recursive:
                    self.bind_local(name, var)
                value = yield self.g_expr()
                self.expect(";", f"after the value of 'let %{name}'")
                if not recursive:
                    self.bind_local(name, var)
                bindings.append((var, value, tok))
                continue
            if tok.kind == "local" and self.peek(1).is_punct("="):
                self.advance()
                self.advance()
                value = yield self.g_expr()
                self.expect(";", f"after the value of '%{tok.value} ='")
                self.bind_local(str(tok.value), value)
                continue
            expr = yield self.g_expr()
            if self.peek().is_punct(";"):
                semi = self.advance()
                var = Var("_")
                self.spanned(var, semi)
                bindings.append((var, expr, tok))
                continue
            break
        self.pop_scope()
        body = expr
        for var, value, tok in reversed(bindings):
            body = Let(var, value, body)
            self.spanned(body, tok)
        return body

    def g_braced_seq(self, what: str) -> Task[Expr]:
        open_tok = self.expect("{", f"to start {what}")
        body = yield self.g_seq()
        self.expect_close("}", open_tok, what)
        return body

    def g_expr(self) -> Task[Expr]:
        """Infix expressions by precedence climbing (operands via :meth:`g_unary`)."""
        operands: list[Expr] = [(yield self.g_unary())]
        operators: list[Token] = []

        def reduce() -> None:
            op_tok = operators.pop()
            rhs = operands.pop()
            lhs = operands.pop()
            name = BINARY_OPS[str(op_tok.value)][1]
            operands.append(self.make_op_call(get_op(name), [lhs, rhs], {}, op_tok, {}))

        while True:
            tok = self.peek()
            if tok.kind != "punct" or tok.value not in BINARY_OPS:
                break
            self.advance()
            prec = BINARY_OPS[str(tok.value)][0]
            while operators and BINARY_OPS[str(operators[-1].value)][0] >= prec:
                reduce()
            operators.append(tok)
            operands.append((yield self.g_unary()))
        while operators:
            reduce()
        return operands[0]

    def g_unary(self) -> Task[Expr]:
        minus: list[Token] = []
        while self.peek().is_punct("-"):
            minus.append(self.advance())
        if minus and self.peek().kind == "number":
            # -1, -2.5f: a negative literal, not negative(1).
            minus.pop()
            primary: Expr = self.parse_number(negative=True)
        else:
            primary = yield self.g_primary()
        expr = yield self.g_postfix(primary)
        for tok in reversed(minus):
            expr = self.make_op_call(get_op("negative"), [expr], {}, tok, {})
        return expr

    def g_postfix(self, expr: Expr) -> Task[Expr]:
        """Calls ``f(args)`` and projections ``.0`` after a primary expression."""
        while True:
            tok = self.peek()
            if tok.is_punct("("):
                expr = yield self.g_call(expr)
            elif tok.is_punct("."):
                self.advance()
                index_tok = self.peek()
                if index_tok.kind != "number" or index_tok.value[1]:  # type: ignore[index]
                    raise self.expected("a tuple index such as 0", "after '.'")
                self.advance()
                expr = TupleGetItem(expr, int(index_tok.value[0]))  # type: ignore[index]
                self.spanned(expr, tok)
            else:
                return expr

    def g_call(self, callee: Expr) -> Task[Expr]:
        open_tok = self.advance()
        what = f"the arguments of {_callee_name(callee)}"
        args: list[Expr] = []
        attrs: dict[str, object] = {}
        attr_toks: dict[str, Token] = {}
        while not self.accept(")"):
            tok = self.peek()
            if tok.kind == "ident" and self.peek(1).is_punct("="):
                name, value = self.parse_attr()
                if name in attrs:
                    raise self.error(tok, f"attribute {name} is given twice")
                attrs[name] = value
                attr_toks[name] = tok
            else:
                if attrs:
                    raise self.error(tok, f"positional argument after the attributes in {what}")
                args.append((yield self.g_expr()))
            if not self.accept(","):
                self.expect_close(")", open_tok, what)
                break
        if isinstance(callee, Op):
            return self.make_op_call(callee, args, attrs, open_tok, attr_toks)
        if attrs:
            first = attr_toks[next(iter(attrs))]
            raise self.error(
                first,
                f"attributes are only allowed in operator calls, but "
                f"{_callee_name(callee)} is not an operator",
            )
        call = Call(callee, args)
        self.spanned(call, open_tok)
        return call

    def make_op_call(
        self,
        op: Op,
        args: list[Expr],
        attrs: dict[str, object],
        tok: Token,
        attr_toks: dict[str, Token],
    ) -> Call:
        opdef = get_def(op.name)
        if len(args) != opdef.num_inputs:
            names = f" ({', '.join(opdef.arg_names)})" if opdef.arg_names else ""
            plural = "argument" if opdef.num_inputs == 1 else "arguments"
            raise self.error(
                tok,
                f"operator {op.name} takes {opdef.num_inputs} {plural}{names}, found {len(args)}",
            )
        known = [spec.name for spec in opdef.attrs]
        for name in attrs:
            if name not in known:
                listing = ", ".join(known) if known else "no attributes"
                raise self.error(
                    attr_toks.get(name, tok),
                    f"operator {op.name} has no attribute '{name}'"
                    f"{_suggest(name, known)} (its attributes: {listing})",
                )
        try:
            normalized = opdef.normalize_attrs(attrs)
        except TypeError as exc:
            message = str(exc)
            at = next((attr_toks[n] for n in attr_toks if f" {n} " in f" {message} "), tok)
            if op.name not in message:
                named = next((n for n in attr_toks if attr_toks[n] is at), None)
                what = f"attribute {named} of operator {op.name}" if named else op.name
                message = f"invalid {what}: {message}"
            raise self.error(at, message) from None
        call = Call(op, args, normalized)
        self.spanned(call, tok)
        return call

    def parse_number(self, negative: bool = False) -> Constant:
        tok = self.advance()
        digits, suffix = tok.value  # type: ignore[misc]
        try:
            array = parse_scalar(digits, suffix, negative)
        except LiteralError as exc:
            raise self.error(tok, str(exc)) from None
        const = Constant(array)
        self.spanned(const, tok)
        return const

    def g_primary(self) -> Task[Expr]:
        tok = self.peek()
        kind = tok.kind
        if kind == "number":
            return self.parse_number()
        if kind == "local":
            self.advance()
            return self.lookup_local(tok)
        if kind == "global":
            self.advance()
            name = str(tok.value)
            if name not in self.globals:
                raise self.error(
                    tok,
                    f"unknown global function '@{name}'{_suggest(name, list(self.globals), '@')}",
                )
            return self.globals[name]
        if tok.is_punct("("):
            return (yield self.g_paren())
        if kind == "ident":
            name = str(tok.value)
            if name in ("True", "False"):
                self.advance()
                return self.spanned(Constant(name == "True"), tok)  # type: ignore[return-value]
            if name == "fn":
                return (yield self.g_function())
            if name == "if":
                return (yield self.g_if())
            if name == "match":
                return (yield self.g_match())
            if name == "meta":
                return self.parse_meta_ref()
            if name == "let":
                raise self.error(
                    tok,
                    "expected an expression, found keyword 'let'; a let must start a "
                    "statement (wrap it in parentheses to use it as a value)",
                )
            if name in self.ctors:
                self.advance()
                ctor = self.ctors[name]
                if not ctor.inputs and not self.peek().is_punct("("):
                    # TVM's rule: a constructor without fields written bare is its value.
                    return self.spanned(Call(ctor, []), tok)  # type: ignore[return-value]
                return ctor
            if name in self.op_names():
                self.advance()
                return get_op(name)
            raise self.unknown_name(tok)
        raise self.expected("an expression")

    def unknown_name(self, tok: Token) -> RelaySyntaxError:
        name = str(tok.value)
        if name in self.types or name in self.tvars or name in DTYPES:
            return self.error(tok, f"'{name}' is a type, not an expression")
        if name in self.locals:
            return self.error(tok, f"unknown name '{name}'; local variables are written '%{name}'")
        if name in KEYWORDS:
            return self.error(tok, f"expected an expression, found keyword '{name}'")
        candidates = [*self.ctors, *self.op_names()]
        return self.error(
            tok, f"unknown operator or constructor '{name}'{_suggest(name, candidates)}"
        )

    def lookup_local(self, tok: Token) -> Expr:
        name = str(tok.value)
        stack = self.locals.get(name)
        if stack:
            return stack[-1]
        hint = _suggest(name, list(self.locals), "%")
        return_hint = (
            "" if hint else ("; bind it first with a parameter, 'let', a pattern or '%N = ...'")
        )
        raise self.error(tok, f"undeclared local variable '%{name}'{hint}{return_hint}")

    def parse_meta_ref(self) -> Constant:
        meta_tok = self.advance()
        self.expect("[", "after 'meta'")
        kind_tok = self.peek()
        if kind_tok.kind != "ident":
            raise self.expected(f"a node kind such as {CONSTANT_KIND}", "in 'meta[...]'")
        self.advance()
        self.expect("]", "after the node kind of the meta reference")
        self.expect("[", "before the index of the meta reference")
        index_tok = self.peek()
        if index_tok.kind != "number" or index_tok.value[1] or not index_tok.value[0].isdigit():  # type: ignore[index]
            raise self.expected("an index such as 0", "in the meta reference")
        self.advance()
        self.expect("]", "after the index of the meta reference")
        kind = str(kind_tok.value)
        index = int(index_tok.value[0])  # type: ignore[index]
        if kind != CONSTANT_KIND:
            raise self.error(
                kind_tok, f"unsupported meta node kind '{kind}'; expected {CONSTANT_KIND}"
            )
        if kind not in self.meta:
            raise self.error(
                meta_tok,
                f"meta[{kind}][{index}] is used but the text has no #[metadata] section "
                "with constants",
            )
        table = self.meta[kind]
        if index >= len(table):
            raise self.error(
                index_tok,
                f"node index {index} is out of bounds for {kind} "
                f"(the meta section has {len(table)})",
            )
        return table[index]

    def g_paren(self) -> Task[Expr]:
        open_tok = self.advance()
        if self.accept(")"):
            return self.spanned(Tuple([]), open_tok)  # type: ignore[return-value]
        first = yield self.g_seq()
        if self.accept(")"):
            return first
        if not self.peek().is_punct(","):
            opened = self.where(open_tok)
            raise self.expected("',' or ')'", f"to close the parenthesis opened at {opened}")
        fields = [first]
        while self.accept(","):
            if self.peek().is_punct(")"):
                break
            fields.append((yield self.g_expr()))
        self.expect_close(")", open_tok, "the tuple")
        return self.spanned(Tuple(fields), open_tok)  # type: ignore[return-value]

    def g_function(self) -> Task[Expr]:
        fn_tok = self.advance()
        ctor_tok = self.peek()
        if ctor_tok.kind == "ident" and ctor_tok.value in self.ctors:
            # ``fn Nil``: the constructor itself as a function value. Bare ``Nil`` is
            # already the applied constructor, so this is the only way to write it.
            self.advance()
            return self.ctors[str(ctor_tok.value)]  # shared node: keeps its own span
        self.push_scope()
        type_params = self.parse_type_params()
        params, attrs = yield self.g_params("fn")
        ret_type = (yield self.g_type()) if self.accept("->") else None
        body = yield self.g_braced_seq("the body of the fn")
        self.pop_scope()
        func = Function(params, body, ret_type, type_params, attrs)
        return self.spanned(func, fn_tok)  # type: ignore[return-value]

    def g_if(self) -> Task[Expr]:
        if_tok = self.advance()
        open_tok = self.expect("(", "after 'if'")
        cond = yield self.g_seq()
        self.expect_close(")", open_tok, "the condition")
        then = yield self.g_braced_seq("the then-branch")
        self.expect_word("else", "after the then-branch of the if")
        if self.peek().is_word("if"):
            other = yield self.g_if()
        else:
            other = yield self.g_braced_seq("the else-branch")
        return self.spanned(If(cond, then, other), if_tok)  # type: ignore[return-value]

    def g_match(self) -> Task[Expr]:
        match_tok = self.advance()
        complete = not self.accept("?")
        if not self.peek().is_punct("("):
            raise self.expected("'('", "after 'match'")
        # ``match (%a, %b)`` matches the tuple of both values, as in TVM.
        data = yield self.g_paren()
        brace = self.expect("{", "to start the clauses of the match")
        clauses: list[Clause] = []
        while not self.accept("}"):
            clause_tok = self.peek()
            self.push_scope()
            lhs = yield self.g_pattern()
            self.expect("=>", "after the pattern")
            if self.peek().is_punct("{"):
                rhs = yield self.g_braced_seq("the clause body")
            else:
                rhs = yield self.g_expr()
            self.pop_scope()
            clauses.append(self.spanned(Clause(lhs, rhs), clause_tok))  # type: ignore[arg-type]
            if not self.accept(","):
                self.expect_close("}", brace, "the clauses of the match")
                break
        return self.spanned(Match(data, clauses, complete), match_tok)  # type: ignore[return-value]

    def g_pattern(self) -> Task[Pattern]:
        """One pattern; its variables are bound in the current (clause) scope."""
        tok = self.peek()
        if tok.is_word("_"):
            self.advance()
            return self.spanned(PatternWildcard(), tok)  # type: ignore[return-value]
        if tok.kind == "local":
            self.advance()
            name = str(tok.value)
            if name in self.local_frames[-1]:
                raise self.error(tok, f"pattern variable %{name} is bound twice in this pattern")
            ann = (yield self.g_type()) if self.accept(":") else None
            var = Var(name, ann)
            self.spanned(var, tok)
            self.bind_local(name, var)
            return self.spanned(PatternVar(var), tok)  # type: ignore[return-value]
        if tok.kind == "ident" and tok.value in self.ctors:
            self.advance()
            ctor = self.ctors[str(tok.value)]
            subs: list[Pattern] = []
            if self.peek().is_punct("("):
                open_tok = self.advance()
                while not self.accept(")"):
                    subs.append((yield self.g_pattern()))
                    if not self.accept(","):
                        self.expect_close(")", open_tok, f"the fields of pattern {ctor.name_hint}")
                        break
            return self.spanned(PatternConstructor(ctor, subs), tok)  # type: ignore[return-value]
        if tok.is_punct("("):
            open_tok = self.advance()
            subs = []
            trailing_comma = False
            while not self.accept(")"):
                subs.append((yield self.g_pattern()))
                trailing_comma = bool(self.accept(","))
                if not trailing_comma:
                    self.expect_close(")", open_tok, "the tuple pattern")
                    break
            if len(subs) == 1 and not trailing_comma:
                return subs[0]
            return self.spanned(PatternTuple(subs), open_tok)  # type: ignore[return-value]
        if tok.kind == "ident":
            name = str(tok.value)
            raise self.error(
                tok,
                f"unknown constructor '{name}' in pattern{_suggest(name, list(self.ctors))}",
            )
        raise self.expected("a pattern (a constructor, a variable such as %x, _ or a tuple)")


def _callee_name(callee: Expr) -> str:
    if isinstance(callee, Op):
        return callee.name
    if isinstance(callee, GlobalVar):
        return f"@{callee.name_hint}"
    if isinstance(callee, Var):
        return f"%{callee.name_hint}"
    if isinstance(callee, Constructor):
        return f"constructor {callee.name_hint}"
    return "the call"


def _suggest(name: str, candidates: list[str], prefix: str = "") -> str:
    close = difflib.get_close_matches(name, candidates, n=3)
    if not close:
        return ""
    return "; did you mean " + " or ".join(f"'{prefix}{c}'" for c in close) + "?"
