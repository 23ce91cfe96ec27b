"""BLAS calls for generated kernels: numpy's ``matmul`` reached from compiled code.

Runtime layer (``vm.kernels``); imports numpy and numba.

numba's own ``np.dot`` needs scipy for its BLAS bindings, which the runtime does not
depend on, so these functions leave compiled code through an object-mode block and let
numpy call BLAS (about 2 us of overhead, which the kernels only pay for products big
enough to repay it). Each is an ordinary jitted function rather than inline code because
numba cannot compile a function with more than one object-mode block, and a fused kernel
may hold several products. Generated modules import this module as ``blas``; its source
is part of the kernel cache key.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit


@njit
def dense_into(x, w, out):
    """``out[...] = x @ w.T`` for 2-D ``x`` (m, k), ``w`` (n, k) and ``out`` (m, n)."""
    with numba.objmode():
        # np.matmul: np.dot with out= and a transposed operand skips BLAS.
        np.matmul(x, w.T, out=out)


@njit
def matmul_into(x, y, out, transpose_x, transpose_y):
    """``out[...] = op(x) @ op(y)`` for 3-D stacks, ``op`` swapping the last two axes when
    asked; a batch of 1 broadcasts."""
    with numba.objmode():
        a = x.transpose((0, 2, 1)) if transpose_x else x
        b = y.transpose((0, 2, 1)) if transpose_y else y
        np.matmul(a, b, out=out)
