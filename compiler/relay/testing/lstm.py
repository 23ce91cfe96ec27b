"""An unrolled LSTM as TVM's ``relay.testing.lstm`` builds it: one cell function per step.

Compiler layer (``compiler.relay``). Each step calls a cell function (a local Relay
function) on its own input and the state ``(h, c)`` the step before left, zeros at the
start. The cell computes ``gates = i2h(x) + h2h(h)`` by two dense layers with bias, splits
them in four: input, forget and output gates (sigmoid) and the candidate (tanh); then
``c' = forget * c + input * candidate`` and ``h' = output * tanh(c')``. The network returns
the last step's ``h'``. As in TVM, everything is let-bound, every step's input is a
parameter named ``data`` (pass them in order), and the weights of step ``i`` are
``i2h_<i>_weight``, ``i2h_<i>_bias``, ``h2h_<i>_weight`` and ``h2h_<i>_bias``, the weights
``(4 * num_hidden, num_hidden)`` in the order of the gates above.
"""

from __future__ import annotations

import numpy as np

from compiler.ir.expr import Call, Expr, Function, Let, Tuple, TupleGetItem, Var, var
from compiler.ir.module import IRModule
from compiler.ir.types import TensorType, TupleType, Type
from compiler.ir.visitor import free_vars
from compiler.op import api, nn
from compiler.relay.testing.init import create_workload
from compiler.relay.testing.layers import param

__all__ = ["get_net", "get_workload", "lstm_cell"]


class _Lets:
    """Bindings in order, closed over a body at the end: a let chain built by a loop, since
    a step's bindings are nested inside the bindings before it."""

    def __init__(self) -> None:
        self.bindings: list[tuple[Var, Expr]] = []

    def bind(self, name: str, ty: Type, value: Expr) -> Var:
        bound = Var(name, ty)
        self.bindings.append((bound, value))
        return bound

    def around(self, body: Expr) -> Expr:
        for bound, value in reversed(self.bindings):
            body = Let(bound, value, body)
        return body


def lstm_cell(
    num_hidden: int, batch_size: int = 1, dtype: str = "float32", name: str = ""
) -> Function:
    """One LSTM step as a Relay function.

    Parameters
    ----------
    num_hidden : int
        The size of the input and of each state.
    batch_size : int
        Rows of the input and of each state.
    dtype : str
        The tensors' dtype.
    name : str
        Prefixes the names the cell binds (``<name>i2h``, ``<name>gates``...).

    Returns
    -------
    Function
        ``fn(inputs, (h, c), i2h_weight, i2h_bias, h2h_weight, h2h_bias)``, returning
        ``(h', (h', c'))``.
    """
    hidden = TensorType((batch_size, num_hidden), dtype)
    state = TupleType([hidden, hidden])
    gates_type = TensorType((batch_size, 4 * num_hidden), dtype)
    ret_type = TupleType([hidden, state])
    inputs = Var("inputs", hidden)
    states = Var("states", state)
    weights = [
        param(f"{layer}_{kind}", shape, dtype)
        for layer in ("i2h", "h2h")
        for kind, shape in (("weight", (4 * num_hidden, num_hidden)), ("bias", (4 * num_hidden,)))
    ]
    i2h_weight, i2h_bias, h2h_weight, h2h_bias = weights
    lets = _Lets()

    def dense(data: Expr, weight: Var, bias: Var) -> Expr:
        return nn.bias_add(nn.dense(data, weight, units=4 * num_hidden), bias, axis=-1)

    i2h = lets.bind(f"{name}i2h", gates_type, dense(inputs, i2h_weight, i2h_bias))
    h2h = lets.bind(f"{name}h2h", gates_type, dense(TupleGetItem(states, 0), h2h_weight, h2h_bias))
    gates = lets.bind(f"{name}gates", gates_type, api.add(i2h, h2h))
    parts = lets.bind(f"{name}slice_gates", TupleType([hidden] * 4), api.split(gates, 4, axis=1))
    squashes = {
        "in_gate": api.sigmoid, "forget_gate": api.sigmoid, "in_transform": api.tanh,
        "out_gate": api.sigmoid,
    }  # fmt: skip
    in_gate, forget_gate, in_transform, out_gate = (
        lets.bind(f"{name}{gate}", hidden, squash(TupleGetItem(parts, index)))
        for index, (gate, squash) in enumerate(squashes.items())
    )
    next_c = lets.bind(
        f"{name}next_c",
        hidden,
        api.add(
            api.multiply(forget_gate, TupleGetItem(states, 1)),
            api.multiply(in_gate, in_transform),
        ),
    )
    next_h = lets.bind(f"{name}next_h", hidden, api.multiply(out_gate, api.tanh(next_c)))
    ret = lets.bind(f"{name}ret", ret_type, Tuple([next_h, Tuple([next_h, next_c])]))
    return Function([inputs, states, *weights], lets.around(ret), ret_type)


def get_net(
    iterations: int, num_hidden: int, batch_size: int = 1, dtype: str = "float32"
) -> Function:
    """The unrolled network as a Relay function of the steps' inputs and weights.

    Parameters
    ----------
    iterations : int
        Steps, at least one.
    num_hidden : int
        The size of each step's input and of the state, at least one.
    batch_size : int
        Rows of each input.
    dtype : str
        The tensors' dtype.

    Raises
    ------
    ValueError
        For fewer than one step or hidden unit.
    """
    if iterations < 1 or num_hidden < 1:
        raise ValueError(
            f"iterations {iterations} and num_hidden {num_hidden}: an LSTM needs iterations "
            "and num_hidden of at least 1"
        )
    hidden = TensorType((batch_size, num_hidden), dtype)
    state = TupleType([hidden, hidden])
    lets = _Lets()
    zeros = lets.bind("zeros", hidden, api.zeros((batch_size, num_hidden), dtype))
    states = lets.bind("init_states", state, Tuple([zeros, zeros]))
    out = zeros
    for step in range(iterations):
        inputs = var("data", shape=(batch_size, num_hidden), dtype=dtype)
        weights = [
            param(f"{layer}_{step}_{kind}", shape, dtype)
            for layer in ("i2h", "h2h")
            for kind, shape in (
                ("weight", (4 * num_hidden, num_hidden)),
                ("bias", (4 * num_hidden,)),
            )
        ]
        cell = lstm_cell(num_hidden, batch_size, dtype, f"lstm_{step}")
        call = lets.bind(
            f"call_{step}", TupleType([hidden, state]), Call(cell, [inputs, states, *weights])
        )
        out = lets.bind(f"out_{step}", hidden, TupleGetItem(call, 0))
        states = lets.bind(f"states_{step}", state, TupleGetItem(call, 1))
    body = lets.around(out)
    return Function(free_vars(body), body, hidden)


def get_workload(
    iterations: int, num_hidden: int, batch_size: int = 1, dtype: str = "float32"
) -> tuple[IRModule, dict[str, np.ndarray]]:
    """The network's module and its weights (see :func:`get_net` and
    :func:`compiler.relay.testing.create_workload`)."""
    return create_workload(get_net(iterations, num_hidden, batch_size, dtype))
