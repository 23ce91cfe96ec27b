"""Kernel code generation: a validated description becomes the source of one numba module.

Runtime layer, kernel generator (``vm.kernels``); standard library only (the generated code imports
numpy, numba, and the modules of :data:`LIBRARY_ALIASES` it calls).

The module holds one ``@numba.njit`` function ``kernel(in0, ..., out0, ...)`` with an
explicit signature (C-contiguous arrays of the declared dtypes and ranks) in
destination-passing style: the caller allocates every output and the kernel fills it.
The kernel body has these parts:

1. *Shapes.* Every value's shape is computed from the input shapes and the attributes,
   checking broadcasting and sizes, and each output array's shape is compared with the
   shape its result must have, so a wrong call raises ``ValueError`` instead of touching
   memory outside an array.
2. *Array operators* (reductions, layout changes, products, softmax) run in order, each
   writing a temporary or, for a kernel result, the output array itself.
3. *Elementwise chains* are not computed node by node: every elementwise value is an
   expression, and a value is only materialized (as one loop over its shape that
   evaluates the whole chain of expressions below it) when an array operator needs it or
   it is a result. Arrays a loop reads are indexed through 0/1 flags so that size-1
   dimensions broadcast; LLVM versions the loop on them, so same-shape operands still
   vectorize. A chain with several calls of scalar library functions (``np.sin``,
   ``np.log`` on float64, ``np.power``) runs block by block instead, one loop per call
   (see :meth:`_Generator.emit_blocked`).
4. *Epilogues.* When the output of an array operator that supports it (a convolution, a
   matrix product) feeds the elementwise chain of a result (bias, folded batch norm,
   residual add, relu) and that chain needs nothing computed later, the chain is not a
   separate loop: the operator calls it on each block of its output as soon as the block
   is final, while it is in cache, and writes its own output straight into the result's
   array when nothing else reads it. A run-time check that the result has the operator's
   shape (a chain may broadcast it to a bigger one) guards this; otherwise the plain path
   runs.

Everything inlined into the source comes from validated data (operator names from the
rule table, integers, floats via ``repr``, whitelisted dtypes); messages are quoted with
``repr``; so a description cannot inject code.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import NamedTuple

from vm.kernels import dtypes
from vm.kernels.description import Description, Node
from vm.kernels.emit_elementwise import clip_bounds
from vm.kernels.emit_layout import transpose_perm
from vm.kernels.rules import OpRule, Spec
from vm.kernels.source import (
    C_ARRAY,
    STRIDED_VIEW,
    EmitCtx,
    ExprCtx,
    ShapeCtx,
    Source,
    float_literal,
    index,
    product,
    quote,
    shape_tuple,
    wrap,
)
from vm.kernels.table import get_rule

#: Bump when generated code changes meaning in a way the library hash would not catch
#: (2: a strided view is never a tile epilogue's residual; 3: reshaped views still are, and
#: still take the register-tile transposes).
CODEGEN_VERSION = 3

#: The runtime modules generated code calls (modules of ``vm.kernels.runtime``), by the
#: name the emitters call them under. A kernel imports only those it calls: importing one
#: compiles nothing, but what its entry points need is compiled for each kernel that calls
#: them (see :func:`library_calls`).
LIBRARY_ALIASES = {
    "products": "products",
    "convolution": "convolution",
    "cv": "conv_loops",
    "dwc": "depthwise",
    "pool": "pool_loops",
    "rs": "resample",
    "h": "helpers",
    "vx": "vecmath",
    "wino": "winograd",
    "tr": "transpose",
    "rw": "rows",
    "pk": "packed",
    "cb": "callbacks",
}
_REFERENCE = re.compile(r"(?<![\w.])(" + "|".join(LIBRARY_ALIASES) + r")\.([A-Za-z_]\w*)")

#: Functions numba lowers to calls of the C math library, which keep a loop scalar (the
#: ``vx`` versions of :mod:`vm.kernels.runtime.vecmath` are inlined arithmetic instead).
_SCALAR_CALL = re.compile(r"(?<![\w.])(?:np|math)\.(?:sin|cos|tan|tanh|exp|log|power|fmod|erf)\(")
#: A fused chain with at least this many scalar calls runs block by block: evaluated
#: element by element, each element waits on the latency of its calls one after another,
#: where a loop per call overlaps the calls of neighbouring elements. Measured on chains of
#: float32 sin, multiply, cos, add over 10x10 and 64x64 (AMD EPYC Zen 4, AVX-512): four
#: calls even, six 1.2-1.5x faster blocked, fifty 3.2-3.7x; cheap operators alone run 2x
#: slower blocked, so they never count.
BLOCK_MIN_CALLS = 5
#: Elements per block: a block of every value crossing between the loops stays in L1.
BLOCK_SIZE = 128


def library_calls(source: str) -> set[tuple[str, str]]:
    """The library functions generated ``source`` refers to outside comments, as
    ``(module, function)`` pairs, the module named as in ``vm.kernels.runtime``
    (``("products", "product_into")``). A quoted message mentioning ``products.x`` would
    add a pair too, which costs an import at worst."""
    found = set()
    for line in source.splitlines():
        if not line.lstrip().startswith("#"):
            for alias, name in _REFERENCE.findall(line):
                found.add((LIBRARY_ALIASES[alias], name))
    return found


STORAGE = "storage"
COMPUTE = "compute"


@dataclass
class _Value:
    index: int
    spec: Spec
    node: Node | None
    dims: list[str] = field(default_factory=list)
    #: Array names holding the value: STORAGE (float16 as bits) and/or COMPUTE (float16 as
    #: float32). For other dtypes the two are the same array.
    arrays: dict[str, str] = field(default_factory=dict)
    #: Output positions this value is returned in.
    outs: list[int] = field(default_factory=list)

    @property
    def f16(self) -> bool:
        return self.spec.dtype == "float16"

    def rep(self, rep: str) -> str:
        return rep if self.f16 else STORAGE

    @property
    def read(self) -> str:
        """The array loops read the value from: its float32 form when it has one, else
        its storage (float16 bits, decoded as they are read)."""
        return self.arrays.get(COMPUTE) or self.arrays[STORAGE]


@dataclass
class _ArgMapCtx:
    attrs: dict


#: A value read at loop positions: the unit of a fused loop's expression tree.
_Use = tuple[_Value, tuple[int, ...]]


#: Output elements from which a dense layer's loops apply its fused chain themselves
#: (``OpRule.post == "columns"``): below, the header they read (a copy of the bias) costs
#: more than the chain in the loop after the product. One row of 512 (an MLP at batch 1):
#: about a microsecond a layer more through the header.
COLUMNS_POST_MIN = 16384


@dataclass
class _Post:
    """A chain that an operator's loops apply as they store (see :meth:`_Generator.tile_epilogue`):
    the bias and residual arrays (or None), then the activation (a
    :mod:`vm.kernels.runtime.packed` code: ``CLAMP`` to ``[lo, hi]``, ``RELU``, ``SWISH``,
    ``GELU``, ``GELU_TANH``). A gelu's constants are kernel inputs: ``gelu`` holds the
    scalar values of its divisor (the tanh form's scale), its one and its half, and
    ``cubic`` the tanh form's coefficient of the cube."""

    bias: str | None = None
    residual: str | None = None
    lo: float = -math.inf
    hi: float = math.inf
    activation: str = "CLAMP"
    gelu: tuple[_Value, _Value, _Value] | None = None
    cubic: _Value | None = None


def _operand_orders(node: Node | None, op: str) -> list[tuple[int, int]]:
    """Both orders of the two operands of ``node`` if it is a binary ``op``, else none: the
    commutative steps of a chain matched by its shape (the gelus)."""
    if node is None or node.op != op or len(node.args) != 2:
        return []
    a, b = node.args
    return [(a, b), (b, a)]


class _Epilogue(NamedTuple):
    """An array operator's output ``value`` consumed by the elementwise chain of result
    ``root`` (output ``out``); ``borrow``: ``value`` may live in the result's own array."""

    value: _Value
    root: _Value
    out: int
    borrow: bool


class _Generator:
    def __init__(self, desc: Description) -> None:
        self.desc = desc
        self.src = Source(indent=1)
        self.values: list[_Value] = []
        for k, spec in enumerate(desc.inputs):
            self.values.append(_Value(k, spec, None, arrays={STORAGE: f"in{k}"}))
        for node in desc.nodes:
            for v, spec in zip(node.values, node.outputs):
                self.values.append(_Value(v, spec, node))
        for k, v in enumerate(desc.results):
            self.values[v].outs.append(k)
        #: Output position -> the value whose storage it holds.
        self.claimed: dict[int, int] = {}
        #: Value index -> indices of the nodes that read it.
        self.consumers: dict[int, set[int]] = {}
        for node in desc.nodes:
            for a in node.args:
                self.consumers.setdefault(a, set()).add(node.index)
        self.flags_done: set[int] = set()
        self.extras: dict[int, dict] = {}
        #: Value index -> an array holding it with the loop's own shape, read at the loop
        #: indices themselves (an epilogue's operator output).
        self.direct: dict[int, str] = {}
        #: Values of scalar operands read before an epilogue's loop: value index -> name.
        self.hoisted: dict[int, str] = {}
        #: (value index, positions) -> a C-contiguous row of a strided view, read at the
        #: innermost loop index (see emit_unit_rows).
        self.rows: dict[tuple[int, tuple[int, ...]], str] = {}
        self.node_of = {node.index: node for node in desc.nodes}
        #: Values held as strided views of their input's memory (see plan_strided).
        self.strided = self.plan_strided()

    # --- names ---------------------------------------------------------------------------------

    @staticmethod
    def where(node: Node) -> str:
        return f"node {node.index} ({node.op})"

    def rule(self, node: Node) -> OpRule:
        rule = get_rule(node.op)
        assert rule is not None  # descriptions are validated before code generation
        return rule

    # --- part 1: shapes ------------------------------------------------------------------------

    def emit_shapes(self) -> None:
        src = self.src
        for k, spec in enumerate(self.desc.inputs):
            value = self.values[k]
            value.dims = [f"s{k}_{d}" for d in range(spec.ndim)]
            if spec.ndim:
                src.line(f"{', '.join(value.dims)}, = in{k}.shape")
        for node in self.desc.nodes:
            self.emit_node_shape(node)
        for k, v in enumerate(self.desc.results):
            dims = self.values[v].dims
            for d, dim in enumerate(dims):
                src.line(
                    f"h.expect(out{k}.shape[{d}], {dim}, "
                    f"{quote(f'output {k}: size of dimension {d}')})"
                )

    def emit_node_shape(self, node: Node) -> None:
        rule = self.rule(node)
        arg_values = [self.values[a] for a in node.args]
        out_values = [self.values[v] for v in node.values]
        src = self.src
        if rule.view is not None and out_values[0].outs:
            # A reshape-like result takes the output array's shape; only the size must agree.
            (value,) = out_values
            k = value.outs[0]
            value.dims = [f"s{value.index}_{d}" for d in range(value.spec.ndim)]
            if value.dims:
                src.line(f"{', '.join(value.dims)}, = out{k}.shape")
            src.line(
                f"h.expect({product(value.dims)}, {product(arg_values[0].dims)}, "
                f"{quote(f'{self.where(node)}: element count of output {k}')})"
            )
            return
        ctx = ShapeCtx(
            src,
            self.where(node),
            [list(a.dims) for a in arg_values],
            [a.spec for a in arg_values],
            list(node.outputs),
            node.attrs,
        )
        shapes = rule.shape(ctx)
        self.extras[node.index] = ctx.extra
        for value, dims in zip(out_values, shapes):
            value.dims = [f"s{value.index}_{d}" for d in range(len(dims))]
            for name, expr in zip(value.dims, dims):
                src.line(f"{name} = {expr}")

    # --- part 2: array operators ---------------------------------------------------------------

    def emit_body(self) -> None:
        for node in self.desc.nodes:
            rule = self.rule(node)
            if rule.elementwise:
                continue  # evaluated lazily, inside the loops of the values that need it
            self.emit_array_node(node, rule)
        for k, v in enumerate(self.desc.results):
            self.emit_result(k, self.values[v])

    def claim(self, value: _Value) -> str | None:
        """An output array ``value`` may be written into directly, if it has an unused one."""
        for k in value.outs:
            if k not in self.claimed:
                self.claimed[k] = value.index
                return f"out{k}"
        return None

    def temp(self, value: _Value, rep: str) -> str:
        name = f"{'tc' if rep == COMPUTE and value.f16 else 't'}_{value.index}"
        dtype = (
            dtypes.np_type(value.spec.dtype)
            if rep == COMPUTE
            else dtypes.np_storage_type(value.spec.dtype)
        )
        self.src.line(f"{name} = np.empty({shape_tuple(value.dims)}, {dtype})")
        return name

    # --- strided views ----------------------------------------------------------------------

    def plan_strided(self) -> set[int]:
        """The values of slices, transposes and reshapes that need no array of their own.

        A ``strided_slice``, a ``transpose`` that keeps the last axis last, and a
        reshape-like operator of such a value are views of their input's memory with other
        strides, when everything that reads them indexes an array of any layout: a fused
        elementwise loop, another such view, or the loops of a transpose or a slice. An
        attention layer's head split (a slice of the joint projection, a reshape, a
        transpose, a scale) is then one loop reading the projection in place, where each
        operator copied the data once. Not for kernel results, float16 (whose two
        representations convert through flat copies) or scalars. Decided from the last
        node back, so that each value knows whether its readers are views.
        """
        strided: set[int] = set()
        for node in reversed(self.desc.nodes):
            if len(node.values) != 1:
                continue
            value = self.values[node.values[0]]
            if value.outs or value.f16 or value.spec.ndim == 0:
                continue
            if not self.viewable(node):
                continue
            readers = self.consumers.get(value.index, set())
            if readers and all(self.reads_strided(self.node_of[r], strided) for r in readers):
                strided.add(value.index)
        # A reshape of an array numba holds contiguous is its plain view instead.
        for node in self.desc.nodes:
            value = node.values[0] if len(node.values) == 1 else None
            if value in strided and self.rule(node).view and node.args[0] not in strided:
                strided.discard(value)
        return strided

    def viewable(self, node: Node) -> bool:
        """Whether ``node``'s value can be a strided view of its first argument."""
        if node.op == "strided_slice":
            return True
        if node.op == "transpose":
            perm = transpose_perm(node.attrs["axes"], node.outputs[0].ndim)
            return perm[-1] == len(perm) - 1
        return self.rule(node).view is not None

    def reads_strided(self, reader: Node, strided: set[int]) -> bool:
        """Whether ``reader`` indexes its arguments whatever their strides."""
        if self.rule(reader).elementwise:
            return True
        if len(reader.values) == 1 and reader.values[0] in strided:
            return True
        return reader.op in ("transpose", "strided_slice")

    def emit_strided(self, node: Node) -> None:
        """``node``'s value as a view of its input (see :meth:`plan_strided`)."""
        (value,) = (self.values[v] for v in node.values)
        x = self.array(self.values[node.args[0]], STORAGE)
        name = f"sv_{value.index}"  # see source.STRIDED_VIEW
        ndim = value.spec.ndim
        if node.op == "strided_slice":
            starts = self.extras[node.index]["starts"]
            # The view starts at the first element the slice takes; a step scales a stride.
            begin = ", ".join(f"{starts[d][0]}:" if d in starts else ":" for d in range(ndim))
            strides = [
                f"{x}.strides[{d}] * {starts[d][1]}" if d in starts else f"{x}.strides[{d}]"
                for d in range(ndim)
            ]
            expr = (
                f"np.lib.stride_tricks.as_strided({x}[{begin}], {shape_tuple(value.dims)}, "
                f"{shape_tuple(strides)})"
            )
        elif node.op == "transpose":
            perm = transpose_perm(node.attrs["axes"], ndim)
            expr = f"np.transpose({x}, {shape_tuple([str(a) for a in perm])})"
        else:
            expr = f"h.restride({x}, {shape_tuple(value.dims)})"
        self.src.line(f"# {self.where(node)}: a strided view of its input")
        self.src.line(f"{name} = {expr}")
        value.arrays[STORAGE] = name

    def emit_array_node(self, node: Node, rule: OpRule) -> None:
        if all(self.values[v].arrays for v in node.values):
            return  # its input's operator wrote it (see claim_through_view)
        if len(node.values) == 1 and node.values[0] in self.strided:
            self.emit_strided(node)
            return
        if rule.view is not None and self.emit_into_reshaped_output(node):
            return
        rep = COMPUTE if rule.numeric else STORAGE
        args = [self.array(self.values[a], rep) for a in node.args]
        out_values = [self.values[v] for v in node.values]
        src = self.src
        ctx = EmitCtx(
            src,
            self.where(node),
            args,
            [list(self.values[a].dims) for a in node.args],
            [self.values[a].spec for a in node.args],
            [],
            [list(v.dims) for v in out_values],
            list(node.outputs),
            node.attrs,
            self.extras.get(node.index, {}),
        )
        if rule.view is not None and not out_values[0].outs:
            (value,) = out_values
            name = f"tv_{value.index}"
            src.line(f"# {self.where(node)}: a view of its input")
            src.line(f"{name} = {rule.view(ctx)}")
            value.arrays[value.rep(rep)] = name
            return
        plan = self.plan_epilogue(node, rule) if rule.epilogue else None
        if plan is not None:
            self.emit_with_epilogue(ctx, rule, plan)
            return
        src.line(f"# {self.where(node)}")
        for value in out_values:
            dest = None
            if value.rep(rep) == STORAGE:
                dest = self.claim(value) or self.claim_through_view(value)
            if dest is None:
                dest = self.temp(value, value.rep(rep))
            value.arrays[value.rep(rep)] = dest
            ctx.outs.append(dest)
        rule.emit(ctx)  # type: ignore[misc]

    def claim_through_view(self, value: _Value) -> str | None:
        """An output seen with ``value``'s shape, when all that reads ``value`` is a
        reshape-like operator returning it as that output: the operator making ``value``
        (a transpose of attention heads, say) writes there, and the reshape is left with
        nothing to do, where it copied a temporary the size of the output."""
        readers = self.consumers.get(value.index, set())
        if value.outs or value.f16 or len(readers) != 1:
            return None
        (reader,) = (n for n in self.desc.nodes if n.index in readers)
        if self.rule(reader).view is None or len(reader.values) != 1:
            return None
        result = self.values[reader.values[0]]
        dest = self.claim(result)
        if dest is None:
            return None
        result.arrays[STORAGE] = dest
        return self.output_view(dest, value, f"value {value.index} is written into {dest}")

    def output_view(self, dest: str, value: _Value, note: str) -> str:
        """The output ``dest`` seen with ``value``'s shape, under the comment ``note``."""
        view = f"rv_{value.index}"
        self.src.line(f"# {note}")
        self.src.line(f"{view} = {dest}.reshape({shape_tuple(value.dims)})")
        return view

    def emit_into_reshaped_output(self, node: Node) -> bool:
        """Compute a reshape-like result's elementwise input straight into the output.

        The output array, seen with the input's shape, takes the fused loop's writes, which
        saves a temporary the size of the output and the copy out of it (GELU before a
        reshape, a scaled product before heads are merged)."""
        (value,) = (self.values[v] for v in node.values)
        arg = self.values[node.args[0]]
        if not value.outs or arg.arrays or arg.outs or arg.node is None:
            return False
        if not self.rule(arg.node).elementwise:
            return False
        dest = self.claim(value)
        if dest is None:
            return False
        view = self.output_view(
            dest, arg, f"{self.where(node)}: value {arg.index} is computed into output"
        )
        self.emit_fused(arg, view, STORAGE)
        arg.arrays[STORAGE] = view
        value.arrays[STORAGE] = dest
        return True

    # --- epilogues -----------------------------------------------------------------------------

    def plan_epilogue(self, node: Node, rule: OpRule) -> _Epilogue | None:
        """The result whose elementwise chain can run as ``node``'s epilogue, if any."""
        if len(node.values) != 1:
            return None
        value = self.values[node.values[0]]
        if value.f16:
            return None
        identity = tuple(range(value.spec.ndim))
        for k, v in enumerate(self.desc.results):
            root = self.values[v]
            if k in self.claimed or root is value or root.arrays or root.node is None:
                continue
            if not self.rule(root.node).elementwise or root.spec.ndim != value.spec.ndim:
                continue
            order = self.fused_tree(root, pending=value)
            if order is None:
                continue
            uses = [positions for v2, positions in order if v2 is value]
            if not uses or any(positions != identity for positions in uses):
                continue
            inner = {v2.index for v2, _ in order if not v2.arrays and v2 is not value}
            nodes = {self.values[i].node.index for i in inner}  # type: ignore[union-attr]
            private = all(
                i == root.index
                or (not self.values[i].outs and self.consumers.get(i, set()) <= nodes)
                for i in inner
            )
            borrow = (
                private
                and not value.outs
                and value.spec.dtype == root.spec.dtype
                and self.consumers.get(value.index, set()) <= nodes
            )
            return _Epilogue(value, root, k, borrow)
        return None

    def tile_epilogue(self, plan: _Epilogue, rule: OpRule) -> _Post | None:
        """The chain as the operator's loops apply it while they store (:data:`OpRule.post`),
        when it is just that: a float32 bias (``nn.bias_add`` along the channels; for a
        dense layer's loops along the last axis, or an ``add`` of a 1-D array), then an
        ``add`` of an array of the output's rank (a residual), then a ``clip``, an
        ``nn.relu``, a swish (``multiply(v, sigmoid(v))``) or, for a dense layer, the
        exporters' gelu (see :meth:`gelu_parts` and :meth:`tanh_gelu_parts`), any of them
        absent but one."""
        value, root = plan.value, plan.root
        if not rule.post or value.spec.dtype != "float32" or root.spec.dtype != "float32":
            return None
        columns = rule.post == "columns"
        node = root.node
        assert node is not None
        post = _Post()
        inner = self.swish_input(node)
        gelu = self.gelu_parts(node) if columns else None
        tanh_gelu = self.tanh_gelu_parts(node) if columns and gelu is None else None
        if node.op in ("clip", "nn.relu") or inner is not None or gelu or tanh_gelu:
            if node.op == "clip":
                post.lo, post.hi = clip_bounds("float32", node.attrs["a_min"], node.attrs["a_max"])
            elif node.op == "nn.relu":
                post.lo, post.activation = 0.0, "RELU"
            elif gelu is not None:
                inner, divisor, one, half = gelu
                post.activation = "GELU"
                post.gelu = (self.values[divisor], self.values[one], self.values[half])
            elif tanh_gelu is not None:
                inner, scale, one, half, cubic = tanh_gelu
                post.activation = "GELU_TANH"
                post.gelu = (self.values[scale], self.values[one], self.values[half])
                post.cubic = self.values[cubic]
            else:
                post.activation = "SWISH"
            argument = node.args[0] if inner is None else inner
            if argument == value.index:
                return post
            node = self.values[argument].node
        rank = value.spec.ndim
        if (
            node is not None
            and node.op == "add"
            and not (columns and self.columns_bias(node, value))
        ):
            # The residual is a whole array, read at the element's own offset: not a
            # strided view (see plan_strided).
            for mine, other in (node.args, reversed(node.args)):
                leaf = self.values[other]
                name = leaf.arrays.get(STORAGE)
                if leaf is value or name is None or leaf.spec.ndim != rank:
                    continue
                if STRIDED_VIEW.fullmatch(name):
                    continue
                if leaf.spec.dtype == "float32":
                    post.residual = name
                    node = self.values[mine].node if mine != value.index else None
                    break
            else:
                return None
            if mine == value.index:
                return post
        if node is None:
            return None
        if columns:
            post.bias = self.columns_bias(node, value)
            return post if post.bias is not None else None
        if node.op != "nn.bias_add" or node.args[0] != value.index:
            return None
        bias = self.values[node.args[1]]
        post.bias = bias.arrays.get(STORAGE)
        if node.attrs.get("axis", 1) % rank != 1 or bias.spec.dtype != "float32":
            return None
        return post if post.bias is not None else None

    def columns_bias(self, node: Node, value: _Value) -> str | None:
        """The array of a float32 bias that ``node`` adds to ``value`` along its last axis
        (``nn.bias_add`` on that axis, or an ``add`` of a 1-D array to an output of rank 2
        or more), else None."""
        rank = value.spec.ndim
        if node.op == "nn.bias_add":
            if node.args[0] != value.index or node.attrs.get("axis", 1) % rank != rank - 1:
                return None
            bias = self.values[node.args[1]]
        elif node.op == "add" and rank >= 2 and value.index in node.args:
            (other,) = [a for a in node.args if a != value.index] or [value.index]
            bias = self.values[other]
            if bias is value or bias.spec.ndim != 1:
                return None
        else:
            return None
        return bias.arrays.get(STORAGE) if bias.spec.dtype == "float32" else None

    def is_float32_scalar(self, index: int) -> bool:
        """Whether value ``index`` is a float32 scalar input of the kernel (a constant of
        the chain it belongs to)."""
        leaf = self.values[index]
        return bool(leaf.arrays) and leaf.spec.ndim == 0 and leaf.spec.dtype == "float32"

    def gelu_parts(self, node: Node) -> tuple[int, int, int, int] | None:
        """``(v, divisor, one, half)`` when ``node`` is ``multiply(multiply(v, add(erf(
        divide(v, divisor)), one)), half)`` (either order of each ``multiply`` and the
        ``add``), the gelu as exporters write it, with float32 scalar inputs as its
        constants; else None. Whether they are the gelu's (the square root of 2, 1 and
        0.5) does not matter but for ``one``, which the epilogue takes to be 1 (the
        kernel checks it before fusing)."""

        scalar, split = self.is_float32_scalar, _operand_orders

        for scaled, half in split(node, "multiply"):
            if not scalar(half):
                continue
            for v, term in split(self.values[scaled].node, "multiply"):
                for inner, one in split(self.values[term].node, "add"):
                    erf = self.values[inner].node
                    if not scalar(one) or erf is None or erf.op != "erf":
                        continue
                    divide = self.values[erf.args[0]].node
                    if divide is None or divide.op != "divide" or divide.args[0] != v:
                        continue
                    if scalar(divide.args[1]) and v != divide.args[1]:
                        return v, divide.args[1], one, half
        return None

    def tanh_gelu_parts(self, node: Node) -> tuple[int, int, int, int, int] | None:
        """``(v, scale, one, half, cubic)`` when ``node`` is ``multiply(multiply(v, half),
        add(tanh(multiply(add(v, multiply(multiply(multiply(v, v), v), cubic)), scale)),
        one))`` (either order of each ``multiply`` and ``add``), the tanh gelu as GPT-2
        writes it once ``SimplifyPower`` made its cube two products, with float32 scalar
        inputs as its constants; else None. The epilogue takes ``one`` to be 1 and
        ``cubic`` to be :data:`~vm.kernels.runtime.packed.GELU_CUBIC` (the kernel checks
        both before fusing)."""

        scalar, split = self.is_float32_scalar, _operand_orders

        def made(index: int, op: str) -> Node | None:
            n = self.values[index].node
            return n if n is not None and n.op == op else None

        for scaled, term in split(node, "multiply"):
            for v, half in split(made(scaled, "multiply"), "multiply"):
                if not scalar(half) or scalar(v):
                    continue
                for inner, one in split(made(term, "add"), "add"):
                    tanh = made(inner, "tanh")
                    if not scalar(one) or tanh is None:
                        continue
                    for total, scale in split(made(tanh.args[0], "multiply"), "multiply"):
                        if not scalar(scale):
                            continue
                        for mine, cubed in split(made(total, "add"), "add"):
                            if mine != v:
                                continue
                            for cube, cubic in split(made(cubed, "multiply"), "multiply"):
                                if scalar(cubic) and self.is_cube(cube, v):
                                    return v, scale, one, half, cubic
        return None

    def is_cube(self, index: int, v: int) -> bool:
        """Whether value ``index`` is ``multiply(multiply(v, v), v)`` (either order)."""
        node = self.values[index].node
        if node is None or node.op != "multiply" or len(node.args) != 2:
            return False
        for square, single in (node.args, tuple(reversed(node.args))):
            inner = self.values[square].node
            if single == v and inner is not None and inner.op == "multiply":
                return tuple(inner.args) == (v, v)
        return False

    def swish_input(self, node: Node) -> int | None:
        """The value ``v`` of ``node`` when it is ``multiply(v, sigmoid(v))`` (either order),
        the swish of EfficientNet (ONNX writes SiLU so), else None."""
        if node.op != "multiply":
            return None
        for mine, other in (node.args, reversed(node.args)):
            gate = self.values[other].node
            if gate is not None and gate.op == "sigmoid" and gate.args[0] == mine != other:
                return mine
        return None

    def emit_with_epilogue(self, ctx: EmitCtx, rule: OpRule, plan: _Epilogue) -> None:
        src = self.src
        value, root, k = plan.value, plan.root, plan.out
        node = value.node
        assert node is not None
        src.line(f"# {self.where(node)}, with value {root.index} (output {k}) as its epilogue")
        guard = src.fresh("ep")
        same = [f"{a} == {b}" for a, b in zip(root.dims, value.dims)]
        fused = self.tile_epilogue(plan, rule) if plan.borrow else None
        if fused is not None and fused.residual is not None:
            # The loops read the residual at the element's own offset: it must have the
            # output's shape (else the chain runs in the loop after the operator).
            same += [f"{fused.residual}.shape[{d}] == {n}" for d, n in enumerate(value.dims)]
        gelu: list[str] = []
        if fused is not None and fused.gelu is not None:
            # The loops add exactly 1 to the erf (or tanh), and take the tanh form's cube
            # by GELU_CUBIC; the divisor (scale) and the half they take as they come.
            leaves = [*fused.gelu, *([fused.cubic] if fused.cubic is not None else [])]
            for leaf in leaves:
                self.emit_flags(leaf)
                gelu.append(src.fresh("g"))
                src.line(f"{gelu[-1]} = np.float32({self.load(leaf, (), [])})")
            same.append(f"{gelu[1]} == np.float32(1.0)")
            if fused.cubic is not None:
                same.append(f"{gelu[3]} == convolution.GELU_CUBIC")
        src.line(f"{guard} = {' and '.join(same) if same else 'True'}")
        if plan.borrow:
            dest = f"t_{value.index}"
            dtype = dtypes.np_storage_type(value.spec.dtype)
            src.line(
                f"{dest} = out{k} if {guard} else np.empty({shape_tuple(value.dims)}, {dtype})"
            )
        else:
            dest = self.claim(value) or self.temp(value, STORAGE)
        value.arrays[STORAGE] = dest
        ctx.outs.append(dest)
        self.claimed[k] = root.index
        order = self.fused_tree(root)
        assert order is not None
        for leaf, _ in order:
            if leaf.arrays:
                self.emit_flags(leaf)
        target = f"out{k}"

        # The other arrays the chain reads (a bias vector, a residual) and, for each, the
        # test that it has the loop's extent on every axis it is read along.
        leaves = [
            (leaf, positions)
            for leaf, positions in order
            if leaf.arrays and leaf is not value and leaf.spec.ndim > 0
        ]
        # Scalars (a gelu's constants) are read once, before the loop: read inside it, from
        # memory LLVM cannot prove the output does not overwrite, they are loaded again
        # for every element.
        scalars = [
            leaf for leaf, _ in order if leaf.arrays and leaf is not value and leaf.spec.ndim == 0
        ]
        unbroadcast = [
            f"(m{leaf.index}_{d} == 1 or {root.dims[p]} == 1)"
            for leaf, positions in leaves
            for d, p in enumerate(positions)
        ]

        def merged(
            starts: list[str], counts: list[str], arrays: list[str]
        ) -> tuple[list[str], dict[str, str]]:
            """The region's trailing axes walked as one, when it spans them whole and every
            operand reads all of them or none: the counts, and a view of each array in
            ``arrays`` (the target, the operator's output, the leaves) with those axes
            folded into its last. A 7x7 or 14x14 plane is then one loop that fills the
            vector registers, where a loop along each 7- or 14-wide row stayed almost all
            scalar remainder (a bias-and-relu6 epilogue of 384x14x14: 19 us, folded: 5)."""
            ndim = len(counts)
            first = ndim
            while first and starts[first - 1] == "0" and counts[first - 1] == value.dims[first - 1]:
                first -= 1
            # A leaf reading part of the suffix (a residual broadcast along rows) narrows it.
            while ndim - first >= 2:
                suffix = tuple(range(first, ndim))
                if all(
                    not set(positions) & set(suffix) or positions[-len(suffix) :] == suffix
                    for _, positions in leaves
                ):
                    break
                first += 1
            fold = ndim - first
            reads = {arrays[0]: ndim, arrays[1]: ndim}
            for array, (leaf, positions) in zip(arrays[2:], leaves):
                if set(positions) & set(range(first, ndim)):
                    reads[array] = leaf.spec.ndim
            # Only arrays numba types as C-contiguous can be reshaped.
            if fold < 2 or not all(C_ARRAY.fullmatch(name) for name in reads):
                return counts, {}
            views = {name: self.folded_view(name, rank, fold) for name, rank in reads.items()}
            whole = " * ".join(f"({count})" for count in counts[first:])
            return [*counts[:first], *["1"] * (fold - 1), whole], views

        def loop(starts: list[str], counts: list[str], direct_leaves: bool) -> None:
            output = target if plan.borrow else dest
            arrays = [target, output] + [leaf.read for leaf, _ in leaves]
            views: dict[str, str] = {}
            if direct_leaves:
                counts, views = merged(starts, counts, arrays)
            looped = [count for count in counts if count != "1"]
            with src.loops(looped, "l") as locals_:
                names = []
                rest = iter(locals_)
                for start, count in zip(starts, counts):
                    name = src.fresh("e")
                    offset = "0" if count == "1" else next(rest)
                    src.line(f"{name} = {start} + {offset}")
                    names.append(name)
                # Inside the guard the operator's output has the loop's shape, so it is
                # read without broadcast flags; borrowed, it is read from the very array
                # the epilogue writes, as LLVM must see to vectorize the loop: through
                # another name it could only check the two for overlap at run time, and
                # found them overlapping (the same memory), so the loop ran scalar (a
                # transformer's gelu epilogue, 128x1024: 740 us).
                self.direct[value.index] = views.get(output, output)
                if direct_leaves:
                    for (leaf, _), array in zip(leaves, arrays[2:]):
                        self.direct[leaf.index] = views.get(array, array)
                write = views.get(target, target)
                self.emit_fused_body(root, order, names, f"{write}[{index(names)}]", STORAGE)
                del self.direct[value.index]
                if direct_leaves:
                    for leaf, _ in leaves:
                        self.direct.pop(leaf.index, None)

        def epilogue(starts: list[str], counts: list[str]) -> None:
            with src.block(f"if {guard}:"):
                for leaf in scalars:
                    name = src.fresh("c")
                    src.line(f"{name} = {self.load(leaf, (), [])}")
                    self.hoisted[leaf.index] = name
                if not unbroadcast:
                    loop(starts, counts, direct_leaves=False)
                else:
                    # A loop reading an operand through its 0/1 broadcast flag (bias[j * m])
                    # stays scalar once its body is long (LLVM does not version it on the
                    # flag): a gelu epilogue ran at 15 ns per element. The usual case, no
                    # operand broadcast along a looped axis, gets a loop of its own that
                    # indexes every operand directly.
                    with src.block(f"if {' and '.join(unbroadcast)}:"):
                        loop(starts, counts, direct_leaves=True)
                    with src.block("else:"):
                        loop(starts, counts, direct_leaves=False)
            self.hoisted.clear()

        ctx.epilogue = epilogue
        if fused is not None:
            # The operator's loops can apply the chain as they store (bias, residual,
            # clamp): no pass over the output after them. Those that do skip ctx.epilogue.
            # The epilogue is empty where the guard fails, and the chain then runs in the
            # loop below.
            ctx.post = src.fresh("post")
            bias = fused.bias or "np.zeros(1, np.float32)"
            residual = fused.residual or "np.empty(0, np.float32)"
            # A dense layer's bias runs along its last axis, a convolution's along axis 1.
            units = value.dims[-1] if rule.post == "columns" else value.dims[1]
            lo, hi = (
                (gelu[0], gelu[2]) if gelu else (float_literal(fused.lo), float_literal(fused.hi))
            )
            when = guard
            if rule.post == "columns":
                # A small dense layer's chain costs less in the loop after its product
                # than the epilogue header does (see COLUMNS_POST_MIN); the rule runs
                # ctx.epilogue when the header is empty.
                elements = " * ".join(f"({d})" for d in value.dims)
                when = f"{guard} and {elements} >= {COLUMNS_POST_MIN}"
            src.line(
                f"{ctx.post} = convolution.post_epilogue(np.int64({units}), {bias}, {lo}, {hi}, "
                f"convolution.{fused.activation}, "
                f"{residual}, {dest}) if {when} else np.empty(0, np.float32)"
            )
        rule.emit(ctx)  # type: ignore[misc]
        with src.block(f"if not {guard}:"):
            # Rare (the chain broadcasts the output to a bigger shape): a compact flat loop
            # keeps it from doubling the kernel's compile time.
            src.line("# the result is broadcast beyond the operator's output: a separate loop")
            self.emit_fused(root, target, STORAGE, flat=True)
        root.arrays[STORAGE] = target

    def array(self, value: _Value, rep: str) -> str:
        """The name of an array holding ``value`` in representation ``rep``, made if needed."""
        rep = value.rep(rep)
        if rep in value.arrays:
            return value.arrays[rep]
        dest = self.claim(value) if rep == STORAGE else None
        if dest is None:
            dest = self.temp(value, rep)
        if value.arrays:
            (have,) = value.arrays
            self.emit_convert(value, value.arrays[have], have, dest, rep)
        else:
            self.emit_fused(value, dest, rep)
        value.arrays[rep] = dest
        return dest

    def emit_result(self, k: int, value: _Value) -> None:
        if self.claimed.get(k) == value.index:
            return
        source = self.array(value, STORAGE)
        if source == f"out{k}":
            return
        self.src.line(f"# output {k} repeats value {value.index}")
        self.emit_convert(value, source, STORAGE, f"out{k}", STORAGE)

    def emit_convert(self, value: _Value, source: str, have: str, dest: str, rep: str) -> None:
        """Copy ``source`` into ``dest`` element by element, converting float16 as needed."""
        src = self.src
        n = src.fresh("n")
        src.line(f"{n} = {product(value.dims)}")
        a, b, j = src.fresh("f"), src.fresh("f"), src.fresh("j")
        src.line(f"{a} = {source}.reshape({n})")
        src.line(f"{b} = {dest}.reshape({n})")
        element = f"{a}[{j}]"
        if value.f16 and have == STORAGE and rep == COMPUTE:
            element = f"h.f16_to_f32({element})"
        elif value.f16 and have == COMPUTE and rep == STORAGE:
            element = f"h.f32_to_f16({element})"
        with src.block(f"for {j} in range({n}):"):
            src.line(f"{b}[{j}] = {element}")

    # --- part 3: fused elementwise loops -------------------------------------------------------

    def arg_positions(
        self, node: Node, rule: OpRule, i: int, positions: tuple[int, ...]
    ) -> tuple[int, ...]:
        arg_ndim = self.values[node.args[i]].spec.ndim
        if rule.arg_map is not None:
            return rule.arg_map(_ArgMapCtx(node.attrs), i, positions)
        return positions[len(positions) - arg_ndim :]

    def fused_tree(self, root: _Value, pending: _Value | None = None) -> list[_Use] | None:
        """``root``'s elementwise expression tree in post-order, each value with the loop
        positions it is read at; leaves are values held in arrays (or ``pending``, which
        will be). ``None`` if the tree reaches an array operator not yet computed."""
        n = root.spec.ndim
        seen: set[tuple[int, tuple[int, ...]]] = set()
        order: list[_Use] = []
        # Explicit stack: chains can be thousands of nodes deep.
        stack: list[tuple[_Value, tuple[int, ...], bool]] = [(root, tuple(range(n)), False)]
        while stack:
            value, positions, expanded = stack.pop()
            key = (value.index, positions)
            if key in seen:
                continue
            if value.arrays or value is pending or expanded:
                seen.add(key)
                order.append((value, positions))
                continue
            node = value.node
            assert node is not None
            rule = self.rule(node)
            if not rule.elementwise:
                return None
            stack.append((value, positions, True))
            for i in reversed(range(len(node.args))):
                if i in rule.shape_only_args:
                    continue
                arg = self.values[node.args[i]]
                stack.append((arg, self.arg_positions(node, rule, i, positions), False))
        return order

    def emit_fused_body(
        self, root: _Value, order: list[_Use], loop_names: list[str], target: str, dest_rep: str
    ) -> None:
        """Statements computing ``root`` at loop indices ``loop_names`` into ``target``."""
        src = self.src
        names = _value_names(order)
        for value, positions in order:
            name = names[(value.index, positions)]
            if value.arrays:
                src.line(f"{name} = {self.load(value, positions, loop_names)}")
            else:
                src.line(f"{name} = {self.node_expr(value, positions, names)}")
        result = names[(root.index, tuple(range(root.spec.ndim)))]
        if root.f16 and dest_rep == STORAGE:
            result = f"h.f32_to_f16({result})"
        src.line(f"{target} = {result}")

    def emit_fused(self, root: _Value, dest: str, dest_rep: str, flat: bool = False) -> None:
        """One loop over ``root``'s shape evaluating its elementwise chain into ``dest``
        (``flat``: one counter split into indices, for rarely taken paths)."""
        src = self.src
        order = self.fused_tree(root)
        assert order is not None
        src.line(f"# value {root.index}: a fused elementwise loop")
        for value, _ in order:
            if value.arrays:
                self.emit_flags(value)
        if root.spec.ndim == 0:
            self.emit_fused_body(root, order, [], f"{dest}[()]", dest_rep)
            return
        segments = None if flat else self.call_segments(root, order, dest)
        if segments is not None:
            # Blocks need every array read at the loop's own shape; a chain broadcasting
            # one at run time takes the loop nest.
            leaves = [v for v, _ in order if v.arrays and v.spec.ndim]
            same = [f"{a} == {b}" for v in leaves for a, b in zip(v.dims, root.dims)]
            with src.block(f"if {' and '.join(same) or 'True'}:"):
                self.emit_blocked(root, order, segments, dest)
            with src.block("else:"):
                self.emit_nest(root, order, dest, dest_rep, flat)
            return
        self.emit_nest(root, order, dest, dest_rep, flat)

    def emit_nest(
        self, root: _Value, order: list[_Use], dest: str, dest_rep: str, flat: bool
    ) -> None:
        """One loop nest over ``root``'s shape evaluating the chain element by element."""

        def elements() -> None:
            # A broadcast dimension is read at index 0 through its 0/1 flag. LLVM versions
            # the inner loop on the flags, so same-shape operands still vectorize.
            with self.src.loops(root.dims, flat=flat) as names:
                self.emit_fused_body(root, order, names, f"{dest}[{index(names)}]", dest_rep)

        def nest() -> None:
            rows = None if flat else self.unit_row_leaves(root, order)
            if not rows:
                elements()
                return
            with self.src.block(f"if {self.unit_row_checks(rows)}:"):
                self.emit_unit_rows(root, order, dest, dest_rep, rows)
            with self.src.block("else:"):
                elements()

        fold = None if flat else self.trailing_fold(root, order, dest)
        if fold is None:
            nest()
            return
        first, leaves = fold
        ndim = root.spec.ndim
        # Each operand reads the folded axes all whole or all broadcast, or the nest runs.
        same = [
            " == ".join(f"m{leaf.index}_{d}" for d in range(len(pos) - ndim + first, len(pos)))
            for leaf, pos in leaves
        ]
        with self.src.block(f"if {' and '.join(same) or 'True'}:"):
            self.emit_folded_nest(root, order, dest, dest_rep, first, leaves)
        with self.src.block("else:"):
            nest()

    def unit_row_leaves(self, root: _Value, order: list[_Use]) -> list[_Use] | None:
        """The strided views that a loop nest over ``root`` reads along its last axis, as
        their own last axis (see :meth:`emit_unit_rows`); None where one reads that axis
        elsewhere (a loop nest then reads every view element by element)."""
        last = root.spec.ndim - 1
        leaves = []
        for value, positions in order:
            if not value.arrays or not value.spec.ndim or value.index in self.hoisted:
                continue
            array = value.read
            if not STRIDED_VIEW.fullmatch(array) or last not in positions:
                continue
            if positions[-1] != last:
                return None
            leaves.append((value, positions))
        return leaves or None

    def unit_row_checks(self, leaves: list[_Use]) -> str:
        """The run-time condition for :meth:`emit_unit_rows`: each view's last axis has unit
        stride and is read whole (not broadcast)."""
        checks = []
        for value, _ in leaves:
            array = value.read
            last = value.spec.ndim - 1
            checks.append(f"{array}.strides[{last}] == {array}.itemsize")
            checks.append(f"m{value.index}_{last} == 1")
        return " and ".join(dict.fromkeys(checks))

    def emit_unit_rows(
        self, root: _Value, order: list[_Use], dest: str, dest_rep: str, leaves: list[_Use]
    ) -> None:
        """A loop nest over ``root`` whose innermost loop reads the strided views ``leaves``
        through C-contiguous rows (``h.unit_row``), under :meth:`unit_row_checks`.

        numba types a view of any strides layout "A", and LLVM does not vectorize a loop
        reading one, its stride being unknown: an LSTM's cell update over three gate slices
        of one projection took 1.56 us per 128 elements, through rows 0.20 (AMD EPYC Zen 4).
        Slices of a row, head splits and transposes that keep the last axis last all qualify.
        """
        src = self.src
        count = root.dims[-1]
        with src.loops(root.dims[:-1]) as outer:
            for value, positions in leaves:
                array = value.read
                offset = " + ".join(
                    f"{outer[p]} * m{value.index}_{d} * {array}.strides[{d}]"
                    for d, p in enumerate(positions[:-1])
                )
                row = src.fresh("row")
                src.line(f"{row} = h.unit_row({array}, {offset or '0'}, {count})")
                self.rows[(value.index, positions)] = row
            inner = src.fresh("i")
            with src.block(f"for {inner} in range({count}):"):
                names = [*outer, inner]
                self.emit_fused_body(root, order, names, f"{dest}[{index(names)}]", dest_rep)
        self.rows.clear()

    def trailing_fold(
        self, root: _Value, order: list[_Use], dest: str
    ) -> tuple[int, list[_Use]] | None:
        """Where a loop nest over ``root`` may walk its last two axes as one: the first of
        them, and the array operands that read them; None where it may not.

        It may where the rank is at least 3, every operand reads both axes (as its own last
        two) or neither, and every array involved is one numba holds C-contiguous (so it
        reshapes for free); whether each operand reads them whole or broadcast is known
        only at run time (see :meth:`emit_nest`). A 7x7 plane is then one loop of 49 that
        fills the vector registers, where a loop per 7-wide row stayed almost all scalar
        remainder: EfficientNet-B0's squeeze-excite gate, ``(1, 1152, 7, 7)`` times
        ``(1, 1152, 1, 1)``, took 38 us, folded 12 (Intel Xeon, Emerald Rapids). Only two
        axes: more would fold only where every operand reads them all, which the loop nest
        over the rest then does as well."""
        ndim = root.spec.ndim
        if ndim < 3 or not C_ARRAY.fullmatch(dest):
            return None
        arrays = [(v, p) for v, p in order if v.arrays and v.spec.ndim]
        first = ndim - 2
        suffix = tuple(range(first, ndim))
        leaves = []
        for value, positions in arrays:
            touched = [p for p in positions if p >= first]
            if not touched:
                continue
            array = value.read
            if positions[-len(suffix) :] != suffix or len(touched) != len(suffix):
                return None
            if not C_ARRAY.fullmatch(array):
                return None
            leaves.append((value, positions))
        return first, leaves

    def emit_folded_nest(
        self,
        root: _Value,
        order: list[_Use],
        dest: str,
        dest_rep: str,
        first: int,
        leaves: list[_Use],
    ) -> None:
        """:meth:`emit_nest` with axes ``first:`` walked by one index, through views of the
        arrays with those axes folded into their last (see :meth:`trailing_fold`)."""
        fold = root.spec.ndim - first
        target = self.folded_view(dest, root.spec.ndim, fold)
        saved = {}
        for value, _ in leaves:
            rep = COMPUTE if COMPUTE in value.arrays else STORAGE
            saved[value.index] = (rep, value.arrays[rep])
            value.arrays[rep] = self.folded_view(value.arrays[rep], value.spec.ndim, fold)
        whole = " * ".join(f"({d})" for d in root.dims[first:])
        with self.src.loops([*root.dims[:first], whole]) as looped:
            names = [*looped[:-1], *["0"] * (fold - 1), looped[-1]]
            self.emit_fused_body(root, order, names, f"{target}[{index(names)}]", dest_rep)
        for value, _ in leaves:
            rep, array = saved[value.index]
            value.arrays[rep] = array

    def folded_view(self, name: str, rank: int, fold: int) -> str:
        """A view of the C-contiguous array ``name`` of rank ``rank`` with its last ``fold``
        axes folded into its last (the others before it of size 1, so the rank stays)."""
        view = self.src.fresh("v")
        lead = [f"{name}.shape[{d}]" for d in range(rank - fold)]
        tail = " * ".join(f"{name}.shape[{d}]" for d in range(rank - fold, rank))
        shape = ", ".join([*lead, *["1"] * (fold - 1), tail])
        self.src.line(f"{view} = {name}.reshape(({shape},))")
        return view

    def call_segments(self, root: _Value, order: list[_Use], dest: str) -> list[list[_Use]] | None:
        """``order`` cut into runs of one scalar library call each (with the cheap
        operators around it), if the chain qualifies for :meth:`emit_blocked`; else ``None``.

        It qualifies with :data:`BLOCK_MIN_CALLS` calls or more, no float16 value, and
        every array it reads either a scalar or read whole at the loop's positions from a
        C-contiguous array (so that the loop can walk one flat index).
        """
        identity = tuple(range(root.spec.ndim))
        if not C_ARRAY.fullmatch(dest):
            return None
        for value, positions in order:
            if value.f16:
                return None
            if value.arrays and value.spec.ndim:
                array = value.read
                if positions != identity or not C_ARRAY.fullmatch(array):
                    return None
        names = _value_names(order)
        segments: list[list[_Use]] = [[]]
        calls = 0
        for use in order:
            value, positions = use
            if not value.arrays and _SCALAR_CALL.search(self.node_expr(value, positions, names)):
                if calls:
                    segments.append([])
                calls += 1
            segments[-1].append(use)
        return segments if calls >= BLOCK_MIN_CALLS else None

    def emit_blocked(
        self, root: _Value, order: list[_Use], segments: list[list[_Use]], dest: str
    ) -> None:
        """Evaluate the chain over blocks of :data:`BLOCK_SIZE` elements, one loop per
        segment. A value a later segment reads passes through a scratch row (rows are
        reused once their value is dead); arrays are read again where they are needed."""
        src = self.src
        names = _value_names(order)
        leaves = {names[(v.index, p)]: v for v, p in order if v.arrays}
        dtype_of = {names[(v.index, p)]: dtypes.np_type(v.spec.dtype) for v, p in order}
        # What each segment makes and reads, and the last segment reading each value.
        makes: list[list[tuple[str, str]]] = []
        reads: list[set[str]] = []
        last: dict[str, int] = {}
        for k, segment in enumerate(segments):
            made, read = [], set()
            for value, positions in segment:
                if value.arrays:
                    continue
                made.append(
                    (names[(value.index, positions)], self.node_expr(value, positions, names))
                )
                node = value.node
                assert node is not None
                rule = self.rule(node)
                for i, a in enumerate(node.args):
                    if i not in rule.shape_only_args:
                        read.add(names[(a, self.arg_positions(node, rule, i, positions))])
            makes.append(made)
            reads.append(read)
            for name in read:
                last[name] = k
        # Scratch rows, per compute dtype, by a linear scan over the segments.
        rows: dict[str, tuple[str, int]] = {}
        free: dict[str, list[int]] = {}
        count: dict[str, int] = {}
        for k, made in enumerate(makes):
            for name, _ in made:
                if last.get(name, k) > k:
                    dtype = dtype_of[name]
                    pool = free.setdefault(dtype, [])
                    row = pool.pop() if pool else count.get(dtype, 0)
                    count[dtype] = max(count.get(dtype, 0), row + 1)
                    rows[name] = (dtype, row)
            for name, (dtype, row) in rows.items():
                if last[name] == k:
                    free[dtype].append(row)
        total = src.fresh("n")
        src.line(f"{total} = {product(root.dims)}")
        scratch = {}
        for dtype, n in count.items():
            scratch[dtype] = src.fresh("sc")
            src.line(f"{scratch[dtype]} = np.empty(({n}, {BLOCK_SIZE}), {dtype})")
        start, size, j = src.fresh("b"), src.fresh("bn"), src.fresh("j")
        views: dict[str, str] = {}
        for name, leaf in leaves.items():
            array = leaf.read
            views[name] = view = src.fresh("fv")
            if leaf.spec.ndim:
                src.line(f"{view} = {array}.reshape({total})")
            else:  # a scalar is read once, before the loops
                src.line(f"{view} = {array}[()]")
        write = src.fresh("fv")
        src.line(f"{write} = {dest}.reshape({total})")
        result = names[(root.index, tuple(range(root.spec.ndim)))]
        with src.block(f"for {start} in range(0, {total}, {BLOCK_SIZE}):"):
            src.line(f"{size} = min({BLOCK_SIZE}, {total} - {start})")
            for k, made in enumerate(makes):
                with src.block(f"for {j} in range({size}):"):
                    here = {name for name, _ in made}
                    for name in sorted(reads[k] - here):
                        if name in leaves:
                            element = f"[{start} + {j}]" if leaves[name].spec.ndim else ""
                            src.line(f"{name} = {views[name]}{element}")
                        else:
                            dtype, row = rows[name]
                            src.line(f"{name} = {scratch[dtype]}[{row}, {j}]")
                    for name, expr in made:
                        src.line(f"{name} = {expr}")
                    for name, _ in made:
                        if name in rows:
                            dtype, row = rows[name]
                            src.line(f"{scratch[dtype]}[{row}, {j}] = {name}")
                    if k == len(makes) - 1:
                        src.line(f"{write}[{start} + {j}] = {result}")

    def load(self, value: _Value, positions: tuple[int, ...], loop_names: list[str]) -> str:
        """An element of ``value`` at ``positions`` of the loop, as a compute-typed scalar."""
        array = value.read
        if value.index in self.hoisted:
            return self.hoisted[value.index]  # read (and decoded) before the loop
        direct = self.direct.get(value.index)
        row = self.rows.get((value.index, positions))
        if value.spec.ndim == 0:
            element = f"{array}[()]"
        elif row is not None:
            element = f"{row}[{loop_names[positions[-1]]}]"
        elif direct is not None:
            element = f"{direct}[{index([loop_names[p] for p in positions])}]"
        else:
            idx = [f"{loop_names[p]} * m{value.index}_{d}" for d, p in enumerate(positions)]
            element = f"{array}[{index(idx)}]"
        if value.f16 and COMPUTE not in value.arrays:
            element = f"h.f16_to_f32({element})"
        return element

    def emit_flags(self, value: _Value) -> None:
        """``m<v>_<d>`` is 0 where ``value`` has size 1 (broadcast), else 1."""
        if value.index in self.flags_done:
            return
        self.flags_done.add(value.index)
        for d, dim in enumerate(value.dims):
            self.src.line(f"m{value.index}_{d} = 0 if {dim} == 1 else 1")

    def node_expr(
        self,
        value: _Value,
        positions: tuple[int, ...],
        names: dict[tuple[int, tuple[int, ...]], str],
    ) -> str:
        node = value.node
        assert node is not None
        rule = self.rule(node)
        args = []
        for i, a in enumerate(node.args):
            if i in rule.shape_only_args:
                args.append("None")
            else:
                args.append(names[(a, self.arg_positions(node, rule, i, positions))])
        ctx = ExprCtx(args, [self.values[a].spec for a in node.args], value.spec, node.attrs)
        expr = rule.expr(ctx)  # type: ignore[misc]
        dtype = value.spec.dtype
        if dtype == "float16":
            return f"np.float32({expr})" if rule.f16_exact else f"h.f16_round({expr})"
        return wrap(expr, dtype)

    # --- the module ----------------------------------------------------------------------------

    def module(self, key: str) -> str:
        self.emit_shapes()
        self.emit_body()
        desc = self.desc
        params = [f"in{k}" for k in range(len(desc.inputs))]
        params += [f"out{k}" for k in range(len(desc.outputs))]
        arg_types = [
            f'types.Array({dtypes.numba_type(s.dtype)}, {s.ndim}, "C")'
            for s in (*desc.inputs, *desc.outputs)
        ]
        used = {module for module, _ in library_calls("\n".join(self.src.lines))}
        imports = [
            f"from vm.kernels.runtime import {module}" + ("" if alias == module else f" as {alias}")
            for alias, module in LIBRARY_ALIASES.items()
            if module in used
        ]
        lines = [
            f'"""relayvm kernel {key}: generated by vm.kernels.codegen, do not edit."""',
            "",
            "# Description (canonical JSON):",
            f"# {json.dumps(desc.canonical(), sort_keys=True)}",
            "",
            "import math  # noqa: F401",
            "",
            "import numba",
            "import numpy as np",
            "from numba import types",
            "",
            *imports,
            "",
            "SIGNATURE = types.void(",
            *[f"    {t}," for t in arg_types],
            ")",
            "",
            "",
            '@numba.njit(SIGNATURE, cache=True, nogil=True, error_model="numpy")',
            f"def kernel({', '.join(params)}):",
            *(self.src.lines or ["    pass"]),
            "",
        ]
        return "\n".join(lines)


def _value_names(order: list[_Use]) -> dict[tuple[int, tuple[int, ...]], str]:
    """The local variable holding each value of a fused chain at its positions."""
    return {(v.index, p): f"x{v.index}_{'_'.join(map(str, p))}" for v, p in order}


def generate(desc: Description, key: str) -> str:
    """The Python source of the numba module implementing ``desc``."""
    return _Generator(desc).module(key)
