"""Kernels of the dynamic-shape operators return what the compiler's numpy references return.

Returns group: ``shape_of``, ``ndarray_size``, the ``dyn.*`` operators, ``arange``,
``argsort`` and ``topk`` across dtypes and shapes (the harness sizes the outputs as the
machine does, from the reference's result). Traps group: output arrays whose shape
contradicts the input values raise ``ValueError`` naming what disagrees, before anything
is written.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.vm.kernels.harness import Program, check, run

RNG = np.random.default_rng(11)


def data(shape: tuple, dtype: str) -> np.ndarray:
    if dtype == "bool":
        return RNG.integers(0, 2, size=shape).astype(bool)
    return RNG.integers(0, 5, size=shape).astype(dtype)  # small values: many ties


def ints(*values: int, dtype: str = "int64") -> np.ndarray:
    return np.array(values, dtype=dtype)


# --- returns -------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(2, 3, 4), (0, 5), ()])
def test_shape_of_and_ndarray_size(shape: tuple) -> None:
    program = Program([data(shape, "float16")])
    results = [
        program.add("shape_of", [0])[0],
        program.add("shape_of", [0], dtype="int64")[0],
        program.add("ndarray_size", [0])[0],
    ]
    check(program, results)


@pytest.mark.parametrize("dtype", ["bool", "float16"])
def test_dyn_reshape_copies_to_the_values_of_newshape(dtype: str) -> None:
    for newshape in (ints(2, -1), ints(0, 3, 4, dtype="int32"), ints(-1)):
        program = Program([data((2, 12), dtype), newshape])
        check(program, program.add("dyn.reshape", [0, 1]))


@pytest.mark.parametrize("dtype", ["bool", "float16", "uint32"])
def test_dyn_broadcast_to(dtype: str) -> None:
    for shape, target in (((3, 1), (2, 3, 4)), ((1,), (5,)), ((2, 3), (2, 3))):
        program = Program([data(shape, dtype), ints(*target)])
        check(program, program.add("dyn.broadcast_to", [0, 1]))


@pytest.mark.parametrize("dtype", ["bool", "float16", "int8"])
def test_dyn_zeros_ones_and_full(dtype: str) -> None:
    shape = ints(2, 0, 3) if dtype == "int8" else ints(3, 2)
    for op in ("dyn.zeros", "dyn.ones"):
        program = Program([shape])
        check(program, program.add(op, [0], dtype=dtype))
    program = Program([np.array(3, dtype="float32"), shape])
    check(program, program.add("dyn.full", [0, 1], dtype=dtype))


@pytest.mark.parametrize(
    ("begin", "end", "strides", "mode"),
    [
        ((1, 0), (4, 5), (1,), "end"),
        ((-3, 4), (100, -6), (2, -1), "end"),
        ((0, 1), (2, -1), (1,), "size"),
        ((2,), (-1,), (1,), "size"),
    ],
)
def test_dyn_strided_slice(begin: tuple, end: tuple, strides: tuple, mode: str) -> None:
    program = Program([data((6, 5), "float16"), ints(*begin), ints(*end), ints(*strides)])
    check(program, program.add("dyn.strided_slice", [0, 1, 2, 3], slice_mode=mode))


@pytest.mark.parametrize(
    ("dtype", "bounds"),
    [("int32", (2, 11, 3)), ("int64", (5, -4, -2)), ("float32", (0.5, 3.0, 0.25)),
     ("float16", (0, 4, 1)), ("uint8", (3, 3, 1))],
)  # fmt: skip
def test_arange(dtype: str, bounds: tuple) -> None:
    program = Program([np.array(b, dtype=dtype) for b in bounds])
    check(program, program.add("arange", [0, 1, 2], dtype=dtype))


@pytest.mark.parametrize("dtype", ["float16", "int8", "uint64"])
def test_argsort_and_topk_are_stable(dtype: str) -> None:
    program = Program([data((4, 6), dtype)])
    results = [
        program.add("argsort", [0])[0],
        program.add("argsort", [0], axis=0, is_ascend=False, dtype="int64")[0],
        *program.add("topk", [0], k=3),
        *program.add("topk", [0], k=0, axis=0, is_ascend=True, ret_type="values"),
        *program.add("topk", [0], k=10, ret_type="indices"),
    ]
    check(program, results)


@pytest.mark.parametrize("dtype", ["float32", "int16", "float64"])
@pytest.mark.parametrize("nan", [False, True])
def test_topk_of_a_few_from_long_lines_selects_what_a_whole_sort_keeps(
    dtype: str, nan: bool
) -> None:
    # Lines at least eight times longer than k are partitioned first; ties at the k-th
    # value must still be kept by position, and NaN (largest descending) first.
    values = data((3, 400), dtype)
    if nan and dtype != "int16":
        values[1, [5, 77, 300]] = np.nan
    program = Program([values])
    results = [
        *program.add("topk", [0], k=7),
        *program.add("topk", [0], k=20, is_ascend=True, dtype="int64"),
        *program.add("topk", [0], k=3, axis=0, ret_type="indices"),
    ]
    check(program, results)


@pytest.mark.parametrize("dtype", ["bool", "float16", "int8", "float32"])
@pytest.mark.parametrize("shape", [(7,), (2, 3, 4), (0, 3), (2, 1, 2, 1, 3)])
def test_argwhere_lists_the_nonzero_elements_in_c_order(dtype: str, shape: tuple) -> None:
    condition = data(shape, dtype)
    if dtype == "float32" and condition.size:
        condition.reshape(-1)[0] = np.nan  # nonzero, as in numpy
        condition.reshape(-1)[-1] = -0.0  # zero
    for values in (condition, np.zeros(shape, dtype)):
        program = Program([values])
        check(program, program.add("argwhere", [0]))


@pytest.mark.parametrize("dtype", ["float16", "int8", "float64"])
def test_dyn_topk_keeps_k_read_from_a_tensor(dtype: str) -> None:
    # One node per kernel: a data-dependent operator is never fused (its shape is out0's).
    for k in (ints(2), ints(9, dtype="int32"), np.array(0, "int64"), np.array(3, "int32")):
        program = Program([data((4, 6), dtype), k])
        check(program, program.add("dyn.topk", [0, 1]))
        program = Program([data((4, 6), dtype), k])
        check(program, program.add("dyn.topk", [0, 1], axis=0, is_ascend=True, ret_type="indices"))


# --- traps ---------------------------------------------------------------------------------------


def test_outputs_contradicting_the_input_values_are_refused() -> None:
    program = Program([data((2, 6), "float32"), ints(3, 4)])
    (result,) = program.add("dyn.reshape", [0, 1])
    with pytest.raises(ValueError, match="element count of output 0: expected 12, found 20"):
        run(program.description([result]), program.inputs, [np.zeros((4, 5), "float32")])
    program = Program([data((6, 5), "float32"), ints(1, 0), ints(4, 5), ints(1)])
    (result,) = program.add("dyn.strided_slice", [0, 1, 2, 3])
    with pytest.raises(ValueError, match="size of axis 0 of the slice: expected 3, found 4"):
        run(program.description([result]), program.inputs, [np.zeros((4, 5), "float32")])
    program = Program([np.array(v, dtype="int32") for v in (0, 4, 1)])
    (result,) = program.add("arange", [0, 1, 2], dtype="int32")
    zero_step = [np.array(v, dtype="int32") for v in (0, 4, 0)]
    with pytest.raises(ValueError, match="step must not be 0"):
        run(program.description([result]), zero_step, [np.zeros(4, "int32")])
    program = Program([data((3, 1), "float32"), ints(3, 4)])
    (result,) = program.add("dyn.broadcast_to", [0, 1])
    with pytest.raises(ValueError, match="cannot broadcast the input to the shape"):
        run(
            program.description([result]),
            [data((2, 1), "float32"), ints(3, 4)],
            [np.zeros((3, 4), "float32")],
        )


def test_argwhere_refuses_an_output_with_the_wrong_number_of_rows() -> None:
    condition = np.array([[1, 0], [0, 1]], "int32")
    program = Program([condition])
    (result,) = program.add("argwhere", [0])
    with pytest.raises(ValueError, match="number of nonzero elements: expected 2, found 3"):
        run(program.description([result]), [condition], [np.zeros((3, 2), "int32")])


def test_dyn_topk_refuses_outputs_sized_for_another_k() -> None:
    program = Program([data((2, 5), "float32"), ints(2)])
    (values, _) = program.add("dyn.topk", [0, 1])
    with pytest.raises(ValueError, match="k: expected 2, found 3"):
        run(
            program.description([values]),
            program.inputs,
            [np.zeros((2, 3), "float32")],
        )
