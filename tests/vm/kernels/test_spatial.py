"""nn.pad, nn.upsampling, nn.leaky_relu, nn.prelu and nn.dropout kernels match the compiler's
references.

Returns group: constant padding with a pad value of another dtype (converted like numpy's
astype), edge and reflect padding, float16 padded as raw bits; nearest-neighbour and
bilinear upsampling with and without align_corners, with scales that round half to even;
leaky_relu, prelu along an axis and dropout (identity and a mask of ones) together in one
kernel per dtype. Traps group: reflect padding as wide as the axis, prelu's alpha of the
wrong length and a scale that leaves no rows.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.vm.kernels.harness import Program, check, run

RNG = np.random.default_rng(61)


def tensor(dtype: str, *shape: int) -> np.ndarray:
    if np.dtype(dtype).kind == "f":
        return RNG.standard_normal(shape).astype(dtype)
    return RNG.integers(-100, 100, shape).astype(dtype)


PADS = ((0, 0), (1, 2), (2, 1))


@pytest.mark.parametrize(
    ("dtype", "value", "mode"),
    [
        ("float32", np.array(2.5, "float64"), "constant"),
        ("int32", np.array(-7.9, "float32"), "constant"),
        ("int32", np.array(3, "int32"), "edge"),
        ("float16", np.array(1, "float16"), "reflect"),
    ],
)
def test_pad_modes(dtype: str, value: np.ndarray, mode: str) -> None:
    for shape in [(2, 3, 4), (1, 4, 3)]:
        program = Program([tensor(dtype, *shape), value])
        check(program, program.add("nn.pad", [0, 1], pad_width=PADS, pad_mode=mode))


def test_upsampling_nearest_and_bilinear_from_one_input() -> None:
    for shape in [(1, 2, 3, 5), (2, 1, 6, 4)]:
        program = Program([tensor("float32", *shape)])
        results = [
            program.add("nn.upsampling", [0], scale_h=2.0, scale_w=1.5)[0],
            program.add("nn.upsampling", [0], scale_h=2.0, scale_w=1.7, method="bilinear")[0],
        ]
        check(program, results, ["nearest", "bilinear"])


@pytest.mark.parametrize(
    ("dtype", "method", "scales"),
    [("int8", "nearest_neighbor", (2.5, 0.5)), ("float64", "bilinear", (0.5, 3.0))],
)
def test_upsampling_with_align_corners(dtype: str, method: str, scales: tuple) -> None:
    for shape in [(1, 2, 3, 5), (2, 1, 6, 4)]:
        program = Program([tensor(dtype, *shape)])
        results = program.add(
            "nn.upsampling", [0], scale_h=scales[0], scale_w=scales[1], method=method,
            align_corners=True,
        )  # fmt: skip
        check(program, results)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_leaky_relu_prelu_and_dropout(dtype: str) -> None:
    for shape in [(2, 3, 4), (1, 3, 1)]:
        data = tensor(dtype, *shape)
        data[0, 0, 0] = np.nan
        program = Program([data, tensor(dtype, 3)])
        results = [
            program.add("nn.leaky_relu", [0], alpha=0.2)[0],
            program.add("nn.prelu", [0, 1])[0],
            *program.add("nn.dropout", [0], rate=0.3),
        ]
        check(program, results, ["leaky_relu", "prelu", "dropout", "dropout mask"])


def test_spatial_operators_raise_on_impossible_sizes() -> None:
    program = Program([tensor("float16", 2, 3, 4), np.array(1, "float16")])
    desc = program.description(program.add("nn.pad", [0, 1], pad_width=PADS, pad_mode="reflect"))
    with pytest.raises(ValueError, match=r"nn\.pad\): pad_mode='reflect' needs pad widths"):
        run(desc, [tensor("float16", 2, 2, 4), np.array(1, "float16")],
            [np.zeros((2, 5, 7), "float16")])  # fmt: skip
    program = Program([tensor("float32", 2, 3, 4), tensor("float32", 3)])
    desc = program.description(program.add("nn.prelu", [0, 1]))
    with pytest.raises(ValueError, match=r"length of alpha \(axis 1 of data\): expected 3"):
        run(desc, [tensor("float32", 2, 3, 4), tensor("float32", 4)],
            [np.zeros((2, 3, 4), "float32")])  # fmt: skip
    program = Program([tensor("float64", 1, 2, 3, 5)])
    attrs = {"scale_h": 0.5, "scale_w": 3.0, "method": "bilinear", "align_corners": True}
    desc = program.description(program.add("nn.upsampling", [0], **attrs))
    with pytest.raises(ValueError, match=r"scale_h=0\.5 leaves the output with no rows"):
        run(desc, [tensor("float64", 1, 2, 1, 5)], [np.zeros((1, 2, 0, 15), "float64")])
