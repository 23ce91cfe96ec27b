"""Normalization kernels match the compiler's references.

Returns group: nn.batch_norm (three outputs) along the channel axis and the last axis,
with and without scale and center, in float32, float64 and float16 (rounded after every
step as numpy does); nn.layer_norm along the last axis and an inner axis; nn.group_norm
with several groups per channel count. Traps group: vectors whose length disagrees with
the normalized axis and channels not divisible by the group count.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.vm.kernels.harness import Program, check, run

RNG = np.random.default_rng(51)


def tensor(dtype: str, *shape: int, positive: bool = False) -> np.ndarray:
    values = RNG.standard_normal(shape)
    return (np.abs(values) + 0.1 if positive else values).astype(dtype)


def batch_norm(dtype: str, shape: tuple, channels: int, **attrs: object) -> tuple[Program, list]:
    vectors = [tensor(dtype, channels) for _ in range(3)]
    program = Program([tensor(dtype, *shape), *vectors, tensor(dtype, channels, positive=True)])
    return program, program.add("nn.batch_norm", [0, 1, 2, 3, 4], **attrs)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_batch_norm_along_channels_returns_data_mean_and_variance(dtype: str) -> None:
    for shape in [(2, 3, 4, 5), (1, 3, 1, 1)]:
        program, results = batch_norm(dtype, shape, 3)
        check(program, results, ["data", "mean", "variance"])


def test_batch_norm_along_the_last_axis_without_scale_or_center() -> None:
    for shape in [(4, 6), (2, 3, 6)]:
        check(*batch_norm("float32", shape, 6, axis=-1, scale=False, center=False, epsilon=0.1))


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_layer_norm_along_the_last_axis(dtype: str) -> None:
    # (160, 128): float32 rows enough to be shared between the threads (rows.SPLIT).
    for shape in [(3, 4, 6), (2, 128), (160, 128)]:
        program = Program([tensor(dtype, *shape), tensor(dtype, shape[-1]),
                           tensor(dtype, shape[-1])])  # fmt: skip
        check(program, program.add("nn.layer_norm", [0, 1, 2]))


@pytest.mark.parametrize(("scale", "center"), [(False, True), (True, False), (False, False)])
def test_float32_layer_norm_rows_without_scale_or_center(scale: bool, center: bool) -> None:
    shape = (2, 96, 100)
    program = Program([tensor("float32", *shape), tensor("float32", 100),
                       tensor("float32", 100)])  # fmt: skip
    check(program, program.add("nn.layer_norm", [0, 1, 2], scale=scale, center=center))


def test_float32_layer_norm_along_an_inner_axis() -> None:
    # Moved last, normalized as rows (shared between the threads for the bigger shape).
    for shape in [(3, 4, 6), (2, 100, 48)]:
        program = Program([tensor("float32", *shape), tensor("float32", shape[1]),
                           tensor("float32", shape[1])])  # fmt: skip
        check(program, program.add("nn.layer_norm", [0, 1, 2], axis=1))


def test_layer_norm_along_an_inner_axis_in_float64_without_center() -> None:
    for shape in [(3, 4, 6), (2, 5, 1)]:
        program = Program([tensor("float64", *shape), tensor("float64", shape[1]),
                           tensor("float64", shape[1])])  # fmt: skip
        check(program, program.add("nn.layer_norm", [0, 1, 2], axis=1, center=False))


@pytest.mark.parametrize(("dtype", "groups"), [("float32", 3), ("float64", 1)])
def test_group_norm_over_groups_of_channels(dtype: str, groups: int) -> None:
    for shape in [(2, 6, 3, 4), (1, 6, 5)]:
        program = Program([tensor(dtype, *shape), tensor(dtype, 6), tensor(dtype, 6)])
        check(program, program.add("nn.group_norm", [0, 1, 2], num_groups=groups))


def test_norms_raise_on_vectors_and_groups_that_disagree_with_the_data() -> None:
    program, results = batch_norm("float32", (2, 3, 4, 5), 3)
    desc = program.description(results)
    inputs = [tensor("float32", 2, 3, 4, 5)] + [tensor("float32", 3)] * 3 + [tensor("float32", 4)]
    outputs = [np.zeros((2, 3, 4, 5), "float32"), np.zeros(3, "float32"), np.zeros(3, "float32")]
    with pytest.raises(ValueError, match=r"nn\.batch_norm\): length of moving_var"):
        run(desc, inputs, outputs)
    program = Program([tensor("float32", 2, 6, 3, 4), tensor("float32", 6), tensor("float32", 6)])
    desc = program.description(program.add("nn.group_norm", [0, 1, 2], num_groups=3))
    inputs = [tensor("float32", 2, 5, 3, 4), tensor("float32", 5), tensor("float32", 5)]
    with pytest.raises(ValueError, match="not divisible by num_groups=3"):
        run(desc, inputs, [np.zeros((2, 5, 3, 4), "float32")])
