"""Parameters for a Relay function's free inputs, as TVM's ``relay.testing.init`` makes them.

Compiler layer (``compiler.relay``). :func:`create_workload` type-checks a network and gives
every parameter except ``data`` a value chosen by its name's last part, as TVM's testing
networks name them: ``*_weight`` from :class:`Xavier`, ``*_bias``, ``*_beta`` and
``*_moving_mean`` zeros, ``*_gamma`` and ``*_moving_var`` ones.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from compiler.ir.expr import Function
from compiler.ir.module import IRModule
from compiler.ir.types import TensorType
from compiler.typing import infer_types

__all__ = ["Xavier", "create_workload"]

Initializer = Callable[[str, tuple[int, ...], str, np.random.Generator], np.ndarray]


class Xavier:
    """Glorot's uniform initializer: weights in ``[-s, s]`` with ``s = sqrt(magnitude /
    ((fan_in + fan_out) / 2))`` (TVM's ``Xavier()`` defaults).

    Parameters
    ----------
    magnitude : float
        The scale's numerator.
    """

    def __init__(self, magnitude: float = 3.0) -> None:
        self.magnitude = float(magnitude)

    def __call__(
        self, name: str, shape: tuple[int, ...], dtype: str, rng: np.random.Generator
    ) -> np.ndarray:
        """A value for the parameter ``name`` of ``shape`` and ``dtype``.

        Raises
        ------
        ValueError
            If the name's last part is none of the kinds the module docstring lists.
        """
        if name.endswith(("_moving_mean", "_bias", "_beta")):
            return np.zeros(shape, dtype)
        if name.endswith(("_moving_var", "_gamma")):
            return np.ones(shape, dtype)
        if not name.endswith("_weight"):
            raise ValueError(
                f"cannot initialize parameter {name!r}: its name must end in _weight, _bias, "
                "_gamma, _beta, _moving_mean or _moving_var"
            )
        receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1
        fan_in = (shape[1] if len(shape) > 1 else shape[0]) * receptive
        fan_out = shape[0] * receptive
        scale = np.sqrt(self.magnitude / max((fan_in + fan_out) / 2.0, 1.0))
        return rng.uniform(-scale, scale, shape).astype(dtype)


def create_workload(
    net: Function | IRModule, initializer: Initializer | None = None, seed: int = 0
) -> tuple[IRModule, dict[str, np.ndarray]]:
    """A type-checked module of ``net`` and a value for each of its parameters but ``data``.

    Parameters
    ----------
    net : Function or IRModule
        The network: a function, or a module whose ``main`` is the network.
    initializer : callable, optional
        ``initializer(name, shape, dtype, rng)`` returns a parameter's value; :class:`Xavier`
        when None.
    seed : int
        Seeds the generator handed to ``initializer``: the same seed gives the same weights.

    Returns
    -------
    (IRModule, dict of str to numpy.ndarray)
        The module and its parameters by name, for ``relay.build`` or ``relay.vm.compile``.
    """
    mod = net if isinstance(net, IRModule) else IRModule.from_expr(net)
    mod = infer_types(mod)
    init = initializer if initializer is not None else Xavier()
    rng = np.random.default_rng(seed)
    params: dict[str, np.ndarray] = {}
    for param in mod["main"].params:
        if param.name_hint == "data":
            continue
        ty = param.checked_type
        if not isinstance(ty, TensorType) or not all(isinstance(d, int) for d in ty.shape):
            raise ValueError(
                f"cannot initialize parameter {param.name_hint!r} of type {ty}: "
                "a parameter needs a tensor type of static shape"
            )
        shape = tuple(int(d) for d in ty.shape)
        params[param.name_hint] = init(param.name_hint, shape, ty.dtype, rng)
    return mod, params
