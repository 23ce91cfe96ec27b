"""The kernel operator table: one :class:`OpRule` per supported operator.

Runtime layer, kernel generator (``vm.kernels``); standard library only.

A rule holds what the kernel library knows about an operator: its argument count, its
attribute schema (TVM's names and defaults; the compiler's registry reads it from here),
how the output dtypes and ranks follow from the inputs (used to validate descriptions
before anything is compiled), how output shapes are computed at run time, and how its code
is emitted. This module holds the record and the checks rules share; the ``emit_*``
modules define the rules, and :mod:`vm.kernels.table` gathers them into the table.

Two kinds of operator exist:

- *elementwise* rules produce a scalar expression from their arguments' scalar
  expressions, so a chain of them becomes one loop over the output;
- *array* rules emit statements that read whole input arrays and write whole output
  arrays (reductions, layout changes, matrix products, softmax).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from vm.kernels import dtypes


class Spec(NamedTuple):
    """A tensor's dtype and rank, as a description gives them."""

    dtype: str
    ndim: int

    def __str__(self) -> str:
        return f"{self.dtype}[rank {self.ndim}]"


class RuleError(Exception):
    """A rule rejected a node; the description validator adds the node's index and op."""


@dataclass(frozen=True)
class Attr:
    """One attribute of an operator.

    ``kind`` is ``int``, ``float``, ``bool``, ``str``, ``dtype``, ``dtype_or_empty`` (a dtype
    or ``""``), ``ints`` (a list of ints; a single int is accepted and wrapped),
    ``int_or_ints``, ``floats`` (a list of numbers, as floats) or ``pairs`` (a list of
    ``[before, after]`` int pairs, ``nn.pad``'s ``pad_width``). ``optional`` allows
    ``None``; ``required`` forbids leaving it out.
    """

    name: str
    kind: str
    default: object = None
    optional: bool = False
    required: bool = False
    choices: tuple[object, ...] | None = None


#: Longest list attribute accepted (axes, shapes and slices all have at most MAX_NDIM entries;
#: split indices are the one list that can be longer).
MAX_LIST = 4096


def _is_int(value: object) -> bool:
    return type(value) is int


def normalize_attr(spec: Attr, value: object) -> object:
    """``value`` checked against ``spec`` and put in canonical form (lists become tuples)."""
    if value is None:
        if spec.optional:
            return None
        raise RuleError(f"attribute {spec.name} must not be None")
    kind = spec.kind
    if kind == "int":
        if not _is_int(value):
            raise RuleError(f"attribute {spec.name} must be an int, found {value!r}")
        if not -(2**63) <= value < 2**63:  # type: ignore[operator]
            raise RuleError(f"attribute {spec.name}={value} does not fit in 64 bits")
    elif kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise RuleError(f"attribute {spec.name} must be a number, found {value!r}")
        value = float(value)
    elif kind == "bool":
        if not isinstance(value, bool):
            raise RuleError(f"attribute {spec.name} must be a bool, found {value!r}")
    elif kind == "str":
        if not isinstance(value, str):
            raise RuleError(f"attribute {spec.name} must be a string, found {value!r}")
    elif kind in ("dtype", "dtype_or_empty"):
        allowed = value in dtypes.DTYPES or (kind == "dtype_or_empty" and value == "")
        if not isinstance(value, str) or not allowed:
            raise RuleError(
                f"attribute {spec.name} must be a dtype name ({', '.join(dtypes.DTYPES)}), "
                f"found {value!r}"
            )
    elif kind in ("ints", "int_or_ints"):
        if _is_int(value):
            value = value if kind == "int_or_ints" else (value,)
        elif isinstance(value, (list, tuple)):
            if len(value) > MAX_LIST:
                raise RuleError(
                    f"attribute {spec.name} has {len(value)} entries; at most {MAX_LIST} allowed"
                )
            if not all(_is_int(v) and -(2**63) <= v < 2**63 for v in value):
                raise RuleError(f"attribute {spec.name} must hold 64-bit ints, found {value!r}")
            value = tuple(value)
        else:
            raise RuleError(f"attribute {spec.name} must be a list of ints, found {value!r}")
    elif kind == "floats":
        items = value if isinstance(value, (list, tuple)) else (value,)
        if len(items) > MAX_LIST or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in items
        ):
            raise RuleError(f"attribute {spec.name} must be a list of numbers, found {value!r}")
        value = tuple(float(v) for v in items)
    elif kind == "pairs":
        value = _pairs(spec.name, value)
    else:  # pragma: no cover - a rule table bug, caught by the rule tests
        raise AssertionError(f"unknown attribute kind {kind}")
    if spec.choices is not None and value not in spec.choices:
        allowed = ", ".join(repr(c) for c in spec.choices)
        raise RuleError(f"attribute {spec.name} must be one of {allowed}, found {value!r}")
    return value


def _pairs(name: str, value: object) -> tuple[tuple[int, int], ...]:
    """A list of ``[before, after]`` int pairs as a tuple of tuples."""
    if not isinstance(value, (list, tuple)):
        raise RuleError(
            f"attribute {name} must be a list of [before, after] int pairs, found {value!r}"
        )
    if len(value) > dtypes.MAX_NDIM:
        raise RuleError(
            f"attribute {name} has {len(value)} pairs; at most {dtypes.MAX_NDIM} allowed"
        )
    pairs = []
    for k, item in enumerate(value):
        ok = (
            isinstance(item, (list, tuple))
            and len(item) == 2
            and all(_is_int(v) and -(2**63) <= v < 2**63 for v in item)
        )
        if not ok:
            raise RuleError(
                f"attribute {name} must be a list of [before, after] int pairs; entry {k} is "
                f"{item!r}"
            )
        pairs.append((item[0], item[1]))
    return tuple(pairs)


def normalize_attrs(rule: OpRule, attrs: Mapping[str, object]) -> dict[str, object]:
    """Every attribute of ``rule`` checked, with defaults filled; unknown names rejected."""
    known = {a.name for a in rule.attrs}
    unknown = sorted(str(k) for k in attrs if k not in known)
    if unknown:
        expected = ", ".join(sorted(known)) or "no attributes"
        raise RuleError(f"unknown attribute(s) {', '.join(unknown)}; expected {expected}")
    out: dict[str, object] = {}
    for spec in rule.attrs:
        if spec.name in attrs:
            out[spec.name] = normalize_attr(spec, attrs[spec.name])
        elif spec.required:
            raise RuleError(f"attribute {spec.name} is missing")
        else:
            out[spec.name] = spec.default
    return out


# --- shared checks used by the rules' inference functions --------------------------------------


def require_kind(what: str, spec: Spec, allowed: str) -> None:
    """``spec``'s dtype is of ``allowed``: ``numeric``, ``float``, ``int``, ``bool`` or ``any``."""
    ok = {
        "numeric": spec.dtype in dtypes.NUMERIC,
        "float": spec.dtype in dtypes.FLOATS,
        "int": spec.dtype in dtypes.INTS,
        "bool": spec.dtype == "bool",
        "any": True,
    }[allowed]
    if not ok:
        words = {
            "numeric": "a numeric",
            "float": "a floating-point",
            "int": "an integer",
            "bool": "a bool",
        }[allowed]
        raise RuleError(f"dtype not allowed: {what} must be {words} tensor, found {spec.dtype}")


def require_same_dtype(names: Sequence[str], specs: Sequence[Spec]) -> str:
    """All ``specs`` share one dtype; returns it."""
    first = specs[0].dtype
    for name, spec in zip(names[1:], specs[1:]):
        if spec.dtype != first:
            raise RuleError(
                f"dtype not allowed: {names[0]} has dtype {first} but {name} has dtype "
                f"{spec.dtype}; the operands must share one dtype"
            )
    return first


def require_rank(what: str, spec: Spec, low: int, high: int | None = None) -> None:
    """``spec``'s rank is in ``[low, high]`` (``high=None``: no upper bound)."""
    if spec.ndim < low or (high is not None and spec.ndim > high):
        want = f"{low}" if high == low else f"at least {low}" if high is None else f"{low}..{high}"
        raise RuleError(f"ndim out of range: {what} must have rank {want}, found {spec.ndim}")


def norm_axis(name: str, axis: int, ndim: int, extra: int = 0) -> int:
    """``axis`` in ``[-(ndim + extra), ndim + extra)`` made non-negative."""
    bound = ndim + extra
    if not -bound <= axis < bound:
        raise RuleError(
            f"attribute {name}={axis} is out of range for a tensor of rank {ndim}; "
            f"expected a value in [{-bound}, {bound - 1}]"
        )
    return axis + bound if axis < 0 else axis


def norm_axes(name: str, axes: Sequence[int], ndim: int) -> list[int]:
    """Each axis normalized; duplicates rejected."""
    out: list[int] = []
    for axis in axes:
        a = norm_axis(name, axis, ndim)
        if a in out:
            raise RuleError(f"attribute {name}={tuple(axes)} names axis {a} more than once")
        out.append(a)
    return out


def check_float_attr(name: str, value: float, allow_nan: bool = True) -> None:
    """Reject a NaN where an ordered number is needed."""
    if not allow_nan and math.isnan(value):
        raise RuleError(f"attribute {name} must be a number, found nan")


# --- the rule record ---------------------------------------------------------------------------

Infer = Callable[[tuple[Spec, ...], dict[str, Any], tuple[Spec, ...]], tuple[Spec, ...]]


@dataclass(frozen=True)
class OpRule:
    """Everything the kernel library knows about one operator.

    Parameters
    ----------
    name : str
        TVM's operator name.
    num_args : int or None
        The argument count; ``None`` means one or more (``concatenate``, ``stack``).
    attrs : tuple of Attr
        The attribute schema.
    infer : callable
        ``infer(arg_specs, attrs, declared_outputs) -> output specs``; raises
        :class:`RuleError`. ``declared_outputs`` lets operators whose output rank depends on
        run-time sizes (``squeeze`` without ``axis``) accept the declared rank.
    shape : callable
        ``shape(ctx) -> [[dim expression, ...] per output]``: run-time output shapes from the
        argument shapes; may emit checks through ``ctx``.
    expr : callable, optional
        Elementwise rules: ``expr(ctx) -> str``, the output's scalar expression.
    arg_map : callable, optional
        Elementwise rules: ``arg_map(ctx, i, positions) -> positions`` for argument ``i``:
        which loop dimension each of its axes follows (default: numpy broadcasting).
    emit : callable, optional
        Array rules: ``emit(ctx)`` writes statements that fill the output arrays.
    numeric : bool
        Array rules: take ``float16`` data as ``float32`` arrays (arithmetic), rather than as
        raw bits (data movement).
    view : callable, optional
        Array rules that only reinterpret a shape: ``view(ctx) -> str``, an expression for an
        output that shares the input's memory (used when the value is not a kernel output).
    f16_exact : bool
        Elementwise rules whose ``float16`` result needs no rounding (it is one of the inputs,
        or a constant exactly representable).
    shape_only_args : tuple of int
        Elementwise rules: arguments whose shape is used but whose elements are never read
        (``zeros_like``); the fused loop does not load them.
    epilogue : bool
        Array rules with one output that call ``ctx.epilogue(starts, counts)`` each time a
        block of the output is final (a convolution's channels of one image, a whole
        matrix product), so the code generator can apply the elementwise chain that
        consumes the output to that block while it is still in cache, instead of in a
        separate pass (see :mod:`vm.kernels.codegen`).
    post : str
        Epilogue rules whose loops can apply a chain of a bias, a residual and an
        activation themselves as they store their output (``ctx.post``, see
        :func:`vm.kernels.runtime.packed.post_epilogue`), on some paths or all; the
        others call ``ctx.epilogue`` as usual. ``"channels"``: a convolution's loops, the
        bias an ``nn.bias_add`` along axis 1, the activation a clamp, ``nn.relu`` or
        swish. ``"columns"``: a dense layer's, the bias along the last axis (also an
        ``add`` of a 1-D array), the activation also the exporters' gelu. Empty: none.
    """

    name: str
    num_args: int | None
    attrs: tuple[Attr, ...]
    infer: Infer
    shape: Callable[..., list[list[str]]]
    expr: Callable[..., str] | None = None
    arg_map: Callable[..., tuple[int, ...]] | None = None
    emit: Callable[..., None] | None = None
    numeric: bool = False
    view: Callable[..., str] | None = None
    f16_exact: bool = False
    shape_only_args: tuple[int, ...] = ()
    epilogue: bool = False
    post: str = ""
    doc: str = field(default="", compare=False)

    @property
    def elementwise(self) -> bool:
        return self.expr is not None


#: An operator's run-time shape rule: ``rule(arg_shapes, attrs, out_ranks) -> output
#: shapes`` on concrete sizes, raising :class:`RuleError` (run by :mod:`vm.shape_funcs`);
#: ``out_ranks`` are the ranks the description declares (``squeeze`` without ``axis``).
ShapeRule = Callable[[list[tuple[int, ...]], Mapping[str, Any], tuple[int, ...]], list]


#: A data-dependent run-time shape rule: ``rule(arg_shapes, arg_values, attrs, out_ranks)
#: -> output shapes``, where ``arg_values`` holds the arrays of the arguments the rule reads
#: by value (``None`` for the others).
ValueRule = Callable[[list[tuple[int, ...]], list[Any], Mapping[str, Any], tuple[int, ...]], list]


class RuleSet:
    """The rules one ``emit_*`` module defines, in order, and its operators' run-time shape
    rules; :mod:`vm.kernels.table` gathers every module's set into the operator table."""

    def __init__(self) -> None:
        self.rules: list[OpRule] = []
        self.shapes: dict[str, ShapeRule] = {}
        self.value_shapes: dict[str, tuple[tuple[int, ...], ValueRule]] = {}

    def shape(self, *names: str) -> Callable[[ShapeRule], ShapeRule]:
        """Decorator: the run-time shape rule of operators ``names``."""

        def add(fn: ShapeRule) -> ShapeRule:
            for name in names:
                if name in self.shapes:
                    raise ValueError(f"shape rule {name} is registered twice")
                self.shapes[name] = fn
            return fn

        return add

    def value_shape(self, *names: str, args: tuple[int, ...]) -> Callable[[ValueRule], ValueRule]:
        """Decorator: the data-dependent run-time shape rule of operators ``names``, whose
        output shapes depend on the values of the arguments at positions ``args`` (TVM's
        data-dependent shape functions)."""

        def add(fn: ValueRule) -> ValueRule:
            for name in names:
                if name in self.shapes or name in self.value_shapes:
                    raise ValueError(f"shape rule {name} is registered twice")
                self.value_shapes[name] = (args, fn)
            return fn

        return add

    def register(self, rule: OpRule) -> OpRule:
        """Add ``rule`` to the set; returns it."""
        if (rule.expr is None) == (rule.emit is None):
            raise ValueError(f"kernel rule {rule.name} needs exactly one of expr and emit")
        self.rules.append(rule)
        return rule
