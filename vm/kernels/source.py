"""Building blocks for generated kernel source: an indenting line writer, the contexts the
operator emitters receive, typed constants and scalar casts.

Runtime layer, kernel generator (``vm.kernels``); standard library only.

Generated code follows a few conventions the emitters rely on: numpy is ``np``, the
helper module :mod:`vm.kernels.runtime.helpers` is ``h``, ``numba`` is imported by name, and a
scalar in an expression always has its dtype's *compute* type (``float32`` for
``float16``; see :mod:`vm.kernels.dtypes`).
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from vm.kernels import dtypes
from vm.kernels.rules import Spec

#: Loops nested deeper than this are partly flattened: CPython refuses more than 20
#: statically nested blocks in one function, and a rank-32 tensor needs 32 loops.
MAX_NEST = 6


class Source:
    """Lines of Python source with an indentation level and a supply of fresh names."""

    def __init__(self, indent: int = 1) -> None:
        self.lines: list[str] = []
        self.level = indent
        self._counts: dict[str, int] = {}

    def line(self, text: str) -> None:
        """Append one line at the current indentation."""
        self.lines.append("    " * self.level + text)

    @contextlib.contextmanager
    def block(self, header: str) -> Iterator[None]:
        """``header`` (ending in ``:``) followed by an indented body."""
        self.line(header)
        self.level += 1
        try:
            yield
        finally:
            self.level -= 1

    def fresh(self, prefix: str) -> str:
        """A name starting with ``prefix`` not handed out before."""
        count = self._counts.get(prefix, 0)
        self._counts[prefix] = count + 1
        return f"{prefix}{count}"

    @contextlib.contextmanager
    def loops(
        self, dims: Sequence[str], prefix: str = "i", flat: bool = False
    ) -> Iterator[list[str]]:
        """A loop nest over ``dims`` (row-major); yields the index variable names.

        Beyond :data:`MAX_NEST` dimensions the leading ones are walked by one flat loop whose
        counter is split back into indices, so the nesting depth stays bounded; ``flat``
        walks every dimension that way (slower, but much less code for LLVM to optimize).
        """
        names = [self.fresh(prefix) for _ in dims]
        with contextlib.ExitStack() as stack:
            split = max(0, len(dims) - MAX_NEST + 1) if len(dims) > MAX_NEST else 0
            if flat and len(dims) > 1:
                split = len(dims)
            if split:
                flat = self.fresh("q")
                total = " * ".join(dims[:split])
                stack.enter_context(self.block(f"for {flat} in range({total}):"))
                rest = self.fresh("r")
                self.line(f"{rest} = {flat}")
                for k in range(split - 1, 0, -1):
                    self.line(f"{names[k]} = {rest} % {dims[k]}")
                    self.line(f"{rest} = {rest} // {dims[k]}")
                self.line(f"{names[0]} = {rest}")
            for name, dim in zip(names[split:], dims[split:]):
                stack.enter_context(self.block(f"for {name} in range({dim}):"))
            yield names

    def running_sum(self, total: str, element: Callable[[str], str], count: str) -> None:
        """``total = sum(element(j) for j in range(count))`` in float64, in four running
        sums: a single sum waits on the latency of each addition before the next (a
        float sum in order cannot be vectorized either), four overlap."""
        sums = [self.fresh("t") for _ in range(4)]
        j, whole = self.fresh("j"), self.fresh("n")
        for t in sums:
            self.line(f"{t} = 0.0")
        self.line(f"{whole} = {count} - {count} % 4")
        with self.block(f"for {j} in range(0, {whole}, 4):"):
            for k, t in enumerate(sums):
                self.line(f"{t} += {element(f'{j} + {k}')}")
        with self.block(f"for {j} in range({whole}, {count}):"):
            self.line(f"{sums[0]} += {element(j)}")
        self.line(f"{total} = ({sums[0]} + {sums[1]}) + ({sums[2]} + {sums[3]})")

    def text(self) -> str:
        return "\n".join(self.lines)


#: Names of the arrays a kernel's source holds C-contiguous: its arguments, its
#: temporaries and its outputs seen with another shape (numba reshapes no other without a
#: copy).
C_ARRAY = re.compile(r"(in|out)\d+|tc?_\d+|rv_\d+")
#: Names of a kernel's strided views of slices and transposes: arrays whose strides only
#: their indexing follows (see ``vm.kernels.codegen``). Every other array the source
#: holds numba types C-contiguous, reshaped views of the arrays above included.
STRIDED_VIEW = re.compile(r"sv_\d+")


def index(names: Sequence[str]) -> str:
    """The subscript for a tuple of index expressions (``()`` for a 0-d array)."""
    if not names:
        return "()"
    return ", ".join(names)


def product(dims: Sequence[str]) -> str:
    """The element count of a shape, as an expression."""
    return " * ".join(dims) if dims else "1"


def shape_tuple(dims: Sequence[str]) -> str:
    """A shape tuple expression (``(d,)`` for one dimension)."""
    if len(dims) == 1:
        return f"({dims[0]},)"
    return "(" + ", ".join(dims) + ")"


def quote(text: str) -> str:
    """``text`` as a Python string literal."""
    return repr(text)


# --- typed constants and casts -----------------------------------------------------------------


def float_literal(value: float) -> str:
    """A float as source text, including infinities and NaN."""
    if math.isnan(value):
        return "np.nan"
    if math.isinf(value):
        return "np.inf" if value > 0 else "-np.inf"
    return repr(float(value))


def const(value: object, dtype: str) -> str:
    """A scalar constant of ``dtype``'s compute type."""
    if dtype == "bool":
        return "True" if value else "False"
    kind = dtypes.kind(dtype)
    if kind == "float":
        return f"{dtypes.np_type(dtype)}({float_literal(float(value))})"  # type: ignore[arg-type]
    return f"{dtypes.np_type(dtype)}({int(value)})"  # type: ignore[call-overload]


def cast(expr: str, src: str, dst: str) -> str:
    """Convert a compute-typed scalar of dtype ``src`` to dtype ``dst`` (numpy ``astype``).

    Floats convert to integers through ``int64`` (truncating toward zero, then wrapping
    like numpy on common hardware); conversions to ``float16`` round once, from the
    source value itself, so ``float64 -> float16`` is not rounded twice.
    """
    if src == dst:
        return expr
    if dst == "bool":
        return f"({expr} != 0)"
    dk = dtypes.kind(dst)
    if dst == "float16":
        return f"h.f16_round(np.float64({expr}))"
    if dk == "float":
        return f"{dtypes.np_type(dst)}({expr})"
    # integer destination
    if dtypes.kind(src) == "float":
        if dst == "uint64":
            return f"np.uint64({expr})"
        return f"{dtypes.np_type(dst)}(np.int64({expr}))"
    return f"{dtypes.np_type(dst)}({expr})"


def plain(value: int | bool) -> str:
    """A constant argument for a compiled helper, typed ``int64``/``bool`` instead of as a
    literal: numba compiles a callee again for every distinct literal argument, so passing
    attributes as literals would recompile the helpers for every kernel."""
    if isinstance(value, bool):
        return f"np.bool_({value})"
    return f"np.int64({int(value)})"


def wrap(expr: str, dtype: str) -> str:
    """Bring an expression computed in a wider type back to ``dtype``'s compute type."""
    if dtype == "bool":
        return expr
    return f"{dtypes.np_type(dtype)}({expr})"


# --- contexts handed to the emitters -----------------------------------------------------------


@dataclass
class ExprCtx:
    """What an elementwise rule sees: its arguments' scalar expressions and types."""

    args: list[str]
    arg_specs: list[Spec]
    out_spec: Spec
    attrs: dict[str, Any]


@dataclass
class ShapeCtx:
    """What a rule's shape function sees; checks are written to ``src``."""

    src: Source
    where: str
    arg_dims: list[list[str]]
    arg_specs: list[Spec]
    out_specs: list[Spec]
    attrs: dict[str, Any]
    #: Names the shape function leaves for the emitter (slice starts, split offsets).
    extra: dict[str, Any] = field(default_factory=dict)

    def what(self, detail: str) -> str:
        """A message prefix naming the node, as a source literal."""
        return quote(f"{self.where}: {detail}")

    def fail_if(self, condition: str, message: str) -> None:
        """Raise ``ValueError`` (naming the node) when ``condition`` holds at run time."""
        with self.src.block(f"if {condition}:"):
            self.src.line(f"h.fail({self.what(message)})")

    def expect(self, found: str, expected: str, detail: str) -> None:
        """Raise ``ValueError`` naming both values unless ``found == expected``."""
        self.src.line(f"h.expect({found}, {expected}, {self.what(detail)})")

    def bcast(self, a: str, b: str) -> str:
        """A fresh variable holding the broadcast of dimensions ``a`` and ``b``."""
        name = self.src.fresh("d")
        self.src.line(f"{name} = h.bcast({a}, {b}, {self.what('operands')})")
        return name

    def let(self, expr: str) -> str:
        """A fresh variable holding ``expr``."""
        name = self.src.fresh("d")
        self.src.line(f"{name} = {expr}")
        return name


@dataclass
class EmitCtx:
    """What an array rule sees: argument arrays, output arrays and their shapes.

    ``epilogue``, set only for rules declaring ``epilogue=True`` whose output feeds a fused
    elementwise chain, is ``epilogue(starts, counts)``: call it right after the block of
    output 0 with index ``starts[d] .. starts[d] + counts[d]`` along each dimension ``d``
    is final (expressions; a count of ``"1"`` adds no loop), and it emits the chain for
    that block. ``post``, set as well for rules declaring ``post`` whose chain is a bias,
    a residual and an activation their loops apply (see :class:`vm.kernels.rules.OpRule`),
    names the epilogue array the rule may pass to its loops
    (:func:`vm.kernels.runtime.packed.post_epilogue`) instead of calling ``epilogue``.
    """

    src: Source
    where: str
    args: list[str]
    arg_dims: list[list[str]]
    arg_specs: list[Spec]
    outs: list[str]
    out_dims: list[list[str]]
    out_specs: list[Spec]
    attrs: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)
    epilogue: Callable[[list[str], list[str]], None] | None = None
    post: str | None = None

    def what(self, detail: str) -> str:
        return quote(f"{self.where}: {detail}")

    def fail_if(self, condition: str, message: str) -> None:
        with self.src.block(f"if {condition}:"):
            self.src.line(f"h.fail({self.what(message)})")
