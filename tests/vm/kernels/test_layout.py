"""Layout kernels (reshape, squeeze, expand_dims, batch_flatten, transpose, concatenate, stack,
split, strided_slice, take) return what the compiler's numpy references return.

Returns group: each operator with its attribute variants in one kernel, on several shapes;
float16 data moves as raw bits. Traps group: take with mode="fast" and an out-of-range
index, and inputs whose run-time sizes contradict the attributes.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.vm.kernels.harness import Program, check, run
from vm.kernels import load_kernel

RNG = np.random.default_rng(7)


def arange(shape: tuple, dtype: str = "float32") -> np.ndarray:
    return np.arange(int(np.prod(shape))).astype(dtype).reshape(shape)


@pytest.mark.parametrize("shape", [(2, 3, 4), (1, 6, 2), (4, 1, 6)])
def test_reshape_handles_every_special_value(shape: tuple) -> None:
    program = Program([arange(shape)])
    newshapes = [(-1,), (0, -1), (-2,), (-3, 0), (0, -4, 1, -1, 0), (4, -1, 2)[-2:], (-1, 2, 1)]
    results = [program.add("reshape", [0], newshape=n)[0] for n in newshapes]
    check(program, results, [f"reshape {n}" for n in newshapes])


@pytest.mark.parametrize("shape", [(2, 1, 3, 1), (1, 1, 5, 1)])
def test_squeeze_expand_dims_and_batch_flatten_copy_the_data(shape: tuple) -> None:
    program = Program([arange(shape, "int16")])
    results = [
        program.add("squeeze", [0], axis=(1,))[0],
        program.add("squeeze", [0], axis=(-1, 1))[0],
        program.add("expand_dims", [0], axis=0)[0],
        program.add("expand_dims", [0], axis=-1, num_newaxis=2)[0],
        program.add("expand_dims", [0], axis=2, num_newaxis=0)[0],
        program.add("nn.batch_flatten", [0])[0],
    ]
    check(program, results)


def test_squeeze_without_axis_removes_the_size_one_axes() -> None:
    for shape in [(3, 1, 4, 1), (1, 2, 1, 5)]:
        program = Program([arange(shape)])
        check(program, program.add("squeeze", [0]))


def test_squeeze_without_axis_checks_the_run_time_rank() -> None:
    program = Program([arange((3, 1, 4, 1)), arange((3, 4))])
    (squeezed,) = program.add("squeeze", [0])
    results = program.add("add", [squeezed, 1])  # an intermediate: its shape is computed
    desc = program.description(results)
    with pytest.raises(
        ValueError, match="number of axes of size other than 1: expected 2, found 3"
    ):
        run(desc, [arange((3, 2, 4, 1)), arange((3, 4))], [np.zeros((3, 4), "float32")])


@pytest.mark.parametrize("shape", [(2, 3, 4), (1, 5, 3), (3, 2, 0)])
def test_transpose_permutes_axes(shape: tuple) -> None:
    program = Program([arange(shape, "float16")])
    perms = [None, (1, 0, 2), (2, 0, 1), (-1, -3, -2)]
    results = [program.add("transpose", [0], axes=p)[0] for p in perms]
    check(program, results, [f"transpose {p}" for p in perms])


def test_a_transpose_read_only_by_a_reshape_to_an_output_writes_into_that_output() -> None:
    # Attention heads: slice, split into heads, transpose, merge into a batch of heads.
    program = Program([arange((1, 8, 24))])
    (sliced,) = program.add("strided_slice", [0], begin=[0, 0, 8], end=[1, 8, 16])
    (heads,) = program.add("reshape", [sliced], newshape=[1, 8, 2, 4])
    (moved,) = program.add("transpose", [heads], axes=(0, 2, 1, 3))
    (merged,) = program.add("reshape", [moved], newshape=[2, 8, 4])
    check(program, [merged])
    source = load_kernel(program.description([merged])).path.read_text()
    assert "is written into out0" in source
    assert "f1[j" not in source  # no copy out of a temporary
    # Returned as well, or read by another operator, the transpose keeps its own array.
    check(program, [merged, moved])
    (doubled,) = program.add("add", [moved, moved])
    check(program, [merged, doubled])


@pytest.mark.parametrize("shape", [(2, 33, 17), (3, 16, 16), (1, 40, 5)])
def test_transposes_that_move_the_last_axis_copy_in_tiles_and_edges(shape: tuple) -> None:
    # Sizes that are not multiples of the tile side exercise the partial tiles at the edges;
    # 2-D and 4-D transposes take the same path with zero and two outer loops.
    program = Program([arange(shape), arange(shape[1:]), arange((2, *shape))])
    results = [
        program.add("transpose", [0], axes=(0, 2, 1))[0],
        program.add("transpose", [0], axes=(2, 1, 0))[0],
        program.add("transpose", [1], axes=None)[0],
        program.add("transpose", [2], axes=(0, 2, 3, 1))[0],
        program.add("transpose", [2], axes=(3, 1, 0, 2))[0],
    ]
    check(program, results)


@pytest.mark.parametrize("sizes", [(1, 2, 3), (4, 0, 1)])
def test_concatenate_and_stack_join_fields(sizes: tuple) -> None:
    fields = [RNG.standard_normal((2, n, 3)).astype("float32") for n in sizes]
    same = [RNG.standard_normal((2, 3)).astype("float32") for _ in range(3)]
    program = Program(fields + same)
    results = [
        program.add("concatenate", [0, 1, 2], axis=1)[0],
        program.add("concatenate", [0, 0], axis=-1)[0],
        program.add("concatenate", [2], axis=0)[0],
        program.add("stack", [3, 4, 5], axis=0)[0],
        program.add("stack", [3, 4, 5], axis=-1)[0],
        program.add("stack", [4], axis=1)[0],
    ]
    check(program, results)


@pytest.mark.parametrize("axis", [0, 1, 3, -1])
def test_concatenate_joins_plain_arrays_and_views_along_any_axis(axis: int) -> None:
    # Plain fields are copied a run at a time; a transposed or sliced field (a strided
    # view inside the kernel) element by element, into the same output.
    shape = [2, 3, 4, 5]
    x = RNG.standard_normal(shape).astype("float32")
    other = shape.copy()
    other[axis] = 2
    y = RNG.standard_normal(other).astype("float32")
    z = RNG.standard_normal((2, 3, 5, 4)).astype("float32")
    program = Program([x, y, z])
    swapped = program.add("transpose", [2], axes=(0, 1, 3, 2))[0]
    begin, end = [0, 0, 0, 0], list(shape)
    begin[axis] = 1
    sliced = program.add("strided_slice", [0], begin=begin, end=end, strides=[1, 1, 1, 1])[0]
    results = [
        program.add("concatenate", [0, 1, 0], axis=axis)[0],
        program.add("concatenate", [sliced, 1], axis=axis)[0],
        program.add("concatenate", [swapped, 0, swapped], axis=axis)[0],
    ]
    check(program, results)


@pytest.mark.parametrize("length", [6, 12, 9])
def test_split_gives_every_piece(length: int) -> None:
    program = Program([arange((2, length), "int32")])
    pieces = [
        *program.add("split", [0], indices_or_sections=3, axis=1),
        *program.add("split", [0], indices_or_sections=(0, 2, 2, 5), axis=-1),
        *program.add("split", [0], indices_or_sections=1, axis=0),
    ]
    check(program, pieces)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("pairs", [1, 2, 3, 16, 17, 40])
def test_space_to_depth_transposes_split_each_row_into_its_even_and_odd_elements(
    dtype: str, pairs: int
) -> None:
    # A 2x2-block space-to-depth (what a 2x2 stride-2 convolution becomes) splits each
    # input row by vector shuffles; a block of 3 columns takes the tiled loops instead.
    program = Program([arange((2, 3, 4, 2 * pairs), dtype), arange((1, 2, 3, 3 * pairs), dtype)])
    results = []
    for source, block in ((0, 2), (1, 3)):
        height, width = program.values[source].shape[2:]
        (blocks,) = program.add(
            "reshape", [source], newshape=[0, 0, height // block, block, width // block, block]
        )
        (moved,) = program.add("transpose", [blocks], axes=(0, 1, 3, 5, 2, 4))
        results.append(
            program.add("reshape", [moved], newshape=[0, -1, height // block, width // block])[0]
        )
        results.append(program.add("transpose", [blocks], axes=(5, 0, 1, 3, 2, 4))[0])
    check(program, results)
    assert "pk.split_pairs" in load_kernel(program.description(results)).path.read_text()


def test_a_two_column_temporary_transposed_by_shuffles_is_read_before_it_is_freed() -> None:
    # A 2-D pair split has no loop around it, so it is the temporary's last use: the
    # kernel must keep the temporary alive until the split has read it.
    program = Program([arange((37, 2), "float32")])
    (doubled,) = program.add("add", [0, 0])
    (moved,) = program.add("transpose", [doubled], axes=(1, 0))
    check(program, [moved])
    source = load_kernel(program.description([moved])).path.read_text()
    assert "pk.split_pairs" in source and "cb.alive" in source


@pytest.mark.parametrize("dtype", ["float32", "int32", "float16"])
@pytest.mark.parametrize("width", [1, 2, 31, 32, 33, 64, 65])
def test_strided_slice_by_twos_along_rows_keeps_every_other_element(dtype: str, width: int) -> None:
    # Rows whose last kept element ends the row (32 and 64 elements from 0, 33 and 65
    # from 1) must not be read past their end; float16 takes numba's loop.
    program = Program([arange((3, 2, width), dtype)])
    configs = [
        {"begin": (0,), "end": (width,), "strides": (2,), "axes": (2,)},
        {"begin": (1,), "end": (width,), "strides": (2,), "axes": (2,)},
        {"begin": (0, 1, 0), "end": (3, 2, width - 1), "strides": (2, 1, 2)},
        {"begin": (0,), "end": (width,), "strides": (2,), "axes": (0,)},
    ]
    results = [program.add("strided_slice", [0], **config)[0] for config in configs]
    check(program, results, [f"strided_slice {c}" for c in configs])
    shuffled = "pk.take_evens" in load_kernel(program.description(results)).path.read_text()
    assert shuffled == (dtype != "float16")
    (flat,) = program.add("reshape", [0], newshape=[-1])
    (evens,) = program.add("strided_slice", [flat], begin=(0,), end=(6 * width,), strides=(2,))
    check(program, [evens])


SLICES = [
    {"begin": (1,), "end": (3,)},
    {"begin": (0, 1), "end": (4, 100), "strides": (2,)},
    {"begin": (-1, -2), "end": (-100, 0), "strides": (-1, -1)},
    {"begin": (5, 0), "end": (1, 2), "strides": (-2, 1)},
    {"begin": (1,), "end": (2,), "axes": (2,)},
    {"begin": (0, -3), "end": (-1, 2), "slice_mode": "size"},
    {"begin": (2,), "end": (1,)},
]


@pytest.mark.parametrize("shape", [(4, 5, 6), (7, 3, 2), (1, 1, 1)])
def test_strided_slice_follows_python_slicing(shape: tuple) -> None:
    program = Program([arange(shape)])
    results = [program.add("strided_slice", [0], **config)[0] for config in SLICES]
    check(program, results, [f"strided_slice {c}" for c in SLICES])


TAKES = [
    {"axis": None, "mode": "clip"},
    {"axis": 0, "mode": "wrap"},
    {"axis": 1, "mode": "clip"},
    {"axis": -1, "mode": "fast"},
]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bool"])
def test_take_gathers_with_clip_wrap_and_fast_modes(dtype: str) -> None:
    x = arange((4, 5, 3), "float32").astype(dtype)
    program = Program([x, np.array([[0, 2], [1, 2]], "int64"), np.array([9, -7, 2, -1], "int32")])
    results = [program.add("take", [0, 2], **TAKES[0])[0]]
    results += [program.add("take", [0, 2], **config)[0] for config in TAKES[1:3]]
    results.append(program.add("take", [0, 1], **TAKES[3])[0])
    check(program, results, [f"take {c}" for c in TAKES])


def test_take_with_batch_dims_gathers_per_batch() -> None:
    x = arange((2, 5, 3))
    indices = np.array([[4, 0, 1], [2, 2, 3]], "int32")
    program = Program([x, indices])
    check(program, program.add("take", [0, 1], axis=1, batch_dims=1))


def test_take_fast_mode_raises_on_an_out_of_range_index() -> None:
    x = arange((4, 5, 3))
    program = Program([x, np.array([[0, 2], [1, 2]], "int64")])
    results = program.add("take", [0, 1], axis=-1, mode="fast")
    want = program.expected(results)
    desc = program.description(results)
    for bad in (3, -1):
        indices = np.array([[0, 2], [bad, 2]], "int64")
        with pytest.raises(IndexError, match=f"index {bad} is out of range"):
            run(desc, [x, indices], want)


def test_take_from_an_empty_axis_raises() -> None:
    program = Program([arange((4, 5)), np.array([1, 2], "int32")])
    results = program.add("take", [0, 1], axis=1, mode="clip")
    desc = program.description(results)
    with pytest.raises(IndexError, match="axis of size 0"):
        run(
            desc,
            [np.zeros((4, 0), "float32"), np.array([1, 2], "int32")],
            [np.zeros((4, 2), "float32")],
        )


def test_sizes_that_contradict_the_attributes_raise() -> None:
    program = Program([arange((2, 6))])
    results = program.add("split", [0], indices_or_sections=3, axis=1)
    desc = program.description(results)
    outs = [np.zeros((2, 2), "float32")] * 3
    with pytest.raises(ValueError, match="not divisible by 3"):
        run(desc, [arange((2, 7))], outs)
    program = Program([arange((2, 6))])
    results = program.add("reshape", [0], newshape=(4, 3))
    with pytest.raises(ValueError, match="element count"):
        run(program.description(results), [arange((2, 5))], [np.zeros((4, 3), "float32")])
