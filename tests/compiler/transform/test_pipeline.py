"""The passes together: an inference pipeline over a small network, and deep programs."""

from __future__ import annotations

import numpy as np

from compiler import relay
from tests.compiler.transform.util import assert_results_match, calls, op_names

T = relay.transform
RNG = np.random.default_rng(11)


def _conv_bn_relu() -> tuple[relay.IRModule, dict[str, np.ndarray]]:
    x = relay.var("x", shape=(1, 2, 5, 5))
    w = relay.var("w", shape=(4, 2, 3, 3))
    stats = [relay.var(n, shape=(4,)) for n in ("gamma", "beta", "mean", "var")]
    y = relay.nn.conv2d(x, w, padding=(1, 1), channels=4, kernel_size=(3, 3))
    y = relay.nn.batch_norm(y, *stats)[0]
    y = relay.nn.dropout(relay.nn.relu(y), rate=0.2)
    func = relay.Function([x, w, *stats], y)
    params = {
        "w": RNG.standard_normal((4, 2, 3, 3)).astype("float32"),
        "gamma": RNG.standard_normal(4).astype("float32"),
        "beta": RNG.standard_normal(4).astype("float32"),
        "mean": RNG.standard_normal(4).astype("float32"),
        "var": (RNG.random(4) + 0.5).astype("float32"),
    }
    bound = relay.bind_params_by_name(func, params)
    return relay.IRModule.from_expr(bound), params


def test_inference_pipeline_folds_batch_norm_into_two_constant_vectors():
    before, _ = _conv_bn_relu()
    seq = T.Sequential(
        [
            T.SimplifyInference(),
            T.FoldConstant(),
            T.EliminateCommonSubexpr(),
            T.DeadCodeElimination(),
        ]
    )
    with T.PassContext(opt_level=3):
        after = seq(before)
    assert op_names(after) == {"nn.conv2d", "multiply", "add", "nn.relu"}
    # What is left per element: one multiply by the folded scale, one add of the shift.
    assert len(calls(after["main"], "multiply")) == 1 and len(calls(after["main"], "add")) == 1
    x = RNG.standard_normal((1, 2, 5, 5)).astype("float32")
    assert_results_match(before, after, [x], rtol=1e-4)


def test_every_pass_handles_a_10000_deep_call_nest():
    x = relay.var("x", shape=(), dtype="int32")
    expr: relay.Expr = x
    for _ in range(10_000):
        expr = relay.add(expr, relay.add(relay.const(1), relay.const(0)))
    before = relay.IRModule.from_expr(relay.Function([x], expr))
    seq = T.Sequential(
        [
            T.SimplifyInference(),
            T.FoldConstant(),
            T.EliminateCommonSubexpr(),
            T.DeadCodeElimination(inline_once=True),
            T.RemoveUnusedFunctions(),
        ]
    )
    with T.PassContext(opt_level=3):
        after = seq(before)
    assert len(calls(after["main"], "add")) == 10_000
    assert_results_match(before, after, [np.array(2, "int32")])
