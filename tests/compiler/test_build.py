"""``relay.build`` and the graph executor: compile dataflow programs to a graph and run them.

Returns: results agree with the reference interpreter (tensors, nested tuples, helper
calls, reshapes, bound params); storage is reused by liveness; the graph is deterministic.
Invalid: control flow, dynamic shapes, tuple inputs, bad arguments are rejected naming
the construct.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import vm
from compiler import relay
from compiler.backend.graph_codegen import GraphCodegenError
from compiler.transform import PassContext
from vm.graph_executor import GraphModule

RNG = np.random.default_rng(3)

MLP = """
def @main(%x: Tensor[(2, 8), float32], %w1: Tensor[(16, 8), float32], %b1: Tensor[(16), float32],
          %w2: Tensor[(4, 16), float32]) {
  %0 = nn.relu(nn.bias_add(nn.dense(%x, %w1), %b1));
  nn.softmax(nn.dense(%0, %w2))
}
"""

HELPERS = """
def @act(%a: Tensor[(2, 3), float32]) { tanh(%a) * 2f }
def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(3, 2), float32]) {
  %0 = reshape(%x, newshape=[3, 2]);
  %1 = @act(%x);
  (%0 + %y, (%1, @act(%1)), %0)
}
"""


def weights():
    return {
        "w1": RNG.standard_normal((16, 8)).astype("float32"),
        "b1": RNG.standard_normal(16).astype("float32"),
        "w2": RNG.standard_normal((4, 16)).astype("float32"),
    }


def graph_module(factory):
    return GraphModule(factory["default"](vm.cpu()))


def nodes_calling(factory, func_name):
    return [
        n for n in json.loads(factory.get_graph_json())["nodes"]
        if n.get("attrs", {}).get("func_name") == func_name
    ]  # fmt: skip


# ---- returns --------------------------------------------------------------------------------


def test_mlp_with_bound_params_matches_the_reference_interpreter():
    mod = relay.fromtext(MLP)
    params = weights()
    x = RNG.standard_normal((2, 8)).astype("float32")
    factory = relay.build(mod, target="llvm", params=params)
    module = graph_module(factory)
    assert module.get_input_info() == ({"x": (2, 8)}, {"x": "float32"})
    module.set_input("x", x)
    module.run()
    expected = relay.create_executor("debug", mod).evaluate()(x, **params)
    np.testing.assert_allclose(module.get_output(0), expected, rtol=1e-5, atol=1e-6)
    assert set(factory.get_params()) == {n for n in module.module.input_names if n != "x"}


def test_unbound_weights_are_graph_inputs():
    mod = relay.fromtext(MLP)
    params = weights()
    x = RNG.standard_normal((2, 8)).astype("float32")
    module = graph_module(relay.build(mod))
    assert module.get_num_inputs() == 4
    module.run(x=x, **params)
    expected = relay.create_executor("debug", mod).evaluate()(x, **params)
    np.testing.assert_allclose(module.get_output(0), expected, rtol=1e-5, atol=1e-6)


def test_helper_calls_are_inlined_and_reshapes_are_views():
    mod = relay.fromtext(HELPERS)
    factory = relay.build(mod)
    with PassContext(opt_level=0):
        unfused = relay.build(mod)
    assert nodes_calling(unfused, "__nop")
    x = RNG.standard_normal((2, 3)).astype("float32")
    y = RNG.standard_normal((3, 2)).astype("float32")
    expected = relay.create_executor("debug", mod).evaluate()(x, y)
    for f in (factory, unfused):
        module = graph_module(f)
        module.run(x=x, y=y)
        assert module.get_num_outputs() == 4
        outputs = [module.get_output(i) for i in range(4)]
        for got, want in zip(outputs, [expected[0], *expected[1], expected[2]]):
            np.testing.assert_allclose(got, want, rtol=1e-6)


def test_graph_executor_kind_rebuilds_nested_tuples():
    mod = relay.fromtext(HELPERS)
    x = RNG.standard_normal((2, 3)).astype("float32")
    y = RNG.standard_normal((3, 2)).astype("float32")
    got = relay.create_executor("graph", mod).evaluate()(x, y)
    want = relay.create_executor("debug", mod).evaluate()(x, y)
    assert isinstance(got, tuple) and isinstance(got[1], tuple) and len(got[1]) == 2
    np.testing.assert_allclose(got[1][1], want[1][1], rtol=1e-6)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-6)


def test_storage_is_reused_once_a_value_is_dead():
    x = relay.var("x", shape=(4, 4))
    body = x
    for _ in range(10):
        body = relay.sin(body) * x  # x stays live to the end; each product dies at once
    mod = relay.IRModule.from_expr(relay.Function([x], body))
    with PassContext(opt_level=0):
        factory = relay.build(mod)
    graph = json.loads(factory.get_graph_json())
    storage = graph["attrs"]["storage_id"][1]
    assert len(set(storage)) <= 4 < len(storage)
    module = graph_module(factory)
    value = RNG.standard_normal((4, 4)).astype("float32")
    module.run(x=value)
    want = value
    for _ in range(10):
        want = np.sin(want) * value
    np.testing.assert_allclose(module.get_output(0), want, rtol=1e-5)


def test_same_module_builds_the_same_graph():
    a = relay.build(relay.fromtext(MLP), params=weights())
    b = relay.build(relay.fromtext(MLP), params=weights())
    assert a.get_graph_json() == b.get_graph_json()


def test_build_takes_a_function_and_a_module_name():
    x = relay.var("x", shape=(3,))
    factory = relay.build(relay.Function([x], relay.negative(x)), mod_name="model")
    module = GraphModule(factory["model"](vm.cpu()))
    module.run(x=np.arange(3, dtype="float32"))
    np.testing.assert_array_equal(module.get_output(0), -np.arange(3, dtype="float32"))


# ---- invalid --------------------------------------------------------------------------------


def test_control_flow_is_rejected_naming_the_construct():
    mod = relay.fromtext(
        "def @main(%c: bool, %x: Tensor[(2), float32]) { if (%c) { %x } else { -%x } }"
    )
    with pytest.raises(ValueError, match="it uses an if"):
        relay.build(mod)


def test_dynamic_shapes_are_rejected_pointing_to_the_vm():
    mod = relay.fromtext("def @main(%x: Tensor[(?, 2), float32]) { exp(%x) }")
    with pytest.raises(GraphCodegenError, match=r"parameter 'x'.*Tensor\[\(\?, 2\).*vm.compile"):
        relay.build(mod)


def test_tuple_inputs_are_rejected():
    mod = relay.fromtext(
        "def @main(%t: (Tensor[(2), float32], Tensor[(2), float32])) { %t.0 + %t.1 }"
    )
    with pytest.raises(GraphCodegenError, match=r"parameter 't'.*tensors of static shape"):
        relay.build(mod)


def test_build_takes_tvms_positional_order_and_records_the_target_string():
    params = weights()
    target = "llvm -mcpu=skylake -mattr=+avx2"
    factory = relay.build(relay.fromtext(MLP), target, "llvm", "graph", "cpp", params, "net")
    assert factory.target == target
    assert factory.libmod_name == "net"
    module = GraphModule(factory["net"](vm.cpu()))
    x = RNG.standard_normal((2, 8)).astype("float32")
    module.run(x=x)
    want = relay.create_executor("debug", relay.fromtext(MLP), params=params).evaluate()(x)
    np.testing.assert_allclose(module.get_output(0), want, rtol=1e-5, atol=1e-6)


def test_build_accepts_tvms_executor_and_runtime_objects_by_their_name():
    class Named:
        def __init__(self, name):
            self.name = name

    factory = relay.build(relay.fromtext(MLP), executor=Named("graph"), runtime=Named("crt"))
    assert factory.target == "cpu"


def test_build_refuses_executors_and_runtimes_it_lacks_naming_what_to_use():
    with pytest.raises(ValueError, match="graph and AOT executor factories, not executor 'c'"):
        relay.build(relay.fromtext(MLP), executor="c")
    with pytest.raises(ValueError, match="unknown runtime 'wasm'"):
        relay.build(relay.fromtext(MLP), runtime="wasm")
    with pytest.raises(TypeError, match="executor must be a str"):
        relay.build(relay.fromtext(MLP), executor=3)


def test_bad_arguments_are_rejected():
    with pytest.raises(TypeError, match="IRModule or a Function"):
        relay.build("def @main() { 1 }")
    with pytest.raises(
        ValueError, match="cuda device: relayvm generates code for the host CPU only"
    ):
        relay.build(relay.fromtext(MLP), target="cuda")
    with pytest.raises(ValueError, match="mod_name"):
        relay.build(relay.fromtext(MLP), mod_name="")
