"""TVM's ``tvm.nd`` namespace for the VM's tensors: ``array``, ``empty`` and ``NDArray``.

Runtime layer (``vm``); imports numpy and :mod:`vm.ndarray`.

``device`` arguments are accepted for TVM compatibility and checked: only the CPU exists.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vm.device import check_devices
from vm.ndarray import NDArray

__all__ = ["NDArray", "array", "empty"]


def array(data: Any, device: Any = None, dtype: Any = None) -> NDArray:
    """A new :class:`NDArray` holding a copy of ``data`` (``tvm.nd.array``).

    Parameters
    ----------
    data : array-like
        A numpy array, an NDArray, or anything ``numpy.array`` takes.
    device : vm.Device, optional
        Only ``vm.cpu()`` (or None).
    dtype : str or numpy dtype, optional
        The dtype; by default ``data``'s.
    """
    check_devices(device, "nd.array")
    if isinstance(data, np.ndarray):
        data = data.view(np.ndarray)
    return np.array(data, dtype=dtype, copy=True, order="C").view(NDArray)


def empty(shape: Any, dtype: Any = "float32", device: Any = None) -> NDArray:
    """A new uninitialised :class:`NDArray` of ``shape`` and ``dtype`` (``tvm.nd.empty``).

    Raises
    ------
    TypeError, ValueError
        If ``shape`` is not a sequence of non-negative ints or ``dtype`` is not a dtype.
    """
    check_devices(device, "nd.empty")
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    dims = tuple(shape)
    if any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0 for d in dims):
        raise ValueError(f"nd.empty: shape must be non-negative ints, got {shape!r}")
    return np.empty(dims, dtype=np.dtype(dtype)).view(NDArray)
