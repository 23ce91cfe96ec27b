"""Validation of kernel descriptions: the structured, plain-data form a primitive is saved in.

Runtime layer, kernel generator (``vm.kernels``); standard library only.

The format is defined in :mod:`vm.program`. A description comes from a file and is
untrusted, so :func:`parse_description` checks every field (types, value indices,
attributes, dtypes, ranks, and that each node's declared outputs are what its operator
produces) without compiling anything, and returns a normalized :class:`Description`
(attribute defaults filled, lists as tuples) that the code generator trusts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vm.kernels import dtypes
from vm.kernels.rules import RuleError, Spec, normalize_attrs
from vm.kernels.table import get_rule, supported_ops

#: Limits that keep a hostile description from asking for unbounded code generation.
MAX_NODES = 10_000
MAX_TENSORS = 1_000


class KernelDescriptionError(ValueError):
    """A kernel description is malformed or inconsistent; the message says where and why."""


@dataclass(frozen=True)
class Node:
    """One operator application, validated.

    ``values`` are the value indices of its outputs.
    """

    index: int
    op: str
    args: tuple[int, ...]
    attrs: dict[str, Any]
    outputs: tuple[Spec, ...]
    values: tuple[int, ...]


@dataclass(frozen=True)
class Description:
    """A validated kernel description."""

    inputs: tuple[Spec, ...]
    outputs: tuple[Spec, ...]
    nodes: tuple[Node, ...]
    results: tuple[int, ...]

    @property
    def value_specs(self) -> list[Spec]:
        """The dtype and rank of every value, by value index."""
        specs = list(self.inputs)
        for node in self.nodes:
            specs.extend(node.outputs)
        return specs

    def canonical(self) -> dict[str, Any]:
        """The description as plain JSON-ready data, attributes normalized."""
        return {
            "inputs": [[s.dtype, s.ndim] for s in self.inputs],
            "outputs": [[s.dtype, s.ndim] for s in self.outputs],
            "nodes": [
                {
                    "op": n.op,
                    "args": list(n.args),
                    "attrs": {k: _plain(v) for k, v in sorted(n.attrs.items())},
                    "outputs": [[s.dtype, s.ndim] for s in n.outputs],
                }
                for n in self.nodes
            ],
            "results": list(self.results),
        }

    def canonical_json(self) -> str:
        """:meth:`canonical` as compact JSON with sorted keys (the cache key's input)."""
        return json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"))


def _plain(value: object) -> object:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def _error(where: str, problem: str) -> KernelDescriptionError:
    return KernelDescriptionError(f"kernel description: {where}: {problem}")


def _spec_list(value: object, where: str, what: str) -> tuple[Spec, ...]:
    if not isinstance(value, (list, tuple)):
        raise _error(where, f"{what} must be a list of [dtype, ndim] pairs, found {value!r}")
    if len(value) > MAX_TENSORS:
        raise _error(where, f"{what} has {len(value)} entries; at most {MAX_TENSORS} allowed")
    return tuple(_spec(item, where, f"{what}[{i}]") for i, item in enumerate(value))


def _spec(item: object, where: str, what: str) -> Spec:
    if not isinstance(item, (list, tuple)) or len(item) != 2:
        raise _error(where, f"{what} must be a [dtype, ndim] pair, found {item!r}")
    dtype, ndim = item
    if not isinstance(dtype, str) or dtype not in dtypes.DTYPES:
        raise _error(
            where,
            f"dtype not allowed: {what} has dtype {dtype!r}; expected one of "
            f"{', '.join(dtypes.DTYPES)}",
        )
    if type(ndim) is not int or not 0 <= ndim <= dtypes.MAX_NDIM:
        raise _error(
            where, f"ndim out of range: {what} has ndim {ndim!r}; expected 0..{dtypes.MAX_NDIM}"
        )
    return Spec(dtype, ndim)


def _index_list(value: object, where: str, what: str) -> tuple[int, ...]:
    if not isinstance(value, (list, tuple)) or not all(type(v) is int for v in value):
        raise _error(where, f"{what} must be a list of value indices (ints), found {value!r}")
    return tuple(value)


_TOP_KEYS = ("inputs", "outputs", "nodes", "results")
_NODE_KEYS = ("op", "args", "attrs", "outputs")


def parse_description(description: object) -> Description:
    """Validate ``description`` and return its normalized form.

    Raises
    ------
    KernelDescriptionError
        Naming the node index, its operator and the problem.
    """
    where = "top level"
    if not isinstance(description, Mapping):
        raise _error(where, f"expected a mapping, found {type(description).__name__}")
    unknown = sorted(str(k) for k in description if k not in _TOP_KEYS)
    if unknown:
        raise _error(where, f"unknown key(s) {', '.join(unknown)}; expected {', '.join(_TOP_KEYS)}")
    for key in _TOP_KEYS:
        if key not in description:
            raise _error(where, f"missing key {key!r}")
    inputs = _spec_list(description["inputs"], where, "inputs")
    outputs = _spec_list(description["outputs"], where, "outputs")
    if not outputs:
        raise _error(where, "a kernel must have at least one output")
    raw_nodes = description["nodes"]
    if not isinstance(raw_nodes, (list, tuple)):
        raise _error(where, f"nodes must be a list, found {type(raw_nodes).__name__}")
    if len(raw_nodes) > MAX_NODES:
        raise _error(where, f"{len(raw_nodes)} nodes; at most {MAX_NODES} allowed")

    specs: list[Spec] = list(inputs)
    nodes = [_parse_node(i, raw, specs) for i, raw in enumerate(raw_nodes)]

    results = _index_list(description["results"], "results", "results")
    if len(results) != len(outputs):
        raise _error(
            "results",
            f"{len(results)} result(s) for {len(outputs)} output(s); expected one per output",
        )
    for k, value in enumerate(results):
        if not 0 <= value < len(specs):
            raise _error(
                "results",
                f"results out of range: result {k} refers to value {value}, but only values "
                f"0..{len(specs) - 1} exist",
            )
        if specs[value] != outputs[k]:
            raise _error(
                "results",
                f"output {k} is declared {outputs[k]} but result value {value} is {specs[value]}",
            )
    return Description(inputs, outputs, tuple(nodes), results)


def _parse_node(i: int, raw: object, specs: list[Spec]) -> Node:
    where = f"node {i}"
    if not isinstance(raw, Mapping):
        raise _error(where, f"expected a mapping, found {type(raw).__name__}")
    op = raw.get("op")
    if isinstance(op, str):
        where = f"node {i} ({op})"
    unknown = sorted(str(k) for k in raw if k not in _NODE_KEYS)
    if unknown:
        raise _error(
            where, f"unknown key(s) {', '.join(unknown)}; expected {', '.join(_NODE_KEYS)}"
        )
    if not isinstance(op, str):
        raise _error(where, f"op must be an operator name, found {op!r}")
    rule = get_rule(op)
    if rule is None:
        import difflib

        close = difflib.get_close_matches(op, supported_ops(), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise _error(where, f"unknown op {op!r}{hint}")
    for key in ("args", "outputs"):
        if key not in raw:
            raise _error(where, f"missing key {key!r}")
    args = _index_list(raw["args"], where, "args")
    if rule.num_args is None:
        if not args:
            raise _error(where, "wrong arg count: expected at least 1 argument, found 0")
    elif len(args) != rule.num_args:
        plural = "argument" if rule.num_args == 1 else "arguments"
        raise _error(
            where, f"wrong arg count: expected {rule.num_args} {plural}, found {len(args)}"
        )
    for k, value in enumerate(args):
        if not 0 <= value < len(specs):
            defined = f"values 0..{len(specs) - 1} are" if specs else "no value is"
            raise _error(
                where,
                f"argument {k} refers to value {value}, which is out of range or not yet "
                f"defined ({defined} defined before this node)",
            )
    declared = _spec_list(raw["outputs"], where, "outputs")
    attrs_raw = raw.get("attrs", {})
    if attrs_raw is None:
        attrs_raw = {}
    if not isinstance(attrs_raw, Mapping):
        raise _error(where, f"attrs must be a mapping, found {type(attrs_raw).__name__}")
    arg_specs = tuple(specs[a] for a in args)
    try:
        attrs = normalize_attrs(rule, attrs_raw)
        produced = rule.infer(arg_specs, attrs, declared)
    except RuleError as exc:
        raise _error(where, str(exc)) from None
    if len(produced) != len(declared):
        raise _error(
            where,
            f"the op produces {len(produced)} output(s) but {len(declared)} are declared",
        )
    for k, (want, got) in enumerate(zip(produced, declared)):
        if want != got:
            raise _error(
                where,
                f"output {k} is declared {got} but {op} of "
                f"({', '.join(str(s) for s in arg_specs)}) produces {want}",
            )
    first = len(specs)
    specs.extend(declared)
    return Node(i, op, args, attrs, declared, tuple(range(first, len(specs))))


def check_description(description: object) -> None:
    """Validate a kernel description without compiling anything.

    Parameters
    ----------
    description : mapping
        The plain-data description (see :mod:`vm.program`).

    Raises
    ------
    KernelDescriptionError
        If anything is wrong; the message names the node index, its operator and the
        problem (unknown op, wrong arg count, value index out of range or not yet defined,
        attribute missing, ill-typed or out of range, dtype not allowed, ndim out of range,
        declared outputs inconsistent with the operator, results out of range).
    """
    parse_description(description)
