"""``build_kernels``: an executable's kernels built ahead of use, reported through a callback.

Returns: each distinct kernel is built once and reported once, with the total, after a
``(0, total)`` call; the kernels are the in-process table's, so a machine made afterwards
builds nothing. Invalid: a bad description fails before any kernel is built or reported.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.vm.kernels.harness import Program
from vm.kernels import KernelDescriptionError, load_kernel
from vm.prebuild import build_kernels


def binary(op: str) -> dict:
    a = np.ones((2, 3), "float32")
    program = Program([a, a])
    return program.description(program.add(op, [0, 1]))


def test_each_distinct_kernel_is_reported_once_with_the_total() -> None:
    calls: list[tuple[int, int]] = []
    kernels = build_kernels(
        [binary("add"), binary("multiply"), binary("add")],
        lambda done, total: calls.append((done, total)),
    )
    assert calls == [(0, 2), (1, 2), (2, 2)]
    assert [k.key for k in kernels] == [
        load_kernel(binary("add")).key,
        load_kernel(binary("multiply")).key,
    ]
    assert kernels[0] is load_kernel(binary("add"))


def test_no_descriptions_report_a_total_of_zero() -> None:
    calls: list[tuple[int, int]] = []
    assert build_kernels([], lambda done, total: calls.append((done, total))) == []
    assert calls == [(0, 0)]


def test_without_a_callback_the_kernels_are_still_built() -> None:
    (kernel,) = build_kernels([binary("subtract")])
    assert kernel is load_kernel(binary("subtract"))


def test_an_invalid_description_fails_before_anything_is_reported() -> None:
    calls: list[tuple[int, int]] = []
    with pytest.raises(KernelDescriptionError):
        build_kernels([binary("add"), {"nodes": "nope"}], lambda *a: calls.append(a))
    assert calls == []
