"""Reduction kernels return what the compiler's numpy references return.

Returns group: every reduction over every axis configuration (all axes, innermost axes,
interleaved axes, keepdims, exclude) on one rank-3 input per dtype, NaN propagation,
empty reductions, argmax/argmin with select_last_index, a float sum over a whole plane in
one run of sums. Traps group: reductions that have
no value over zero elements.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.vm.kernels.harness import Program, check, run
from vm.kernels import load_kernel

RNG = np.random.default_rng(99)

#: Axis configurations: every axis, the innermost (scalar accumulator path), interleaved
#: axes (array accumulator path), keepdims and exclude.
CONFIGS = [
    {"axis": None},
    {"axis": (2,), "keepdims": True},
    {"axis": (1,)},
    {"axis": (0, 2)},
    {"axis": (1,), "exclude": True, "keepdims": True},
    {"axis": (-1, -2)},
]
ARG_CONFIGS = [
    {"axis": None},
    {"axis": (2,)},
    {"axis": (1,), "keepdims": True},
    {"axis": (0, 2), "select_last_index": True},
    {"axis": (1,), "exclude": True},
]
OPS = {
    "float32": ["sum", "mean", "prod", "max", "min", "argmax", "argmin"],
    "float64": ["sum", "mean", "max", "argmin"],
    "float16": ["sum", "mean", "max", "argmax"],
    "int32": ["sum", "mean", "prod", "max", "min", "argmax", "argmin"],
    "uint8": ["sum", "mean", "prod", "max", "argmin"],
    "bool": ["all", "any", "max", "min", "argmax"],
}
SHAPES = [(2, 3, 4), (1, 5, 1), (3, 1, 2), (4, 6, 5)]


def data(dtype: str, shape: tuple) -> np.ndarray:
    if dtype == "bool":
        return RNG.random(shape) < 0.6
    if np.dtype(dtype).kind == "f":
        return RNG.uniform(-2, 2, shape).astype(dtype)
    if np.dtype(dtype).kind == "u":
        return RNG.integers(0, 250, shape).astype(dtype)
    # Repeated values exercise first/last index ties.
    return RNG.integers(-3, 4, shape).astype(dtype)


def reduce_program(dtype: str, op: str, x: np.ndarray) -> tuple[Program, list[int], list[str]]:
    program = Program([x])
    configs = ARG_CONFIGS if op.startswith("arg") else CONFIGS
    results = [program.add(op, [0], **config)[0] for config in configs]
    return program, results, [f"{op} {dtype} {config}" for config in configs]


@pytest.mark.parametrize(
    ("dtype", "op"), [(dtype, op) for dtype, ops in sorted(OPS.items()) for op in ops]
)
def test_reductions_match_reference(dtype: str, op: str) -> None:
    for shape in SHAPES:
        program, results, names = reduce_program(dtype, op, data(dtype, shape))
        check(program, results, names)


@pytest.mark.parametrize("op", ["sum", "mean", "prod", "max", "min", "argmax", "argmin"])
def test_nan_propagates_like_numpy(op: str) -> None:
    x = RNG.uniform(-2, 2, (3, 4, 5)).astype("float32")
    x[0, 1, 2] = np.nan
    x[2, :, 4] = np.nan
    x[1, 3, :] = np.inf
    program, results, names = reduce_program("float32", op, x)
    check(program, results, names)


@pytest.mark.parametrize("op", ["sum", "mean", "prod", "max", "min"])
def test_reductions_over_zero_elements_give_the_identity(op: str) -> None:
    program, results, names = reduce_program("float32", op, np.zeros((2, 0, 3), "float32"))
    check(program, results, names)


def test_integer_sums_wrap_like_the_dtype() -> None:
    program, results, names = reduce_program("uint8", "sum", np.full((4, 6, 5), 250, "uint8"))
    check(program, results, names)


@pytest.mark.parametrize(("dtype", "op"), [("float32", "argmax"), ("int32", "mean")])
def test_reductions_without_identity_refuse_zero_elements(dtype: str, op: str) -> None:
    program = Program([data(dtype, (2, 3, 4))])
    results = program.add(op, [0], axis=(1,))
    out = np.zeros((2, 4), program.values[results[0]].dtype)
    with pytest.raises(ValueError, match=f"{op}.*zero elements"):
        run(program.description(results), [np.zeros((2, 0, 4), dtype)], [out])


@pytest.mark.parametrize("op", ["sum", "mean"])
def test_a_sum_over_a_whole_plane_runs_as_one_axis_and_matches_numpy(op: str) -> None:
    # A global pool (squeeze-excite's mean over H and W): the plane is one run of sums.
    x = RNG.uniform(-2, 2, (2, 5, 13, 11)).astype("float64")
    program = Program([x])
    (value,) = program.add(op, [0], axis=[2, 3], keepdims=True)
    check(program, [value])
    source = load_kernel(program.description([value])).path.read_text()
    assert re.search(r"f\d+ = in0\.reshape\(\(in0\.shape\[0\], in0\.shape\[1\], n\d+,\)\)", source)


@pytest.mark.parametrize("op", ["sum", "mean"])
@pytest.mark.parametrize(("shape", "axis"), [((2, 5, 13, 11), [2, 3]), ((6, 40), [1])])
def test_float32_sums_over_trailing_axes_run_as_the_runtimes_shared_row_sums(
    op: str, shape: tuple[int, ...], axis: list[int]
) -> None:
    x = RNG.uniform(-2, 2, shape).astype("float32")
    program = Program([x])
    (value,) = program.add(op, [0], axis=axis, keepdims=len(axis) > 1)
    check(program, [value])
    source = load_kernel(program.description([value])).path.read_text()
    assert "pool.row_sums_f32(in0.reshape(" in source
