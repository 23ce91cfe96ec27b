"""Gather and scatter kernels (gather, gather_nd, scatter_elements, scatter_nd) return what
the compiler's numpy references return.

Returns group: every axis, negative indices, repeated positions under each reduction,
batch axes, several dtypes (float16 moving as raw bits and reduced in float32). Traps
group: an index out of range raises ``IndexError`` naming the operator, the index and the
axis size; sizes that do not fit raise ``ValueError``.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.vm.kernels.harness import Program, check, run

RNG = np.random.default_rng(11)


def data(shape: tuple, dtype: str = "float32") -> np.ndarray:
    return (RNG.standard_normal(shape) * 4).astype(dtype)


def indices(shape: tuple, size: int, dtype: str = "int64") -> np.ndarray:
    """Indices into an axis of ``size``, negative ones included."""
    return RNG.integers(-size, size, shape).astype(dtype)


# --- returns -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "bool"])
def test_gather_reads_along_every_axis(dtype: str) -> None:
    x = data((4, 5, 3)).astype(dtype)
    program = Program([x, indices((2, 5, 3), 4), indices((4, 7, 2), 5, "int32"),
                       indices((3, 2, 3), 3)])  # fmt: skip
    results = [program.add("gather", [0, 1 + k], axis=k - 3 if k == 2 else k)[0] for k in range(3)]
    check(program, results)


def test_gather_nd_reads_index_tuples_with_and_without_batch_axes() -> None:
    x = data((3, 4, 5))
    program = Program([x, indices((2, 6), 3), indices((1, 2, 2), 3), indices((2, 3, 2), 4)])
    results = [
        program.add("gather_nd", [0, 1])[0],  # pairs into axes 0, 1: (6, 5)
        program.add("gather_nd", [0, 2])[0],  # single indices into axis 0: (2, 2, 4, 5)
        program.add("gather_nd", [0, 3], batch_dims=1)[0],  # per batch, pairs into axes 1, 2
    ]
    check(program, results)


REDUCTIONS = ["update", "add", "mul", "mean", "min", "max"]


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_scatter_elements_reduces_repeated_positions_in_order(dtype: str) -> None:
    x = data((4, 3)).astype(dtype)
    # Six updates into four rows: some rows get several, some none.
    program = Program([x, indices((6, 3), 4), data((6, 3)).astype(dtype)])
    results = [program.add("scatter_elements", [0, 1, 2], reduction=r)[0] for r in REDUCTIONS]
    check(program, results, REDUCTIONS)


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint16"])
def test_scatter_elements_on_integers_wraps_like_numpy(dtype: str) -> None:
    x = RNG.integers(0, 100, (3, 5)).astype(dtype)
    updates = RNG.integers(0, 100, (3, 4)).astype(dtype)
    program = Program([x, indices((3, 4), 5, "int32"), updates])
    names = [r for r in REDUCTIONS if r != "mean"]
    results = [program.add("scatter_elements", [0, 1, 2], axis=1, reduction=r)[0] for r in names]
    check(program, results, names)


def test_scatter_elements_takes_nan_like_numpy_maximum() -> None:
    x = np.array([[1.0, np.nan, 3.0]], "float32")
    updates = np.array([[np.nan, 5.0, 2.0]], "float32")
    program = Program([x, np.array([[0, 1, 2]], "int64"), updates])
    names = ["min", "max"]
    results = [program.add("scatter_elements", [0, 1, 2], axis=1, reduction=r)[0] for r in names]
    check(program, results, names)


@pytest.mark.parametrize("mode", ["update", "add", "mul", "min", "max"])
def test_scatter_nd_writes_rows_and_elements(mode: str) -> None:
    x = data((4, 3, 2))
    program = Program([
        x, indices((2, 5), 3), data((5, 2)),  # element tuples: updates (5, 2)
        indices((1, 2, 3), 4), data((2, 3, 3, 2)),  # whole rows: updates (2, 3, 3, 2)
    ])  # fmt: skip
    results = [
        program.add("scatter_nd", [0, 1, 2], mode=mode)[0],
        program.add("scatter_nd", [0, 3, 4], mode=mode)[0],
    ]
    check(program, results)


# --- traps ---------------------------------------------------------------------------------------


def _outputs(program: Program, results: list[int]) -> tuple[dict, list[np.ndarray]]:
    return program.description(results), program.expected(results)


@pytest.mark.parametrize("bad", [4, -5])
def test_gather_index_out_of_range_raises(bad: int) -> None:
    x, idx = data((4, 3)), np.array([[0, 1, 2]], "int64")
    program = Program([x, idx])
    desc, want = _outputs(program, program.add("gather", [0, 1]))
    with pytest.raises(IndexError, match=f"gather along axis 0: index {bad} is out of range "
                       "for an axis of size 4"):  # fmt: skip
        run(desc, [x, np.array([[0, bad, 2]], "int64")], want)


def test_scatter_index_out_of_range_raises_naming_the_axis() -> None:
    x, idx, upd = data((4, 3)), np.array([[0, 1]], "int32"), data((1, 2))
    program = Program([x, idx, upd])
    desc, want = _outputs(program, program.add("scatter_elements", [0, 1, 2], axis=1))
    with pytest.raises(IndexError, match="scatter along axis 1: index 3 is out of range"):
        run(desc, [x, np.array([[0, 3]], "int32"), upd], want)
    program = Program([x, np.array([[1, 2]], "int64"), data((2, 3))])
    desc, want = _outputs(program, program.add("scatter_nd", [0, 1, 2]))
    with pytest.raises(IndexError, match="scatter_nd on axis 0: index -9 is out of range"):
        run(desc, [x, np.array([[1, -9]], "int64"), data((2, 3))], want)


def test_scatter_updates_of_the_wrong_size_raise() -> None:
    x, idx, upd = data((4, 3)), np.array([[0, 1]], "int32"), data((1, 2))
    program = Program([x, idx, upd])
    desc, want = _outputs(program, program.add("scatter_elements", [0, 1, 2]))
    with pytest.raises(ValueError, match="axis 1 of updates"):
        run(desc, [x, idx, data((1, 3))], want)
    with pytest.raises(ValueError, match="longer than data on axis 1"):
        run(desc, [x, np.zeros((1, 4), "int32"), data((1, 4))], want)


def test_gather_nd_index_depth_must_match_the_compiled_one() -> None:
    x, idx = data((3, 4)), np.array([[0, 1], [2, 3]], "int64")
    program = Program([x, idx])
    desc, want = _outputs(program, program.add("gather_nd", [0, 1]))
    with pytest.raises(ValueError, match="index depth"):
        run(desc, [x, np.zeros((1, 2), "int64")], want)
