"""CanonicalizeOps: ``nn.bias_add`` becomes ``add`` of the bias expanded to the axes it
broadcasts along (none for the last axis), with the same results; bias adds inside fused
primitives stay; TVM's spelling through ``compiler.tvm``."""

from __future__ import annotations

import numpy as np
import pytest

from compiler import relay
from tests.compiler.transform.util import assert_results_match, assert_same, calls

RNG = np.random.default_rng(7)


def array(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


# ---- returns -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "axis", "newaxes"),
    [((2, 3, 4, 5), 1, 2), ((2, 3, 4, 5), -3, 2), ((2, 6), -1, 0), ((2, 3, 4), 2, 0)],
)
def test_a_bias_add_becomes_an_add_of_the_expanded_bias(shape, axis, newaxes) -> None:
    x = relay.var("x", shape=shape)
    bias = relay.const(array(shape[axis]))
    before = relay.IRModule.from_expr(relay.Function([x], relay.nn.bias_add(x, bias, axis=axis)))
    after = relay.transform.CanonicalizeOps()(before)
    y = relay.var("x", shape=shape)
    expanded = relay.expand_dims(bias, axis=1, num_newaxis=newaxes) if newaxes else bias
    assert_same(after, relay.IRModule.from_expr(relay.Function([y], relay.add(y, expanded))))
    assert_results_match(before, after, [array(*shape)])


def test_bias_adds_inside_primitive_functions_stay() -> None:
    x = relay.var("x", shape=(1, 4, 3, 3))
    w = relay.const(array(4, 4, 1, 1))
    body = relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(x, w), relay.const(array(4))))
    fused = relay.transform.FuseOps()(
        relay.transform.InferType()(relay.IRModule.from_expr(relay.Function([x], body)))
    )
    after = relay.transform.CanonicalizeOps()(fused)
    assert len(calls(after["main"], "nn.bias_add")) == 1
    assert_results_match(fused, after, [array(1, 4, 3, 3)])


def test_tvms_spelling_runs_in_a_sequential() -> None:
    from compiler.tvm import relay as tvm_relay

    x = relay.var("x", shape=(1, 8, 5, 5))
    conv = relay.nn.conv2d(x, relay.const(array(8, 8, 3, 3)))
    body = relay.nn.bias_add(conv, relay.const(array(8)))
    mod = relay.IRModule.from_expr(relay.Function([x], body))
    seq = tvm_relay.transform.Sequential(
        [tvm_relay.transform.SimplifyInference(), tvm_relay.transform.CanonicalizeOps()]
    )
    with tvm_relay.transform.PassContext(opt_level=3):
        after = seq(mod)
    assert not calls(after["main"], "nn.bias_add")
    assert len(calls(after["main"], "expand_dims")) == 1
    assert_results_match(mod, after, [array(1, 8, 5, 5)])
