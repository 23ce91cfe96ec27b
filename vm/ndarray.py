"""The tensor type the VM hands back: a numpy array that also answers TVM's NDArray methods.

Runtime layer (``vm``); imports numpy and ``vm.objects``.

Results stay numpy arrays, so numpy code keeps working on them unchanged; a TVM script's
``result.numpy()`` and ``result.asnumpy()`` work too. :class:`NDArray` is a view type: a
result becomes one without copying its data. :mod:`vm.nd` offers TVM's ``tvm.nd.array``
and ``tvm.nd.empty`` spellings, which make arrays of this type.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class NDArray(np.ndarray):
    """A numpy array with TVM's ``numpy()``, ``asnumpy()`` and ``copyfrom``/``copyto``.

    Everything numpy offers works as on any array.
    """

    __slots__ = ()

    def numpy(self) -> np.ndarray:
        """A copy of the data as a plain numpy array (as TVM's ``NDArray.numpy``)."""
        return np.array(self.view(np.ndarray), copy=True)

    def asnumpy(self) -> np.ndarray:
        """Same as :meth:`numpy` (TVM's older spelling)."""
        return self.numpy()

    def copyfrom(self, source: Any) -> NDArray:
        """Copy ``source`` (an array of this shape) into this array; returns ``self``.

        Raises
        ------
        ValueError
            If ``source``'s shape differs (no broadcasting, as in TVM).
        """
        source = np.asarray(source)
        if source.shape != self.shape:
            raise ValueError(
                f"copyfrom: the source has shape {source.shape}, this array {self.shape}"
            )
        np.copyto(self, source, casting="same_kind")
        return self

    def copyto(self, target: Any) -> Any:
        """Copy this array into ``target`` (an array of the same shape); returns ``target``."""
        if not isinstance(target, np.ndarray):
            raise TypeError(
                f"copyto: the target must be a numpy array, got {type(target).__name__}"
            )
        if target.shape != self.shape:
            raise ValueError(
                f"copyto: the target has shape {target.shape}, this array {self.shape}"
            )
        np.copyto(target, self.view(np.ndarray), casting="same_kind")
        return target


#: The exact types a tensor inside the VM has: what the VM allocates (NDArray) and what
#: callers and constants bring (plain arrays). Other subclasses are viewed as plain arrays
#: on the way in, so no subclass's overrides run inside the VM.
TENSOR_TYPES = (np.ndarray, NDArray)


def caller_owned(array: np.ndarray) -> NDArray:
    """``array`` as a tensor handed back to a caller: writable (a read-only array, a
    constant or a read-only input, is copied) and an :class:`NDArray` (a plain array is
    viewed as one, without a copy)."""
    if not array.flags.writeable:
        array = array.copy()
    return array if type(array) is NDArray else array.view(NDArray)


def immutable(array: np.ndarray) -> bool:
    """Whether nothing can write through ``array``: it is read-only, like every array down
    to the one owning its memory."""
    owner = array
    while not owner.flags.writeable and isinstance(owner.base, np.ndarray):
        owner = owner.base
    return not owner.flags.writeable and owner.base is None


def frozen(array: np.ndarray) -> np.ndarray:
    """``array`` as a plain read-only array nothing else writes through.

    The array itself when it already is one: read-only, like every array down to the one
    owning its memory (a constant's data, a folded result its pass froze); otherwise a
    read-only copy. A compile passes weights through several stages that each hold them
    read-only (folded constants, the executable's constants), which copied every weight
    again.
    A view of a buffer that is not an array (the bytes of a whole model file) is copied,
    so that a constant does not keep the whole buffer alive.
    """
    if type(array) is np.ndarray and immutable(array):
        return array
    copy = np.array(array, copy=True, subok=False)
    copy.flags.writeable = False
    return copy
