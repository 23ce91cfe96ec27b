"""Test harness for kernels: build descriptions from numpy inputs and operator calls, run them,
and compute the expected outputs with the compiler's numpy references.

Test support (``tests/vm/kernels``); imports ``compiler`` for the references, which tests may.
"""

from __future__ import annotations

import pathlib
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from compiler.op.registry import get_def
from vm.kernels import load_kernel

#: Operators whose single argument is a tuple of tensors (one kernel arg per field).
TUPLE_OPS = {"concatenate", "stack"}


def seed_library_cache(directory: pathlib.Path) -> pathlib.Path:
    """Give the empty cache ``directory`` this process's compiled kernel library.

    A child process with a private cache directory would otherwise compile the library
    functions its kernels need (up to most of a minute) before its first kernel: tests of
    the kernel cache copy it, as a machine that ran relayvm before would have it. Every
    job kind's chunk code and every C entry point is compiled into it first.
    """
    import vm.kernels.runtime.convolution  # noqa: F401  (registers the C entry points linked below)
    from vm.kernels import cache
    from vm.kernels.runtime import callbacks, jobs

    jobs.require(*jobs.OWNERS)
    callbacks.link(*callbacks.entries())

    source = cache.library_dir()
    target = directory / source.relative_to(cache.cache_dir())
    if not target.exists():  # never under a child that may be reading it
        shutil.copytree(source, target, copy_function=shutil.copy2)
    return directory


def plain(value: object) -> object:
    """Attribute values as a file would hold them: tuples become lists."""
    if isinstance(value, tuple):
        return [plain(v) for v in value]
    return value


@dataclass
class Program:
    """A kernel description under construction, evaluated with the references as it grows."""

    inputs: list[np.ndarray]
    nodes: list[dict] = field(default_factory=list)
    values: list[np.ndarray] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.values = [np.asarray(x) for x in self.inputs]

    def add(self, op: str, args: Sequence[int], **attrs: object) -> list[int]:
        """Append ``op(args...; attrs)``; returns the value indices of its outputs."""
        opdef = get_def(op)
        normalized = opdef.normalize_attrs(attrs)
        arrays = [self.values[a] for a in args]
        ref_args = [tuple(arrays)] if op in TUPLE_OPS else arrays
        result = opdef.reference(ref_args, normalized)
        outs = list(result) if isinstance(result, tuple) else [result]
        outs = [np.asarray(o) for o in outs]
        first = len(self.values)
        self.values.extend(outs)
        self.nodes.append(
            {
                "op": op,
                "args": list(args),
                "attrs": {k: plain(v) for k, v in normalized.items()},
                "outputs": [[o.dtype.name, o.ndim] for o in outs],
            }
        )
        return list(range(first, len(self.values)))

    def description(self, results: Sequence[int]) -> dict:
        return {
            "inputs": [[x.dtype.name, x.ndim] for x in self.values[: len(self.inputs)]],
            "outputs": [[self.values[r].dtype.name, self.values[r].ndim] for r in results],
            "nodes": self.nodes,
            "results": list(results),
        }

    def expected(self, results: Sequence[int]) -> list[np.ndarray]:
        return [self.values[r] for r in results]


def packed(weight: np.ndarray, width: int = 32) -> np.ndarray:
    """``weight`` (``units`` by anything) flattened to 2-D and packed in ``NC{width}n``
    panels, zero-padded: the weight of ``nn.contrib_dense_pack`` (2-D) or of the packed
    convolution (OIHW)."""
    units = weight.shape[0]
    flat = weight.reshape(units, -1)
    panels = -(-units // width)
    padded = np.zeros((panels * width, flat.shape[1]), weight.dtype)
    padded[:units] = flat
    return np.ascontiguousarray(padded.reshape(panels, width, -1).transpose(0, 2, 1))


def run(description: dict, inputs: Sequence[np.ndarray], like: Sequence[np.ndarray]) -> list:
    """Run the kernel for ``description`` on ``inputs``; outputs shaped like ``like``."""
    kernel = load_kernel(description)
    outs = [np.full(x.shape, 7, dtype=x.dtype) for x in like]
    kernel(*[np.array(x, order="C", copy=None) for x in inputs], *outs)
    return outs


def tolerance(dtype: np.dtype) -> dict:
    """Comparison tolerances: exact for integers and bools, a few ulps for floats."""
    if dtype == np.float16:
        return {"rtol": 2e-3, "atol": 2e-3}
    if dtype == np.float32:
        return {"rtol": 2e-5, "atol": 1e-6}
    if dtype == np.float64:
        return {"rtol": 1e-12, "atol": 1e-14}
    return {"rtol": 0, "atol": 0}


#: Looser float tolerances for results that sum many products (convolutions): the kernel
#: and the reference add them in different orders.
SUMS = {
    np.dtype("float16"): {"rtol": 4e-3, "atol": 4e-3},
    np.dtype("float32"): {"rtol": 1e-4, "atol": 1e-4},
    np.dtype("float64"): {"rtol": 1e-10, "atol": 1e-10},
}


def assert_same(
    got: np.ndarray, want: np.ndarray, what: str, tolerances: dict | None = None
) -> None:
    """``got`` equals ``want`` in dtype, shape and value (NaN matches NaN); float tolerances
    come from ``tolerances`` (by dtype) when given, else :func:`tolerance`."""
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} vs {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape} vs {want.shape}"
    if got.dtype.kind == "f":
        tol = (tolerances or {}).get(got.dtype) or tolerance(got.dtype)
        np.testing.assert_allclose(got, want, equal_nan=True, err_msg=what, **tol)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def check(
    program: Program,
    results: Sequence[int],
    names: Sequence[str] | None = None,
    tolerances: dict | None = None,
) -> None:
    """Run ``program``'s kernel and compare each result with the reference."""
    desc = program.description(results)
    want = program.expected(results)
    got = run(desc, program.inputs, want)
    for k, (g, w) in enumerate(zip(got, want)):
        label = names[k] if names else f"output {k}"
        assert_same(g, w, label, tolerances)


DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64"]  # fmt: skip


def cast_all(x: np.ndarray) -> tuple[Program, list[int]]:
    """``x`` cast to every dtype: one kernel per source dtype, shared by the tests."""
    program = Program([x])
    return program, [program.add("cast", [0], dtype=target)[0] for target in DTYPES]
