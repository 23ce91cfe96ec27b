"""Kernels raise clear Python errors, never crash, on run-time failures.

Traps group: integer division by zero (ZeroDivisionError naming the operator), zero to a
negative integer power, operands that do not broadcast and outputs of the wrong shape
(ValueError naming the node or output), and hand calls with the wrong arrays (TypeError
or ValueError from the checked call).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.vm.kernels.harness import Program, run
from vm.kernels import load_kernel


def binary(op: str, dtype: str) -> dict:
    a = np.array([[4, 5, 6]], dtype=dtype)
    program = Program([a, a])
    return program.description(program.add(op, [0, 1]))


@pytest.mark.parametrize(
    ("op", "dtype"),
    [
        ("divide", "int32"),
        ("floor_divide", "int32"),
        ("mod", "int32"),
        ("floor_mod", "int32"),
        ("divide", "uint8"),
        ("floor_mod", "uint8"),
    ],
)
def test_integer_division_by_zero_raises(op: str, dtype: str) -> None:
    a = np.array([[4, 5, 6]], dtype=dtype)
    b = np.array([[1, 0, 2]], dtype=dtype)
    with pytest.raises(ZeroDivisionError, match=f"^{op}: integer division by zero"):
        run(binary(op, dtype), [a, b], [np.zeros((1, 3), dtype)])


def test_zero_to_a_negative_integer_power_raises() -> None:
    a = np.array([[2, 0, 3]], dtype="int32")
    b = np.array([[1, -1, 2]], dtype="int32")
    with pytest.raises(ZeroDivisionError, match="zero raised to a negative power"):
        run(binary("power", "int32"), [a, b], [np.zeros((1, 3), "int32")])


def test_float_division_by_zero_gives_infinities_not_errors() -> None:
    a = np.array([[1.0, -1.0, 0.0]], dtype="float32")
    b = np.zeros((1, 3), dtype="float32")
    (out,) = run(binary("divide", "float32"), [a, b], [np.zeros((1, 3), "float32")])
    assert out[0, 0] == np.inf and out[0, 1] == -np.inf and np.isnan(out[0, 2])


def test_operands_that_do_not_broadcast_raise() -> None:
    a = np.ones((2, 3), "float32")
    with pytest.raises(ValueError, match=r"node 0 \(add\): operands: dimensions 3 and 4"):
        run(
            binary("add", "float32"), [a, np.ones((2, 4), "float32")], [np.zeros((2, 3), "float32")]
        )


def test_an_output_of_the_wrong_shape_raises_before_writing() -> None:
    a = np.ones((2, 3), "float32")
    out = np.full((2, 4), 7.0, "float32")
    with pytest.raises(ValueError, match="output 0: size of dimension 1: expected 3, found 4"):
        run(binary("add", "float32"), [a, a], [out])
    assert (out == 7.0).all()


def test_checked_call_rejects_wrong_arrays() -> None:
    kernel = load_kernel(binary("add", "float32"))
    a = np.ones((2, 3), "float32")
    out = np.zeros((2, 3), "float32")
    with pytest.raises(TypeError, match="takes 2 input"):
        kernel(a, out)
    with pytest.raises(TypeError, match="input 1 must be a float32 array of rank 2"):
        kernel(a, a.astype("float64"), out)
    with pytest.raises(TypeError, match="input 0 must be a numpy array"):
        kernel([[1.0]], a, out)
    with pytest.raises(ValueError, match="input 0 must be C-contiguous"):
        kernel(np.ones((3, 2), "float32").T, a, out)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="output 0 must be writeable"):
        kernel(a, a, out)


def test_read_only_inputs_are_accepted() -> None:
    kernel = load_kernel(binary("add", "float32"))
    a = np.ones((2, 3), "float32")
    a.flags.writeable = False
    out = np.zeros((2, 3), "float32")
    kernel.entry(a, a, out)
    assert (out == 2).all()
