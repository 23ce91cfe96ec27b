"""The ``relay.nn`` namespace: builders for the neural-network operators.

Compiler layer (``compiler.op``). ``relay.nn.dense(data, weight)`` and friends return
``Call(get_op("nn.dense"), args, attrs)`` with attributes normalized, like the builders in
:mod:`compiler.op.api`; signatures and argument order follow TVM's ``tvm.relay.nn``.
"""

from __future__ import annotations

from compiler.ir.expr import Call
from compiler.op.api import call_op

__all__ = [
    "batch_flatten", "batch_matmul", "bias_add", "dense", "log_softmax", "relu", "softmax",
]  # fmt: skip


def dense(data: object, weight: object, units: int | None = None, out_dtype: str = "") -> Call:
    """``data @ weight.T`` with ``weight`` of shape ``(units, in_features)``.

    ``out_dtype=""`` keeps the input dtype; otherwise the product accumulates in ``out_dtype``.
    """
    return call_op("nn.dense", [data, weight], units=units, out_dtype=out_dtype)


def bias_add(data: object, bias: object, axis: int = 1) -> Call:
    """Add the 1-D ``bias`` along ``axis`` of ``data``."""
    return call_op("nn.bias_add", [data, bias], axis=axis)


def relu(data: object) -> Call:
    """``max(data, 0)``."""
    return call_op("nn.relu", [data])


def softmax(data: object, axis: int = -1) -> Call:
    """Softmax along ``axis`` (floating point)."""
    return call_op("nn.softmax", [data], axis=axis)


def log_softmax(data: object, axis: int = -1) -> Call:
    """Log of the softmax along ``axis`` (floating point)."""
    return call_op("nn.log_softmax", [data], axis=axis)


def batch_flatten(data: object) -> Call:
    """Flatten every axis but the first: ``(N, d1, d2, ...) -> (N, d1 * d2 * ...)``."""
    return call_op("nn.batch_flatten", [data])


def batch_matmul(
    tensor_a: object,
    tensor_b: object,
    out_dtype: str = "",
    transpose_a: bool = False,
    transpose_b: bool = True,
) -> Call:
    """Batched matrix product of 3-D tensors; by default ``tensor_b`` is ``(batch, N, K)``."""
    return call_op(
        "nn.batch_matmul",
        [tensor_a, tensor_b],
        out_dtype=out_dtype,
        transpose_a=transpose_a,
        transpose_b=transpose_b,
    )
