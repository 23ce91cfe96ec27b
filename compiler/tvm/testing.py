"""``tvm.testing`` over relayvm: the checks user scripts call, not TVM's test machinery.

Compiler layer (``compiler.tvm``). Scripts compare results with
``tvm.testing.assert_allclose(actual, desired, rtol=1e-7, atol=1e-7)`` and loop over
``tvm.testing.enabled_targets()``; both are here, with TVM's signatures. TVM's pytest
plumbing (``parametrize_targets``, ``requires_gpu``, fixtures) raises an ``AttributeError``
naming numpy.testing and pytest instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vm.device import cpu

__all__ = ["assert_allclose", "enabled_targets"]


def assert_allclose(actual: Any, desired: Any, rtol: float = 1e-7, atol: float = 1e-7) -> None:
    """Fail unless ``actual`` has ``desired``'s shape and ``|actual - desired| <= atol +
    rtol * |desired|`` everywhere (TVM's defaults: the arguments are not interchangeable).

    Parameters
    ----------
    actual, desired : array_like
        Results (``NDArray``s, numpy arrays, numbers, nested lists).
    rtol, atol : float
        Relative and absolute tolerance.

    Raises
    ------
    AssertionError
        If the shapes differ or a value is outside the tolerance (numpy's message).
    """
    got = np.asanyarray(actual)
    want = np.asanyarray(desired)
    np.testing.assert_equal(got.shape, want.shape, err_msg="the shapes differ")
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, verbose=True)


def enabled_targets() -> list[tuple[str, Any]]:
    """The targets a script can run on here, as TVM's ``(target, device)`` pairs: only
    ``("llvm", tvm.cpu(0))``, relayvm's host CPU."""
    return [("llvm", cpu(0))]


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(
        f"relayvm does not implement tvm.testing.{name}: relayvm ships assert_allclose and "
        "enabled_targets; for the rest use numpy.testing and pytest"
    )
