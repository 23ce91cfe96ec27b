"""The jobs of the float32 convolutions (vm.kernels.runtime.conv_jobs): how a group's weight is
packed into panels."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.op.defs_packed import pack
from vm.kernels.runtime import conv_jobs

RNG = np.random.default_rng(11)


# ---- returns ----------------------------------------------------------------------------------


@pytest.mark.parametrize("og", [8, 32, 40, 64, 96])
@pytest.mark.parametrize("k", [9, 36, 576])
def test_a_groups_weight_is_packed_into_the_panels_of_its_plain_matrix(og: int, k: int) -> None:
    # Whole panels go through the register-tile transposes, a short last one by rows.
    w3 = RNG.standard_normal((3, og, k)).astype("float32")
    weight = np.full((-(-og // 32), k, 32), np.nan, "float32")
    for g in range(3):
        weight[...] = 0  # as the caller gives it: zero past the group's channels
        conv_jobs._pack_group(w3, g, weight)
        np.testing.assert_array_equal(weight, pack(w3[g], 32))


def test_a_weight_that_is_not_contiguous_is_packed_by_rows() -> None:
    whole = RNG.standard_normal((2, 64, 20)).astype("float32")
    w3 = whole[:, :, ::2]  # every other column: no block of 32 rows to transpose
    weight = np.zeros((2, 10, 32), "float32")
    conv_jobs._pack_group(w3, 1, weight)
    np.testing.assert_array_equal(weight, pack(np.ascontiguousarray(w3[1]), 32))
