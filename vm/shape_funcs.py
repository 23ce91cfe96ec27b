"""Run-time shape functions: a kernel's output shapes computed from its input shapes.

Runtime layer (``vm``); imports numpy and the description validator of ``vm.kernels``
(standard library only, no numba), never ``compiler``.

When a primitive's output has a dimension known only at run time (``?``), the code
generator (:mod:`compiler.backend.dynamic`) calls a *shape function* before the kernel,
as TVM's Relay VM does: its inputs are the shapes of the kernel's inputs (``shape_of``),
its outputs the shapes of the kernel's outputs and their sizes in bytes, which then
size ``alloc_storage`` and shape ``alloc_tensor_reg``. A shape function is a primitive
too, so it is saved, verified and invoked like a kernel (``invoke_packed``, destination
passing), but it runs here, in plain Python, instead of as a numba kernel.

Description
-----------
A shape function's description (see also :mod:`vm.program`) names the kernel it computes
the shapes of::

    {
      "shape_func": <the kernel's description>,
      "inputs":  [["int64", 1], ...],      # one shape vector per kernel input
      "outputs": [["int64", 1], ...,       # one shape vector per kernel output (length ndim)
                  ["int64", 0], ...],      # then one byte size per kernel output
    }

:func:`shape_func_description` builds it; :func:`check_shape_func` validates one from a
file (the kernel description with :func:`vm.kernels.check_description`, every operator
having a shape rule here, and the signature above). :func:`check_primitive` and
:func:`load_primitive` dispatch between shape functions and numba kernels, for the
verifier and the machine.

Shape rules
-----------
Every operator's run-time shape rule is part of its row in the kernel table: a pure
function from the argument shapes (tuples of ints) and the operator's attributes to its
output shapes, defined next to the operator's kernel in ``vm/kernels/emit_*.py`` and
gathered in :data:`SHAPE_RULES` (:mod:`vm.kernels.table`). Each validates what the types
could not know before run time (broadcast compatibility, matrix product inner dimensions,
element counts of a reshape, window sizes) with the helpers of
:mod:`vm.kernels.shape_rules`; :func:`op_output_shapes` turns a rejection into a
:class:`ShapeFuncError`, a ``ValueError`` naming the operator and the shapes, which the
machine reports as a ``vm.VMError``. The data-dependent rules (:data:`VALUE_RULES`: shapes
read from argument values, the ``dyn.*`` operators and ``arange``) are rows of the same
table, defined beside their kernels in ``emit_layout``.
:func:`output_shapes` walks a (fused) kernel description node by node.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from vm.kernels import check_description, load_kernel
from vm.kernels import shape_rules as sr
from vm.kernels.description import Description, KernelDescriptionError, parse_description
from vm.kernels.rules import RuleError, ValueRule
from vm.kernels.table import RULES, SHAPE_RULES, VALUE_SHAPES

__all__ = [
    "SHAPE_FUNC_KEY",
    "SHAPE_RULES",
    "ShapeFuncError",
    "ShapeFunction",
    "check_primitive",
    "check_shape_func",
    "is_shape_func",
    "load_primitive",
    "load_shape_function",
    "op_output_shapes",
    "output_shapes",
    "shape_func_description",
    "shape_func_ops",
    "value_inputs",
]

#: The key that marks a primitive description as a shape function.
SHAPE_FUNC_KEY = "shape_func"

Shape = tuple[int, ...]


class ShapeFuncError(ValueError):
    """Input shapes an operator cannot take; the message names the operator and the shapes."""


#: Operators whose output shapes depend on the *values* of some arguments (TVM's
#: data-dependent shape functions): operator -> the positions of those arguments. The
#: shape function receives these arguments' arrays instead of their shapes.
VALUE_ARGS: dict[str, tuple[int, ...]] = {name: args for name, (args, _) in VALUE_SHAPES.items()}

#: Operator -> its data-dependent shape rule (defined with its kernel, in ``emit_layout``).
VALUE_RULES: dict[str, ValueRule] = {name: rule for name, (_, rule) in VALUE_SHAPES.items()}


def shape_func_ops() -> list[str]:
    """Every operator with a shape rule, sorted."""
    return sorted({*SHAPE_RULES, *VALUE_RULES})


def op_output_shapes(
    op: str,
    arg_shapes: Sequence[Sequence[int]],
    attrs: Mapping[str, Any],
    out_ranks: Sequence[int] = (),
    arg_values: Sequence[Any] | None = None,
) -> list[Shape]:
    """The output shapes of operator ``op`` applied to arguments of ``arg_shapes``.

    Parameters
    ----------
    op : str
        The operator's name (``add``, ``nn.dense``, ...).
    arg_shapes : sequence of sequence of int
        One shape per tensor argument (a tuple argument's fields count one each).
    attrs : mapping
        The operator's attributes (lists or tuples for list attributes); those left out
        take their defaults from the operator's schema.
    out_ranks : sequence of int
        The output ranks the kernel was described with (only ``squeeze`` without ``axis``
        needs them).
    arg_values : sequence, optional
        For operators in :data:`VALUE_ARGS`: the arrays of the arguments read by value
        (``None`` for the others).

    Returns
    -------
    list of tuple of int

    Raises
    ------
    ShapeFuncError
        If the shapes do not fit the operator; the message names it and the shapes.
    KeyError
        If ``op`` has no shape rule.
    """
    shapes = [tuple(int(d) for d in s) for s in arg_shapes]
    rule = RULES.get(op)
    if rule is not None:  # attributes left out take the schema's defaults
        attrs = {**{a.name: a.default for a in rule.attrs if not a.required}, **attrs}
    try:
        if op in VALUE_RULES:
            values = list(arg_values) if arg_values is not None else [None] * len(shapes)
            missing = [p for p in VALUE_ARGS[op] if p >= len(values) or values[p] is None]
            if missing:
                raise RuleError(f"the values of argument(s) {missing} are needed and not given")
            return VALUE_RULES[op](shapes, values, attrs, tuple(out_ranks))
        return SHAPE_RULES[op](shapes, attrs, tuple(out_ranks))
    except RuleError as err:
        given = ", ".join(sr.fmt_shape(s) for s in shapes)
        raise ShapeFuncError(f"{op}: {err} (input shapes {given})") from None


# ---- descriptions ------------------------------------------------------------------------------


def shape_func_description(kernel_description: Mapping[str, Any]) -> dict[str, Any]:
    """The description of the shape function of the kernel described by ``kernel_description``.

    One ``int64`` shape vector per kernel input; outputs are one ``int64`` shape vector per
    kernel output, then one ``int64`` scalar (the output's size in bytes) per output.
    """
    inputs = kernel_description["inputs"]
    n_out = len(kernel_description["outputs"])
    values = value_inputs(kernel_description)
    description = {
        SHAPE_FUNC_KEY: kernel_description,
        "inputs": [list(inputs[k]) if k in values else ["int64", 1] for k in range(len(inputs))],
        "outputs": [["int64", 1] for _ in range(n_out)] + [["int64", 0] for _ in range(n_out)],
    }
    if values:
        description["values"] = values
    return description


def value_inputs(kernel_description: Mapping[str, Any] | Description) -> list[int]:
    """The kernel inputs a shape function reads by value (arguments in :data:`VALUE_ARGS`).

    Raises
    ------
    vm.kernels.KernelDescriptionError
        If such an argument is not a kernel input (a value computed inside the kernel).
    """
    if isinstance(kernel_description, Description):
        n_in = len(kernel_description.inputs)
        nodes = [(n.index, n.op, list(n.args)) for n in kernel_description.nodes]
    else:
        n_in = len(kernel_description["inputs"])
        nodes = [(i, n["op"], list(n["args"])) for i, n in enumerate(kernel_description["nodes"])]
    found: set[int] = set()
    for index, op, args in nodes:
        for position in VALUE_ARGS.get(op, ()):
            if position >= len(args):
                continue  # the kernel validator reports the argument count
            if args[position] >= n_in:
                raise _error(
                    f"node {index} ({op}) reads argument {position} by value, so it must be "
                    f"a kernel input, found value {args[position]}"
                )
            found.add(args[position])
    return sorted(found)


def is_shape_func(description: object) -> bool:
    """Whether ``description`` describes a shape function (rather than a numba kernel)."""
    return isinstance(description, Mapping) and SHAPE_FUNC_KEY in description


def _error(problem: str) -> KernelDescriptionError:
    return KernelDescriptionError(f"shape function description: {problem}")


def check_shape_func(description: object) -> Description:
    """Validate a shape function's description; returns its kernel's parsed description.

    Raises
    ------
    vm.kernels.KernelDescriptionError
        If the keys, the signature or the kernel description are wrong, or an operator of
        the kernel has no shape rule.
    """
    if not isinstance(description, Mapping):
        raise _error(f"expected a mapping, found {type(description).__name__}")
    keys = {SHAPE_FUNC_KEY, "inputs", "outputs"}
    unknown = sorted(str(k) for k in description if k not in keys | {"values"})
    missing = sorted(k for k in keys if k not in description)
    if unknown or missing:
        raise _error(
            f"keys must be {', '.join(sorted(keys))}"
            + (f"; unknown {', '.join(unknown)}" if unknown else "")
            + (f"; missing {', '.join(missing)}" if missing else "")
        )
    try:
        kernel = parse_description(description[SHAPE_FUNC_KEY])
    except KernelDescriptionError as err:
        raise _error(f"the kernel it computes shapes for is invalid: {err}") from None
    for node in kernel.nodes:
        if node.op not in SHAPE_RULES and node.op not in VALUE_RULES:
            raise _error(f"node {node.index} ({node.op}) has no shape rule")
    n_in, n_out = len(kernel.inputs), len(kernel.outputs)
    values = value_inputs(kernel)
    if list(description.get("values", [])) != values:
        raise _error(
            f"values must list the inputs read by value, {values}, found "
            f"{description.get('values')!r}"
        )
    want_in = [
        [kernel.inputs[k].dtype, kernel.inputs[k].ndim] if k in values else ["int64", 1]
        for k in range(n_in)
    ]
    want_out = [["int64", 1]] * n_out + [["int64", 0]] * n_out
    for key, want in (("inputs", want_in), ("outputs", want_out)):
        got = description[key]
        if not isinstance(got, (list, tuple)) or [list(g) for g in got] != want:
            raise _error(
                f"{key} must be {want} (for a kernel of {n_in} inputs and {n_out} outputs), "
                f"found {got!r}"
            )
    return kernel


def output_shapes(
    kernel: Description | Mapping[str, Any],
    input_shapes: Sequence[Sequence[int]],
    input_values: Mapping[int, Any] | None = None,
):
    """The output shapes of a kernel given its input shapes: each node's rule in order.

    Parameters
    ----------
    kernel : Description or mapping
        The kernel's description (parsed, or plain data, which is validated first).
    input_shapes : sequence of sequence of int
        One shape per kernel input, of the declared ranks.
    input_values : mapping of int to array, optional
        The arrays of the inputs read by value (:func:`value_inputs`).

    Returns
    -------
    list of tuple of int
        One shape per kernel output.

    Raises
    ------
    ShapeFuncError
        If an input has the wrong rank, or a node's rule rejects its argument shapes.
    """
    if not isinstance(kernel, Description):
        kernel = parse_description(kernel)
    if len(input_shapes) != len(kernel.inputs):
        raise ShapeFuncError(
            f"the kernel takes {len(kernel.inputs)} inputs, given {len(input_shapes)} shapes"
        )
    values: list[Shape] = []
    for k, (shape, spec) in enumerate(zip(input_shapes, kernel.inputs)):
        dims = tuple(int(d) for d in shape)
        if len(dims) != spec.ndim or any(d < 0 for d in dims):
            raise ShapeFuncError(
                f"input {k} of the kernel has shape {sr.fmt_shape(dims)}, but the kernel takes a "
                f"tensor of rank {spec.ndim}"
            )
        values.append(dims)
    for node in kernel.nodes:
        ranks = tuple(s.ndim for s in node.outputs)
        arrays = [input_values.get(a) for a in node.args] if input_values else None
        outs = op_output_shapes(node.op, [values[a] for a in node.args], node.attrs, ranks, arrays)
        if tuple(len(s) for s in outs) != ranks:  # a rule and the validator disagree: a bug
            raise ShapeFuncError(
                f"{node.op}: computed output shapes {', '.join(sr.fmt_shape(s) for s in outs)} "
                f"do not have the declared ranks {ranks}"
            )
        values.extend(outs)
    return [values[r] for r in kernel.results]


# ---- the runnable form -------------------------------------------------------------------------

#: Shape results a shape function remembers, by input shapes (then it starts over).
CACHE_ENTRIES = 256

#: Inputs read by value are part of the remembered key only up to this many elements:
#: shape vectors and counts are short, while ``argwhere``'s condition can hold millions
#: (turning RetinaNet's 1.3M scores into a key took 20 ms a call, and 256 such keys
#: would hold gigabytes), and a count of them is cheaper than a lookup anyway.
VALUE_KEY_LIMIT = 64


class ShapeFunction:
    """A validated shape function, called like a kernel: ``entry(*inputs, *outputs)``.

    Inputs are the kernel's input shapes (``int64`` vectors); outputs, written in place,
    are the kernel's output shapes (``int64`` vectors of the output ranks) and then their
    sizes in bytes (``int64`` scalars). Results are remembered per input shapes, so a
    program run again at the same shapes does no shape arithmetic.
    """

    def __init__(self, description: Mapping[str, Any]) -> None:
        self.kernel = check_shape_func(description)
        self.num_inputs = len(self.kernel.inputs)
        self.num_outputs = len(self.kernel.outputs)
        self.itemsizes = [np.dtype(s.dtype).itemsize for s in self.kernel.outputs]
        self.output_ndims = tuple(s.ndim for s in self.kernel.outputs)
        #: Inputs given as the tensors themselves (their values size the outputs).
        self.value_inputs = tuple(value_inputs(self.kernel))
        self._cache: dict[tuple, list[tuple[Shape, tuple[int], int]]] = {}

    def compute(
        self, input_shapes: Sequence[Sequence[int]], input_values: Mapping[int, Any] | None = None
    ) -> tuple[list[Shape], list[int]]:
        """The output shapes and their sizes in bytes for ``input_shapes`` (and, for the
        inputs read by value, ``input_values``)."""
        values = {k: np.asarray(v) for k, v in (input_values or {}).items()}
        shapes = [values[k].shape if k in values else tuple(s) for k, s in enumerate(input_shapes)]
        writes = self._by_value(shapes, values) if values else self._lookup(tuple(shapes), shapes)
        return [shape for shape, _, _ in writes], [size for _, _, size in writes]

    def _lookup(
        self, key: tuple, shapes: Sequence[Shape], values: Mapping[int, Any] | None = None
    ) -> list[tuple[Shape, tuple[int], int]]:
        """Per output: its shape, the shape of the vector holding it, its size in bytes;
        remembered by ``key`` (the input shapes, and the values of inputs read by value)."""
        writes = self._cache.get(key)
        if writes is None:
            writes = self._writes(shapes, values)
            if len(self._cache) >= CACHE_ENTRIES:
                self._cache.clear()
            self._cache[key] = writes
        return writes

    def _writes(
        self, shapes: Sequence[Shape], values: Mapping[int, Any] | None = None
    ) -> list[tuple[Shape, tuple[int], int]]:
        """:meth:`_lookup`'s result, computed."""
        return [
            (shape, (len(shape),), sr.prod(shape) * itemsize)
            for shape, itemsize in zip(output_shapes(self.kernel, shapes, values), self.itemsizes)
        ]

    def _by_value(
        self, shapes: Sequence[Shape], values: Mapping[int, np.ndarray]
    ) -> list[tuple[Shape, tuple[int], int]]:
        """:meth:`_lookup` for a kernel with inputs read by value, which are part of the key
        only while they are short (see :data:`VALUE_KEY_LIMIT`)."""
        if any(v.size > VALUE_KEY_LIMIT for v in values.values()):
            return self._writes(shapes, values)
        key = tuple(
            tuple(values[k].reshape(-1).tolist()) if k in values else s
            for k, s in enumerate(shapes)
        )
        return self._lookup(key, shapes, values)

    def entry(self, *arrays: np.ndarray) -> None:
        """Compute into the output arrays (the calling convention of kernel entries)."""
        n_in, n_out = self.num_inputs, self.num_outputs
        if len(arrays) != n_in + 2 * n_out:
            raise ShapeFuncError(
                f"a shape function of {n_in} inputs and {n_out} outputs takes "
                f"{n_in + 2 * n_out} arrays, given {len(arrays)}"
            )
        # Called on every run of a dynamic kernel, so the common case is a dictionary hit.
        if self.value_inputs:
            values = {k: arrays[k] for k in self.value_inputs}
            shapes = [
                a.shape if k in values else tuple(a.tolist()) for k, a in enumerate(arrays[:n_in])
            ]
            writes = self._by_value(shapes, values)
        else:
            key = tuple([tuple(a.tolist()) for a in arrays[:n_in]])
            writes = self._cache.get(key)
            if writes is None:
                writes = self._lookup(key, key)
        k = n_in
        for shape, vector, size in writes:
            out = arrays[k]
            if out.shape != vector:
                raise ShapeFuncError(
                    f"output {k - n_in} of the shape function must be a vector of "
                    f"{len(shape)} elements, found shape {sr.fmt_shape(out.shape)}"
                )
            out[...] = shape
            arrays[k + n_out][...] = size
            k += 1

    __call__ = entry


_TABLE: dict[str, ShapeFunction] = {}
_LOCK = threading.Lock()


def load_shape_function(description: Mapping[str, Any]) -> ShapeFunction:
    """The shape function of ``description``, validated once per process (thread-safe).

    Raises
    ------
    vm.kernels.KernelDescriptionError
        If the description is invalid.
    """
    key = json.dumps(description, sort_keys=True, separators=(",", ":"), default=str)
    function = _TABLE.get(key)
    if function is None:
        with _LOCK:
            function = _TABLE.get(key)
            if function is None:
                function = _TABLE[key] = ShapeFunction(description)
    return function


# ---- dispatch between shape functions and numba kernels -------------------------------------


def check_primitive(description: object) -> None:
    """Validate any primitive description: a shape function here, else a numba kernel's.

    Raises
    ------
    vm.kernels.KernelDescriptionError
        If it is invalid.
    """
    if is_shape_func(description):
        check_shape_func(description)
    else:
        check_description(description)


def load_primitive(description: Mapping[str, Any]) -> Any:
    """The runnable form of a primitive: a :class:`ShapeFunction` or a compiled kernel.

    Both have ``entry(*inputs, *outputs)``. Numba is imported only for kernels.
    """
    if is_shape_func(description):
        return load_shape_function(description)

    return load_kernel(description)
