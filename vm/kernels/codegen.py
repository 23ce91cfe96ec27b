"""Kernel code generation: a validated description becomes the source of one numba module.

Runtime layer (``vm.kernels``); standard library only (the generated code imports numpy,
numba, :mod:`vm.kernels.helpers` and :mod:`vm.kernels.blas`).

The module holds one ``@numba.njit`` function ``kernel(in0, ..., out0, ...)`` with an
explicit signature (C-contiguous arrays of the declared dtypes and ranks) in
destination-passing style: the caller allocates every output and the kernel fills it.
The kernel body has three parts:

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
   vectorize.

Everything inlined into the source comes from validated data (operator names from the
rule table, integers, floats via ``repr``, whitelisted dtypes); messages are quoted with
``repr``; so a description cannot inject code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from vm.kernels import dtypes
from vm.kernels.description import Description, Node
from vm.kernels.rules import OpRule, Spec, get_rule
from vm.kernels.source import (
    EmitCtx,
    ExprCtx,
    ShapeCtx,
    Source,
    index,
    product,
    quote,
    shape_tuple,
    wrap,
)

#: Bump when generated code changes meaning in a way the library hash would not catch.
CODEGEN_VERSION = 1

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


@dataclass
class _ArgMapCtx:
    attrs: dict


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
        self.flags_done: set[int] = set()
        self.extras: dict[int, dict] = {}

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

    def emit_array_node(self, node: Node, rule: OpRule) -> None:
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
        src.line(f"# {self.where(node)}")
        for value in out_values:
            dest = None
            if value.rep(rep) == STORAGE:
                dest = self.claim(value)
            if dest is None:
                dest = self.temp(value, value.rep(rep))
            value.arrays[value.rep(rep)] = dest
            ctx.outs.append(dest)
        rule.emit(ctx)  # type: ignore[misc]

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

    def emit_fused(self, root: _Value, dest: str, dest_rep: str) -> None:
        """One loop over ``root``'s shape evaluating its elementwise chain into ``dest``."""
        src = self.src
        n = root.spec.ndim
        identity = tuple(range(n))
        # Collect (value, positions) instances in post-order with an explicit stack: a value
        # read at loop positions ``positions`` is an array load (a leaf) or a node expression.
        names: dict[tuple[int, tuple[int, ...]], str] = {}
        order: list[tuple[_Value, tuple[int, ...]]] = []
        stack: list[tuple[_Value, tuple[int, ...], bool]] = [(root, identity, False)]
        while stack:
            value, positions, expanded = stack.pop()
            key = (value.index, positions)
            if key in names:
                continue
            if value.arrays or expanded:
                names[key] = src.fresh("x")
                order.append((value, positions))
                continue
            node = value.node
            assert node is not None
            rule = self.rule(node)
            stack.append((value, positions, True))
            for i in reversed(range(len(node.args))):
                if i in rule.shape_only_args:
                    continue
                arg = self.values[node.args[i]]
                stack.append((arg, self.arg_positions(node, rule, i, positions), False))
        leaves = [(v, p) for v, p in order if v.arrays]
        src.line(f"# value {root.index}: a fused elementwise loop")
        for value, _ in leaves:
            self.emit_flags(value)

        def body(loop_names: list[str], target: str) -> None:
            for value, positions in order:
                name = names[(value.index, positions)]
                if value.arrays:
                    src.line(f"{name} = {self.load(value, positions, loop_names)}")
                else:
                    src.line(f"{name} = {self.node_expr(value, positions, names)}")
            result = names[(root.index, identity)]
            if root.f16 and dest_rep == STORAGE:
                result = f"h.f32_to_f16({result})"
            src.line(f"{target} = {result}")

        if n == 0:
            body([], f"{dest}[()]")
            return
        # One loop nest; a broadcast dimension is read at index 0 through its 0/1 flag. LLVM
        # versions the inner loop on the flags, so same-shape operands still vectorize.
        with src.loops(root.dims) as loop_names:
            body(loop_names, f"{dest}[{index(loop_names)}]")

    def load(self, value: _Value, positions: tuple[int, ...], loop_names: list[str]) -> str:
        """An element of ``value`` at ``positions`` of the loop, as a compute-typed scalar."""
        # Its float32 form when it has one, else its storage (float16 bits are decoded).
        array = value.arrays.get(COMPUTE) or value.arrays[STORAGE]
        if value.spec.ndim == 0:
            element = f"{array}[()]"
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
            "from vm.kernels import blas  # noqa: F401",
            "from vm.kernels import helpers as h  # noqa: F401",
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


def generate(desc: Description, key: str) -> str:
    """The Python source of the numba module implementing ``desc``."""
    return _Generator(desc).module(key)
