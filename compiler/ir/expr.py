"""Relay expressions, patterns and constructors.

Compiler layer (``compiler.ir``); imports numpy, ``compiler.ir`` and :mod:`vm.ndarray` (for
the read-only arrays constants hold) only; printing and the operator sugar go through
:mod:`compiler.ir.hooks`, which the higher layers fill in.

Expressions are immutable trees (DAGs, since nodes may be shared). Two fields are
filled in after construction: ``span`` (where the parser found the node, for error
messages) and ``checked_type`` (set by type inference). ``==`` and ``hash`` are
identity; use :func:`compiler.ir.structural.structural_equal` for structure.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler.ir import hooks
from compiler.ir.attrs import Attrs, make_attrs
from compiler.ir.types import (
    FuncType,
    GlobalTypeVar,
    IncompleteType,
    TensorType,
    Type,
    TypeVar,
    normalize_dtype,
)
from vm.ndarray import frozen


class Span:
    """A source position: 1-based line and column, and the source name."""

    __slots__ = ("column", "line", "source_name")

    def __init__(self, line: int, column: int, source_name: str = "<string>") -> None:
        self.line = line
        self.column = column
        self.source_name = source_name

    def __repr__(self) -> str:
        return f"{self.source_name}:{self.line}:{self.column}"


class Node:
    """Base of expressions, patterns and clauses: carries an optional span."""

    __slots__ = ("span",)

    def __init__(self) -> None:
        self.span: Span | None = None

    def __str__(self) -> str:
        return hooks.expr_to_text(self)

    def __repr__(self) -> str:
        text = str(self)
        return text if len(text) < 200 else text[:197] + "..."

    def astext(self, show_meta_data: bool = True, annotate: None = None) -> str:
        """This node in the Relay text format (TVM's ``astext``).

        Parameters
        ----------
        show_meta_data : bool
            Append the ``#[metadata]`` section holding large constants; without it the
            text says where they were left out and cannot be parsed back.
        annotate : None
            TVM's per-node comment callback; not supported, only None is accepted.
        """
        check_no_annotate(annotate)
        return hooks.expr_to_text(self, show_meta_data)


def check_no_annotate(annotate: object) -> None:
    """Refuse TVM's ``astext(annotate=...)`` callback, which this printer does not take.

    Raises
    ------
    TypeError
        If ``annotate`` is not None.
    """
    if annotate is not None:
        raise TypeError(
            "astext(annotate=...) is not supported: the printer writes no per-node comments"
        )


class Expr(Node):
    """Base of every Relay expression. Supports ``+ - * /``, comparisons and ``expr[i]``."""

    __slots__ = ("_checked_type",)

    def __init__(self) -> None:
        super().__init__()
        self._checked_type: Type | None = None

    @property
    def checked_type(self) -> Type:
        """The type found by type inference; ``ValueError`` before inference ran."""
        if self._checked_type is None:
            raise ValueError(
                "checked_type is not available before type inference; "
                "run compiler.relay.transform.InferType() first"
            )
        return self._checked_type

    # Operator sugar, resolved through the operator registry (TVM's ExprWithOp).
    def _binary(self, name: str, other: object, reverse: bool = False) -> Call:
        rhs = other if isinstance(other, Expr) else const(other)
        args = [rhs, self] if reverse else [self, rhs]
        return Call(hooks.get_op(name), args)

    def __add__(self, other: object) -> Call:
        return self._binary("add", other)

    def __radd__(self, other: object) -> Call:
        return self._binary("add", other, reverse=True)

    def __sub__(self, other: object) -> Call:
        return self._binary("subtract", other)

    def __rsub__(self, other: object) -> Call:
        return self._binary("subtract", other, reverse=True)

    def __mul__(self, other: object) -> Call:
        return self._binary("multiply", other)

    def __rmul__(self, other: object) -> Call:
        return self._binary("multiply", other, reverse=True)

    def __truediv__(self, other: object) -> Call:
        return self._binary("divide", other)

    def __rtruediv__(self, other: object) -> Call:
        return self._binary("divide", other, reverse=True)

    def __lt__(self, other: object) -> Call:
        return self._binary("less", other)

    def __le__(self, other: object) -> Call:
        return self._binary("less_equal", other)

    def __gt__(self, other: object) -> Call:
        return self._binary("greater", other)

    def __ge__(self, other: object) -> Call:
        return self._binary("greater_equal", other)

    def __neg__(self) -> Call:
        return Call(hooks.get_op("negative"), [self])

    def __getitem__(self, index: int) -> TupleGetItem:
        return TupleGetItem(self, index)

    def astuple(self) -> Expr:
        """The expression itself. TVM wraps multi-output operators (``topk``, ``split``) in a
        ``TupleWrapper`` whose ``astuple()`` gives the tuple-valued call; here the call is
        returned directly and indexes like a tuple, so ``astuple()`` has nothing to unwrap."""
        return self

    __hash__ = object.__hash__

    def __eq__(self, other: object) -> bool:
        return self is other


class Var(Expr):
    """A local variable. Identity matters: two ``Var`` objects are different variables."""

    __slots__ = ("name_hint", "type_annotation")

    def __init__(self, name_hint: str, type_annotation: Type | None = None) -> None:
        super().__init__()
        self.name_hint = name_hint
        self.type_annotation = type_annotation


class GlobalVar(Expr):
    """The name of a global function in an :class:`~compiler.ir.module.IRModule`."""

    __slots__ = ("name_hint",)

    def __init__(self, name_hint: str) -> None:
        super().__init__()
        self.name_hint = name_hint


class Constant(Expr):
    """A tensor literal held as a numpy array (read-only)."""

    __slots__ = ("data",)

    def __init__(self, data: np.ndarray) -> None:
        super().__init__()
        self.data = frozen(np.asarray(data))


class Op(Expr):
    """A primitive operator, e.g. ``add``. Obtain one with ``compiler.op.get_op(name)``."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name


class Tuple(Expr):
    """A tuple of expressions."""

    __slots__ = ("fields",)

    def __init__(self, fields: Sequence[Expr]) -> None:
        super().__init__()
        self.fields = tuple(fields)


class TupleGetItem(Expr):
    """Projection of field ``index`` of a tuple (``%t.0`` in the text format)."""

    __slots__ = ("index", "tuple_value")

    def __init__(self, tuple_value: Expr, index: int) -> None:
        super().__init__()
        if not isinstance(index, (int, np.integer)) or isinstance(index, bool):
            raise TypeError(f"tuple index must be an int, got {index!r}")
        self.tuple_value = tuple_value
        self.index = int(index)


class Call(Expr):
    """A call of an operator, a function, a closure or a constructor."""

    __slots__ = ("args", "attrs", "op", "type_args")

    def __init__(
        self,
        op: Expr,
        args: Sequence[Expr],
        attrs: Attrs | dict | None = None,
        type_args: Sequence[Type] | None = None,
    ) -> None:
        super().__init__()
        self.op = op
        self.args = tuple(args)
        self.attrs = make_attrs(attrs)
        self.type_args = tuple(type_args or ())


class Let(Expr):
    """``let %var = value; body``."""

    __slots__ = ("body", "value", "var")

    def __init__(self, var: Var, value: Expr, body: Expr) -> None:
        super().__init__()
        self.var = var
        self.value = value
        self.body = body


class If(Expr):
    """``if (cond) { true_branch } else { false_branch }``; ``cond`` is a bool scalar."""

    __slots__ = ("cond", "false_branch", "true_branch")

    def __init__(self, cond: Expr, true_branch: Expr, false_branch: Expr) -> None:
        super().__init__()
        self.cond = cond
        self.true_branch = true_branch
        self.false_branch = false_branch


class Function(Expr):
    """A function; ``attrs`` carries markers such as ``Primitive=1`` or ``Closure=1``."""

    __slots__ = ("attrs", "body", "params", "ret_type", "type_params")

    def __init__(
        self,
        params: Sequence[Var],
        body: Expr,
        ret_type: Type | None = None,
        type_params: Sequence[TypeVar] | None = None,
        attrs: Attrs | dict | None = None,
    ) -> None:
        super().__init__()
        self.params = tuple(params)
        self.body = body
        self.ret_type = ret_type
        self.type_params = tuple(type_params or ())
        self.attrs = make_attrs(attrs)

    def with_attr(self, attr_key: str, attr_value: object = None) -> Function:
        """A copy of the function with attribute ``attr_key`` set to ``attr_value`` (TVM's
        ``Function.with_attr``: ``func.with_attr("Inline", 1)``); the body is shared.

        Parameters
        ----------
        attr_key : str
            The attribute, such as ``"Inline"``, ``"Primitive"`` or ``"global_symbol"``.
        attr_value : object
            Its value: a plain int, float, str or bool (or a tuple of them).

        Returns
        -------
        Function
            The new function.
        """
        if not isinstance(attr_key, str):
            raise TypeError(f"with_attr: attr_key must be a str, got {attr_key!r}")
        attrs = {**self.attrs, attr_key: attr_value}
        return Function(self.params, self.body, self.ret_type, self.type_params, attrs)

    @property
    def func_type_annotation(self) -> FuncType:
        """The declared type, with ``IncompleteType`` where nothing was annotated."""
        return FuncType(
            [p.type_annotation or IncompleteType() for p in self.params],
            self.ret_type or IncompleteType(),
            self.type_params,
        )


class Constructor(Expr):
    """A constructor of an algebraic data type; ``tag`` is set when its type joins a module."""

    __slots__ = ("belong_to", "inputs", "name_hint", "tag")

    def __init__(self, name_hint: str, inputs: Sequence[Type], belong_to: GlobalTypeVar) -> None:
        super().__init__()
        self.name_hint = name_hint
        self.inputs = tuple(inputs)
        self.belong_to = belong_to
        self.tag = -1


class Pattern(Node):
    """Base of match patterns."""

    __slots__ = ()


class PatternWildcard(Pattern):
    """``_``: matches anything, binds nothing."""

    __slots__ = ()


class PatternVar(Pattern):
    """Binds the matched value to ``var``."""

    __slots__ = ("var",)

    def __init__(self, var: Var) -> None:
        super().__init__()
        self.var = var


class PatternConstructor(Pattern):
    """Matches values built by ``constructor`` whose fields match ``patterns``."""

    __slots__ = ("constructor", "patterns")

    def __init__(self, constructor: Constructor, patterns: Sequence[Pattern] | None = None) -> None:
        super().__init__()
        self.constructor = constructor
        self.patterns = tuple(patterns or ())


class PatternTuple(Pattern):
    """Matches a tuple whose fields match ``patterns``."""

    __slots__ = ("patterns",)

    def __init__(self, patterns: Sequence[Pattern] | None = None) -> None:
        super().__init__()
        self.patterns = tuple(patterns or ())


class Clause(Node):
    """One ``pattern => body`` arm of a :class:`Match`."""

    __slots__ = ("lhs", "rhs")

    def __init__(self, lhs: Pattern, rhs: Expr) -> None:
        super().__init__()
        self.lhs = lhs
        self.rhs = rhs


class Match(Expr):
    """``match (data) { clauses }``; ``complete=False`` is ``match?`` (may be partial)."""

    __slots__ = ("clauses", "complete", "data")

    def __init__(self, data: Expr, clauses: Sequence[Clause], complete: bool = True) -> None:
        super().__init__()
        self.data = data
        self.clauses = tuple(clauses)
        self.complete = bool(complete)


# --- builders (the ``relay.var`` / ``relay.const`` helpers of the public API) -----------------


def var(
    name_hint: str,
    type_annotation: Type | str | None = None,
    shape: Sequence[object] | None = None,
    dtype: object = "float32",
) -> Var:
    """Make a variable, TVM-style.

    Parameters
    ----------
    name_hint : str
        The variable's name (printed as ``%name_hint``).
    type_annotation : Type or str, optional
        Its type; a dtype string means a scalar of that dtype.
    shape : sequence of int or relay.Any, optional
        Shorthand for ``TensorType(shape, dtype)``; ``shape=()`` is a scalar.
    dtype : str
        The dtype used with ``shape`` (default ``float32``).
    """
    if type_annotation is not None and shape is not None:
        raise ValueError("give either type_annotation or shape, not both")
    if isinstance(type_annotation, str):
        type_annotation = TensorType((), type_annotation)
    elif shape is not None:
        type_annotation = TensorType(shape, dtype)
    return Var(name_hint, type_annotation)


def const(value: object, dtype: object = None) -> Constant:
    """Make a constant from a numpy array or Python scalar.

    Python ``float`` becomes float32, ``int`` int32 and ``bool`` bool unless ``dtype`` is given
    (TVM's rule); numpy arrays keep their dtype.
    """
    if isinstance(value, Constant):
        return value
    if dtype is not None:
        array = np.asarray(value, dtype=normalize_dtype(dtype))
    elif isinstance(value, bool):
        array = np.asarray(value, dtype="bool")
    elif isinstance(value, int):
        array = np.asarray(value, dtype="int32")
    elif isinstance(value, float):
        array = np.asarray(value, dtype="float32")
    else:
        array = np.asarray(value)
        if array.dtype == np.float64 and not isinstance(value, np.ndarray | np.generic):
            array = array.astype("float32")
        elif array.dtype == np.int64 and not isinstance(value, np.ndarray | np.generic):
            array = array.astype("int32")
        normalize_dtype(array.dtype)
    return Constant(array)
