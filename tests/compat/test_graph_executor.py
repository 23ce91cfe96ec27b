"""TVM's graph executor scripts, written from TVM's documentation, with only the imports changed.

Returns: the ``GraphModule`` docstring flow (``relay.build``, ``export_library``,
``load_module``, ``lib["default"](dev)``), ``graph_executor.create``, ``share_params``,
``debug_get_output``, ``module.module.time_evaluator``, ``load_params``.
"""

from __future__ import annotations

import numpy as np

from compiler import tvm
from compiler.tvm import relay
from compiler.tvm.contrib import graph_executor

RNG = np.random.default_rng(0)


def mlp():
    data = relay.var("data", shape=(1, 8))
    w1 = relay.var("w1", shape=(16, 8))
    w2 = relay.var("w2", shape=(4, 16))
    hidden = relay.nn.relu(relay.nn.dense(data, w1))
    out = relay.nn.softmax(relay.nn.dense(hidden, w2))
    mod = tvm.IRModule.from_expr(relay.Function([data, w1, w2], out))
    params = {
        "w1": RNG.standard_normal((16, 8)).astype("float32"),
        "w2": RNG.standard_normal((4, 16)).astype("float32"),
    }
    return mod, params


def reference(mod, params, data):
    return relay.create_executor("debug", mod, params=params).evaluate()(data)


def test_graph_module_docstring_flow(tmp_path):
    mod, params = mlp()
    dev = tvm.cpu()
    data = RNG.standard_normal((1, 8)).astype("float32")
    # build the library using graph executor
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm", params=params)
    lib.export_library(str(tmp_path / "compiled_lib.so"))
    # load it back as a runtime
    lib = tvm.runtime.load_module(str(tmp_path / "compiled_lib.so"))
    # Call the library factory function for default and create
    # a new runtime.Module, wrap with graph module.
    gmod = graph_executor.GraphModule(lib["default"](dev))
    # use the graph module.
    gmod.set_input("data", data)
    gmod.run()
    out = gmod.get_output(0)
    np.testing.assert_allclose(out, reference(mod, params, data), rtol=1e-5, atol=1e-6)
    assert gmod.get_num_outputs() == 1
    assert gmod.get_input_index("data") == 0
    assert gmod.get_input_index("missing") == -1
    assert gmod.get_device() == dev


def test_graph_executor_create_with_json_lib_and_params():
    mod, params = mlp()
    dev = tvm.device("cpu", 0)
    lib = relay.build(mod, "llvm", params=params)
    graph, lib_module, built_params = lib.get_graph_json(), lib.get_lib(), lib.get_params()
    module = graph_executor.create(graph, lib_module, dev)
    module.load_params(tvm.runtime.save_param_dict(built_params))
    data = RNG.standard_normal((1, 8)).astype("float32")
    module.set_input("data", data)
    module["run"]()
    np.testing.assert_allclose(
        module.get_output(0), reference(mod, params, data), rtol=1e-5, atol=1e-6
    )


def test_share_params_debug_get_output_and_time_evaluator():
    mod, params = mlp()
    dev = tvm.cpu()
    lib = relay.build(mod, target="llvm", params=params)
    gmod1 = graph_executor.GraphModule(lib["default"](dev))
    gmod2 = graph_executor.GraphModule(lib["default"](dev))
    gmod2.share_params(gmod1, tvm.runtime.save_param_dict(lib.get_params()))
    data = RNG.standard_normal((1, 8)).astype("float32")
    gmod2.set_input("data", data)
    gmod2.run()
    np.testing.assert_allclose(
        gmod2.get_output(0), reference(mod, params, data), rtol=1e-5, atol=1e-6
    )
    first_node = gmod2.debug_get_output(0, np.empty((1, 8), "float32"))
    np.testing.assert_array_equal(first_node, data)
    ftimer = gmod2.module.time_evaluator("run", dev, number=1, repeat=3)
    prof_res = np.array(ftimer().results) * 1000  # milliseconds
    assert prof_res.shape == (3,) and (prof_res > 0).all()
